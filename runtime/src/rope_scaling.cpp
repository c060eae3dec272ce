// Rotary frequencies under rope_scaling (linear, dynamic NTK, yarn, longrope / su, llama3), following transformers
// 4.47.1's formulas and its float32 / float64 split: what it computes on torch float32 tensors is computed in float
// here, what it computes with Python floats in double. The factor returned in cs_scale multiplies cos and sin (so a
// yarn / longrope attention factor f scales every attention logit by f^2).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "focal/config.h"
#include "focal/error.h"
#include "focal_kernels/shared_math.h"

namespace focal {

namespace {

// 1 / base^(2i / dim) for i < dim / 2, in float (torch: base ** (arange(0, dim, 2).float() / dim)).
std::vector<float> default_inv_freq(float base, int dim) {
  std::vector<float> f(dim / 2);
  for (int i = 0; i < dim / 2; ++i) f[i] = math::rope_inv_freq(base, i, dim);
  return f;
}

}  // namespace

std::vector<float> rope_inv_freq(const ModelConfig& c, int seq_len, float* cs_scale) {
  const RopeScaling& r = c.arch.rope;
  const int dim = c.d_head, half = dim / 2;
  const float theta = c.rope_theta;
  *cs_scale = 1.0f;
  switch (r.type) {
    case RopeType::kDefault: return default_inv_freq(theta, dim);
    case RopeType::kLinear: {
      std::vector<float> f = default_inv_freq(theta, dim);
      for (float& x : f) x /= r.factor;
      return f;
    }
    case RopeType::kDynamic: {
      // Recomputed for the call's length once it passes max_position_embeddings (HF _dynamic_frequency_update).
      if (seq_len <= c.max_positions) return default_inv_freq(theta, dim);
      float b = r.factor * (float)seq_len;
      b = b / (float)c.max_positions;
      b = b - (r.factor - 1.0f);
      b = powf(b, (float)((double)dim / (double)(dim - 2)));
      return default_inv_freq(theta * b, dim);
    }
    case RopeType::kYarn: {
      const double base = theta, factor = r.factor, max_pos = c.max_positions;
      auto correction_dim = [&](double rot) {
        return dim * std::log(max_pos / (rot * 2 * M_PI)) / (2 * std::log(base));
      };
      double low = std::floor(correction_dim(r.beta_fast)), high = std::ceil(correction_dim(r.beta_slow));
      low = std::max(low, 0.0);
      high = std::min(high, (double)(dim - 1));
      if (low == high) high += 0.001;
      std::vector<float> f(half);
      for (int i = 0; i < half; ++i) {
        const float pos_freq = powf(theta, (float)(2 * i) / (float)dim);
        const float extrap = 1.0f / pos_freq, interp = 1.0f / ((float)factor * pos_freq);
        const float ramp = math::clampf(((float)i - (float)low) / (float)(high - low), 0.0f, 1.0f);
        const float extrap_factor = 1.0f - ramp;
        f[i] = interp * (1.0f - extrap_factor) + extrap * extrap_factor;
      }
      *cs_scale = r.attention_factor > 0.0f ? r.attention_factor : (float)(0.1 * std::log(factor) + 1.0);
      return f;
    }
    case RopeType::kLongrope: {
      // Phi-3 (Phi3LongRoPEScaledRotaryEmbedding): the long factors once the call's length passes the original
      // context; the attention factor from max_position_embeddings / original_max_position_embeddings. Without an
      // original context (generic longrope with rope_scaling.factor), the long factors always apply.
      const int orig = r.original_max_positions;
      const bool long_ctx = orig > 0 ? seq_len > orig : true;
      const std::vector<float>& ext = long_ctx ? r.long_factor : r.short_factor;
      const double scale = orig > 0 ? (double)c.max_positions / orig : r.factor;
      const double log_base = orig > 0 ? std::log((double)orig) : std::log((double)c.max_positions);
      std::vector<float> f(half);
      for (int i = 0; i < half; ++i) f[i] = 1.0f / (ext[i] * powf(theta, (float)(2 * i) / (float)dim));
      *cs_scale = r.attention_factor > 0.0f ? r.attention_factor
                  : scale <= 1.0            ? 1.0f
                                            : (float)std::sqrt(1.0 + std::log(scale) / log_base);
      return f;
    }
    case RopeType::kFreqFactors: {  // llama.cpp's rope_freqs: the default frequencies divided by per-pair factors
      std::vector<float> f = default_inv_freq(theta, dim);
      for (int i = 0; i < half; ++i) f[i] /= r.freq_factors[i];
      return f;
    }
    case RopeType::kLlama3: {
      std::vector<float> f = default_inv_freq(theta, dim);
      const float factor = r.factor, lo = r.low_freq_factor, hi = r.high_freq_factor;
      const float old_ctx = (float)r.original_max_positions;
      const float low_wl = (float)((double)r.original_max_positions / r.low_freq_factor);
      const float high_wl = (float)((double)r.original_max_positions / r.high_freq_factor);
      for (float& x : f) {
        const float wavelen = (float)(2 * M_PI) / x;
        const float llama = wavelen > low_wl ? x / factor : x;
        const float smooth = (old_ctx / wavelen - lo) / (hi - lo);
        const float smoothed = (1.0f - smooth) * llama / factor + smooth * llama;
        const bool medium = !(wavelen < high_wl) && !(wavelen > low_wl);
        x = medium ? smoothed : llama;
      }
      return f;
    }
  }
  return default_inv_freq(theta, dim);
}

std::string run_warnings(const ModelConfig& c, int n_tokens) {
  std::string w = c.rope_override.empty() ? "" : "rope_scaling " + c.rope_override + " replaces the model's own";
  const std::string ctx = context_length_warning(c, n_tokens);
  if (!ctx.empty()) w += (w.empty() ? "" : "\n") + ctx;
  return w;
}

std::string context_length_warning(const ModelConfig& c, int n_tokens) {
  if (n_tokens <= c.max_positions) return "";
  const std::string n = std::to_string(n_tokens), ctx = std::to_string(c.max_positions);
  if (c.arch.position == PositionKind::kLearned)
    throw Error("prompt", n + " tokens: " + c.arch.name + " has learned absolute positions, a table of " + ctx +
                              " rows (max_position_embeddings) with no row for position " + ctx +
                              " or later; shorten the prompt to " + ctx + " tokens");
  std::string how = "its rotary positions extrapolate";
  if (c.arch.rope.type == RopeType::kDynamic)
    how = "dynamic NTK recomputes the rotary frequencies for " + n + " positions";
  else if (c.arch.rope.type != RopeType::kDefault)
    how = "its rotary positions (" + std::string(rope_type_name(c.arch.rope.type)) + " scaling) extrapolate";
  return n + " tokens run past the model's trained context of " + ctx + " (max_position_embeddings): positions " + ctx +
         ".." + std::to_string(n_tokens - 1) + " were never trained on and " + how;
}

void apply_rope_override(ModelConfig& c, const std::string& text) {
  const std::string what = "rope_scaling override '" + text + "'";
  if (c.arch.position != PositionKind::kRope)
    throw Error("rope_scaling", what + ": " + c.arch.name + " has learned absolute positions (a table of " +
                                    std::to_string(c.max_positions) +
                                    " rows), not rotary ones, so no rope_scaling applies: drop the override");
  if (text == "default") {
    c.arch.rope = RopeScaling{};
    return;
  }
  const size_t colon = text.find(':');
  const std::string type = text.substr(0, colon);
  RopeScaling r;
  const bool known = rope_type_from_name(type, &r.type);
  if (!known || (r.type != RopeType::kLinear && r.type != RopeType::kDynamic && r.type != RopeType::kYarn))
    throw Error("rope_scaling", what +
                                    ": the type must be linear, dynamic or yarn, spelled TYPE:FACTOR (e.g. "
                                    "dynamic:2), or default for unscaled rotary positions");
  char* end = nullptr;
  const std::string factor_text = colon == std::string::npos ? "" : text.substr(colon + 1);
  r.factor = std::strtof(factor_text.c_str(), &end);
  if (factor_text.empty() || *end != '\0' || !std::isfinite(r.factor) || !(r.factor > 0.0f) ||
      (r.type != RopeType::kLinear && r.factor < 1.0f))
    throw Error("rope_scaling", what + ": give the factor after the type, a number " +
                                    (r.type == RopeType::kLinear ? std::string("> 0") : std::string(">= 1")) +
                                    " (e.g. " + type + ":2)");
  c.arch.rope = r;
}

}  // namespace focal
