// Activations the training backward needs, recorded by the one forward pass (forward.cpp) when a Tape is given.
// Runtime-internal; host copies, shapes per field. T = tokens of the call (training runs start at position 0).
#pragma once

#include <cstdint>
#include <vector>

#include "focal/model.h"

namespace focal {

struct LayerTape {
  std::vector<float> x_in;     // [T, hidden] residual stream entering the layer
  std::vector<float> xn1;      // [T, hidden] input_layernorm output (X of the learned tau)
  std::vector<float> q_lin;    // [T, n_heads*d_head] q after projection (+bias), before QK-norm; QK-norm only
  std::vector<float> k_lin;    // [T, n_kv*d_head] likewise
  std::vector<float> q;        // [T, n_heads*d_head] after QK-norm and RoPE
  std::vector<float> k;        // [T, n_kv*d_head] after QK-norm and RoPE
  std::vector<float> v;        // [T, n_kv*d_head]
  std::vector<float> probs;    // [n_heads, T, T] attention probabilities (0 above the diagonal); empty unless
                               // Tape::keep_attention
  std::vector<float> raw;      // [n_heads, T, T] q.k/sqrt(d_head) (0 above the diagonal); likewise
  std::vector<float> scale;    // [n_heads, T] logit multiplier per row
  std::vector<float> tau_dot;  // [T] X.w_tau (learned only)
  std::vector<float> tau_pre;  // [T] mean(...) + b before the clip (learned only)
  std::vector<float> tau;      // [T] tau after the clip (learned only)
  std::vector<float> att;      // [T, n_heads*d_head] attention output before o_proj
  std::vector<float> x_mid;    // [T, hidden] residual after the attention block
  std::vector<float> xn2;      // [T, hidden] post_attention_layernorm output
  std::vector<float> gate;     // [T, intermediate] gate_proj output (before SiLU)
  std::vector<float> up;       // [T, intermediate] up_proj output
};

struct Tape {
  // Calibration (train/calib_grad.cpp): no weight gradient is formed and the backward rotates by the call's own
  // RoPE frequencies, so RoPE scaling and a sliding window no narrower than the call are taken too.
  bool frozen_weights = false;
  // false: probs and raw are not recorded (left empty); the backward recomputes them one layer at a time from q, k
  // and scale, so the tape holds no [n_heads, T, T] array per layer.
  bool keep_attention = true;
  std::vector<LayerTape> layers;
  std::vector<float> x_final;   // [T, hidden] residual stream before model.norm
  std::vector<float> xn_final;  // [T, hidden] model.norm output
};

// Session::forward with the activations recorded into `tape` (which is resized as needed). All logits are returned;
// with logits == nullptr the head is not applied (the tape still holds x_final and xn_final for every row).
bool forward_with_tape(Session& s, const int32_t* ids, int n, const TempSpec& spec, Tape* tape,
                       std::vector<float>* logits);

}  // namespace focal
