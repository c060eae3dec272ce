// CUDA backend: device memory, one compute stream, cuBLAS, and the kernels of kernels/cuda. Implements the same
// Backend calls as the CPU backend, so the forward (forward.cpp) runs unchanged on it. Compiled only with
// FOCAL_CUDA on.
//
// Memory: a Session plans the forward's device memory once (KV cache and activation Workspace, forward.cpp); freed
// buffers go back to a pool keyed by size, so the next session of that shape and the capture blocks below reuse
// them. Host transfers go through pinned staging buffers. Captured heads (an observer wants their rows) run QK^T and
// PV through cuBLAS with the fused softmax kernel in between; their probabilities and raw scores are copied to
// pinned host memory on a second stream while the next block computes, and handed to the observer by the host's
// threads, blocks of rows in parallel (in 16 bits when the capture stores fp16 probabilities,
// AttentionArgs::probs_fp16). All other heads run the flash-style fused kernel (metrics without T^2 memory).
//
// Weight matrices (upload_weight) keep the file's storage: bf16 and fp16 values stay 16-bit on the device (2 bytes
// per parameter), fp32 ones 4; GGUF blocks of Q4_0, Q4_1, Q8_0, Q4_K, Q5_K and Q6_K stay as the file stores them
// (upload_weight_stored; read by the quantized kernels of ops_cuda.h), except an untied token table, which stays in
// host memory and has its rows gathered there (upload_table_stored); other block formats go up as fp16. The
// backend remembers each weight allocation's type; embed widens table rows as it gathers them, and matmul_xwt
// with a 16-bit w either runs the 16-bit matrix-vector kernel (m <= 8 rows: decode, short prompts; w read once in
// 16 bits) or widens blocks of w's rows into an fp32 scratch (at most 64 MiB) and
// multiplies them with cuBLAS in fp32 (cublasGemmEx has no mixed fp32 x / 16-bit w form). Arithmetic is fp32 in
// the exact precision. In the fast precision (set_fast, focal/device.h) x is rounded to w's 16-bit type and the
// product runs on tensor cores (fp32 weights: TF32), a decode product with a quantized w keeps x in fp32
// (FOCAL_CUDA_DECODE_X8=1 takes it in int8 as llama.cpp does, FOCAL_CUDA_DECODE_X16=1 in two int8 digits: opt-in,
// see use_x8), and prefill attention runs the
// tiled tensor-core kernel
// (cuda_ops::attention_tc); captured heads keep the fp32 cuBLAS + softmax path, so their stored rows are exact
// softmax rows of fp32 scores.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backend.h"
#include "focal/error.h"
#include "focal/log.h"
#include "focal_kernels/ops_cuda.h"
#include "focal_kernels/quant_blocks.h"
#include "focal_kernels/shared_math.h"
#include "safetensors.h"

namespace focal {

namespace {

// Every CUDA runtime and cuBLAS call goes through FOCAL_CUDA_CHECK: a failure throws an Error naming the call, the
// library's error name and text, and the file:line of the check (as ggml's CUDA_CHECK and llm.c's cudaCheck do).
const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) {
    // A failed runtime call also leaves its (non-sticky) error in the thread's last-error slot, which the next kernel
    // launch's check reads: clear it so that an error that was caught and handled (a device that cannot be opened)
    // does not resurface as a later, unrelated kernel's failure.
    (void)cudaGetLastError();
    throw Error(std::string("CUDA backend: ") + what + " failed: " + cudaGetErrorName(e) + " (" +
                cudaGetErrorString(e) + ") at " + base_name(file) + ":" + std::to_string(line));
  }
}

void cuda_check(cublasStatus_t s, const char* what, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("CUDA backend: ") + what + " failed: " + cublasGetStatusName(s) + " (" +
                cublasGetStatusString(s) + ") at " + base_name(file) + ":" + std::to_string(line));
}

#define FOCAL_CUDA_CHECK(call, what) cuda_check((call), (what), __FILE__, __LINE__)

// Pinned host memory that grows on demand.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (p_) cudaFreeHost(p_);
  }
  float* get(size_t n_floats) {
    if (n_floats > n_) {
      if (p_) FOCAL_CUDA_CHECK(cudaFreeHost(p_), "cudaFreeHost");
      p_ = nullptr;
      n_ = 0;
      void* p = nullptr;
      FOCAL_CUDA_CHECK(cudaMallocHost(&p, n_floats * sizeof(float)), "cudaMallocHost (pinned staging buffer)");
      p_ = static_cast<float*>(p);
      n_ = n_floats;
    }
    return p_;
  }

 private:
  float* p_ = nullptr;
  size_t n_ = 0;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) {
    FOCAL_CUDA_CHECK(cudaSetDevice(device), "cudaSetDevice");
    FOCAL_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    FOCAL_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "cudaStreamCreate (copy stream)");
    for (int b = 0; b < 2; ++b) {
      FOCAL_CUDA_CHECK(cudaEventCreateWithFlags(&computed_[b], cudaEventDisableTiming), "cudaEventCreate");
      FOCAL_CUDA_CHECK(cudaEventCreateWithFlags(&copied_[b], cudaEventDisableTiming), "cudaEventCreate");
    }
    FOCAL_CUDA_CHECK(cublasCreate(&blas_), "cublasCreate");
    FOCAL_CUDA_CHECK(cublasSetStream(blas_, stream_), "cublasSetStream");
    // fp32 GEMMs in full fp32 (no TF32), as the CPU path.
    FOCAL_CUDA_CHECK(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    ctx_.stream = stream_;
    ctx_.blas = blas_;
  }

  ~CudaBackend() override {
    widened_.reset();
    narrowed_.reset();
    tc_state_.reset();
    tc_stage_.reset();
    split_scratch_.reset();
    x8_.reset();
    stats_.reset();
    freq_.reset();
    topk_val_.reset();
    if (recording_) record_abort();
    for (cudaGraphExec_t e : seg_exec_)
      if (e) cudaGraphExecDestroy(e);
    for (const ArenaChunk& a : arena_) cudaFreeHost(a.host);
    for (auto& slot : blocks_)
      for (DeviceBuffer& buf : slot) buf.reset();
    cudaStreamSynchronize(stream_);
    cudaStreamSynchronize(copy_stream_);
    for (auto& kv : pool_) cudaFree(kv.second);
    for (auto& kv : live_) cudaFree(kv.first);
    if (ids_) cudaFree(ids_);
    if (rel_) cudaFree(rel_);
    if (skip_) cudaFree(skip_);
    if (topk_idx_) cudaFree(topk_idx_);
    for (int b = 0; b < 2; ++b) {
      cudaEventDestroy(computed_[b]);
      cudaEventDestroy(copied_[b]);
    }
    for (UploadSlot& u : upload_slots_)
      if (u.host) {
        cudaFreeHost(u.host);
        cudaEventDestroy(u.done);
      }
    cublasDestroy(blas_);
    cudaStreamDestroy(copy_stream_);
    cudaStreamDestroy(stream_);
  }

  const char* name() const override { return "cuda"; }

  float* alloc(size_t n) override { return alloc_bytes((n ? n : 1) * sizeof(float)); }

  void free(float* p) override {
    auto it = live_.find(p);  // the allocator's own table (sizes for the pool), not a weight lookup
    if (it == live_.end()) return;
    pool_.emplace(it->second, p);
    live_.erase(it);
  }

  Weight upload_weight(const void* src, WeightType type, size_t n) override {
    Weight w;
    w.form = type == WeightType::kBF16  ? Weight::Form::kBF16
             : type == WeightType::kF16 ? Weight::Form::kF16
                                        : Weight::Form::kF32;
    const size_t value_bytes = type == WeightType::kF32 ? sizeof(float) : sizeof(uint16_t);
    float* p = alloc_bytes((n ? n : 1) * value_bytes);
    if (n) FOCAL_CUDA_CHECK(cudaMemcpyAsync(p, src, n * value_bytes, cudaMemcpyHostToDevice, stream_), "upload_weight");
    w.data = p;
    w.n = n;
    w.bytes = live_[p];
    weight_bytes_ += w.bytes;
    return w;
  }
  void free_weight(const Weight& w) override {
    weight_bytes_ -= w.bytes;
    free(static_cast<float*>(w.data));
  }

  // Blocks of a format with device kernels (quant_blocks.h) go up as the file stores them, rows in order (the row
  // map applied); anything else (fp16 / bf16, other block formats) through the default (16-bit).
  Weight upload_weight_stored(const StoredWeight& w) override {
    if (!qblocks::sub32_supported(w.type) || w.panels || w.cols % 32 != 0) return Backend::upload_weight_stored(w);
    const size_t bytes = (size_t)w.rows * w.row_bytes;
    float* p = alloc_bytes(bytes ? bytes : 1);
    // On the compute stream, after alloc_bytes' zeroing of p (a plain cudaMemcpy would run on the legacy stream,
    // unordered with it), and waited for: the host rows may go away.
    std::vector<uint8_t> rows;
    const uint8_t* src = w.data;
    if (!w.row_map.empty()) {
      rows.resize(bytes);
      rows_in_order(w, rows.data());
      src = rows.data();
    }
    FOCAL_CUDA_CHECK(cudaMemcpyAsync(p, src, bytes, cudaMemcpyHostToDevice, stream_), "upload_weight_stored");
    FOCAL_CUDA_CHECK(cudaStreamSynchronize(stream_), "upload_weight_stored (cudaStreamSynchronize)");
    auto desc = std::make_shared<BlockRows>();
    Weight out = blocks_weight(w, reinterpret_cast<const uint8_t*>(p), live_[p], std::move(desc));
    out.data = p;
    return out;
  }

  // A token table in a block format stays in host memory, its rows in order (embed dequantises the rows it gathers
  // there and uploads them: [n_tokens, hidden] floats a call); counted in weight_bytes, not in the device's bytes.
  Weight upload_table_stored(const StoredWeight& w) override {
    if (!qblocks::sub32_supported(w.type) || w.panels || w.cols % 32 != 0) return upload_weight_stored(w);
    auto desc = std::make_shared<BlockRows>();
    desc->host.resize((size_t)w.rows * w.row_bytes);
    rows_in_order(w, desc->host.data());
    desc->on_host = true;
    const uint8_t* data = desc->host.data();
    const size_t bytes = desc->host.size();
    return blocks_weight(w, data, bytes, std::move(desc));
  }

  size_t weight_bytes() const override { return weight_bytes_; }
  size_t device_bytes_held() const override { return held_bytes_; }
  size_t device_bytes_peak() const override { return peak_bytes_; }

  // A copy from pageable memory waits for the stream to drain first, so the host could not run ahead of the GPU: the
  // forward's small per-layer uploads (row scales, RoPE frequencies, a few KB) go through a ring of pinned slots
  // instead, each reused once the copy last issued from it has completed (its event).
  void upload(float* dst, const float* src, size_t n) override {
    if (!n) return;
    if (recording_) {  // copied now into pinned memory that stays as it is until the recorded step has run
      float* held = arena_floats(n);
      std::memcpy(held, src, n * sizeof(float));
      FOCAL_CUDA_CHECK(cudaMemcpyAsync(dst, held, n * sizeof(float), cudaMemcpyHostToDevice, stream_),
                       "upload (recorded)");
      return;
    }
    if (n > kUploadSlotFloats) {
      FOCAL_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyHostToDevice, stream_), "upload");
      return;
    }
    UploadSlot& slot = upload_slots_[upload_next_];
    upload_next_ = (upload_next_ + 1) % kUploadSlots;
    if (!slot.host) {
      void* p = nullptr;
      FOCAL_CUDA_CHECK(cudaMallocHost(&p, kUploadSlotFloats * sizeof(float)), "cudaMallocHost (upload slot)");
      slot.host = static_cast<float*>(p);
      FOCAL_CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming), "cudaEventCreate");
    } else {
      FOCAL_CUDA_CHECK(cudaEventSynchronize(slot.done), "upload (slot reuse)");
    }
    std::memcpy(slot.host, src, n * sizeof(float));
    FOCAL_CUDA_CHECK(cudaMemcpyAsync(dst, slot.host, n * sizeof(float), cudaMemcpyHostToDevice, stream_), "upload");
    FOCAL_CUDA_CHECK(cudaEventRecord(slot.done, stream_), "cudaEventRecord");
  }

  void download_weight(float* dst, const Weight& w, size_t n) override {
    n = std::min(n, w.n);
    if (!n) return;
    if (w.form == Weight::Form::kBlocks && w.blocks->on_host) {  // a host-held table: dequantised here, into dst
      const ops::QMatrix& q = w.blocks->q;
      const int64_t full = (int64_t)(n / (size_t)q.cols), rest = (int64_t)(n % (size_t)q.cols);
      if (full > 0) ops::dequant_rows(q, 0, full, dst);
      if (rest > 0) {  // the first values of one more row
        std::vector<float> row((size_t)q.cols);
        ops::dequant_rows(q, full, 1, row.data());
        std::memcpy(dst + (size_t)full * q.cols, row.data(), (size_t)rest * sizeof(float));
      }
      return;
    }
    if (w.form == Weight::Form::kBlocks) {  // its values, dequantised on the device
      const cuda_ops::QWeight q = qweight_of(w);
      DeviceBuffer f(*this, (size_t)q.rows * q.cols);
      FOCAL_CUDA_CHECK(cuda_ops::dequant_rows(ctx_, q, 0, q.rows, f.data(), CUDA_R_32F), "dequant kernel");
      download(dst, f.data(), std::min(n, f.size()));
      return;
    }
    if (w.form != Weight::Form::kF32) {  // n values of 2 bytes, widened here exactly as on the device
      uint16_t* stage16 = reinterpret_cast<uint16_t*>(staging_.get((n + 1) / 2));
      FOCAL_CUDA_CHECK(cudaMemcpyAsync(stage16, w.data, n * sizeof(uint16_t), cudaMemcpyDeviceToHost, stream_),
                       "download");
      FOCAL_CUDA_CHECK(cudaStreamSynchronize(stream_), "download (cudaStreamSynchronize)");
      for (size_t i = 0; i < n; ++i)
        dst[i] =
            w.form == Weight::Form::kBF16 ? math::bf16_bits_to_float(stage16[i]) : math::half_bits_to_float(stage16[i]);
      return;
    }
    download(dst, w.f32(), n);
  }

  void download(float* dst, const float* src, size_t n) override {
    if (!n) return;
    float* stage = staging_.get(n);
    FOCAL_CUDA_CHECK(cudaMemcpyAsync(stage, src, n * sizeof(float), cudaMemcpyDeviceToHost, stream_), "download");
    FOCAL_CUDA_CHECK(cudaStreamSynchronize(stream_), "download (cudaStreamSynchronize)");
    std::memcpy(dst, stage, n * sizeof(float));
  }

  void synchronize() override { FOCAL_CUDA_CHECK(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }

  // A decode step as CUDA graphs, one a layer and one for the head: its launches (a few hundred on an 8B model, each a
  // few microseconds of host work and a gap on the device) captured on the stream a layer at a time, each replayed by
  // one launch as soon as it is captured, so the device runs a layer while the host captures the next. Captured anew
  // at every step, since positions, key counts and grids change; a segment's executable graph is updated in place
  // when the capture has the same nodes as that segment's last (every step between two changes of the attention's
  // kernels) and made again otherwise.
  bool record_begin(int segment) override {
    if (!graphs_ || recording_ || segment < 0) return false;
    if (segment == 0) {  // a step's first: the last step's recorded uploads have been read once the stream is idle
      FOCAL_CUDA_CHECK(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
      arena_at_ = {0, 0};
    }
    if ((size_t)segment >= seg_exec_.size()) seg_exec_.resize((size_t)segment + 1, nullptr);
    FOCAL_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
    recording_ = true;
    segment_ = segment;
    return true;
  }
  bool record_end() override {
    if (!recording_) return true;
    recording_ = false;
    cudaGraphExec_t& exec = seg_exec_[(size_t)segment_];
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(stream_, &graph);
    // (an update leaves a launch of exec still in flight as it was: it changes later launches)
    if (e == cudaSuccess && graph && exec) {
      cudaGraphExecUpdateResultInfo info;
      if (cudaGraphExecUpdate(exec, graph, &info) != cudaSuccess) {  // other nodes: instantiated again
        cudaGetLastError();
        cudaGraphExecDestroy(exec);
        exec = nullptr;
      }
    }
    if (e == cudaSuccess && graph && !exec) e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph) cudaGraphDestroy(graph);
    if (e != cudaSuccess || !exec) {
      cudaGetLastError();
      graphs_ = false;
      freq_held_.clear();  // its upload was recorded, never run
      log_warning(std::string("CUDA backend: recording a decode step as CUDA graphs failed (") + cudaGetErrorName(e) +
                  "); the step runs again without them, and so do the next (FOCAL_CUDA_GRAPHS=0 does this from the "
                  "start)");
      return false;
    }
    FOCAL_CUDA_CHECK(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch (a recorded part of a decode step)");
    return true;
  }
  void record_abort() override {
    if (!recording_) return;
    recording_ = false;
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(stream_, &graph);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    freq_held_.clear();
  }

  void embed(const Weight& table, const int32_t* ids, float* out, int n_tokens, int hidden) override {
    if (table.form == Weight::Form::kBlocks && table.blocks->on_host) {  // rows gathered on the host, then uploaded
      const ops::QMatrix& q = table.blocks->q;
      table_rows_.resize((size_t)n_tokens * hidden);
      float* rows = table_rows_.data();
#pragma omp parallel for schedule(static) if (n_tokens >= 64)
      for (int t = 0; t < n_tokens; ++t) ops::dequant_rows(q, ids[t], 1, rows + (size_t)t * hidden);
      upload(out, rows, (size_t)n_tokens * hidden);
      return;
    }
    int32_t* d_ids = device_ints(ids_, ids_n_, n_tokens);
    FOCAL_CUDA_CHECK(cudaMemcpyAsync(d_ids, ids, (size_t)n_tokens * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
                     "embed (token ids upload)");
    if (table.form == Weight::Form::kBlocks) {
      FOCAL_CUDA_CHECK(cuda_ops::embed_q(ctx_, qweight_of(table), d_ids, out, n_tokens),
                       "embed kernel (quantized table)");
      return;
    }
    FOCAL_CUDA_CHECK(
        cuda_ops::embed(ctx_, static_cast<const float*>(table.data), dtype_of(table), d_ids, out, n_tokens, hidden),
        "embed kernel");
  }
  void rmsnorm(const float* x, const float* w, float* y, int rows, int n, float eps) override {
    FOCAL_CUDA_CHECK(cuda_ops::rmsnorm(ctx_, x, w, y, rows, n, eps), "rmsnorm kernel");
  }
  void set_fast(bool fast) override { fast_ = fast; }

  // Quantized weights of one type sharing x, in decode (m <= kMatvecMaxRows): one matrix-vector launch for all of
  // them (Q, K, V; gate, up), so the narrow K and V matrices fill the card together with Q; else one at a time.
  void matmul_xwt_shared(const float* x, const XwtOut* outs, int n_outs, int m, int k) override {
    bool together = m <= cuda_ops::kMatvecMaxRows && n_outs <= cuda_ops::kMatvecSetMax;
    cuda_ops::QWeight ws[cuda_ops::kMatvecSetMax];
    float* ys[cuda_ops::kMatvecSetMax];
    for (int i = 0; together && i < n_outs; ++i) {
      together = outs[i].w->form == Weight::Form::kBlocks;
      if (!together) break;
      ws[i] = qweight_of(*outs[i].w);
      ys[i] = outs[i].y;
      together = ws[i].type == ws[0].type && ws[i].cols == k && ws[i].rows == outs[i].n;
    }
    if (!together) {
      Backend::matmul_xwt_shared(x, outs, n_outs, m, k);
      return;
    }
    if (use_x8(ws[0], m)) {
      FOCAL_CUDA_CHECK(
          cuda_ops::matvec_q_set_x8(ctx_, x, ws, ys, n_outs, x8_scratch(k), decode_x_.in_kernel, decode_x_.digits),
          "matmul (quantized matrix-vector kernel, int8 x)");
      return;
    }
    FOCAL_CUDA_CHECK(cuda_ops::matvec_q_set(ctx_, x, ws, ys, n_outs, m), "matmul (quantized matrix-vector kernel)");
  }

  void matmul_xwt(const float* x, const Weight& weight, float* y, int m, int n, int k) override {
    if (weight.form == Weight::Form::kBlocks) {
      matmul_xwt_quantized(x, qweight_of(weight), y, m, n, k);
      return;
    }
    const cudaDataType dt = dtype_of(weight);
    const float* w = static_cast<const float*>(weight.data);  // cuda_ops' typed pointer to the dt values
    if (dt == CUDA_R_32F) {
      if (fast_)
        FOCAL_CUDA_CHECK(cuda_ops::matmul_xwt_tf32(ctx_, x, w, y, m, n, k), "matmul (cublasGemmEx, TF32)");
      else
        FOCAL_CUDA_CHECK(cuda_ops::matmul_xwt(ctx_, x, w, y, m, n, k), "matmul (cublasGemmEx)");
      return;
    }
    if (m <= cuda_ops::kMatvecMaxRows) {
      FOCAL_CUDA_CHECK(cuda_ops::matvec_xwt16(ctx_, x, w, dt, y, m, n, k), "matmul (16-bit matrix-vector kernel)");
      return;
    }
    if (fast_) {  // x rounded to w's 16-bit type, both on tensor cores with fp32 accumulation
      const size_t need = ((size_t)m * k + 1) / 2;  // 16-bit values in float units
      if (narrowed_.size() < need) narrowed_ = DeviceBuffer(*this, need);
      FOCAL_CUDA_CHECK(cuda_ops::narrow(ctx_, x, dt, narrowed_.data(), (size_t)m * k), "narrow kernel");
      FOCAL_CUDA_CHECK(cuda_ops::matmul_xwt_16(ctx_, narrowed_.data(), w, dt, y, m, n, k),
                       "matmul (cublasGemmEx, 16-bit tensor cores)");
      return;
    }
    // Blocks of w's rows [rows, k] widened to fp32, each giving y's columns j0..j0+rows-1 (row stride n).
    constexpr size_t kWidenFloats = size_t(1) << 24;  // 64 MiB of scratch at most
    const int block_rows = (int)std::max<size_t>(1, std::min<size_t>((size_t)n, kWidenFloats / (size_t)std::max(k, 1)));
    const size_t need = (size_t)block_rows * k;
    if (widened_.size() < need) widened_ = DeviceBuffer(*this, need);  // the old one is pooled, stream-ordered
    const uint16_t* w16 = reinterpret_cast<const uint16_t*>(w);
    for (int j0 = 0; j0 < n; j0 += block_rows) {
      const int rows = std::min(block_rows, n - j0);
      FOCAL_CUDA_CHECK(cuda_ops::widen(ctx_, w16 + (size_t)j0 * k, dt, widened_.data(), (size_t)rows * k),
                       "widen kernel");
      FOCAL_CUDA_CHECK(cuda_ops::matmul_xwt(ctx_, x, widened_.data(), y + j0, m, rows, k, n), "matmul (cublasGemmEx)");
    }
  }
  void add_row_bias(float* y, const float* b, int rows, int n) override {
    FOCAL_CUDA_CHECK(cuda_ops::add_row_bias(ctx_, y, b, rows, n), "add_row_bias kernel");
  }
  void rope(float* x, int n_tokens, int n_heads, int d_head, int pos0, float theta) override {
    FOCAL_CUDA_CHECK(cuda_ops::rope(ctx_, x, n_tokens, n_heads, d_head, pos0, theta), "rope kernel");
  }
  void rope_freqs(float* x, int n_tokens, int n_heads, int d_head, int pos0, const float* inv_freq,
                  float cs_scale) override {
    upload_freqs(inv_freq, (size_t)d_head / 2);
    FOCAL_CUDA_CHECK(cuda_ops::rope_freqs(ctx_, x, n_tokens, n_heads, d_head, pos0, freq_.data(), cs_scale),
                     "rope kernel");
  }
  void rope_freqs_qk(float* q, float* k, int n_tokens, int n_heads, int n_kv_heads, int d_head, int pos0,
                     const float* inv_freq, float cs_scale) override {
    upload_freqs(inv_freq, (size_t)d_head / 2);
    FOCAL_CUDA_CHECK(
        cuda_ops::rope_freqs_qk(ctx_, q, k, n_tokens, n_heads, n_kv_heads, d_head, pos0, freq_.data(), cs_scale),
        "rope kernel (queries and keys)");
  }
  void kv_store_pair(const float* k, const float* v, float* k_cache, float* v_cache, int n_tokens, int n_kv_heads,
                     int d_head, int stride, int pos0) override {
    FOCAL_CUDA_CHECK(cuda_ops::kv_store_pair(ctx_, k, v, k_cache, v_cache, n_tokens, n_kv_heads, d_head, stride, pos0),
                     "kv_store kernel (keys and values)");
  }
  void add_rmsnorm(float* x, const float* y, const float* w, float* xn, int rows, int n, float eps) override {
    FOCAL_CUDA_CHECK(cuda_ops::add_rmsnorm(ctx_, x, y, w, xn, rows, n, eps), "add + rmsnorm kernel");
  }
  void layernorm(const float* x, const float* w, const float* b, float* y, int rows, int n, float eps) override {
    FOCAL_CUDA_CHECK(cuda_ops::layernorm(ctx_, x, w, b, y, rows, n, eps), "layernorm kernel");
  }
  void act_mul(const float* gate, const float* up, float* out, size_t n, ops::Act act) override {
    FOCAL_CUDA_CHECK(cuda_ops::act_mul(ctx_, gate, up, out, n, (int)act), "activation kernel");
  }
  void softcap(float* x, size_t n, float cap) override {
    FOCAL_CUDA_CHECK(cuda_ops::softcap(ctx_, x, n, cap), "soft-cap kernel");
  }
  void scale(float* x, size_t n, float s) override { FOCAL_CUDA_CHECK(cuda_ops::scale(ctx_, x, n, s), "scale kernel"); }
  void swiglu(const float* gate, const float* up, float* out, size_t n) override {
    FOCAL_CUDA_CHECK(cuda_ops::swiglu(ctx_, gate, up, out, n), "swiglu kernel");
  }
  void add_inplace(float* y, const float* x, size_t n) override {
    FOCAL_CUDA_CHECK(cuda_ops::add_inplace(ctx_, y, x, n), "add kernel");
  }
  void kv_store(const float* kv, float* cache, int n_tokens, int n_kv_heads, int d_head, int stride,
                int pos0) override {
    FOCAL_CUDA_CHECK(cuda_ops::kv_store(ctx_, kv, cache, n_tokens, n_kv_heads, d_head, stride, pos0),
                     "kv_store kernel");
  }

  void topk_rows(const float* x, int rows, int n, int k, int32_t* idx, float* val) override {
    if (k < 1 || k > n || k > 64) throw Error("topk_rows: k = " + std::to_string(k) + " is outside 1..min(n, 64)");
    if (rows <= 0) return;
    const size_t nk = (size_t)rows * k;
    int32_t* d_idx = device_ints(topk_idx_, topk_idx_n_, (int)nk);
    if (topk_val_.size() < nk) topk_val_ = DeviceBuffer(*this, nk);
    FOCAL_CUDA_CHECK(cuda_ops::topk_rows(ctx_, x, rows, n, k, d_idx, topk_val_.data()), "top-k kernel");
    float* stage = staging_.get(2 * nk);  // [values | indices]
    FOCAL_CUDA_CHECK(cudaMemcpyAsync(stage, topk_val_.data(), nk * sizeof(float), cudaMemcpyDeviceToHost, stream_),
                     "top-k download");
    FOCAL_CUDA_CHECK(cudaMemcpyAsync(stage + nk, d_idx, nk * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_),
                     "top-k download");
    FOCAL_CUDA_CHECK(cudaStreamSynchronize(stream_), "top-k (cudaStreamSynchronize)");
    std::memcpy(val, stage, nk * sizeof(float));
    std::memcpy(idx, stage + nk, nk * sizeof(int32_t));
  }

  void next_token_rows(const float* x, int rows, int n, int k, const int32_t* targets, float* lse, int32_t* idx,
                       float* val, float* target_val) override {
    if (k < 1 || k > n) throw Error("next_token_rows: k = " + std::to_string(k) + " is outside 1..n");
    if (rows <= 0) return;
    int32_t* d_targets = device_ints(ids_, ids_n_, rows);
    FOCAL_CUDA_CHECK(
        cudaMemcpyAsync(d_targets, targets, (size_t)rows * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
        "next-token targets upload");
    if (stats_.size() < 2 * (size_t)rows) stats_ = DeviceBuffer(*this, 2 * (size_t)rows);
    FOCAL_CUDA_CHECK(cuda_ops::row_lse_target(ctx_, x, rows, n, d_targets, stats_.data()),
                     "log-sum-exp kernel (next-token rows)");
    std::vector<float> pairs(2 * (size_t)rows);  // [rows][lse, target value]
    download(pairs.data(), stats_.data(), pairs.size());
    for (int r = 0; r < rows; ++r) {
      lse[r] = pairs[2 * (size_t)r];
      target_val[r] = pairs[2 * (size_t)r + 1];
    }
    if (k <= 64) {
      topk_rows(x, rows, n, k, idx, val);
      return;
    }
    // More than the kernel's 64: the rows go to the host for ops::topk (a request of that many is rare).
    std::vector<float> xh((size_t)rows * n);
    download(xh.data(), x, xh.size());
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; ++r) ops::topk(xh.data() + (size_t)r * n, n, k, idx + (size_t)r * k, val + (size_t)r * k);
  }

  void attention(const ops::AttentionArgs& a) override {
    const int T = a.n_tokens;
    if (T <= 0) return;
    const int d = a.d_head, q_stride = a.n_heads * d;
    const int group = a.n_heads / a.n_kv_heads;
    cuda_ops::RowArgs ra;
    ra.n_tokens = T;
    ra.n_past = a.n_past;
    ra.row_scale = a.row_scale;
    ra.metrics = a.metrics;
    ra.topk = a.topk;
    ra.logit_scale = a.logit_scale;
    ra.softcap = a.softcap;
    ra.window = a.window;
    ra.n_relevant = a.metrics ? a.n_relevant : 0;
    if (ra.n_relevant > 0) {
      int32_t* d_rel = device_ints(rel_, rel_n_, ra.n_relevant);
      FOCAL_CUDA_CHECK(
          cudaMemcpyAsync(d_rel, a.relevant, (size_t)ra.n_relevant * sizeof(int32_t), cudaMemcpyHostToDevice, stream_),
          "attention (relevant keys upload)");
      ra.relevant = d_rel;
    }

    std::vector<int> captured;  // heads whose rows go to row_fn
    std::vector<uint8_t> skip(a.n_heads, 0);
    if (a.row_fn && a.head_wanted)
      for (int h = 0; h < a.n_heads; ++h)
        if (a.head_wanted[h]) {
          captured.push_back(h);
          skip[h] = 1;
        }
    if ((int)captured.size() < a.n_heads) {
      const uint8_t* d_skip = nullptr;
      if (!captured.empty()) {
        if (skip_n_ < (size_t)a.n_heads) {
          if (skip_) FOCAL_CUDA_CHECK(device_free(skip_, skip_n_), "cudaFree");
          skip_ = nullptr;
          void* p = nullptr;
          FOCAL_CUDA_CHECK(device_malloc(&p, (size_t)a.n_heads), "cudaMalloc");
          skip_ = static_cast<uint8_t*>(p);
          skip_n_ = (size_t)a.n_heads;
        }
        FOCAL_CUDA_CHECK(cudaMemcpyAsync(skip_, skip.data(), (size_t)a.n_heads, cudaMemcpyHostToDevice, stream_),
                         "attention (head mask upload)");
        d_skip = skip_;
      }
      // Fast mode: the tiled tensor-core kernel for prefill-sized calls (a block takes 128 rows); decode's few rows
      // go to the split kernel past a few hundred keys, else to the per-row kernel, in either precision.
      if (fast_ && T >= kTcMinRows && cuda_ops::attention_tc_supported(d)) {
        float* state = nullptr;
        if (a.metrics) {
          const size_t need = (size_t)a.n_heads * T * 3;
          if (tc_state_.size() < need) tc_state_ = DeviceBuffer(*this, need);
          state = tc_state_.data();
        }
        const size_t stage_floats =
            (cuda_ops::attention_tc_stage_bytes(a.n_kv_heads, a.n_past + T, d) + sizeof(float) - 1) / sizeof(float);
        if (tc_stage_.size() < stage_floats) tc_stage_ = DeviceBuffer(*this, stage_floats);
        FOCAL_CUDA_CHECK(cuda_ops::attention_tc(ctx_, ra, a.q, a.k_cache, a.v_cache, a.cache_stride, a.n_heads,
                                                a.n_kv_heads, d, d_skip, state, tc_stage_.data(), a.out),
                         "tensor-core attention kernel");
      } else if (split_attn_ && T <= cuda_ops::kAttentionSplitMaxRows &&
                 a.n_past + T >= cuda_ops::kAttentionSplitMinKeys) {
        // Decode past a few hundred keys: the keys split over the card, each GQA group's K and V read once.
        // The need grows with every key (the rows' logits, the chunks): a power of two, so that a decode loop
        // allocates a new scratch a few times, not at every token (the pool matches sizes exactly).
        const size_t need = cuda_ops::attention_split_scratch_floats(ra, a.n_heads, a.n_kv_heads, d);
        if (split_scratch_.size() < need) {
          size_t floats = 1024;
          while (floats < need) floats *= 2;
          split_scratch_ = DeviceBuffer(*this, floats);
        }
        FOCAL_CUDA_CHECK(cuda_ops::attention_split(ctx_, ra, a.q, a.k_cache, a.v_cache, a.cache_stride, a.n_heads,
                                                   a.n_kv_heads, d, d_skip, split_scratch_.data(), a.out),
                         "split decode attention kernel");
      } else {
        FOCAL_CUDA_CHECK(cuda_ops::attention_fused(ctx_, ra, a.q, a.k_cache, a.v_cache, a.cache_stride, a.n_heads,
                                                   a.n_kv_heads, d, d_skip, a.out),
                         "fused attention kernel");
      }
    }
    if (captured.empty()) return;

    // Captured heads in blocks of rows: scores [rows, n_keys] of at most kMaxBlockFloats floats per block. Four such
    // buffers live on the device (scores and probabilities, double-buffered), 128 MiB in all; 2048 rows of 4096 keys
    // a block still make GEMMs that fill the card.
    constexpr size_t kMaxBlockFloats = size_t(1) << 23;  // 32 MiB per score buffer
    const int n_ctx = a.n_past + T;
    const int block_rows = (int)std::max<size_t>(1, std::min<size_t>((size_t)T, kMaxBlockFloats / (size_t)n_ctx));
    const size_t block_floats = (size_t)block_rows * n_ctx;
    struct Chunk {
      int head, r0, n_rows, n_keys;
    };
    std::vector<Chunk> chunks;
    for (int h : captured)
      for (int r0 = 0; r0 < T; r0 += block_rows) {
        const int nr = std::min(block_rows, T - r0);
        chunks.push_back(Chunk{h, r0, nr, a.n_past + r0 + nr});
      }
    // With probs_fp16 the kernel also writes the probabilities as fp16 bits and only those cross to the host (half
    // the bytes); the host widens them exactly before handing them on.
    const bool fp16 = a.probs_fp16;
    const size_t half_floats = (block_floats + 1) / 2;  // fp16 block in float units
    float* dev_raw[2];
    float* dev_probs[2];
    uint16_t* dev_probs16[2] = {nullptr, nullptr};
    float* host_raw[2];
    float* host_probs[2];
    uint16_t* host_probs16[2] = {nullptr, nullptr};
    for (int b = 0; b < 2; ++b) {
      dev_raw[b] = device_floats(b, 0, block_floats);
      dev_probs[b] = device_floats(b, 1, block_floats);
      host_raw[b] = pinned_[b][0].get(block_floats);
      host_probs[b] = pinned_[b][1].get(block_floats);
      if (fp16) {
        dev_probs16[b] = reinterpret_cast<uint16_t*>(device_floats(b, 2, half_floats));
        host_probs16[b] = reinterpret_cast<uint16_t*>(pinned_[b][2].get(half_floats));
      }
    }
    // Chunk i's rows to the observer, in blocks of kDeliverRows rows over the host's threads (the observer takes
    // disjoint (head, row block)s concurrently, ForwardObserver): a layer's captured rows are GBs at T = 4096 (the
    // app's propagate), which one thread copied into the run at a few GB/s while the device waited on the slot.
    auto deliver = [&](size_t i) {
      const int b = (int)(i & 1);
      const Chunk& ch = chunks[i];
      FOCAL_CUDA_CHECK(cudaEventSynchronize(copied_[b]), "attention (capture copy)");
      constexpr int kDeliverRows = 32;
      const int n_blocks = (ch.n_rows + kDeliverRows - 1) / kDeliverRows;
      const size_t bytes = (size_t)ch.n_rows * ch.n_keys * sizeof(float);
#pragma omp parallel for schedule(dynamic) if (n_blocks > 1 && bytes >= (size_t(1) << 20))
      for (int blk = 0; blk < n_blocks; ++blk) {
        const int r0 = blk * kDeliverRows, nr = std::min(kDeliverRows, ch.n_rows - r0);
        const size_t off = (size_t)r0 * ch.n_keys, nf = (size_t)nr * ch.n_keys;
        if (fp16)
          for (size_t j = off; j < off + nf; ++j) host_probs[b][j] = math::half_bits_to_float(host_probs16[b][j]);
        a.row_fn(a.row_ctx, ch.head, a.n_past + ch.r0 + r0, nr, ch.n_keys, host_probs[b] + off, host_raw[b] + off);
      }
    };
    for (size_t i = 0; i < chunks.size(); ++i) {
      const int b = (int)(i & 1);
      const Chunk& ch = chunks[i];
      const int kvh = ch.head / group;
      const float* kh = a.k_cache + (size_t)kvh * a.cache_stride * d;
      const float* vh = a.v_cache + (size_t)kvh * a.cache_stride * d;
      // Slot b's device buffers are free once the copy issued two chunks ago has finished.
      if (i >= 2) FOCAL_CUDA_CHECK(cudaStreamWaitEvent(stream_, copied_[b], 0), "cudaStreamWaitEvent");
      FOCAL_CUDA_CHECK(cuda_ops::attn_scores(ctx_, a.q + (size_t)ch.r0 * q_stride + (size_t)ch.head * d, q_stride, kh,
                                             dev_raw[b], ch.n_rows, ch.n_keys, d, a.logit_scale),
                       "attention scores (cublasGemmEx)");
      FOCAL_CUDA_CHECK(cuda_ops::softmax_rows(ctx_, ra, ch.head, ch.r0, ch.n_rows, ch.n_keys, dev_raw[b], dev_probs[b],
                                              dev_probs16[b]),
                       "softmax kernel");
      FOCAL_CUDA_CHECK(cuda_ops::attn_pv(ctx_, dev_probs[b], vh, a.out + (size_t)ch.r0 * q_stride + (size_t)ch.head * d,
                                         q_stride, ch.n_rows, ch.n_keys, d),
                       "attention PV (cublasGemmEx)");
      FOCAL_CUDA_CHECK(cudaEventRecord(computed_[b], stream_), "cudaEventRecord");
      // The host has handed chunk i - 2 (same pinned slot) to the observer already: copy into it on the copy stream.
      FOCAL_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, computed_[b], 0), "cudaStreamWaitEvent");
      const size_t nf = (size_t)ch.n_rows * ch.n_keys;
      if (fp16)
        FOCAL_CUDA_CHECK(cudaMemcpyAsync(host_probs16[b], dev_probs16[b], nf * sizeof(uint16_t), cudaMemcpyDeviceToHost,
                                         copy_stream_),
                         "attention (fp16 probabilities download)");
      else
        FOCAL_CUDA_CHECK(
            cudaMemcpyAsync(host_probs[b], dev_probs[b], nf * sizeof(float), cudaMemcpyDeviceToHost, copy_stream_),
            "attention (probabilities download)");
      FOCAL_CUDA_CHECK(
          cudaMemcpyAsync(host_raw[b], dev_raw[b], nf * sizeof(float), cudaMemcpyDeviceToHost, copy_stream_),
          "attention (scores download)");
      FOCAL_CUDA_CHECK(cudaEventRecord(copied_[b], copy_stream_), "cudaEventRecord");
      if (i >= 1) deliver(i - 1);  // overlaps with chunk i computing and copying
    }
    deliver(chunks.size() - 1);
  }

 private:
  // The device kernels' view of a block-format weight.
  static cuda_ops::QWeight qweight_of(const Weight& w) {
    if (w.blocks->on_host) throw Error("CUDA backend: a host-held token table was used as a device matrix");
    const ops::QMatrix& m = w.blocks->q;
    cuda_ops::QWeight q;
    q.type = m.type;
    q.data = m.data;
    q.rows = (int)m.rows;
    q.cols = (int)m.cols;
    q.row_bytes = m.row_bytes;
    return q;
  }

  // The decode product with x in int8 (cuda_ops::matvec_q_set_x8: every block format, one row of x), opt-in in the
  // fast precision: FOCAL_CUDA_DECODE_X8=1 rounds x by its own launch, =2 inside the Q4_K / Q5_K product's kernel (no
  // extra launch, x read in fp32); FOCAL_CUDA_DECODE_X16=1 / 2 the same with x in two int8 digits (16-bit x); unset
  // or 0, the default, keeps fp32 x. One digit is not the default because it is not 16-bit arithmetic: on the real
  // SmolLM2 (Q4_1, emulated) greedy decoding left exact's tokens at the 4th with int8 x and matched all 12 with fp32
  // x (tests: CudaParity.SmolLM2FastAgainstExact).
  bool use_x8(const cuda_ops::QWeight& q, int m) const {
    return fast_ && m == 1 && decode_x_.digits != 0 && cuda_ops::matvec_x8_supported(q);
  }
  void* x8_scratch(int k) {
    const size_t need = (cuda_ops::matvec_x8_scratch_bytes(k) + sizeof(float) - 1) / sizeof(float);
    if (x8_.size() < need) x8_ = DeviceBuffer(*this, need);
    return x8_.data();
  }
  // An on/off switch in the environment, for A/B timing: unset, empty or 1 is on, 0 off; what each means, for the error.
  static bool env_switch(const char* name, const char* on, const char* off) {
    const char* e = std::getenv(name);
    if (!e || !*e || std::strcmp(e, "1") == 0) return true;
    if (std::strcmp(e, "0") == 0) return false;
    throw Error(std::string(name) + "=" + e + ": expected 1 (" + on + ", the default) or 0 (" + off + ")");
  }
  // n floats of pinned host memory for a recorded upload: chunks in order, kept for the next recordings.
  float* arena_floats(size_t n) {
    for (;;) {
      if (arena_at_.chunk == arena_.size()) {
        ArenaChunk a;
        a.floats = std::max(n, kArenaChunkFloats);
        void* p = nullptr;
        FOCAL_CUDA_CHECK(cudaMallocHost(&p, a.floats * sizeof(float)), "cudaMallocHost (recorded uploads)");
        a.host = static_cast<float*>(p);
        arena_.push_back(a);
      }
      ArenaChunk& a = arena_[arena_at_.chunk];
      if (arena_at_.used + n <= a.floats) {
        float* p = a.host + arena_at_.used;
        arena_at_.used += (n + 15) / 16 * 16;  // 64-byte steps
        return p;
      }
      ++arena_at_.chunk;
      arena_at_.used = 0;
    }
  }

  // Fast decode's x in quantized products (use_x8): digits 0 (fp32 x), 1 (FOCAL_CUDA_DECODE_X8) or 2
  // (FOCAL_CUDA_DECODE_X16); in_kernel when the variable is 2 (x rounded inside the Q4_K / Q5_K product's kernel).
  struct DecodeX {
    int digits = 0;
    bool in_kernel = false;
  };
  static DecodeX decode_x_from_env() {
    DecodeX dx;
    for (int digits : {1, 2}) {
      const char* name = digits == 1 ? "FOCAL_CUDA_DECODE_X8" : "FOCAL_CUDA_DECODE_X16";
      const char* e = std::getenv(name);
      if (!e || !*e || std::strcmp(e, "0") == 0) continue;
      if (std::strcmp(e, "1") != 0 && std::strcmp(e, "2") != 0)
        throw Error(std::string(name) + "=" + e + ": expected 0 (fp32 x, the default), 1 (x in " +
                    (digits == 1 ? "int8" : "two int8 digits") + ") or 2 (the same, rounded in the product's kernel)");
      if (dx.digits != 0)
        throw Error(
            std::string("FOCAL_CUDA_DECODE_X8 and FOCAL_CUDA_DECODE_X16 are both set: unset one (x in one "
                        "int8 digit or in two)"));
      dx.digits = digits;
      dx.in_kernel = e[0] == '2';
    }
    return dx;
  }

  // y[m, n] = x[m, k] . w^T for a quantized w: the matrix-vector kernel for decode (m <= 8, w read once in its
  // blocks); else blocks of w's rows dequantised into a scratch of at most 64 MiB and multiplied by cuBLAS: fp32
  // (exact, the CPU's values and an fp32 GEMM) or fp16 with x rounded to fp16 on tensor cores (fast).
  void matmul_xwt_quantized(const float* x, const cuda_ops::QWeight& q, float* y, int m, int n, int k) {
    if (use_x8(q, m)) {
      FOCAL_CUDA_CHECK(
          cuda_ops::matvec_q_set_x8(ctx_, x, &q, &y, 1, x8_scratch(k), decode_x_.in_kernel, decode_x_.digits),
          "matmul (quantized matrix-vector kernel, int8 x)");
      return;
    }
    if (m <= cuda_ops::kMatvecMaxRows) {
      FOCAL_CUDA_CHECK(cuda_ops::matvec_q(ctx_, x, q, y, m), "matmul (quantized matrix-vector kernel)");
      return;
    }
    constexpr size_t kScratchBytes = size_t(1) << 26;
    const size_t value_bytes = fast_ ? 2 : 4;
    const int block_rows =
        (int)std::max<size_t>(1, std::min<size_t>((size_t)n, kScratchBytes / value_bytes / (size_t)std::max(k, 1)));
    const size_t need = ((size_t)block_rows * k * value_bytes + 3) / 4;  // in float units
    if (widened_.size() < need) widened_ = DeviceBuffer(*this, need);
    if (fast_) {
      const size_t nx = ((size_t)m * k + 1) / 2;
      if (narrowed_.size() < nx) narrowed_ = DeviceBuffer(*this, nx);
      FOCAL_CUDA_CHECK(cuda_ops::narrow(ctx_, x, CUDA_R_16F, narrowed_.data(), (size_t)m * k), "narrow kernel");
    }
    for (int j0 = 0; j0 < n; j0 += block_rows) {
      const int rows = std::min(block_rows, n - j0);
      FOCAL_CUDA_CHECK(cuda_ops::dequant_rows(ctx_, q, j0, rows, widened_.data(), fast_ ? CUDA_R_16F : CUDA_R_32F),
                       "dequant kernel");
      if (fast_)
        FOCAL_CUDA_CHECK(
            cuda_ops::matmul_xwt_16(ctx_, narrowed_.data(), widened_.data(), CUDA_R_16F, y + j0, m, rows, k, n),
            "matmul (cublasGemmEx, 16-bit tensor cores)");
      else
        FOCAL_CUDA_CHECK(cuda_ops::matmul_xwt(ctx_, x, widened_.data(), y + j0, m, rows, k, n),
                         "matmul (cublasGemmEx)");
    }
  }

  // Zeroed device memory of `bytes` bytes (from the pool when a freed buffer of that size exists).
  float* alloc_bytes(size_t bytes) {
    float* p = nullptr;
    auto it = pool_.find(bytes);
    if (it != pool_.end()) {
      p = it->second;
      pool_.erase(it);
    } else {
      void* raw = nullptr;
      cudaError_t e = device_malloc(&raw, bytes);
      if (e == cudaErrorMemoryAllocation && !pool_.empty()) {  // give the pooled buffers back and retry once
        cudaGetLastError();
        FOCAL_CUDA_CHECK(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
        for (auto& kv : pool_) device_free(kv.second, kv.first);
        pool_.clear();
        e = device_malloc(&raw, bytes);
      }
      if (e == cudaErrorMemoryAllocation)
        throw Error("CUDA backend: out of device memory allocating " + std::to_string(bytes >> 20) +
                    " MiB (use a shorter context, fewer captured heads, or the cpu device)");
      FOCAL_CUDA_CHECK(e, "cudaMalloc");
      p = static_cast<float*>(raw);
    }
    FOCAL_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync");
    live_[p] = bytes;
    return p;
  }

  // w's rows, the row map applied, into dst [rows, row_bytes].
  static void rows_in_order(const StoredWeight& w, uint8_t* dst) {
    for (int64_t r = 0; r < w.rows; ++r)
      std::memcpy(dst + (size_t)r * w.row_bytes,
                  w.data + (size_t)(w.row_map.empty() ? r : w.row_map[(size_t)r]) * w.row_bytes, w.row_bytes);
  }
  // The block-format weight of w's rows held in order at data (device or, for a table, host memory): desc describes
  // them (no row map), and weight_bytes counts `bytes`.
  Weight blocks_weight(const StoredWeight& w, const uint8_t* data, size_t bytes, std::shared_ptr<BlockRows> desc) {
    desc->q.type = w.type;
    desc->q.data = data;
    desc->q.rows = w.rows;
    desc->q.cols = w.cols;
    desc->q.row_bytes = w.row_bytes;
    Weight out;
    out.form = Weight::Form::kBlocks;
    out.n = (size_t)w.rows * (size_t)w.cols;
    out.bytes = bytes;
    out.blocks = std::move(desc);
    weight_bytes_ += out.bytes;
    return out;
  }

  // freq_ = inv_freq[half] (a host array): stream-ordered before the kernel that reads it; skipped when freq_ holds
  // these values already (every layer and decode step of a model with fixed frequencies).
  void upload_freqs(const float* inv_freq, size_t half) {
    if (freq_.size() < half) {
      freq_ = DeviceBuffer(*this, half);
      freq_held_.clear();
    }
    if (freq_held_.size() != half || !std::equal(inv_freq, inv_freq + half, freq_held_.begin())) {
      upload(freq_.data(), inv_freq, half);
      freq_held_.assign(inv_freq, inv_freq + half);
    }
  }

  // cudaMalloc / cudaFree, counted in held_bytes_ and its peak.
  cudaError_t device_malloc(void** p, size_t bytes) {
    const cudaError_t e = cudaMalloc(p, bytes);
    if (e == cudaSuccess) {
      held_bytes_ += bytes;
      peak_bytes_ = std::max(peak_bytes_, held_bytes_);
    }
    return e;
  }
  cudaError_t device_free(void* p, size_t bytes) {
    held_bytes_ -= bytes;
    return cudaFree(p);
  }

  // The storage type of a dense weight's values.
  static cudaDataType dtype_of(const Weight& w) {
    return w.form == Weight::Form::kBF16 ? CUDA_R_16BF : w.form == Weight::Form::kF16 ? CUDA_R_16F : CUDA_R_32F;
  }

  // Device int32 scratch of at least n entries (grown on demand; ordered on the stream).
  int32_t* device_ints(int32_t*& p, size_t& cap, int n) {
    if ((size_t)n > cap) {
      if (p) {
        FOCAL_CUDA_CHECK(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
        FOCAL_CUDA_CHECK(device_free(p, cap * sizeof(int32_t)), "cudaFree");
      }
      p = nullptr;
      cap = 0;
      void* raw = nullptr;
      FOCAL_CUDA_CHECK(device_malloc(&raw, (size_t)n * sizeof(int32_t)), "cudaMalloc");
      p = static_cast<int32_t*>(raw);
      cap = (size_t)n;
    }
    return p;
  }
  // Double-buffered device score / probability blocks of the captured path.
  float* device_floats(int slot, int which, size_t n) {
    DeviceBuffer& buf = blocks_[slot][which];
    if (buf.size() < n) {
      FOCAL_CUDA_CHECK(cudaStreamSynchronize(copy_stream_), "cudaStreamSynchronize");
      buf = DeviceBuffer(*this, n);
    }
    return buf.data();
  }

  cudaStream_t stream_ = nullptr, copy_stream_ = nullptr;
  cudaEvent_t computed_[2] = {nullptr, nullptr}, copied_[2] = {nullptr, nullptr};
  cublasHandle_t blas_ = nullptr;
  cuda_ops::Ctx ctx_;
  std::multimap<size_t, float*> pool_;                // freed device buffers by size in bytes
  std::map<float*, size_t> live_;                     // allocated device buffers and their size in bytes
  size_t weight_bytes_ = 0;                           // bytes of the live weight allocations
  size_t held_bytes_ = 0, peak_bytes_ = 0;            // every cudaMalloc'ed byte not yet freed (pool included)
  static constexpr size_t kUploadSlotFloats = 16384;  // 64 KiB pinned per slot
  static constexpr int kUploadSlots = 64;
  struct UploadSlot {
    float* host = nullptr;
    cudaEvent_t done = nullptr;
  };
  UploadSlot upload_slots_[kUploadSlots];
  int upload_next_ = 0;
  // FOCAL_CUDA_GRAPHS=0: decode steps launch by launch (record_begin)
  bool graphs_ = env_switch("FOCAL_CUDA_GRAPHS", "decode steps replayed as CUDA graphs", "launch by launch");
  bool recording_ = false;                 // a stream capture is open (record_begin .. record_end)
  int segment_ = 0;                        // the open recording's segment
  std::vector<cudaGraphExec_t> seg_exec_;  // [segment] its last recording, updated in place by the next
  struct ArenaChunk {
    float* host = nullptr;  // pinned
    size_t floats = 0;
  };
  static constexpr size_t kArenaChunkFloats = 65536;  // 256 KiB
  std::vector<ArenaChunk> arena_;                     // a recorded step's uploads, held until it has run
  struct {
    size_t chunk, used;
  } arena_at_ = {0, 0};                  // the next free float: chunk, and floats used in it
  static constexpr int kTcMinRows = 16;  // fast mode: calls of this many rows or more use attention_tc
  bool fast_ = false;                    // Precision::kFast (set_fast)
  DeviceBuffer widened_;                 // fp32 scratch of the 16-bit GEMM path
  DeviceBuffer narrowed_;                // fast mode: x rounded to 16 bits [m, k] (2 bytes a value)
  DeviceBuffer x8_;  // fast decode: x's int8 digits [digits][k] and (scale, sum) [k / 32] (matvec_q_set_x8)
  DecodeX decode_x_ = decode_x_from_env();  // FOCAL_CUDA_DECODE_X8 / _X16 (use_x8)
  // FOCAL_CUDA_SPLIT_ATTN=0: decode on the per-(row, head) kernel (attention_fused)
  bool split_attn_ =
      env_switch("FOCAL_CUDA_SPLIT_ATTN", "decode attention split over the keys", "one block per row and head");
  DeviceBuffer tc_state_;         // fast mode: attention_tc's row states [n_heads, T, 3]
  DeviceBuffer tc_stage_;         // fast mode: attention_tc's fp16 K and V^T of the layer
  DeviceBuffer split_scratch_;    // decode: attention_split's chunk states, partial outputs, logits
  DeviceBuffer freq_;             // [d_head / 2] rotary frequencies of the last rope_freqs
  std::vector<float> freq_held_;  // the values freq_ holds (its one writer is rope_freqs)
  DeviceBuffer topk_val_;         // top-k values [rows, k] on the device
  DeviceBuffer stats_;            // next_token_rows: [rows][log-sum-exp, target value]
  int32_t* topk_idx_ = nullptr;   // top-k indices [rows, k] on the device
  size_t topk_idx_n_ = 0;
  PinnedBuffer staging_;  // download staging
  // a host-held token table's gathered rows [n_tokens, hidden], widened; pageable: upload() copies it (through a
  // pinned slot, or staged by the driver) before it returns, so the next call may refill it
  std::vector<float> table_rows_;
  PinnedBuffer pinned_[2][3];  // [slot][raw, probs, fp16 probs] capture blocks
  DeviceBuffer blocks_[2][3];  // [slot][raw, probs, fp16 probs] capture blocks on the device
  int32_t* ids_ = nullptr;
  size_t ids_n_ = 0;
  int32_t* rel_ = nullptr;
  size_t rel_n_ = 0;
  uint8_t* skip_ = nullptr;
  size_t skip_n_ = 0;
};

}  // namespace

int cuda_device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error state for later calls
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + ", " + cudaGetErrorString(e);
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount reports 0 devices";
  return n;
}

std::string cuda_device_name(int device) {
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return "CUDA device " + std::to_string(device);
  return prop.name;
}

std::unique_ptr<Backend> make_cuda_backend(int device) { return std::make_unique<CudaBackend>(device); }

}  // namespace focal
