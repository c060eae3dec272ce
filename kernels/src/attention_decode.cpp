// The attention of a decode step (kernels-internal; attention_rows.h): a few new rows against a long cache.
//
// ops::attention's blocked path packs the cached keys and values for one OpenBLAS product per GQA group; for a
// handful of rows the packing costs as much as the products, and one task per KV head leaves threads idle (SmolLM2:
// 3 tasks on 2 threads). Here each cached key and value is read from memory once per call, by chunks of keys spread
// over the threads; each row's products are matrix-vector products (cblas_sgemv) over a chunk that the group's
// other rows then find in cache. Four steps of one parallel region (a short cache: all four in a task per head):
//   1. scores: per (KV head, key chunk), every row of the group's query heads against the chunk's keys;
//   2. per (head, row): the softmax and metrics (rows::softmax_scaled_row / attention_row_scaled, as the blocked
//      path), the captured heads' raw scores set aside first;
//   3. per (KV head, key chunk): the unnormalised p.v of the chunk's values, one partial output per chunk;
//   4. per head: the partial outputs summed and normalised; a captured head's rows normalised and handed to row_fn.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "attention_rows.h"
#include "focal_kernels/shared_math.h"
#include "target_isa.h"

namespace focal::ops {

namespace {

// o[D] = sum_{j < n} w[j] v[j * D + c] with the D sums in registers (OpenBLAS's matrix-vector product for this
// shape, 64 or 128 columns by thousands of rows, spent most of a long decode step in its partial-sum passes).
// Inlined into each ISA clone below (target_clones takes no templates in clang).
template <int D>
inline __attribute__((always_inline)) void weighted_rows_sum(const float* w, const float* v, int n, float* o) {
  float acc[D] = {};
  for (int j = 0; j < n; ++j) {
    const float wj = w[j];
    const float* vj = v + (size_t)j * D;
#pragma omp simd
    for (int c = 0; c < D; ++c) acc[c] += wj * vj[c];
  }
  for (int c = 0; c < D; ++c) o[c] = acc[c];
}
FOCAL_TARGET_CLONES void weighted_rows_sum_64(const float* w, const float* v, int n, float* o) {
  weighted_rows_sum<64>(w, v, n, o);
}
FOCAL_TARGET_CLONES void weighted_rows_sum_128(const float* w, const float* v, int n, float* o) {
  weighted_rows_sum<128>(w, v, n, o);
}

}  // namespace

void attention_decode(const AttentionArgs& a) {
  const int T = a.n_tokens;
  const int n_ctx = a.n_past + T;  // keys visible to the last row
  const int group = a.n_heads / a.n_kv_heads;
  const int d = a.d_head;
  const int q_stride = a.n_heads * d;
  const int n_rows = a.n_heads * T;  // row (h, r) at h * T + r
  const float logit_scale = a.logit_scale > 0.0f ? a.logit_scale : 1.0f / sqrtf((float)d);
  // No row sees a key before the first row's window: the products skip them.
  const int k_lo = math::window_first_key(a.n_past + 1, a.window);
  const int span = n_ctx - k_lo;
  // Key chunks of at most kChunkKeys keys (a chunk's keys or values stay in cache while the group's rows pass over
  // them), and enough (KV head, chunk) tasks for every thread twice; a cache of at most kChunkKeys keys is one
  // chunk, and then each query head is a task of its own.
  constexpr int kChunkKeys = 256;
  const int threads = omp_get_max_threads();
  const int n_chunks = span <= kChunkKeys ? 1
                                          : std::max((span + kChunkKeys - 1) / kChunkKeys,
                                                     (2 * threads + a.n_kv_heads - 1) / a.n_kv_heads);
  auto chunk_at = [&](int c) { return k_lo + (int)((int64_t)span * c / n_chunks); };
  bool any_wanted = false;
  if (a.row_fn && a.head_wanted)
    for (int h = 0; h < a.n_heads; ++h) any_wanted |= a.head_wanted[h] != 0;

  // Uninitialised: every element read is written first.
  std::unique_ptr<float[]> e(new float[(size_t)n_rows * n_ctx]);  // [n_rows, n_ctx] scores, then exponentials
  std::unique_ptr<float[]> kept(new float[any_wanted ? (size_t)n_rows * n_ctx : 1]);  // [n_rows, n_ctx] raw scores
  std::unique_ptr<float[]> inv_z(new float[n_rows]);                        // [n_rows] 1 / sum of exponentials
  std::unique_ptr<float[]> part(new float[(size_t)n_chunks * n_rows * d]);  // [n_chunks, n_rows, d] p.v parts
  const int n_tasks = a.n_kv_heads * n_chunks;

  // The four steps' work; a row (h, r) is e's row h * T + r.
  auto scores = [&](int h, int j0, int nj) {  // the rows of head h against keys [j0, j0 + nj)
    const float* kh = a.k_cache + (size_t)(h / group) * a.cache_stride * d;
    for (int row = 0; row < T; ++row)
      cblas_sgemv(CblasRowMajor, CblasNoTrans, nj, d, logit_scale, kh + (size_t)j0 * d, d,
                  a.q + (size_t)row * q_stride + (size_t)h * d, 1, 0.0f, e.get() + ((size_t)h * T + row) * n_ctx + j0,
                  1);
  };
  auto softmax = [&](int sr) {  // row sr's exponentials, metrics and (captured heads) kept raw scores
    const int h = sr / T;
    rows::attention_exps_row(a, h, sr % T, e.get() + (size_t)sr * n_ctx, n_ctx,
                             any_wanted && a.head_wanted[h] ? kept.get() + (size_t)sr * n_ctx : nullptr, &inv_z[sr]);
  };
  auto pv = [&](int h, int c, int j0, int nj) {  // unnormalised p.v of head h's rows over values [j0, j0 + nj)
    const float* vh = a.v_cache + (size_t)(h / group) * a.cache_stride * d;
    for (size_t sr = (size_t)h * T; sr < (size_t)(h + 1) * T; ++sr) {
      const float* w = e.get() + sr * n_ctx + j0;
      float* o = part.get() + ((size_t)c * n_rows + sr) * d;
      if (d == 64)
        weighted_rows_sum_64(w, vh + (size_t)j0 * d, nj, o);
      else if (d == 128)
        weighted_rows_sum_128(w, vh + (size_t)j0 * d, nj, o);
      else
        cblas_sgemv(CblasRowMajor, CblasTrans, nj, d, 1.0f, vh + (size_t)j0 * d, d, w, 1, 0.0f, o, 1);
    }
  };
  auto finish = [&](int h) {  // head h's output rows; a captured head's probabilities and raw scores to row_fn
    for (int row = 0; row < T; ++row) {
      const size_t sr = (size_t)h * T + row;
      float* dst = a.out + (size_t)row * q_stride + (size_t)h * d;
      for (int c = 0; c < d; ++c) {
        float sum = 0.0f;
        for (int ch = 0; ch < n_chunks; ++ch) sum += part[((size_t)ch * n_rows + sr) * d + c];
        dst[c] = sum * inv_z[sr];
      }
    }
    if (!any_wanted || !a.head_wanted[h]) return;
    float* pb = e.get() + (size_t)h * T * n_ctx;  // [T, n_ctx] this head's rows
    rows::captured_probs(a, pb, T, n_ctx, &inv_z[(size_t)h * T]);
    a.row_fn(a.row_ctx, h, a.n_past, T, n_ctx, pb, kept.get() + (size_t)h * T * n_ctx);
  };

  if (n_chunks == 1) {  // a short cache: a task per query head, all four steps in it (its keys stay in cache)
#pragma omp parallel for schedule(dynamic, 1)
    for (int h = 0; h < a.n_heads; ++h) {
      scores(h, k_lo, span);
      for (int row = 0; row < T; ++row) softmax(h * T + row);
      pv(h, 0, k_lo, span);
      finish(h);
    }
    return;
  }
#pragma omp parallel
  {
#pragma omp for schedule(dynamic, 1)
    for (int task = 0; task < n_tasks; ++task) {  // 1. scores by (KV head, key chunk)
      const int kvh = task % a.n_kv_heads, c = task / a.n_kv_heads, j0 = chunk_at(c);
      for (int i = 0; i < group; ++i) scores(kvh * group + i, j0, chunk_at(c + 1) - j0);
    }
#pragma omp for schedule(static)
    for (int sr = 0; sr < n_rows; ++sr) softmax(sr);  // 2.
#pragma omp for schedule(dynamic, 1)
    for (int task = 0; task < n_tasks; ++task) {  // 3. p.v by (KV head, key chunk)
      const int kvh = task % a.n_kv_heads, c = task / a.n_kv_heads, j0 = chunk_at(c);
      for (int i = 0; i < group; ++i) pv(kvh * group + i, c, j0, chunk_at(c + 1) - j0);
    }
#pragma omp for schedule(static)
    for (int h = 0; h < a.n_heads; ++h) finish(h);  // 4.
  }
}

}  // namespace focal::ops
