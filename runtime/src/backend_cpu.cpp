// CPU backend: host memory and the kernels' CPU ops. Everything runs synchronously on the calling thread (ops
// parallelise internally with OpenMP / OpenBLAS).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "backend.h"
#include "focal/error.h"
#include "focal_kernels/quant.h"
#include "focal_kernels/shared_math.h"
#include "safetensors.h"

namespace focal {

namespace {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  bool host_memory() const override { return true; }
  float* alloc(size_t n) override {
    void* p = nullptr;
    if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0) throw std::bad_alloc();
    std::memset(p, 0, (n ? n : 1) * sizeof(float));
    return static_cast<float*>(p);
  }
  void free(float* p) override { std::free(p); }
  void upload(float* dst, const float* src, size_t n) override { std::memcpy(dst, src, n * sizeof(float)); }
  void download(float* dst, const float* src, size_t n) override { std::memcpy(dst, src, n * sizeof(float)); }
  void synchronize() override {}
  Weight upload_weight(const void* src, WeightType type, size_t n) override {
    Weight w;
    w.form = Weight::Form::kF32;  // 16-bit values widened exactly: the CPU computes in fp32
    w.data = alloc(n);
    w.n = n;
    w.bytes = n * sizeof(float);
    float* p = w.f32();
    if (type == WeightType::kF32) {
      if (n) std::memcpy(p, src, n * sizeof(float));
    } else {
      const uint8_t* bytes = static_cast<const uint8_t*>(src);  // may be unaligned (a mapped file)
      for (size_t i = 0; i < n; ++i) {
        uint16_t v;
        std::memcpy(&v, bytes + 2 * i, 2);
        p[i] = type == WeightType::kBF16 ? math::bf16_bits_to_float(v) : math::half_bits_to_float(v);
      }
    }
    weight_bytes_ += w.bytes;
    return w;
  }
  // Stored weights stay where the file's mapping has them: the Weight describes their rows.
  Weight upload_weight_stored(const StoredWeight& sw) override {
    auto rows = std::make_shared<BlockRows>();
    rows->row_map = sw.row_map;
    rows->q = sw.view();
    rows->q.row_map = rows->row_map.empty() ? nullptr : rows->row_map.data();  // its own copy
    Weight w;
    w.form = Weight::Form::kBlocks;
    w.n = (size_t)sw.rows * (size_t)sw.cols;
    w.bytes = (size_t)sw.rows * sw.row_bytes;
    w.blocks = std::move(rows);
    weight_bytes_ += w.bytes;
    ops::note_held_weight_bytes((int64_t)w.bytes);  // the decode kernels' prefetch distance follows what is held
    return w;
  }
  void free_weight(const Weight& w) override {
    weight_bytes_ -= w.bytes;
    if (w.form == Weight::Form::kBlocks) ops::note_held_weight_bytes(-(int64_t)w.bytes);
    std::free(w.data);  // null for blocks: they belong to the mapped file
  }
  void download_weight(float* dst, const Weight& w, size_t n) override {
    if (w.form == Weight::Form::kBlocks) {
      const ops::QMatrix& q = w.blocks->q;
      ops::dequant_rows(q, 0, std::min<int64_t>(q.rows, (int64_t)(n / (size_t)q.cols)), dst);
      return;
    }
    std::memcpy(dst, w.data, std::min(n, w.n) * sizeof(float));
  }
  size_t weight_bytes() const override { return weight_bytes_; }

 private:
  std::atomic<size_t> weight_bytes_{0};  // sessions may free buffers from several threads

  void embed(const Weight& table, const int32_t* ids, float* out, int n_tokens, int hidden) override {
    if (table.form == Weight::Form::kBlocks) {
      for (int t = 0; t < n_tokens; ++t) ops::dequant_rows(table.blocks->q, ids[t], 1, out + (size_t)t * hidden);
      return;
    }
    ops::embed(table.f32(), ids, out, n_tokens, hidden);
  }
  void rmsnorm(const float* x, const float* w, float* y, int rows, int n, float eps) override {
    ops::rmsnorm(x, w, y, rows, n, eps);
  }
  void matmul_xwt(const float* x, const Weight& w, float* y, int m, int n, int k) override {
    if (w.form == Weight::Form::kBlocks) {
      const ops::QMatrix& q = w.blocks->q;
      if (q.rows != n || q.cols != k)
        throw Error("internal: matmul_xwt of a [" + std::to_string(q.rows) + ", " + std::to_string(q.cols) +
                    "] stored weight as [" + std::to_string(n) + ", " + std::to_string(k) + "]");
      ops::matmul_xwt_q(x, q, y, m);
      return;
    }
    ops::matmul_xwt(x, w.f32(), y, m, n, k);
  }
  void matmul_xwt_shared(const float* x, const XwtOut* outs, int n_outs, int m, int k) override {
    const ops::QMatrix* qs[3];
    float* ys[3];
    bool stored_all = n_outs >= 1 && n_outs <= 3;
    for (int i = 0; i < n_outs && stored_all; ++i) {
      const Weight& w = *outs[i].w;
      stored_all = w.form == Weight::Form::kBlocks && w.blocks->q.rows == outs[i].n && w.blocks->q.cols == k;
      qs[i] = stored_all ? &w.blocks->q : nullptr;
      ys[i] = outs[i].y;
    }
    if (!stored_all) {
      Backend::matmul_xwt_shared(x, outs, n_outs, m, k);
      return;
    }
    ops::matmul_xwt_q_shared(x, qs, ys, n_outs, m);
  }
  void add_row_bias(float* y, const float* b, int rows, int n) override {
    for (int r = 0; r < rows; ++r) ops::add_inplace(y + (size_t)r * n, b, (size_t)n);
  }
  void rope(float* x, int n_tokens, int n_heads, int d_head, int pos0, float theta) override {
    ops::rope(x, n_tokens, n_heads, d_head, pos0, theta);
  }
  void rope_freqs(float* x, int n_tokens, int n_heads, int d_head, int pos0, const float* inv_freq,
                  float cs_scale) override {
    ops::rope_freqs(x, n_tokens, n_heads, d_head, pos0, inv_freq, cs_scale);
  }
  void layernorm(const float* x, const float* w, const float* b, float* y, int rows, int n, float eps) override {
    ops::layernorm(x, w, b, y, rows, n, eps);
  }
  void swiglu(const float* gate, const float* up, float* out, size_t n) override { ops::swiglu(gate, up, out, n); }
  void act_mul(const float* gate, const float* up, float* out, size_t n, ops::Act act) override {
    ops::act_mul(gate, up, out, n, act);
  }
  void softcap(float* x, size_t n, float cap) override { ops::softcap_inplace(x, n, cap); }
  void scale(float* x, size_t n, float s) override { ops::scale_inplace(x, n, s); }
  void add_inplace(float* y, const float* x, size_t n) override { ops::add_inplace(y, x, n); }
  void kv_store(const float* kv, float* cache, int n_tokens, int n_kv_heads, int d_head, int stride,
                int pos0) override {
    for (int t = 0; t < n_tokens; ++t)
      for (int h = 0; h < n_kv_heads; ++h)
        std::memcpy(cache + ((size_t)h * stride + pos0 + t) * d_head, kv + ((size_t)t * n_kv_heads + h) * d_head,
                    d_head * sizeof(float));
  }
  void attention(const ops::AttentionArgs& a) override { ops::attention(a); }
  void topk_rows(const float* x, int rows, int n, int k, int32_t* idx, float* val) override {
    if (k < 1 || k > n || k > 64) throw Error("topk_rows: k = " + std::to_string(k) + " is outside 1..min(n, 64)");
    for (int r = 0; r < rows; ++r) ops::topk(x + (size_t)r * n, n, k, idx + (size_t)r * k, val + (size_t)r * k);
  }
  void next_token_rows(const float* x, int rows, int n, int k, const int32_t* targets, float* lse, int32_t* idx,
                       float* val, float* target_val) override {
    if (k < 1 || k > n) throw Error("next_token_rows: k = " + std::to_string(k) + " is outside 1..n");
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) {
      const float* xr = x + (size_t)r * n;
      lse[r] = ops::log_sum_exp(xr, n);
      ops::topk(xr, n, k, idx + (size_t)r * k, val + (size_t)r * k);
      target_val[r] = targets[r] >= 0 && targets[r] < n ? xr[targets[r]] : std::numeric_limits<float>::quiet_NaN();
    }
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace focal
