// The compute backend interface the model is written against once. The CPU backend implements it over the kernels;
// a CUDA backend implements the same calls on device memory and a stream (pointers are then device pointers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "focal_kernels/ops.h"
#include "focal_kernels/quant.h"

namespace focal {

// How a weight matrix's values arrive from the model file (host memory, row-major).
enum class WeightType { kF32, kF16, kBF16 };

// A weight matrix [rows, cols] in its stored format (Model::load's native weights): ggml blocks, fp16 or bf16
// (type: ops::QType), row r at data + row_map[r] * row_bytes (row_map empty: row r). data points into a mapped model
// file that the Model keeps open for as long as the weight lives.
struct StoredWeight {
  int type = 0;
  const uint8_t* data = nullptr;
  int64_t rows = 0, cols = 0;
  size_t row_bytes = 0;
  std::vector<int32_t> row_map;  // [rows] or empty
  bool panels = false;           // re-laid out in the kernels' panel layout (ops::pack_panels; row_map then empty)
  // The kernels' view of it; valid while this StoredWeight (its row_map) lives.
  ops::QMatrix view() const {
    ops::QMatrix q;
    q.type = type;
    q.data = data;
    q.rows = rows;
    q.cols = cols;
    q.row_bytes = row_bytes;
    q.row_map = row_map.empty() ? nullptr : row_map.data();
    q.panels = panels;
    return q;
  }
};

// The rows of a weight kept in a block format (ggml blocks, or fp16 / bf16 rows with a stride or a row map): the
// kernels' view of them (q.data: the mapped file on the CPU, device memory on the GPU; q.row_map into row_map).
struct BlockRows {
  ops::QMatrix q;
  std::vector<int32_t> row_map;  // [rows] or empty
  // A device backend's token table kept in host memory (Backend::upload_table_stored): q.data points into `host`
  // (its rows in order), and only embed and download_weight may read it.
  std::vector<uint8_t> host;
  bool on_host = false;
  BlockRows() = default;
  BlockRows(const BlockRows&) = delete;
  BlockRows& operator=(const BlockRows&) = delete;
};

// A weight matrix [rows, cols] as a backend holds it (upload_weight, upload_weight_stored): the handle carries its
// form, so an op knows what it was given without a lookup. Cheap to copy; the memory belongs to the WeightBuffer
// that made it (Model::Weights keeps them), the block description to the shared BlockRows.
struct Weight {
  enum class Form : uint8_t { kNone, kF32, kF16, kBF16, kBlocks };
  Form form = Form::kNone;
  void* data = nullptr;  // backend memory: [n] values of the form (kF32 / kF16 / kBF16), or the blocks (kBlocks;
                         // null on the CPU, where they stay in the mapped file: blocks->q.data)
  size_t n = 0;          // values
  size_t bytes = 0;      // bytes the backend holds for it (Backend::weight_bytes)
  std::shared_ptr<const BlockRows> blocks;  // kBlocks: the block format, shape and row layout

  explicit operator bool() const { return form != Form::kNone; }
  // The values when they are fp32 backend memory (host memory on the CPU: the trainer's view), else null.
  float* f32() const { return form == Form::kF32 ? static_cast<float*>(data) : nullptr; }
  // A non-owning fp32 weight over n floats of backend memory (an activation used as a matrix, a test's buffer).
  static Weight of_f32(float* p, size_t n) {
    Weight w;
    w.form = p ? Form::kF32 : Form::kNone;
    w.data = p;
    w.n = n;
    return w;
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Backend memory is host memory (the CPU backend): a caller may read it directly instead of downloading a copy.
  virtual bool host_memory() const { return false; }

  // Memory. alloc returns zeroed backend memory for n floats; upload/download copy between host and backend and
  // are ordered with the ops on the backend's stream; synchronize waits for everything issued so far.
  virtual float* alloc(size_t n_floats) = 0;
  virtual void free(float* p) = 0;
  virtual void upload(float* dst, const float* host_src, size_t n) = 0;
  virtual void download(float* host_dst, const float* src, size_t n) = 0;
  virtual void synchronize() = 0;

  // Parts of a step recorded and replayed as one launch each (the CUDA backend: CUDA graphs, FOCAL_CUDA_GRAPHS).
  // Between record_begin(segment) returning true and record_end(), ops and uploads are recorded, not run: nothing
  // may be downloaded, synchronized or read back from the device, and host data an op or upload reads is copied at
  // the call. record_end() runs what was recorded; false means the recording failed (nothing of it ran, and the
  // backend records no more). segment names the part (a layer, the head): a backend may keep what it made of a
  // segment's recording for the same segment of the next step. record_abort() drops an open recording (an
  // exception on the way). The default records nothing.
  virtual bool record_begin(int segment) {
    (void)segment;
    return false;
  }
  virtual bool record_end() { return true; }
  virtual void record_abort() {}

  // Weight matrices (q/k/v/o, gate/up/down, lm_head, the embedding table), uploaded once at load: a Weight over
  // backend memory holding the n values of host_src (given in `type`). The CPU backend stores fp32 (16-bit values
  // widened exactly, as the loader always did); the CUDA backend keeps fp16 / bf16 values in 16 bits and fp32 in
  // fp32. Owned by the caller: free_weight (WeightBuffer) gives it back.
  virtual Weight upload_weight(const void* host_src, WeightType type, size_t n) = 0;
  // A weight kept in its stored format. The CPU backend keeps the pointer into the mapped file and computes from the
  // stored blocks (focal_kernels/quant.h); this default, which the CUDA backend uses for formats its kernels do not
  // read, uploads fp16 / bf16 as they are and block formats dequantised and rounded to fp16 (2 bytes per value
  // instead of 4).
  virtual Weight upload_weight_stored(const StoredWeight& w);
  // A token table: its rows are gathered (embed) and never multiplied (not tied to the output head). A device
  // backend may keep it in host memory and gather the rows there, as llama.cpp does (the CUDA backend, for block
  // formats: an 8B Q4_K table is 282 MiB of device memory, a 70B one 591); the default is upload_weight_stored.
  virtual Weight upload_table_stored(const StoredWeight& w) { return upload_weight_stored(w); }
  virtual void free_weight(const Weight& w) = 0;
  // host_dst[n] = the first n values of w, as fp32 (blocks dequantised, 16-bit values widened exactly).
  virtual void download_weight(float* host_dst, const Weight& w, size_t n) = 0;
  // Bytes held by live weights (CPU: 4 per fp32 value, a stored weight's bytes in its file; CUDA: 2 or 4).
  virtual size_t weight_bytes() const = 0;
  // Device memory this backend has allocated, in bytes: weights, activations, scratch, and the freed buffers it keeps
  // for reuse; now and at its peak since it was made. 0 on host backends. By the backend's own count of its
  // allocations: the CUDA context and the libraries' (cuBLAS's) memory are not in it.
  virtual size_t device_bytes_held() const { return 0; }
  virtual size_t device_bytes_peak() const { return 0; }

  // Precision::kFast (focal/device.h) when true: the CUDA backend's tensor-core GEMMs and attention; the CPU backend
  // ignores it (it always computes exact). Set once at load, before any op.
  virtual void set_fast(bool fast) { (void)fast; }

  // Ops (see focal_kernels/ops.h for shapes). ids is a host array.
  virtual void embed(const Weight& table, const int32_t* ids, float* out, int n_tokens, int hidden) = 0;
  virtual void rmsnorm(const float* x, const float* w, float* y, int rows, int n, float eps) = 0;
  virtual void matmul_xwt(const float* x, const Weight& w, float* y, int m, int n, int k) = 0;
  // y_i[m, n_i] = x[m, k] . w_i^T for up to three weights sharing x (Q, K, V; gate, up), in one call so a backend
  // may run them together (the CPU's panel kernel does); by default one matmul_xwt each.
  struct XwtOut {
    const Weight* w;
    float* y;
    int n;
  };
  virtual void matmul_xwt_shared(const float* x, const XwtOut* outs, int n_outs, int m, int k) {
    for (int i = 0; i < n_outs; ++i) matmul_xwt(x, *outs[i].w, outs[i].y, m, outs[i].n, k);
  }
  virtual void add_row_bias(float* y, const float* b, int rows, int n) = 0;
  virtual void rope(float* x, int n_tokens, int n_heads, int d_head, int pos0, float rope_theta) = 0;
  // rope with frequencies inv_freq_host[d_head / 2] (a host array) and cos / sin multiplied by cs_scale.
  virtual void rope_freqs(float* x, int n_tokens, int n_heads, int d_head, int pos0, const float* inv_freq_host,
                          float cs_scale) = 0;
  virtual void layernorm(const float* x, const float* w, const float* b, float* y, int rows, int n, float eps) = 0;
  virtual void swiglu(const float* gate, const float* up, float* out, size_t n) = 0;
  // out[n] = act(gate[n]) * up[n], or act(gate[n]) when up is null (ops::act_mul).
  virtual void act_mul(const float* gate, const float* up, float* out, size_t n, ops::Act act) = 0;
  virtual void softcap(float* x, size_t n, float cap) = 0;  // x = cap * tanh(x / cap)
  virtual void scale(float* x, size_t n, float s) = 0;      // x *= s
  virtual void add_inplace(float* y, const float* x, size_t n) = 0;
  // Copies rows [T, n_kv*d] of new keys/values into the cache [n_kv, stride, d] at positions pos0..pos0+T-1.
  virtual void kv_store(const float* kv, float* cache, int n_tokens, int n_kv_heads, int d_head, int stride,
                        int pos0) = 0;
  // Pairs the forward issues back to back, as one op each: a device backend runs one launch where the defaults run
  // two (a decode step is ~14 launches a layer; the math is the two ops'). rope_freqs on q [T, n_heads * d] and k
  // [T, n_kv_heads * d]; kv_store of k and v; and x += y followed by xn = rmsnorm(x) (the residual and the next norm).
  virtual void rope_freqs_qk(float* q, float* k, int n_tokens, int n_heads, int n_kv_heads, int d_head, int pos0,
                             const float* inv_freq_host, float cs_scale) {
    rope_freqs(q, n_tokens, n_heads, d_head, pos0, inv_freq_host, cs_scale);
    rope_freqs(k, n_tokens, n_kv_heads, d_head, pos0, inv_freq_host, cs_scale);
  }
  virtual void kv_store_pair(const float* k, const float* v, float* k_cache, float* v_cache, int n_tokens,
                             int n_kv_heads, int d_head, int stride, int pos0) {
    kv_store(k, k_cache, n_tokens, n_kv_heads, d_head, stride, pos0);
    kv_store(v, v_cache, n_tokens, n_kv_heads, d_head, stride, pos0);
  }
  virtual void add_rmsnorm(float* x, const float* y, const float* w, float* xn, int rows, int n, float eps) {
    add_inplace(x, y, (size_t)rows * n);
    rmsnorm(x, w, xn, rows, n, eps);
  }
  virtual void attention(const ops::AttentionArgs& a) = 0;
  // Per row of x[rows, n] (backend memory): the k largest values, descending, ties lower index first (ops::topk),
  // into the host arrays idx_host / val_host [rows, k]. 1 <= k <= min(n, 64). Only rows * k pairs reach the host.
  virtual void topk_rows(const float* x, int rows, int n, int k, int32_t* idx_host, float* val_host) = 0;
  // Per row of x[rows, n] (backend memory), into host arrays: lse[rows] = ops::log_sum_exp of the row; its k largest
  // values and their indices, descending, ties lower index first (ops::topk; 1 <= k <= n) into val / idx [rows, k];
  // target_val[rows] = x[row][targets[row]] (targets: a host array; an index < 0 gives NaN). A device computes them
  // where x is: rows * (2k + 2) numbers reach the host instead of rows * n.
  virtual void next_token_rows(const float* x, int rows, int n, int k, const int32_t* targets, float* lse, int32_t* idx,
                               float* val, float* target_val) = 0;
};

std::unique_ptr<Backend> make_cpu_backend();
std::unique_ptr<Backend> make_cuda_backend(int device);  // backend_cuda.cpp; only in builds with FOCAL_CUDA on
enum class Device;
std::unique_ptr<Backend> make_backend(Device d);  // device.cpp: resolves kAuto; kCuda without one throws

// Owns n floats of backend memory (Backend::alloc).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& be, size_t n) : be_(&be), p_(be.alloc(n)), n_(n) {}
  // Takes ownership of p (from be.alloc), which holds n floats.
  DeviceBuffer(Backend& be, float* p, size_t n) : be_(&be), p_(p), n_(n) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept : be_(o.be_), p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      be_ = o.be_;
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }
  void reset() {
    if (p_) be_->free(p_);
    p_ = nullptr;
    n_ = 0;
  }
  float* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  Backend* be_ = nullptr;
  float* p_ = nullptr;
  size_t n_ = 0;
};

// Owns a Weight of a backend (upload_weight, upload_weight_stored) and gives it back on destruction.
class WeightBuffer {
 public:
  WeightBuffer() = default;
  WeightBuffer(Backend& be, Weight w) : be_(&be), w_(std::move(w)) {}
  WeightBuffer(WeightBuffer&& o) noexcept : be_(o.be_), w_(std::move(o.w_)) { o.w_ = Weight{}; }
  WeightBuffer& operator=(WeightBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      be_ = o.be_;
      w_ = std::move(o.w_);
      o.w_ = Weight{};
    }
    return *this;
  }
  WeightBuffer(const WeightBuffer&) = delete;
  WeightBuffer& operator=(const WeightBuffer&) = delete;
  ~WeightBuffer() { reset(); }
  void reset() {
    if (w_) be_->free_weight(w_);
    w_ = Weight{};
  }
  const Weight& get() const { return w_; }

 private:
  Backend* be_ = nullptr;
  Weight w_;
};

}  // namespace focal
