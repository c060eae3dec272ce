// Load time, held weight bytes, prefill and decode tokens/s of one model in one weights mode (native or fp32), the
// way llama-bench measures them: prefill = one forward of T tokens from an empty cache (last row's logits); decode =
// N forwards of one token each from an empty cache, each producing its logits. Median of --reps runs. One line of
// `key=value` results per measurement on stdout (bench/llamacpp/compare.sh reads them). Results: docs/performance.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "focal/error.h"
#include "focal/model.h"

using namespace focal;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    const char* c = std::strchr(p, ',');
    if (!c) break;
    p = c + 1;
  }
  return v;
}

const char* kUsage =
    "usage: weights_bench MODEL [--weights native|fp32] [--mmap] [--prefill T1,T2,..] [--decode N] [--depth D]\n"
    "                     [--reps R]\n"
    "Load seconds, weight bytes held, prefill tokens/s at each T (default 512,2048) and decode tokens/s over N\n"
    "(default 64) one-token steps, each the median of R runs (default 3). --depth D: each decode run starts after\n"
    "an untimed prefill of D tokens (llama-bench's -d; default 0). --mmap maps a GGUF file instead of\n"
    "reading it into memory (Model::load's default). Threads: OMP_NUM_THREADS.\n"
    "FOCAL_QUANT_ISA=generic|avx2|avx512 caps the native kernels' instruction set (default: all the CPU has).\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help")) {
    std::printf("%s", kUsage);
    return argc < 2 ? 2 : 0;
  }
  if (const char* isa = std::getenv("FOCAL_QUANT_ISA")) {
    if (std::strcmp(isa, "generic") != 0 && std::strcmp(isa, "avx2") != 0 && std::strcmp(isa, "avx512") != 0) {
      std::fprintf(stderr, "weights_bench: FOCAL_QUANT_ISA='%s' is not one of generic, avx2, avx512\n", isa);
      return 2;
    }
  }
  LoadOptions lo;
  std::vector<int> prefill = {512, 2048};
  int decode = 64, reps = 3, depth = 0;
  for (int i = 2; i < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--mmap") {  // a flag: no value
      lo.map_weights = true;
      --i;
    } else if (i + 1 == argc) {
      std::fprintf(stderr, "weights_bench: option '%s' needs a value\n%s", k.c_str(), kUsage);
      return 2;
    } else if (k == "--weights") {
      lo.weights = parse_weights_mode(argv[i + 1]);
    } else if (k == "--prefill") {
      prefill = parse_list(argv[i + 1]);
    } else if (k == "--decode") {
      decode = std::atoi(argv[i + 1]);
    } else if (k == "--depth") {
      depth = std::max(0, std::atoi(argv[i + 1]));
    } else if (k == "--reps") {
      reps = std::max(1, std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr, "weights_bench: unknown option '%s'\n%s", k.c_str(), kUsage);
      return 2;
    }
  }
  try {
    const double t0 = now();
    auto model = Model::load(argv[1], Device::kCpu, lo);
    const double load_s = now() - t0;
    const ModelConfig& c = model->config();
    std::printf("load_s=%.3f weights=%s weight_bytes=%zu params=%zu\ncpu_gemm=%s\n", load_s,
                weights_mode_name(model->weights_mode()), model->weight_bytes(), model->n_params(), cpu_gemm_kernels());
    std::fflush(stdout);
    int max_t = decode > 0 ? depth + decode : 0;
    for (int T : prefill) max_t = std::max(max_t, T);
    if (max_t <= 0) return 0;  // open only
    Session s(*model, max_t);
    RunOptions opt;
    opt.all_logits = false;
    std::vector<float> logits;
    std::vector<int32_t> ids((size_t)max_t);
    for (int i = 0; i < max_t; ++i) ids[(size_t)i] = (int32_t)((i * 7919 + 13) % c.vocab_size);
    for (int T : prefill) {
      if (T <= 0) continue;
      std::vector<double> runs;
      for (int r = 0; r < reps; ++r) {
        s.reset();
        const double a = now();
        s.forward(ids.data(), T, TempSpec(), opt, nullptr, &logits);
        runs.push_back(now() - a);
      }
      std::printf("prefill T=%d tokens_per_s=%.2f\n", T, T / median(runs));
      std::fflush(stdout);
    }
    if (decode > 0) {
      std::vector<double> runs;
      for (int r = 0; r < reps; ++r) {
        s.reset();
        if (depth > 0) s.forward(ids.data(), depth, TempSpec(), opt, nullptr, &logits);
        const double a = now();
        for (int i = 0; i < decode; ++i) s.forward(ids.data() + depth + i, 1, TempSpec(), opt, nullptr, &logits);
        runs.push_back(now() - a);
      }
      if (depth > 0)
        std::printf("decode N=%d depth=%d tokens_per_s=%.2f\n", decode, depth, decode / median(runs));
      else
        std::printf("decode N=%d tokens_per_s=%.2f\n", decode, decode / median(runs));
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "weights_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
