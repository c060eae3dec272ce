// One calibration step (forward with the tape + frozen-weight backward to every log t) against a plain forward of
// the same tokens, on any model: the ratio issue 34 bounds (<= 3x), and the peak RSS. Not a test: timings depend on
// the machine and its load.
//   calibrate_bench MODEL [T=1024] [reps=3] [fp32|native] [model|layer|head|tau-proj]
// The plain forward runs under the same setting as the step (t per head, or the learned tau's projections).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "focal/model.h"
#include "train/calib_grad.h"

using namespace focal;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: calibrate_bench MODEL [T=1024] [reps=3] [fp32|native] [model|layer|head|tau-proj]\n");
    return 2;
  }
  const int T = argc > 2 ? std::atoi(argv[2]) : 1024;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 3;
  LoadOptions lo;
  lo.weights = argc > 4 ? parse_weights_mode(argv[4]) : WeightsMode::kNative;
  auto model = Model::load(argv[1], Device::kCpu, lo);
  const ModelConfig& c = model->config();
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<int> u(0, c.vocab_size - 1);
  std::vector<int32_t> ids(T);
  for (int32_t& i : ids) i = u(rng);
  const CalibGranularity g = parse_calib_granularity(argc > 5 ? argv[5] : "head", "granularity");
  TempParams p = TempParams::uniform(g, c, 1.0);
  const TempSpec spec = p.spec();
  using clk = std::chrono::steady_clock;
  double fwd = 1e30, step = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = clk::now();
    {
      Session s(*model, T);
      std::vector<float> logits;
      s.forward(ids.data(), T, spec, RunOptions{}, nullptr, &logits);
    }
    fwd = std::min(fwd, std::chrono::duration<double>(clk::now() - t0).count());
    t0 = clk::now();
    std::vector<double> g(p.theta.size(), 0.0);
    calib_loss_and_grad(*model, ids.data(), T, p, T - 1.0, g);
    step = std::min(step, std::chrono::duration<double>(clk::now() - t0).count());
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf(
      "%s  T=%d  weights %s  granularity %s  threads %s\nforward %.3f s   calibration step %.3f s   ratio %.2fx   peak "
      "RSS %.2f GiB\n",
      argv[1], T, weights_mode_name(model->weights_mode()), calib_granularity_name(g),
      std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "(default)", fwd, step, step / fwd,
      ru.ru_maxrss / 1048576.0);
  return 0;
}
