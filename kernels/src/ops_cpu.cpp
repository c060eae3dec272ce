// CPU implementations of the focalscope ops (see ops.h). GEMMs go through OpenBLAS; per-row math through
// shared_math.h so the CUDA kernels compute the same formulas.
#include "focal_kernels/ops.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "attention_rows.h"
#include "focal_kernels/shared_math.h"
#include "parallel_for.h"
#include "softmax_simd.h"
#include "target_isa.h"

namespace focal::ops {

// OpenBLAS's kernels are chosen when the library loads, before any sgemm (blas_core.cpp).
[[maybe_unused]] const char* const g_blas_core = blas_core();

namespace {
bool g_profile = false;
MatmulStats g_stats;
}  // namespace

void set_matmul_profiling(bool on) {
  g_profile = on;
  g_stats = MatmulStats{};
}
MatmulStats matmul_stats() { return g_stats; }

void matmul_xwt(const float* x, const float* w, float* y, int m, int n, int k) {
  if (!g_profile) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
    return;
  }
  const double t0 = omp_get_wtime();
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
  g_stats.seconds += omp_get_wtime() - t0;
  g_stats.flops += 2.0 * m * n * k;
}

void rmsnorm(const float* x, const float* w, float* y, int rows, int n, float eps) {
  parallel_for(rows, rows > 16, [&](int r) {
    const float* xr = x + (size_t)r * n;
    float* yr = y + (size_t)r * n;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int i = 0; i < n; ++i) ss += xr[i] * xr[i];
    const float f = math::rms_factor(ss, n, eps);
    // HF order: weight * (x * rsqrt(var + eps))
    for (int i = 0; i < n; ++i) yr[i] = w[i] * (xr[i] * f);
  });
}

void rope(float* x, int n_tokens, int n_heads, int d_head, int pos0, float rope_theta) {
  const int half = d_head / 2;
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) inv_freq[i] = math::rope_inv_freq(rope_theta, i, d_head);
  rope_freqs(x, n_tokens, n_heads, d_head, pos0, inv_freq.data(), 1.0f);
}

namespace {

// The cos / sin of one call's positions and frequencies, [n_tokens, half] each: a forward rotates q and k of every
// layer at the same positions, so the calling thread keeps the last table and later calls with the same positions,
// frequencies and scale reuse it (SmolLM2 decode computed 60 x 64 sin / cos per token before). Tables of more than
// kMaxFloats values are not kept: those calls compute each token's angles as they go.
struct RopeTable {
  static constexpr size_t kMaxFloats = size_t(1) << 19;  // 2 MiB a table
  int pos0 = 0, n_tokens = 0;
  float cs_scale = 0.0f;
  std::vector<float> inv_freq, cs, sn;  // [half], [n_tokens, half], [n_tokens, half]
  bool holds(int p0, int n, const float* f, int half, float scale) const {
    return !cs.empty() && pos0 == p0 && n_tokens == n && cs_scale == scale && (int)inv_freq.size() == half &&
           std::equal(inv_freq.begin(), inv_freq.end(), f);
  }
};

void rope_angles(int pos, const float* inv_freq, int half, float cs_scale, float* cs, float* sn) {
  for (int i = 0; i < half; ++i) {
    const float ang = math::rope_angle(pos, inv_freq[i]);
    cs[i] = cosf(ang) * cs_scale;  // HF: cos = emb.cos() * attention_scaling (exact for 1)
    sn[i] = sinf(ang) * cs_scale;
  }
}

}  // namespace

void rope_freqs(float* x, int n_tokens, int n_heads, int d_head, int pos0, const float* inv_freq, float cs_scale) {
  const int half = d_head / 2;
  thread_local RopeTable table;
  const bool tabled = (size_t)n_tokens * half <= RopeTable::kMaxFloats;
  if (tabled && !table.holds(pos0, n_tokens, inv_freq, half, cs_scale)) {
    table.pos0 = pos0;
    table.n_tokens = n_tokens;
    table.cs_scale = cs_scale;
    table.inv_freq.assign(inv_freq, inv_freq + half);
    table.cs.resize((size_t)n_tokens * half);
    table.sn.resize((size_t)n_tokens * half);
    float *cs = table.cs.data(), *sn = table.sn.data();
    parallel_for(n_tokens, n_tokens > 16, [&](int t) {
      rope_angles(pos0 + t, inv_freq, half, cs_scale, cs + (size_t)t * half, sn + (size_t)t * half);
    });
  }
  const float *cs_all = table.cs.data(), *sn_all = table.sn.data();  // the calling thread's table
  parallel_for(n_tokens, n_tokens > 16, [&](int t) {
    float cs_own[512], sn_own[512];  // d_head/2 <= 512, when the call's table is not kept
    if (!tabled) rope_angles(pos0 + t, inv_freq, half, cs_scale, cs_own, sn_own);
    const float* cs = tabled ? cs_all + (size_t)t * half : cs_own;
    const float* sn = tabled ? sn_all + (size_t)t * half : sn_own;
    float* xt = x + (size_t)t * n_heads * d_head;
    for (int h = 0; h < n_heads; ++h) {
      float* xh = xt + (size_t)h * d_head;
      for (int i = 0; i < half; ++i) math::rope_rotate_pair(xh[i], xh[i + half], cs[i], sn[i]);
    }
  });
}

void layernorm(const float* x, const float* w, const float* b, float* y, int rows, int n, float eps) {
  parallel_for(rows, rows > 16, [&](int r) {
    const float* xr = x + (size_t)r * n;
    float* yr = y + (size_t)r * n;
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) sum += xr[i];
    const float mean = sum / (float)n;
    float ss = 0.0f;
    for (int i = 0; i < n; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
    const float rstd = math::layernorm_rstd(ss / (float)n, eps);
    for (int i = 0; i < n; ++i) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
  });
}

namespace {
// The vector bodies of the SwiGLU, GELU and soft-cap loops, cloned per ISA (an OpenMP region's outlined body is not,
// so the parallel loops below hand these spans to the threads). Element by element, no FMA contraction: every clone
// gives the same bits as the baseline.
constexpr size_t kSpan = 4096;
FOCAL_TARGET_CLONES void swiglu_span(const float* gate, const float* up, float* out, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) out[i] = math::silu(gate[i]) * up[i];
}
FOCAL_TARGET_CLONES void gelu_tanh_span(const float* gate, const float* up, float* out, size_t n) {
  if (up) {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) out[i] = math::gelu_tanh(gate[i]) * up[i];
  } else {
#pragma omp simd
    for (size_t i = 0; i < n; ++i) out[i] = math::gelu_tanh(gate[i]);
  }
}
FOCAL_TARGET_CLONES void softcap_span(const float* x, float* y, size_t n, float scale, float cap) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) y[i] = cap * math::tanh_approx(x[i] * scale / cap);
}
}  // namespace

void swiglu(const float* gate, const float* up, float* out, size_t n) {
  const size_t spans = (n + kSpan - 1) / kSpan;
  parallel_for(spans, n > 65536, [&](size_t s) {
    const size_t i0 = s * kSpan;
    swiglu_span(gate + i0, up + i0, out + i0, std::min(kSpan, n - i0));
  });
}

void act_mul(const float* gate, const float* up, float* out, size_t n, Act act) {
  if (act == Act::kSilu && up) return swiglu(gate, up, out, n);
  if (act == Act::kGeluTanh) {  // the branch-free GELU vectorises (Gemma 2, GPT-2)
    const size_t spans = (n + kSpan - 1) / kSpan;
    parallel_for(spans, n > 65536, [&](size_t s) {
      const size_t i0 = s * kSpan, len = std::min(kSpan, n - i0);
      gelu_tanh_span(gate + i0, up ? up + i0 : nullptr, out + i0, len);
    });
    return;
  }
  const int code = (int)act;
  parallel_for(n, n > 65536, [&](size_t i) { out[i] = math::activate(gate[i], code) * (up ? up[i] : 1.0f); });
}

void softcap_inplace(float* x, size_t n, float cap) {
  const size_t spans = (n + kSpan - 1) / kSpan;
  parallel_for(spans, n > 65536, [&](size_t s) {
    const size_t i0 = s * kSpan;
    softcap_span(x + i0, x + i0, std::min(kSpan, n - i0), 1.0f, cap);
  });
}

void scale_inplace(float* x, size_t n, float s) {
  parallel_for(n, n > 65536, [&](size_t i) { x[i] *= s; });
}

void add_inplace(float* y, const float* x, size_t n) {
  parallel_for(n, n > 65536, [&](size_t i) { y[i] += x[i]; });
}

void embed(const float* table, const int32_t* ids, float* out, int n_tokens, int hidden) {
  for (int t = 0; t < n_tokens; ++t)
    std::copy(table + (size_t)ids[t] * hidden, table + (size_t)(ids[t] + 1) * hidden, out + (size_t)t * hidden);
}

namespace {

// Inserts v (with its index id, when ids is given) into best[0..cnt) kept in descending order, holding at most k
// values; a value equal to one already held goes after it (so scanning in index order keeps ties lower index first).
inline void topk_insert(float* best, int& cnt, int k, float v, int32_t* ids = nullptr, int32_t id = 0) {
  int i;
  if (cnt < k) {
    i = cnt++;
  } else if (v > best[k - 1]) {
    i = k - 1;
  } else {
    return;
  }
  while (i > 0 && best[i - 1] < v) {
    best[i] = best[i - 1];
    if (ids) ids[i] = ids[i - 1];
    --i;
  }
  best[i] = v;
  if (ids) ids[i] = id;
}

// Tail mass and top-k mass (k <= 64) of the row p[j] = e[j] * inv_z (e >= 0, inv_z > 0: e unnormalised, inv_z
// its normalisation; 1 for a row already normalised), in one read of e. The products e[j] * inv_z are the values a
// normalisation pass would store, so the metrics equal those of the stored row. Top-k in two levels: the maxima of
// G = 64 strided groups (group g holds p[g], p[g + G], ...: one vertical-max pass, no horizontal reductions), the
// k-th largest group maximum as a threshold (every top-k value lies in a group whose maximum reaches it: k other
// groups' maxima would exceed it otherwise), then only the groups reaching the threshold are scanned. The k values
// are summed in descending order. The tail sum rides along the group-maximum pass, one partial sum per group lane.
FOCAL_TARGET_CLONES void tail_topk(const float* e, int n, float inv_z, int k, float* tail_mass, float* topk_mass) {
  const float inv_n = 1.0f / (float)n;
  k = std::min(k, 64);
  float best[64];
  int cnt = 0;
  constexpr int kG = 64;
  float tail = 0.0f;
  if (n < 2 * kG) {
    for (int j = 0; j < n; ++j) {
      const float v = e[j] * inv_z;
      tail += math::tail_term(v, inv_n);
      if (k > 0) topk_insert(best, cnt, k, v);
    }
  } else {
    alignas(64) float gm[kG];  // [kG] group maxima
    alignas(64) float tl[kG];  // [kG] tail partial sums
#pragma omp simd
    for (int t = 0; t < kG; ++t) {
      const float v = e[t] * inv_z;
      gm[t] = v;
      tl[t] = math::tail_term(v, inv_n);
    }
    int j = kG;
    for (; j + kG <= n; j += kG) {
#pragma omp simd
      for (int t = 0; t < kG; ++t) {
        const float v = e[j + t] * inv_z;
        gm[t] = v > gm[t] ? v : gm[t];
        tl[t] += math::tail_term(v, inv_n);
      }
    }
    for (int t = 0; j + t < n; ++t) {
      const float v = e[j + t] * inv_z;
      gm[t] = v > gm[t] ? v : gm[t];
      tl[t] += math::tail_term(v, inv_n);
    }
    for (int t = 0; t < kG; ++t) tail += tl[t];
    if (k > 0) {
      for (int t = 0; t < kG; ++t) topk_insert(best, cnt, k, gm[t]);
      const float thr = best[k - 1];
      cnt = 0;
      for (int g = 0; g < kG; ++g)
        if (gm[g] >= thr)
          for (int i = g; i < n; i += kG) topk_insert(best, cnt, k, e[i] * inv_z);
    }
  }
  float s = 0.0f;
  for (int i = 0; i < cnt; ++i) s += best[i];
  *tail_mass = tail;
  *topk_mass = s;
}

// Relevant mass over the keys lo..n-1 of the row p[j] = e[j] * inv_z (the row's visible keys).
void fill_relevant(const float* e, int n, const int32_t* relevant, int n_relevant, float* m, int lo = 0,
                   float inv_z = 1.0f) {
  float rel = 0.0f;
  int seen = 0;
  for (int r = 0; r < n_relevant; ++r) {
    const int j = relevant[r];
    if (j >= lo && j < n) {
      rel += e[j] * inv_z;
      ++seen;
    }
  }
  m[kRelevantMass] = math::relevant_mass(rel, (float)seen);
}

// Metrics that need the normalised row (everything except entropy, which comes from the softmax pass).
void fill_prob_metrics(const float* p, int n, int topk, const int32_t* relevant, int n_relevant, float* m) {
  float mx = 0.0f;
#pragma omp simd reduction(max : mx)
  for (int j = 0; j < n; ++j) mx = p[j] > mx ? p[j] : mx;
  m[kMaxProb] = mx;
  m[kSinkMass] = p[0];
  tail_topk(p, n, 1.0f, topk, &m[kTailMass], &m[kTopkMass]);
  fill_relevant(p, n, relevant, n_relevant, m);
}

void fill_entropy_metrics(float h, int n, float* m) {
  math::entropy_metrics(h, n, m[kEntropyNats], m[kEntropyNorm], m[kEffSupport]);
}

}  // namespace

namespace rows {

// p[n] = softmax(raw[n] * scale), scale >= 0; metrics as in softmax_row. With inv_z_out, p keeps the unnormalised
// e[n] = exp(raw * scale - max) and *inv_z_out = 1 / sum e (the caller scales what it computes from p); metrics are
// those of the normalised row either way. Hot loop of the attention: the max (omp simd) and the metrics cloned for
// AVX2 machines, the exponentials hand-vectorised (softmax_simd.h).
FOCAL_TARGET_CLONES void softmax_scaled_row(const float* raw, float scale, float* p, int n, float* metrics, int topk,
                                            const int32_t* relevant, int n_relevant, float* inv_z_out) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int j = 0; j < n; ++j) mx = raw[j] > mx ? raw[j] : mx;
  mx *= scale;  // scale >= 0, so max(raw * scale) = scale * max(raw)
  // p[j] = e_j = exp(raw[j] * scale - mx), z = sum e_j, a = sum e_j (x_j - mx): hand-vectorised (softmax_simd.h)
  const ExpSums sums = softmax_exp_pass(raw, scale, mx, p, n);
  const float z = sums.z, a = sums.a;
  const float inv_z = 1.0f / z;
  if (metrics) {
    // Read from e: p[j] = e[j] * inv_z, the values the normalisation below stores. The max logit has
    // e = exp(0) = 1 exactly, so the max probability is inv_z.
    // H = ln Z - sum e^(x-m)(x-m) / Z, the same identity the online (flash) path uses.
    fill_entropy_metrics(logf(z) - a * inv_z, n, metrics);
    metrics[kMaxProb] = inv_z;
    metrics[kSinkMass] = p[0] * inv_z;
    tail_topk(p, n, inv_z, topk, &metrics[kTailMass], &metrics[kTopkMass]);
    fill_relevant(p, n, relevant, n_relevant, metrics, 0, inv_z);
  }
  if (inv_z_out) {
    *inv_z_out = inv_z;
    return;
  }
#pragma omp simd
  for (int j = 0; j < n; ++j) p[j] *= inv_z;
}

// attention_row's work; with inv_z_out, p[first_key, n_vis) keeps the row's unnormalised exponentials and
// *inv_z_out their normalisation (as in softmax_scaled_row).
void attention_row_scaled(const float* raw, float scale, float softcap, int first_key, float* p, int n_vis,
                          float* metrics, int topk, const int32_t* relevant, int n_relevant, float* inv_z_out) {
  const int lo = first_key, nv = n_vis - lo;
  thread_local std::vector<float> logits;  // [n_vis - first_key]
  logits.resize((size_t)nv);
  float* lg = logits.data();
  const float* rw = raw + lo;
  if (softcap > 0.0f) {
    softcap_span(rw, lg, (size_t)nv, scale, softcap);
  } else {
#pragma omp simd
    for (int j = 0; j < nv; ++j) lg[j] = rw[j] * scale;
  }
  float inv_z = 1.0f;
  softmax_scaled_row(logits.data(), 1.0f, p + lo, nv, metrics, topk, nullptr, 0, inv_z_out ? &inv_z : nullptr);
  if (metrics) {
    metrics[kSinkMass] = math::sink_mass(lo, p[0] * inv_z);
    fill_relevant(p, n_vis, relevant, n_relevant, metrics, lo, inv_z);
  }
  if (inv_z_out) *inv_z_out = inv_z;
  std::fill(p, p + lo, 0.0f);
}

void attention_exps_row(const AttentionArgs& a, int h, int row, float* tr, int n_keys, float* kept, float* inv_z) {
  const int T = a.n_tokens, n_vis = a.n_past + row + 1;
  const bool plain_rows = a.softcap <= 0.0f && a.window <= 0;
  const float s = a.row_scale[(size_t)h * T + row];
  float* m = a.metrics ? a.metrics + ((size_t)h * T + row) * kNumRowMetrics : nullptr;
  const int lo = plain_rows ? 0 : math::window_first_key(n_vis, a.window);
  if (kept) {  // raw as row_fn gets it: 0 outside the window and past the row's last key
    std::fill(kept, kept + lo, 0.0f);
    std::copy(tr + lo, tr + n_vis, kept + lo);
    std::fill(kept + n_vis, kept + n_keys, 0.0f);
  }
  if (plain_rows)
    softmax_scaled_row(tr, s, tr, n_vis, m, a.topk, a.relevant, a.n_relevant, inv_z);
  else
    attention_row_scaled(tr, s, a.softcap, lo, tr, n_vis, m, a.topk, a.relevant, a.n_relevant, inv_z);
  std::fill(tr + n_vis, tr + n_keys, 0.0f);
}

void captured_probs(const AttentionArgs& a, float* pb, int nr, int n_keys, const float* inv_z) {
  for (int r = 0; r < nr; ++r) {
    float* pr = pb + (size_t)r * n_keys;
    const float iz = inv_z[r];
    for (int j = 0; j < n_keys; ++j) pr[j] *= iz;
    if (a.probs_fp16)
      for (int j = 0; j < n_keys; ++j) pr[j] = math::round_to_half(pr[j]);
  }
}

}  // namespace rows

void softmax_row(const float* logits, float* p, int n, float* metrics, int topk, const int32_t* relevant,
                 int n_relevant) {
  rows::softmax_scaled_row(logits, 1.0f, p, n, metrics, topk, relevant, n_relevant);
}

void attention_row(const float* raw, float scale, float softcap, int first_key, float* p, int n_vis, float* metrics,
                   int topk, const int32_t* relevant, int n_relevant) {
  rows::attention_row_scaled(raw, scale, softcap, first_key, p, n_vis, metrics, topk, relevant, n_relevant, nullptr);
}

void row_metrics(const float* p, int n, int topk, const int32_t* relevant, int n_relevant, float* metrics) {
  float h = 0.0f;
  for (int j = 0; j < n; ++j) h -= p[j] > 0.0f ? p[j] * logf(p[j]) : 0.0f;
  fill_entropy_metrics(h, n, metrics);
  fill_prob_metrics(p, n, topk, relevant, n_relevant, metrics);
}

void attention(const AttentionArgs& a) {
  // A task is a block of kBlock query rows of all the query heads that share one KV head (GQA group): their rows
  // stacked head by head make one q.k product and one p.v product against the group's keys up to the block's last
  // row, so OpenBLAS packs those keys and values once per group instead of once per head. The keys after a row
  // (causal mask) get probability 0; only the block's last diagonal tile computes any of them. The exponentials
  // overwrite the scores in place (one tile of memory traffic, not two); a captured head's scores are kept aside.
  //
  // A decode step (at most kDecodeRows new rows) takes attention_decode (attention_rows.h) instead.
  if (a.n_tokens <= rows::kDecodeRows) {
    attention_decode(a);
    return;
  }
  constexpr int kBlock = 64;  // query rows per head per task
  const int T = a.n_tokens;
  const int n_ctx = a.n_past + T;
  const int n_blocks = (T + kBlock - 1) / kBlock;
  const int group = a.n_heads / a.n_kv_heads;
  const int d = a.d_head;
  const int q_stride = a.n_heads * d;
  const float logit_scale = a.logit_scale > 0.0f ? a.logit_scale : 1.0f / sqrtf((float)d);
  const int n_tasks = a.n_kv_heads * n_blocks;
  const int block_rows = std::min(kBlock, T);  // the most rows of one head in a task
  const size_t max_rows = (size_t)group * block_rows;
  int n_wanted = 0;  // the most captured heads in one group
  if (a.row_fn && a.head_wanted)
    for (int g = 0; g < a.n_kv_heads; ++g) {
      int w = 0;
      for (int i = 0; i < group; ++i) w += a.head_wanted[g * group + i] ? 1 : 0;
      n_wanted = std::max(n_wanted, w);
    }

#pragma omp parallel
  {
    // Uninitialised: every element read is written first in the task.
    std::unique_ptr<float[]> qb(new float[max_rows * d]);  // [group * nr, d] the block's queries, head-major
    std::unique_ptr<float[]> ob(new float[max_rows * d]);  // [group * nr, d] p.v of unnormalised rows
    std::unique_ptr<float[]> inv_z(new float[max_rows]);   // [group * nr] each row's 1 / sum of exponentials
    // [group * nr, n_keys] q.k * logit_scale, then in place each row's exponentials, then (captured heads) its
    // probabilities
    std::unique_ptr<float[]> tile(new float[max_rows * n_ctx]);
    // [n_wanted * nr, n_keys] the scores of the group's captured heads, in head order
    std::unique_ptr<float[]> kept(new float[(size_t)n_wanted * block_rows * n_ctx]);
#pragma omp for schedule(dynamic, 1)
    for (int task = 0; task < n_tasks; ++task) {
      // Late (long) blocks first, the KV heads of a block interleaved, so that the work left at the end is short.
      const int blk = n_blocks - 1 - task / a.n_kv_heads;
      const int kvh = task % a.n_kv_heads;
      const int h0 = kvh * group;  // the group's first query head
      const int r0 = blk * kBlock;
      const int nr = std::min(kBlock, T - r0);
      const int n_rows = group * nr;          // stacked rows: head h0 + i's row r at i * nr + r
      const int n_keys = a.n_past + r0 + nr;  // keys visible to the last row of the block
      // Under a sliding window no row of the block sees a key before its first row's window: the products skip them.
      const int k_lo = math::window_first_key(a.n_past + r0 + 1, a.window);
      const float* kh = a.k_cache + (size_t)kvh * a.cache_stride * d;
      const float* vh = a.v_cache + (size_t)kvh * a.cache_stride * d;
      for (int i = 0; i < group; ++i)
        for (int r = 0; r < nr; ++r) {
          const float* src = a.q + (size_t)(r0 + r) * q_stride + (size_t)(h0 + i) * d;
          std::copy(src, src + d, qb.get() + ((size_t)i * nr + r) * d);
        }
      // tile[n_rows, k_lo:n_keys] = qb[n_rows, d] . kh[k_lo:n_keys, d]^T * logit_scale (columns before k_lo: per row)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n_rows, n_keys - k_lo, d, logit_scale, qb.get(), d,
                  kh + (size_t)k_lo * d, d, 0.0f, tile.get() + k_lo, n_keys);
      int n_kept = 0;
      for (int i = 0; i < group; ++i) {
        const int h = h0 + i;
        float* kr0 = a.row_fn && a.head_wanted && a.head_wanted[h] ? kept.get() + (size_t)n_kept++ * nr * n_keys
                                                                   : nullptr;  // [nr, n_keys] or none
        for (int r = 0; r < nr; ++r) {
          const int sr = i * nr + r;
          rows::attention_exps_row(a, h, r0 + r, tile.get() + (size_t)sr * n_keys, n_keys,
                                   kr0 ? kr0 + (size_t)r * n_keys : nullptr, &inv_z[sr]);
        }
      }
      // ob[n_rows, d] = tile[n_rows, k_lo:n_keys] . vh[k_lo:n_keys, d] (the exponentials before k_lo are 0); each
      // output row is then normalised by its row's 1 / sum of exponentials.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n_rows, d, n_keys - k_lo, 1.0f, tile.get() + k_lo, n_keys,
                  vh + (size_t)k_lo * d, d, 0.0f, ob.get(), d);
      for (int i = 0; i < group; ++i)
        for (int r = 0; r < nr; ++r) {
          const int sr = i * nr + r;
          const float* src = ob.get() + (size_t)sr * d;
          float* dst = a.out + (size_t)(r0 + r) * q_stride + (size_t)(h0 + i) * d;
          for (int c = 0; c < d; ++c) dst[c] = src[c] * inv_z[sr];
        }
      for (int i = 0, k = 0; i < group && k < n_kept; ++i) {
        if (!a.head_wanted[h0 + i]) continue;
        float* pb = tile.get() + (size_t)i * nr * n_keys;  // [nr, n_keys] this head's rows
        rows::captured_probs(a, pb, nr, n_keys, &inv_z[(size_t)i * nr]);
        a.row_fn(a.row_ctx, h0 + i, a.n_past + r0, nr, n_keys, pb, kept.get() + (size_t)k++ * nr * n_keys);
      }
    }
  }
}

void topk(const float* x, int n, int k, int32_t* idx, float* val) {
  // One pass of block maxima, then only the blocks whose maximum reaches the k-th largest block maximum are
  // scanned, in index order, with insertion after equal values: descending, ties lower index first.
  int cnt = 0;
  auto insert = [&](int32_t j) { topk_insert(val, cnt, k, x[j], idx, j); };
  constexpr int kB = 64;
  const int nb = n / kB;
  if (nb <= k || k > 64) {
    if (k > 64) {  // large k: a sort
      std::vector<int32_t> order(n);
      for (int i = 0; i < n; ++i) order[i] = i;
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [x](int32_t i, int32_t j) { return x[i] > x[j] || (x[i] == x[j] && i < j); });
      for (int i = 0; i < k; ++i) {
        idx[i] = order[i];
        val[i] = x[order[i]];
      }
      return;
    }
    for (int j = 0; j < n; ++j) insert(j);
    return;
  }
  thread_local std::vector<float> bmax;
  bmax.resize(nb);
  for (int b = 0; b < nb; ++b) {
    float m = x[b * kB];
#pragma omp simd reduction(max : m)
    for (int t = 0; t < kB; ++t) m = x[b * kB + t] > m ? x[b * kB + t] : m;
    bmax[b] = m;
  }
  // The k-th largest block maximum: at least k entries reach it, so every top-k entry is >= it.
  float best[64];
  int bc = 0;
  for (int b = 0; b < nb; ++b) topk_insert(best, bc, k, bmax[b]);
  const float thr = best[k - 1];
  for (int b = 0; b < nb; ++b)
    if (bmax[b] >= thr)
      for (int t = 0; t < kB; ++t) insert(b * kB + t);
  for (int j = nb * kB; j < n; ++j) insert(j);
}

FOCAL_TARGET_CLONES float log_sum_exp(const float* x, int n) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int j = 0; j < n; ++j) mx = x[j] > mx ? x[j] : mx;
  float z = 0.0f;
#pragma omp simd reduction(+ : z)
  for (int j = 0; j < n; ++j) z += math::exp_nonpos(x[j] - mx);
  return mx + logf(z);
}

}  // namespace focal::ops
