// Prefill benchmark of the CPU runtime: tokens/s without capture, with all-head metrics, and with full capture
// (metrics for every head + probabilities and scores of selected heads); the projection GEMM rate inside the
// forward against OpenBLAS sgemm on the same shapes in the same run; the rest of the forward (attention above all)
// against the time its causal attention FLOPs take at that sgemm rate. Results: docs/performance.md.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "focal/capture.h"
#include "focal/model.h"
#include "focal_kernels/ops.h"

using namespace focal;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Stores probabilities and raw scores of a few heads of one layer, like `focal capture --layers L --heads ..`.
class SelectObserver : public ForwardObserver {
 public:
  SelectObserver(int layer, int n_heads_sel, int T, bool rows, bool metrics)
      : metrics_(metrics),
        layer_(layer),
        nh_(n_heads_sel),
        T_(T),
        rows_(rows),
        probs_(rows ? (size_t)nh_ * T * T : 0),
        raw_(rows ? (size_t)nh_ * T * T : 0),
        targets_((size_t)T, 1) {}
  bool wants_metrics() const override { return metrics_; }
  bool wants_rows(int l, int h) const override { return rows_ && l == layer_ && h < nh_; }
  void on_rows(int, int h, int row0, int n_rows, int stride, const float* p, const float* r) override {
    for (int i = 0; i < n_rows; ++i) {
      std::copy(p + (size_t)i * stride, p + (size_t)i * stride + row0 + i + 1,
                &probs_[((size_t)h * T_ + row0 + i) * T_]);
      std::copy(r + (size_t)i * stride, r + (size_t)i * stride + row0 + i + 1, &raw_[((size_t)h * T_ + row0 + i) * T_]);
    }
  }
  void on_layer(const LayerRecord& rec) override {
    if (rec.metrics) sink_ += rec.metrics[kSinkMass];  // touch the metrics like a consumer would
  }
  // Every row's next-token statistics (10 most likely tokens, the loss), as `focal capture` takes them for its
  // next-token columns (from logits in blocks of rows, not a [T, vocab] vector: 1.6 GB at T = 8192 for SmolLM2).
  int next_token_k() const override { return 10; }
  const int32_t* next_token_targets() const override { return targets_.data(); }
  void on_next_tokens(int, int, const float* lse, const int32_t*, const float*, const float*) override {
    sink_ += lse[0];
  }
  double sink_ = 0;

 private:
  bool metrics_;
  int layer_, nh_, T_;
  bool rows_;
  std::vector<float> probs_, raw_;
  std::vector<int32_t> targets_;  // [T] a next token for every row
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::printf(
        "usage: prefill_bench MODEL [T,T,...] [reps] [capture_heads] [modes] [weights]\n\nMODEL: a model directory or "
        "a "
        ".gguf file. Prefill tokens/s (median of reps after one warm-up; reps 0: one run, no warm-up) with no "
        "capture (plain), all-head metrics (metrics), and full capture (capture: metrics + probs/scores of "
        "capture_heads (default 4) heads of the middle layer); every mode takes every row's logits in blocks, as "
        "`focal capture` does (the output head counts as a projection); modes: a comma list of those (default all "
        "three). "
        "Projection GEMM GFLOP/s in the forward vs standalone OpenBLAS sgemm, and the rest of each forward (attention "
        "with its softmax and metrics, norms, RoPE) against the time the causal attention's FLOPs take at the sgemm "
        "rate (projections of weights kept quantized do not go through the profiled sgemm: weights fp32 loads them "
        "widened, so the split is measured). Rotary models run past their context (a long-context measurement). "
        "Threads: OMP_NUM_THREADS.\n");
    return argc < 2 ? 2 : 0;
  }
  LoadOptions lo;
  if (argc > 6) lo.weights = parse_weights_mode(argv[6]);
  auto model = Model::load(argv[1], Device::kCpu, lo);
  const ModelConfig& c = model->config();
  std::vector<int> Ts = {256, 1024, 2048};
  if (argc > 2) {
    Ts.clear();
    std::string s = argv[2];
    size_t p = 0;
    while (p < s.size()) {
      size_t q = s.find(',', p);
      if (q == std::string::npos) q = s.size();
      Ts.push_back(std::atoi(s.substr(p, q - p).c_str()));
      p = q + 1;
    }
  }
  const int reps = argc > 3 ? std::atoi(argv[3]) : 3;
  const int capture_heads = argc > 4 ? std::atoi(argv[4]) : 4;
  const std::string modes = argc > 5 ? argv[5] : "plain,metrics,capture";
  const bool run_mode[3] = {modes.find("plain") != std::string::npos, modes.find("metrics") != std::string::npos,
                            modes.find("capture") != std::string::npos};
  std::printf("model %s: %.2fM params, hidden %d, %d layers, %d/%d heads, threads %d\n", argv[1],
              model->n_params() / 1e6, c.hidden, c.n_layers, c.n_heads, c.n_kv_heads, omp_get_max_threads());
  std::printf("%6s %14s %14s %14s %10s %10s %14s %14s %8s %10s\n", "T", "plain_tok/s", "metrics_tok/s", "capture_tok/s",
              "ovh_metr", "ovh_capt", "proj_GFLOP/s", "sgemm_GFLOP/s", "ratio", "rest/attn");
  const TempSpec spec = TempSpec::native(c);
  for (int T : Ts) {
    if (T > c.max_positions && c.arch.position == PositionKind::kLearned) continue;
    std::vector<int32_t> ids(T);
    for (int i = 0; i < T; ++i) ids[i] = (int32_t)((i * 7919 + 13) % c.vocab_size);
    // Median seconds of a mode's forwards, and the projection GEMMs' FLOPs and seconds of its last one.
    auto time_run = [&](int mode, ops::MatmulStats* st) {
      std::vector<double> ts;
      for (int r = 0; r < std::max(1, reps + 1); ++r) {
        Session s(*model, T, /*prefill_only=*/true);
        // Every mode takes every row's logits in blocks through the observer, as `focal capture` does.
        SelectObserver obs(c.n_layers / 2, std::min(capture_heads, c.n_heads), T, mode == 2, mode > 0);
        ops::set_matmul_profiling(true);
        const double t0 = now();
        s.forward(ids.data(), T, spec, RunOptions{}, &obs, nullptr);
        const double el = now() - t0;
        *st = ops::matmul_stats();
        ops::set_matmul_profiling(false);
        if (r || reps == 0) ts.push_back(el);  // the first run is a warm-up unless reps is 0
      }
      return median(ts);
    };
    double t[3] = {0, 0, 0};
    ops::MatmulStats st[3];
    for (int mode = 0; mode < 3; ++mode)
      if (run_mode[mode]) t[mode] = time_run(mode, &st[mode]);
    const int first = run_mode[0] ? 0 : run_mode[1] ? 1 : 2;
    const double proj_rate = st[first].flops / st[first].seconds / 1e9;
    // Standalone OpenBLAS sgemm on the largest projection shape ([T, hidden] x [intermediate, hidden]^T).
    std::vector<float> x((size_t)T * c.hidden, 0.01f), w((size_t)c.intermediate * c.hidden, 0.02f),
        y((size_t)T * c.intermediate);
    std::vector<double> gs;
    for (int r = 0; r < std::max(2, reps + 1); ++r) {
      const double t0 = now();
      ops::matmul_xwt(x.data(), w.data(), y.data(), T, c.intermediate, c.hidden);
      if (r) gs.push_back(now() - t0);
    }
    const double sgemm_rate = 2.0 * T * c.intermediate * c.hidden / median(gs) / 1e9;
    // Causal attention: q.k and p.v over T (T + 1) / 2 (query, key) pairs per head, 2 FLOPs per multiply-add.
    const double attn_flops = 4.0 * c.n_layers * c.n_heads * c.d_head * ((double)T * (T + 1) / 2);
    const int last = run_mode[1] ? 1 : first;  // the metrics run when there is one (a capture's forward)
    const double rest_s = t[last] - st[last].seconds;
    auto rate = [&](int m) { return run_mode[m] ? std::to_string((int)std::lround(T / t[m])) : std::string("-"); };
    auto ovh = [&](int m) {
      if (!run_mode[0] || !run_mode[m]) return std::string("-");
      char b[32];
      std::snprintf(b, sizeof b, "%.1f%%", 100.0 * (t[m] / t[0] - 1));
      return std::string(b);
    };
    std::printf("%6d %14s %14s %14s %10s %10s %14.1f %14.1f %7.0f%% %9.2fx\n", T, rate(0).c_str(), rate(1).c_str(),
                rate(2).c_str(), ovh(1).c_str(), ovh(2).c_str(), proj_rate, sgemm_rate, 100.0 * proj_rate / sgemm_rate,
                rest_s / (attn_flops / (sgemm_rate * 1e9)));
    std::printf(
        "       %s run: %.1f s, of which projections %.1f s; the rest %.1f s against %.1f s for the causal "
        "attention's %.3g GFLOP at the sgemm rate\n",
        last == 1   ? "metrics"
        : last == 0 ? "plain"
                    : "capture",
        t[last], st[last].seconds, rest_s, attn_flops / (sgemm_rate * 1e9), attn_flops / 1e9);
    std::fflush(stdout);
  }
  return 0;
}
