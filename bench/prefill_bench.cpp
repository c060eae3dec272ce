// Prefill benchmark of the CPU runtime: tokens/s without capture, with all-head metrics, and with full capture
// (metrics for every head + probabilities and scores of selected heads); the projection GEMM rate inside the
// forward against OpenBLAS sgemm on the same shapes in the same run. Results: docs/performance.md.
#include <omp.h>

#include <algorithm>
#include <chrono>
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
  SelectObserver(int layer, int n_heads_sel, int T, bool rows)
      : layer_(layer),
        nh_(n_heads_sel),
        T_(T),
        rows_(rows),
        probs_(rows ? (size_t)nh_ * T * T : 0),
        raw_(rows ? (size_t)nh_ * T * T : 0) {}
  bool wants_metrics() const override { return true; }
  bool wants_rows(int l, int h) const override { return rows_ && l == layer_ && h < nh_; }
  void on_rows(int, int h, int row0, int n_rows, int stride, const float* p, const float* r) override {
    for (int i = 0; i < n_rows; ++i) {
      std::copy(p + (size_t)i * stride, p + (size_t)i * stride + row0 + i + 1,
                &probs_[((size_t)h * T_ + row0 + i) * T_]);
      std::copy(r + (size_t)i * stride, r + (size_t)i * stride + row0 + i + 1, &raw_[((size_t)h * T_ + row0 + i) * T_]);
    }
  }
  void on_layer(const LayerRecord& rec) override {
    sink_ += rec.metrics[kSinkMass];  // touch the metrics like a consumer would
  }
  double sink_ = 0;

 private:
  int layer_, nh_, T_;
  bool rows_;
  std::vector<float> probs_, raw_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::printf(
        "usage: prefill_bench MODEL [T,T,...] [reps] [capture_heads]\n\nMODEL: a model directory or a "
        ".gguf file. Prefill tokens/s (median of reps) with no capture, all-head metrics, and full capture "
        "(metrics + probs/scores of capture_heads (default 4) heads of the middle layer); projection GEMM GFLOP/s in "
        "the forward vs standalone OpenBLAS sgemm. Threads: "
        "OMP_NUM_THREADS.\n");
    return argc < 2 ? 2 : 0;
  }
  auto model = Model::load(argv[1]);
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
  std::printf("model %s: %.2fM params, hidden %d, %d layers, %d/%d heads, threads %d\n", argv[1],
              model->n_params() / 1e6, c.hidden, c.n_layers, c.n_heads, c.n_kv_heads, omp_get_max_threads());
  std::printf("%6s %14s %14s %14s %10s %10s %14s %14s %8s\n", "T", "plain_tok/s", "metrics_tok/s", "capture_tok/s",
              "ovh_metr", "ovh_capt", "proj_GFLOP/s", "sgemm_GFLOP/s", "ratio");
  const TempSpec spec = TempSpec::native(c);
  for (int T : Ts) {
    if (T > c.max_positions) continue;
    std::vector<int32_t> ids(T);
    for (int i = 0; i < T; ++i) ids[i] = (int32_t)((i * 7919 + 13) % c.vocab_size);
    auto time_run = [&](int mode, ops::MatmulStats* st) {
      std::vector<double> ts;
      for (int r = 0; r < reps + 1; ++r) {
        Session s(*model, T);
        SelectObserver obs(c.n_layers / 2, std::min(capture_heads, c.n_heads), T, mode == 2);
        std::vector<float> logits;
        if (st) ops::set_matmul_profiling(true);
        const double t0 = now();
        s.forward(ids.data(), T, spec, RunOptions{}, mode ? &obs : nullptr, &logits);
        const double el = now() - t0;
        if (st) {
          *st = ops::matmul_stats();
          ops::set_matmul_profiling(false);
        }
        if (r) ts.push_back(el);  // first run is warm-up
      }
      return median(ts);
    };
    ops::MatmulStats st;
    const double t_plain = time_run(0, &st);
    const double t_metrics = time_run(1, nullptr);
    const double t_capture = time_run(2, nullptr);
    const double proj_rate = st.flops / st.seconds / 1e9;
    // Standalone OpenBLAS sgemm on the largest projection shape ([T, hidden] x [intermediate, hidden]^T).
    std::vector<float> x((size_t)T * c.hidden, 0.01f), w((size_t)c.intermediate * c.hidden, 0.02f),
        y((size_t)T * c.intermediate);
    std::vector<double> gs;
    for (int r = 0; r < reps + 1; ++r) {
      const double t0 = now();
      ops::matmul_xwt(x.data(), w.data(), y.data(), T, c.intermediate, c.hidden);
      if (r) gs.push_back(now() - t0);
    }
    const double sgemm_rate = 2.0 * T * c.intermediate * c.hidden / median(gs) / 1e9;
    std::printf("%6d %14.0f %14.0f %14.0f %9.1f%% %9.1f%% %14.1f %14.1f %7.0f%%\n", T, T / t_plain, T / t_metrics,
                T / t_capture, 100.0 * (t_metrics / t_plain - 1), 100.0 * (t_capture / t_plain - 1), proj_rate,
                sgemm_rate, 100.0 * proj_rate / sgemm_rate);
    std::fflush(stdout);
  }
  return 0;
}
