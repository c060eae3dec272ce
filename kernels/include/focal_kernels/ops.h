// CPU reference ops for focalscope: the math the CUDA twins must reproduce. Flat row-major fp32 buffers; every
// pointer argument carries its shape in a comment. Ops parallelise with OpenMP internally; call them from one thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace focal::ops {

// Per-row attention metrics, in this order, in every metrics buffer [.., kNumRowMetrics].
enum RowMetric : int {
  kEntropyNats = 0,  // H = -sum p ln p
  kEntropyNorm,      // H / ln(n_visible); 0 when n_visible == 1
  kEffSupport,       // exp(H)
  kMaxProb,          // max_j p
  kTopkMass,         // sum of the k largest p
  kTailMass,         // sum p [p < 1/n_visible]
  kSinkMass,         // p(key 0)
  kRelevantMass,     // sum of p over the given relevant keys visible to the row; NaN when none is visible
  kNumRowMetrics
};

// y[m, n] = x[m, k] . w[n, k]^T   (w in the Hugging Face [out, in] layout). Multi-threaded through OpenBLAS.
void matmul_xwt(const float* x, const float* w, float* y, int m, int n, int k);

// Benchmark counters for matmul_xwt (off by default; two clock reads per call when on).
struct MatmulStats {
  double seconds = 0.0;
  double flops = 0.0;
};
void set_matmul_profiling(bool on);  // also resets the counters
MatmulStats matmul_stats();
// The OpenBLAS kernels every sgemm runs on, in words, for logs and benchmarks. Where OpenBLAS's table of CPU models
// predates the CPU (and OPENBLAS_CORETYPE is unset), the core is chosen from the CPU's features when the library
// loads (kernels/src/blas_core.cpp), and the text says so.
const char* blas_core();

// y[rows, n] = w[n] * x * rsqrt(mean(x^2) + eps), row by row. y may alias x.
void rmsnorm(const float* x, const float* w, float* y, int rows, int n, float eps);

// In-place HF rotate_half RoPE on x[n_tokens, n_heads * d_head]; token t sits at position pos0 + t.
void rope(float* x, int n_tokens, int n_heads, int d_head, int pos0, float rope_theta);

// In-place rotate_half RoPE with given frequencies: angle = (pos0 + t) * inv_freq[i] (fp32), and cos / sin both
// multiplied by cs_scale (yarn / longrope attention factor; 1 leaves them exact). inv_freq: [d_head / 2].
void rope_freqs(float* x, int n_tokens, int n_heads, int d_head, int pos0, const float* inv_freq, float cs_scale);

// y[rows, n] = (x - mean) * rsqrt(var + eps) * w[n] + b[n] (biased variance), row by row. y may alias x.
void layernorm(const float* x, const float* w, const float* b, float* y, int rows, int n, float eps);

// out[n] = silu(gate[n]) * up[n]
void swiglu(const float* gate, const float* up, float* out, size_t n);

// MLP activations (math::activate): SiLU, GELU with the tanh approximation, exact (erf) GELU.
enum class Act : int { kSilu = 0, kGeluTanh = 1, kGelu = 2 };
// out[n] = act(gate[n]) * up[n], or act(gate[n]) when up is null. out may alias gate.
void act_mul(const float* gate, const float* up, float* out, size_t n, Act act);

// x[n] = cap * tanh(x[n] / cap)  (final-logit soft-capping; cap > 0)
void softcap_inplace(float* x, size_t n, float cap);

// x[n] *= s
void scale_inplace(float* x, size_t n, float s);

// y[n] += x[n]
void add_inplace(float* y, const float* x, size_t n);

// out[n_tokens, hidden] = table[ids[t], :]
void embed(const float* table, const int32_t* ids, float* out, int n_tokens, int hidden);

// Softmax of logits[n] (max-subtracted, fp32) into p[n]; fills metrics[kNumRowMetrics] when not null.
// relevant[n_relevant] are key indices; those >= n are ignored. Safe for any finite logits (no NaN/inf out).
// topk is the k of the top-k mass metric, 1..64 (larger k is capped at 64; k <= 0 gives 0).
void softmax_row(const float* logits, float* p, int n, float* metrics, int topk, const int32_t* relevant,
                 int n_relevant);

// One attention row of an architecture with a soft-cap and / or a sliding window, from its raw logits raw[n_vis]
// (before temperature and cap): keys first_key..n_vis-1 get softmax(attn_logit(raw, scale, softcap)), keys before
// first_key probability 0; metrics (when not null) count only the visible keys. The forward and the preview of stored
// scores both use it, so a re-tempered stored row equals the propagated one.
void attention_row(const float* raw, float scale, float softcap, int first_key, float* p, int n_vis, float* metrics,
                   int topk, const int32_t* relevant, int n_relevant);

// Metrics of an already-normalised probability row p[n] (used on stored captures).
void row_metrics(const float* p, int n, int topk, const int32_t* relevant, int n_relevant, float* metrics);

// Called for each block of query rows of a wanted head, from worker threads, each call on a disjoint block:
// probs and raw are [n_rows, stride]; row r (absolute position row0 + r) has row0 + r + 1 valid keys, rest zero.
// raw holds the architecture's logit q.k * logit_scale before any temperature scaling and before the soft-cap. With a
// sliding window, keys before the window are 0 in probs and raw alike.
typedef void (*RowBlockFn)(void* ctx, int head, int row0, int n_rows, int stride, const float* probs, const float* raw);

struct AttentionArgs {
  int n_tokens = 0;  // T new query rows
  int n_past = 0;    // cached positions before the first new row
  int n_heads = 0, n_kv_heads = 0, d_head = 0;
  const float* q = nullptr;        // [T, n_heads * d_head], RoPE applied
  const float* k_cache = nullptr;  // [n_kv_heads, cache_stride, d_head], positions [0, n_past + T) valid
  const float* v_cache = nullptr;  // [n_kv_heads, cache_stride, d_head]
  int cache_stride = 0;
  const float* row_scale = nullptr;  // [n_heads, T] logit multiplier (>= 0) applied to raw scores
  float logit_scale = 0.0f;          // raw = q.k * logit_scale; 0: 1/sqrt(d_head)
  float softcap = 0.0f;              // > 0: logits = softcap * tanh(raw * row_scale / softcap) (Gemma 2); 0: none
  int window = 0;                    // > 0: row at position i sees keys i - window + 1 .. i only; 0: all before it
  float* out = nullptr;              // [T, n_heads * d_head]
  float* metrics = nullptr;          // [n_heads, T, kNumRowMetrics] or null (then no metrics are computed)
  int topk = 5;
  const int32_t* relevant = nullptr;  // [n_relevant] key positions for the relevant-mass metric
  int n_relevant = 0;
  const uint8_t* head_wanted = nullptr;  // [n_heads] nonzero: call row_fn for this head's rows; null: none
  RowBlockFn row_fn = nullptr;
  void* row_ctx = nullptr;
  // The probabilities handed to row_fn are rounded to fp16 (math::round_to_half; still passed as float) for a
  // capture that stores fp16: the CUDA backend then downloads them in 16 bits. Output and metrics stay fp32.
  bool probs_fp16 = false;
};

// Causal attention with per-(head, row) temperature scale, optional soft-cap and sliding window. Metrics count
// only the visible keys (a window row of n_vis keys normalises its entropy by ln n_vis). CPU: blocks of 64 query rows
// of all the heads sharing a KV head run in parallel, each as one q.k and one p.v product over the keys up to the
// block's last row; a call of at most 4 rows (decode) reads each cached key and value once, by key chunks over the
// threads (attention_decode.cpp).
void attention(const AttentionArgs& a);

// Indices and values of the k largest entries of x[n], descending, ties lower index first. k <= n.
void topk(const float* x, int n, int k, int32_t* idx, float* val);

// log(sum_j exp(x[j])) in float, max-subtracted (x finite, n >= 1); relative error of the sum ~1e-6.
float log_sum_exp(const float* x, int n);

}  // namespace focal::ops
