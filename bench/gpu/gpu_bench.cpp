// GPU benchmark of the CUDA backend, ready for the first machine with a device (run bench/gpu/run.sh):
//   1. prefill tokens/s of Session::forward on the CUDA backend at several T: plain, all-head metrics (fused
//      flash-style kernel for every head), and capture (metrics + probabilities / scores of 4 heads of the middle
//      layer through cuBLAS + the fused softmax + pinned copies), with the CPU backend's plain rate at the smallest T
//      as the named peer;
//   2. memory-bound kernels (add, swiglu, rmsnorm, decode's fp16 matrix-vector product) in GB/s against cudaMemcpy device-to-device in the same run;
//   3. the forward's GEMM call (Backend::matmul_xwt -> cublasGemmEx, fp32) against cublasSgemm called directly on
//      the same shapes, in TFLOP/s.
// Times are CUDA events around the stream (kernels) or wall clock around a synchronised forward (prefill);
// medians of `reps` runs after one warm-up.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend.h"
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
  BenchObserver(bool metrics, int layer, int n_sel, int T)
      : metrics_(metrics),
        layer_(layer),
        n_sel_(n_sel),
        T_(T),
        probs_((size_t)std::max(n_sel, 0) * T * T),
        raw_(probs_.size()) {}
  bool wants_metrics() const override { return metrics_; }
  bool wants_rows(int l, int h) const override { return l == layer_ && h < n_sel_; }
  void on_rows(int, int h, int row0, int n_rows, int stride, const float* p, const float* r) override {
    for (int i = 0; i < n_rows; ++i) {
      std::copy(p + (size_t)i * stride, p + (size_t)i * stride + row0 + i + 1,
                &probs_[((size_t)h * T_ + row0 + i) * T_]);
      std::copy(r + (size_t)i * stride, r + (size_t)i * stride + row0 + i + 1, &raw_[((size_t)h * T_ + row0 + i) * T_]);
    }
  }
  void on_layer(const LayerRecord& rec) override {
    if (rec.metrics) sink_ += rec.metrics[kSinkMass];
  }
  double sink_ = 0.0;

 private:
  bool metrics_;
  int layer_, n_sel_, T_;
  std::vector<float> probs_, raw_;
};

double prefill_tok_s(const Model& m, const std::vector<int32_t>& ids, int mode, int reps) {
  const ModelConfig& c = m.config();
  const int T = (int)ids.size();
  std::vector<double> t;
  for (int r = 0; r <= reps; ++r) {
    Session s(m, T);
    BenchObserver obs(mode >= 1, c.n_layers / 2, mode == 2 ? std::min(4, c.n_heads) : 0, T);
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help") {
    std::printf(
        "usage: gpu_bench MODEL_DIR [T,T,...] [reps]\n\nCUDA backend: prefill tokens/s (plain, all-head "
        "metrics, capture of 4 heads) at each T with the CPU backend's plain rate at the first T; memory-bound "
        "kernels against cudaMemcpy D2D bandwidth; the GEMM path against cublasSgemm. Needs a CUDA device.\n");
    return argc < 2 ? 2 : 0;
  }
  const std::string dir = argv[1];
  std::vector<int> Ts;
  {
    const std::string s = argc > 2 ? argv[2] : "512,2048,8192";
    size_t p = 0;
    while (p < s.size()) {
      const size_t q = s.find(',', p);
      Ts.push_back(std::atoi(s.substr(p, q == std::string::npos ? std::string::npos : q - p).c_str()));
      p = q == std::string::npos ? s.size() : q + 1;
    }
  }
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  try {
    std::string note;
    if (resolve_device(Device::kAuto, &note) != Device::kCuda) {
      std::fprintf(stderr, "gpu_bench: %s\n", note.c_str());
      return 1;
    }
    std::printf("%s\n", note.c_str());
    auto gpu = Model::load(dir, Device::kCuda);
    auto cpu = Model::load(dir, Device::kCpu);
    const ModelConfig& c = gpu->config();
    std::printf("model %s: %.1fM parameters, hidden %d, %d layers, %d/%d heads, d_head %d\n", dir.c_str(),
                gpu->n_params() / 1e6, c.hidden, c.n_layers, c.n_heads, c.n_kv_heads, c.d_head);
    std::mt19937 rng(1);
    std::printf("\n== prefill tokens/s (median of %d) ==\n%8s %14s %14s %14s %14s\n", reps, "T", "cuda plain",
                "cuda metrics", "cuda capture", "cpu plain");
    for (size_t i = 0; i < Ts.size(); ++i) {
      const int T = std::min(Ts[i], c.max_positions);
      std::vector<int32_t> ids(T);
      for (auto& id : ids) id = (int32_t)(rng() % (unsigned)c.vocab_size);
      const double plain = prefill_tok_s(*gpu, ids, 0, reps);
      const double met = prefill_tok_s(*gpu, ids, 1, reps);
      const double cap = prefill_tok_s(*gpu, ids, 2, reps);
      std::printf("%8d %14.0f %14.0f %14.0f", T, plain, met, cap);
      if (i == 0) std::printf(" %14.0f", prefill_tok_s(*cpu, ids, 0, std::min(reps, 2)));
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 1;
  }
  kernels_and_gemm(reps);
  return 0;
}
