// Rows on demand (rows_on_demand.h): the HeadRows readers, the view worker's normalisers and heatmap cells, and
// B - A's cells.
#include "rows_on_demand.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "focal/capture.h"
#include "focal/metrics.h"

namespace focalscope {

using focal::kNumRowMetrics;

namespace {
// p of key k of a row from its normaliser (0 outside [first, q]); with a soft-cap the forward's logit function.
inline float norm_prob(const float* raw, const RowNorm& nm, float cap, int k) {
  return (float)std::exp((double)focal::attention_logit(raw[k], nm.mult, cap) - nm.log_z);
}
// Row q's probabilities p[0, q] from its stored raw scores and normaliser.
void norm_row(const float* raw, const RowNorm& nm, float cap, int q, float* p) {
  std::fill(p, p + q + 1, 0.0f);
  if (std::isfinite(nm.log_z))
    for (int k = nm.first; k <= q; ++k) p[k] = norm_prob(raw, nm, cap, k);
}
}  // namespace

const float* HeadRows::row(int side, int q) const {
  if (q < 0 || q >= T) return nullptr;
  if (!p[side].empty()) return p[side].data() + (size_t)q * T;
  if (norm[side].empty() || !raw[side]) return nullptr;
  std::vector<CachedRow>& c = cache_[side];
  for (size_t i = 0; i < c.size(); ++i)
    if (c[i].q == q) {
      std::rotate(c.begin(), c.begin() + (std::ptrdiff_t)i, c.begin() + (std::ptrdiff_t)i + 1);  // most recent first
      return c[0].p.data();
    }
  constexpr size_t kCachedRows = 4;  // the selected query and the hovered one, of each panel that reads them
  if (c.size() < kCachedRows) c.emplace_back();
  std::rotate(c.rbegin(), c.rbegin() + 1, c.rend());  // the least recent, now first, is overwritten
  CachedRow& e = c[0];
  e.q = q;
  e.p.assign((size_t)T, 0.0f);
  norm_row(raw[side] + (size_t)q * T, norm[side][(size_t)q], softcap, q, e.p.data());
  return e.p.data();
}

float HeadRows::at(int side, int q, int k) const {
  if (q < 0 || q >= T || k < 0 || k >= T) return std::numeric_limits<float>::quiet_NaN();
  if (!p[side].empty()) return p[side][(size_t)q * T + k];
  if (norm[side].empty() || !raw[side]) return std::numeric_limits<float>::quiet_NaN();
  const RowNorm& nm = norm[side][(size_t)q];
  if (k < nm.first || k > q || !std::isfinite(nm.log_z)) return 0.0f;
  return norm_prob(raw[side] + (size_t)q * T, nm, softcap, k);
}

TexelMask texel_mask(const focal::ModelConfig* cfg, int layer, int qa, int qb, int ka, int kb) {
  const int q = std::max(qa, ka);  // the first query that sees a key of the texel causally
  if (q >= qb || ka >= kb) return kTexelCausal;
  return !cfg || focal::window_first_key(*cfg, layer, q + 1) < kb ? kTexelVisible : kTexelWindow;
}

void HeadRows::max_log_p_spans(int side, int q, const int* ka, const int* kb, int n, float* out) const {
  const RowNorm& nm = norm[side][(size_t)q];
  const float* rw = raw[side] + (size_t)q * T;
  const bool shows = std::isfinite(nm.log_z);
  const float log_z = (float)nm.log_z;
  for (int i = 0; i < n; ++i) {
    const int a = std::max(ka[i], nm.first), b = std::min(kb[i], q + 1);
    if (!shows || a >= b) {
      out[i] = -INFINITY;
      continue;
    }
    float m = rw[a];
    for (int k = a + 1; k < b; ++k) m = std::max(m, rw[k]);
    out[i] = focal::attention_logit(m, nm.mult, softcap) - log_z;
  }
}

float HeadRows::max_in(int side, int q, int ka, int kb) const {
  float lp;
  max_log_p_spans(side, q, &ka, &kb, 1, &lp);
  // fp32 here (a colour, not a number shown): the exponent's rounding moves p by ~1e-6 relative.
  return std::exp(lp);
}

float HeadRows::max_diff_in(int q, int ka, int kb) const {
  kb = std::min(kb, q + 1);
  const RowNorm& a = norm[0][(size_t)q];
  const RowNorm& b = norm[1][(size_t)q];
  const float* ra = raw[0] + (size_t)q * T;
  const float* rb = raw[1] + (size_t)q * T;
  const float za = (float)a.log_z, zb = (float)b.log_z;  // +inf: the row shows no key (exp gives 0)
  float best = 0.0f;
  for (int k = std::max(ka, 0); k < kb; ++k) {
    const float pa = k >= a.first ? std::exp(focal::attention_logit(ra[k], a.mult, softcap) - za) : 0.0f;
    const float pb = k >= b.first ? std::exp(focal::attention_logit(rb[k], b.mult, softcap) - zb) : 0.0f;
    if (std::fabs(pb - pa) > std::fabs(best)) best = pb - pa;
  }
  return best;
}

bool compute_head_norms(const RowSource& src, int layer, int head, std::vector<RowNorm>& N, std::vector<float>& M,
                        std::vector<float>* pooled2d /* [kHeatPoolLevels] */, const std::function<bool()>& cancelled) {
  const int T = src.T, b0 = kHeatPoolKeys[0], n0 = (T + b0 - 1) / b0;
  N.assign((size_t)T, RowNorm{});
  M.assign((size_t)T * kNumRowMetrics, std::numeric_limits<float>::quiet_NaN());
  int nb[kHeatPoolLevels];
  for (int i = 0; i < kHeatPoolLevels; ++i) nb[i] = (T + kHeatPoolKeys[i] - 1) / kHeatPoolKeys[i];
  pooled2d[0].assign((size_t)n0 * n0, 0.0f);
  for (int c0 = 0; c0 < n0; c0 += 32) {  // 256 rows at a time, so that a cancel is seen within them
    if (cancelled && cancelled()) return false;
    const int c1 = std::min(n0, c0 + 32);
#pragma omp parallel
    {
      std::vector<float> p((size_t)T);
#pragma omp for schedule(dynamic, 1)
      for (int qi = c0; qi < c1; ++qi) {  // the rows of one b0-row cell: no other thread writes its cells
        float* cell = pooled2d[0].data() + (size_t)qi * n0;
        for (int q = qi * b0; q < std::min(T, (qi + 1) * b0); ++q) {
          compute_head_row(src, layer, head, q, p.data(), &M[(size_t)q * kNumRowMetrics], &N[(size_t)q]);
          const int nj = q / b0 + 1;  // blocks with a visible key
          for (int j = 0; j < nj; ++j) {
            float m = 0.0f;
            for (int k = j * b0, e = std::min(q + 1, k + b0); k < e; ++k) m = std::max(m, p[(size_t)k]);
            cell[j] = std::max(cell[j], m);
          }
        }
      }
    }
  }
  for (int i = 1; i < kHeatPoolLevels; ++i) {  // coarser cells: the max of f x f finer ones (the blocks nest)
    const int f = kHeatPoolKeys[i] / kHeatPoolKeys[i - 1], n = nb[i], pn = nb[i - 1];
    pooled2d[i].assign((size_t)n * n, 0.0f);
    for (int a = 0; a < pn; ++a)
      for (int c = 0; c < pn; ++c) {
        float& o = pooled2d[i][(size_t)(a / f) * n + c / f];
        o = std::max(o, pooled2d[i - 1][(size_t)a * pn + c]);
      }
  }
  return true;
}

std::ptrdiff_t raw_rows_offset(const focal::RunCapture& r, int layer, int head, int T) {
  if (r.scores.empty() || T == 0) return -1;
  const std::ptrdiff_t o0 = focal::find_stored_row(r, layer, head, 0, T);
  const std::ptrdiff_t o1 = focal::find_stored_row(r, layer, head, T - 1, T);
  return o0 >= 0 && o1 == o0 + (std::ptrdiff_t)(T - 1) * T ? o0 : -1;
}

namespace {

// B - A's cells (HeadRows::diff2d): per kHeatPoolKeys[0]-square block of (query, key) the b - a of largest
// magnitude (signed), then each coarser level from the finer one. row(s, q, scratch) gives side s's row q (at least
// q + 1 values; scratch holds T floats it may fill). False when cancelled.
using SideRowFn = std::function<const float*(int side, int q, float* scratch)>;
bool diff_cells(int T, const SideRowFn& row, const std::function<bool()>& cancelled,
                std::array<std::vector<float>, kHeatPoolLevels>& cells) {
  const int b0 = kHeatPoolKeys[0], n0 = (T + b0 - 1) / b0;
  cells[0].assign((size_t)n0 * n0, 0.0f);
  for (int c0 = 0; c0 < n0; c0 += 32) {
    if (cancelled && cancelled()) return false;
    const int c1 = std::min(n0, c0 + 32);
#pragma omp parallel
    {
      std::vector<float> sa((size_t)T), sb((size_t)T);
#pragma omp for schedule(dynamic, 1)
      for (int qi = c0; qi < c1; ++qi) {  // one b0-row cell per thread
        float* cell = cells[0].data() + (size_t)qi * n0;
        for (int q = qi * b0; q < std::min(T, (qi + 1) * b0); ++q) {
          const float* pa = row(0, q, sa.data());
          const float* pb = row(1, q, sb.data());
          for (int k = 0; k <= q; ++k) {
            const float d = pb[k] - pa[k];
            float& c = cell[k / b0];
            if (std::fabs(d) > std::fabs(c)) c = d;
          }
        }
      }
    }
  }
  for (int i = 1; i < kHeatPoolLevels; ++i) {  // coarser cells: the signed max magnitude of f x f finer ones
    const int f = kHeatPoolKeys[i] / kHeatPoolKeys[i - 1], pn = (T + kHeatPoolKeys[i - 1] - 1) / kHeatPoolKeys[i - 1],
              n = (T + kHeatPoolKeys[i] - 1) / kHeatPoolKeys[i];
    cells[i].assign((size_t)n * n, 0.0f);
    for (int a = 0; a < pn; ++a)
      for (int c = 0; c < pn; ++c) {
        float& o = cells[i][(size_t)(a / f) * n + c / f];
        const float v = cells[i - 1][(size_t)a * pn + c];
        if (std::fabs(v) > std::fabs(o)) o = v;
      }
  }
  return true;
}

}  // namespace

void AppState::refresh_diff_cells() {
  HeadRows& h = rows_;
  const bool diff_shown = view.show == ViewRun::kDiff && compare && has_cfg_;
  // Always for rows on demand (a side past dense_rows_max_tokens); for held rows from dense_diff_cells_min_tokens on:
  // the zoomed-out heatmap would read every key of both sides per frame.
  const bool cells_needed =
      diff_shown && (!h.norm[0].empty() || !h.norm[1].empty() || h.T >= dense_diff_cells_min_tokens);
  // While a side's new rows are computed the cells wait for them (pending, so that no frame reads every key meanwhile).
  const bool rows_pending = h.pending[0] || h.pending[1];
  const bool wanted = cells_needed && !rows_pending && h.shown(0) && h.shown(1);
  const std::string key = wanted
                              ? std::to_string(h.gen[0]) + "|" + std::to_string(h.gen[1]) + "|" + std::to_string(h.T) +
                                    "|" + std::to_string(h.layer) + "|" + std::to_string(h.head)
                          : cells_needed && rows_pending ? "after the rows"
                                                         : "";
  if (key == diff_key_) return;
  diff_key_ = key;
  views.cancel("diff_cells");
  for (auto& c : h.diff2d) c.clear();
  h.diff_pending = wanted || (cells_needed && rows_pending);
  h.version++;
  if (!wanted) return;
  // The job's own references to what the cells come from: the held rows (shared: a side's replaced rows stay alive
  // until the job, cancelled by the change, returns), or the runs' stored scores (held, so the raw pointers stay
  // valid) and each row's normaliser.
  struct Src {
    std::shared_ptr<const std::vector<float>> p[2];
    std::shared_ptr<const focal::RunCapture> run[2];
    const float* raw[2];
    std::vector<RowNorm> norm[2];
    float softcap;
    int T;
  };
  auto src = std::make_shared<Src>();
  for (int s = 0; s < 2; ++s) {
    if (!h.p[s].empty()) {
      src->p[s] = h.p[s].share();
    } else {
      src->run[s] = h.raw_run[s];
      src->raw[s] = h.raw[s];
      src->norm[s] = h.norm[s];
    }
  }
  src->softcap = h.softcap;
  src->T = h.T;
  views.submit("diff_cells", "B - A cells of layer " + std::to_string(h.layer) + " head " + std::to_string(h.head),
               [this, src, key](JobContext& ctx) -> std::function<void()> {
                 const int T = src->T;
                 auto cells = std::make_shared<std::array<std::vector<float>, kHeatPoolLevels>>();
                 const SideRowFn row = [&src, T](int s, int q, float* scratch) {
                   if (src->p[s]) return src->p[s]->data() + (size_t)q * T;
                   norm_row(src->raw[s] + (size_t)q * T, src->norm[s][(size_t)q], src->softcap, q, scratch);
                   return (const float*)scratch;
                 };
                 if (!diff_cells(
                         T, row, [&ctx] { return ctx.cancelled(); }, *cells))
                   return {};
                 return [this, cells, key] {
                   if (diff_key_ != key) return;
                   for (int i = 0; i < kHeatPoolLevels; ++i) rows_.diff2d[i] = std::move((*cells)[i]);
                   rows_.diff_pending = false;
                   rows_.version++;
                 };
               });
}

}  // namespace focalscope
