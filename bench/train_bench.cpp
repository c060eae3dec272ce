// Training-step benchmark of the CPU trainer: full steps through the trainer's own TrainStepper
// (runtime/src/train/step.h: sequences in parallel through loss_and_grad, ordered reduction, global-norm clip,
// AdamW), timed per attention mode. The peer is bench/pytorch_train.py; bench/run_train.sh runs both.
// Results: docs/performance.md.
//
// Tokens/s counts predicted tokens: batch * (seq_len - 1) per step (the trainer's own progress line counts
// batch * seq_len).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "focal/model.h"
#include "model_internal.h"
#include "train/backward.h"
#include "train/step.h"

using namespace focal;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The trainer's defaults (trainer.h) with a constant learning rate (the trainer's lr_at is a scalar per step).
constexpr double kLr = 3e-3;

std::vector<std::vector<int32_t>> random_batch(std::mt19937_64& rng, int B, int T, int vocab) {
  std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
  std::vector<std::vector<int32_t>> batch(B, std::vector<int32_t>(T));
  for (auto& s : batch)
    for (auto& t : s) t = tok(rng);
  return batch;
}

std::vector<std::vector<int32_t>> read_tokens(const std::string& path, int B, int T, int vocab) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "train_bench: cannot open --tokens-file '%s'\n", path.c_str());
    std::exit(2);
  }
  std::vector<int32_t> all((size_t)B * T);
  f.read(reinterpret_cast<char*>(all.data()), (std::streamsize)(all.size() * sizeof(int32_t)));
  if (f.gcount() != (std::streamsize)(all.size() * sizeof(int32_t))) {
    std::fprintf(stderr, "train_bench: '%s' holds fewer than batch*seq_len = %d int32 tokens\n", path.c_str(), B * T);
    std::exit(2);
  }
  std::vector<std::vector<int32_t>> batch(B);
  for (int b = 0; b < B; ++b) {
    batch[b].assign(all.begin() + (size_t)b * T, all.begin() + (size_t)(b + 1) * T);
    for (int32_t t : batch[b])
      if (t < 0 || t >= vocab) {
        std::fprintf(stderr, "train_bench: token %d out of range [0, %d)\n", t, vocab);
        std::exit(2);
      }
  }
  return batch;
}

const char* kHelp = R"(usage: train_bench MODEL_DIR [--batch B] [--seq-len T] [--steps N] [--threads N] [--modes LIST]
                   [--tokens-file F --check-steps K] [--json FILE]

Times full CPU training steps exactly as `focal train` runs them (loss_and_grad per sequence in an OpenMP
loop into per-thread gradients, reduction, global-norm clip 1.0, AdamW lr 3e-3 betas 0.9/0.95 wd 0.05) on random
token batches: 2 warm-up steps, then the median of N timed steps, for each attention mode (standard, focal with
the config's focal_temp or 0.4, and learned when the model has tau weights). Tokens/s = batch*(seq_len-1)
predicted tokens per step / median step time. Threads: --threads or OMP_NUM_THREADS.

  --batch B          sequences per step (default 8)
  --seq-len T        tokens per sequence (default 256)
  --steps N          timed steps per mode (default 5)
  --modes LIST       comma list of standard,focal,learned (default: all that apply)
  --seed S           token seed (default 0)
  --tokens-file F    check mode: batch*seq_len int32 little-endian token ids (row-major [batch, seq_len]); runs
                     K = --check-steps (default 3) steps on this fixed batch under the model's native attention and
                     prints loss and gradient norm (before clipping) of each, for comparison with pytorch_train.py
  --json FILE        write the results as JSON
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::printf("%s", kHelp);
    return argc < 2 ? 2 : 0;
  }
  const std::string dir = argv[1];
  int B = 8, T = 256, steps = 5, check_steps = 3, threads = 0;
  uint64_t seed = 0;
  std::string modes_arg, tokens_file, json_path;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "train_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--batch")
      B = std::atoi(val().c_str());
    else if (a == "--seq-len")
      T = std::atoi(val().c_str());
    else if (a == "--steps")
      steps = std::atoi(val().c_str());
    else if (a == "--threads")
      threads = std::atoi(val().c_str());
    else if (a == "--modes")
      modes_arg = val();
    else if (a == "--seed")
      seed = std::strtoull(val().c_str(), nullptr, 10);
    else if (a == "--tokens-file")
      tokens_file = val();
    else if (a == "--check-steps")
      check_steps = std::atoi(val().c_str());
    else if (a == "--json")
      json_path = val();
    else {
      std::fprintf(stderr, "train_bench: unknown option '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (B < 1 || T < 2 || steps < 1 || check_steps < 1) {
    std::fprintf(stderr, "train_bench: --batch >= 1, --seq-len >= 2, --steps >= 1 required\n");
    return 2;
  }
  if (threads > 0) omp_set_num_threads(threads);
  const int n_threads = omp_get_max_threads();

  auto model = Model::load(dir);
  const ModelConfig& c = model->config();
  if (T > c.max_positions) {
    std::fprintf(stderr, "train_bench: --seq-len %d exceeds the model's context %d\n", T, c.max_positions);
    return 2;
  }
  const AdamWParams hp;

  if (!tokens_file.empty()) {
    // Numerical check against pytorch_train.py: same weights, same fixed batch, native attention.
    const auto batch = read_tokens(tokens_file, B, T, c.vocab_size);
    const TempSpec spec = TempSpec::native(c);
    TrainStepper st(*model, n_threads);
    std::printf("check: %s, attention %s, batch %d, seq_len %d, threads %d\n", dir.c_str(), spec.label().c_str(), B, T,
                n_threads);
    for (int s = 0; s < check_steps; ++s) {
      const StepResult r = st.step(batch, spec, s, kLr, hp);
      std::printf("step %d  loss %.7f  grad_norm %.7f\n", s, r.loss, r.grad_norm);
    }
    return 0;
  }

  struct ModeRun {
    std::string name;
    TempSpec spec;
  };
  std::vector<ModeRun> all;
  all.push_back({"standard", TempSpec::standard()});
  all.push_back({"focal", TempSpec::focal(c.focal.mode == AttnMode::kFocal ? c.focal.focal_temp : 0.4f)});
  if (c.focal.has_tau) {
    TempSpec s;
    s.mode = AttnMode::kLearned;
    all.push_back({"learned", s});
  }
  std::vector<ModeRun> runs;
  for (const ModeRun& m : all)
    if (modes_arg.empty() || ("," + modes_arg + ",").find("," + m.name + ",") != std::string::npos) runs.push_back(m);
  if (runs.empty()) {
    std::fprintf(stderr, "train_bench: --modes '%s' selects nothing this model supports\n", modes_arg.c_str());
    return 2;
  }

  std::printf(
      "model %s: %.2fM params, vocab %d, hidden %d, %d layers, %d/%d heads, intermediate %d; batch %d, "
      "seq_len %d, threads %d, %d warm-up + %d timed steps\n",
      dir.c_str(), model->n_params() / 1e6, c.vocab_size, c.hidden, c.n_layers, c.n_heads, c.n_kv_heads, c.intermediate,
      B, T, n_threads, 2, steps);
  const double tokens = (double)B * (T - 1);
  struct Row {
    std::string mode, label;
    double med, mn, mx, tok_s, loss;
  };
  std::vector<Row> rows;
  // Copy of the initial weights so each mode starts from the same point.
  std::vector<std::vector<float>> w0;
  for (const ParamRef& p : model->weights().params) w0.emplace_back(p.data, p.data + p.size);
  for (const ModeRun& m : runs) {
    const auto& params = model->weights().params;
    for (size_t p = 0; p < params.size(); ++p) std::copy(w0[p].begin(), w0[p].end(), params[p].data);
    TrainStepper st(*model, n_threads);
    std::mt19937_64 rng(seed);
    std::vector<double> times;
    double last_loss = 0.0;
    for (int s = 0; s < 2 + steps; ++s) {
      const double t0 = now();
      const auto batch = random_batch(rng, B, T, c.vocab_size);
      const StepResult r = st.step(batch, m.spec, s, kLr, hp);
      const double dt = now() - t0;
      last_loss = r.loss;
      if (!std::isfinite(r.loss)) {
        std::fprintf(stderr, "train_bench: non-finite loss in mode %s\n", m.name.c_str());
        return 1;
      }
      if (s >= 2) times.push_back(dt);
    }
    const double med = median(times);
    rows.push_back({m.name, m.spec.label(), med, *std::min_element(times.begin(), times.end()),
                    *std::max_element(times.begin(), times.end()), tokens / med, last_loss});
  }
  std::printf("%-9s %-12s %12s %10s %10s %14s %10s\n", "mode", "spec", "median_ms", "min_ms", "max_ms", "pred_tok/s",
              "last_loss");
  for (const Row& r : rows)
    std::printf("%-9s %-12s %12.1f %10.1f %10.1f %14.1f %10.4f\n", r.mode.c_str(), r.label.c_str(), r.med * 1e3,
                r.mn * 1e3, r.mx * 1e3, r.tok_s, r.loss);
  if (!json_path.empty()) {
    std::FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "train_bench: cannot write '%s'\n", json_path.c_str());
      return 1;
    }
    std::fprintf(f, "[");
    for (size_t i = 0; i < rows.size(); ++i)
      std::fprintf(f,
                   "%s\n  {\"mode\": \"%s\", \"batch\": %d, \"seq_len\": %d, \"threads\": %d, \"steps\": %d, "
                   "\"median_s\": %.6f, \"tokens_per_s\": %.2f}",
                   i ? "," : "", rows[i].mode.c_str(), B, T, n_threads, steps, rows[i].med, rows[i].tok_s);
    std::fprintf(f, "\n]\n");
    std::fclose(f);
  }
  return 0;
}
