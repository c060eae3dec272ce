// The heatmap's pixels (heat_pixels.h).
#include "heat_pixels.h"

#include <algorithm>
#include <cmath>

#include "focal_figures/colormap.h"
#include "focal/metrics.h"

namespace focalscope {

namespace {

// The figures' colour maps sampled at 1025 points ([0, 1] for viridis, [-1, 1] for the diverging map), so a texel
// costs a table lookup; nearest sample, at most a fifth of an 8-bit level from the exact colour.
struct ColorLut {
  static constexpr int kN = 1024;
  focal::figures::Rgb8 c[kN + 1];
  explicit ColorLut(bool diverging) {
    for (int i = 0; i <= kN; ++i)
      c[i] = diverging ? focal::figures::diverging8(2.0 * i / kN - 1.0) : focal::figures::viridis8((double)i / kN);
  }
  // t in [0, 1] (NaN -> 0)
  const focal::figures::Rgb8& at(float t) const {
    t = t > 0.0f ? (t < 1.0f ? t : 1.0f) : 0.0f;
    return c[(int)std::lround(t * kN)];
  }
};

}  // namespace

float build_heat_pixels(const AppState& st, const HeadRows& rows, const HeatView& v, int w, int h,
                        std::vector<uint8_t>& out, std::vector<float>* texels, bool* log_used) {
  if (log_used) *log_used = false;
  static const ColorLut viridis(false), diverging(true);
  out.assign((size_t)w * h * 4, 0);
  const int T = rows.T;
  const ViewRun show = st.view.show;
  const std::vector<float>* A = rows.p[0].empty() ? nullptr : &rows.p[0].get();
  const std::vector<float>* B = rows.p[1].empty() ? nullptr : &rows.p[1].get();
  const int ps = show == ViewRun::kB ? 1 : 0;
  const std::vector<float>* P = ps == 1 ? B : A;
  const bool diff = show == ViewRun::kDiff;
  if (T == 0 || (!diff && !rows.shown(ps)) || (diff && (!rows.shown(0) || !rows.shown(1)))) return 1.0f;
  // Past AppState::dense_rows_max_tokens a side holds no [T, T] rows: a texel's keys are read as each row's largest
  // raw score less its log Z (HeadRows::max_log_p_spans) and one exponential of the texel's largest, B - A from both
  // sides' normalisers (max_diff_in).
  const bool on_demand = diff ? (!A || !B) : !P;
  // Max-pool (for differences: the value of largest magnitude) each texel's block of the matrix.
  std::vector<float> val((size_t)w * h, 0.0f);
  std::vector<float> scale_val((size_t)w * h, 0.0f);         // the same without row 0 (one visible key: always 1)
  std::vector<uint8_t> masked((size_t)w * h, kTexelCausal);  // TexelMask
  const focal::ModelConfig* cfg = st.config();
  const double sx = (v.k1 - v.k0) / w, sy = (v.q1 - v.q0) / h;
  // Each texel column's keys [kav, kbv) and each texel row's queries [qav, qbv): at least one, inside the prompt.
  std::vector<int> kav(w), kbv(w), qav(h), qbv(h);
  for (int x = 0; x < w; ++x) {
    kav[x] = std::max(0, (int)std::floor(v.k0 + x * sx));
    kbv[x] = std::min(T, std::max(kav[x] + 1, (int)std::floor(v.k0 + (x + 1) * sx)));
  }
  for (int y = 0; y < h; ++y) {
    qav[y] = std::max(0, (int)std::floor(v.q0 + y * sy));
    qbv[y] = std::min(T, std::max(qav[y] + 1, (int)std::floor(v.q0 + (y + 1) * sy)));
  }
  // Long prompts: a texel that spans at least b keys reads its rows' max over blocks of b keys (HeadRows::pooled),
  // blocks that straddle its edges included (a max over up to b - 1 keys of the next texel); B - A reads every key.
  int pool_b = 0, pool_n = 0;
  const float* pool = nullptr;
  for (int i = kHeatPoolLevels - 1; i >= 0 && !diff; --i) {
    const int b = kHeatPoolKeys[i];
    if (sx >= b && rows.pooled[ps][i].size() == (size_t)T * ((T + b - 1) / b)) {
      pool_b = b;
      pool_n = (T + b - 1) / b;
      pool = rows.pooled[ps][i].data();
      break;
    }
  }
  // Texels at least b rows high and b keys wide: cells of b x b (pooled2d; a key a sliding window hides is 0 in them),
  // the causal and window masks from the texel's span (texel_mask).
  int pool2_b = 0, pool2_n = 0;
  const float* pool2 = nullptr;
  // B - A of long prompts: the cells of the largest |b - a| (HeadRows::diff2d), where they are computed.
  for (int i = kHeatPoolLevels - 1; i >= 0; --i) {
    const int b = kHeatPoolKeys[i], n = (T + b - 1) / b;
    const std::vector<float>& cells = diff ? rows.diff2d[i] : rows.pooled2d[ps][i];
    if (sx >= b && sy >= b && cells.size() == (size_t)n * n) {
      pool2_b = b;
      pool2_n = n;
      pool2 = cells.data();
      break;
    }
  }
  // B - A at texels of 8 keys or more without its cells: past dense_rows_max_tokens every key of both sides would be
  // two exponentials per texel row, and while the view worker computes them from held rows a read of every key (16K
  // tokens: ~280 ms in one frame). Not drawn.
  if (diff && (on_demand || rows.diff_pending) && !pool2 && sx >= kHeatPoolKeys[0]) return -1.0f;
  if (pool2) {
#pragma omp parallel for schedule(static)
    for (int y = 0; y < h; ++y) {
      const int qa = qav[y], qb = qbv[y];
      const int ia = qa / pool2_b, ie = (qb - 1) / pool2_b;
      for (int x = 0; x < w; ++x) {
        const int ka = kav[x], kb = kbv[x];
        const size_t o = (size_t)y * w + x;
        masked[o] = texel_mask(cfg, st.sel_layer, qa, qb, ka, kb);
        if (masked[o] != kTexelVisible) continue;
        float best = 0.0f, best_rest = 0.0f;  // of largest magnitude (B - A's cells are signed)
        for (int i = ia; i <= ie; ++i) {
          const float* c = pool2 + (size_t)i * pool2_n;
          float m = 0.0f;
          for (int j = ka / pool2_b, je = (kb - 1) / pool2_b; j <= je; ++j)
            if (std::fabs(c[j]) > std::fabs(m)) m = c[j];
          if (std::fabs(m) > std::fabs(best)) best = m;
          if (i > 0 && std::fabs(m) > std::fabs(best_rest)) best_rest = m;  // as below, without query row 0's block
        }
        val[o] = best;
        scale_val[o] = best_rest;
      }
    }
  } else if (on_demand && !diff) {
    // Rows on demand, texels narrower than the cells: row by row (each row's keys read in order, its normaliser
    // once), every texel of the row's span at once (HeadRows::max_log_p_spans), the texels' largest logit less
    // log Z kept and one exponential taken per texel at the end.
#pragma omp parallel
    {
      std::vector<float> best_log(w), best_rest_log(w), lp(w);  // [w]
      std::vector<int> sa(w), sb(w);                            // [w] a row's visible keys of each texel
      std::vector<uint8_t> any(w), windowed(w);                 // [w]
#pragma omp for schedule(dynamic, 8)
      for (int y = 0; y < h; ++y) {
        std::fill(best_log.begin(), best_log.end(), -INFINITY);
        std::fill(best_rest_log.begin(), best_rest_log.end(), -INFINITY);
        std::fill(any.begin(), any.end(), 0);
        std::fill(windowed.begin(), windowed.end(), 0);
        for (int q = qav[y]; q < qbv[y]; ++q) {
          // Texels 0 .. xe - 1 hold keys the row may see (their first key is at most the row's last).
          const int xe = (int)(std::upper_bound(kav.begin(), kav.end(), q) - kav.begin());
          const int lo = cfg ? focal::window_first_key(*cfg, st.sel_layer, q + 1) : 0;
          for (int x = 0; x < xe; ++x) {
            sa[x] = std::max(kav[x], lo);
            sb[x] = std::min(kbv[x], q + 1);
            (sa[x] < sb[x] ? any : windowed)[x] = 1;
          }
          rows.max_log_p_spans(ps, q, sa.data(), sb.data(), xe, lp.data());
          for (int x = 0; x < xe; ++x) {
            best_log[x] = std::max(best_log[x], lp[x]);
            if (q > 0) best_rest_log[x] = std::max(best_rest_log[x], lp[x]);
          }
        }
        for (int x = 0; x < w; ++x) {
          const size_t o = (size_t)y * w + x;
          val[o] = std::exp(best_log[x]);  // 0 for -inf
          scale_val[o] = std::exp(best_rest_log[x]);
          masked[o] = any[x] ? kTexelVisible : windowed[x] ? kTexelWindow : kTexelCausal;
        }
      }
    }
  } else {
#pragma omp parallel for schedule(dynamic, 8)
    for (int y = 0; y < h; ++y) {
      const int qa = qav[y], qb = qbv[y];
      for (int x = 0; x < w; ++x) {
        const int ka = kav[x], kb = kbv[x];
        float best = 0.0f, best_rest = 0.0f;
        bool any = false;
        bool windowed = false;  // causally visible keys of the texel that a sliding window hides
        for (int q = qa; q < qb; ++q) {
          const int kend = std::min(kb, q + 1);
          if (ka >= kend) continue;
          const int lo = cfg ? focal::window_first_key(*cfg, st.sel_layer, q + 1) : 0;
          if (std::max(ka, lo) >= kend) {
            windowed = true;
            continue;
          }
          any = true;
          float row_best = 0.0f;
          if (pool) {
            const float* c = pool + (size_t)q * pool_n;
            for (int j = std::max(ka, lo) / pool_b, je = (kend - 1) / pool_b; j <= je; ++j)
              row_best = std::max(row_best, c[j]);
          } else if (on_demand) {
            row_best = rows.max_diff_in(q, std::max(ka, lo), kend);
          } else if (diff) {
            const float* a = A->data() + (size_t)q * T;
            const float* b = B->data() + (size_t)q * T;
            for (int k = ka; k < kend; ++k) {
              const float d = b[k] - a[k];
              if (std::fabs(d) > std::fabs(row_best)) row_best = d;
            }
          } else {
            const float* p = P->data() + (size_t)q * T;
            for (int k = ka; k < kend; ++k) row_best = std::max(row_best, p[k]);
          }
          if (std::fabs(row_best) > std::fabs(best)) best = row_best;
          if (q > 0 && std::fabs(row_best) > std::fabs(best_rest)) best_rest = row_best;
        }
        val[(size_t)y * w + x] = best;
        scale_val[(size_t)y * w + x] = best_rest;
        masked[(size_t)y * w + x] = any ? kTexelVisible : windowed ? kTexelWindow : kTexelCausal;
      }
    }
  }
  if (texels) *texels = val;
  float vmax = 0.0f;
  for (size_t i = 0; i < val.size(); ++i)  // as the figures: row 0 (p = 1 on its one key) takes the top colour
    if (!masked[i]) vmax = std::max(vmax, std::fabs(scale_val[i]));
  if (vmax <= 0.0f) vmax = 1.0f;
  const float floor_log = -4.0f;  // log colour: 1e-4 .. 1
  bool log_color = !diff && st.view.heat_color == HeatColor::kLog;
  if (!diff && st.view.heat_color == HeatColor::kAuto) {  // the figures' rule (fig_heatmap.cpp rows_faint) on texels
    int n_rows = 0, faint = 0;
    for (int y = 0; y < h; ++y) {
      if (qbv[y] <= 1) continue;  // query 0 alone: one key, p = 1
      bool any = false;
      float row_max = 0.0f;
      for (int x = 0; x < w; ++x)
        if (!masked[(size_t)y * w + x]) {
          any = true;
          row_max = std::max(row_max, scale_val[(size_t)y * w + x]);
        }
      if (!any) continue;
      ++n_rows;
      if (row_max < 0.1f * vmax) ++faint;
    }
    log_color = n_rows > 0 && 2 * faint > n_rows;
  }
  if (log_used) *log_used = log_color;
  const float inv_vmax = 1.0f / vmax;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < val.size(); ++i) {
    uint8_t* px = &out[i * 4];
    if (masked[i] == kTexelCausal) {  // keys after the query: causal mask
      px[0] = px[1] = px[2] = 28;
      px[3] = 255;
      continue;
    }
    if (masked[i] == kTexelWindow) {  // keys before the sliding window: a violet-grey, distinct from the causal mask
      px[0] = 62;
      px[1] = 48;
      px[2] = 78;
      px[3] = 255;
      continue;
    }
    focal::figures::Rgb8 c;
    if (diff) {
      c = diverging.at(0.5f * (val[i] * inv_vmax + 1.0f));
    } else if (log_color) {
      const float lv = std::log10(std::max(1e-12f, val[i]));
      c = viridis.at((lv - floor_log) / -floor_log);
    } else {
      c = viridis.at(val[i] * inv_vmax);
    }
    px[0] = c.r;
    px[1] = c.g;
    px[2] = c.b;
    px[3] = 255;
  }
  return vmax;
}

}  // namespace focalscope
