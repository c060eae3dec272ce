// The app's derived views (AppState, app_state.h): attention rows of the selected head, previewed from stored raw
// scores under a changed spec or copied from the run; per-layer divergence of A and B; head metric means and prompt
// loss through the runtime's one definition (focal/capture.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "app_state.h"
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

bool AppState::compute_row(int side, int layer, int head, int q, float* p, float* metrics, bool propagated) const {
  Slot s_view = slots[side];  // shallow: shared_ptrs and specs
  if (propagated) s_view.spec = s_view.run_spec;
  const Slot& s = s_view;
  if (!s.run || !has_cfg_) return false;
  const focal::RunCapture& r = *s.run;
  const int T = n_tokens();
  const std::ptrdiff_t found = focal::find_stored_row(r, layer, head, q, T);
  if (found < 0) return false;
  const size_t off = (size_t)found;
  const int n = q + 1;
  std::fill(p, p + T, 0.0f);
  const bool exact = s.spec.first_changed_layer(s.run_spec, cfg_) > layer;
  const int k = r.topk_mass_k;
  const int32_t* rel = file.relevant.empty() ? nullptr : file.relevant.data();
  const int n_rel = (int)file.relevant.size();
  if (!view.hide_sink && exact && !r.probs.empty()) {
    std::copy(r.probs.begin() + off, r.probs.begin() + off + n, p);
    const size_t moff = (((size_t)layer * cfg_.n_heads + head) * T + q) * kNumRowMetrics;
    if (r.metrics.size() >= moff + kNumRowMetrics) {
      std::copy(r.metrics.begin() + moff, r.metrics.begin() + moff + kNumRowMetrics, metrics);
    } else {
      focal::row_metrics(p, n, k, rel, n_rel, metrics);
    }
    return true;
  }
  if (!r.scores.empty()) {
    float mult;
    // The run's own multiplier when the spec is the run's, and when a learned tau is asked of a run that had none
    // (tau is unknown until propagated).
    const bool tau_unknown = s.spec.mode == focal::AttnMode::kLearned && s.run_spec.mode != focal::AttnMode::kLearned &&
                             s.spec.head_temp.count({layer, head}) == 0 && s.spec.layer_temp.count(layer) == 0;
    if (exact || tau_unknown) {
      mult = r.row_scale[((size_t)layer * cfg_.n_heads + head) * T + q];
    } else {
      const float tau_clipped = r.tau.empty() ? 1.0f : r.tau[(size_t)layer * T + q] / s.run_spec.tau_scale;
      mult = s.spec.row_multiplier(cfg_, layer, head, n, tau_clipped);
    }
    const float* raw = r.scores.data() + off;
    // Soft-capped or windowed architectures (Gemma 2, Mistral): the forward's own row function, so the cap comes after
    // the temperature and keys outside the window stay at 0.
    const int lo = focal::window_first_key(cfg_, layer, n);
    const float cap = cfg_.arch.attn_softcap;
    if (cap > 0.0f || lo > 0) {
      const int first = view.hide_sink ? std::max(lo, 1) : lo;
      if (first >= n) {
        std::fill(metrics, metrics + kNumRowMetrics, std::numeric_limits<float>::quiet_NaN());
      } else if (view.hide_sink) {
        focal::attention_row(raw + first, n - first, mult, cap, 0, p + first, metrics, k);
      } else {
        focal::attention_row(raw, n, mult, cap, lo, p, metrics, k, rel, n_rel);
      }
      return true;
    }
    if (view.hide_sink) {
      if (n > 1)
        focal::softmax_scaled(raw + 1, n - 1, mult, p + 1, metrics, k);
      else
        std::fill(metrics, metrics + kNumRowMetrics, std::numeric_limits<float>::quiet_NaN());
      metrics[focal::kSinkMass] = full_row_sink(raw, n, mult);  // what was hidden, not the renormalised key 1
    } else {
      focal::softmax_scaled(raw, n, mult, p, metrics, k, rel, n_rel);
    }
    return true;
  }
  if (!r.probs.empty()) {  // probabilities only: no re-tempering possible
    std::copy(r.probs.begin() + off, r.probs.begin() + off + n, p);
    if (view.hide_sink) {
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

const HeadRows& AppState::head_rows() {
  if (rows_version_ != state_version) refresh_head_rows();
  return rows_;
}

void AppState::refresh_head_rows() {
  rows_version_ = state_version;
  HeadRows& h = rows_;
  const int T = n_tokens();
  h.layer = sel_layer;
  h.head = sel_head;
  h.T = T;
  bool changed = false;
  for (int side = 0; side < 2; ++side) {
    const Slot& s = slots[side];
    // Recompute a side only when what it shows changed (dragging A's slider leaves B alone).
    const std::string key = std::to_string(T) + "|" + std::to_string(sel_layer) + "|" + std::to_string(sel_head) + "|" +
                            std::to_string(s.version) + "|" + (s.run ? s.spec.to_json() : "") + "|" +
                            std::to_string(view.hide_sink) + "|" + std::to_string(side == 1 && !compare) + "|" +
                            std::to_string((uintptr_t)s.run.get());
    if (key == rows_key_[side]) continue;
    rows_key_[side] = key;
    changed = true;
    h.p[side].clear();
    h.metrics[side].clear();
    h.preview[side] = h.exact[side] = false;
    if (side == 1 && !compare) continue;
    if (!s.run || !has_cfg_ || T == 0) continue;
    if (index_of(s.run->layers, sel_layer) < 0 || index_of(s.run->heads, sel_head) < 0) continue;
    h.exact[side] = s.spec.first_changed_layer(s.run_spec, cfg_) > sel_layer;
    h.preview[side] = !h.exact[side];
    h.p[side].assign((size_t)T * T, 0.0f);
    h.metrics[side].assign((size_t)T * kNumRowMetrics, std::numeric_limits<float>::quiet_NaN());
    std::vector<float>& P = h.p[side];
    std::vector<float>& M = h.metrics[side];
#pragma omp parallel for schedule(dynamic, 32)
    for (int q = 0; q < T; ++q)
      compute_row(side, sel_layer, sel_head, q, &P[(size_t)q * T], &M[(size_t)q * kNumRowMetrics]);
  }
  if (changed) h.version++;
  const std::string raw_key = rows_key_[0];
  if (raw_key == raw_key_) return;
  raw_key_ = raw_key;
  h.raw.clear();
  if (slots[0].run && !slots[0].run->scores.empty()) {
    const auto& r = *slots[0].run;
    const int li = index_of(r.layers, sel_layer), hi = index_of(r.heads, sel_head);
    if (li >= 0 && hi >= 0) {
      h.raw.assign((size_t)T * T, 0.0f);
      for (size_t qi = 0; qi < r.queries.size(); ++qi) {
        const size_t off = focal::stored_row_offset(r, (size_t)li, (size_t)hi, qi, T);
        std::copy(r.scores.begin() + off, r.scores.begin() + off + T, h.raw.begin() + (size_t)r.queries[qi] * T);
      }
    }
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
  if (!has_cfg_ || !compare || !slots[0].run || !slots[1].run) return div_;
  const int T = n_tokens(), H = cfg_.n_heads;
  div_.kl.assign(H, std::numeric_limits<float>::quiet_NaN());
  div_.js.assign(H, std::numeric_limits<float>::quiet_NaN());
#pragma omp parallel for schedule(dynamic, 1)
  for (int h = 0; h < H; ++h) {
    std::vector<float> pa(T), pb(T), m(kNumRowMetrics);
    double kl = 0.0, js = 0.0;
    int n = 0;
    for (int q = 1; q < T; ++q) {
      if (!compute_row(0, sel_layer, h, q, pa.data(), m.data(), true) ||
          !compute_row(1, sel_layer, h, q, pb.data(), m.data(), true))
        continue;
      kl += focal::kl_divergence(pa.data(), pb.data(), q + 1);
      js += focal::js_divergence(pa.data(), pb.data(), q + 1);
      ++n;
    }
    if (n) {
      div_.kl[h] = (float)(kl / n);
      div_.js[h] = (float)(js / n);
    }
  }
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
  return (float)focal::head_metric_mean(*s.run, cfg_.n_heads, T, layer, head, metric);
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
