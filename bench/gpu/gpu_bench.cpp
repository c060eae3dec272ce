// GPU benchmark of the CUDA backend, ready for a machine with a device (bench/gpu/device-check.sh runs it there):
//   1. prefill tokens/s of Session::forward on the CUDA backend at several T, per precision (exact, fast): plain,
//      all-head metrics, capture (metrics + probabilities / scores of 4 heads of the middle layer through cuBLAS +
//      the fused softmax + pinned copies) and, with --capture-layer, every head of the middle layer stored (the
//      issue's 8B capture); the CPU backend's plain rate at the smallest T as the named peer (not with --no-cpu);
//   2. with --accuracy T: fast against exact on one prompt of T random tokens (--accuracy-text FILE: the file's first
//      T tokens, for a pretrained model such as SmolLM2): the largest difference in the middle layer's attention
//      rows, in the per-row metrics, the mean next-token NLL of each, and the greedy agreement over 64 generated
//      tokens;
//   3. memory-bound kernels (add, swiglu, rmsnorm, decode's fp16 matrix-vector product) in GB/s against cudaMemcpy
//      device-to-device in the same run, and the forward's GEMM path against cublasSgemm (not with --no-kernels).
// Times are CUDA events around the stream (kernels) or wall clock around a synchronised forward (prefill);
// medians of `reps` runs after one warm-up. Lines starting "result " carry one number each for the JSON of
// bench/gpu/device-check.sh.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend.h"
#include "model_internal.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal_kernels/ops_cuda.h"

using namespace focal;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "gpu_bench: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// Metrics for every head, rows of `n_sel` heads of one layer (0 = none), copied out like `focal capture`.
class BenchObserver : public ForwardObserver {
 public:
  BenchObserver(bool metrics, int layer, int n_sel, int T, bool keep_raw = true)
      : metrics_(metrics),
        layer_(layer),
        n_sel_(n_sel),
        T_(T),
        keep_raw_(keep_raw),
        probs_((size_t)std::max(n_sel, 0) * T * T),
        raw_(keep_raw ? probs_.size() : 0) {}
  bool wants_metrics() const override { return metrics_; }
  bool wants_rows(int l, int h) const override { return l == layer_ && h < n_sel_; }
  void on_rows(int, int h, int row0, int n_rows, int stride, const float* p, const float* r) override {
    for (int i = 0; i < n_rows; ++i) {
      std::copy(p + (size_t)i * stride, p + (size_t)i * stride + row0 + i + 1,
                &probs_[((size_t)h * T_ + row0 + i) * T_]);
      if (keep_raw_)
        std::copy(r + (size_t)i * stride, r + (size_t)i * stride + row0 + i + 1,
                  &raw_[((size_t)h * T_ + row0 + i) * T_]);
    }
  }
  void on_layer(const LayerRecord& rec) override {
    if (!rec.metrics) return;
    sink_ += rec.metrics[kSinkMass];
    if (keep_metrics) metrics.insert(metrics.end(), rec.metrics, rec.metrics + (size_t)T_ * n_heads * kNumRowMetrics);
  }
  double sink_ = 0.0;
  bool keep_metrics = false;
  int n_heads = 0;
  std::vector<float> metrics;  // [layer, head, row, metric] when keep_metrics
  const std::vector<float>& probs() const { return probs_; }

 private:
  bool metrics_;
  int layer_, n_sel_, T_;
  bool keep_raw_;
  std::vector<float> probs_, raw_;
};

// mode 0: plain; 1: metrics of every head; 2: + rows of 4 heads of the middle layer; 3: + rows of every head of
// the middle layer (probabilities kept, scores not).
double prefill_tok_s(const Model& m, const std::vector<int32_t>& ids, int mode, int reps) {
  const ModelConfig& c = m.config();
  const int T = (int)ids.size();
  std::vector<double> t;
  for (int r = 0; r <= reps; ++r) {
    Session s(m, T);
    const int n_sel = mode == 2 ? std::min(4, c.n_heads) : mode == 3 ? c.n_heads : 0;
    BenchObserver obs(mode >= 1, c.n_layers / 2, n_sel, T, mode != 3);
    std::vector<float> logits;
    RunOptions opt;
    opt.all_logits = false;
    const double t0 = now();
    s.forward(ids.data(), T, TempSpec::native(c), opt, mode ? &obs : nullptr, &logits);
    const double dt = now() - t0;
    if (r > 0) t.push_back(dt);  // run 0 warms up (allocations into the backend's pool, cuBLAS heuristics)
  }
  return T / median(t);
}

// Median milliseconds of fn() on `stream`, timed with CUDA events.
template <class F>
double time_ms(cudaStream_t stream, int reps, F fn) {
  cudaEvent_t a, b;
  cuda_ok(cudaEventCreate(&a), "cudaEventCreate");
  cuda_ok(cudaEventCreate(&b), "cudaEventCreate");
  fn();  // warm-up
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    cuda_ok(cudaEventRecord(a, stream), "cudaEventRecord");
    fn();
    cuda_ok(cudaEventRecord(b, stream), "cudaEventRecord");
    cuda_ok(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0.0f;
    cuda_ok(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    t.push_back(ms);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(t);
}

void kernels_and_gemm(int reps) {
  cudaStream_t st;
  cuda_ok(cudaStreamCreate(&st), "cudaStreamCreate");
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "gpu_bench: cublasCreate failed\n");
    std::exit(1);
  }
  cublasSetStream(blas, st);
  cuda_ops::Ctx ctx;
  ctx.stream = st;
  ctx.blas = blas;

  const size_t n = size_t(1) << 26;  // 64M floats = 256 MiB per buffer
  float *x, *y, *z;
  cuda_ok(cudaMalloc(&x, n * 4), "cudaMalloc");
  cuda_ok(cudaMalloc(&y, n * 4), "cudaMalloc");
  cuda_ok(cudaMalloc(&z, n * 4), "cudaMalloc");
  cuda_ok(cudaMemsetAsync(x, 0, n * 4, st), "cudaMemset");
  cuda_ok(cudaMemsetAsync(y, 0, n * 4, st), "cudaMemset");
  const double gb = n * 4 / 1e9;
  const double copy_ms = time_ms(st, reps, [&] { cudaMemcpyAsync(z, x, n * 4, cudaMemcpyDeviceToDevice, st); });
  const double copy_gbs = 2 * gb / (copy_ms / 1e3);  // read + write
  std::printf("\n== memory-bound kernels vs cudaMemcpy device-to-device (%zu floats) ==\n", n);
  std::printf("%-28s %10s %10s %10s\n", "kernel", "ms", "GB/s", "of copy");
  std::printf("%-28s %10.3f %10.1f %9.0f%%\n", "cudaMemcpy D2D", copy_ms, copy_gbs, 100.0);
  auto row = [&](const char* name, double ms, double bytes_gb) {
    const double gbs = bytes_gb / (ms / 1e3);
    std::printf("%-28s %10.3f %10.1f %9.0f%%\n", name, ms, gbs, 100.0 * gbs / copy_gbs);
  };
  row("add_inplace (r2 w1)", time_ms(st, reps, [&] { cuda_ops::add_inplace(ctx, y, x, n); }), 3 * gb);
  row("swiglu (r2 w1)", time_ms(st, reps, [&] { cuda_ops::swiglu(ctx, x, y, z, n); }), 3 * gb);
  const int hidden = 4096;
  row("rmsnorm hidden 4096 (r1 w1)",
      time_ms(st, reps, [&] { cuda_ops::rmsnorm(ctx, x, y, z, (int)(n / hidden), hidden, 1e-6f); }), 2 * gb);
  // decode's matrix-vector product over fp16 weights (y's bytes as a [rows, cols] fp16 matrix), counted as the weight
  // bytes read: Llama-3-8B's gate / up, down and a 32000-row vocabulary head, one row of x and four
  const int mv[][3] = {{1, 14336, 4096}, {1, 4096, 14336}, {1, 32000, 4096}, {4, 14336, 4096}};
  for (const auto& s : mv) {
    char name[64];
    std::snprintf(name, sizeof name, "matvec fp16 w %dx%d, m=%d", s[1], s[2], s[0]);
    row(name, time_ms(st, reps, [&] { cuda_ops::matvec_xwt16(ctx, x, y, CUDA_R_16F, z, s[0], s[1], s[2]); }),
        2.0 * s[1] * s[2] / 1e9);
  }

  std::printf("\n== GEMM: Backend matmul_xwt (cublasGemmEx fp32) vs cublasSgemm, y[m,n] = x[m,k] w[n,k]^T ==\n");
  std::printf("%6s %6s %6s %12s %12s %8s\n", "m", "n", "k", "ours TF/s", "Sgemm TF/s", "ratio");
  const int shapes[][3] = {
      {2048, 2048, 2048}, {2048, 5632, 2048}, {2048, 2048, 5632}, {512, 4096, 4096}, {1, 4096, 4096}};
  for (const auto& s : shapes) {
    const int m = s[0], nn = s[1], k = s[2];
    const double flop = 2.0 * m * nn * k;
    const double ours = time_ms(st, reps, [&] { cuda_ops::matmul_xwt(ctx, x, y, z, m, nn, k); });
    const float one = 1.0f, zero = 0.0f;
    const double ref = time_ms(
        st, reps, [&] { cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, nn, m, k, &one, y, k, x, k, &zero, z, nn); });
    std::printf("%6d %6d %6d %12.2f %12.2f %8.2f\n", m, nn, k, flop / (ours / 1e3) / 1e12, flop / (ref / 1e3) / 1e12,
                ref / ours);
  }
  cudaFree(x);
  cudaFree(y);
  cudaFree(z);
  cublasDestroy(blas);
  cudaStreamDestroy(st);
}

// cudaMemcpy device-to-device bandwidth (bytes read + written per second) over 2 x 1 GiB.
double copy_bandwidth_gbs(int reps) {
  const size_t bytes = size_t(1) << 30;
  void *a, *b;
  cuda_ok(cudaMalloc(&a, bytes), "cudaMalloc");
  cuda_ok(cudaMalloc(&b, bytes), "cudaMalloc");
  cuda_ok(cudaMemset(a, 1, bytes), "cudaMemset");
  const double ms =
      time_ms(nullptr, std::max(reps, 5), [&] { cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice); });
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / 1e9 / (ms / 1e3);
}

// Decode: n_tokens greedy steps after a prompt of n_prompt tokens (16 unless --decode-prompt), each one token through
// Session::forward with the logits of that token downloaded (the KV cache as generate uses it). Tokens/s, and the
// weight bytes held on the device read once per token against the copy bandwidth of the same run.
void decode_bench(const Model& m, int n_tokens, int n_prompt, int reps) {
  const ModelConfig& c = m.config();
  std::vector<double> per_token;
  for (int r = 0; r <= reps; ++r) {
    Session s(m, n_prompt + n_tokens);
    std::vector<int32_t> ids(n_prompt);
    for (int i = 0; i < n_prompt; ++i) ids[i] = (int32_t)((i * 7919 + 3) % c.vocab_size);
    RunOptions opt;
    opt.all_logits = false;
    std::vector<float> logits;
    s.forward(ids.data(), n_prompt, TempSpec::native(c), opt, nullptr, &logits);
    const double t0 = now();
    for (int i = 0; i < n_tokens; ++i) {
      const int32_t next = (int32_t)(std::max_element(logits.begin(), logits.end()) - logits.begin());
      s.forward(&next, 1, TempSpec::native(c), opt, nullptr, &logits);
    }
    if (r > 0) per_token.push_back((now() - t0) / n_tokens);
  }
  const double t = median(per_token), tps = 1.0 / t;
  // Bytes a step reads: every matrix once, except an untied embedding table (one row of it)
  const Model::Weights& mw = m.weights();
  const bool tied = mw.embed.data == mw.lm_head.data;
  const double bytes = (double)m.weight_bytes() - (tied ? 0.0 : (double)mw.embed.bytes);
  const double copy = copy_bandwidth_gbs(reps);
  const double frac = bytes / t / 1e9 / copy;
  // The weight products alone, as one decode step issues them (7 per layer and the head, one row of x): how much of
  // a token's time the kernels take, and the rest (norms, RoPE, attention, launches, host work).
  {
    Backend& be = m.backend();
    const Model::Weights& w = m.weights();
    const int H = c.hidden, QD = c.n_heads * c.d_head, KD = c.n_kv_heads * c.d_head, I = c.intermediate;
    const size_t big = (size_t)std::max({H, QD + 2 * KD, 2 * I, c.vocab_size});
    DeviceBuffer xb(be, big), yb(be, big);
    {  // x of random values (not the pool's leftover bytes: zeros or NaN would time something else)
      std::mt19937 rng(5);
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      std::vector<float> xh(big);
      for (float& v : xh) v = u(rng);
      be.upload(xb.data(), xh.data(), big);
    }
    std::vector<double> ts;
    for (int r = 0; r <= reps; ++r) {
      be.synchronize();
      const double t0 = now();
      for (const LayerWeights& L : w.layers) {  // as the forward issues them: Q, K, V and gate, up shared
        const Backend::XwtOut qkv[3] = {
            {&L.wq, yb.data(), QD}, {&L.wk, yb.data() + QD, KD}, {&L.wv, yb.data() + QD + KD, KD}};
        be.matmul_xwt_shared(xb.data(), qkv, 3, 1, H);
        be.matmul_xwt(xb.data(), L.wo, yb.data(), 1, H, QD);
        const Backend::XwtOut gu[2] = {{&L.w_gate, yb.data(), I}, {&L.w_up, yb.data() + I, I}};
        if (L.w_gate)
          be.matmul_xwt_shared(xb.data(), gu, 2, 1, H);
        else
          be.matmul_xwt(xb.data(), L.w_up, yb.data(), 1, I, H);
        be.matmul_xwt(xb.data(), L.w_down, yb.data(), 1, H, I);
      }
      be.matmul_xwt(xb.data(), w.lm_head, yb.data(), 1, c.vocab_size, H);
      be.synchronize();
      if (r > 0) ts.push_back(now() - t0);
    }
    const double tw = median(ts);
    std::printf("weight products alone: %.2f ms a token, %.0f GB/s (%.0f %% of copy); the rest of a step %.2f ms\n",
                1e3 * tw, bytes / tw / 1e9, 100.0 * bytes / tw / 1e9 / copy, 1e3 * (t - tw));
    std::printf("result decode_products_ms %.3f\n", 1e3 * tw);
  }
  std::printf(
      "\n== decode, %d tokens after %d (median of %d) ==\n%.1f tokens/s, %.2f ms/token; weights %.2f GB read per "
      "token = %.0f GB/s, %.0f %% of the copy bandwidth %.0f GB/s\n",
      n_tokens, n_prompt, reps, tps, 1e3 * t, bytes / 1e9, bytes / t / 1e9, 100.0 * frac, copy);
  std::printf("result decode_tok_s %.2f\nresult decode_bandwidth_fraction %.4f\nresult copy_gbs %.1f\n", tps, frac,
              copy);
}

// Fast against exact on one prompt: attention rows of the middle layer, metrics, mean next-token NLL, greedy tokens.
// The prompt: T random tokens, or the first T tokens of `text` (fewer when the text is shorter).
void accuracy(const Model& exact, const Model& fast, int T, const std::string& text) {
  const ModelConfig& c = exact.config();
  std::vector<int32_t> ids;
  if (text.empty()) {
    std::mt19937 rng(7);
    ids.resize((size_t)T);
    for (auto& id : ids) id = (int32_t)(rng() % (unsigned)c.vocab_size);
  } else {
    ids = exact.require_tokenizer().encode(text, true);
    if (ids.size() > (size_t)T) ids.resize((size_t)T);
    if (ids.size() < 33)
      throw Error("--accuracy-text gives " + std::to_string(ids.size()) +
                  " tokens; it needs at least 33 (32 of prompt for the greedy run, and one to score)");
    T = (int)ids.size();
  }
  struct Out {
    std::vector<float> logits, probs, metrics;
  };
  auto run = [&](const Model& m) {
    Session s(m, T);
    BenchObserver obs(true, c.n_layers / 2, c.n_heads, T, false);
    obs.keep_metrics = true;
    obs.n_heads = c.n_heads;
    RunOptions opt;
    opt.all_logits = true;
    Out o;
    s.forward(ids.data(), T, TempSpec::native(c), opt, &obs, &o.logits);
    o.probs = obs.probs();
    o.metrics = std::move(obs.metrics);
    return o;
  };
  const Out e = run(exact), f = run(fast);
  auto nll = [&](const std::vector<float>& lg) {
    double sum = 0.0;
    const int V = c.vocab_size;
    for (int t = 0; t + 1 < T; ++t) {
      const float* row = lg.data() + (size_t)t * V;
      double mx = row[0];
      for (int j = 1; j < V; ++j) mx = std::max(mx, (double)row[j]);
      double z = 0.0;
      for (int j = 0; j < V; ++j) z += std::exp((double)row[j] - mx);
      sum += std::log(z) + mx - row[ids[t + 1]];
    }
    return sum / (T - 1);
  };
  double dp = 0.0, dm_ent = 0.0, dm_mass = 0.0;
  for (size_t i = 0; i < e.probs.size(); ++i) dp = std::max(dp, (double)std::fabs(e.probs[i] - f.probs[i]));
  for (size_t i = 0; i < e.metrics.size() && i < f.metrics.size(); ++i) {
    const int m = (int)(i % kNumRowMetrics);
    const double d = std::fabs((double)e.metrics[i] - f.metrics[i]);
    if (std::isnan(d)) continue;
    if (m == kEntropyNats) dm_ent = std::max(dm_ent, d);
    if (m == kMaxProb || m == kTopkMass || m == kSinkMass) dm_mass = std::max(dm_mass, d);
  }
  const double nll_e = nll(e.logits), nll_f = nll(f.logits);
  // Greedy: 64 tokens after the first 32 of the prompt, each model on its own.
  const std::vector<int32_t> prompt(ids.begin(), ids.begin() + std::min(32, T));
  SampleOptions so;
  so.stop_at_eos = false;
  RunOptions ro;
  ro.all_logits = false;
  Session se(exact, 32 + 64), sf(fast, 32 + 64);
  const auto ge = generate(se, prompt, 64, TempSpec::native(c), so, ro, nullptr);
  const auto gf = generate(sf, prompt, 64, TempSpec::native(c), so, ro, nullptr);
  int same = 0, prefix = 0;
  for (size_t i = 0; i < ge.size() && i < gf.size(); ++i) same += ge[i] == gf[i];
  while (prefix < (int)std::min(ge.size(), gf.size()) && ge[prefix] == gf[prefix]) ++prefix;
  std::printf("\n== fast against exact, T = %d (%s) ==\n", T, text.empty() ? "random tokens" : "text");
  std::printf("attention rows of layer %d (all heads): max |p_fast - p_exact| = %.3g\n", c.n_layers / 2, dp);
  std::printf("metrics, all heads and layers: max |d entropy| = %.3g nats, max |d mass| (max, top-k, sink) = %.3g\n",
              dm_ent, dm_mass);
  std::printf("mean next-token NLL: exact %.5f, fast %.5f nats (difference %.3g)\n", nll_e, nll_f, nll_f - nll_e);
  std::printf("greedy 64 tokens: %d of %zu the same, the first %d in a row\n", same, ge.size(), prefix);
  std::printf(
      "result accuracy_max_dp %.6g\nresult accuracy_max_dentropy %.6g\nresult accuracy_nll_exact %.6f\n"
      "result accuracy_nll_fast %.6f\nresult accuracy_greedy_same %d\nresult accuracy_greedy_prefix %d\n",
      dp, dm_ent, nll_e, nll_f, same, prefix);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::printf(
        "usage: gpu_bench MODEL [T,T,...] [reps] [--precision exact,fast] [--capture-layer] [--accuracy T]\n"
        "                 [--accuracy-text FILE] [--decode N] [--decode-prompt P] [--no-cpu] [--no-kernels]\n\nCUDA "
        "backend: prefill tokens/s "
        "per precision "
        "(plain, "
        "all-head metrics, capture of 4 heads; --capture-layer: every head of the middle layer stored) at each T, "
        "with the CPU backend's plain rate at the first T (unless --no-cpu); --accuracy T: fast against exact on a "
        "prompt of T random tokens, or of FILE's first T tokens with --accuracy-text (attention rows, metrics, NLL, "
        "greedy tokens); --decode N: N greedy decode steps after a "
        "prompt of P tokens (--decode-prompt, default 16), tokens/s and the weights' bytes per token against the copy "
        "bandwidth; T = 0 skips prefill; memory-bound kernels "
        "against cudaMemcpy "
        "D2D bandwidth and the GEMM path against cublasSgemm (unless --no-kernels). Needs a CUDA device.\n");
    return argc < 2 ? 2 : 0;
  }
  std::vector<std::string> pos;
  std::string precisions = "exact,fast";
  bool capture_layer = false, no_cpu = false, no_kernels = false;
  int acc_T = 0, decode_n = 0, decode_prompt = 16;
  std::string acc_text_path;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--precision" && i + 1 < argc)
      precisions = argv[++i];
    else if (a == "--capture-layer")
      capture_layer = true;
    else if (a == "--no-cpu")
      no_cpu = true;
    else if (a == "--no-kernels")
      no_kernels = true;
    else if (a == "--accuracy" && i + 1 < argc)
      acc_T = std::atoi(argv[++i]);
    else if (a == "--accuracy-text" && i + 1 < argc)
      acc_text_path = argv[++i];
    else if (a == "--decode" && i + 1 < argc)
      decode_n = std::atoi(argv[++i]);
    else if (a == "--decode-prompt" && i + 1 < argc)
      decode_prompt = std::max(1, std::atoi(argv[++i]));
    else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "gpu_bench: unknown option %s (see gpu_bench --help)\n", a.c_str());
      return 2;
    } else
      pos.push_back(a);
  }
  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    size_t p = 0;
    while (p <= s.size()) {
      const size_t q = s.find(',', p);
      out.push_back(s.substr(p, q == std::string::npos ? std::string::npos : q - p));
      if (q == std::string::npos) break;
      p = q + 1;
    }
    return out;
  };
  const std::string dir = pos.at(0);
  std::vector<int> Ts;
  for (const std::string& t : split(pos.size() > 1 ? pos[1] : "512,2048,8192")) Ts.push_back(std::atoi(t.c_str()));
  const int reps = pos.size() > 2 ? std::atoi(pos[2].c_str()) : 5;
  std::string acc_text;
  if (!acc_text_path.empty() && acc_T <= 0) {
    std::fprintf(stderr, "gpu_bench: --accuracy-text needs --accuracy T (how many of its tokens to compare on)\n");
    return 2;
  }
  if (!acc_text_path.empty()) {  // read before any model loads: a wrong path fails at once
    std::ifstream in(acc_text_path, std::ios::binary);
    std::ostringstream buf;
    buf << in.rdbuf();
    acc_text = buf.str();
    if (!in || acc_text.empty()) {
      std::fprintf(stderr, "gpu_bench: --accuracy-text %s: cannot read it, or it is empty (give a UTF-8 text file)\n",
                   acc_text_path.c_str());
      return 2;
    }
  }
  try {
    std::string note;
    if (resolve_device(Device::kAuto, &note) != Device::kCuda) {
      std::fprintf(stderr, "gpu_bench: %s\n", note.c_str());
      return 1;
    }
    std::printf("%s\n", note.c_str());
    std::unique_ptr<Model> keep[2];
    int slot = 0;
    for (const std::string& pname : split(precisions)) {
      LoadOptions lo;
      lo.precision = parse_precision(pname);
      const double t0 = now();
      auto gpu = Model::load(dir, Device::kCuda, lo);
      const ModelConfig& c = gpu->config();
      std::printf(
          "\nmodel %s: %.1fM parameters, hidden %d, %d layers, %d/%d heads, d_head %d; precision %s; "
          "loaded in %.1f s\n",
          dir.c_str(), gpu->n_params() / 1e6, c.hidden, c.n_layers, c.n_heads, c.n_kv_heads, c.d_head,
          precision_name(gpu->precision()), now() - t0);
      std::mt19937 rng(1);
      if (std::any_of(Ts.begin(), Ts.end(), [](int T) { return T > 0; }))  // T = 0 alone: no prefill table
        std::printf("== prefill tokens/s, %s (median of %d) ==\n%8s %14s %14s %14s %14s\n",
                    precision_name(gpu->precision()), reps, "T", "plain", "metrics", "capture 4h",
                    capture_layer ? "capture layer" : "");
      for (size_t i = 0; i < Ts.size(); ++i) {
        const int T = Ts[i];
        if (T <= 0) continue;
        std::vector<int32_t> ids(T);
        for (auto& id : ids) id = (int32_t)(rng() % (unsigned)c.vocab_size);
        const double plain = prefill_tok_s(*gpu, ids, 0, reps);
        const double met = prefill_tok_s(*gpu, ids, 1, reps);
        const double cap = prefill_tok_s(*gpu, ids, 2, reps);
        const double lay = capture_layer ? prefill_tok_s(*gpu, ids, 3, std::max(1, reps / 2)) : 0.0;
        std::printf("%8d %14.0f %14.0f %14.0f %14.0f\n", T, plain, met, cap, lay);
        const char* pn = precision_name(gpu->precision());
        std::printf("result prefill_%s_plain_T%d %.1f\nresult prefill_%s_metrics_T%d %.1f\n", pn, T, plain, pn, T, met);
        if (capture_layer) std::printf("result prefill_%s_capture_layer_T%d %.1f\n", pn, T, lay);
        std::fflush(stdout);
      }
      if (decode_n > 0) decode_bench(*gpu, decode_n, decode_prompt, reps);
      if (acc_T > 0 && slot < 2) keep[slot++] = std::move(gpu);
    }
    if (acc_T > 0 && keep[1]) {
      const Model& a = *keep[0];
      const Model& b = *keep[1];
      if (a.precision() == Precision::kExact && b.precision() == Precision::kFast)
        accuracy(a, b, acc_T, acc_text);
      else if (b.precision() == Precision::kExact && a.precision() == Precision::kFast)
        accuracy(b, a, acc_T, acc_text);
    }
    if (!no_cpu) {
      auto cpu = Model::load(dir, Device::kCpu);
      std::vector<int32_t> ids(Ts[0]);
      std::mt19937 rng(1);
      for (auto& id : ids) id = (int32_t)(rng() % (unsigned)cpu->config().vocab_size);
      std::printf("cpu plain prefill at T = %d: %.0f tokens/s\n", Ts[0],
                  prefill_tok_s(*cpu, ids, 0, std::min(reps, 2)));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 1;
  }
  if (!no_kernels) kernels_and_gemm(reps);
  return 0;
}
