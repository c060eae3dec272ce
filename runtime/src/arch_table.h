// The architectures focalscope runs, one table entry each: the names an architecture goes by (config.json class and
// model_type, GGUF general.architecture), how its tensors are named and split, and its quirks. config.cpp,
// config_arch.cpp, gguf_model.cpp and model_load.cpp read the entry; none of them compares architecture names.
// Adding an architecture is one entry in arch_table.cpp (with its config function in config_arch.cpp when it has
// fields of its own) plus its fixture in tests/hf/make_fixtures.py: docs/architecture.md shows an example.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "focal/config.h"

namespace focal {

class Fields;  // config_fields.h

// How the Hugging Face checkpoint names its tensors.
enum class TensorLayout {
  kLlama,  // model.embed_tokens, model.layers.N.self_attn.{q,k,v,o}_proj, .mlp.{gate,up,down}_proj, model.norm
  kGpt2,   // transformer.wte / wpe / ln_f, transformer.h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}
           // (Conv1D matrices stored [in, out]; c_attn holds q, k and v side by side)
};

struct ArchSpec {
  const char* name = nullptr;        // ArchConfig::name, e.g. "llama"
  const char* hf_class = nullptr;    // config.json "architectures"[0], e.g. "LlamaForCausalLM"
  const char* model_type = nullptr;  // config.json "model_type" (used when "architectures" is absent)
  const char* gguf_arch = nullptr;   // GGUF general.architecture (its metadata key prefix), or null: not read

  // Tensors.
  TensorLayout layout = TensorLayout::kLlama;
  bool fused_qkv = false;      // q, k and v in one matrix split by rows: self_attn.qkv_proj (Phi-3)
  bool fused_gate_up = false;  // gate and up in one matrix split by rows: mlp.gate_up_proj (Phi-3)
  bool post_norms = false;     // post_attention_layernorm normalises the attention output, the pre-MLP norm is
                               // pre_feedforward_layernorm (Gemma 2, OLMo 2); else it is LLaMA's pre-MLP norm

  // config.json.
  bool tied_default = false;       // tie_word_embeddings when config.json does not say
  bool ffn_default_4h = false;     // intermediate size 4 * hidden when not given (GPT-2's n_inner: null)
  float norm_eps_default = 1e-6f;  // rms_norm_eps (or the architecture's name for it) when not given
  bool layer_norm = false;         // LayerNorm with bias (GPT-2; GGUF: attention.layer_norm_epsilon), else RMSNorm
  // {LLaMA's key, this architecture's key}: fields read under the LLaMA names, errors naming the architecture's own
  // (GPT-2's n_embd, ...); empty for none.
  std::vector<std::pair<const char*, const char*>> key_names;
  // The architecture's own config fields and defaults into c.arch (norms, activation, biases, scales, windows,
  // rope_scaling); config_arch.cpp.
  void (*parse_fields)(const Fields& f, const std::string& path, ModelConfig& c) = nullptr;

  // GGUF (llama.cpp's conventions for this general.architecture).
  bool gguf_qk_permuted = false;                // llama.cpp permuted the q / k rows for its RoPE (llama only)
  bool gguf_norms_plus_one = false;             // norms stored as 1 + w (Gemma 2); the loader wants w
  bool gguf_silu = true;                        // hidden_act silu (the metadata does not say)
  bool gguf_o_bias = true;                      // attn_output.bias present with attn_q.bias (Qwen2: q/k/v biases only)
  bool gguf_sliding_window = false;             // <arch>.attention.sliding_window turns the window on (Qwen2, Phi-3)
  bool gguf_softcaps = false;                   // soft-caps, window and attention.scale of Gemma 2
  bool gguf_rope_freqs = false;                 // rope_freqs.weight: llama 3.x frequency factors
  bool gguf_rope_factor_pair = false;           // rope_factors_long / _short.weight: longrope (Phi-3)
  std::vector<const char*> gguf_rope_scalings;  // <arch>.rope.scaling.type values read besides none
};

// Every architecture, in the order error messages list them.
const std::vector<ArchSpec>& arch_specs();
// The entry of ArchConfig::name `name`; throws Error for a name that is none.
const ArchSpec& arch_spec(const std::string& name);
// The entry for config.json's class (or, without one, its model_type); null if none.
const ArchSpec* find_arch_hf(const std::string& hf_class, const std::string& model_type);
// The entry for a GGUF general.architecture; null if none.
const ArchSpec* find_arch_gguf(const std::string& gguf_arch);
// "A, B and C": the HF classes (hf = true) or the GGUF architectures of the table.
std::string arch_names(bool hf);

// The per-architecture config functions of the table (config_arch.cpp).
void parse_llama_family(const Fields& f, const std::string& path, ModelConfig& c);
void parse_mistral(const Fields& f, const std::string& path, ModelConfig& c);
void parse_qwen2(const Fields& f, const std::string& path, ModelConfig& c);
void parse_qwen3(const Fields& f, const std::string& path, ModelConfig& c);
void parse_phi3(const Fields& f, const std::string& path, ModelConfig& c);
void parse_olmo2(const Fields& f, const std::string& path, ModelConfig& c);
void parse_gemma2(const Fields& f, const std::string& path, ModelConfig& c);
void parse_gpt2(const Fields& f, const std::string& path, ModelConfig& c);

}  // namespace focal
