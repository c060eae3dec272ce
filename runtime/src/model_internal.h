// Model weights as the forward pass sees them: typed weight handles and backend pointers with their shapes
// (runtime-internal).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "focal/model.h"

namespace focal {

// Rows of one MLP pass of the forward: the [rows, intermediate] activations are its largest (Llama-3-8B's shape at
// T = 8192: 0.94 GB of gate and up in fp32; 0.12 GB in passes of 1024 rows, each a GEMM large enough for the GPU).
constexpr int kForwardMlpRows = 1024;

struct LayerWeights {
  const float* attn_norm = nullptr;       // [hidden] pre-attention norm, or null (OLMo 2)
  const float* attn_norm_b = nullptr;     // [hidden] its bias (LayerNorm), or null
  Weight wq;                              // [n_heads*d_head, hidden]
  Weight wk;                              // [n_kv_heads*d_head, hidden]
  Weight wv;                              // [n_kv_heads*d_head, hidden]
  Weight wo;                              // [hidden, n_heads*d_head]
  const float* bq = nullptr;              // [n_heads*d_head] or null (attention_bias)
  const float* bk = nullptr;              // [n_kv_heads*d_head] or null
  const float* bv = nullptr;              // [n_kv_heads*d_head] or null
  const float* bo = nullptr;              // [hidden] or null
  const float* q_norm = nullptr;          // [d_head] (per head) or [n_heads*d_head] (whole projection), or null
  const float* k_norm = nullptr;          // [d_head] or [n_kv_heads*d_head], or null
  const float* post_attn_norm = nullptr;  // [hidden] norm of the attention output (Gemma 2, OLMo 2), or null
  const float* mlp_norm = nullptr;        // [hidden] pre-MLP norm, or null (OLMo 2)
  const float* mlp_norm_b = nullptr;      // [hidden] its bias (LayerNorm), or null
  const float* post_mlp_norm = nullptr;   // [hidden] norm of the MLP output (Gemma 2, OLMo 2), or null
  const float* b_gate = nullptr;          // [intermediate] or null (mlp_bias)
  const float* b_up = nullptr;            // [intermediate] or null (mlp_bias; GPT-2 c_fc)
  const float* b_down = nullptr;          // [hidden] or null (mlp_bias; GPT-2 mlp.c_proj)
  Weight w_gate;                          // [intermediate, hidden], or null without a gate (GPT-2)
  Weight w_up;                            // [intermediate, hidden]
  Weight w_down;                          // [hidden, intermediate]
  Weight tau_w;                           // [1, hidden] learned temperature projection (fp32), or none
  const float* tau_b = nullptr;           // [1] its bias, or null
};

// One tensor of the model: its name in the safetensors file, shape, and backend memory.
struct ParamRef {
  std::string name;
  std::vector<int64_t> shape;
  float* data = nullptr;  // its fp32 values (the trainer's view), or null when the backend holds them otherwise
  size_t size = 0;
  bool decay = false;  // AdamW weight decay applies (projection and embedding matrices; not norms or biases)
  Weight weight;       // the same tensor as a Weight (Backend::download_weight reads any form)
};

struct Model::Weights {
  std::vector<std::shared_ptr<void>> files;  // the mapped model files that stored (native) weights point into
  std::vector<DeviceBuffer> storage;         // owns the vectors below (norms, biases, tau_proj)
  std::vector<WeightBuffer> matrices;        // owns the matrices below
  Weight embed;                              // [vocab, hidden]
  const float* final_norm = nullptr;         // [hidden]
  const float* final_norm_b = nullptr;       // [hidden] (LayerNorm) or null
  Weight pos_embed;                          // [max_positions, hidden] learned absolute positions (GPT-2), or none
  Weight lm_head;                            // [vocab, hidden] (== embed when tied)
  std::vector<LayerWeights> layers;          // [n_layers]
  std::vector<ParamRef> params;              // every tensor, in file order of loading
};

// The k best logits of the last row of a forward (k <= 64): computed on the backend, only k pairs reach the host.
struct LogitsTopk {
  int k = 1;
  std::vector<int32_t> idx;  // [k] token ids, descending logit, ties lower id first
  std::vector<float> val;    // [k] their logits
};

// Session::forward that returns the last row's top-k logits (forward.cpp) instead of the logits rows.
bool forward_topk(Session& s, const int32_t* ids, int n, const TempSpec& spec, const RunOptions& opt,
                  ForwardObserver* obs, LogitsTopk* topk);

// "[300, 32]": a tensor shape in error messages (model_load.cpp).
std::string shape_str(const std::vector<int64_t>& s);

}  // namespace focal
