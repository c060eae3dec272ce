// Decode-sized attention split over the keys (ops_cuda.h: attention_split). Included by ops_cuda.cu inside its
// anonymous namespace (and inlined by tests/cuda_emu/make_emu_source.py for the emulation).
//
// attention_fused_kernel runs one block per (row, head): a decode step of an 8B model is 32 blocks on a 132-SM card,
// each thread reads whole 512-byte key rows (a warp's load touches 32 rows), and every query head of a GQA group
// reads its KV head's keys twice and values once. At 32K keys that is ~50 GB of cache reads a token from a quarter
// of the card. Here:
//   split pass: one block per (chunk of keys, KV head, row) takes every query head of the group (kSplitHeads at a
//   time), so K and V are read once a group. Four lanes share a key (float4 pieces of its row when d % 16 == 0),
//   eight keys a warp step; the chunk's logits go to shared memory (and, when metrics are wanted, to `scores`
//   [rows, n_heads, n_ctx] in global memory); then each head's chunk state (max m_c, Z_c, A_c: math::OnlineSoftmax)
//   and its unnormalised P V over the chunk, o_c = sum_j e^(x_j - m_c) v_j.
//   combine pass: one block per (row, head) merges the chunk states (math::online_softmax_merge), out = sum_c
//   e^(m_c - m) o_c / Z, and the metrics from the stored logits under the final state (tail, top-k, sink, relevant
//   mass) as attention_fused_kernel's second pass forms them, without recomputing a dot product.
// All fp32, the CPU path's formulas (exp_nonpos, attn_logit, tail_term, sink_mass); only summation orders differ.

constexpr int kSplitThreads = 128;  // block size of the split pass
constexpr int kSplitHeads = 8;      // query heads of one KV group a split block takes at once
constexpr int kSplitMinKeys = 32;   // smallest chunk of keys
constexpr int kSplitMaxKeys = 512;  // largest chunk (shared memory: kSplitHeads x this many logits)

template <bool kVec4>
__global__ void attention_split_kernel(RowArgs a, const float* q, const float* k_cache, const float* v_cache,
                                       int cache_stride, int n_heads, int n_kv_heads, int d, int chunk_keys,
                                       float* part_st, float* part_o, float* scores) {
  extern __shared__ float smem[];
  float* q_sh = smem;                    // [kSplitHeads][d]: this batch's queries
  float* p_sh = smem + kSplitHeads * d;  // [kSplitHeads][chunk_keys]: logits, then e^(x - m_c)
  const int n_ch = (int)gridDim.x, ch = (int)blockIdx.x, kvh = (int)blockIdx.y, row = (int)blockIdx.z;
  const int group = n_heads / n_kv_heads;
  const int n_vis = a.n_past + row + 1, n_ctx = a.n_past + a.n_tokens;
  const int j0 = ch * chunk_keys;
  const int lo = math::window_first_key(n_vis, a.window);
  const int kb = j0 > lo ? j0 : lo;                                  // this row's visible keys of the chunk:
  const int ke = j0 + chunk_keys < n_vis ? j0 + chunk_keys : n_vis;  // kb .. ke - 1 (none when kb >= ke)
  const float* kh = k_cache + (size_t)kvh * cache_stride * d;
  const float* vh = v_cache + (size_t)kvh * cache_stride * d;
  const float logit_scale = a.logit_scale > 0.0f ? a.logit_scale : 1.0f / sqrtf((float)d);
  const float cap = a.softcap;
  const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31), kq = lane >> 2, t = lane & 3;
  constexpr int kWarps = kSplitThreads / 32;

  for (int g0 = 0; g0 < group; g0 += kSplitHeads) {
    const int ng = group - g0 < kSplitHeads ? group - g0 : kSplitHeads;  // block-uniform
    const int h0 = kvh * group + g0;
    for (int i = threadIdx.x; i < ng * d; i += blockDim.x) q_sh[i] = q[(size_t)row * n_heads * d + (size_t)h0 * d + i];
    __syncthreads();

    // Logits: lane group kq (4 lanes) takes key jb + kq; the warp's 8 keys a step, warps 32 keys apart.
    for (int jb = kb + warp * 8; jb < ke; jb += kWarps * 8) {
      const int j = jb + kq;
      const bool live = j < ke;
      float dot[kSplitHeads];
#pragma unroll
      for (int g = 0; g < kSplitHeads; ++g) dot[g] = 0.0f;
      if (live) {
        const float* kj = kh + (size_t)j * d;
        if (kVec4) {
          for (int c = 4 * t; c < d; c += 16) {
            const float4 kv = *reinterpret_cast<const float4*>(kj + c);
#pragma unroll
            for (int g = 0; g < kSplitHeads; ++g)
              if (g < ng) {
                const float4 qv = *reinterpret_cast<const float4*>(q_sh + g * d + c);
                dot[g] += qv.x * kv.x + qv.y * kv.y + qv.z * kv.z + qv.w * kv.w;
              }
          }
        } else {
          for (int c = t; c < d; c += 4) {
            const float kv = kj[c];
#pragma unroll
            for (int g = 0; g < kSplitHeads; ++g)
              if (g < ng) dot[g] += q_sh[g * d + c] * kv;
          }
        }
      }
#pragma unroll
      for (int g = 0; g < kSplitHeads; ++g)
        if (g < ng) {  // ng is block-uniform: every lane of the warp shuffles
          dot[g] += __shfl_xor_sync(0xffffffffu, dot[g], 1);
          dot[g] += __shfl_xor_sync(0xffffffffu, dot[g], 2);
        }
      if (live && t == 0)
        for (int g = 0; g < ng; ++g) {
          const int h = h0 + g;
          const float x = dot_logit(dot[g], logit_scale, a.row_scale[(size_t)h * a.n_tokens + row], cap);
          p_sh[g * chunk_keys + (j - j0)] = x;
          if (scores) scores[((size_t)row * n_heads + h) * n_ctx + j] = x;
        }
    }
    __syncthreads();

    // Each head's chunk state (a warp a head), e^(x - m_c) in place of the logits.
    for (int g = warp; g < ng; g += kWarps) {
      float* pg = p_sh + g * chunk_keys - j0;  // pg[j] for key j
      float m = -INFINITY;
      for (int j = kb + lane; j < ke; j += 32) m = fmaxf(m, pg[j]);
      m = warp_max(m);
      float z = 0.0f, acc = 0.0f;
      for (int j = kb + lane; j < ke; j += 32) {
        const float dd = pg[j] - m;
        const float e = math::exp_nonpos(dd);
        pg[j] = e;
        z += e;
        acc += e > 0.0f ? e * dd : 0.0f;
      }
      z = warp_sum(z);
      acc = warp_sum(acc);
      if (lane == 0) {
        float* st = part_st + (((size_t)row * n_heads + h0 + g) * n_ch + ch) * 3;
        st[0] = m;  // -inf with Z = 0 when the row sees no key of the chunk: the merge skips it
        st[1] = z;
        st[2] = acc;
      }
    }
    __syncthreads();

    // o_c = sum_j e^(x_j - m_c) v_j: a thread a dimension, each value read once for the batch's heads.
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
      float o[kSplitHeads];
#pragma unroll
      for (int g = 0; g < kSplitHeads; ++g) o[g] = 0.0f;
      for (int j = kb; j < ke; ++j) {
        const float v = vh[(size_t)j * d + c];
#pragma unroll
        for (int g = 0; g < kSplitHeads; ++g)
          if (g < ng) o[g] += p_sh[g * chunk_keys + (j - j0)] * v;
      }
      for (int g = 0; g < ng; ++g) part_o[(((size_t)row * n_heads + h0 + g) * n_ch + ch) * d + c] = o[g];
    }
    __syncthreads();  // q_sh and p_sh are refilled by the next batch of heads
  }
}

// One block (kFlashThreads) per (row, head): the row's chunk states merged, out, and the metrics. Dynamic shared
// memory: n_ch floats (each chunk's weight e^(m_c - m)).
template <class Topk>
__global__ void attention_split_combine_kernel(RowArgs a, int n_heads, int d, const uint8_t* skip, int n_ch,
                                               const float* part_st, const float* part_o, const float* scores,
                                               float* out) {
  extern __shared__ float smem[];
  float* w_sh = smem;  // [n_ch]
  __shared__ float sh[32];
  __shared__ float shv[32];
  __shared__ int shi[32];
  __shared__ float st_m[kFlashThreads], st_z[kFlashThreads], st_a[kFlashThreads];
  const int row = (int)blockIdx.x, h = (int)blockIdx.y;
  if (skip && skip[h]) return;
  const size_t base = (size_t)row * n_heads + h;
  const float* st = part_st + base * n_ch * 3;
  math::OnlineSoftmax mine = math::online_softmax_init();
  for (int c = threadIdx.x; c < n_ch; c += blockDim.x)
    math::online_softmax_merge(mine, math::OnlineSoftmax{st[3 * c], st[3 * c + 1], st[3 * c + 2]});
  const math::OnlineSoftmax sm = block_merge_online(mine, st_m, st_z, st_a);  // the row's finished state
  for (int c = threadIdx.x; c < n_ch; c += blockDim.x) w_sh[c] = st[3 * c + 1] > 0.0f ? expf(st[3 * c] - sm.m) : 0.0f;
  __syncthreads();
  const float inv_z = 1.0f / sm.z;
  const float* po = part_o + base * n_ch * d;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < n_ch; ++i)
      if (w_sh[i] > 0.0f) acc += w_sh[i] * po[(size_t)i * d + c];
    out[(size_t)row * n_heads * d + (size_t)h * d + c] = acc * inv_z;
  }
  if (!a.metrics) return;

  const int n_vis = a.n_past + row + 1, n_ctx = a.n_past + a.n_tokens;
  const int lo = math::window_first_key(n_vis, a.window);
  const float* sr = scores + base * n_ctx;  // the row's logits from the split pass
  const float inv_n = 1.0f / (float)(n_vis - lo);
  const int k = a.topk < kMaxTopk ? a.topk : kMaxTopk;
  const bool want_topk = k > 0;
  Topk tk;
  topk_init(tk);
  float tail = 0.0f, sink = 0.0f;
  for (int j = lo + threadIdx.x; j < n_vis; j += blockDim.x) {
    const float x = sr[j];
    const float p = math::online_softmax_prob(sm, x);
    tail += math::tail_term(p, inv_n);
    if (j == 0) sink = math::sink_mass(lo, p);  // thread 0's, which writes the metrics
    if (want_topk) topk_push(tk, k, x, j);
  }
  write_online_metrics(a, h, row, lo, n_vis, sm, tail, sink, tk, want_topk ? k : 0, sh, shv, shi,
                       [&](int j) { return sr[j]; });
}
