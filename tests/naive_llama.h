// An independent naive double-precision LLaMA forward (embedding, RMSNorm, projections, QK-norm, RoPE with exact
// angles, causal attention with every TempSpec mode, SwiGLU, tied or untied head), the reference of the forward and
// gradient tests. Weights come as a name -> tensor map whose tensors hold `.data` in float or double.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "focal/config.h"
#include "focal/temp_spec.h"

namespace focal::test {

using Vec = std::vector<double>;

struct DoubleTensor {
  std::vector<double> data;
};

struct NaiveOut {
  Vec logits;             // [T, V]
  std::vector<Vec> attn;  // per layer [H, T, T]
  std::vector<Vec> tau;   // per layer [T] (learned only)
};

template <class W>
Vec rmsnorm_rows(const Vec& x, const std::vector<W>& w, int rows, int n, double eps) {
  Vec y(x.size());
  for (int r = 0; r < rows; ++r) {
    double ss = 0;
    for (int i = 0; i < n; ++i) ss += x[r * n + i] * x[r * n + i];
    const double f = 1.0 / std::sqrt(ss / n + eps);
    for (int i = 0; i < n; ++i) y[r * n + i] = w[i] * x[r * n + i] * f;
  }
  return y;
}

template <class W>
Vec linear(const Vec& x, const std::vector<W>& w, int rows, int out, int in) {
  Vec y((size_t)rows * out, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) {
      double s = 0;
      for (int i = 0; i < in; ++i) s += x[(size_t)r * in + i] * w[(size_t)o * in + i];
      y[(size_t)r * out + o] = s;
    }
  return y;
}

void rope_naive(Vec& x, int T, int nh, int d, double theta) {
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < nh; ++h)
      for (int i = 0; i < d / 2; ++i) {
        const double ang = t / std::pow(theta, 2.0 * i / d);
        double& a = x[((size_t)t * nh + h) * d + i];
        double& b = x[((size_t)t * nh + h) * d + i + d / 2];
        const double na = a * std::cos(ang) - b * std::sin(ang), nb = b * std::cos(ang) + a * std::sin(ang);
        a = na;
        b = nb;
      }
}

// Weights: a map from tensor name to anything with a `.data` vector (float NamedTensor or double DoubleTensor).
template <class Map>
NaiveOut naive_forward(const ModelConfig& c, Map& w, const std::vector<int32_t>& ids, const TempSpec& spec) {
  const int T = (int)ids.size(), H = c.hidden, nh = c.n_heads, nkv = c.n_kv_heads, d = c.d_head;
  NaiveOut out;
  Vec x((size_t)T * H);
  const auto& emb = w["model.embed_tokens.weight"].data;
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < H; ++i) x[(size_t)t * H + i] = emb[(size_t)ids[t] * H + i];
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Vec xn = rmsnorm_rows(x, w[p + "input_layernorm.weight"].data, T, H, c.rms_eps);
    Vec q = linear(xn, w[p + "self_attn.q_proj.weight"].data, T, nh * d, H);
    Vec k = linear(xn, w[p + "self_attn.k_proj.weight"].data, T, nkv * d, H);
    Vec v = linear(xn, w[p + "self_attn.v_proj.weight"].data, T, nkv * d, H);
    if (c.qk_norm) {
      q = rmsnorm_rows(q, w[p + "self_attn.q_norm.weight"].data, T * nh, d, c.rms_eps);
      k = rmsnorm_rows(k, w[p + "self_attn.k_norm.weight"].data, T * nkv, d, c.rms_eps);
    }
    rope_naive(q, T, nh, d, c.rope_theta);
    rope_naive(k, T, nkv, d, c.rope_theta);
    // logit multiplier relative to q.k/sqrt(d), per row
    Vec base(T, 1.0), tau(T, 0.0);
    if (spec.mode == AttnMode::kFocal) std::fill(base.begin(), base.end(), 1.0 / spec.focal_temp);
    if (spec.mode == AttnMode::kSsmax)
      for (int i = 0; i < T; ++i) base[i] = spec.ssmax_s * std::log((double)(i + 1));
    if (spec.mode == AttnMode::kLearned) {
      Vec s = linear(xn, w[p + "self_attn.tau_proj.weight"].data, T, 1, H);
      const double b = w[p + "self_attn.tau_proj.bias"].data[0];
      for (int i = 0; i < T; ++i) {
        double pre = 0;
        if (c.focal.tau_mode == TauMode::kPerToken) pre = s[i];
        if (c.focal.tau_mode == TauMode::kPrefixMean) {
          for (int j = 0; j <= i; ++j) pre += s[j];
          pre /= (i + 1);
        }
        if (c.focal.tau_mode == TauMode::kSequenceMean) {
          for (int j = 0; j < T; ++j) pre += s[j];
          pre /= T;
        }
        tau[i] = std::min<double>(std::max<double>(pre + b, c.focal.tau_min), c.focal.tau_max) * spec.tau_scale;
        base[i] = std::sqrt((double)d) / tau[i];
      }
      out.tau.push_back(tau);
    }
    Vec attn((size_t)nh * T * T, 0.0), o((size_t)T * nh * d, 0.0);
    for (int h = 0; h < nh; ++h) {
      const int g = h / (nh / nkv);
      double mult_override = -1;
      if (spec.layer_temp.count(l)) mult_override = 1.0 / spec.layer_temp.at(l);
      if (spec.head_temp.count({l, h})) mult_override = 1.0 / spec.head_temp.at({l, h});
      for (int i = 0; i < T; ++i) {
        const double m = mult_override > 0 ? mult_override : base[i];
        Vec lg(i + 1);
        double mx = -1e300;
        for (int j = 0; j <= i; ++j) {
          double dot = 0;
          for (int e = 0; e < d; ++e) dot += q[((size_t)i * nh + h) * d + e] * k[((size_t)j * nkv + g) * d + e];
          lg[j] = dot / std::sqrt((double)d) * m;
          mx = std::max(mx, lg[j]);
        }
        double z = 0;
        for (int j = 0; j <= i; ++j) z += std::exp(lg[j] - mx);
        for (int j = 0; j <= i; ++j) {
          const double pj = std::exp(lg[j] - mx) / z;
          attn[((size_t)h * T + i) * T + j] = pj;
          for (int e = 0; e < d; ++e) o[((size_t)i * nh + h) * d + e] += pj * v[((size_t)j * nkv + g) * d + e];
        }
      }
    }
    out.attn.push_back(attn);
    Vec proj = linear(o, w[p + "self_attn.o_proj.weight"].data, T, H, nh * d);
    for (size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
    xn = rmsnorm_rows(x, w[p + "post_attention_layernorm.weight"].data, T, H, c.rms_eps);
    Vec gt = linear(xn, w[p + "mlp.gate_proj.weight"].data, T, c.intermediate, H);
    Vec up = linear(xn, w[p + "mlp.up_proj.weight"].data, T, c.intermediate, H);
    for (size_t i = 0; i < gt.size(); ++i) gt[i] = gt[i] / (1.0 + std::exp(-gt[i])) * up[i];
    Vec dn = linear(gt, w[p + "mlp.down_proj.weight"].data, T, H, c.intermediate);
    for (size_t i = 0; i < x.size(); ++i) x[i] += dn[i];
  }
  Vec xn = rmsnorm_rows(x, w["model.norm.weight"].data, T, H, c.rms_eps);
  out.logits =
      linear(xn, w[c.tied_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"].data, T, c.vocab_size, H);
  return out;
}

// Sum over rows 0..T-2 of the next-token cross entropy of the naive logits, in double.
inline double naive_loss(const Vec& logits, const std::vector<int32_t>& ids, int V) {
  const int T = (int)ids.size();
  double loss = 0.0;
  for (int i = 0; i + 1 < T; ++i) {
    const double* r = logits.data() + (size_t)i * V;
    const double mx = *std::max_element(r, r + V);
    double z = 0.0;
    for (int j = 0; j < V; ++j) z += std::exp(r[j] - mx);
    loss += std::log(z) + mx - r[ids[i + 1]];
  }
  return loss;
}

}  // namespace focal::test
