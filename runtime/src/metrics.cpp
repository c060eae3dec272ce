// Row metrics, softmax re-tempering and divergences for callers outside the forward (thin layer over the kernels so
// the forward and the captures use one definition).
#include "focal/metrics.h"

#include "focal_kernels/shared_math.h"

#include <cmath>
#include <algorithm>
#include <limits>
#include <vector>

#include "focal_kernels/ops.h"

namespace focal {

// The public RowMetric (model.h, no kernel header) and the kernels' must agree value for value.
// NOLINTBEGIN(bugprone-macro-parentheses): `name` is an enumerator, pasted after ops::
#define FOCAL_SAME_METRIC(name) \
  static_assert((int)name == (int)ops::name, "runtime and kernel metric lists must agree: " #name)
FOCAL_SAME_METRIC(kEntropyNats);
FOCAL_SAME_METRIC(kEntropyNorm);
FOCAL_SAME_METRIC(kEffSupport);
FOCAL_SAME_METRIC(kMaxProb);
FOCAL_SAME_METRIC(kTopkMass);
FOCAL_SAME_METRIC(kTailMass);
FOCAL_SAME_METRIC(kSinkMass);
FOCAL_SAME_METRIC(kRelevantMass);
FOCAL_SAME_METRIC(kNumRowMetrics);
#undef FOCAL_SAME_METRIC
// NOLINTEND(bugprone-macro-parentheses)

const char* row_metric_name(int m) {
  static const char* kNames[kNumRowMetrics] = {"entropy_nats", "entropy_norm", "eff_support", "max_prob",
                                               "topk_mass",    "tail_mass",    "sink_mass",   "relevant_mass"};
  return (m >= 0 && m < kNumRowMetrics) ? kNames[m] : "unknown";
}

void row_metrics(const float* p, int n, int topk_k, const int32_t* relevant, int n_relevant, float* metrics) {
  ops::row_metrics(p, n, topk_k, relevant, n_relevant, metrics);
}

void softmax_scaled(const float* raw, int n, float scale, float* p, float* metrics, int topk_k, const int32_t* relevant,
                    int n_relevant) {
  std::vector<float> logits(n);
  for (int j = 0; j < n; ++j) logits[j] = raw[j] * scale;
  ops::softmax_row(logits.data(), p, n, metrics, topk_k, relevant, n_relevant);
}

void attention_row(const float* raw, int n, float scale, float softcap, int first_key, float* p, float* metrics,
                   int topk_k, const int32_t* relevant, int n_relevant) {
  ops::attention_row(raw, scale, softcap, first_key, p, n, metrics, topk_k, relevant, n_relevant);
}

float attention_logit(float raw, float scale, float softcap) { return math::attn_logit(raw, scale, softcap); }

int window_first_key(const ModelConfig& c, int layer, int n) {
  return math::window_first_key(n, layer_window(c, layer));
}

std::vector<std::vector<int>> induction_targets(const std::vector<int32_t>& ids) {
  const int T = (int)ids.size();
  std::vector<std::vector<int>> out(T);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j + 2 <= i; ++j)
      if (ids[j] == ids[i]) out[i].push_back(j + 1);
  return out;
}

float induction_mass(const float* p, const std::vector<int>& targets) {
  if (targets.empty()) return std::numeric_limits<float>::quiet_NaN();
  double s = 0.0;
  for (int k : targets) s += p[k];
  return (float)s;
}

double kl_divergence(const float* p, const float* q, int n, float q_floor) {
  double kl = 0.0;
  for (int j = 0; j < n; ++j) {
    if (p[j] <= 0.0f) continue;
    kl += (double)p[j] * (std::log((double)p[j]) - std::log((double)std::max(q[j], q_floor)));
  }
  return kl < 0.0 ? 0.0 : kl;
}

double js_divergence(const float* p, const float* q, int n) {
  double js = 0.0;
  for (int j = 0; j < n; ++j) {
    const double a = p[j], b = q[j], m = 0.5 * (a + b);
    if (a > 0.0) js += 0.5 * a * std::log(a / m);
    if (b > 0.0) js += 0.5 * b * std::log(b / m);
  }
  return js < 0.0 ? 0.0 : js;
}

}  // namespace focal
