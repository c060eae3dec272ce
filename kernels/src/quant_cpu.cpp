// Stored-format weights on the CPU (quant.h): which kernel runs. What the CPU has, the level FOCAL_QUANT_ISA and
// set_quant_isa allow, and the kernels of the type's QTypeInfo row (quant_types.h) decide: for decode the
// hand-written AVX-512 VNNI and AVX2 kernels (quant_avx512.cpp, quant_avx2.cpp), else the generic kernel
// (quant_generic.cpp); for prefill the blocked product of quant_gemm.cpp where the CPU has AVX2 (unless
// FOCAL_BLOCKED_PREFILL=0), else the generic dequantisation of panels of rows, multiplied through sgemm.
#include "focal_kernels/quant.h"

#include <cblas.h>
#include <cpuid.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "focal_kernels/ops.h"
#include "parallel_for.h"
#include "quant_digits.h"
#include "quant_types.h"

namespace focal::ops {

// OpenBLAS's kernels are chosen when the library loads, before any sgemm (blas_core.cpp).
[[maybe_unused]] const char* const g_blas_core = blas_core();

// ---- the facts of a type ----

int qtype_block_elems(int t) {
  const QTypeInfo* q = qtype_info(t);
  return q ? q->block_values : 0;
}

int qtype_block_bytes(int t) {
  const QTypeInfo* q = qtype_info(t);
  return q ? q->block_bytes : 0;
}

// ---- what the CPU has ----

namespace {

bool has_f16c() {  // CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports does not know "f16c")
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}

}  // namespace

bool cpu_has_avx2() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  return ok;
}

bool cpu_has_avx512_vnni() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                         __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma");
  return ok;
}

namespace {

// FOCAL_QUANT_ISA=generic|avx2|avx512 caps the level from the start (benchmarks); anything else: all the CPU has.
QuantIsa isa_from_env() {
  const char* e = std::getenv("FOCAL_QUANT_ISA");
  if (e && !std::strcmp(e, "generic")) return QuantIsa::kGeneric;
  if (e && !std::strcmp(e, "avx2")) return QuantIsa::kAvx2;
  return QuantIsa::kAvx512;
}

std::atomic<QuantIsa> g_isa{isa_from_env()};
// Prefill through quant_gemm.cpp's blocked product (quant.h) unless FOCAL_BLOCKED_PREFILL=0 (or set_blocked_prefill).
std::atomic<bool> g_blocked_prefill{std::getenv("FOCAL_BLOCKED_PREFILL") == nullptr ||
                                    std::strcmp(std::getenv("FOCAL_BLOCKED_PREFILL"), "0") != 0};

// ---- which kernel runs ----

// The kernels the CPU and the level allow for type q (m rows of x; row-major matrices): vnni, else digits_avx2 (one
// row of x), else avx2 (any m up to kFusedMaxRows); all null: the generic kernel.
struct Kernels {
  DigitRowsFn vnni = nullptr, digits_avx2 = nullptr;
  RowsFn avx2 = nullptr;
};

Kernels kernels_for(const QTypeInfo& q, int m, QuantIsa isa) {
  Kernels k;
  if (m == 1 && isa >= QuantIsa::kAvx512 && cpu_has_avx512_vnni()) k.vnni = q.vnni_rows;
  if (k.vnni || isa < QuantIsa::kAvx2 || !cpu_has_avx2()) return k;
  if (m == 1) k.digits_avx2 = q.avx2_digit_rows;
  if (!k.digits_avx2 && q.avx2_rows) k.avx2 = q.avx2_rows(m);
  return k;
}

void fused(const float* x, const QMatrix& w, float* y, int m) {
  const int64_t rows = w.rows;
  const QTypeInfo& q = *qtype_info(w.type);
  const QuantIsa isa = g_isa.load(std::memory_order_relaxed);
  const Kernels k = kernels_for(q, m, isa);
  // decode (one row of x) with integer digits of x (quant_digits.h)
  const DigitRowsFn digit_rows = k.vnni ? k.vnni : k.digits_avx2;
  thread_local digits::XDigits xd;
  if (digit_rows) digits::split(x, w.cols, q.digit_group, q.digit_order, isa >= QuantIsa::kAvx512, &xd);
  const RowsFn fn = k.avx2;   // x in fp32
  std::vector<float> xsum16;  // [m, cols / 16] sums of x, for the mins
  if (fn && q.has_min) {
    const int64_t n16 = w.cols / 16;
    xsum16.resize((size_t)m * n16);
    for (int i = 0; i < m; ++i)
      for (int64_t j = 0; j < n16; ++j) {
        float s = 0.0f;
        for (int l = 0; l < 16; ++l) s += x[(size_t)i * w.cols + j * 16 + l];
        xsum16[(size_t)i * n16 + j] = s;
      }
  }
  constexpr int64_t kChunk = 16;  // rows per scheduling unit
  const int64_t n_chunks = (rows + kChunk - 1) / kChunk;
  const bool par = rows * w.cols >= (1 << 16);
  const digits::XDigits* xdp = &xd;  // the calling thread's buffer, read by every thread
  parallel_for(n_chunks, par, [&](int64_t ch) {
    const int64_t r0 = ch * kChunk, r1 = std::min(rows, r0 + kChunk);
    if (digit_rows)
      digit_rows(*xdp, w, y, r0, r1);
    else if (fn)
      fn(x, xsum16.data(), w, y, r0, r1);
    else
      generic_rows(x, w, y, m, r0, r1);
  });
}

}  // namespace

void dequant_blocks(int type, const uint8_t* src, float* dst, int64_t n) {
  const QTypeInfo* q = qtype_info(type);
  if (!q) return;
  const int be = q->block_values, bb = q->block_bytes;
  const int64_t nb = n / be;
  constexpr int64_t kSpan = 4096;  // blocks per parallel unit
  if (nb <= kSpan) {
    q->dequant(src, dst, n);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < (nb + kSpan - 1) / kSpan; ++s) {
    const int64_t b0 = s * kSpan, b1 = std::min(nb, b0 + kSpan);
    q->dequant(src + b0 * bb, dst + b0 * be, (b1 - b0) * be);
  }
}

void dequant_rows(const QMatrix& w, int64_t r0, int64_t nr, float* dst) {
  const bool par = nr * w.cols >= (1 << 16);
  const DequantFn dequant = qtype_info(w.type)->dequant;
  if (w.panels) {  // straight from the panels (quant_panels.cpp)
    dequant_panel_rows(w, r0, nr, dst);
    return;
  }
  parallel_for(nr, par, [&](int64_t r) { dequant(w.row(r0 + r), dst + (size_t)r * w.cols, w.cols); });
}

namespace {

bool vnni_level() { return g_isa.load(std::memory_order_relaxed) >= QuantIsa::kAvx512 && cpu_has_avx512_vnni(); }

// The kernel that reads `type`'s panels for one row of x at the current level: VNNI's, else AVX2's; null: none.
PanelRowsFn panel_kernel(int type) {
  const QTypeInfo* q = qtype_info(type);
  if (!q) return nullptr;
  if (q->panel_rows && vnni_level()) return q->panel_rows;
  if (q->avx2_panel_rows && g_isa.load(std::memory_order_relaxed) >= QuantIsa::kAvx2 && cpu_has_avx2())
    return q->avx2_panel_rows;
  return nullptr;
}

bool panel_kernel_runs(const QMatrix& w, int m) { return w.panels && m == 1 && panel_kernel(w.type); }

// ys[i] = ws[i] x for n panel matrices of the same cols and block size: x split once, the panels of all of them in
// one parallel region (one fork and join for Q, K and V).
void panel_matvecs(const float* x, const QMatrix* const* ws, float* const* ys, int n) {
  thread_local digits::XDigits xd;
  digits::split(x, ws[0]->cols, qtype_info(ws[0]->type)->block_values, digits::Order::kNatural, vnni_level(), &xd);
  PanelRowsFn fn[3] = {nullptr, nullptr, nullptr};
  bool wide = false;  // a kernel that reads x's digits as int16 (Q8_0's AVX2 panels)
  for (int i = 0; i < n; ++i) {
    fn[i] = panel_kernel(ws[i]->type);
    wide |= fn[i] == &panels_q8_avx2;
  }
  if (wide) digits::widen16(ws[0]->cols, &xd);
  const digits::XDigits* xdp = &xd;  // the calling thread's buffer, read by every thread
  int64_t first[4] = {0, 0, 0, 0};   // first global panel of each matrix (n <= 3)
  for (int i = 0; i < n; ++i) first[i + 1] = first[i] + ws[i]->rows / kPanelRows;
  const int64_t total = first[n];
  parallel_for(total, total * kPanelRows * ws[0]->cols >= (1 << 16), [&](int64_t g) {
    int i = 0;
    while (g >= first[i + 1]) ++i;
    fn[i](*xdp, *ws[i], ys[i], g - first[i], g - first[i] + 1);
  });
}

}  // namespace

void matmul_xwt_q(const float* x, const QMatrix& w, float* y, int m) {
  if (m <= 0 || w.rows <= 0) return;
  if (panel_kernel_runs(w, m)) {
    const QMatrix* ws[1] = {&w};
    panel_matvecs(x, ws, &y, 1);
    return;
  }
  if (m <= kFusedMaxRows && !w.panels) {  // panels with more rows (or a lower ISA level): the sgemm path below
    fused(x, w, y, m);
    return;
  }
  const QuantIsa isa = g_isa.load(std::memory_order_relaxed);
  if (g_blocked_prefill.load(std::memory_order_relaxed) && qgemm_runs(w, m, isa)) {  // the default (quant.h)
    qgemm(x, w, y, m, isa);
    return;
  }
  // Prefill elsewhere (the generic level, the 16-bit rows): panels of w's rows dequantised into a per-thread fp32 tile,
  // each multiplied with sgemm into its column block of y (ldc = rows).
  constexpr size_t kTileFloats = (size_t)2 << 20;  // 8 MiB
  thread_local std::vector<float> tile;
  const int64_t k = w.cols;
  const int64_t panel = std::max<int64_t>(16, std::min<int64_t>(w.rows, (int64_t)(kTileFloats / (size_t)k)));
  if (tile.size() < (size_t)(panel * k)) tile.resize((size_t)(panel * k));
  for (int64_t p0 = 0; p0 < w.rows; p0 += panel) {
    const int64_t np = std::min(panel, w.rows - p0);
    dequant_rows(w, p0, np, tile.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, (int)np, (int)k, 1.0f, x, (int)k, tile.data(), (int)k, 0.0f,
                y + p0, (int)w.rows);
  }
}

void matmul_xwt_q_shared(const float* x, const QMatrix* const* ws, float* const* ys, int n, int m) {
  bool together = n >= 1 && n <= 3;
  for (int i = 0; i < n && together; ++i)
    together = panel_kernel_runs(*ws[i], m) && ws[i]->cols == ws[0]->cols &&
               qtype_info(ws[i]->type)->block_values == qtype_info(ws[0]->type)->block_values;
  if (together) {
    panel_matvecs(x, ws, ys, n);
    return;
  }
  for (int i = 0; i < n; ++i) matmul_xwt_q(x, *ws[i], ys[i], m);
}

NonFiniteScan scan_nonfinite_stored(int type, const uint8_t* src, int64_t n_blocks) {
  const QTypeInfo* q = qtype_info(type);
  if (!q || q->nonfinite_at[0] < 0) return {};
  const int bb = q->block_bytes, offs[2] = {q->nonfinite_at[0], q->nonfinite_at[1]};
  const uint16_t exp_mask = q->inf_exp;
  int64_t count = 0, first = n_blocks;
#pragma omp parallel for schedule(static) reduction(+ : count) reduction(min : first) if (n_blocks > 65536)
  for (int64_t i = 0; i < n_blocks; ++i) {
    bool bad = false;
    for (int f = 0; f < 2; ++f) {
      if (offs[f] < 0) continue;
      uint16_t v;
      std::memcpy(&v, src + i * bb + offs[f], 2);
      bad |= (v & exp_mask) == exp_mask;
    }
    if (bad) {
      ++count;
      first = std::min(first, i);
    }
  }
  NonFiniteScan r;
  r.count = count;
  r.first_block = count ? first : 0;
  return r;
}

const char* qtype_kernel(int type, int m) {  // row-major matrices (panels: panel_kernel for m = 1)
  const QTypeInfo* q = qtype_info(type);
  if (!q) return "generic";
  if (m > kFusedMaxRows) {  // as qgemm_runs / qgemm decide for a matrix of whole 32-value blocks
    QMatrix probe;
    probe.type = type;
    probe.cols = 256;
    if (!g_blocked_prefill.load() || !qgemm_runs(probe, m, g_isa.load())) return "sgemm";
    return g_isa.load() >= QuantIsa::kAvx512 && cpu_has_avx512_vnni() ? "blocked-avx512" : "blocked-avx2";
  }
  const Kernels k = kernels_for(*q, m, g_isa.load());
  return k.vnni ? "avx512-vnni" : k.digits_avx2 || k.avx2 ? "avx2" : "generic";
}

void set_quant_isa(QuantIsa most) { g_isa.store(most); }
void set_blocked_prefill(bool on) { g_blocked_prefill.store(on); }
bool blocked_prefill() { return g_blocked_prefill.load(); }

namespace {
std::atomic<int64_t> g_held_bytes{0};
int64_t last_level_cache_bytes() {
  static const int64_t bytes = [] {
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    return l3 > 0 ? (int64_t)l3 : (int64_t)32 << 20;  // unknown: a Zen 4 CCD's 32 MiB
  }();
  return bytes;
}
}  // namespace

void note_held_weight_bytes(int64_t delta) { g_held_bytes.fetch_add(delta, std::memory_order_relaxed); }

namespace {
bool cpu_is_amd_zen5_or_later() {  // CPUID leaf 0's vendor, leaf 1's family (base + extended): 0x1A is Zen 5
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541u || d != 0x69746e65u || c != 0x444d4163u) return false;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const unsigned base = (a >> 8) & 0xF, ext = (a >> 20) & 0xFF;
  return (base == 0xF ? base + ext : base) >= 0x1A;
}

// FOCAL_DECODE_PREFETCH=BYTES (decimal, at most 1 MiB): every streamed distance, for measuring another CPU; anything
// else: unset.
int64_t streamed_prefetch_from_env() {
  const char* e = std::getenv("FOCAL_DECODE_PREFETCH");
  if (!e || !*e || std::strspn(e, "0123456789") != std::strlen(e) || std::strlen(e) > 7) return -1;
  const int64_t v = std::atoll(e);
  return v <= (1 << 20) ? v : -1;
}
}  // namespace

size_t decode_prefetch_ahead(size_t resident, bool k_formats) {
  if (g_held_bytes.load(std::memory_order_relaxed) <= last_level_cache_bytes()) return resident;
  static const int64_t from_env = streamed_prefetch_from_env();
  if (from_env >= 0) return (size_t)from_env;
  static const bool zen5 = cpu_is_amd_zen5_or_later();
  return k_formats && zen5 ? 8192 : 2048;
}

bool panels_pay_off(int type, int64_t rows) {  // a kernel exists and FOCAL_QUANT_ISA / set_quant_isa allow it
  return rows > 0 && rows % kPanelRows == 0 && panel_kernel(type) != nullptr;
}

}  // namespace focal::ops
