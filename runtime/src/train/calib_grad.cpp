// Gradient of the next-token loss with respect to log attention temperatures through frozen weights: the runtime's
// forward records a Tape, the backward carries activation gradients only (no weight gradient is formed) down to the
// lowest layer's attention, and each layer's d(loss)/d(row scale) becomes d(loss)/d(log t), or, for the learned
// tau's projections, d(loss)/d(w_tau, b) through the clip and the prefix mean. CPU only.
#include "train/calib_grad.h"

#include <algorithm>
#include <cmath>

#include "focal/error.h"
#include "focal_kernels/backward.h"
#include "focal_kernels/ops.h"
#include "model_internal.h"
#include "tape.h"
#include "train/backward.h"

namespace focal {

TempParams TempParams::uniform(CalibGranularity g, const ModelConfig& cfg, double focal_temp) {
  TempParams p;
  p.granularity = g;
  p.n_layers = cfg.n_layers;
  p.n_heads = cfg.n_heads;
  p.hidden = cfg.hidden;
  p.d_head = cfg.d_head;
  switch (g) {
    case CalibGranularity::kModel: p.theta.assign(1, std::log(focal_temp)); break;
    case CalibGranularity::kLayer: p.theta.assign((size_t)cfg.n_layers, std::log(focal_temp)); break;
    case CalibGranularity::kHead: p.theta.assign((size_t)cfg.n_layers * cfg.n_heads, std::log(focal_temp)); break;
    case CalibGranularity::kTauProj:
      p.theta.assign((size_t)cfg.n_layers * (cfg.hidden + 1), 0.0);
      for (int l = 0; l < cfg.n_layers; ++l) p.theta[(size_t)l * (cfg.hidden + 1) + cfg.hidden] = focal_temp;
      break;
  }
  return p;
}

int TempParams::index(int layer, int head) const {
  switch (granularity) {
    case CalibGranularity::kModel: return 0;
    case CalibGranularity::kLayer: return layer;
    case CalibGranularity::kHead: return layer * n_heads + head;
    case CalibGranularity::kTauProj: break;
  }
  throw Error("calibration: a tau-proj calibration has no log t per head");
}

double TempParams::lr_mult(size_t p) const {
  if (granularity != CalibGranularity::kTauProj) return 1.0;
  return p % (size_t)(hidden + 1) == (size_t)hidden ? 1.0 : 1.0 / hidden;
}

std::vector<float> TempParams::head_temps() const {
  std::vector<float> t((size_t)n_layers * n_heads);
  for (int l = 0; l < n_layers; ++l)
    for (int h = 0; h < n_heads; ++h)
      t[(size_t)l * n_heads + h] = granularity == CalibGranularity::kTauProj
                                       ? (float)theta[(size_t)l * (hidden + 1) + hidden]
                                       : (float)std::exp(theta[index(l, h)]);
  return t;
}

std::shared_ptr<const TauProj> TempParams::tau_proj() const {
  if (granularity != CalibGranularity::kTauProj) return nullptr;
  auto p = std::make_shared<TauProj>();
  const double sqrt_d = std::sqrt((double)d_head);
  p->tau_mode = TauMode::kPrefixMean;
  p->tau_min = (float)(kTauProjTMin * sqrt_d);
  p->tau_max = (float)(kTauProjTMax * sqrt_d);
  p->n_layers = n_layers;
  p->hidden = hidden;
  p->weight.resize((size_t)n_layers * hidden);
  p->bias.resize(n_layers);
  for (int l = 0; l < n_layers; ++l) {
    const double* u = theta.data() + (size_t)l * (hidden + 1);
    for (int i = 0; i < hidden; ++i) p->weight[(size_t)l * hidden + i] = (float)(sqrt_d * u[i]);
    p->bias[l] = (float)(sqrt_d * u[hidden]);
  }
  return p;
}

TempSpec TempParams::spec() const {
  TempSpec s;
  switch (granularity) {
    case CalibGranularity::kModel: s = TempSpec::focal((float)std::exp(theta[0])); break;
    case CalibGranularity::kLayer:
      for (int l = 0; l < n_layers; ++l) s.layer_temp[l] = (float)std::exp(theta[l]);
      break;
    case CalibGranularity::kHead:
      for (int l = 0; l < n_layers; ++l)
        for (int h = 0; h < n_heads; ++h) s.head_temp[{l, h}] = (float)std::exp(theta[index(l, h)]);
      break;
    case CalibGranularity::kTauProj:
      s.mode = AttnMode::kLearned;
      s.tau_proj = tau_proj();
      break;
  }
  return s;
}

namespace {

// A weight matrix as fp32 values: itself when the backend holds fp32, else widened into `scratch` (one matrix at a
// time: the caller reuses the scratch for the next one).
const float* fp32_of(const Model& model, const Weight& w, std::vector<float>& scratch) {
  if (const float* p = w.f32()) return p;
  scratch.resize(w.n);
  model.backend().download_weight(scratch.data(), w, w.n);
  return scratch.data();
}

// The layer's causal attention as the forward ran it: raw[h, i, j] = q_i . k_j / sqrt(d_head) and
// probs[h, i, :] = softmax_j<=i(raw[h, i, j] * scale[h, i]) by the forward's own row kernel (ops::attention_row),
// both 0 above the diagonal (the Tape's layout). The scores come from another GEMM than the forward's: the values
// agree to fp32 rounding. Heads in parallel.
void recompute_attention(const LayerTape& lt, int T, int nh, int nkv, int d, float* raw, float* probs) {
  const int QD = nh * d, KD = nkv * d, group = nh / nkv;
  const float inv_sqrt_d = 1.0f / std::sqrt((float)d);
#pragma omp parallel for schedule(dynamic, 1)
  for (int h = 0; h < nh; ++h) {
    float* rh = raw + (size_t)h * T * T;
    // Causal: rows [r0, r1) need keys [0, r1) only.
    constexpr int kRowBlock = 64;
    for (int r0 = 0; r0 < T; r0 += kRowBlock) {
      const int r1 = std::min(T, r0 + kRowBlock);
      ops::gemm<float>(false, true, r1 - r0, r1, d, inv_sqrt_d, lt.q.data() + (size_t)r0 * QD + (size_t)h * d, QD,
                       lt.k.data() + (size_t)(h / group) * d, KD, 0.0f, rh + (size_t)r0 * T, T);
    }
    float* ph = probs + (size_t)h * T * T;
    for (int i = 0; i < T; ++i) {
      float* rr = rh + (size_t)i * T;
      float* pr = ph + (size_t)i * T;
      ops::attention_row(rr, lt.scale[(size_t)h * T + i], 0.0f, 0, pr, i + 1, nullptr, 0, nullptr, 0);
      std::fill(rr + i + 1, rr + T, 0.0f);
      std::fill(pr + i + 1, pr + T, 0.0f);
    }
  }
}

}  // namespace

double calib_loss_and_grad(const Model& model, const int32_t* ids, int T, const TempParams& params, double n_total,
                           std::vector<double>& grad, std::vector<double>* layer_t_sum) {
  const ModelConfig& c = model.config();
  const Model::Weights& w = model.weights();
  if (model.device() != Device::kCpu)
    throw Error("device", "calibration runs on the CPU only; load the model on the cpu device");
  const std::vector<std::string> gaps = calibration_gaps(c, T);
  if (!gaps.empty()) throw Error("calibration: this model needs " + gaps.front() + ", which calibration lacks");
  if (grad.size() != params.theta.size()) throw Error("calibration: gradient buffer of the wrong size");
  const TempSpec spec = params.spec();
  const std::shared_ptr<const TauProj> tau_proj = spec.tau_proj;  // kTauProj's, in the forward's units

  Session s(model, T);
  Tape tape;
  tape.frozen_weights = true;
  tape.keep_attention = false;  // recomputed per layer below: one [n_heads, T, T] pair instead of n_layers
  std::vector<float> logits;    // [T, V]
  forward_with_tape(s, ids, T, spec, &tape, &logits);

  const int H = c.hidden, V = c.vocab_size, I = c.intermediate, nh = c.n_heads, nkv = c.n_kv_heads, d = c.d_head;
  const int QD = nh * d, KD = nkv * d;
  using ops::gemm;
  std::vector<float> scratch;  // one widened matrix
  std::vector<float> dxn((size_t)T * H), dx((size_t)T * H), tmp((size_t)T * H), dnorm(std::max(H, QD));
  double loss = 0.0;
  {
    std::vector<float> dlogits((size_t)T * V);  // [T, V]
    loss = ops::cross_entropy<float>(logits.data(), ids, T, V, n_total, dlogits.data());
    logits = std::vector<float>();
    gemm<float>(false, false, T, H, V, 1.0f, dlogits.data(), V, fp32_of(model, w.lm_head, scratch), H, 0.0f, dxn.data(),
                H);
  }
  ops::rmsnorm_backward<float>(tape.x_final.data(), w.final_norm, dxn.data(), dx.data(), dnorm.data(), T, H, c.rms_eps);

  std::vector<float> dact((size_t)T * I), dgate((size_t)T * I), dup((size_t)T * I);
  std::vector<float> datt((size_t)T * QD), dq((size_t)T * QD), dk((size_t)T * KD), dv((size_t)T * KD);
  std::vector<float> dscale((size_t)nh * T), dqn, dkn;
  std::vector<float> raw((size_t)nh * T * T), probs((size_t)nh * T * T);  // [n_heads, T, T], one layer at a time
  // RoPE's backward: the forward rotates pairs by pos * f and scales by cs (yarn / longrope's attention factor); its
  // transpose rotates by -pos * f and scales by cs, the same op with the frequencies negated.
  float cs_scale = 1.0f;
  std::vector<float> neg_freq = rope_inv_freq(c, T, &cs_scale);
  for (float& f : neg_freq) f = -f;
  for (int l = c.n_layers - 1; l >= 0; --l) {
    const LayerWeights& L = w.layers[l];
    const LayerTape& lt = tape.layers[l];
    // ---- MLP: x_out = x_mid + down(silu(gate(xn2)) * up(xn2))
    gemm<float>(false, false, T, I, H, 1.0f, dx.data(), H, fp32_of(model, L.w_down, scratch), I, 0.0f, dact.data(), I);
    ops::swiglu_backward<float>(lt.gate.data(), lt.up.data(), dact.data(), dgate.data(), dup.data(), (int64_t)T * I);
    gemm<float>(false, false, T, H, I, 1.0f, dgate.data(), I, fp32_of(model, L.w_gate, scratch), H, 0.0f, dxn.data(),
                H);
    gemm<float>(false, false, T, H, I, 1.0f, dup.data(), I, fp32_of(model, L.w_up, scratch), H, 1.0f, dxn.data(), H);
    ops::rmsnorm_backward<float>(lt.x_mid.data(), L.mlp_norm, dxn.data(), tmp.data(), dnorm.data(), T, H, c.rms_eps);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += tmp[i];  // dL/dx_mid

    // ---- attention: x_mid = x_in + o(attn(q, k, v)), logits = raw * scale, scale = 1 / t
    gemm<float>(false, false, T, QD, H, 1.0f, dx.data(), H, fp32_of(model, L.wo, scratch), QD, 0.0f, datt.data(), QD);
    recompute_attention(lt, T, nh, nkv, d, raw.data(), probs.data());
    ops::attention_backward<float>(lt.q.data(), lt.k.data(), lt.v.data(), probs.data(), raw.data(), lt.scale.data(),
                                   datt.data(), dq.data(), dk.data(), dv.data(), dscale.data(), T, nh, nkv, d);
    std::fill(dxn.begin(), dxn.end(), 0.0f);
    if (tau_proj) {
      // scale_i = sqrt(d) / tau_i, tau_i = clip(mean_{j<=i} X_j . w + b); w = sqrt(d) u, b = sqrt(d) c
      const TauProj& tp = *tau_proj;
      std::vector<double> ds;  // [T] d loss / d(X_j . w)
      const double db = tau_backward(dscale.data(), lt.tau.data(), lt.tau_pre.data(), T, nh, d, tp.tau_min, tp.tau_max,
                                     1.0f, tp.tau_mode, ds);
      const double sqrt_d = std::sqrt((double)d);
      if (layer_t_sum)
        for (int i = 0; i < T; ++i) (*layer_t_sum)[l] += lt.tau[i] / sqrt_d;
      double* g = grad.data() + (size_t)l * (H + 1);
      g[H] += sqrt_d * db;
      const float* wt = tp.weight.data() + (size_t)l * H;
      for (int j = 0; j < T; ++j) {
        const float* xj = lt.xn1.data() + (size_t)j * H;
        for (int i = 0; i < H; ++i) {
          g[i] += sqrt_d * ds[j] * xj[i];
          dxn[(size_t)j * H + i] = (float)(ds[j] * wt[i]);  // X_j feeds tau too
        }
      }
    } else {
      // d scale / d log t = -1/t = -scale
      for (int h = 0; h < nh; ++h) {
        double g = 0.0;
        for (int i = 0; i < T; ++i) g -= (double)dscale[(size_t)h * T + i] * lt.scale[(size_t)h * T + i];
        grad[params.index(l, h)] += g;
      }
    }
    if (l == 0) break;  // nothing below layer 0's attention depends on a temperature
    ops::rope_freqs(dq.data(), T, nh, d, 0, neg_freq.data(), cs_scale);
    ops::rope_freqs(dk.data(), T, nkv, d, 0, neg_freq.data(), cs_scale);
    if (L.q_norm) {
      dqn.resize(dq.size());
      dkn.resize(dk.size());
      ops::rmsnorm_backward<float>(lt.q_lin.data(), L.q_norm, dq.data(), dqn.data(), dnorm.data(), T * nh, d,
                                   c.rms_eps);
      ops::rmsnorm_backward<float>(lt.k_lin.data(), L.k_norm, dk.data(), dkn.data(), dnorm.data(), T * nkv, d,
                                   c.rms_eps);
      dq.swap(dqn);
      dk.swap(dkn);
    }
    gemm<float>(false, false, T, H, QD, 1.0f, dq.data(), QD, fp32_of(model, L.wq, scratch), H, 1.0f, dxn.data(), H);
    gemm<float>(false, false, T, H, KD, 1.0f, dk.data(), KD, fp32_of(model, L.wk, scratch), H, 1.0f, dxn.data(), H);
    gemm<float>(false, false, T, H, KD, 1.0f, dv.data(), KD, fp32_of(model, L.wv, scratch), H, 1.0f, dxn.data(), H);
    ops::rmsnorm_backward<float>(lt.x_in.data(), L.attn_norm, dxn.data(), tmp.data(), dnorm.data(), T, H, c.rms_eps);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += tmp[i];  // dL/dx_in
  }
  return loss;
}

}  // namespace focal
