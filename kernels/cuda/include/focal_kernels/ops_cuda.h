// CUDA + cuBLAS twins of the CPU ops (focal_kernels/ops.h): same shapes, same formulas (shared_math.h), device
// pointers, everything issued on ctx.stream. Launchers return the CUDA / cuBLAS status of the launch; the runtime's
// CUDA backend turns a failure into an Error. Only the runtime's CUDA backend includes this header.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace focal::cuda_ops {

struct Ctx {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;  // set to ctx.stream by the caller
};

// Weight matrices may be stored as CUDA_R_32F (float), CUDA_R_16F (__half) or CUDA_R_16BF (__nv_bfloat16); every
// read widens to fp32 exactly (both 16-bit formats are subsets of fp32) and all arithmetic is fp32.

// out[n_tokens, hidden] = fp32(table[ids[t], :]), table stored as table_type; ids is a device array.
cudaError_t embed(const Ctx& c, const void* table, cudaDataType table_type, const int32_t* ids, float* out,
                  int n_tokens, int hidden);
// out[n] = fp32(w[n]), w stored as w_type (CUDA_R_16F or CUDA_R_16BF).
cudaError_t widen(const Ctx& c, const void* w, cudaDataType w_type, float* out, size_t n);
// Rows of x the 16-bit matrix-vector kernel takes (decode, short prompts); more go through widen + cuBLAS.
constexpr int kMatvecMaxRows = 8;
// y[m, n] = x[m, k] . fp32(w[n, k])^T for w stored as w_type (CUDA_R_16F or CUDA_R_16BF), m <= kMatvecMaxRows:
// one warp per row of w (read once, in 16 bits; 16 bytes per lane and step where k % 8 == 0 and w is 16-byte
// aligned, else 2), fp32 products and sums.
cudaError_t matvec_xwt16(const Ctx& c, const float* x, const void* w, cudaDataType w_type, float* y, int m, int n,
                         int k);
// y[rows, n] = w[n] * x * rsqrt(mean(x^2) + eps); y may alias x. One block per row.
cudaError_t rmsnorm(const Ctx& c, const float* x, const float* w, float* y, int rows, int n, float eps);
// In-place rotate_half RoPE on x[n_tokens, n_heads * d_head], token t at position pos0 + t.
cudaError_t rope(const Ctx& c, float* x, int n_tokens, int n_heads, int d_head, int pos0, float rope_theta);
// rope with given frequencies inv_freq[d_head / 2] (device) and cos / sin times cs_scale (ops::rope_freqs).
cudaError_t rope_freqs(const Ctx& c, float* x, int n_tokens, int n_heads, int d_head, int pos0, const float* inv_freq,
                       float cs_scale);
// rope_freqs on q [n_tokens, n_heads * d_head] and k [n_tokens, n_kv_heads * d_head] in one launch.
cudaError_t rope_freqs_qk(const Ctx& c, float* q, float* k, int n_tokens, int n_heads, int n_kv_heads, int d_head,
                          int pos0, const float* inv_freq, float cs_scale);
// y[rows, n] = LayerNorm(x) * w + b (ops::layernorm). One block per row.
cudaError_t layernorm(const Ctx& c, const float* x, const float* w, const float* b, float* y, int rows, int n,
                      float eps);
// out[n] = act(gate[n]) * up[n] (up may be null), act an ops::Act code (ops::act_mul).
cudaError_t act_mul(const Ctx& c, const float* gate, const float* up, float* out, size_t n, int act);
// x[n] = cap * tanh(x[n] / cap)
cudaError_t softcap(const Ctx& c, float* x, size_t n, float cap);
// x[n] *= s
cudaError_t scale(const Ctx& c, float* x, size_t n, float s);
// out[n] = silu(gate[n]) * up[n]
cudaError_t swiglu(const Ctx& c, const float* gate, const float* up, float* out, size_t n);
// y[n] += x[n]
cudaError_t add_inplace(const Ctx& c, float* y, const float* x, size_t n);
// x[rows, n] += y, then xn = rmsnorm(x) * w (add_inplace, then rmsnorm: the same values), one block per row.
cudaError_t add_rmsnorm(const Ctx& c, float* x, const float* y, const float* w, float* xn, int rows, int n, float eps);
// y[rows, n] += b[n]
cudaError_t add_row_bias(const Ctx& c, float* y, const float* b, int rows, int n);
// cache[n_kv, stride, d] at positions pos0.. <- kv[n_tokens, n_kv * d]
cudaError_t kv_store(const Ctx& c, const float* kv, float* cache, int n_tokens, int n_kv_heads, int d_head, int stride,
                     int pos0);
// kv_store of k into k_cache and of v into v_cache in one launch.
cudaError_t kv_store_pair(const Ctx& c, const float* k, const float* v, float* k_cache, float* v_cache, int n_tokens,
                          int n_kv_heads, int d_head, int stride, int pos0);

// y[m, n] = x[m, k] . w[n, k]^T through cublasGemmEx, fp32 storage and fp32 accumulation (no TF32). y's rows are
// ldy floats apart (0: n), so a caller can fill a block of y's columns from a block of w's rows.
cublasStatus_t matmul_xwt(const Ctx& c, const float* x, const float* w, float* y, int m, int n, int k, int ldy = 0);

// raw[n_rows, n_keys] = q[n_rows, d] (row stride q_stride) . k[n_keys, d]^T * logit_scale (0: 1/sqrt(d)) (cuBLAS)
cublasStatus_t attn_scores(const Ctx& c, const float* q, int q_stride, const float* k, float* raw, int n_rows,
                           int n_keys, int d, float logit_scale = 0.0f);
// out[n_rows, d] (row stride out_stride) = probs[n_rows, n_keys] . v[n_keys, d]   (cuBLAS)
cublasStatus_t attn_pv(const Ctx& c, const float* probs, const float* v, float* out, int out_stride, int n_rows,
                       int n_keys, int d);

// Per-row arguments shared by the softmax and the fused attention kernels.
struct RowArgs {
  int n_tokens = 0;                   // T rows of the call
  int n_past = 0;                     // row r sees n_past + r + 1 keys
  const float* row_scale = nullptr;   // [n_heads, T] device
  float* metrics = nullptr;           // [n_heads, T, kNumRowMetrics] device, or null
  int topk = 5;                       // k of the top-k mass (1..64; larger is capped at 64, <= 0 gives 0)
  const int32_t* relevant = nullptr;  // [n_relevant] device
  int n_relevant = 0;
  float logit_scale = 0.0f;  // raw = q.k * logit_scale (0: 1/sqrt(d)); the fused kernel forms raw itself
  float softcap = 0.0f;      // > 0: logits cap * tanh(raw * scale / cap)
  int window = 0;            // > 0: row i sees keys i - window + 1 .. i (the rest get probability 0)
};

// The fused softmax of one head's block of rows r0..r0+n_rows-1 (raw[n_rows, n_keys] from attn_scores): applies
// the per-(head, row) scale, the causal mask, writes probs[n_rows, n_keys] (zero past the row's visible keys, and
// zeroes raw there too, as the CPU path does) and the row's metrics in the same pass. One block per row.
// probs16, when not null, receives the same probabilities as fp16 bits [n_rows, n_keys] (math::float_to_half_bits)
// for a capture that stores fp16: half the bytes to download.
cudaError_t softmax_rows(const Ctx& c, const RowArgs& a, int head, int r0, int n_rows, int n_keys, float* raw,
                         float* probs, uint16_t* probs16 = nullptr);

// Flash-style fused attention for the heads with skip[h] == 0 (skip: [n_heads] device bytes, or null for all):
// online softmax over the keys (no T^2 memory), out[T, n_heads * d] and, when a.metrics is set, every row metric
// (entropy from the online identity H = ln Z - sum e^(s-m)(s-m) / Z). One block per (row, head).
cudaError_t attention_fused(const Ctx& c, const RowArgs& a, const float* q, const float* k_cache, const float* v_cache,
                            int cache_stride, int n_heads, int n_kv_heads, int d_head, const uint8_t* skip, float* out);

// attention_fused for decode-sized calls (a.n_tokens <= kAttentionSplitMaxRows, and at least kAttentionSplitMinKeys
// keys, below which the per-row kernel's one launch is cheaper; attention_split.cuh): the keys in
// chunks (attention_split_chunk_keys: about 1024 blocks, 32 to 512 keys a chunk), one block per (chunk, KV head, row)
// taking every query head of the GQA group, so K and V are read once a group; a second launch merges the chunks'
// online states per (row, head) into out and the metrics. Same arguments and results as attention_fused, plus
// scratch: attention_split_scratch_floats device floats (chunk states and partial outputs, and the rows' logits
// [rows, n_heads, n_ctx] when a.metrics is set).
constexpr int kAttentionSplitMaxRows = 8;
constexpr int kAttentionSplitMinKeys = 256;
int attention_split_chunk_keys(int n_ctx, int n_kv_heads, int n_rows);
size_t attention_split_scratch_floats(const RowArgs& a, int n_heads, int n_kv_heads, int d_head);
cudaError_t attention_split(const Ctx& c, const RowArgs& a, const float* q, const float* k_cache, const float* v_cache,
                            int cache_stride, int n_heads, int n_kv_heads, int d_head, const uint8_t* skip,
                            float* scratch, float* out);

// The fast precision mode's attention (attention_tc.cuh), for heads of a size attention_tc_supported accepts
// (32, 64, 96, 128): K and V of the n_ctx = n_past + T visible keys rounded to fp16 into `stage` (device scratch of
// attention_tc_stage_bytes), then blocks of 128 query rows share double-buffered fp16 tiles of K and V in shared
// memory; QK^T and PV on tensor cores (mma.sync, fp32 accumulation); temperature, soft-cap, masks, the online
// softmax and every row metric in fp32, the metrics in a second pass over the keys (no V). Same arguments as
// attention_fused, plus state: [n_heads, T, 3] device scratch for the rows' (max, Z, A; max and A in log2 units)
// between the passes, needed when a.metrics is set.
bool attention_tc_supported(int d_head);
size_t attention_tc_stage_bytes(int n_kv_heads, int n_ctx, int d_head);
cudaError_t attention_tc(const Ctx& c, const RowArgs& a, const float* q, const float* k_cache, const float* v_cache,
                         int cache_stride, int n_heads, int n_kv_heads, int d_head, const uint8_t* skip, float* state,
                         void* stage, float* out);

// out[n] = x[n] rounded to nearest even into type (CUDA_R_16F or CUDA_R_16BF; math::float_to_half_bits /
// float_to_bf16_bits), 2 bytes each: the fast mode's GEMM input.
cudaError_t narrow(const Ctx& c, const float* x, cudaDataType type, void* out, size_t n);
// y[m, n] = x16[m, k] . w16[n, k]^T on tensor cores: both 16-bit of one type (CUDA_R_16F or CUDA_R_16BF), fp32
// accumulation and fp32 y (row stride ldy, 0: n).
cublasStatus_t matmul_xwt_16(const Ctx& c, const void* x16, const void* w16, cudaDataType type, float* y, int m, int n,
                             int k, int ldy = 0);
// matmul_xwt in TF32 (CUBLAS_COMPUTE_32F_FAST_TF32): fp32 storage, inputs rounded to 10-bit mantissas in the
// product: the fast mode for fp32 weights.
cublasStatus_t matmul_xwt_tf32(const Ctx& c, const float* x, const float* w, float* y, int m, int n, int k);

// A weight matrix [rows, cols] kept on the device in a ggml block format (focal_kernels/quant_blocks.h: Q4_0, Q4_1,
// Q8_0, Q4_K, Q5_K, Q6_K) exactly as the file stores it: row r at data + r * row_bytes. Every value a kernel reads
// is qblocks::dequant_sub32's, the CPU dequantiser's own math.
struct QWeight {
  int type = 0;
  const uint8_t* data = nullptr;
  int rows = 0, cols = 0;
  size_t row_bytes = 0;
};
// y[m, n = w.rows] = x[m, k = w.cols] . w^T for m <= kMatvecMaxRows (decode): a warp per 4 rows of w and slice of
// k (up to 8 slices, meeting in shared memory), each lane a 32-value sub-block at a time (consecutive lanes,
// consecutive bytes), dequantised in registers; fp32 sums.
cudaError_t matvec_q(const Ctx& c, const float* x, const QWeight& w, float* y, int m);
// matvec_q of up to kMatvecSetMax weights of one type and width sharing x (Q, K, V; gate, up) in one launch:
// ys[i][m, ws[i].rows] = x . ws[i]^T.
constexpr int kMatvecSetMax = 3;
cudaError_t matvec_q_set(const Ctx& c, const float* x, const QWeight* ws, float* const* ys, int n_w, int m);
// The fast precision's decode product (one row of x) for every block format (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K: the
// types of Q4_K_M, Q5_K_M and Q8_0 files): x rounded to int8 per 32 values (qblocks::x8_round,
// |x - d q| <= max |x| / 254 (+ 2^-22 max |x|) in each 32) into scratch (matvec_x8_scratch_bytes(k), 16-byte
// aligned) by its own launch, then dot products of the weights' integer values in int32 (dp4a) scaled in fp32:
// ys[i][ws[i].rows] = x . ws[i]^T, every ws[i] of one type and width. round_in_kernel (Q4_K and Q5_K; the device
// A/B): the product's kernel rounds x itself, in each warp (one launch, x read in fp32; scratch unused).
// x_digits = 2 (x16): x in two int8 digits per value (qblocks::x16_round, |x - s (254 q1 + q2)| <= max |x| / 64516
// (+ 2^-22 max |x|) in each 32: 16-bit x, as close as fp16's near max |x|), each dot product taken with both digits
// (twice the dp4a) and joined in int32.
bool matvec_x8_supported(const QWeight& w);
size_t matvec_x8_scratch_bytes(int k);  // enough for either x_digits
cudaError_t matvec_q_set_x8(const Ctx& c, const float* x, const QWeight* ws, float* const* ys, int n_w, void* scratch,
                            bool round_in_kernel = false, int x_digits = 1);
// Rows r0 .. r0 + nr - 1 of w dequantised into out[nr, w.cols] as fp32 (CUDA_R_32F: exact) or rounded to
// CUDA_R_16F (the fast GEMM's operand).
cudaError_t dequant_rows(const Ctx& c, const QWeight& w, int r0, int nr, void* out, cudaDataType out_type);
// out[n_tokens, w.cols] = the dequantised rows ids[t] of a quantized embedding table (ids: device array).
cudaError_t embed_q(const Ctx& c, const QWeight& w, const int32_t* ids, float* out, int n_tokens);

// Per row of x[rows, n]: out[2 row] = log-sum-exp (ops::log_sum_exp's formula), out[2 row + 1] = x[row][targets[row]]
// (targets: device array; NaN for an index < 0).
cudaError_t row_lse_target(const Ctx& c, const float* x, int rows, int n, const int32_t* targets, float* out);
// Per row of x[rows, n]: the k largest values, descending (ties: lower index first), into idx/val[rows, k].
// k <= min(n, 64).
cudaError_t topk_rows(const Ctx& c, const float* x, int rows, int n, int k, int32_t* idx, float* val);

}  // namespace focal::cuda_ops
