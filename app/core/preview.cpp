// The app's derived views (AppState, app_state.h): attention rows of the selected head, previewed from stored raw
// scores under a changed spec or copied from the run; per-layer divergence of A and B; head metric means and prompt
// loss through the runtime's one definition (focal/capture.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>

#include "app_state.h"
#include "rows_on_demand.h"
#include "focal/capture.h"
#include "focal/metrics.h"
#include "selection.h"

namespace focalscope {

using focal::kNumRowMetrics;

namespace {
// Mass of key 0 in softmax(raw[n] * mult) (max-subtracted, double): the sink mass of the whole row, which the
// header still reports when the view hides the sink and renormalises the other keys.
float full_row_sink(const float* raw, int n, float mult) {
  double mx = -INFINITY, z = 0.0;
  for (int j = 0; j < n; ++j) mx = std::max(mx, (double)raw[j] * mult);
  for (int j = 0; j < n; ++j) z += std::exp((double)raw[j] * mult - mx);
  return (float)(std::exp((double)raw[0] * mult - mx) / z);
}
}  // namespace

namespace {
// The normaliser of a row computed from stored scores (p[first, n) its probabilities): log Z from the largest p, whose
// logit is known (p_max = exp(logit_max - log Z)), so that every other key's p follows alone.
void fill_norm(const float* raw, const float* p, int n, float mult, float cap, int first, RowNorm* norm) {
  norm->mult = mult;
  norm->first = first;
  norm->log_z = INFINITY;
  int best = -1;
  for (int j = first; j < n; ++j)
    if (best < 0 || p[j] > p[best]) best = j;
  if (best >= 0 && p[best] > 0.0f)
    norm->log_z = (double)focal::attention_logit(raw[best], mult, cap) - std::log((double)p[best]);
}
}  // namespace

bool compute_head_row(const RowSource& src, int layer, int head, int q, float* p, float* metrics, RowNorm* norm) {
  if (!src.run || !src.spec || !src.run_spec || !src.cfg) return false;
  const focal::ModelConfig& cfg = *src.cfg;
  const focal::TempSpec& spec = *src.spec;
  const focal::TempSpec& run_spec = *src.run_spec;
  const focal::RunCapture& r = *src.run;
  const int T = src.T;
  const bool hide_sink = src.hide_sink;
  const std::ptrdiff_t found = focal::find_stored_row(r, layer, head, q, T);
  if (found < 0) return false;
  const size_t off = (size_t)found;
  const int n = q + 1;
  std::fill(p, p + T, 0.0f);
  if (norm) *norm = RowNorm{NAN, 0.0f, 0};  // NaN: this row's probabilities do not follow from stored scores
  const bool exact = spec.first_changed_layer(run_spec, cfg) > layer;
  const int k = r.topk_mass_k;
  const int32_t* rel = src.relevant;
  const int n_rel = src.n_relevant;
  const int lo = focal::window_first_key(cfg, layer, n);
  const float cap = cfg.arch.attn_softcap;
  const size_t ri = ((size_t)layer * cfg.n_heads + head) * T + q;  // in row_scale and (x kNumRowMetrics) metrics
  if (!hide_sink && exact && !r.probs.empty()) {
    std::copy(r.probs.begin() + off, r.probs.begin() + off + n, p);
    const size_t moff = ri * kNumRowMetrics;
    if (r.metrics.size() >= moff + kNumRowMetrics) {
      std::copy(r.metrics.begin() + moff, r.metrics.begin() + moff + kNumRowMetrics, metrics);
    } else {
      focal::row_metrics(p, n, k, rel, n_rel, metrics);
    }
    if (norm && !r.scores.empty()) fill_norm(r.scores.data() + off, p, n, r.row_scale[ri], cap, lo, norm);
    return true;
  }
  if (!r.scores.empty()) {
    float mult;
    // The run's own multiplier when the spec is the run's, and when a learned tau is asked of a run that had none
    // (tau is unknown until propagated).
    const bool tau_unknown = spec.mode == focal::AttnMode::kLearned && run_spec.mode != focal::AttnMode::kLearned &&
                             spec.head_temp.count({layer, head}) == 0 && spec.layer_temp.count(layer) == 0;
    if (exact || tau_unknown) {
      mult = r.row_scale[ri];
    } else {
      const float tau_clipped = r.tau.empty() ? 1.0f : r.tau[(size_t)layer * T + q] / run_spec.tau_scale;
      mult = spec.row_multiplier(cfg, layer, head, n, tau_clipped);
    }
    const float* raw = r.scores.data() + off;
    const int first = hide_sink ? std::max(lo, 1) : lo;  // p is 0 before it
    // Soft-capped or windowed architectures (Gemma 2, Mistral): the forward's own row function, so the cap comes after
    // the temperature and keys outside the window stay at 0.
    if (cap > 0.0f || lo > 0) {
      if (first >= n) {
        std::fill(metrics, metrics + kNumRowMetrics, std::numeric_limits<float>::quiet_NaN());
      } else if (hide_sink) {
        focal::attention_row(raw + first, n - first, mult, cap, 0, p + first, metrics, k);
      } else {
        focal::attention_row(raw, n, mult, cap, lo, p, metrics, k, rel, n_rel);
      }
    } else if (hide_sink) {
      if (n > 1)
        focal::softmax_scaled(raw + 1, n - 1, mult, p + 1, metrics, k);
      else
        std::fill(metrics, metrics + kNumRowMetrics, std::numeric_limits<float>::quiet_NaN());
      metrics[focal::kSinkMass] = full_row_sink(raw, n, mult);  // what was hidden, not the renormalised key 1
    } else {
      focal::softmax_scaled(raw, n, mult, p, metrics, k, rel, n_rel);
    }
    if (norm) fill_norm(raw, p, n, mult, cap, first, norm);
    return true;
  }
  if (!r.probs.empty()) {  // probabilities only: no re-tempering possible
    std::copy(r.probs.begin() + off, r.probs.begin() + off + n, p);
    if (hide_sink) {
      const float sink = p[0];
      p[0] = 0.0f;
      double z = 0.0;
      for (int j = 1; j < n; ++j) z += p[j];
      for (int j = 1; j < n; ++j) p[j] = z > 0 ? (float)(p[j] / z) : 0.0f;
      if (n > 1) focal::row_metrics(p + 1, n - 1, k, nullptr, 0, metrics);
      metrics[focal::kSinkMass] = sink;
    } else {
      focal::row_metrics(p, n, k, rel, n_rel, metrics);
    }
    return true;
  }
  return false;
}

RowSource AppState::row_source(int side, bool propagated) const {
  const Slot& s = slots[side];
  RowSource src;
  src.run = s.run.get();
  src.spec = propagated ? &s.run_spec : &s.spec;
  src.run_spec = &s.run_spec;
  src.cfg = has_cfg_ ? &cfg_ : nullptr;
  src.relevant = file.relevant.empty() ? nullptr : file.relevant.data();
  src.n_relevant = (int)file.relevant.size();
  src.hide_sink = view.hide_sink;
  src.T = n_tokens();
  return src;
}

bool AppState::compute_row(int side, int layer, int head, int q, float* p, float* metrics, bool propagated) const {
  return compute_head_row(row_source(side, propagated), layer, head, q, p, metrics);
}

float AppState::raw_score(int q, int k) const {
  const int T = n_tokens();
  if (!slots[0].run || slots[0].run->scores.empty() || q < 0 || q >= T || k < 0 || k > q)
    return std::numeric_limits<float>::quiet_NaN();
  const std::ptrdiff_t off = focal::find_stored_row(*slots[0].run, sel_layer, sel_head, q, T);
  return off < 0 ? std::numeric_limits<float>::quiet_NaN() : slots[0].run->scores[(size_t)off + k];
}

const HeadRows& AppState::head_rows() {
  if (rows_version_ != state_version) refresh_head_rows();
  refresh_diff_cells();
  return rows_;
}

namespace {

// A RowSource's inputs owned by a view job (copied on the UI thread when it is submitted).
struct OwnedRowSource {
  std::shared_ptr<const focal::RunCapture> run;
  focal::TempSpec spec, run_spec;
  std::shared_ptr<const focal::ModelConfig> cfg;
  std::vector<int32_t> relevant;
  bool hide_sink = false;
  int T = 0;
  RowSource view() const {
    RowSource src;
    src.run = run.get();
    src.spec = &spec;
    src.run_spec = &run_spec;
    src.cfg = cfg.get();
    src.relevant = relevant.empty() ? nullptr : relevant.data();
    src.n_relevant = (int)relevant.size();
    src.hide_sink = hide_sink;
    src.T = T;
    return src;
  }
};

// Every row of (layer, head): p [T, T], metrics [T, kNumRowMetrics]; false when cancelled.
bool compute_head_rows(const RowSource& src, int layer, int head, std::vector<float>& P, std::vector<float>& M,
                       const std::function<bool()>& cancelled) {
  const int T = src.T;
  P.assign((size_t)T * T, 0.0f);
  M.assign((size_t)T * kNumRowMetrics, std::numeric_limits<float>::quiet_NaN());
  for (int q0 = 0; q0 < T; q0 += 256) {  // blocks of rows, so that a cancel is seen within one
    if (cancelled && cancelled()) return false;
    const int q1 = std::min(T, q0 + 256);
#pragma omp parallel for schedule(dynamic, 16)
    for (int q = q0; q < q1; ++q)
      compute_head_row(src, layer, head, q, &P[(size_t)q * T], &M[(size_t)q * kNumRowMetrics]);
  }
  return true;
}

// Rows of P [T, T] max-pooled over blocks of kHeatPoolKeys keys: out[i] is [T, ceil(T / b_i)], each level from the
// one before (the blocks nest).
void pool_rows(const std::vector<float>& P, int T, std::vector<float>* out /* [kHeatPoolLevels] */,
               std::vector<float>* out2d /* [kHeatPoolLevels] */) {
  int prev_b = 1, prev_n = T;
  const float* prev = P.data();
  for (int i = 0; i < kHeatPoolLevels; ++i) {
    const int b = kHeatPoolKeys[i], n = (T + b - 1) / b, f = b / prev_b;
    out[i].assign((size_t)T * n, 0.0f);
    float* o = out[i].data();
#pragma omp parallel for schedule(static)
    for (int q = 0; q < T; ++q)
      for (int j = 0; j < n; ++j) {
        const int a = j * f, e = std::min(prev_n, a + f);
        float m = 0.0f;
        for (int c = a; c < e; ++c) m = std::max(m, prev[(size_t)q * prev_n + c]);
        o[(size_t)q * n + j] = m;
      }
    out2d[i].assign((size_t)n * n, 0.0f);
    float* o2 = out2d[i].data();
#pragma omp parallel for schedule(static)
    for (int qi = 0; qi < n; ++qi)
      for (int q = qi * b; q < std::min(T, (qi + 1) * b); ++q)
        for (int j = 0; j < n; ++j) o2[(size_t)qi * n + j] = std::max(o2[(size_t)qi * n + j], o[(size_t)q * n + j]);
    prev = out[i].data();
    prev_b = b;
    prev_n = n;
  }
}

}  // namespace

void AppState::refresh_head_rows() {
  rows_version_ = state_version;
  HeadRows& h = rows_;
  const int T = n_tokens();
  const bool async = T > sync_rows_max_tokens;
  // Rows of other tokens or another head cannot stand in while new ones are computed.
  const bool same_place = h.T == T && h.layer == sel_layer && h.head == sel_head;
  h.layer = sel_layer;
  h.head = sel_head;
  h.T = T;
  h.softcap = has_cfg_ ? cfg_.arch.attn_softcap : 0.0f;
  bool changed = false;
  for (int side = 0; side < 2; ++side) {
    const Slot& s = slots[side];
    // Recompute a side only when what it shows changed (dragging A's slider leaves B alone).
    const std::string key = std::to_string(T) + "|" + std::to_string(sel_layer) + "|" + std::to_string(sel_head) + "|" +
                            std::to_string(s.version) + "|" + (s.run ? s.spec.to_json() : "") + "|" +
                            std::to_string(view.hide_sink) + "|" + std::to_string(side == 1 && !compare) + "|" +
                            std::to_string((uintptr_t)s.run.get()) + "|" + std::to_string(dense_rows_max_tokens);
    if (key == rows_key_[side]) continue;
    rows_key_[side] = key;
    changed = true;
    const bool shown = !(side == 1 && !compare) && s.run && has_cfg_ && T > 0 &&
                       index_of(s.run->layers, sel_layer) >= 0 && index_of(s.run->heads, sel_head) >= 0 &&
                       (!s.run->probs.empty() || !s.run->scores.empty());  // a metrics-only capture: nothing to show
    const char* job_key = side == 0 ? "rows_a" : "rows_b";
    // Past dense_rows_max_tokens, rows on demand from the stored scores (a run without them keeps dense rows).
    const std::ptrdiff_t raw_off =
        shown && T > dense_rows_max_tokens ? raw_rows_offset(*s.run, sel_layer, sel_head, T) : -1;
    const bool on_demand = raw_off >= 0;
    const bool exact = shown && s.spec.first_changed_layer(s.run_spec, cfg_) > sel_layer;
    const std::string label = s.spec.label();
    // What a finished computation puts in the side: dense rows P, or (on demand) normalisers Nm over the run's scores.
    auto apply = [this, side, exact, label, run = s.run, raw_off](std::vector<float>& P, std::vector<float>& M,
                                                                  std::vector<RowNorm>& Nm, std::vector<float>* pooled,
                                                                  std::vector<float>* pooled2d) {
      HeadRows& r = rows_;
      r.p[side] = std::move(P);
      r.metrics[side] = std::move(M);
      r.norm[side] = std::move(Nm);
      r.raw_run[side] = r.norm[side].empty() ? nullptr : run;
      r.raw[side] = r.norm[side].empty() ? nullptr : run->scores.data() + raw_off;
      r.drop_cache(side);
      r.gen[side]++;
      r.exact[side] = exact;
      r.preview[side] = !exact;
      r.label[side] = label;
      for (int i = 0; i < kHeatPoolLevels; ++i) {
        r.pooled[side][i] = std::move(pooled[i]);
        r.pooled2d[side][i] = std::move(pooled2d[i]);
      }
      r.pending[side] = false;
    };
    if (!async || !shown) {
      views.cancel(job_key);
      h.clear_side(side);
      if (!shown) continue;
      std::vector<float> P, M, pooled[kHeatPoolLevels], pooled2d[kHeatPoolLevels];
      std::vector<RowNorm> Nm;
      if (on_demand)
        compute_head_norms(row_source(side, false), sel_layer, sel_head, Nm, M, pooled2d, nullptr);
      else
        compute_head_rows(row_source(side, false), sel_layer, sel_head, P, M, nullptr);
      apply(P, M, Nm, pooled, pooled2d);
      continue;
    }
    // Long prompt: on the view worker. The rows shown until then are of the same place under label[side], or none.
    if (!same_place) h.clear_side(side);
    h.pending[side] = true;
    auto src = std::make_shared<OwnedRowSource>();
    src->run = s.run;
    src->spec = s.spec;
    src->run_spec = s.run_spec;
    src->cfg = std::make_shared<const focal::ModelConfig>(cfg_);
    src->relevant = file.relevant;
    src->hide_sink = view.hide_sink;
    src->T = T;
    const int layer = sel_layer, head = sel_head;
    views.submit(job_key,
                 std::string(side == 0 ? "A" : "B") + ": rows of layer " + std::to_string(layer) + " head " +
                     std::to_string(head),
                 [this, side, key, src, layer, head, on_demand, apply](JobContext& ctx) -> std::function<void()> {
                   struct Out {
                     std::vector<float> P, M, pooled[kHeatPoolLevels], pooled2d[kHeatPoolLevels];
                     std::vector<RowNorm> Nm;
                   };
                   auto o = std::make_shared<Out>();
                   const auto cancelled = [&ctx] { return ctx.cancelled(); };
                   if (on_demand) {
                     if (!compute_head_norms(src->view(), layer, head, o->Nm, o->M, o->pooled2d, cancelled)) return {};
                   } else {
                     if (!compute_head_rows(src->view(), layer, head, o->P, o->M, cancelled)) return {};
                     pool_rows(o->P, src->T, o->pooled, o->pooled2d);
                   }
                   return [this, side, key, o, apply] {
                     if (rows_key_[side] != key) return;  // superseded
                     apply(o->P, o->M, o->Nm, o->pooled, o->pooled2d);
                     rows_.version++;
                   };
                 });
  }
  if (changed) h.version++;
}

namespace {

// Mean KL(A || B) and JS(A, B) over rows 1..T-1 of every head of a layer between two propagated runs (NaN for a head
// either run does not hold); false when cancelled.
bool layer_divergence_of(const RowSource& a, const RowSource& b, int layer, int n_heads, std::vector<float>& kl_out,
                         std::vector<float>& js_out, const std::function<bool()>& cancelled) {
  const int T = a.T;
  kl_out.assign(n_heads, std::numeric_limits<float>::quiet_NaN());
  js_out.assign(n_heads, std::numeric_limits<float>::quiet_NaN());
  for (int h = 0; h < n_heads; ++h) {
    if (cancelled && cancelled()) return false;
    double kl = 0.0, js = 0.0;
    int n = 0;
#pragma omp parallel reduction(+ : kl, js, n)
    {
      std::vector<float> pa(T), pb(T), m(kNumRowMetrics);
#pragma omp for schedule(dynamic, 16)
      for (int q = 1; q < T; ++q) {
        if (!compute_head_row(a, layer, h, q, pa.data(), m.data()) ||
            !compute_head_row(b, layer, h, q, pb.data(), m.data()))
          continue;
        kl += focal::kl_divergence(pa.data(), pb.data(), q + 1);
        js += focal::js_divergence(pa.data(), pb.data(), q + 1);
        ++n;
      }
    }
    if (n) {
      kl_out[h] = (float)(kl / n);
      js_out[h] = (float)(js / n);
    }
  }
  return true;
}

}  // namespace

void AppState::stored_divergence() {
  // A capture opened without its model whose rows were not stored (metrics only) holds the runs' KL / JS per row:
  // the heads the rows could not give take their means over rows 1..T-1 from it (full rows: not with the sink hidden).
  if (!capture_only() || view.hide_sink || !slots[0].run || !slots[1].run) return;
  const int T = n_tokens();
  for (const focal::Comparison& cmp : stored_comparisons_) {
    if (cmp.run_a != slots[0].run->name || cmp.run_b != slots[1].run->name) continue;
    const int li = index_of(cmp.layers, sel_layer), Hc = (int)cmp.heads.size(), Qc = (int)cmp.queries.size();
    if (li < 0 || cmp.kl.size() != (size_t)cmp.layers.size() * Hc * Qc || cmp.js.size() != cmp.kl.size()) return;
    std::vector<int> qi(T, -1);  // row q's index in the comparison's queries
    for (int k = 0; k < Qc; ++k)
      if (cmp.queries[k] >= 0 && cmp.queries[k] < T) qi[cmp.queries[k]] = k;
    for (int q = 1; q < T; ++q)
      if (qi[q] < 0) return;  // not every row: no mean over rows 1..T-1
    for (int hc = 0; hc < Hc; ++hc) {
      const int h = cmp.heads[hc];
      if (h < 0 || h >= (int)div_.kl.size() || !std::isnan(div_.kl[h])) continue;
      double kl = 0.0, js = 0.0;
      for (int q = 1; q < T; ++q) {
        const size_t at = ((size_t)li * Hc + hc) * Qc + qi[q];
        kl += cmp.kl[at];
        js += cmp.js[at];
      }
      div_.kl[h] = T > 1 ? (float)(kl / (T - 1)) : NAN;
      div_.js[h] = T > 1 ? (float)(js / (T - 1)) : NAN;
    }
    return;
  }
}

const LayerDivergence& AppState::layer_divergence() {
  const std::string key = std::to_string(slots[0].version) + "|" + std::to_string(slots[1].version) + "|" +
                          std::to_string(sel_layer) + "|" + std::to_string(compare) + "|" +
                          std::to_string(view.hide_sink) + "|" + std::to_string((uintptr_t)slots[0].run.get()) + "|" +
                          std::to_string((uintptr_t)slots[1].run.get());
  if (div_.key == key) return div_;
  div_.key = key;
  div_.layer = sel_layer;
  div_.kl.clear();
  div_.js.clear();
  div_.pending = false;
  views.cancel("divergence");
  if (!has_cfg_ || !compare || !slots[0].run || !slots[1].run) return div_;
  const int T = n_tokens(), H = cfg_.n_heads;
  if (T <= sync_rows_max_tokens) {
    layer_divergence_of(row_source(0, true), row_source(1, true), sel_layer, H, div_.kl, div_.js, nullptr);
    stored_divergence();
    return div_;
  }
  div_.pending = true;
  auto a = std::make_shared<OwnedRowSource>(), b = std::make_shared<OwnedRowSource>();
  const auto cfg = std::make_shared<const focal::ModelConfig>(cfg_);
  for (int side = 0; side < 2; ++side) {
    OwnedRowSource& o = side == 0 ? *a : *b;
    o.run = slots[side].run;
    o.spec = o.run_spec = slots[side].run_spec;  // the propagated runs
    o.cfg = cfg;
    o.relevant = file.relevant;
    o.hide_sink = view.hide_sink;
    o.T = T;
  }
  const int layer = sel_layer;
  views.submit("divergence", "A / B divergence of layer " + std::to_string(layer),
               [this, a, b, layer, H, key](JobContext& ctx) -> std::function<void()> {
                 auto kl = std::make_shared<std::vector<float>>(), js = std::make_shared<std::vector<float>>();
                 if (!layer_divergence_of(a->view(), b->view(), layer, H, *kl, *js, [&ctx] { return ctx.cancelled(); }))
                   return {};
                 return [this, kl, js, key] {
                   if (div_.key != key) return;
                   div_.kl = std::move(*kl);
                   div_.js = std::move(*js);
                   div_.pending = false;
                   stored_divergence();
                 };
               });
  return div_;
}

const char* head_metric_name(int m) { return m == kInductionScore ? "induction" : focal::row_metric_name(m); }

float AppState::head_metric(int side, int layer, int head, int metric) const {
  const Slot& s = slots[side];
  const int T = n_tokens();
  if (metric == kInductionScore)
    return s.run && has_cfg_ ? (float)focal::head_induction_score(*s.run, cfg_.n_heads, T, layer, head)
                             : std::numeric_limits<float>::quiet_NaN();
  if (!s.run || !has_cfg_ || T == 0 ||
      s.run->metrics.size() < (size_t)cfg_.n_layers * cfg_.n_heads * T * kNumRowMetrics)
    return std::numeric_limits<float>::quiet_NaN();
  // Every head's mean of this metric, once per run (the overview and the table ask each frame: at 16K tokens the
  // means of 270 heads read 4.4M values).
  HeadMeans& c = head_means_[side];
  if (c.run != s.run.get() || c.version != s.version || c.T != T) {
    c = HeadMeans{};
    c.run = s.run.get();
    c.version = s.version;
    c.T = T;
  }
  std::vector<float>& v = c.means[metric];
  if (v.empty()) {
    const int L = cfg_.n_layers, H = cfg_.n_heads;
    v.resize((size_t)L * H);
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) v[(size_t)l * H + h] = (float)focal::head_metric_mean(*s.run, H, T, l, h, metric);
  }
  return v[(size_t)layer * cfg_.n_heads + head];
}

float AppState::prompt_loss(int side) const {
  const Slot& s = slots[side];
  if (!s.run) return std::numeric_limits<float>::quiet_NaN();
  return (float)focal::prompt_loss(*s.run, file.prompt_end());
}

float AppState::generated_loss(int side) const {
  const Slot& s = slots[side];
  if (!s.run || !file.has_generated()) return std::numeric_limits<float>::quiet_NaN();
  return (float)focal::generated_loss(*s.run, file.prompt_end());
}

}  // namespace focalscope
