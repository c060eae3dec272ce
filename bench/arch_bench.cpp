// Prefill tokens/s of models of different architectures but the same size (bench/make_arch_models.py), measured
// in one process with the repetitions interleaved (A B C A B C ...), so machine noise hits every model alike and the
// ratios to the first model are what to read. Results: docs/performance.md.
//   arch_bench T REPS DIR1 [DIR2 ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "focal/model.h"

using namespace focal;

int main(int argc, char** argv) {
  if (argc < 4 || std::string(argv[1]) == "--help") {
    std::printf(
        "usage: arch_bench T REPS MODEL_DIR...\n\nTimes Session::forward (plain prefill, no observer) of T random "
        "tokens on each model, REPS rounds interleaved across the models, and prints the median tokens/s and the "
        "ratio to the first model.\n");
    return argc < 4 ? 2 : 0;
  }
  const int T = std::atoi(argv[1]), reps = std::atoi(argv[2]);
  if (T <= 0 || reps <= 0) {
    std::fprintf(stderr, "arch_bench: T and REPS must be positive\n");
    return 2;
  }
  std::vector<std::unique_ptr<Model>> models;
  std::vector<std::string> names;
  for (int i = 3; i < argc; ++i) {
    models.push_back(Model::load(argv[i]));
    names.push_back(models.back()->config().arch.name);
  }
  std::mt19937 rng(1);
  std::vector<std::vector<double>> secs(models.size());
  for (int r = -1; r < reps; ++r) {  // round -1 warms up
    for (size_t m = 0; m < models.size(); ++m) {
      std::vector<int32_t> ids(T);
      for (auto& t : ids) t = (int32_t)(rng() % (unsigned)models[m]->config().vocab_size);
      Session s(*models[m], T);
      RunOptions opt;
      opt.all_logits = false;
      std::vector<float> logits;
      const auto t0 = std::chrono::steady_clock::now();
      s.forward(ids.data(), T, TempSpec::focal(0.4f), opt, nullptr, &logits);
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r >= 0) secs[m].push_back(dt);
    }
    if (r >= 0) std::fprintf(stderr, "\rround %d/%d", r + 1, reps);
  }
  std::fprintf(stderr, "\n");
  // Median and best round: other processes on a shared machine only ever slow a round down, so the best-round
  // ratio is the less noisy of the two.
  double base = 0, base_best = 0;
  std::printf("%-8s %10s %12s %8s %12s %8s %8s\n", "arch", "params", "tok/s med", "ratio", "tok/s best", "ratio",
              "spread");
  for (size_t m = 0; m < models.size(); ++m) {
    std::vector<double> v = secs[m];
    std::sort(v.begin(), v.end());
    const double med = v[v.size() / 2], tps = T / med, best = T / v.front();
    if (m == 0) base = tps, base_best = best;
    std::printf("%-8s %9.2fM %12.1f %8.3f %12.1f %8.3f %7.1f%%\n", names[m].c_str(), models[m]->n_params() / 1e6, tps,
                tps / base, best, best / base_best, 100.0 * (v.back() - v.front()) / med);
  }
  return 0;
}
