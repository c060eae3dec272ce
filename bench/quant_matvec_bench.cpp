// The decode matrix-vector product alone (ops::matmul_xwt_q, one row of x) on random K-quant or Q8_0 weights (Q2_K ..
// Q6_K, Q8_0: --type) of Llama-3-8B's layer shapes, against a plain read of the same bytes: how close the kernel runs
// to the memory's speed, without the rest of a forward. The weights of --layers layers (122.6 MB each as Q4_K) are
// streamed in a decode's order (q, k, v, o, gate, up, down per layer), so nothing is served from cache once the set is
// larger than the last-level cache.
// Threads: OMP_NUM_THREADS. FOCAL_QUANT_ISA=generic|avx2|avx512 caps the kernel as in weights_bench.
// Results: docs/performance.md (issue 14).
#include <fcntl.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "focal_kernels/quant.h"

using namespace focal;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

const char* kUsage =
    "usage: quant_matvec_bench [--type q2_k|q3_k|q4_k|q5_k|q6_k|q8_0|q4_0|q4_1] [--layers N] [--reps R] [--mmap FILE]\n"
    "                          [--resident ROWS] [--rows-as-stored]\n"
    "Times the decode product (one row of x) of --type (default q4_k) over N layers of Llama-3-8B's matrices\n"
    "(default 8: 0.98 GB as Q4_K) and a plain read of the same bytes, best of R passes (default 5). Prints GB/s of\n"
    "weights for both and their ratio, and the tokens/s those rates would give for the 32-layer model's matrices\n"
    "(with the output matrix; 4.5 GB as Q4_K).\n"
    "--mmap FILE: the weights are written to FILE and read through a read-only memory map of it, as a GGUF is.\n"
    "--resident ROWS: instead, one ROWS x 4096 matrix multiplied over and over (256 rows: 0.6 MB as Q4_K, held in a\n"
    "  core's L2): the kernel's compute rate, without memory's; and a plain read of the same bytes as often (a matrix\n"
    "  of tens of MB: the L3's read rate).\n"
    "--rows-as-stored: keep the matrices in the file's row layout; by default they are re-laid out in panels as a\n"
    "  model held in memory is (ops::pack_panels), where the type and the kernel level have a panel kernel.\n"
    "Threads: OMP_NUM_THREADS; FOCAL_QUANT_ISA=generic|avx2|avx512 caps the kernel.\n";

struct Shape {
  const char* name;
  int64_t rows, cols;
};
constexpr Shape kLayer[] = {{"q", 4096, 4096},     {"k", 1024, 4096},   {"v", 1024, 4096},    {"o", 4096, 4096},
                            {"gate", 14336, 4096}, {"up", 14336, 4096}, {"down", 4096, 14336}};
int block_bytes(int type) { return ops::qtype_block_bytes(type); }
int64_t block_values(int type) { return ops::qtype_block_elems(type); }  // 256, or 32 (Q8_0)

// Random blocks with d and dmin of moderate size (fp16 0.01 and 0.005), so every product stays finite.
void fill_blocks(int type, uint8_t* p, int64_t n_blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  const int bb = block_bytes(type);
  // where d and dmin (-1: none) sit in a block
  const int d_at = type == ops::kQ6_K ? 208 : type == ops::kQ3_K ? 108 : type == ops::kQ2_K ? 80 : 0;
  const int dmin_at =
      type == ops::kQ6_K || type == ops::kQ3_K || type == ops::kQ8_0 || type == ops::kQ4_0 ? -1 : d_at + 2;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* blk = p + b * bb;
    for (int i = 0; i + 1 < bb; i += 2) {
      const uint32_t v = rng();
      std::memcpy(blk + i, &v, 2);
    }
    const uint16_t d = 0x211F, dmin = 0x1D1F;
    std::memcpy(blk + d_at, &d, 2);
    if (dmin_at >= 0) std::memcpy(blk + dmin_at, &dmin, 2);
  }
}

// Sum of every 64-bit word of [p, p + n): a read the compiler cannot drop, vectorised, on every thread.
uint64_t read_all(const uint8_t* p, size_t n) {
  const auto* w = reinterpret_cast<const uint64_t*>(p);
  const int64_t words = (int64_t)(n / 8);
  uint64_t s = 0;
#pragma omp parallel for schedule(static) reduction(+ : s)
  for (int64_t i = 0; i < words; ++i) s += w[i];
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int layers = 8, reps = 5, type = ops::kQ4_K, resident = 0;
  bool rows_as_stored = false;
  std::string map_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help") {
      std::printf("%s", kUsage);
      return 0;
    }
    if ((a == "--layers" || a == "--reps" || a == "--resident") && i + 1 < argc) {
      const int v = std::atoi(argv[++i]);
      if (v < 1) {
        std::fprintf(stderr, "quant_matvec_bench: %s needs a positive number, not '%s'\n", a.c_str(), argv[i]);
        return 2;
      }
      (a == "--layers" ? layers : a == "--reps" ? reps : resident) = v;
    } else if (a == "--type" && i + 1 < argc) {
      const std::string t = argv[++i];
      type = t == "q2_k"   ? ops::kQ2_K
             : t == "q3_k" ? ops::kQ3_K
             : t == "q4_k" ? ops::kQ4_K
             : t == "q5_k" ? ops::kQ5_K
             : t == "q6_k" ? ops::kQ6_K
             : t == "q8_0" ? ops::kQ8_0
             : t == "q4_0" ? ops::kQ4_0
             : t == "q4_1" ? ops::kQ4_1
                           : -1;
      if (type < 0) {
        std::fprintf(stderr,
                     "quant_matvec_bench: --type %s is not one of q2_k, q3_k, q4_k, q5_k, q6_k, q8_0, q4_0, q4_1\n",
                     t.c_str());
        return 2;
      }
    } else if (a == "--rows-as-stored") {
      rows_as_stored = true;
    } else if (a == "--mmap" && i + 1 < argc) {
      map_path = argv[++i];
    } else {
      std::fprintf(stderr, "quant_matvec_bench: unknown argument '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (resident && !map_path.empty()) {
    std::fprintf(stderr, "quant_matvec_bench: --resident and --mmap exclude each other\n");
    return 2;
  }
  if (!map_path.empty())
    rows_as_stored = true;  // a mapped file is read as stored (the CPU backend packs only held
                            // weights)
  if (const char* isa = std::getenv("FOCAL_QUANT_ISA")) {  // the kernels read it themselves; a typo is refused here
    const std::string s = isa;
    if (s != "generic" && s != "avx2" && s != "avx512") {
      std::fprintf(stderr, "quant_matvec_bench: FOCAL_QUANT_ISA='%s' is not one of generic, avx2, avx512\n", isa);
      return 2;
    }
  }
  std::vector<float> x(14336), y((size_t)std::max(14336, resident));  // x: the widest matrix's columns
  {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (float& v : x) v = nd(rng);
  }
  const char* name = type == ops::kQ2_K   ? "Q2_K"
                     : type == ops::kQ3_K ? "Q3_K"
                     : type == ops::kQ4_K ? "Q4_K"
                     : type == ops::kQ5_K ? "Q5_K"
                     : type == ops::kQ6_K ? "Q6_K"
                     : type == ops::kQ4_0 ? "Q4_0"
                     : type == ops::kQ4_1 ? "Q4_1"
                                          : "Q8_0";
  if (resident) {  // one small matrix, multiplied until ~0.2 GB of weights have passed, best of --reps
    ops::QMatrix m;
    m.type = type;
    m.rows = resident;
    m.cols = 4096;
    m.row_bytes = (size_t)(m.cols / block_values(type)) * block_bytes(type);
    const size_t bytes = (size_t)m.rows * m.row_bytes;
    std::vector<uint8_t> w(bytes);
    fill_blocks(type, w.data(), m.rows * (m.cols / block_values(type)), 1);
    m.data = w.data();
    std::vector<uint8_t> packed;
    if (!rows_as_stored && ops::panels_pay_off(type, m.rows)) {
      packed.resize(bytes);
      ops::pack_panels(m, packed.data());
      m.data = packed.data();
      m.panels = true;
    }
    ops::note_held_weight_bytes((int64_t)bytes);  // a model that fits the cache: the resident prefetch distance
    const int inner = (int)std::max<size_t>(1, ((size_t)200 << 20) / bytes);
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now();
      for (int i = 0; i < inner; ++i) ops::matmul_xwt_q(x.data(), m, y.data(), 1);
      best = std::min(best, now() - t0);
    }
    std::printf("quant_matvec_bench: one %d x 4096 matrix as %s (%.2f MB, resident), %d threads, kernel %s%s\n",
                resident, name, bytes / 1e6, omp_get_max_threads(), ops::qtype_kernel(type, 1),
                m.panels ? " (panels)" : "");
    double best_r = 1e30;  // a plain read of the same bytes, as often: the cache's own rate
    uint64_t sink = 0;
    for (int r = 0; r < reps; ++r) {
      const double t0 = now();
      for (int i = 0; i < inner; ++i) sink += read_all(m.data, bytes);
      best_r = std::min(best_r, now() - t0);
    }
    std::printf("kernel   %6.2f GB/s of weights   (checksum %g)\n", bytes * (double)inner / best / 1e9, (double)y[0]);
    std::printf("read     %6.2f GB/s              (checksum %llu)\n", bytes * (double)inner / best_r / 1e9,
                (unsigned long long)(sink & 0xFF));
    return 0;
  }
  // one buffer for all the weights, matrices back to back in decode order
  std::vector<ops::QMatrix> mats;
  const int bb = block_bytes(type);
  size_t total = 0;
  for (int l = 0; l < layers; ++l)
    for (const Shape& s : kLayer) total += (size_t)(s.rows * (s.cols / block_values(type)) * bb);
  auto* buf = static_cast<uint8_t*>(std::aligned_alloc(4096, (total + 4095) / 4096 * 4096));
  if (!buf) {
    std::fprintf(stderr, "quant_matvec_bench: cannot allocate %.2f GB of weights\n", total / 1e9);
    return 1;
  }
  size_t at = 0;
  for (int l = 0; l < layers; ++l)
    for (const Shape& s : kLayer) {
      ops::QMatrix m;
      m.type = type;
      m.rows = s.rows;
      m.cols = s.cols;
      m.row_bytes = (size_t)(s.cols / block_values(type)) * bb;
      m.data = buf + at;
      fill_blocks(type, buf + at, s.rows * (s.cols / block_values(type)), (uint32_t)(1000 * l + m.rows + m.cols));
      at += (size_t)s.rows * m.row_bytes;
      mats.push_back(m);
    }
  if (!map_path.empty()) {  // the same bytes, through a file's page-cache mapping
    const int fd = open(map_path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    size_t done = 0;
    while (fd >= 0 && done < total) {  // write() moves at most ~2 GB per call
      const ssize_t n = write(fd, buf + done, total - done);
      if (n <= 0) break;
      done += (size_t)n;
    }
    if (fd < 0 || done != total) {
      std::fprintf(stderr, "quant_matvec_bench: cannot write %s\n", map_path.c_str());
      return 1;
    }
    auto* mapped = static_cast<uint8_t*>(mmap(nullptr, total, PROT_READ, MAP_PRIVATE, fd, 0));
    close(fd);
    if (mapped == MAP_FAILED) {
      std::fprintf(stderr, "quant_matvec_bench: cannot map %s\n", map_path.c_str());
      return 1;
    }
    for (ops::QMatrix& m : mats) m.data = mapped + (m.data - buf);
    std::free(buf);
    buf = mapped;
  }
  bool panels = false;
  if (!rows_as_stored && ops::panels_pay_off(type, 1024)) {  // every shape's rows are a multiple of 16
    auto* packed = static_cast<uint8_t*>(std::aligned_alloc(4096, (total + 4095) / 4096 * 4096));
    if (!packed) {
      std::fprintf(stderr, "quant_matvec_bench: cannot allocate %.2f GB for the panels\n", total / 1e9);
      return 1;
    }
    for (ops::QMatrix& m : mats) {
      ops::pack_panels(m, packed + (m.data - buf));
      m.data = packed + (m.data - buf);
      m.panels = true;
    }
    std::free(buf);
    buf = packed;
    panels = true;
  }
  // Held as the CPU backend holds a model's matrices: the decode kernels' prefetch distance follows (quant.h).
  ops::note_held_weight_bytes((int64_t)total);
  std::printf("quant_matvec_bench: %d layers of Llama-3-8B's matrices as %s, %.3f GB, %d threads, kernel %s%s\n",
              layers, name, total / 1e9, omp_get_max_threads(), ops::qtype_kernel(type, 1), panels ? " (panels)" : "");
  double best_k = 1e30, best_r = 1e30;
  uint64_t sink = 0;
  for (int r = 0; r < reps; ++r) {  // the two alternate, so drift on a shared machine hits both alike
    double t0 = now();
    for (const ops::QMatrix& m : mats) ops::matmul_xwt_q(x.data(), m, y.data(), 1);
    best_k = std::min(best_k, now() - t0);
    t0 = now();
    sink += read_all(buf, total);
    best_r = std::min(best_r, now() - t0);
  }
  const double model_bytes =
      32.0 * total / layers + 128256.0 * 4096.0 / (double)block_values(type) * bb;  // + the output
  std::printf("kernel   %7.3f s  %6.2f GB/s  -> %5.2f tokens/s for the 8B model's matrices\n", best_k,
              total / best_k / 1e9, total / best_k / model_bytes);
  std::printf("read     %7.3f s  %6.2f GB/s  -> %5.2f tokens/s\n", best_r, total / best_r / 1e9,
              total / best_r / model_bytes);
  std::printf("kernel / read: %.2f   (checksums %llu %g)\n", best_r / best_k, (unsigned long long)(sink & 0xFF),
              (double)y[0]);
  if (map_path.empty()) std::free(buf);
  return 0;
}
