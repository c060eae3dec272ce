// Training-step benchmark of the CPU trainer: full steps exactly as runtime/src/train/trainer.cpp does them
// (sequences in parallel through focal::loss_and_grad into per-thread Grads, ordered reduction, global-norm clip,
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

using namespace focal;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The optimizer hyper-parameters of TrainConfig's defaults (trainer.h); constant learning rate here (the
// trainer's lr_at is a scalar function per step and costs nothing).
struct Hyper {
  float lr = 3e-3f, beta1 = 0.9f, beta2 = 0.95f, adam_eps = 1e-8f, weight_decay = 0.05f, grad_clip = 1.0f;
};

struct StepStats {
  double loss = 0.0, gnorm = 0.0;
};

// One training step; the body is a copy of the step in focal::train (trainer.cpp) minus logging, evaluation and
// checkpoints. `step` is the 0-based step index used by the bias correction.
class Stepper {
 public:
  Stepper(Model& model, int n_threads) : model_(model), n_threads_(n_threads) {
    for (int t = 0; t < n_threads_; ++t) tgrads_.push_back(make_grads(model_));
    grads_ = make_grads(model_);
    for (const ParamRef& p : model_.weights().params) {
      m_.emplace_back(p.size, 0.0f);
      v_.emplace_back(p.size, 0.0f);
    }
  }

  StepStats step(const std::vector<std::vector<int32_t>>& batch, const TempSpec& spec, int step, const Hyper& hp) {
    const auto& params = model_.weights().params;
    double n_total = 0.0;
    for (const auto& s : batch) n_total += (double)s.size() - 1;
    std::vector<double> seq_loss(batch.size(), 0.0);
    for (Grads& g : tgrads_) g.zero();
#pragma omp parallel for schedule(static)
    for (int b = 0; b < (int)batch.size(); ++b)
      seq_loss[b] = loss_and_grad(model_, batch[b].data(), (int)batch[b].size(), spec, n_total,
                                  tgrads_[omp_get_thread_num()]);
    double loss = 0.0;
    for (double l : seq_loss) loss += l;
    loss /= n_total;
    const double lr = hp.lr;
    double sq = 0.0;
    for (size_t p = 0; p < params.size(); ++p) {
      float* g = grads_.g[p].data();
      const int64_t n = (int64_t)params[p].size;
#pragma omp parallel for schedule(static) reduction(+ : sq)
      for (int64_t i = 0; i < n; ++i) {
        float acc = 0.0f;
        for (int t = 0; t < n_threads_; ++t) acc += tgrads_[t].g[p][i];
        g[i] = acc;
        sq += (double)acc * acc;
      }
    }
    const double gnorm = std::sqrt(sq);
    const double clip = gnorm > hp.grad_clip ? hp.grad_clip / gnorm : 1.0;
    const double bc1 = 1.0 - std::pow((double)hp.beta1, step + 1), bc2 = 1.0 - std::pow((double)hp.beta2, step + 1);
    for (size_t p = 0; p < params.size(); ++p) {
      float* w = params[p].data;
      float* m = m_[p].data();
      float* v = v_[p].data();
      const float* g = grads_.g[p].data();
      const float wd = params[p].decay ? hp.weight_decay : 0.0f;
      const int64_t n = (int64_t)params[p].size;
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        const float gi = (float)(g[i] * clip);
        m[i] = hp.beta1 * m[i] + (1.0f - hp.beta1) * gi;
        v[i] = hp.beta2 * v[i] + (1.0f - hp.beta2) * gi * gi;
        const double upd = (m[i] / bc1) / (std::sqrt(v[i] / bc2) + hp.adam_eps);
        w[i] = (float)(w[i] - lr * (upd + wd * w[i]));
      }
    }
    return {loss, gnorm};
  }

 private:
  Model& model_;
  int n_threads_;
  std::vector<Grads> tgrads_;
  Grads grads_;
  std::vector<std::vector<float>> m_, v_;
};

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
    if (a == "--batch") B = std::atoi(val().c_str());
    else if (a == "--seq-len") T = std::atoi(val().c_str());
    else if (a == "--steps") steps = std::atoi(val().c_str());
    else if (a == "--threads") threads = std::atoi(val().c_str());
    else if (a == "--modes") modes_arg = val();
    else if (a == "--seed") seed = std::strtoull(val().c_str(), nullptr, 10);
    else if (a == "--tokens-file") tokens_file = val();
    else if (a == "--check-steps") check_steps = std::atoi(val().c_str());
    else if (a == "--json") json_path = val();
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
  const Hyper hp;

  if (!tokens_file.empty()) {
    // Numerical check against pytorch_train.py: same weights, same fixed batch, native attention.
    const auto batch = read_tokens(tokens_file, B, T, c.vocab_size);
    const TempSpec spec = TempSpec::native(c);
    Stepper st(*model, n_threads);
    std::printf("check: %s, attention %s, batch %d, seq_len %d, threads %d\n", dir.c_str(), spec.label().c_str(), B,
                T, n_threads);
    for (int s = 0; s < check_steps; ++s) {
      const StepStats r = st.step(batch, spec, s, hp);
      std::printf("step %d  loss %.7f  grad_norm %.7f\n", s, r.loss, r.gnorm);
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

  std::printf("model %s: %.2fM params, vocab %d, hidden %d, %d layers, %d/%d heads, intermediate %d; batch %d, "
              "seq_len %d, threads %d, %d warm-up + %d timed steps\n",
              dir.c_str(), model->n_params() / 1e6, c.vocab_size, c.hidden, c.n_layers, c.n_heads, c.n_kv_heads,
              c.intermediate, B, T, n_threads, 2, steps);
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
    Stepper st(*model, n_threads);
    std::mt19937_64 rng(seed);
    std::vector<double> times;
    double last_loss = 0.0;
    for (int s = 0; s < 2 + steps; ++s) {
      const double t0 = now();
      const auto batch = random_batch(rng, B, T, c.vocab_size);
      const StepStats r = st.step(batch, m.spec, s, hp);
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
  std::printf("%-9s %-12s %12s %10s %10s %14s %10s\n", "mode", "spec", "median_ms", "min_ms", "max_ms",
              "pred_tok/s", "last_loss");
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
      std::fprintf(f, "%s\n  {\"mode\": \"%s\", \"batch\": %d, \"seq_len\": %d, \"threads\": %d, \"steps\": %d, "
                      "\"median_s\": %.6f, \"tokens_per_s\": %.2f}",
                   i ? "," : "", rows[i].mode.c_str(), B, T, n_threads, steps, rows[i].med, rows[i].tok_s);
    std::fprintf(f, "\n]\n");
    std::fclose(f);
  }
  return 0;
}
