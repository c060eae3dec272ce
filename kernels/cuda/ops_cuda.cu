// CUDA twins of the CPU ops (kernels/src/ops_cpu.cpp). Per-element and per-row formulas come from shared_math.h so
// both backends compute the same math; GEMMs go through cublasGemmEx with fp32 accumulation (TF32 off).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <type_traits>
#include <cstdint>
#include <cmath>

#include "focal_kernels/ops.h"
#include "focal_kernels/ops_cuda.h"
#include "focal_kernels/quant_blocks.h"
#include "focal_kernels/shared_math.h"

namespace focal::cuda_ops {

namespace {

constexpr int kRowThreads = 256;    // block size of the per-row kernels
constexpr int kFlashThreads = 128;  // block size of the fused attention (one block per (row, head))
constexpr int kMaxTopk = 64;        // top-k mass and top_k rows keep at most 64 values

int grid_for(size_t n, int threads) { return (int)((n + threads - 1) / threads); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;  // NaN is ignored, as in the CPU max
  }
  return v;
}

// Block-wide sum / max; every thread gets the result. sh: 32 floats of shared memory.
__device__ float block_sum(float v, float* sh) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) sh[wid] = v;
  __syncthreads();
  if (wid == 0) {
    float r = lane < nw ? sh[lane] : 0.0f;
    r = warp_sum(r);
    if (lane == 0) sh[0] = r;
  }
  __syncthreads();
  return sh[0];
}
__device__ float block_max(float v, float* sh) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) sh[wid] = v;
  __syncthreads();
  if (wid == 0) {
    float r = lane < nw ? sh[lane] : -INFINITY;
    r = warp_max(r);
    if (lane == 0) sh[0] = r;
  }
  __syncthreads();
  return sh[0];
}

// Ordering of (value, index) pairs for top-k: larger value first, then lower index.
__device__ __forceinline__ bool pair_before(float av, int ai, float bv, int bi) {
  return av > bv || (av == bv && ai < bi);
}

// Block-wide best pair; every thread gets it. shv/shi: 32 entries of shared memory each.
__device__ void block_best_pair(float& v, int& i, float* shv, int* shi) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (pair_before(ov, oi, v, i)) {
      v = ov;
      i = oi;
    }
  }
  __syncthreads();
  if (lane == 0) {
    shv[wid] = v;
    shi[wid] = i;
  }
  __syncthreads();
  if (wid == 0) {
    float rv = lane < nw ? shv[lane] : -INFINITY;
    int ri = lane < nw ? shi[lane] : INT_MAX;
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, rv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, ri, o);
      if (pair_before(ov, oi, rv, ri)) {
        rv = ov;
        ri = oi;
      }
    }
    if (lane == 0) {
      shv[0] = rv;
      shi[0] = ri;
    }
  }
  __syncthreads();
  v = shv[0];
  i = shi[0];
}

// A thread's own k best (value, index) pairs, descending. Indices arrive in ascending order per thread, so an
// equal value stays behind the earlier index.
struct ThreadTopk {
  float v[kMaxTopk];
  int i[kMaxTopk];
  int cnt;
};

__device__ __forceinline__ void topk_push(ThreadTopk& t, int k, float v, int idx) {
  int pos;
  if (t.cnt < k) {
    pos = t.cnt++;
  } else if (v > t.v[k - 1]) {
    pos = k - 1;
  } else {
    return;
  }
  while (pos > 0 && t.v[pos - 1] < v) {
    t.v[pos] = t.v[pos - 1];
    t.i[pos] = t.i[pos - 1];
    --pos;
  }
  t.v[pos] = v;
  t.i[pos] = idx;
}

// Merges every thread's list into the block's k best, in descending order: calls emit(rank, value, index) on every
// thread for each selected pair. Stops early when fewer than k pairs exist.
template <class Emit>
__device__ void topk_merge(const ThreadTopk& t, int k, float* shv, int* shi, Emit emit) {
  int ptr = 0;
  for (int r = 0; r < k; ++r) {
    float v = ptr < t.cnt ? t.v[ptr] : -INFINITY;
    int i = ptr < t.cnt ? t.i[ptr] : INT_MAX;
    block_best_pair(v, i, shv, shi);
    if (i == INT_MAX) break;
    if (ptr < t.cnt && t.i[ptr] == i) ++ptr;
    emit(r, v, i);
  }
}

// ThreadTopk for k <= kPairTopkRegs (the metric kernels' default k is 5), in registers: the thread's kPairTopkRegs
// best pairs, descending, (-inf, INT_MAX) where fewer were seen. Every index is a compile-time constant once the
// loops unroll: ThreadTopk's run-time positions kept its 64 pairs in local memory (a 520-byte stack, read for every
// key). The values pushed are finite (probabilities, logits).
constexpr int kPairTopkRegs = 8;
struct ThreadTopkRegs {
  float v[kPairTopkRegs];
  int i[kPairTopkRegs];
};
__device__ __forceinline__ void topk_init(ThreadTopk& t) { t.cnt = 0; }
__device__ __forceinline__ void topk_init(ThreadTopkRegs& t) {
#pragma unroll
  for (int s = 0; s < kPairTopkRegs; ++s) {
    t.v[s] = -INFINITY;
    t.i[s] = INT_MAX;
  }
}
__device__ __forceinline__ void topk_push(ThreadTopkRegs& t, int /*k*/, float v, int idx) {
  if (!(v > t.v[kPairTopkRegs - 1])) return;
#pragma unroll
  for (int s = 0; s < kPairTopkRegs; ++s) {  // the pair sinks to its place; an equal value stays behind (idx ascends)
    const bool up = v > t.v[s];
    const float tv = t.v[s];
    const int ti = t.i[s];
    t.v[s] = up ? v : tv;
    t.i[s] = up ? idx : ti;
    v = up ? tv : v;
    idx = up ? ti : idx;
  }
}
// topk_merge's rounds over the register list: the head is always slot 0, the list shifts up when it is taken.
template <class Emit>
__device__ void topk_merge(ThreadTopkRegs t, int k, float* shv, int* shi, Emit emit) {
  for (int r = 0; r < k; ++r) {
    float v = t.v[0];
    int i = t.i[0];
    block_best_pair(v, i, shv, shi);
    if (i == INT_MAX) break;
    if (t.i[0] == i) {
#pragma unroll
      for (int s = 0; s + 1 < kPairTopkRegs; ++s) {
        t.v[s] = t.v[s + 1];
        t.i[s] = t.i[s + 1];
      }
      t.v[kPairTopkRegs - 1] = -INFINITY;
      t.i[kPairTopkRegs - 1] = INT_MAX;
    }
    emit(r, v, i);
  }
}

// A row's metrics from its entropy h (nats), normaliser Z and the probability sums (as the CPU path).
__device__ void write_metrics(float* m, float h, float z, int n_vis, float tail, float sink, float topk_mass, float rel,
                              float rel_seen) {
  math::entropy_metrics(h, n_vis, m[ops::kEntropyNats], m[ops::kEntropyNorm], m[ops::kEffSupport]);
  m[ops::kMaxProb] = 1.0f / z;
  m[ops::kTopkMass] = topk_mass;
  m[ops::kTailMass] = tail;
  m[ops::kSinkMass] = sink;
  m[ops::kRelevantMass] = math::relevant_mass(rel, rel_seen);
}

// Storage codes of weight matrices inside the kernels.
enum WeightCode : int { kW32 = 0, kW16F = 1, kW16BF = 2 };

// Element i of a weight matrix stored as `code`, widened to fp32 (exact for both 16-bit formats).
__device__ __forceinline__ float weight_at(const void* w, int code, size_t i) {
  if (code == kW16BF) return __bfloat162float(static_cast<const __nv_bfloat16*>(w)[i]);
  if (code == kW16F) return __half2float(static_cast<const __half*>(w)[i]);
  return static_cast<const float*>(w)[i];
}

__global__ void embed_kernel(const void* table, int code, const int32_t* ids, float* out, int n_tokens, int hidden) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (size_t)n_tokens * hidden) return;
  const size_t t = i / hidden, c = i % hidden;
  out[i] = weight_at(table, code, (size_t)ids[t] * hidden + c);
}

__global__ void widen_kernel(const void* w, int code, float* out, size_t n) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = weight_at(w, code, i);
}

// One warp per row j of w[n, k] (kMatvecWarps per block), each lane keeping m partial dot products in registers (the
// loops over rows of x run to kMatvecMaxRows, guarded by m), then a warp sum per row of x. Where k is a multiple of 8
// and w 16-byte aligned, each lane reads 8 consecutive weights (16 bytes) per step, a warp 512 contiguous bytes, so
// that more bytes are in flight (on an H200, Llama-3-8B's shape decoded 27 tokens/s with one 2-byte weight per lane
// and step, 60-64 with 8; the kernel alone streams 1.6-1.8 TB/s, and two 16-byte loads per lane and step measured
// the same); else one weight per lane per step. Rows past n leave their warp idle (no barrier).
constexpr int kMatvecWarps = 8;
template <class H>
struct alignas(16) Pack8 {
  H v[8];
};
__device__ __forceinline__ float to_float(__half h) { return __half2float(h); }
__device__ __forceinline__ float to_float(__nv_bfloat16 h) { return __bfloat162float(h); }

template <class H>
__device__ __forceinline__ void matvec16_row(const float* x, const H* wr, float* y, int m, int n, int k, int j,
                                             int lane, bool wide) {
  float acc[kMatvecMaxRows];
  for (int i = 0; i < kMatvecMaxRows; ++i) acc[i] = 0.0f;
  if (wide) {
    for (int c = lane * 8; c < k; c += 32 * 8) {
      const Pack8<H> p = *reinterpret_cast<const Pack8<H>*>(wr + c);  // 16-byte aligned: w is, and k % 8 == 0
      float wv[8];
      for (int e = 0; e < 8; ++e) wv[e] = to_float(p.v[e]);
      for (int i = 0; i < kMatvecMaxRows; ++i) {
        if (i >= m) break;
        const float* xr = x + (size_t)i * k + c;
        float a = acc[i];
        for (int e = 0; e < 8; ++e) a += xr[e] * wv[e];
        acc[i] = a;
      }
    }
  } else {
    for (int c = lane; c < k; c += 32) {
      const float wv = to_float(wr[c]);
      for (int i = 0; i < kMatvecMaxRows; ++i) {
        if (i >= m) break;
        acc[i] += x[(size_t)i * k + c] * wv;
      }
    }
  }
  for (int i = 0; i < kMatvecMaxRows; ++i) {
    if (i >= m) break;
    const float s = warp_sum(acc[i]);
    if (lane == 0) y[(size_t)i * n + j] = s;
  }
}

// wide: k % 8 == 0 and w 16-byte aligned (every row then is), checked by the host.
__global__ void matvec_xwt16_kernel(const float* x, const void* w, int code, float* y, int m, int n, int k, bool wide) {
  const int lane = threadIdx.x & 31;
  const int j = blockIdx.x * kMatvecWarps + (threadIdx.x >> 5);
  if (j >= n) return;
  const size_t row = (size_t)j * k;
  if (code == kW16BF)
    matvec16_row(x, static_cast<const __nv_bfloat16*>(w) + row, y, m, n, k, j, lane, wide);
  else
    matvec16_row(x, static_cast<const __half*>(w) + row, y, m, n, k, j, lane, wide);
}

// yr[n] = w * (xr * rms_factor) for one row, ss this thread's part of the row's sum of squares (a block per row).
__device__ __forceinline__ void rmsnorm_row(const float* xr, const float* w, float* yr, int n, float eps, float ss,
                                            float* sh) {
  ss = block_sum(ss, sh);
  const float f = math::rms_factor(ss, n, eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = w[i] * (xr[i] * f);
}

__global__ void rmsnorm_kernel(const float* x, const float* w, float* y, int n, float eps) {
  __shared__ float sh[32];
  const float* xr = x + (size_t)blockIdx.x * n;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) ss += xr[i] * xr[i];
  rmsnorm_row(xr, w, y + (size_t)blockIdx.x * n, n, eps, ss, sh);
}

// x[row] += y[row], then xn[row] = rmsnorm(x[row]) * w: add_kernel's sums and rmsnorm_kernel's reduction, in one
// block per row.
__global__ void add_rmsnorm_kernel(float* x, const float* y, const float* w, float* xn, int n, float eps) {
  __shared__ float sh[32];
  float* xr = x + (size_t)blockIdx.x * n;
  const float* yr = y + (size_t)blockIdx.x * n;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = xr[i] + yr[i];
    xr[i] = v;
    ss += v * v;
  }
  rmsnorm_row(xr, w, xn + (size_t)blockIdx.x * n, n, eps, ss, sh);
}

__global__ void rope_kernel(float* x, int n_tokens, int n_heads, int d_head, int pos0, float theta) {
  const int half = d_head / 2;
  const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (size_t)n_tokens * n_heads * half) return;
  const int i = (int)(idx % half);
  const size_t th = idx / half;  // t * n_heads + h
  const int t = (int)(th / n_heads);
  const float ang = math::rope_angle(pos0 + t, math::rope_inv_freq(theta, i, d_head));
  float* xh = x + th * d_head;
  math::rope_rotate_pair(xh[i], xh[i + half], cosf(ang), sinf(ang));
}

// Pair idx of x [n_tokens, n_heads * d_head] rotated (rope_freqs_kernel's thread).
__device__ __forceinline__ void rope_freqs_pair(float* x, int n_tokens, int n_heads, int d_head, int pos0,
                                                const float* inv_freq, float cs_scale, size_t idx) {
  const int half = d_head / 2;
  if (idx >= (size_t)n_tokens * n_heads * half) return;
  const int i = (int)(idx % half);
  const size_t th = idx / half;  // t * n_heads + h
  const int t = (int)(th / n_heads);
  const float ang = math::rope_angle(pos0 + t, inv_freq[i]);
  float* xh = x + th * d_head;
  math::rope_rotate_pair(xh[i], xh[i + half], cosf(ang) * cs_scale, sinf(ang) * cs_scale);
}

__global__ void rope_freqs_kernel(float* x, int n_tokens, int n_heads, int d_head, int pos0, const float* inv_freq,
                                  float cs_scale) {
  rope_freqs_pair(x, n_tokens, n_heads, d_head, pos0, inv_freq, cs_scale,
                  (size_t)blockIdx.x * blockDim.x + threadIdx.x);
}
// blockIdx.y 0: the queries q [.., n_heads * d_head]; 1: the keys k [.., n_kv_heads * d_head].
__global__ void rope_freqs_qk_kernel(float* q, float* k, int n_tokens, int n_heads, int n_kv_heads, int d_head,
                                     int pos0, const float* inv_freq, float cs_scale) {
  rope_freqs_pair(blockIdx.y ? k : q, n_tokens, blockIdx.y ? n_kv_heads : n_heads, d_head, pos0, inv_freq, cs_scale,
                  (size_t)blockIdx.x * blockDim.x + threadIdx.x);
}

__global__ void layernorm_kernel(const float* x, const float* w, const float* b, float* y, int n, float eps) {
  __shared__ float sh[32];
  const float* xr = x + (size_t)blockIdx.x * n;
  float* yr = y + (size_t)blockIdx.x * n;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) sum += xr[i];
  const float mean = block_sum(sum, sh) / (float)n;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (xr[i] - mean) * (xr[i] - mean);
  const float rstd = math::layernorm_rstd(block_sum(ss, sh) / (float)n, eps);
  for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
}

__global__ void act_mul_kernel(const float* gate, const float* up, float* out, size_t n, int act) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = math::activate(gate[i], act) * (up ? up[i] : 1.0f);
}

__global__ void softcap_kernel(float* x, size_t n, float cap) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = cap * math::tanh_approx(x[i] / cap);
}

__global__ void scale_kernel(float* x, size_t n, float s) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= s;
}

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, size_t n) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = math::silu(gate[i]) * up[i];
}

__global__ void add_kernel(float* y, const float* x, size_t n) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void add_row_bias_kernel(float* y, const float* b, int rows, int n) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (size_t)rows * n) y[i] += b[i % n];
}

// Element i of kv [n_tokens, n_kv * d] into cache [n_kv, stride, d] at position pos0 + its token.
__device__ __forceinline__ void kv_store_elem(const float* kv, float* cache, int n_tokens, int n_kv, int d, int stride,
                                              int pos0, size_t i) {
  if (i >= (size_t)n_tokens * n_kv * d) return;
  const int c = (int)(i % d);
  const size_t th = i / d;
  const int h = (int)(th % n_kv), t = (int)(th / n_kv);
  cache[((size_t)h * stride + pos0 + t) * d + c] = kv[i];
}
__global__ void kv_store_kernel(const float* kv, float* cache, int n_tokens, int n_kv, int d, int stride, int pos0) {
  kv_store_elem(kv, cache, n_tokens, n_kv, d, stride, pos0, (size_t)blockIdx.x * blockDim.x + threadIdx.x);
}
// blockIdx.y 0: k into k_cache; 1: v into v_cache.
__global__ void kv_store_pair_kernel(const float* k, const float* v, float* k_cache, float* v_cache, int n_tokens,
                                     int n_kv, int d, int stride, int pos0) {
  kv_store_elem(blockIdx.y ? v : k, blockIdx.y ? v_cache : k_cache, n_tokens, n_kv, d, stride, pos0,
                (size_t)blockIdx.x * blockDim.x + threadIdx.x);
}

// One block per row of raw[n_rows, n_keys] (head `head`, rows r0..): softmax of raw * scale over the row's visible
// keys into probs, zeros past them, metrics in the same pass. Same formulas and order of operations as the CPU
// softmax_scaled_row; only the summation order of the reductions differs. Topk: ThreadTopkRegs for a.topk <= 8.
template <class Topk>
__global__ void softmax_rows_kernel(RowArgs a, int head, int r0, int n_keys, float* raw, float* probs,
                                    uint16_t* probs16) {
  __shared__ float sh[32];
  __shared__ float shv[32];
  __shared__ int shi[32];
  const int row = r0 + blockIdx.x;
  const int n_vis = a.n_past + row + 1;
  float* rr = raw + (size_t)blockIdx.x * n_keys;
  float* pr = probs + (size_t)blockIdx.x * n_keys;
  uint16_t* p16 = probs16 ? probs16 + (size_t)blockIdx.x * n_keys : nullptr;  // fp16 copy for the download
  const float s = a.row_scale[(size_t)head * a.n_tokens + row];
  const int lo = math::window_first_key(n_vis, a.window);  // keys before lo are outside the sliding window
  const float cap = a.softcap;
  const bool plain = cap <= 0.0f && lo == 0;  // the LLaMA row: the CPU path's exact order of operations

  float mx = -INFINITY;
  for (int j = lo + threadIdx.x; j < n_vis; j += blockDim.x) mx = rr[j] > mx ? rr[j] : mx;
  // s >= 0 and the cap is increasing: the row's largest logit is that of its largest raw score
  mx = plain ? block_max(mx, sh) * s : math::attn_logit(block_max(mx, sh), s, cap);
  float z = 0.0f, acc = 0.0f;
  for (int j = threadIdx.x; j < lo; j += blockDim.x) {
    pr[j] = 0.0f;
    rr[j] = 0.0f;
    if (p16) p16[j] = 0;
  }
  for (int j = lo + threadIdx.x; j < n_vis; j += blockDim.x) {
    const float d = (plain ? rr[j] * s : math::attn_logit(rr[j], s, cap)) - mx;
    const float e = math::exp_nonpos(d);
    pr[j] = e;
    z += e;
    acc += e > 0.0f ? e * d : 0.0f;
  }
  z = block_sum(z, sh);
  acc = block_sum(acc, sh);
  const float inv_z = 1.0f / z;
  const float inv_n = 1.0f / (float)(n_vis - lo);
  const int k = a.topk < kMaxTopk ? a.topk : kMaxTopk;
  Topk tk;
  topk_init(tk);
  float tail = 0.0f;
  for (int j = lo + threadIdx.x; j < n_vis; j += blockDim.x) {
    const float v = pr[j] * inv_z;
    pr[j] = v;
    if (p16) p16[j] = math::float_to_half_bits(v);
    tail += math::tail_term(v, inv_n);
    if (a.metrics && k > 0) topk_push(tk, k, v, j);
  }
  for (int j = n_vis + threadIdx.x; j < n_keys; j += blockDim.x) {
    pr[j] = 0.0f;
    rr[j] = 0.0f;
    if (p16) p16[j] = 0;
  }
  if (!a.metrics) return;
  tail = block_sum(tail, sh);  // also orders the probability writes above before the reads below
  float topk_mass = 0.0f;
  if (k > 0) topk_merge(tk, k, shv, shi, [&](int, float v, int) { topk_mass += v; });
  float rel = 0.0f, seen = 0.0f;
  for (int r = threadIdx.x; r < a.n_relevant; r += blockDim.x) {
    const int j = a.relevant[r];
    if (j >= lo && j < n_vis) {
      rel += pr[j];
      seen += 1.0f;
    }
  }
  rel = block_sum(rel, sh);
  seen = block_sum(seen, sh);
  if (threadIdx.x == 0)
    write_metrics(a.metrics + ((size_t)head * a.n_tokens + row) * ops::kNumRowMetrics, logf(z) - acc * inv_z, z,
                  n_vis - lo, tail, math::sink_mass(lo, pr[0]), topk_mass, rel, seen);
}

// The block's online softmax states merged (math::online_softmax_merge, in thread order by thread 0); every thread
// gets the result. st_m / st_z / st_a: blockDim.x floats of shared memory each.
__device__ math::OnlineSoftmax block_merge_online(const math::OnlineSoftmax& mine, float* st_m, float* st_z,
                                                  float* st_a) {
  st_m[threadIdx.x] = mine.m;
  st_z[threadIdx.x] = mine.z;
  st_a[threadIdx.x] = mine.a;
  __syncthreads();
  if (threadIdx.x == 0) {
    math::OnlineSoftmax all = math::online_softmax_init();
    for (int t = 0; t < (int)blockDim.x; ++t)
      math::online_softmax_merge(all, math::OnlineSoftmax{st_m[t], st_z[t], st_a[t]});
    st_m[0] = all.m;
    st_z[0] = all.z;
    st_a[0] = all.a;
  }
  __syncthreads();
  return math::OnlineSoftmax{st_m[0], st_z[0], st_a[0]};
}

// The end of a row's metrics from its finished online state sm (every thread of the block): the tail mass summed over
// the block, the top-k mass from the threads' lists of logits (k: 0 for none), the relevant mass from logit_of(j)
// (key j's logit), and every metric written by thread 0 (entropy H = ln Z - A / Z from the state itself). tail and
// sink: this thread's sums (sink: thread 0 saw key 0).
template <class Topk, class LogitOf>
__device__ void write_online_metrics(const RowArgs& a, int h, int row, int lo, int n_vis, const math::OnlineSoftmax& sm,
                                     float tail, float sink, const Topk& tk, int k, float* sh, float* shv, int* shi,
                                     LogitOf logit_of) {
  tail = block_sum(tail, sh);
  float topk_mass = 0.0f;
  if (k > 0) topk_merge(tk, k, shv, shi, [&](int, float x, int) { topk_mass += math::online_softmax_prob(sm, x); });
  float rel = 0.0f, seen = 0.0f;
  for (int r = threadIdx.x; r < a.n_relevant; r += blockDim.x) {
    const int j = a.relevant[r];
    if (j >= lo && j < n_vis) {
      rel += math::online_softmax_prob(sm, logit_of(j));
      seen += 1.0f;
    }
  }
  rel = block_sum(rel, sh);
  seen = block_sum(seen, sh);
  if (threadIdx.x == 0)
    write_metrics(a.metrics + ((size_t)h * a.n_tokens + row) * ops::kNumRowMetrics, math::online_softmax_entropy(sm),
                  sm.z, n_vis - lo, tail, sink, topk_mass, rel, seen);
}

// The logit of a raw dot product as the CPU path forms it: raw = dot * logit_scale, then times the row scale and
// through the soft-cap when there is one (math::attn_logit).
__device__ __forceinline__ float dot_logit(float dot, float logit_scale, float scale, float cap) {
  return cap > 0.0f ? math::attn_logit(dot * logit_scale, scale, cap) : (dot * logit_scale) * scale;
}
// The logit of one key: q_sh[d] . k[d], summed in order, through dot_logit.
__device__ __forceinline__ float scaled_score(const float* q_sh, const float* kj, int d, float logit_scale, float scale,
                                              float cap) {
  float dot = 0.0f;
  for (int c = 0; c < d; ++c) dot += q_sh[c] * kj[c];
  return dot_logit(dot, logit_scale, scale, cap);
}

// Flash-style attention, one block per (row, head): pass 1 keeps the online softmax state (running max m, Z, A) and
// the top-k scores; pass 2 recomputes each score once more, forms p = e^(s-m)/Z, accumulates p.V in shared memory
// and the tail mass. Nothing of size T^2 is stored. Topk: ThreadTopkRegs for a.topk <= 8.
template <class Topk>
__global__ void attention_fused_kernel(RowArgs a, const float* q, const float* k_cache, const float* v_cache,
                                       int cache_stride, int n_heads, int n_kv_heads, int d, const uint8_t* skip,
                                       float* out) {
  extern __shared__ float smem[];
  float* q_sh = smem;            // [d]
  float* acc_sh = smem + d;      // [d]
  float* p_tile = smem + 2 * d;  // [blockDim.x]
  __shared__ float sh[32];
  __shared__ float shv[32];
  __shared__ int shi[32];
  __shared__ float st_m[kFlashThreads], st_z[kFlashThreads], st_a[kFlashThreads];
  const int row = blockIdx.x, h = blockIdx.y;
  if (skip && skip[h]) return;
  const int kvh = h / (n_heads / n_kv_heads);
  const int n_vis = a.n_past + row + 1;
  const int q_stride = n_heads * d;
  const float* kh = k_cache + (size_t)kvh * cache_stride * d;
  const float* vh = v_cache + (size_t)kvh * cache_stride * d;
  const float s = a.row_scale[(size_t)h * a.n_tokens + row];
  const float inv_sqrt_d = a.logit_scale > 0.0f ? a.logit_scale : 1.0f / sqrtf((float)d);
  const float cap = a.softcap;
  const int lo = math::window_first_key(n_vis, a.window);
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    q_sh[c] = q[(size_t)row * q_stride + (size_t)h * d + c];
    acc_sh[c] = 0.0f;
  }
  __syncthreads();

  const int k = a.topk < kMaxTopk ? a.topk : kMaxTopk;
  const bool want_topk = a.metrics && k > 0;
  Topk tk;
  topk_init(tk);
  math::OnlineSoftmax st = math::online_softmax_init();
  for (int j = lo + threadIdx.x; j < n_vis; j += blockDim.x) {
    const float x = scaled_score(q_sh, kh + (size_t)j * d, d, inv_sqrt_d, s, cap);
    math::online_softmax_push(st, x);
    if (want_topk) topk_push(tk, k, x, j);
  }
  const math::OnlineSoftmax sm = block_merge_online(st, st_m, st_z, st_a);  // the row's finished online state
  const float inv_n = 1.0f / (float)(n_vis - lo);

  float tail = 0.0f, sink = 0.0f;
  for (int j0 = lo; j0 < n_vis; j0 += blockDim.x) {
    const int j = j0 + threadIdx.x;
    float p = 0.0f;
    if (j < n_vis) {
      p = math::online_softmax_prob(sm, scaled_score(q_sh, kh + (size_t)j * d, d, inv_sqrt_d, s, cap));
      tail += math::tail_term(p, inv_n);
      if (j == 0) sink = math::sink_mass(lo, p);
    }
    p_tile[threadIdx.x] = p;
    __syncthreads();
    const int nt = n_vis - j0 < (int)blockDim.x ? n_vis - j0 : (int)blockDim.x;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
      float acc = acc_sh[c];
      for (int i = 0; i < nt; ++i) acc += p_tile[i] * vh[(size_t)(j0 + i) * d + c];
      acc_sh[c] = acc;
    }
    __syncthreads();
  }
  for (int c = threadIdx.x; c < d; c += blockDim.x) out[(size_t)row * q_stride + (size_t)h * d + c] = acc_sh[c];
  if (!a.metrics) return;

  write_online_metrics(a, h, row, lo, n_vis, sm, tail, sink, tk, want_topk ? k : 0, sh, shv, shi,
                       [&](int j) { return scaled_score(q_sh, kh + (size_t)j * d, d, inv_sqrt_d, s, cap); });
}

__global__ void topk_rows_kernel(const float* x, int n, int k, int32_t* idx, float* val) {
  __shared__ float shv[32];
  __shared__ int shi[32];
  const float* xr = x + (size_t)blockIdx.x * n;
  ThreadTopk tk;
  tk.cnt = 0;
  for (int j = threadIdx.x; j < n; j += blockDim.x) topk_push(tk, k, xr[j], j);
  int32_t* ir = idx + (size_t)blockIdx.x * k;
  float* vr = val + (size_t)blockIdx.x * k;
  topk_merge(tk, k, shv, shi, [&](int r, float v, int i) {
    if (threadIdx.x == 0) {
      ir[r] = i;
      vr[r] = v;
    }
  });
}

// Per row of x[rows, n] (a block each): out[row] = (ops::log_sum_exp's max + log sum exp_nonpos(x - max), the value
// at targets[row], NaN for a negative target).
__global__ void row_lse_target_kernel(const float* x, int n, const int32_t* targets, float2* out) {
  __shared__ float sh[32];
  const float* xr = x + (size_t)blockIdx.x * n;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < n; j += blockDim.x) mx = xr[j] > mx ? xr[j] : mx;
  mx = block_max(mx, sh);
  float z = 0.0f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) z += math::exp_nonpos(xr[j] - mx);
  z = block_sum(z, sh);
  if (threadIdx.x == 0) {
    const int t = targets[blockIdx.x];
    out[blockIdx.x] = make_float2(mx + logf(z), t >= 0 && t < n ? xr[t] : NAN);
  }
}

#include "attention_tc.cuh"
#include "attention_split.cuh"

// Quantized weights (QWeight). TYPE is a template argument, so each format's dequant_sub32 compiles to straight-line
// code with its 32 values in registers.
//
// matvec_q: a block of kMatvecWarps warps takes kQRows * (kMatvecWarps / split) rows of w. The warps of a group
// share its kQRows rows and split k `split` ways: warp z of a group walks the rows' 32-value sub-blocks
// 32 z + lane, 32 (z + split) + lane, .. (a warp reads 32 consecutive sub-blocks of each row, consecutive lanes
// consecutive bytes), loads x's 32 matching values once and uses them for all kQRows rows; the group's partial sums
// meet in shared memory. (One row per warp read x's values once per weight, 4 bytes per 0.56-byte Q4_K weight: on an
// H200 Llama-3-8B's Q4_K decode ran at 8 % of the copy bandwidth. kQRows rows per warp and no split left 0.85 waves
// of 8-warp blocks on 4096-row matrices, and the kernel latency-bound at 460 GB/s; with the split 686 GB/s, with
// Q4_K's factored dot 783 GB/s, still latency-bound at 35 % occupancy: llama.cpp's int8 x and dp4a are the next step.)
// MAX_M: the rows of x the kernel is compiled for (1: decode, everything in registers; kMatvecMaxRows: up to 8).
constexpr int kQRows = 4;
// The k split of matvec_q for n_sub 32-value sub-blocks per row: a power of two up to kMatvecWarps with at least one
// full warp-step (32 sub-blocks) per warp.
__host__ __device__ constexpr int matvec_q_split(int n_sub) {
  int split = 1;
  while (split < kMatvecWarps && n_sub >= 64 * split) split *= 2;
  return split;
}
// Up to three weights of one type and width sharing x (Q, K, V; gate, up) in one launch: blocks first[i] ..
// first[i + 1] - 1 take weight i.
struct QMatvecSet {
  QWeight w[kMatvecSetMax];
  float* y[kMatvecSetMax];
  int first[kMatvecSetMax + 1];
  int n = 0;
};
// A thread's place in a matrix-vector launch over a QMatvecSet: the weight its block takes (which), its lane, warp,
// and slice z of k within the warp's group of `split`, the group's first row j0 and its n_r rows (0..kQRows).
struct SetPlace {
  int which, lane, warp, z, j0, n_r;
};
__device__ __forceinline__ SetPlace set_place(const QMatvecSet& set, int split) {
  SetPlace p;
  p.lane = threadIdx.x & 31;
  p.warp = threadIdx.x >> 5;
  p.z = p.warp % split;
  p.which = 0;
  while (p.which + 1 < set.n && (int)blockIdx.x >= set.first[p.which + 1]) ++p.which;
  const int rows = set.w[p.which].rows;
  p.j0 = ((blockIdx.x - set.first[p.which]) * (kMatvecWarps / split) + p.warp / split) * kQRows;
  p.n_r = p.j0 >= rows ? 0 : rows - p.j0 < kQRows ? rows - p.j0 : kQRows;
  return p;
}
// The dot of x's 32 values xs (their sum xsum) with sub-block `sub` of the Q4_K block at blk (16-byte aligned), as
// d sc sum_l x_l q_l - dmin mn xsum: the same weights as qblocks::dequant_sub32 (value d sc q - dmin mn, scale_min_k4's
// 6-bit sc and mn), with each 4-bit q widened to fp32 by a byte permute into 2^23 + q and one subtraction (no
// integer-to-float conversion, which issues at a quarter of the FMA rate): about 3.5 instructions a weight instead of
// 7. Measured on an H200 (Llama-3-8B's shape): the weight products 6.2 -> 5.4 ms a token, not the 2x predicted; the
// kernel stays latency-bound (docs/performance-log.md, 2026-11-28).
__device__ __forceinline__ float dot_sub32_q4k(const uint8_t* blk, int sub, const float* xs, float xsum) {
  const uint4 hw = *reinterpret_cast<const uint4*>(blk);  // d, dmin (fp16 each); the 12 scale bytes
  const uint32_t head = hw.x;
  int sc, mn;
  qblocks::scale_min_k4_words(sub, hw.y, hw.z, hw.w, &sc, &mn);  // in registers (no local-memory array)
  const float d = math::half_bits_to_float((uint16_t)(head & 0xFFFF)),
              dmin = math::half_bits_to_float((uint16_t)(head >> 16));
  const uint4* qp = reinterpret_cast<const uint4*>(blk + 16 + 32 * (sub / 2));
  const uint4 qa = qp[0], qb = qp[1];
  const uint32_t qw[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
  const int shift = (sub & 1) * 4;
  float dot = 0.0f;
#pragma unroll
  for (int wi = 0; wi < 8; ++wi) {
    const uint32_t nib = (qw[wi] >> shift) & 0x0F0F0F0Fu;  // values 4 wi .. 4 wi + 3
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      // bytes [q_b, 0, 0, 0x4B]: the float 2^23 + q_b
      const float q =
          __int_as_float((int)__byte_perm(nib, 0x4B00u, (uint32_t)(b | (4 << 4) | (4 << 8) | (5 << 12)))) - 8388608.0f;
      dot = fmaf(q, xs[4 * wi + b], dot);
    }
  }
  return d * (float)sc * dot - dmin * (float)mn * xsum;
}

template <int TYPE, int MAX_M>
__global__ void matvec_q_kernel(const float* x, QMatvecSet set, int m, int split) {
  __shared__ float part[kMatvecWarps][kQRows][MAX_M];  // [warp][row][row of x]: each warp's sums, for its group
  const SetPlace pl = set_place(set, split);
  const int lane = pl.lane, warp = pl.warp, z = pl.z, j0 = pl.j0, n_r = pl.n_r;
  const QWeight& w = set.w[pl.which];
  float* y = set.y[pl.which];
  constexpr int kSubs = TYPE == qblocks::kQ4_K || TYPE == qblocks::kQ5_K || TYPE == qblocks::kQ6_K ? 8 : 1;
  const int bb = qblocks::block_bytes(TYPE);
  const int k = w.cols, n_sub = k / 32;
  float acc[kQRows][MAX_M];
  for (int r = 0; r < kQRows; ++r)
    for (int i = 0; i < MAX_M; ++i) acc[r][i] = 0.0f;
  for (int s = 32 * z + lane; n_r > 0 && s < n_sub; s += 32 * split) {
#pragma unroll
    for (int i = 0; i < MAX_M; ++i) {  // unrolled: acc's index a constant, so it stays in registers
      if (i >= m) break;
      float xs[32];
      const float4* xr = reinterpret_cast<const float4*>(x + (size_t)i * k + 32 * s);
      for (int q = 0; q < 8; ++q) {
        const float4 xv = xr[q];
        xs[4 * q] = xv.x;
        xs[4 * q + 1] = xv.y;
        xs[4 * q + 2] = xv.z;
        xs[4 * q + 3] = xv.w;
      }
      float xsum = 0.0f;  // Q4_K's factored dot takes the sub-block's sum of x once for all its rows
      if (TYPE == qblocks::kQ4_K) {
        for (int l = 0; l < 32; ++l) xsum += xs[l];
      }
      // Unrolled with no early exit, so that the loads of all kQRows rows may be in flight together (rows past the
      // matrix's end read its last row again and add nothing; measured: no change on an H200).
#pragma unroll
      for (int r = 0; r < kQRows; ++r) {
        const int row = j0 + (r < n_r ? r : n_r - 1);
        const uint8_t* blk = w.data + (size_t)row * w.row_bytes + (size_t)(s / kSubs) * bb;
        float a = 0.0f;
        if (TYPE == qblocks::kQ4_K) {
          a = dot_sub32_q4k(blk, s % kSubs, xs, xsum);
        } else {
          float v[32];
          qblocks::dequant_sub32(TYPE, blk, s % kSubs, v);
#pragma unroll
          for (int l = 0; l < 32; ++l) a = fmaf(v[l], xs[l], a);  // one rounding a term (the build has --fmad=false)
        }
        if (r < n_r) acc[r][i] += a;
      }
    }
  }
  for (int r = 0; r < kQRows; ++r)
#pragma unroll
    for (int i = 0; i < MAX_M; ++i) {
      if (i >= m) break;
      const float sum = warp_sum(acc[r][i]);  // every lane of the warp takes part (r >= n_r adds zeros)
      if (lane == 0) part[warp][r][i] = sum;
    }
  __syncthreads();
  // Thread t < kQRows * MAX_M of warp z == 0 sums its group's split partial sums of (row t / MAX_M, x row t % MAX_M).
  if (z == 0 && lane < kQRows * MAX_M) {
    const int r = lane / MAX_M, i = lane % MAX_M;
    if (r < n_r && i < m) {
      float sum = 0.0f;
      for (int zz = 0; zz < split; ++zz) sum += part[warp + zz][r][i];
      y[(size_t)i * w.rows + j0 + r] = sum;
    }
  }
}

// The fast precision's decode product for Q4_K with x in int8 (llama.cpp's way: x quantised per 32 values, the
// weights' 4-bit values multiplied by dp4a, four byte products an instruction, instead of widened to fp32 one at a
// time). quantize_x8: one warp per 32 values of x[n] (n % 32 == 0): q[n] (int8, qblocks::x8_round) and ds[n / 32] =
// (the scale, the fp32 sum of the 32 values, for the weights' min term). DIGITS = 2 (x16): the second digits of
// qblocks::x16_round in q[n ..], the scale x16_scale's.
template <int DIGITS>
__global__ void quantize_x8_kernel(const float* x, int n, int8_t* q, float2* ds) {
  const int lane = threadIdx.x & 31;
  const int sub = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (sub >= n / 32) return;  // the whole warp
  const float v = x[32 * sub + lane];
  const float amax = warp_max(fabsf(v)), sum = warp_sum(v), inv = qblocks::x8_inv_scale(amax);
  if (DIGITS == 1) {
    q[32 * sub + lane] = (int8_t)qblocks::x8_round(v, inv);
  } else {
    int q1, q2;
    qblocks::x16_round(v, inv, &q1, &q2);
    q[32 * sub + lane] = (int8_t)q1;
    q[n + 32 * sub + lane] = (int8_t)q2;
  }
  if (lane == 0) ds[sub] = make_float2(DIGITS == 1 ? qblocks::x8_scale(amax) : qblocks::x16_scale(amax), sum);
}

// The low bytes of four words as one word (the int8 in each fma's bits 1.5 * 2^23 + q).
__device__ __forceinline__ int low_bytes4(unsigned a, unsigned b, unsigned c, unsigned d) {
  return (int)__byte_perm(__byte_perm(a, b, 0x0040u), __byte_perm(c, d, 0x0040u), 0x5410u);
}
// Four values' digits, as quantize_x8 writes them, as int8 in words: w[0] their qblocks::x8_round (the first digit of
// x16_round), w[1] (DIGITS = 2) x16_round's second.
template <int DIGITS>
__device__ __forceinline__ void x8_pack4(float4 v, float inv, int* w) {
  const float f[4] = {v.x, v.y, v.z, v.w};
  unsigned b1[4], b2[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float t = fmaf(f[i], inv, qblocks::kX8RoundMagic);
    b1[i] = __float_as_uint(t);
    if (DIGITS == 2)
      b2[i] = __float_as_uint(
          fmaf(fmaf(f[i], inv, -(t - qblocks::kX8RoundMagic)), (float)qblocks::kX16Base, qblocks::kX8RoundMagic));
  }
  w[0] = low_bytes4(b1[0], b1[1], b1[2], b1[3]);
  if (DIGITS == 2) w[1] = low_bytes4(b2[0], b2[1], b2[2], b2[3]);
}
// A dot product's digit sums as one: the first digit's alone, or 254 times it plus the second's (x16: exact in
// int32; at most 16 values of 5 bits a lane in Q5_K: |sum| < 2^24, exact as a float too).
template <int DIGITS>
__device__ __forceinline__ int join_digits(const int* dot) {
  return DIGITS == 1 ? dot[0] : qblocks::kX16Base * dot[0] + dot[DIGITS - 1];
}
__device__ __forceinline__ float abs_max4(float4 v, float m) {
  return fmaxf(fmaxf(fmaxf(m, fabsf(v.x)), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
}

// The int8-x kernels' end: each warp's kQRows sums (warp sums of the lanes' acc), then warp z = 0 of each group adds
// its group's `split` partial sums of row r into y[r] (rows r < n_r). part: the block's shared [kMatvecWarps][kQRows].
__device__ __forceinline__ void x8_rows_out(const float* acc, float (*part)[kQRows], int warp, int lane, int z,
                                            int split, int n_r, float* y) {
#pragma unroll
  for (int r = 0; r < kQRows; ++r) {
    const float sum = warp_sum(acc[r]);  // every lane takes part
    if (lane == 0) part[warp][r] = sum;
  }
  __syncthreads();
  if (z == 0 && lane < kQRows && lane < n_r) {
    float sum = 0.0f;
    for (int zz = 0; zz < split; ++zz) sum += part[warp + zz][lane];
    y[lane] = sum;
  }
}

// The int8-x matrix-vector kernels' split of k: a power of two up to kMatvecWarps with at least two steps per warp.
__host__ __device__ constexpr int matvec_x8_split(int n_steps) {
  int split = 1;
  while (split < kMatvecWarps && n_steps >= 4 * split) split *= 2;
  return split;
}

// y = x . w^T for one row of x (decode), w Q4_K or Q5_K. Warps in groups of `split` as matvec_q's, kQRows rows a
// warp; in each step a warp covers 4 consecutive blocks of its rows, lane l taking block l / 8, sub-block pair
// p = (l / 2) % 4 and half h = l % 2: the 16 quant bytes at qs + 32 p + 16 h (qs = 16, Q5_K 48), whose low nibbles
// are values 16 h .. 16 h + 15 of sub-block 2 p and high nibbles those of 2 p + 1 (consecutive lanes, consecutive
// bytes; one 16-byte load a row, no byte read twice), against x's 2 x 16 int8 values (loaded once for all kQRows
// rows). Q5_K: the fifth bits of the same values, bits 2 p and 2 p + 1 of the 16 qh bytes at 16 + 16 h, put above
// the nibbles (values 0..31). A sub-block's term: d sc dx sum_l q_l xq_l - dmin mn sum(x), the min term added by
// the lane with h = 0.
// X_F32: the kernel rounds x itself (fp32 x, 128 bytes a lane a step; the two lanes of a sub-block meet by one
// shuffle for max |x| and the sum), with no quantize launch; else x as quantize_x8 wrote it (xq, xds). DIGITS: x in
// one int8 digit or two (x16: each dot product is taken with both digits' words and joined, join_digits).
template <int TYPE, bool X_F32, int DIGITS>
__global__ void matvec_k4_x8_kernel(const float* x, const int8_t* xq, const float2* xds, QMatvecSet set, int split) {
  static_assert(TYPE == qblocks::kQ4_K || TYPE == qblocks::kQ5_K, "Q4_K or Q5_K");
  constexpr bool kFive = TYPE == qblocks::kQ5_K;
  constexpr int kBytes = kFive ? 176 : 144, kQs = kFive ? 48 : 16;
  __shared__ float part[kMatvecWarps][kQRows];  // [warp][row]: each warp's sums, for its group
  const SetPlace pl = set_place(set, split);
  const int lane = pl.lane, j0 = pl.j0, n_r = pl.n_r;
  const QWeight& w = set.w[pl.which];
  const int n_blk = w.cols / 256, n_steps = (n_blk + 3) / 4;
  const int bl = lane >> 3, pair = (lane >> 1) & 3, h = lane & 1;
  float acc[kQRows];
#pragma unroll
  for (int r = 0; r < kQRows; ++r) acc[r] = 0.0f;
  for (int st = pl.z; n_r > 0 && st < n_steps; st += split) {  // the same trip count for the whole warp
    // A lane past the row's last block (n_blk % 4 != 0) reads that block and adds nothing: every lane stays in the
    // shuffles.
    const bool in_row = 4 * st + bl < n_blk;
    const int b = in_row ? 4 * st + bl : n_blk - 1;
    const int s0 = 8 * b + 2 * pair;   // x's sub-block of the low nibbles; s0 + 1 the high
    int xa[DIGITS][4], xb[DIGITS][4];  // [digit][word]: values 16 h .. 16 h + 15 of s0 (xa), of s0 + 1 (xb)
    float4 ds;                         // scale and sum of s0, then of s0 + 1
    if (X_F32) {
      const float4* p0 = reinterpret_cast<const float4*>(x + 32 * s0 + 16 * h);
      const float4* p1 = reinterpret_cast<const float4*>(x + 32 * (s0 + 1) + 16 * h);
      const float4 a0 = p0[0], a1 = p0[1], a2 = p0[2], a3 = p0[3], b0 = p1[0], b1 = p1[1], b2 = p1[2], b3 = p1[3];
      float m0 = abs_max4(a3, abs_max4(a2, abs_max4(a1, abs_max4(a0, 0.0f))));
      float m1 = abs_max4(b3, abs_max4(b2, abs_max4(b1, abs_max4(b0, 0.0f))));
      float s0s = ((a0.x + a0.y) + (a0.z + a0.w)) + ((a1.x + a1.y) + (a1.z + a1.w)) + ((a2.x + a2.y) + (a2.z + a2.w)) +
                  ((a3.x + a3.y) + (a3.z + a3.w));
      float s1s = ((b0.x + b0.y) + (b0.z + b0.w)) + ((b1.x + b1.y) + (b1.z + b1.w)) + ((b2.x + b2.y) + (b2.z + b2.w)) +
                  ((b3.x + b3.y) + (b3.z + b3.w));
      m0 = fmaxf(m0, __shfl_xor_sync(0xffffffffu, m0, 1));  // the other half of the sub-block (lane l ^ 1)
      m1 = fmaxf(m1, __shfl_xor_sync(0xffffffffu, m1, 1));
      s0s += __shfl_xor_sync(0xffffffffu, s0s, 1);
      s1s += __shfl_xor_sync(0xffffffffu, s1s, 1);
      const float i0 = qblocks::x8_inv_scale(m0), i1 = qblocks::x8_inv_scale(m1);
      const float4 av[4] = {a0, a1, a2, a3}, bv[4] = {b0, b1, b2, b3};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        int wa[DIGITS], wb[DIGITS];
        x8_pack4<DIGITS>(av[i], i0, wa);
        x8_pack4<DIGITS>(bv[i], i1, wb);
#pragma unroll
        for (int g = 0; g < DIGITS; ++g) xa[g][i] = wa[g], xb[g][i] = wb[g];
      }
      ds = DIGITS == 1 ? make_float4(qblocks::x8_scale(m0), s0s, qblocks::x8_scale(m1), s1s)
                       : make_float4(qblocks::x16_scale(m0), s0s, qblocks::x16_scale(m1), s1s);
    } else {
      const int k = w.cols;
#pragma unroll
      for (int g = 0; g < DIGITS; ++g) {  // digit g's plane at xq + g k
        const int4 a = *reinterpret_cast<const int4*>(xq + (size_t)g * k + 32 * s0 + 16 * h);
        const int4 bq = *reinterpret_cast<const int4*>(xq + (size_t)g * k + 32 * (s0 + 1) + 16 * h);
        xa[g][0] = a.x, xa[g][1] = a.y, xa[g][2] = a.z, xa[g][3] = a.w;
        xb[g][0] = bq.x, xb[g][1] = bq.y, xb[g][2] = bq.z, xb[g][3] = bq.w;
      }
      ds = *reinterpret_cast<const float4*>(xds + s0);
    }
    // Unrolled with no early exit, as matvec_q's (rows past the matrix's end read its last row, add nothing).
#pragma unroll
    for (int r = 0; r < kQRows; ++r) {
      const int row = j0 + (r < n_r ? r : n_r - 1);
      const uint8_t* blk = w.data + (size_t)row * w.row_bytes + (size_t)b * kBytes;
      const uint4 hw = *reinterpret_cast<const uint4*>(blk);  // d, dmin (fp16 each); the 12 scale bytes
      const uint4 qv = *reinterpret_cast<const uint4*>(blk + kQs + 32 * pair + 16 * h);
      uint32_t lo[4] = {qv.x & 0x0F0F0F0Fu, qv.y & 0x0F0F0F0Fu, qv.z & 0x0F0F0F0Fu, qv.w & 0x0F0F0F0Fu};
      uint32_t hi[4] = {(qv.x >> 4) & 0x0F0F0F0Fu, (qv.y >> 4) & 0x0F0F0F0Fu, (qv.z >> 4) & 0x0F0F0F0Fu,
                        (qv.w >> 4) & 0x0F0F0F0Fu};
      if (kFive) {
        const uint4 qh = *reinterpret_cast<const uint4*>(blk + 16 + 16 * h);
        const uint32_t hb[4] = {qh.x, qh.y, qh.z, qh.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          lo[i] |= ((hb[i] >> (2 * pair)) & 0x01010101u) << 4;
          hi[i] |= ((hb[i] >> (2 * pair + 1)) & 0x01010101u) << 4;
        }
      }
      int sc_lo, mn_lo, sc_hi, mn_hi;
      qblocks::scale_min_k4_words(2 * pair, hw.y, hw.z, hw.w, &sc_lo, &mn_lo);
      qblocks::scale_min_k4_words(2 * pair + 1, hw.y, hw.z, hw.w, &sc_hi, &mn_hi);
      int dl[DIGITS], dh[DIGITS];
#pragma unroll
      for (int g = 0; g < DIGITS; ++g) {
        dl[g] = 0, dh[g] = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          dl[g] = __dp4a((int)lo[i], xa[g][i], dl[g]);
          dh[g] = __dp4a((int)hi[i], xb[g][i], dh[g]);
        }
      }
      const int dot_lo = join_digits<DIGITS>(dl), dot_hi = join_digits<DIGITS>(dh);
      const float d = math::half_bits_to_float((uint16_t)(hw.x & 0xFFFF)),
                  dmin = math::half_bits_to_float((uint16_t)(hw.x >> 16));
      float a = d * ((float)sc_lo * ds.x * (float)dot_lo + (float)sc_hi * ds.z * (float)dot_hi);
      if (h == 0) a -= dmin * ((float)mn_lo * ds.y + (float)mn_hi * ds.w);
      if (r < n_r && in_row) acc[r] += a;
    }
  }
  x8_rows_out(acc, part, pl.warp, lane, pl.z, split, n_r, set.y[pl.which] + j0);
}

// Four bytes at a 2-byte-aligned address (Q6_K's 210-byte blocks leave every other block 2 bytes off a word).
__device__ __forceinline__ uint32_t load_u32_a2(const uint8_t* p) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
  return (uint32_t)h[0] | ((uint32_t)h[1] << 16);
}

// y = x . w^T for one row of x (decode), w Q6_K, x as quantize_x8 wrote it; warps, groups and rows as
// matvec_q4k_x8_kernel's. A step covers 2 blocks of a warp's rows, lane l taking block l / 16, half n = (l / 8) % 2
// and values l0 = 4 (l % 8) .. l0 + 3 of each of the half's four 32-value groups m (qblocks::dequant_sub32's
// layout): ql bytes 64 n + l0 (low nibbles: m = 0, high: m = 2) and 64 n + 32 + l0 (m = 1, 3), qh bytes 32 n + l0
// (bits 2m, 2m + 1 on top), the scale of values 16 (l0 / 16).. of group m at 192 + 8 n + 2 m + l0 / 16. The weight
// is d sc (q - 32): a group's term d sc dx (sum q xq - 32 sum xq), the x sums taken once for all kQRows rows.
template <int DIGITS>
__global__ void matvec_q6k_x8_kernel(const int8_t* xq, const float2* xds, QMatvecSet set, int split) {
  __shared__ float part[kMatvecWarps][kQRows];
  const SetPlace pl = set_place(set, split);
  const int lane = pl.lane, j0 = pl.j0, n_r = pl.n_r;
  const QWeight& w = set.w[pl.which];
  const int n_blk = w.cols / 256, n_steps = (n_blk + 1) / 2;
  const int bl = lane >> 4, half = (lane >> 3) & 1, l0 = 4 * (lane & 7), is = l0 >> 4;
  float acc[kQRows];
#pragma unroll
  for (int r = 0; r < kQRows; ++r) acc[r] = 0.0f;
  for (int st = pl.z; n_r > 0 && st < n_steps; st += split) {
    const bool in_row = 2 * st + bl < n_blk;  // else (an odd n_blk's last step) read the last block, add nothing
    const int b = in_row ? 2 * st + bl : n_blk - 1;
    const int xv = 256 * b + 128 * half + l0;  // x's value of group 0's first; group m at xv + 32 m
    int xw[DIGITS][4], xs32[DIGITS][4];
    float dx[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
#pragma unroll
      for (int g = 0; g < DIGITS; ++g) {  // digit g's plane at xq + g k
        xw[g][m] = *reinterpret_cast<const int*>(xq + (size_t)g * w.cols + xv + 32 * m);
        xs32[g][m] = 32 * __dp4a(xw[g][m], 0x01010101, 0);  // 32 sum xq of the lane's 4 values of group m
      }
      dx[m] = xds[(xv >> 5) + m].x;
    }
#pragma unroll
    for (int r = 0; r < kQRows; ++r) {
      const int row = j0 + (r < n_r ? r : n_r - 1);
      const uint8_t* blk = w.data + (size_t)row * w.row_bytes + (size_t)b * 210;
      const uint32_t ql_a = load_u32_a2(blk + 64 * half + l0), ql_b = load_u32_a2(blk + 64 * half + 32 + l0);
      const uint32_t qh = load_u32_a2(blk + 128 + 32 * half + l0);
      const uint32_t sc01 = load_u32_a2(blk + 192 + 8 * half), sc23 = load_u32_a2(blk + 196 + 8 * half);
      const uint32_t q[4] = {
          (ql_a & 0x0F0F0F0Fu) | ((qh << 4) & 0x30303030u), (ql_b & 0x0F0F0F0Fu) | ((qh << 2) & 0x30303030u),
          ((ql_a >> 4) & 0x0F0F0F0Fu) | (qh & 0x30303030u), ((ql_b >> 4) & 0x0F0F0F0Fu) | ((qh >> 2) & 0x30303030u)};
      // scale bytes 2m + is of the half's 8: in sc01 (m = 0, 1) and sc23 (m = 2, 3)
      const int sc[4] = {(int)(int8_t)(sc01 >> (8 * is)), (int)(int8_t)(sc01 >> (8 * (2 + is))),
                         (int)(int8_t)(sc23 >> (8 * is)), (int)(int8_t)(sc23 >> (8 * (2 + is)))};
      float a = 0.0f;
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        int dot[DIGITS];
#pragma unroll
        for (int g = 0; g < DIGITS; ++g) dot[g] = __dp4a((int)q[m], xw[g][m], 0) - xs32[g][m];
        a += (float)sc[m] * dx[m] * (float)join_digits<DIGITS>(dot);
      }
      const float d = math::half_bits_to_float(*reinterpret_cast<const uint16_t*>(blk + 208));
      if (r < n_r && in_row) acc[r] += d * a;
    }
  }
  x8_rows_out(acc, part, pl.warp, lane, pl.z, split, n_r, set.y[pl.which] + j0);
}

// y = x . w^T for one row of x (decode), w of a 32-value format (Q4_0, Q4_1, Q8_0), x as quantize_x8 wrote it; warps,
// groups and rows as matvec_q4k_x8_kernel's. A step covers 8 blocks of a warp's rows, lane l taking block l / 4 and
// j = l % 4: Q8_0's values 8 j .. 8 j + 7 (8 bytes at 2 + 8 j), Q4_0 / Q4_1's quant bytes 4 j .. 4 j + 3 (at 2 + 4 j,
// Q4_1 4 + 4 j), whose low nibbles are values 4 j .. and high nibbles 16 + 4 j .. (qblocks::dequant_sub32). The
// blocks' 18 and 34 bytes leave their quants 2-byte aligned (load_u32_a2). Terms: Q8_0 d dx sum q xq; Q4_0
// d dx (sum q xq - 8 sum xq); Q4_1 the same plus (m + 8 d) sum(x), added by the lane with j = 0: Q4_1's weights
// d q + m are all of one sign, and centring q on 8 puts their mean on the fp32 sum of x, not on x's rounding (the
// tiny test models' decode logits moved 3-5 % with d dx sum q xq + m sum(x)).
template <int TYPE, int DIGITS>
__global__ void matvec_b32_x8_kernel(const int8_t* xq, const float2* xds, QMatvecSet set, int split) {
  constexpr bool kQ8 = TYPE == qblocks::kQ8_0, kQ41 = TYPE == qblocks::kQ4_1;
  constexpr int kBytes = qblocks::block_bytes(TYPE), kQs = kQ41 ? 4 : 2;
  __shared__ float part[kMatvecWarps][kQRows];
  const SetPlace pl = set_place(set, split);
  const int lane = pl.lane, j0 = pl.j0, n_r = pl.n_r;
  const QWeight& w = set.w[pl.which];
  const int n_blk = w.cols / 32, n_steps = (n_blk + 7) / 8;
  const int bl = lane >> 2, j = lane & 3;
  float acc[kQRows];
#pragma unroll
  for (int r = 0; r < kQRows; ++r) acc[r] = 0.0f;
  for (int st = pl.z; n_r > 0 && st < n_steps; st += split) {
    const bool in_row = 8 * st + bl < n_blk;  // else read the row's last block, add nothing
    const int b = in_row ? 8 * st + bl : n_blk - 1;
    const int x0 = 32 * b + (kQ8 ? 8 * j : 4 * j), x1 = x0 + (kQ8 ? 4 : 16);  // the lane's two words of x
    int xw0[DIGITS], xw1[DIGITS], xs8[DIGITS];
#pragma unroll
    for (int g = 0; g < DIGITS; ++g) {  // digit g's plane at xq + g k
      xw0[g] = *reinterpret_cast<const int*>(xq + (size_t)g * w.cols + x0);
      xw1[g] = *reinterpret_cast<const int*>(xq + (size_t)g * w.cols + x1);
      xs8[g] = kQ8 ? 0 : 8 * __dp4a(xw0[g], 0x01010101, __dp4a(xw1[g], 0x01010101, 0));  // Q4_0 / Q4_1: 8 sum xq
    }
    const float2 ds = xds[b];
#pragma unroll
    for (int r = 0; r < kQRows; ++r) {
      const int row = j0 + (r < n_r ? r : n_r - 1);
      const uint8_t* blk = w.data + (size_t)row * w.row_bytes + (size_t)b * kBytes;
      // the lane's two words of quants (Q8_0's bytes; Q4_0 / Q4_1's low and high nibbles)
      uint32_t q0, q1;
      if (kQ8) {
        q0 = load_u32_a2(blk + 2 + 8 * j), q1 = load_u32_a2(blk + 6 + 8 * j);
      } else {
        const uint32_t q = load_u32_a2(blk + kQs + 4 * j);
        q0 = q & 0x0F0F0F0Fu, q1 = (q >> 4) & 0x0F0F0F0Fu;
      }
      int dots[DIGITS];
#pragma unroll
      for (int g = 0; g < DIGITS; ++g) dots[g] = __dp4a((int)q0, xw0[g], __dp4a((int)q1, xw1[g], 0)) - xs8[g];
      // x16 Q8_0: |sum| up to 2^25, its float rounded (2^-24 relative)
      const int dot = join_digits<DIGITS>(dots);
      const float d = math::half_bits_to_float(*reinterpret_cast<const uint16_t*>(blk));
      float a = d * ds.x * (float)dot;
      if (kQ41 && j == 0)
        a += fmaf(8.0f, d, math::half_bits_to_float(*reinterpret_cast<const uint16_t*>(blk + 2))) * ds.y;
      if (r < n_r && in_row) acc[r] += a;
    }
  }
  x8_rows_out(acc, part, pl.warp, lane, pl.z, split, n_r, set.y[pl.which] + j0);
}

// One thread per (row, 32-value sub-block): rows r0.. of w into out (fp32, or fp16 bits when half_out).
template <int TYPE>
__global__ void dequant_rows_kernel(QWeight w, int r0, int nr, void* out, bool half_out) {
  constexpr int kSubs = TYPE == qblocks::kQ4_K || TYPE == qblocks::kQ5_K || TYPE == qblocks::kQ6_K ? 8 : 1;
  const int n_sub = w.cols / 32;
  const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (size_t)nr * n_sub) return;
  const int r = (int)(idx / n_sub), s = (int)(idx % n_sub);
  float v[32];
  qblocks::dequant_sub32(
      TYPE, w.data + (size_t)(r0 + r) * w.row_bytes + (size_t)(s / kSubs) * qblocks::block_bytes(TYPE), s % kSubs, v);
  const size_t o = (size_t)r * w.cols + 32 * s;
  if (half_out) {
    uint16_t* h = static_cast<uint16_t*>(out) + o;
    for (int l = 0; l < 32; ++l) h[l] = math::float_to_half_bits(v[l]);
  } else {
    float* f = static_cast<float*>(out) + o;
    for (int l = 0; l < 32; ++l) f[l] = v[l];
  }
}

template <int TYPE>
__global__ void embed_q_kernel(QWeight w, const int32_t* ids, float* out, int n_tokens) {
  constexpr int kSubs = TYPE == qblocks::kQ4_K || TYPE == qblocks::kQ5_K || TYPE == qblocks::kQ6_K ? 8 : 1;
  const int n_sub = w.cols / 32;
  const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= (size_t)n_tokens * n_sub) return;
  const int t = (int)(idx / n_sub), s = (int)(idx % n_sub);
  float v[32];
  qblocks::dequant_sub32(TYPE, w.data + (size_t)ids[t] * w.row_bytes + (size_t)(s / kSubs) * qblocks::block_bytes(TYPE),
                         s % kSubs, v);
  float* f = out + (size_t)t * w.cols + 32 * s;
  for (int l = 0; l < 32; ++l) f[l] = v[l];
}

__global__ void narrow_kernel(const float* x, int code, uint16_t* out, size_t n) {
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = code == kW16BF ? math::float_to_bf16_bits(x[i]) : math::float_to_half_bits(x[i]);
}

cublasStatus_t gemm(const Ctx& c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                    const float* A, int lda, const float* B, int ldb, float* C, int ldc) {
  const float beta = 0.0f;
  return cublasGemmEx(c.blas, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, &beta, C, CUDA_R_32F,
                      ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

}  // namespace

namespace {
// The kernels' code of a weight storage type, or -1 for an unsupported one.
int weight_code(cudaDataType t) {
  return t == CUDA_R_32F ? kW32 : t == CUDA_R_16F ? kW16F : t == CUDA_R_16BF ? kW16BF : -1;
}
}  // namespace

cudaError_t embed(const Ctx& c, const void* table, cudaDataType table_type, const int32_t* ids, float* out,
                  int n_tokens, int hidden) {
  const int code = weight_code(table_type);
  if (code < 0) return cudaErrorInvalidValue;
  const size_t n = (size_t)n_tokens * hidden;
  if (n) embed_kernel<<<grid_for(n, 256), 256, 0, c.stream>>>(table, code, ids, out, n_tokens, hidden);
  return cudaGetLastError();
}

cudaError_t widen(const Ctx& c, const void* w, cudaDataType w_type, float* out, size_t n) {
  const int code = weight_code(w_type);
  if (code != kW16F && code != kW16BF) return cudaErrorInvalidValue;
  if (n) widen_kernel<<<grid_for(n, 256), 256, 0, c.stream>>>(w, code, out, n);
  return cudaGetLastError();
}

cudaError_t matvec_xwt16(const Ctx& c, const float* x, const void* w, cudaDataType w_type, float* y, int m, int n,
                         int k) {
  const int code = weight_code(w_type);
  if (code != kW16F && code != kW16BF) return cudaErrorInvalidValue;
  if (m < 0 || m > kMatvecMaxRows) return cudaErrorInvalidValue;
  const bool wide = k % 8 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
  if (m > 0 && n > 0)
    matvec_xwt16_kernel<<<grid_for((size_t)n, kMatvecWarps), kMatvecWarps * 32, 0, c.stream>>>(x, w, code, y, m, n, k,
                                                                                               wide);
  return cudaGetLastError();
}

cudaError_t rmsnorm(const Ctx& c, const float* x, const float* w, float* y, int rows, int n, float eps) {
  if (rows > 0) rmsnorm_kernel<<<rows, kRowThreads, 0, c.stream>>>(x, w, y, n, eps);
  return cudaGetLastError();
}

cudaError_t rope(const Ctx& c, float* x, int n_tokens, int n_heads, int d_head, int pos0, float rope_theta) {
  const size_t n = (size_t)n_tokens * n_heads * (d_head / 2);
  if (n) rope_kernel<<<grid_for(n, 256), 256, 0, c.stream>>>(x, n_tokens, n_heads, d_head, pos0, rope_theta);
  return cudaGetLastError();
}

cudaError_t rope_freqs(const Ctx& c, float* x, int n_tokens, int n_heads, int d_head, int pos0, const float* inv_freq,
                       float cs_scale) {
  const size_t n = (size_t)n_tokens * n_heads * (d_head / 2);
  if (n)
    rope_freqs_kernel<<<grid_for(n, 256), 256, 0, c.stream>>>(x, n_tokens, n_heads, d_head, pos0, inv_freq, cs_scale);
  return cudaGetLastError();
}
cudaError_t rope_freqs_qk(const Ctx& c, float* q, float* k, int n_tokens, int n_heads, int n_kv_heads, int d_head,
                          int pos0, const float* inv_freq, float cs_scale) {
  const size_t n = (size_t)n_tokens * (n_heads > n_kv_heads ? n_heads : n_kv_heads) * (d_head / 2);
  if (n) {
    const dim3 grid(grid_for(n, 256), 2);
    rope_freqs_qk_kernel<<<grid, 256, 0, c.stream>>>(q, k, n_tokens, n_heads, n_kv_heads, d_head, pos0, inv_freq,
                                                     cs_scale);
  }
  return cudaGetLastError();
}
cudaError_t layernorm(const Ctx& c, const float* x, const float* w, const float* b, float* y, int rows, int n,
                      float eps) {
  if (rows > 0) layernorm_kernel<<<rows, kRowThreads, 0, c.stream>>>(x, w, b, y, n, eps);
  return cudaGetLastError();
}
cudaError_t act_mul(const Ctx& c, const float* gate, const float* up, float* out, size_t n, int act) {
  if (n) act_mul_kernel<<<grid_for(n, 256), 256, 0, c.stream>>>(gate, up, out, n, act);
  return cudaGetLastError();
}
cudaError_t softcap(const Ctx& c, float* x, size_t n, float cap) {
  if (n) softcap_kernel<<<grid_for(n, 256), 256, 0, c.stream>>>(x, n, cap);
  return cudaGetLastError();
}
cudaError_t scale(const Ctx& c, float* x, size_t n, float s) {
  if (n) scale_kernel<<<grid_for(n, 256), 256, 0, c.stream>>>(x, n, s);
  return cudaGetLastError();
}
cudaError_t swiglu(const Ctx& c, const float* gate, const float* up, float* out, size_t n) {
  if (n) swiglu_kernel<<<grid_for(n, 256), 256, 0, c.stream>>>(gate, up, out, n);
  return cudaGetLastError();
}

cudaError_t add_inplace(const Ctx& c, float* y, const float* x, size_t n) {
  if (n) add_kernel<<<grid_for(n, 256), 256, 0, c.stream>>>(y, x, n);
  return cudaGetLastError();
}

cudaError_t add_rmsnorm(const Ctx& c, float* x, const float* y, const float* w, float* xn, int rows, int n, float eps) {
  if (rows > 0) add_rmsnorm_kernel<<<rows, kRowThreads, 0, c.stream>>>(x, y, w, xn, n, eps);
  return cudaGetLastError();
}

cudaError_t add_row_bias(const Ctx& c, float* y, const float* b, int rows, int n) {
  const size_t total = (size_t)rows * n;
  if (total) add_row_bias_kernel<<<grid_for(total, 256), 256, 0, c.stream>>>(y, b, rows, n);
  return cudaGetLastError();
}

cudaError_t kv_store(const Ctx& c, const float* kv, float* cache, int n_tokens, int n_kv_heads, int d_head, int stride,
                     int pos0) {
  const size_t n = (size_t)n_tokens * n_kv_heads * d_head;
  if (n) kv_store_kernel<<<grid_for(n, 256), 256, 0, c.stream>>>(kv, cache, n_tokens, n_kv_heads, d_head, stride, pos0);
  return cudaGetLastError();
}

cudaError_t kv_store_pair(const Ctx& c, const float* k, const float* v, float* k_cache, float* v_cache, int n_tokens,
                          int n_kv_heads, int d_head, int stride, int pos0) {
  const size_t n = (size_t)n_tokens * n_kv_heads * d_head;
  if (n) {
    const dim3 grid(grid_for(n, 256), 2);
    kv_store_pair_kernel<<<grid, 256, 0, c.stream>>>(k, v, k_cache, v_cache, n_tokens, n_kv_heads, d_head, stride,
                                                     pos0);
  }
  return cudaGetLastError();
}

// Row-major y[m, n] = x[m, k] . w[n, k]^T is column-major y^T[n, m] = w^T' . x: (w as col-major [k, n])^T . x.
cublasStatus_t matmul_xwt(const Ctx& c, const float* x, const float* w, float* y, int m, int n, int k, int ldy) {
  return gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, 1.0f, w, k, x, k, y, ldy > 0 ? ldy : n);
}

cublasStatus_t attn_scores(const Ctx& c, const float* q, int q_stride, const float* k, float* raw, int n_rows,
                           int n_keys, int d, float logit_scale) {
  const float alpha = logit_scale > 0.0f ? logit_scale : 1.0f / sqrtf((float)d);
  return gemm(c, CUBLAS_OP_T, CUBLAS_OP_N, n_keys, n_rows, d, alpha, k, d, q, q_stride, raw, n_keys);
}

cublasStatus_t attn_pv(const Ctx& c, const float* probs, const float* v, float* out, int out_stride, int n_rows,
                       int n_keys, int d) {
  return gemm(c, CUBLAS_OP_N, CUBLAS_OP_N, d, n_rows, n_keys, 1.0f, v, d, probs, n_keys, out, out_stride);
}

cudaError_t softmax_rows(const Ctx& c, const RowArgs& a, int head, int r0, int n_rows, int n_keys, float* raw,
                         float* probs, uint16_t* probs16) {
  auto* kern = a.topk <= kPairTopkRegs ? softmax_rows_kernel<ThreadTopkRegs> : softmax_rows_kernel<ThreadTopk>;
  if (n_rows > 0) kern<<<n_rows, kRowThreads, 0, c.stream>>>(a, head, r0, n_keys, raw, probs, probs16);
  return cudaGetLastError();
}

cudaError_t attention_fused(const Ctx& c, const RowArgs& a, const float* q, const float* k_cache, const float* v_cache,
                            int cache_stride, int n_heads, int n_kv_heads, int d_head, const uint8_t* skip,
                            float* out) {
  if (a.n_tokens <= 0 || n_heads <= 0) return cudaSuccess;
  const size_t smem = (size_t)(2 * d_head + kFlashThreads) * sizeof(float);
  dim3 grid((unsigned)a.n_tokens, (unsigned)n_heads);
  auto* kern = a.topk <= kPairTopkRegs ? attention_fused_kernel<ThreadTopkRegs> : attention_fused_kernel<ThreadTopk>;
  kern<<<grid, kFlashThreads, smem, c.stream>>>(a, q, k_cache, v_cache, cache_stride, n_heads, n_kv_heads, d_head, skip,
                                                out);
  return cudaGetLastError();
}

int attention_split_chunk_keys(int n_ctx, int n_kv_heads, int n_rows) {
  // About 1024 blocks (a few waves on 132 SMs), chunks of 32 to 512 keys in steps of 32.
  const int blocks_per_chunk = (n_kv_heads > 0 ? n_kv_heads : 1) * (n_rows > 0 ? n_rows : 1);
  const int chunks = 1024 / blocks_per_chunk > 1 ? 1024 / blocks_per_chunk : 1;
  int keys = (n_ctx + chunks - 1) / chunks;
  keys = (keys + kSplitMinKeys - 1) / kSplitMinKeys * kSplitMinKeys;
  return keys < kSplitMinKeys ? kSplitMinKeys : keys > kSplitMaxKeys ? kSplitMaxKeys : keys;
}

size_t attention_split_scratch_floats(const RowArgs& a, int n_heads, int n_kv_heads, int d_head) {
  const int n_ctx = a.n_past + a.n_tokens;
  const int keys = attention_split_chunk_keys(n_ctx, n_kv_heads, a.n_tokens);
  const size_t n_ch = (size_t)(n_ctx + keys - 1) / keys;
  const size_t rows_heads = (size_t)a.n_tokens * n_heads;
  return rows_heads * n_ch * (3 + (size_t)d_head) + (a.metrics ? rows_heads * n_ctx : 0);
}

cudaError_t attention_split(const Ctx& c, const RowArgs& a, const float* q, const float* k_cache, const float* v_cache,
                            int cache_stride, int n_heads, int n_kv_heads, int d_head, const uint8_t* skip,
                            float* scratch, float* out) {
  if (a.n_tokens <= 0 || n_heads <= 0) return cudaSuccess;
  if (!scratch || n_kv_heads <= 0 || n_heads % n_kv_heads != 0) return cudaErrorInvalidValue;
  const int n_ctx = a.n_past + a.n_tokens;
  const int keys = attention_split_chunk_keys(n_ctx, n_kv_heads, a.n_tokens);
  const int n_ch = (n_ctx + keys - 1) / keys;
  const size_t rows_heads = (size_t)a.n_tokens * n_heads;
  float* part_st = scratch;                                                   // [rows, n_heads, n_ch, 3]
  float* part_o = part_st + rows_heads * n_ch * 3;                            // [rows, n_heads, n_ch, d]
  float* scores = a.metrics ? part_o + rows_heads * n_ch * d_head : nullptr;  // [rows, n_heads, n_ctx]
  const size_t smem1 = (size_t)kSplitHeads * (d_head + keys) * sizeof(float);
  auto* split = d_head % 16 == 0 ? attention_split_kernel<true> : attention_split_kernel<false>;
  if (smem1 > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(split, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem1);
    if (e != cudaSuccess) return e;
  }
  const dim3 grid1((unsigned)n_ch, (unsigned)n_kv_heads, (unsigned)a.n_tokens);
  split<<<grid1, kSplitThreads, smem1, c.stream>>>(a, q, k_cache, v_cache, cache_stride, n_heads, n_kv_heads, d_head,
                                                   keys, part_st, part_o, scores);
  auto* combine = a.topk <= kPairTopkRegs ? attention_split_combine_kernel<ThreadTopkRegs>
                                          : attention_split_combine_kernel<ThreadTopk>;
  const dim3 grid2((unsigned)a.n_tokens, (unsigned)n_heads);
  combine<<<grid2, kFlashThreads, (size_t)n_ch * sizeof(float), c.stream>>>(a, n_heads, d_head, skip, n_ch, part_st,
                                                                            part_o, scores, out);
  return cudaGetLastError();
}

bool attention_tc_supported(int d_head) { return d_head == 32 || d_head == 64 || d_head == 96 || d_head == 128; }

size_t attention_tc_stage_bytes(int n_kv_heads, int n_ctx, int d_head) {
  const size_t n_pad = (size_t)(n_ctx + kTcKeys - 1) / kTcKeys * kTcKeys;
  return 2 * (size_t)n_kv_heads * n_pad * d_head * sizeof(uint16_t);
}

namespace {
template <int D>
cudaError_t attention_tc_d(const Ctx& c, const RowArgs& a, const float* q, const float* k_cache, const float* v_cache,
                           int cache_stride, int n_heads, int n_kv_heads, const uint8_t* skip, float* state,
                           void* stage, float* out) {
  const int n_ctx = a.n_past + a.n_tokens;
  const int n_pad = (n_ctx + kTcKeys - 1) / kTcKeys * kTcKeys;
  uint16_t* kh = static_cast<uint16_t*>(stage);
  uint16_t* vt = kh + (size_t)n_kv_heads * n_pad * D;
  const dim3 sgrid((unsigned)(n_pad / 32), (unsigned)((D + 31) / 32), (unsigned)n_kv_heads);
  kv_to_half_kernel<<<sgrid, 256, 0, c.stream>>>(k_cache, v_cache, cache_stride, D, n_ctx, n_pad, kh, vt);
  const dim3 grid((unsigned)n_heads, (unsigned)((a.n_tokens + kTcRows - 1) / kTcRows));
  const int qk_halves = (kTcRows + 2 * kTcKeys) * (D + kTcPad);
  const size_t smem1 = (size_t)(qk_halves + 2 * D * (kTcKeys + kTcPad)) * sizeof(uint16_t);
  const size_t smem2 = (size_t)qk_halves * sizeof(uint16_t);
  auto* pass1 = attention_tc_kernel<D, 1>;
  const int k = a.topk < kMaxTopk ? a.topk : kMaxTopk;
  auto* pass2 = k <= kTopkRegs ? attention_tc_kernel<D, 2> : attention_tc_kernel<D, 3>;
  cudaError_t e = cudaFuncSetAttribute(pass1, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem1);
  if (e == cudaSuccess) e = cudaFuncSetAttribute(pass2, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem2);
  if (e != cudaSuccess) return e;
  float* st = a.metrics ? state : nullptr;
  pass1<<<grid, kTcThreads, smem1, c.stream>>>(a, q, kh, vt, n_pad, n_heads, n_kv_heads, skip, st, out);
  if (a.metrics) pass2<<<grid, kTcThreads, smem2, c.stream>>>(a, q, kh, vt, n_pad, n_heads, n_kv_heads, skip, st, out);
  return cudaGetLastError();
}
}  // namespace

cudaError_t attention_tc(const Ctx& c, const RowArgs& a, const float* q, const float* k_cache, const float* v_cache,
                         int cache_stride, int n_heads, int n_kv_heads, int d_head, const uint8_t* skip, float* state,
                         void* stage, float* out) {
  if (a.n_tokens <= 0 || n_heads <= 0) return cudaSuccess;
  if ((a.metrics && !state) || !stage) return cudaErrorInvalidValue;
  switch (d_head) {
    case 32:
      return attention_tc_d<32>(c, a, q, k_cache, v_cache, cache_stride, n_heads, n_kv_heads, skip, state, stage, out);
    case 64:
      return attention_tc_d<64>(c, a, q, k_cache, v_cache, cache_stride, n_heads, n_kv_heads, skip, state, stage, out);
    case 96:
      return attention_tc_d<96>(c, a, q, k_cache, v_cache, cache_stride, n_heads, n_kv_heads, skip, state, stage, out);
    case 128:
      return attention_tc_d<128>(c, a, q, k_cache, v_cache, cache_stride, n_heads, n_kv_heads, skip, state, stage, out);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t narrow(const Ctx& c, const float* x, cudaDataType type, void* out, size_t n) {
  const int code = weight_code(type);
  if (code != kW16F && code != kW16BF) return cudaErrorInvalidValue;
  if (n) narrow_kernel<<<grid_for(n, 256), 256, 0, c.stream>>>(x, code, static_cast<uint16_t*>(out), n);
  return cudaGetLastError();
}

cublasStatus_t matmul_xwt_16(const Ctx& c, const void* x16, const void* w16, cudaDataType type, float* y, int m, int n,
                             int k, int ldy) {
  if (type != CUDA_R_16F && type != CUDA_R_16BF) return CUBLAS_STATUS_INVALID_VALUE;
  const float alpha = 1.0f, beta = 0.0f;
  return cublasGemmEx(c.blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w16, type, k, x16, type, k, &beta, y,
                      CUDA_R_32F, ldy > 0 ? ldy : n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t matmul_xwt_tf32(const Ctx& c, const float* x, const float* w, float* y, int m, int n, int k) {
  const float alpha = 1.0f, beta = 0.0f;
  return cublasGemmEx(c.blas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, CUDA_R_32F, k, x, CUDA_R_32F, k, &beta, y,
                      CUDA_R_32F, n, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
}

namespace {
// Calls f(std::integral_constant<int, TYPE>) for w's format; false for a format without device kernels.
template <class F>
bool with_qtype(int type, F&& f) {
  switch (type) {
    case qblocks::kQ4_0: f(std::integral_constant<int, qblocks::kQ4_0>()); return true;
    case qblocks::kQ4_1: f(std::integral_constant<int, qblocks::kQ4_1>()); return true;
    case qblocks::kQ8_0: f(std::integral_constant<int, qblocks::kQ8_0>()); return true;
    case qblocks::kQ4_K: f(std::integral_constant<int, qblocks::kQ4_K>()); return true;
    case qblocks::kQ5_K: f(std::integral_constant<int, qblocks::kQ5_K>()); return true;
    case qblocks::kQ6_K: f(std::integral_constant<int, qblocks::kQ6_K>()); return true;
    default: return false;
  }
}
}  // namespace

namespace {
// The launch's QMatvecSet: weight i takes blocks first[i] .. first[i + 1] - 1, rows_per_block rows each.
QMatvecSet make_set(const QWeight* ws, float* const* ys, int n_w, int rows_per_block) {
  QMatvecSet set;
  set.n = n_w;
  set.first[0] = 0;
  for (int i = 0; i < n_w; ++i) {
    set.w[i] = ws[i];
    set.y[i] = ys[i];
    set.first[i + 1] = set.first[i] + grid_for((size_t)ws[i].rows, rows_per_block);
  }
  return set;
}
}  // namespace

cudaError_t matvec_q(const Ctx& c, const float* x, const QWeight& w, float* y, int m) {
  return matvec_q_set(c, x, &w, &y, 1, m);
}

cudaError_t matvec_q_set(const Ctx& c, const float* x, const QWeight* ws, float* const* ys, int n_w, int m) {
  if (m < 0 || m > kMatvecMaxRows || n_w < 1 || n_w > kMatvecSetMax) return cudaErrorInvalidValue;
  for (int i = 0; i < n_w; ++i)
    if (ws[i].cols % 32 != 0 || ws[i].type != ws[0].type || ws[i].cols != ws[0].cols) return cudaErrorInvalidValue;
  const int split = matvec_q_split(ws[0].cols / 32), rows_per_block = kMatvecWarps / split * kQRows;
  const QMatvecSet set = make_set(ws, ys, n_w, rows_per_block);
  if (m == 0 || set.first[n_w] == 0) return cudaSuccess;
  const bool ok = with_qtype(ws[0].type, [&](auto tc) {
    auto* kern =
        m == 1 ? matvec_q_kernel<decltype(tc)::value, 1> : matvec_q_kernel<decltype(tc)::value, kMatvecMaxRows>;
    kern<<<set.first[n_w], kMatvecWarps * 32, 0, c.stream>>>(x, set, m, split);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

bool matvec_x8_supported(const QWeight& w) {
  return qblocks::sub32_supported(w.type) && w.cols % qblocks::block_values(w.type) == 0;
}
size_t matvec_x8_scratch_bytes(int k) { return 2 * (size_t)k + (size_t)(k / 32) * sizeof(float2); }

cudaError_t matvec_q_set_x8(const Ctx& c, const float* x, const QWeight* ws, float* const* ys, int n_w, void* scratch,
                            bool round_in_kernel, int x_digits) {
  if (n_w < 1 || n_w > kMatvecSetMax || !scratch || (x_digits != 1 && x_digits != 2)) return cudaErrorInvalidValue;
  for (int i = 0; i < n_w; ++i)
    if (!matvec_x8_supported(ws[i]) || ws[i].cols != ws[0].cols || ws[i].type != ws[0].type)
      return cudaErrorInvalidValue;
  const int k = ws[0].cols, type = ws[0].type;
  const bool k4 = type == qblocks::kQ4_K || type == qblocks::kQ5_K, in_kernel = round_in_kernel && k4;
  const bool two = x_digits == 2;
  int8_t* xq = static_cast<int8_t*>(scratch);  // [x_digits][k] digits, then [k / 32] (scale, sum)
  float2* xds = reinterpret_cast<float2*>(xq + (size_t)x_digits * k);  // k % 32 == 0: 8-byte aligned when scratch is
  if (!in_kernel) {
    auto* quant = two ? quantize_x8_kernel<2> : quantize_x8_kernel<1>;
    quant<<<grid_for((size_t)k / 32, kRowThreads / 32), kRowThreads, 0, c.stream>>>(x, k, xq, xds);
  }
  // A warp's step: 4 Q4_K / Q5_K blocks, 2 Q6_K blocks, 8 blocks of a 32-value format (256 values each)
  const int n_steps = k4 ? (k / 256 + 3) / 4 : type == qblocks::kQ6_K ? (k / 256 + 1) / 2 : (k / 32 + 7) / 8;
  const int split = matvec_x8_split(n_steps), rows_per_block = kMatvecWarps / split * kQRows;
  const QMatvecSet set = make_set(ws, ys, n_w, rows_per_block);
  if (set.first[n_w] == 0) return cudaGetLastError();
  const dim3 grid(set.first[n_w]), block(kMatvecWarps * 32);
  switch (type) {
    case qblocks::kQ4_K:
    case qblocks::kQ5_K: {  // in_kernel: the kernel rounds the fp32 x itself (no xq / xds)
      auto pick = [&](auto tc) {
        constexpr int kT = decltype(tc)::value;
        return two ? (in_kernel ? matvec_k4_x8_kernel<kT, true, 2> : matvec_k4_x8_kernel<kT, false, 2>)
                   : (in_kernel ? matvec_k4_x8_kernel<kT, true, 1> : matvec_k4_x8_kernel<kT, false, 1>);
      };
      auto* kern = type == qblocks::kQ4_K ? pick(std::integral_constant<int, qblocks::kQ4_K>())
                                          : pick(std::integral_constant<int, qblocks::kQ5_K>());
      kern<<<grid, block, 0, c.stream>>>(x, in_kernel ? nullptr : xq, in_kernel ? nullptr : xds, set, split);
      break;
    }
    case qblocks::kQ6_K: {
      auto* kern = two ? matvec_q6k_x8_kernel<2> : matvec_q6k_x8_kernel<1>;
      kern<<<grid, block, 0, c.stream>>>(xq, xds, set, split);
      break;
    }
    default: {  // the 32-value formats
      auto pick = [&](auto tc) {
        constexpr int kT = decltype(tc)::value;
        return two ? matvec_b32_x8_kernel<kT, 2> : matvec_b32_x8_kernel<kT, 1>;
      };
      auto* kern = type == qblocks::kQ4_0   ? pick(std::integral_constant<int, qblocks::kQ4_0>())
                   : type == qblocks::kQ4_1 ? pick(std::integral_constant<int, qblocks::kQ4_1>())
                                            : pick(std::integral_constant<int, qblocks::kQ8_0>());
      kern<<<grid, block, 0, c.stream>>>(xq, xds, set, split);
      break;
    }
  }
  return cudaGetLastError();
}

cudaError_t dequant_rows(const Ctx& c, const QWeight& w, int r0, int nr, void* out, cudaDataType out_type) {
  if ((out_type != CUDA_R_32F && out_type != CUDA_R_16F) || w.cols % 32 != 0) return cudaErrorInvalidValue;
  const size_t n = (size_t)nr * (w.cols / 32);
  if (n == 0) return cudaSuccess;
  const bool ok = with_qtype(w.type, [&](auto tc) {
    auto* kern = dequant_rows_kernel<decltype(tc)::value>;
    kern<<<grid_for(n, 256), 256, 0, c.stream>>>(w, r0, nr, out, out_type == CUDA_R_16F);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t embed_q(const Ctx& c, const QWeight& w, const int32_t* ids, float* out, int n_tokens) {
  if (w.cols % 32 != 0) return cudaErrorInvalidValue;
  const size_t n = (size_t)n_tokens * (w.cols / 32);
  if (n == 0) return cudaSuccess;
  const bool ok = with_qtype(w.type, [&](auto tc) {
    auto* kern = embed_q_kernel<decltype(tc)::value>;
    kern<<<grid_for(n, 256), 256, 0, c.stream>>>(w, ids, out, n_tokens);
  });
  return ok ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t row_lse_target(const Ctx& c, const float* x, int rows, int n, const int32_t* targets, float* out) {
  if (n <= 0) return cudaErrorInvalidValue;
  if (rows > 0)
    row_lse_target_kernel<<<rows, kRowThreads, 0, c.stream>>>(x, n, targets, reinterpret_cast<float2*>(out));
  return cudaGetLastError();
}

cudaError_t topk_rows(const Ctx& c, const float* x, int rows, int n, int k, int32_t* idx, float* val) {
  if (k > kMaxTopk || k > n || k <= 0) return cudaErrorInvalidValue;
  if (rows > 0) topk_rows_kernel<<<rows, kRowThreads, 0, c.stream>>>(x, n, k, idx, val);
  return cudaGetLastError();
}

}  // namespace focal::cuda_ops
