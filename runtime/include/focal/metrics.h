// Attention metrics on single rows, for callers that hold probabilities or raw scores (captures, the app's
// temperature preview, figures). The forward computes the same metrics for every row in its own pass.
// Definitions: docs/metrics.md.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "focal/model.h"

namespace focal {

// metrics[kNumRowMetrics] of the probability row p[n] (n visible keys).
void row_metrics(const float* p, int n, int topk_k, const int32_t* relevant, int n_relevant, float* metrics);

// p[n] = softmax(raw[n] * scale) (max-subtracted, fp32), and metrics[kNumRowMetrics] when not null.
// This is how a stored raw-score row is re-tempered without the model.
void softmax_scaled(const float* raw, int n, float scale, float* p, float* metrics = nullptr, int topk_k = 5,
                    const int32_t* relevant = nullptr, int n_relevant = 0);

// The model's attention row from stored raw logits raw[n] under multiplier `scale`, for architectures with an
// attention soft-cap (cap * tanh(raw * scale / cap); 0: none) or a sliding window (keys before first_key get 0).
// Same function as the forward's, so preview of a changed layer equals its propagation. Metrics over visible keys.
void attention_row(const float* raw, int n, float scale, float softcap, int first_key, float* p,
                   float* metrics = nullptr, int topk_k = 5, const int32_t* relevant = nullptr, int n_relevant = 0);

// The logit one key of such a row takes: raw * scale, then the soft-cap when there is one (the forward's function), so
// that p_k = exp(attention_logit(raw_k) - log Z) of a row whose normaliser is known needs no other key.
float attention_logit(float raw, float scale, float softcap);

// First key a row with n causal keys sees in layer `layer` of the model (its sliding window; 0 without one).
int window_first_key(const ModelConfig& c, int layer, int n);
// Induction score (docs/metrics.md): row i's attention mass on the keys right after the earlier occurrences of its
// own token, i.e. on { j + 1 : 0 <= j <= i - 2, ids[j] == ids[i] }. induction_targets lists those keys for every
// row of ids[T] (ascending; empty when the token has not occurred before position i - 1).
std::vector<std::vector<int>> induction_targets(const std::vector<int32_t>& ids);
// Sum of p over the targets of one row (NaN when there are none).
float induction_mass(const float* p, const std::vector<int>& targets);

// KL(p || q) and Jensen-Shannon divergence in nats over n entries of two softmax rows. Terms with p_j = 0 contribute
// 0. A softmax probability is never 0: q_j below q_floor is one its storage could not hold (fp32: FLT_MIN, where a
// flush-to-zero device rounds to 0; fp16-stored rows: 2^-25, kFp16ProbFloor), and its term is taken at q_j = q_floor,
// so the KL is a lower bound there (a sharper run's tail keys underflow where the standard run's are ~1e-16: the KL
// read +inf over a 22-token prompt). JS stays within [0, ln 2].
inline constexpr float kFp16ProbFloor = 2.98023224e-8f;  // 2^-25: below it a probability rounds to 0 in fp16
double kl_divergence(const float* p, const float* q, int n, float q_floor = std::numeric_limits<float>::min());
double js_divergence(const float* p, const float* q, int n);

// noise = 1 - R and SNR = R / (1 - R) from the relevant mass R (inf when R == 1, NaN when R is NaN).
inline float noise_mass(float relevant_mass) { return 1.0f - relevant_mass; }
inline float relevant_snr(float relevant_mass) { return relevant_mass / (1.0f - relevant_mass); }

}  // namespace focal
