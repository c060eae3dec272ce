// Model weights as the forward pass sees them: backend pointers with their shapes (runtime-internal).
#pragma once

#include <vector>

#include "backend.h"
#include "focal/model.h"

namespace focal {

struct LayerWeights {
  const float* attn_norm = nullptr;  // [hidden]
  const float* wq = nullptr;         // [n_heads*d_head, hidden]
  const float* wk = nullptr;         // [n_kv_heads*d_head, hidden]
  const float* wv = nullptr;         // [n_kv_heads*d_head, hidden]
  const float* wo = nullptr;         // [hidden, n_heads*d_head]
  const float* bq = nullptr;         // [n_heads*d_head] or null (attention_bias)
  const float* bk = nullptr;         // [n_kv_heads*d_head] or null
  const float* bv = nullptr;         // [n_kv_heads*d_head] or null
  const float* bo = nullptr;         // [hidden] or null
  const float* q_norm = nullptr;     // [d_head] or null (QK-norm)
  const float* k_norm = nullptr;     // [d_head] or null
  const float* mlp_norm = nullptr;   // [hidden]
  const float* w_gate = nullptr;     // [intermediate, hidden]
  const float* w_up = nullptr;       // [intermediate, hidden]
  const float* w_down = nullptr;     // [hidden, intermediate]
  const float* tau_w = nullptr;      // [1, hidden] learned temperature projection, or null
  float tau_b = 0.0f;                // its bias (0 when absent)
};

struct Model::Weights {
  std::vector<DeviceBuffer> storage;  // owns everything below
  const float* embed = nullptr;       // [vocab, hidden]
  const float* final_norm = nullptr;  // [hidden]
  const float* lm_head = nullptr;     // [vocab, hidden] (== embed when tied)
  std::vector<LayerWeights> layers;   // [n_layers]
};

}  // namespace focal
