// The architecture table (arch_table.h).
#include "arch_table.h"

#include "focal/error.h"

namespace focal {

namespace {

ArchSpec entry(const char* name, const char* hf_class, const char* model_type, const char* gguf_arch) {
  ArchSpec s;
  s.name = name;
  s.hf_class = hf_class;
  s.model_type = model_type;
  s.gguf_arch = gguf_arch;
  return s;
}

}  // namespace

const std::vector<ArchSpec>& arch_specs() {
  static const std::vector<ArchSpec> kSpecs = [] {
    std::vector<ArchSpec> v;
    ArchSpec llama = entry("llama", "LlamaForCausalLM", "llama", "llama");
    llama.parse_fields = parse_llama_family;
    llama.gguf_qk_permuted = true;
    llama.gguf_rope_freqs = true;
    llama.gguf_rope_scalings = {"linear", "yarn"};
    v.push_back(llama);

    ArchSpec mistral = entry("mistral", "MistralForCausalLM", "mistral", nullptr);  // GGUF files of it say llama
    mistral.parse_fields = parse_mistral;
    v.push_back(mistral);

    ArchSpec qwen2 = entry("qwen2", "Qwen2ForCausalLM", "qwen2", "qwen2");
    qwen2.parse_fields = parse_qwen2;
    qwen2.gguf_o_bias = false;
    qwen2.gguf_sliding_window = true;
    v.push_back(qwen2);

    ArchSpec qwen3 = entry("qwen3", "Qwen3ForCausalLM", "qwen3", nullptr);
    qwen3.parse_fields = parse_qwen3;
    v.push_back(qwen3);

    ArchSpec gemma2 = entry("gemma2", "Gemma2ForCausalLM", "gemma2", "gemma2");
    gemma2.post_norms = true;
    gemma2.tied_default = true;
    gemma2.parse_fields = parse_gemma2;
    gemma2.gguf_norms_plus_one = true;
    gemma2.gguf_silu = false;
    gemma2.gguf_softcaps = true;
    v.push_back(gemma2);

    ArchSpec phi3 = entry("phi3", "Phi3ForCausalLM", "phi3", "phi3");
    phi3.fused_qkv = phi3.fused_gate_up = true;
    phi3.parse_fields = parse_phi3;
    phi3.gguf_sliding_window = true;
    phi3.gguf_rope_factor_pair = true;
    phi3.gguf_rope_scalings = {"longrope"};
    v.push_back(phi3);

    ArchSpec olmo2 = entry("olmo2", "Olmo2ForCausalLM", "olmo2", "olmo2");
    olmo2.post_norms = true;
    olmo2.parse_fields = parse_olmo2;
    v.push_back(olmo2);

    ArchSpec gpt2 = entry("gpt2", "GPT2LMHeadModel", "gpt2", "gpt2");
    gpt2.layout = TensorLayout::kGpt2;
    gpt2.tied_default = true;
    gpt2.ffn_default_4h = true;
    gpt2.norm_eps_default = 1e-5f;
    gpt2.layer_norm = true;
    gpt2.key_names = {{"hidden_size", "n_embd"},
                      {"num_hidden_layers", "n_layer"},
                      {"num_attention_heads", "n_head"},
                      {"intermediate_size", "n_inner"},
                      {"max_position_embeddings", "n_positions"},
                      {"rms_norm_eps", "layer_norm_epsilon"}};
    gpt2.parse_fields = parse_gpt2;
    gpt2.gguf_silu = false;
    v.push_back(gpt2);
    return v;
  }();
  return kSpecs;
}

const ArchSpec& arch_spec(const std::string& name) {
  for (const ArchSpec& s : arch_specs())
    if (name == s.name) return s;
  throw Error("internal: architecture '" + name + "' is not in the architecture table");
}

const ArchSpec* find_arch_hf(const std::string& hf_class, const std::string& model_type) {
  for (const ArchSpec& s : arch_specs())
    if (hf_class == s.hf_class || (hf_class.empty() && model_type == s.model_type)) return &s;
  return nullptr;
}

const ArchSpec* find_arch_gguf(const std::string& gguf_arch) {
  for (const ArchSpec& s : arch_specs())
    if (s.gguf_arch && gguf_arch == s.gguf_arch) return &s;
  return nullptr;
}

std::string arch_names(bool hf) {
  std::vector<const char*> names;
  for (const ArchSpec& s : arch_specs())
    if (hf || s.gguf_arch) names.push_back(hf ? s.hf_class : s.gguf_arch);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + std::string(names[i]);
  return out;
}

}  // namespace focal
