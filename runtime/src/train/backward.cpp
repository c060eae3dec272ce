// Backward pass of the LLaMA model through the activations the runtime forward recorded (tape.h): embedding,
// RMSNorm, projections, QK-norm, RoPE, attention with per-row temperature (and the learned tau through its clip),
// SwiGLU, tied or untied head. CPU only (host pointers).
#include "train/backward.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "focal/error.h"
#include "focal_kernels/backward.h"
#include "tape.h"

namespace focal {

void Grads::zero() {
  for (auto& v : g) std::fill(v.begin(), v.end(), 0.0f);
}

Grads make_grads(const Model& model) {
  Grads gr;
  for (const ParamRef& p : model.weights().params) gr.g.emplace_back(p.size, 0.0f);
  return gr;
}

double loss_only(const Model& model, const int32_t* ids, int T, const TempSpec& spec, ForwardObserver* obs) {
  Session s(model, T);
  std::vector<float> logits;
  RunOptions opt;
  s.forward(ids, T, spec, opt, obs, &logits);
  std::vector<float> dl(logits.size());
  return ops::cross_entropy<float>(logits.data(), ids, T, model.config().vocab_size, 1.0, dl.data());
}

double tau_backward(const float* dscale, const float* tau, const float* tau_pre, int T, int n_heads, int d_head,
                    float tau_min, float tau_max, float tau_scale, TauMode mode, std::vector<double>& ds) {
  // scale_i = sqrt(d) / tau_i, tau_i = clip(pre_i, tau_min, tau_max) * tau_scale, pre_i = mean(s) + b
  const double sqrt_d = std::sqrt((double)d_head);
  std::vector<double> dpre(T);
  double db = 0.0;
  for (int i = 0; i < T; ++i) {
    double dsc = 0.0;
    for (int h = 0; h < n_heads; ++h) dsc += dscale[(size_t)h * T + i];
    const double t = tau[i];
    const double dtau = dsc * (-sqrt_d / (t * t));
    const bool inside = tau_pre[i] > tau_min && tau_pre[i] < tau_max;
    dpre[i] = inside ? dtau * tau_scale : 0.0;
    db += dpre[i];
  }
  ds.assign(T, 0.0);
  switch (mode) {
    case TauMode::kPerToken:
      for (int i = 0; i < T; ++i) ds[i] = dpre[i];
      break;
    case TauMode::kPrefixMean: {
      double acc = 0.0;  // sum_{i >= j} dpre_i / (i + 1)
      for (int j = T - 1; j >= 0; --j) {
        acc += dpre[j] / (j + 1);
        ds[j] = acc;
      }
      break;
    }
    case TauMode::kSequenceMean:
      for (int j = 0; j < T; ++j) ds[j] = db / T;
      break;
  }
  return db;
}

double loss_and_grad(const Model& model, const int32_t* ids, int T, const TempSpec& spec, double n_total, Grads& grads,
                     const uint8_t* row_mask) {
  const ModelConfig& c = model.config();
  const Model::Weights& w = model.weights();
  if (!spec.layer_temp.empty() || !spec.head_temp.empty())
    throw Error("training: per-layer / per-head temperature overrides are not supported");
  if (spec.mode == AttnMode::kSsmax) throw Error("training: ssmax is an inference-time comparison mode");

  // weight pointer -> gradient buffer
  std::unordered_map<const float*, float*> gmap;
  for (size_t i = 0; i < w.params.size(); ++i) gmap[w.params[i].data] = grads.g[i].data();
  auto G = [&](const float* p) { return gmap.at(p); };

  Session s(model, T);
  Tape tape;
  std::vector<float> logits;
  forward_with_tape(s, ids, T, spec, &tape, row_mask ? nullptr : &logits);

  const int H = c.hidden, V = c.vocab_size, I = c.intermediate, nh = c.n_heads, nkv = c.n_kv_heads, d = c.d_head;
  const int QD = nh * d, KD = nkv * d;
  using ops::gemm;
  std::vector<float> dxn((size_t)T * H), dx((size_t)T * H), tmp((size_t)T * H);
  double loss = 0.0;
  if (!row_mask) {
    // head: logits = xn_final . W^T
    std::vector<float> dlogits((size_t)T * V);
    loss = ops::cross_entropy<float>(logits.data(), ids, T, V, n_total, dlogits.data());
    gemm<float>(false, false, T, H, V, 1.0f, dlogits.data(), V, w.lm_head.f32(), H, 0.0f, dxn.data(), H);
    gemm<float>(true, false, V, H, T, 1.0f, dlogits.data(), V, tape.xn_final.data(), H, 1.0f, G(w.lm_head.f32()), H);
  } else {
    // Only the masked rows count (answer tokens: about a tenth of a task's rows), so the head runs on those rows
    // alone, packed: xs [P, H] -> logits [P + 1, V] with targets tgt [P + 1] (row j predicts tgt[j + 1]; the last
    // row is cross_entropy's unused one). The other rows' dxn stays 0, as their dlogits would be.
    if (c.arch.final_softcap > 0.0f) throw Error("training: a final-logit soft-cap is not supported");
    std::vector<int> rows;
    for (int i = 0; i + 1 < T; ++i)
      if (row_mask[i]) rows.push_back(i);
    const int P = (int)rows.size();
    std::vector<float> xs((size_t)P * H), lg((size_t)(P + 1) * V, 0.0f), dlg((size_t)(P + 1) * V), dxs((size_t)P * H);
    std::vector<int32_t> tgt(P + 1, 0);
    for (int j = 0; j < P; ++j) {
      std::copy_n(tape.xn_final.data() + (size_t)rows[j] * H, H, xs.data() + (size_t)j * H);
      tgt[j + 1] = ids[rows[j] + 1];
    }
    if (P > 0) {
      gemm<float>(false, true, P, V, H, 1.0f, xs.data(), H, w.lm_head.f32(), H, 0.0f, lg.data(), V);
      loss = ops::cross_entropy<float>(lg.data(), tgt.data(), P + 1, V, n_total, dlg.data());
      gemm<float>(false, false, P, H, V, 1.0f, dlg.data(), V, w.lm_head.f32(), H, 0.0f, dxs.data(), H);
      gemm<float>(true, false, V, H, P, 1.0f, dlg.data(), V, xs.data(), H, 1.0f, G(w.lm_head.f32()), H);
      for (int j = 0; j < P; ++j) std::copy_n(dxs.data() + (size_t)j * H, H, dxn.data() + (size_t)rows[j] * H);
    }
  }
  ops::rmsnorm_backward<float>(tape.x_final.data(), w.final_norm, dxn.data(), dx.data(), G(w.final_norm), T, H,
                               c.rms_eps);

  std::vector<float> dact((size_t)T * I), act((size_t)T * I), dgate((size_t)T * I), dup((size_t)T * I);
  std::vector<float> datt((size_t)T * QD), dq((size_t)T * QD), dk((size_t)T * KD), dv((size_t)T * KD);
  std::vector<float> dscale((size_t)nh * T), dqn, dkn;
  for (int l = c.n_layers - 1; l >= 0; --l) {
    const LayerWeights& L = w.layers[l];
    const LayerTape& lt = tape.layers[l];
    // ---- MLP: x_out = x_mid + down(silu(gate(xn2)) * up(xn2))
    for (size_t i = 0; i < act.size(); ++i) act[i] = lt.gate[i] / (1.0f + std::exp(-lt.gate[i])) * lt.up[i];
    gemm<float>(false, false, T, I, H, 1.0f, dx.data(), H, L.w_down.f32(), I, 0.0f, dact.data(), I);
    gemm<float>(true, false, H, I, T, 1.0f, dx.data(), H, act.data(), I, 1.0f, G(L.w_down.f32()), I);
    ops::swiglu_backward<float>(lt.gate.data(), lt.up.data(), dact.data(), dgate.data(), dup.data(), (int64_t)T * I);
    gemm<float>(true, false, I, H, T, 1.0f, dgate.data(), I, lt.xn2.data(), H, 1.0f, G(L.w_gate.f32()), H);
    gemm<float>(true, false, I, H, T, 1.0f, dup.data(), I, lt.xn2.data(), H, 1.0f, G(L.w_up.f32()), H);
    gemm<float>(false, false, T, H, I, 1.0f, dgate.data(), I, L.w_gate.f32(), H, 0.0f, dxn.data(), H);
    gemm<float>(false, false, T, H, I, 1.0f, dup.data(), I, L.w_up.f32(), H, 1.0f, dxn.data(), H);
    ops::rmsnorm_backward<float>(lt.x_mid.data(), L.mlp_norm, dxn.data(), tmp.data(), G(L.mlp_norm), T, H, c.rms_eps);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += tmp[i];  // dL/dx_mid

    // ---- attention: x_mid = x_in + o(attn(q, k, v))
    gemm<float>(false, false, T, QD, H, 1.0f, dx.data(), H, L.wo.f32(), QD, 0.0f, datt.data(), QD);
    gemm<float>(true, false, H, QD, T, 1.0f, dx.data(), H, lt.att.data(), QD, 1.0f, G(L.wo.f32()), QD);
    if (L.bo)
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < H; ++i) G(L.bo)[i] += dx[(size_t)t * H + i];
    ops::attention_backward<float>(lt.q.data(), lt.k.data(), lt.v.data(), lt.probs.data(), lt.raw.data(),
                                   lt.scale.data(), datt.data(), dq.data(), dk.data(), dv.data(), dscale.data(), T, nh,
                                   nkv, d);
    std::fill(dxn.begin(), dxn.end(), 0.0f);
    if (spec.mode == AttnMode::kLearned) {
      std::vector<double> ds;  // dL / d(X_j . w_tau)
      const double db = tau_backward(dscale.data(), lt.tau.data(), lt.tau_pre.data(), T, nh, d, c.focal.tau_min,
                                     c.focal.tau_max, spec.tau_scale, c.focal.tau_mode, ds);
      if (L.tau_b) G(L.tau_b)[0] += (float)db;
      float* gw = G(L.tau_w.f32());
      for (int j = 0; j < T; ++j)
        for (int i = 0; i < H; ++i) {
          gw[i] += (float)(ds[j] * lt.xn1[(size_t)j * H + i]);
          dxn[(size_t)j * H + i] += (float)(ds[j] * L.tau_w.f32()[i]);
        }
    }
    ops::rope_backward<float>(dq.data(), T, nh, d, 0, c.rope_theta);
    ops::rope_backward<float>(dk.data(), T, nkv, d, 0, c.rope_theta);
    if (L.q_norm) {
      dqn.resize(dq.size());
      dkn.resize(dk.size());
      ops::rmsnorm_backward<float>(lt.q_lin.data(), L.q_norm, dq.data(), dqn.data(), G(L.q_norm), T * nh, d, c.rms_eps);
      ops::rmsnorm_backward<float>(lt.k_lin.data(), L.k_norm, dk.data(), dkn.data(), G(L.k_norm), T * nkv, d,
                                   c.rms_eps);
      dq.swap(dqn);
      dk.swap(dkn);
    }
    if (L.bq)
      for (int t = 0; t < T; ++t) {
        for (int i = 0; i < QD; ++i) G(L.bq)[i] += dq[(size_t)t * QD + i];
        for (int i = 0; i < KD; ++i) {
          G(L.bk)[i] += dk[(size_t)t * KD + i];
          G(L.bv)[i] += dv[(size_t)t * KD + i];
        }
      }
    gemm<float>(true, false, QD, H, T, 1.0f, dq.data(), QD, lt.xn1.data(), H, 1.0f, G(L.wq.f32()), H);
    gemm<float>(true, false, KD, H, T, 1.0f, dk.data(), KD, lt.xn1.data(), H, 1.0f, G(L.wk.f32()), H);
    gemm<float>(true, false, KD, H, T, 1.0f, dv.data(), KD, lt.xn1.data(), H, 1.0f, G(L.wv.f32()), H);
    gemm<float>(false, false, T, H, QD, 1.0f, dq.data(), QD, L.wq.f32(), H, 1.0f, dxn.data(), H);
    gemm<float>(false, false, T, H, KD, 1.0f, dk.data(), KD, L.wk.f32(), H, 1.0f, dxn.data(), H);
    gemm<float>(false, false, T, H, KD, 1.0f, dv.data(), KD, L.wv.f32(), H, 1.0f, dxn.data(), H);
    ops::rmsnorm_backward<float>(lt.x_in.data(), L.attn_norm, dxn.data(), tmp.data(), G(L.attn_norm), T, H, c.rms_eps);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += tmp[i];  // dL/dx_in
  }
  float* ge = G(w.embed.f32());
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < H; ++i) ge[(size_t)ids[t] * H + i] += dx[(size_t)t * H + i];
  return loss;
}

}  // namespace focal
