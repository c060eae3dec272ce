// CPU backend: host memory and the kernels' CPU ops. Everything runs synchronously on the calling thread (ops
// parallelise internally with OpenMP / OpenBLAS).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

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
  void free(float* p) override {
    std::unique_lock<std::shared_mutex> lock(mu_);         // sessions may free buffers from several threads
    if (auto st = stored_.find(p); st != stored_.end()) {  // a stored weight: its handle is its entry, not memory
      weight_bytes_ -= (size_t)st->second->q.rows * st->second->q.row_bytes;
      stored_.erase(st);
      return;
    }
    auto it = weights_.find(p);
    if (it != weights_.end()) {
      weight_bytes_ -= it->second;
      weights_.erase(it);
    }
    std::free(p);
  }
  void upload(float* dst, const float* src, size_t n) override { std::memcpy(dst, src, n * sizeof(float)); }
  void download(float* dst, const float* src, size_t n) override {
    if (const ops::QMatrix* q = stored(src)) {
      ops::dequant_rows(*q, 0, std::min<int64_t>(q->rows, (int64_t)(n / (size_t)q->cols)), dst);
      return;
    }
    std::memcpy(dst, src, n * sizeof(float));
  }
  void synchronize() override {}
  float* upload_weight(const void* src, WeightType type, size_t n) override {
    float* p = alloc(n);
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
    std::unique_lock<std::shared_mutex> lock(mu_);
    weight_bytes_ += n * sizeof(float);
    weights_[p] = n * sizeof(float);
    return p;
  }
  // Stored weights stay where the file's mapping has them; the handle is the address of their entry.
  float* upload_weight_stored(const StoredWeight& w) override {
    auto e = std::make_unique<Stored>();
    e->row_map = w.row_map;
    e->q = w.view();
    e->q.row_map = e->row_map.empty() ? nullptr : e->row_map.data();  // the entry's own copy
    float* handle = reinterpret_cast<float*>(e.get());
    std::unique_lock<std::shared_mutex> lock(mu_);
    weight_bytes_ += (size_t)w.rows * w.row_bytes;
    stored_[handle] = std::move(e);
    return handle;
  }
  size_t weight_bytes() const override {
    std::shared_lock<std::shared_mutex> lock(mu_);
    return weight_bytes_;
  }

 private:
  struct Stored {
    ops::QMatrix q;
    std::vector<int32_t> row_map;  // q.row_map points here
  };
  std::map<float*, size_t> weights_;                                  // upload_weight allocations and their bytes
  std::unordered_map<const float*, std::unique_ptr<Stored>> stored_;  // upload_weight_stored handles
  size_t weight_bytes_ = 0;
  mutable std::shared_mutex mu_;
  const ops::QMatrix* stored(const float* p) const {
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = stored_.find(p);
    return it == stored_.end() ? nullptr : &it->second->q;
  }
  void embed(const float* table, const int32_t* ids, float* out, int n_tokens, int hidden) override {
    if (const ops::QMatrix* q = stored(table)) {
      for (int t = 0; t < n_tokens; ++t) ops::dequant_rows(*q, ids[t], 1, out + (size_t)t * hidden);
      return;
    }
    ops::embed(table, ids, out, n_tokens, hidden);
  }
  void rmsnorm(const float* x, const float* w, float* y, int rows, int n, float eps) override {
    ops::rmsnorm(x, w, y, rows, n, eps);
  }
  void matmul_xwt(const float* x, const float* w, float* y, int m, int n, int k) override {
    if (const ops::QMatrix* q = stored(w)) {
      if (q->rows != n || q->cols != k)
        throw Error("internal: matmul_xwt of a [" + std::to_string(q->rows) + ", " + std::to_string(q->cols) +
                    "] stored weight as [" + std::to_string(n) + ", " + std::to_string(k) + "]");
      ops::matmul_xwt_q(x, *q, y, m);
      return;
    }
    ops::matmul_xwt(x, w, y, m, n, k);
  }
  void matmul_xwt_shared(const float* x, const XwtOut* outs, int n_outs, int m, int k) override {
    const ops::QMatrix* qs[3];
    float* ys[3];
    bool stored_all = n_outs >= 1 && n_outs <= 3;
    for (int i = 0; i < n_outs && stored_all; ++i) {
      qs[i] = stored(outs[i].w);
      ys[i] = outs[i].y;
      stored_all = qs[i] && qs[i]->rows == outs[i].n && qs[i]->cols == k;
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
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace focal
