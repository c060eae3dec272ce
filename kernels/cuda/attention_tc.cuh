// Tiled attention on tensor cores: the fast precision mode's attention (ops_cuda.h: attention_tc). Included by
// ops_cuda.cu inside its anonymous namespace (and inlined by tests/cuda_emu/make_emu_source.py for the emulation).
//
// Before the kernel, kv_to_half_kernel rounds the layer's K and V to fp16 once into a staging buffer: K as
// [n_kv, n_pad, D], V transposed as [n_kv, D, n_pad]. A block takes kTcRows = 128 query rows of one head (8 warps
// of 16 rows) and walks the visible keys in tiles of kTcKeys = 64, double-buffered in shared memory by cp.async
// (the next tile loads while this one computes) and shared by the block's 128 rows. S = Q K^T and O += P V run as
// mma.sync m16n8k16 (fp16 operands, fp32 accumulation); the logit scale, the per-(head, row) temperature, the
// soft-cap, the causal and window masks and the online softmax (math::OnlineSoftmax: max, Z and the entropy sum A)
// stay fp32. A thread holds rows g and g + 8 of its warp's 16 (g = lane / 4) and two keys of every 8; the four
// lanes of a group share a row, so row reductions are two shuffles. A warp skips the tiles none of its rows sees.
//   pass 1: out = P V / Z, and the row state (m, Z, A; m and A in log2 units, tc_logit2) into st[n_heads, T, 3]
//   when metrics are wanted.
//   pass 2 (metrics only): S once more (no V), p = e^(x - m) / Z under the final state: tail mass (p < 1 / n), the
//   top-k mass (each thread keeps its k largest p, then the group merges them), the sink (key 0) and the relevant
//   mass (the listed keys' scores formed from the same fp16 q and k values); then every metric of the row.
// Nothing of size T^2 exists. Rows past T in the last block compute masked garbage-free zeros and write nothing.

constexpr int kTcRows = 128;     // query rows per block
constexpr int kTcKeys = 64;      // keys per tile
constexpr int kTcThreads = 256;  // 8 warps x 16 rows
constexpr int kTcPad = 8;        // fp16 padding per shared-memory row (16 bytes): spreads rows over the banks

// Two floats as the fp16 pair of one 32-bit register (lo in the low half), rounded to nearest even: the device's
// conversion instruction, or shared_math's codec (the same IEEE rounding) in the CPU emulation.
__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
#else
  return (uint32_t)math::float_to_half_bits(lo) | ((uint32_t)math::float_to_half_bits(hi) << 16);
#endif
}
__device__ __forceinline__ uint16_t to_half_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  return math::float_to_half_bits(f);
#endif
}
__device__ __forceinline__ float half_lo(uint32_t v) { return math::half_bits_to_float((uint16_t)(v & 0xffffu)); }
__device__ __forceinline__ float half_hi(uint32_t v) { return math::half_bits_to_float((uint16_t)(v >> 16)); }

// c[4] += A[16, 16] . B[16, 8] for one warp (PTX mma.m16n8k16, row.col, fp16 in, fp32 accumulate). Fragments as PTX
// lays them out (g = lane / 4, t = lane % 4): a0 = A[g][2t, 2t+1], a1 = A[g+8][2t, 2t+1], a2 = A[g][2t+8, 2t+9],
// a3 = A[g+8][2t+8, 2t+9]; b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g]; c = C[g][2t], C[g][2t+1], C[g+8][2t],
// C[g+8][2t+1]. Without a tensor core (the emulation) the same products are gathered with shuffles.
__device__ __forceinline__ void mma_16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  const int lane = (int)(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
  for (int src = 0; src < 4; ++src) {  // k = 2 src, 2 src + 1, 2 src + 8, 2 src + 9 from lane 4 x + src
    const uint32_t ar0 = __shfl_sync(0xffffffffu, a[0], 4 * g + src), ar2 = __shfl_sync(0xffffffffu, a[2], 4 * g + src);
    const uint32_t ar1 = __shfl_sync(0xffffffffu, a[1], 4 * g + src), ar3 = __shfl_sync(0xffffffffu, a[3], 4 * g + src);
    const uint32_t b0c0 = __shfl_sync(0xffffffffu, b0, 4 * (2 * t) + src);
    const uint32_t b1c0 = __shfl_sync(0xffffffffu, b1, 4 * (2 * t) + src);
    const uint32_t b0c1 = __shfl_sync(0xffffffffu, b0, 4 * (2 * t + 1) + src);
    const uint32_t b1c1 = __shfl_sync(0xffffffffu, b1, 4 * (2 * t + 1) + src);
    const float x0[4] = {half_lo(ar0), half_hi(ar0), half_lo(ar2), half_hi(ar2)};      // row g
    const float x1[4] = {half_lo(ar1), half_hi(ar1), half_lo(ar3), half_hi(ar3)};      // row g + 8
    const float y0[4] = {half_lo(b0c0), half_hi(b0c0), half_lo(b1c0), half_hi(b1c0)};  // column 2t
    const float y1[4] = {half_lo(b0c1), half_hi(b0c1), half_lo(b1c1), half_hi(b1c1)};  // column 2t + 1
    for (int e = 0; e < 4; ++e) {
      c[0] += x0[e] * y0[e];
      c[1] += x0[e] * y1[e];
      c[2] += x1[e] * y0[e];
      c[3] += x1[e] * y1[e];
    }
  }
#endif
}

// A row's k largest probabilities (values only: their sum is the top-k mass), descending.
struct RowTopk {
  float v[kMaxTopk];
  int cnt;
};
__device__ __forceinline__ void row_topk_push(RowTopk& t, int k, float v) {
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
    --pos;
  }
  t.v[pos] = v;
}
__device__ __forceinline__ void row_topk_init(RowTopk& t) { t.cnt = 0; }
__device__ __forceinline__ float row_topk_at(const RowTopk& t, int i) { return i < t.cnt ? t.v[i] : -INFINITY; }
// The same list for k <= kTopkRegs, in registers: its kTopkRegs largest values, descending, -inf where fewer were
// seen (the first k of them are the k largest). Every index is a compile-time constant once the loops unroll:
// RowTopk's run-time positions kept its 64 values in local memory, a load through L1 for every key of the row.
constexpr int kTopkRegs = 8;
struct RowTopkRegs {
  float v[kTopkRegs];
};
__device__ __forceinline__ void row_topk_init(RowTopkRegs& t) {
#pragma unroll
  for (int i = 0; i < kTopkRegs; ++i) t.v[i] = -INFINITY;
}
__device__ __forceinline__ void row_topk_push(RowTopkRegs& t, int /*k*/, float v) {
  if (!(v > t.v[kTopkRegs - 1])) return;
#pragma unroll
  for (int i = 0; i < kTopkRegs; ++i) {  // v sinks to its place; the smallest falls off the end
    const float hi = fmaxf(t.v[i], v);
    v = fminf(t.v[i], v);
    t.v[i] = hi;
  }
}
__device__ __forceinline__ float row_topk_at(const RowTopkRegs& t, int i) {
  float x = -INFINITY;
#pragma unroll
  for (int j = 0; j < kTopkRegs; ++j) x = j == i ? t.v[j] : x;
  return x;
}
template <bool kInRegisters>
struct TopkList {
  using type = RowTopk;
};
template <>
struct TopkList<true> {
  using type = RowTopkRegs;
};

// The sum of the k largest values over the four lanes' lists of a group (each lane gets it). Each round takes the
// largest head (the lowest lane on a tie) and advances that lane's list; fewer than k values add nothing more.
template <class Topk>
__device__ float group_topk_sum(const Topk& t, int k) {
  const int lane = (int)(threadIdx.x & 31);
  int ptr = 0;
  float sum = 0.0f;
  for (int r = 0; r < k; ++r) {
    const float mine = row_topk_at(t, ptr);
    float best = mine;
    best = fmaxf(best, __shfl_xor_sync(0xffffffffu, best, 1));
    best = fmaxf(best, __shfl_xor_sync(0xffffffffu, best, 2));
    int who = mine == best ? (lane & 3) : 4;
    int other = __shfl_xor_sync(0xffffffffu, who, 1);
    who = other < who ? other : who;
    other = __shfl_xor_sync(0xffffffffu, who, 2);
    who = other < who ? other : who;
    if ((lane & 3) == who && best != -INFINITY) ++ptr;
    sum += best != -INFINITY ? best : 0.0f;  // every lane runs all k rounds: the shuffles need the whole warp
  }
  return sum;
}

__device__ __forceinline__ float group_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ __forceinline__ float group_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// Rows [rows, D] of fp32 src (row r at src + r * stride; rows at or past n_valid read as zero) rounded to fp16 into
// dst[rows][D + kTcPad] (the block's query rows). All threads of the block take part.
template <int D>
__device__ void tile_to_half(const float* src, size_t stride, int rows, int n_valid, uint16_t* dst) {
  for (int i = threadIdx.x; i < rows * (D / 4); i += blockDim.x) {
    const int r = i / (D / 4), c = (i % (D / 4)) * 4;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < n_valid) v = *reinterpret_cast<const float4*>(src + (size_t)r * stride + c);
    uint32_t* d2 = reinterpret_cast<uint32_t*>(dst + r * (D + kTcPad) + c);
    d2[0] = pack_half2(v.x, v.y);
    d2[1] = pack_half2(v.z, v.w);
  }
}

__device__ __forceinline__ uint32_t ld_u32(const uint16_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

// Four 8 x 8 fp16 matrices from shared memory in one instruction (ldmatrix.x4), where 2 x 4 ld_u32 a lane took
// before: lane L gives the offset (in fp16 values from base; 16-byte aligned) of row L % 8 of matrix L / 8, and
// r[m] receives row lane / 4, columns 2 (lane % 4) and + 1 of matrix m: mma_16816's B fragment layout. The
// emulation fetches each matrix's row offset from the lane that gave it.
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const uint16_t* base, int off) {
#if defined(__CUDA_ARCH__)
  const unsigned addr = (unsigned)__cvta_generic_to_shared(base + off);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#else
  const int lane = (int)(threadIdx.x & 31);
  for (int m = 0; m < 4; ++m) r[m] = ld_u32(base + __shfl_sync(0xffffffffu, off, m * 8 + lane / 4) + 2 * (lane & 3));
#endif
}

// 16 bytes global -> shared without passing through registers (cp.async, completing in commit groups), or a plain
// copy in the CPU emulation (the waits are then no-ops).
__device__ __forceinline__ void cp_async16(void* dst_smem, const void* src) {
#if defined(__CUDA_ARCH__)
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst_smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
#else
  *reinterpret_cast<uint4*>(dst_smem) = *reinterpret_cast<const uint4*>(src);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
__device__ __forceinline__ void cp_async_wait_all_but_one() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group 1;\n" ::);
#endif
}

// Issues the copies of key tile j0 (kTcKeys keys) of the fp16 staging (attention_tc's Kh [n_pad, D] and, in pass 1,
// Vt [D, n_pad] of this KV head) into shared memory Ks [kTcKeys][D + kTcPad] and Vs [D][kTcKeys + kTcPad].
template <int D, bool kWithV>
__device__ void load_kv_tile(const uint16_t* kh, const uint16_t* vt, int n_pad, int j0, uint16_t* Ks, uint16_t* Vs) {
  constexpr int kKChunks = kTcKeys * D / 8, kVChunks = D * kTcKeys / 8;  // 16-byte pieces
  for (int i = threadIdx.x; i < kKChunks; i += blockDim.x) {
    const int r = i / (D / 8), c = (i % (D / 8)) * 8;
    cp_async16(Ks + r * (D + kTcPad) + c, kh + (size_t)(j0 + r) * D + c);
  }
  if (kWithV)
    for (int i = threadIdx.x; i < kVChunks; i += blockDim.x) {
      const int r = i / (kTcKeys / 8), c = (i % (kTcKeys / 8)) * 8;
      cp_async16(Vs + r * (kTcKeys + kTcPad) + c, vt + (size_t)r * n_pad + j0 + c);
    }
}

// The staging of attention_tc: keys 0 .. n_pad - 1 of every KV head rounded to fp16, K as [n_kv, n_pad, D] and V
// transposed as [n_kv, D, n_pad] (keys past n_ctx zero, so masked products stay finite). One block per 32 keys x 32
// dimensions of one KV head, transposed through shared memory.
__global__ void kv_to_half_kernel(const float* k_cache, const float* v_cache, int cache_stride, int d, int n_ctx,
                                  int n_pad, uint16_t* kh, uint16_t* vt) {
  __shared__ float tile[32][33];
  const int kv = blockIdx.z, key0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
  const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;  // 32 x 8 threads
  const float* kc = k_cache + (size_t)kv * cache_stride * d;
  const float* vc = v_cache + (size_t)kv * cache_stride * d;
  for (int r = ty; r < 32; r += 8) {
    const int key = key0 + r, c = c0 + tx;
    const bool in = key < n_ctx && c < d;
    if (c < d) kh[((size_t)kv * n_pad + key) * d + c] = in ? to_half_bits(kc[(size_t)key * d + c]) : 0;
    tile[r][tx] = in ? vc[(size_t)key * d + c] : 0.0f;
  }
  __syncthreads();
  for (int r = ty; r < 32; r += 8) {
    const int c = c0 + r, key = key0 + tx;
    if (c < d) vt[((size_t)kv * d + c) * n_pad + key] = to_half_bits(tile[tx][r]);
  }
}

// The tiled kernel works in log2 units: a logit x enters as x log2 e, and the online state (m, Z, A) keeps m and A in
// those units (Z is the same number), so that e^(x - m) is one 2^(x2 - m2), with the row's scale, the logit scale and
// log2 e one multiply of the dot product. The metrics convert back (A ln 2) once a row.
constexpr float kTcLog2e = 1.4426950408889634f, kTcLn2 = 0.6931471805599453f;

// 2^x for x <= 0 (-inf: 0) in the tiled kernel: the special-function unit (ex2.approx.ftz, relative error about
// 2^-22; results below 2^-126 flush to 0), one MUFU where exp_nonpos's ~25 FP32 instructions a score (with
// --fmad=false) outweighed the tile's tensor-core work (the QK^T and PV of a score are 512 flops at d = 128). P is
// then rounded to fp16 (2^-11) for PV anyway. The emulation computes exp2f.
__device__ __forceinline__ float tc_exp2(float x) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
#else
  return exp2f(x);
#endif
}

// The logit of a raw dot product (scaled_score's formula) in log2 units: without a soft-cap dot * c2, where
// c2 = logit_scale * s * log2 e is the row's constant (one multiply a score); with one, the capped logit times log2 e.
__device__ __forceinline__ float tc_logit2(float dot, float logit_scale, float s, float c2, float cap) {
  return cap > 0.0f ? dot_logit(dot, logit_scale, s, cap) * kTcLog2e : dot * c2;
}

// math::online_softmax_rebase in log2 units: Z and A scale by r = 2^(m_old - m). Returns r.
__device__ __forceinline__ float tc_rebase2(math::OnlineSoftmax& s, float m) {
  const float r = s.m == -INFINITY ? 0.0f : tc_exp2(s.m - m);
  math::online_softmax_rebase(s, m, r);
  return r;
}

// Pass 2's end: the metrics of this thread's two rows from their group's sums (all lanes take part in the shuffles).
template <int D, class Topk>
__device__ __forceinline__ void pass2_metrics(const RowArgs& a, int h, int warp, int g, int t, const int* row,
                                              const int* n_vis, const int* lo, const float* srow, const float* c2,
                                              const math::OnlineSoftmax* sm, const float* tail, const float* sink,
                                              const Topk* tk, int k, bool want_topk, const uint16_t* Qs,
                                              const uint16_t* kh, float logit_scale, float cap) {
  constexpr int LQ = D + kTcPad;
  const int T = a.n_tokens;
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {  // unrolled: the rows' arrays stay in registers
    const float tail_sum = group_sum(tail[ri]);
    const float sink_p = group_sum(sink[ri]);  // one lane of the group saw key 0, if any did
    const float topk_mass = want_topk ? group_topk_sum(tk[ri], k) : 0.0f;
    // The relevant keys' probabilities, from the same fp16 q and k values as the tiles (the four lanes of the group
    // split each dot product).
    float rel = 0.0f, seen = 0.0f;
    const uint16_t* qrow = Qs + (warp * 16 + g + 8 * ri) * LQ;
    for (int r = 0; r < a.n_relevant; ++r) {
      const int j = a.relevant[r];
      const bool vis = row[ri] < T && j >= lo[ri] && j < n_vis[ri];
      float dot = 0.0f;
      if (vis)
        for (int c = t; c < D; c += 4)
          dot += math::half_bits_to_float(qrow[c]) * math::half_bits_to_float(kh[(size_t)j * D + c]);
      dot = group_sum(dot);
      if (vis) {
        rel += tc_exp2(tc_logit2(dot, logit_scale, srow[ri], c2[ri], cap) - sm[ri].m) / sm[ri].z;
        seen += 1.0f;
      }
    }
    if (row[ri] >= T || t != 0) continue;
    const math::OnlineSoftmax nat{sm[ri].m * kTcLn2, sm[ri].z, sm[ri].a * kTcLn2};  // natural units
    write_metrics(a.metrics + ((size_t)h * T + row[ri]) * ops::kNumRowMetrics, math::online_softmax_entropy(nat),
                  sm[ri].z, n_vis[ri] - lo[ri], tail_sum, sink_p, topk_mass, rel, seen);
  }
}

// PASS 1: out and the row states; 2: the metrics with k <= kTopkRegs (the top-k list in registers); 3: the metrics
// with a larger k (up to kMaxTopk, the list in local memory).
template <int D, int PASS>
__global__ void __launch_bounds__(kTcThreads, 1)
    attention_tc_kernel(RowArgs a, const float* q, const uint16_t* k_half, const uint16_t* v_half_t, int n_pad,
                        int n_heads, int n_kv_heads, const uint8_t* skip, float* st, float* out) {
  extern __shared__ float smem[];
  constexpr bool kPass2 = PASS >= 2;
  using Topk = typename TopkList<PASS == 2>::type;
  constexpr int LQ = D + kTcPad, LV = kTcKeys + kTcPad;  // row lengths (fp16 values) of Qs / Ks and of Vs
  uint16_t* Qs = reinterpret_cast<uint16_t*>(smem);      // [kTcRows][LQ]
  uint16_t* Ks0 = Qs + kTcRows * LQ;                     // 2 x [kTcKeys][LQ]: double-buffered key tiles
  uint16_t* Vs0 = Ks0 + 2 * kTcKeys * LQ;                // 2 x [D][LV] (pass 1)
  const int h = blockIdx.x;
  if (skip && skip[h]) return;
  const int T = a.n_tokens;
  const int q0 = ((int)gridDim.y - 1 - (int)blockIdx.y) * kTcRows;  // the longest rows first
  const int kvh = h / (n_heads / n_kv_heads);
  const int q_stride = n_heads * D;
  const uint16_t* kh = k_half + (size_t)kvh * n_pad * D;
  const uint16_t* vt = v_half_t + (size_t)kvh * D * n_pad;
  const float logit_scale = a.logit_scale > 0.0f ? a.logit_scale : 1.0f / sqrtf((float)D);
  const float cap = a.softcap;
  const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
  const int n_rows = T - q0 < kTcRows ? T - q0 : kTcRows;

  tile_to_half<D>(q + (size_t)q0 * q_stride + (size_t)h * D, q_stride, kTcRows, n_rows, Qs);
  __syncthreads();
  uint32_t qf[D / 16][4];  // this warp's 16 rows of Q as A fragments
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint16_t* r0 = Qs + (warp * 16 + g) * LQ + kk * 16 + 2 * t;
    qf[kk][0] = ld_u32(r0);
    qf[kk][1] = ld_u32(r0 + 8 * LQ);
    qf[kk][2] = ld_u32(r0 + 8);
    qf[kk][3] = ld_u32(r0 + 8 * LQ + 8);
  }

  // This thread's two rows (ri = 0: g, 1: g + 8).
  int row[2], n_vis[2], lo[2];
  float srow[2], c2[2], inv_n[2], inv_z[2];
  math::OnlineSoftmax sm[2];
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    row[ri] = q0 + warp * 16 + g + 8 * ri;
    const bool live = row[ri] < T;
    n_vis[ri] = live ? a.n_past + row[ri] + 1 : 0;
    lo[ri] = live ? math::window_first_key(n_vis[ri], a.window) : 0;
    srow[ri] = live ? a.row_scale[(size_t)h * T + row[ri]] : 0.0f;
    c2[ri] = logit_scale * srow[ri] * kTcLog2e;
    inv_n[ri] = live ? 1.0f / (float)(n_vis[ri] - lo[ri]) : 0.0f;  // the tail's threshold, the uniform share
    sm[ri] = math::online_softmax_init();
    inv_z[ri] = 0.0f;
    if (kPass2 && live) {
      const float* s3 = st + ((size_t)h * T + row[ri]) * 3;
      sm[ri] = math::OnlineSoftmax{s3[0], s3[1], s3[2]};
      inv_z[ri] = 1.0f / sm[ri].z;  // pass 2's final state: one division a row, not a score
    }
  }
  const int k = a.topk < kMaxTopk ? a.topk : kMaxTopk;
  const bool want_topk = kPass2 && k > 0;
  Topk tk[2];
  row_topk_init(tk[0]);
  row_topk_init(tk[1]);
  float tail[2] = {0.0f, 0.0f}, sink[2] = {0.0f, 0.0f};
  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;

  // Keys of the block: from the first row's window start to the last row's position.
  const int last_row = q0 + n_rows - 1;
  const int key_end = a.n_past + last_row + 1;
  const int key_lo = math::window_first_key(a.n_past + q0 + 1, a.window);
  // This warp's rows see keys up to warp_end - 1: tiles past it are skipped by the warp (no barrier inside).
  const int warp_first = q0 + warp * 16;
  const int warp_end = warp_first < T ? a.n_past + (warp_first + 15 < T ? warp_first + 15 : T - 1) + 1 : 0;
  const int warp_lo = warp_first < T ? math::window_first_key(a.n_past + warp_first + 1, a.window) : 0;
  // Tiles every row of the warp sees whole (all 16 rows live, past the last row's window start and before the first
  // row's end) need no mask.
  const int warp_full_lo = math::window_first_key(a.n_past + warp_first + 16, a.window);
  const int warp_full_end = warp_first + 15 < T ? a.n_past + warp_first + 1 : -1;
  // ldmatrix rows of this lane: row lane % 8 of matrix lane / 8; matrices 0 / 1 the low / high 8 columns of a
  // 16-column step, 2 / 3 the same of the next step
  const int lm_row = lane & 7, lm_col = (lane >> 4) * 16 + ((lane >> 3) & 1) * 8;
  const int first_tile = key_lo - key_lo % kTcKeys;
  load_kv_tile<D, !kPass2>(kh, vt, n_pad, first_tile, Ks0, Vs0);
  cp_async_commit();
  int buf = 0;
  for (int j0 = first_tile; j0 < key_end; j0 += kTcKeys, buf ^= 1) {
    // Prefetch the next tile into the other buffer (its readers finished at the barrier that ended the last
    // iteration), then wait for this one.
    if (j0 + kTcKeys < key_end)
      load_kv_tile<D, !kPass2>(kh, vt, n_pad, j0 + kTcKeys, Ks0 + (buf ^ 1) * kTcKeys * LQ, Vs0 + (buf ^ 1) * D * LV);
    cp_async_commit();
    cp_async_wait_all_but_one();
    __syncthreads();
    const uint16_t* Ks = Ks0 + buf * kTcKeys * LQ;
    const uint16_t* Vt = Vs0 + buf * D * LV;
    // A warp none of whose rows sees a key of this tile skips it (warp-uniform; every thread still reaches the
    // barrier below).
    const bool visible = j0 < warp_end && j0 + kTcKeys > warp_lo;
    do {
      if (!visible) break;
      float s[kTcKeys / 8][4];
#pragma unroll
      for (int nt = 0; nt < kTcKeys / 8; ++nt) {
        s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
        const int kr = (nt * 8 + lm_row) * LQ + lm_col;  // keys 8 nt.., dimensions 16 kk.. and 16 (kk + 1)..
#pragma unroll
        for (int kk = 0; kk < D / 16; kk += 2) {
          uint32_t b[4];
          ldmatrix_x4(b, Ks, kr + kk * 16);
          mma_16816(s[nt], qf[kk], b[0], b[1]);
          mma_16816(s[nt], qf[kk + 1], b[2], b[3]);
        }
      }
      // Logits, masked keys as -inf; element e of s[nt] is row e / 2, key j0 + 8 nt + 2t + e % 2.
      float tile_max[2] = {-INFINITY, -INFINITY};
      if (j0 >= warp_full_lo && j0 + kTcKeys <= warp_full_end) {  // warp-uniform: no key of the tile is masked
#pragma unroll
        for (int nt = 0; nt < kTcKeys / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int ri = e >> 1;
            const float x = tc_logit2(s[nt][e], logit_scale, srow[ri], c2[ri], cap);
            s[nt][e] = x;
            tile_max[ri] = fmaxf(tile_max[ri], x);
          }
      } else {
#pragma unroll
        for (int nt = 0; nt < kTcKeys / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int ri = e >> 1, j = j0 + nt * 8 + 2 * t + (e & 1);
            const bool vis = j >= lo[ri] && j < n_vis[ri];
            const float x = vis ? tc_logit2(s[nt][e], logit_scale, srow[ri], c2[ri], cap) : -INFINITY;
            s[nt][e] = x;
            tile_max[ri] = fmaxf(tile_max[ri], x);
          }
      }
      if (!kPass2) {
        float r[2];
#pragma unroll
        for (int ri = 0; ri < 2; ++ri) {
          const float m_new = fmaxf(sm[ri].m, group_max(tile_max[ri]));
          // Each lane keeps its own partial Z and A relative to the group's common running max.
          r[ri] = m_new > sm[ri].m ? tc_rebase2(sm[ri], m_new) : 1.0f;
        }
#pragma unroll
        for (int dt = 0; dt < D / 8; ++dt) {
          o[dt][0] *= r[0];
          o[dt][1] *= r[0];
          o[dt][2] *= r[1];
          o[dt][3] *= r[1];
        }
#pragma unroll
        for (int nt = 0; nt < kTcKeys / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int ri = e >> 1;
            // <= 0; a masked key (-inf, or NaN while the row's max is still -inf) clamps to -1e30 instead of a branch:
            // p = 2^-1e30 = 0 and p * d = -0, so Z and A are unchanged
            const float d = fmaxf(s[nt][e] - sm[ri].m, -1e30f);
            const float p = tc_exp2(d);
            sm[ri].z += p;
            sm[ri].a = fmaf(p, d, sm[ri].a);
            s[nt][e] = p;
          }
#pragma unroll
        for (int kk = 0; kk < kTcKeys / 16; ++kk) {  // O += P V, P's C fragments reused as A fragments
          const uint32_t pa[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
                                  pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                  pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
          for (int dt = 0; dt < D / 8; dt += 2) {  // dimensions 8 dt.. and 8 (dt + 1).., keys 16 kk..
            uint32_t b[4];
            ldmatrix_x4(b, Vt, ((dt + (lane >> 4)) * 8 + lm_row) * LV + kk * 16 + ((lane >> 3) & 1) * 8);
            mma_16816(o[dt], pa, b[0], b[1]);
            mma_16816(o[dt + 1], pa, b[2], b[3]);
          }
        }
      } else {
#pragma unroll
        for (int nt = 0; nt < kTcKeys / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int ri = e >> 1;
            // a masked key's p is 2^-inf = 0 (a live row's final max is finite): nothing to the tail, the top-k
            // mass or the sink, so no branch
            const float p = tc_exp2(s[nt][e] - sm[ri].m) * inv_z[ri];
            tail[ri] += math::tail_term(p, inv_n[ri]);
            if (j0 == 0 && nt == 0 && 2 * t + (e & 1) == 0) sink[ri] = math::sink_mass(lo[ri], p);  // key 0
            if (want_topk) row_topk_push(tk[ri], k, p);
          }
      }
    } while (false);
    __syncthreads();  // this tile's buffers may be refilled
  }

  if constexpr (!kPass2) {
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      // The group's partial sums share one max: the row's state is their sum.
      sm[ri].z = group_sum(sm[ri].z);
      sm[ri].a = group_sum(sm[ri].a);
    }
#pragma unroll
    for (int ri = 0; ri < 2; ++ri) {
      if (row[ri] >= T) continue;
      const float inv_z = 1.0f / sm[ri].z;
      float* orow = out + (size_t)row[ri] * q_stride + (size_t)h * D;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        orow[dt * 8 + 2 * t] = o[dt][2 * ri] * inv_z;
        orow[dt * 8 + 2 * t + 1] = o[dt][2 * ri + 1] * inv_z;
      }
      if (st && t == 0) {
        float* s3 = st + ((size_t)h * T + row[ri]) * 3;
        s3[0] = sm[ri].m;
        s3[1] = sm[ri].z;
        s3[2] = sm[ri].a;
      }
    }
  } else {
    pass2_metrics<D>(a, h, warp, g, t, row, n_vis, lo, srow, c2, sm, tail, sink, tk, k, want_topk, Qs, kh, logit_scale,
                     cap);
  }
}
