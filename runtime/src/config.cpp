// Parsing of config.json (Hugging Face LlamaForCausalLM family plus focalscope's "focal" object).
#include "focal/config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "arch_table.h"
#include "config_fields.h"
#include "focal/error.h"

namespace focal {

using json = nlohmann::json;

const char* attn_mode_name(AttnMode m) {
  switch (m) {
    case AttnMode::kStandard: return "standard";
    case AttnMode::kFocal: return "focal";
    case AttnMode::kLearned: return "learned";
    case AttnMode::kSsmax: return "ssmax";
  }
  return "?";
}

const char* tau_mode_name(TauMode m) {
  switch (m) {
    case TauMode::kSequenceMean: return "sequence_mean";
    case TauMode::kPrefixMean: return "prefix_mean";
    case TauMode::kPerToken: return "per_token";
  }
  return "?";
}

AttnMode parse_attn_mode(const std::string& s, const std::string& where) {
  if (s == "standard") return AttnMode::kStandard;
  if (s == "focal" || s == "constant") return AttnMode::kFocal;
  if (s == "learned") return AttnMode::kLearned;
  if (s == "ssmax") return AttnMode::kSsmax;
  throw Error(where + ": unknown attention mode '" + s + "' (use standard, focal, learned or ssmax)");
}

TauMode parse_tau_mode(const std::string& s, const std::string& where) {
  if (s == "sequence_mean") return TauMode::kSequenceMean;
  if (s == "prefix_mean") return TauMode::kPrefixMean;
  if (s == "per_token") return TauMode::kPerToken;
  throw Error(where + ": unknown tau_mode '" + s + "' (use sequence_mean, prefix_mean or per_token)");
}

namespace {

// Largest sizes config.json may declare; real models are far below (the weights are checked against them at load).
constexpr int64_t kMaxDim = 1LL << 24;

}  // namespace

ModelConfig parse_config(const std::string& text, const std::string& path, const ConfigFieldNames* aliases_in) {
  const ConfigFieldNames* aliases = aliases_in;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond 64 bits
    throw Error(path + ": malformed JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error(path + ": expected a JSON object, found " + describe(j));
  // Architecture: the class name (or model_type) picks the layout; anything else is refused rather than run wrongly.
  std::string arch_class;
  if (auto it = j.find("architectures"); it != j.end() && !it->is_null()) {
    const json& a = *it;
    if (!a.is_array() || a.empty() || !a[0].is_string())
      throw Error(path +
                  ": field \"architectures\" must be a list of class names such as [\"LlamaForCausalLM\"], found " +
                  describe(a));
    arch_class = a[0].get<std::string>();
  }
  std::string model_type;
  if (auto it = j.find("model_type"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) throw Error(path + ": field \"model_type\" must be a string, found " + describe(*it));
    model_type = it->get<std::string>();
  }
  // GPTQ / AWQ / bitsandbytes / FP8 checkpoints store packed weights under other tensor names (qweight, scales): say
  // so, not "tensor q_proj.weight is missing".
  if (auto it = j.find("quantization_config"); it != j.end() && it->is_object()) {
    const std::string method = it->contains("quant_method") && (*it)["quant_method"].is_string()
                                   ? (*it)["quant_method"].get<std::string>()
                                   : std::string("unnamed");
    throw Error(path + ": quantization_config.quant_method '" + method +
                "' is not read by focalscope (its packed tensors are not plain weights): use the model's "
                "unquantized checkpoint (bf16 / fp16 / fp32 safetensors), or a GGUF file of it");
  }
  const ArchSpec* spec = find_arch_hf(arch_class, model_type);
  if (!spec)
    throw Error(path + ": unsupported architecture '" + (arch_class.empty() ? model_type : arch_class) +
                "' (focalscope runs " + arch_names(true) + ")");
  // An architecture that names its sizes differently (GPT-2): read them under the LLaMA names, errors still naming
  // its own keys.
  ConfigFieldNames own_names;
  if (!spec->key_names.empty()) {
    if (aliases) own_names = *aliases;
    for (auto [llama_key, own_key] : spec->key_names) {
      j.erase(llama_key);
      if (auto it = j.find(own_key); it != j.end()) j[llama_key] = *it;
      if (!own_names.count(llama_key)) own_names[llama_key] = own_key;
    }
    aliases = &own_names;
  }
  if (spec->ffn_default_4h && (!j.contains("intermediate_size") || j["intermediate_size"].is_null()))
    if (auto it = j.find("hidden_size"); it != j.end() && it->is_number_integer())
      j["intermediate_size"] = 4 * it->get<int64_t>();
  const Fields f(j, path, "", aliases);

  ModelConfig c;
  c.source_json = text;
  c.vocab_size = int(f.integer("vocab_size", 0, 1, kMaxDim, true));
  c.hidden = int(f.integer("hidden_size", 0, 1, kMaxDim, true));
  c.intermediate = int(f.integer("intermediate_size", 0, 1, kMaxDim, true));
  c.n_layers = int(f.integer("num_hidden_layers", 0, 1, 1 << 16, true));
  c.n_heads = int(f.integer("num_attention_heads", 0, 1, 1 << 16, true));
  c.n_kv_heads = int(f.integer("num_key_value_heads", c.n_heads, 1, 1 << 16));
  c.max_positions = int(f.integer("max_position_embeddings", 2048, 1, 1LL << 30));
  c.rope_theta = f.positive("rope_theta", 10000.0f);
  c.rms_eps = f.positive("rms_norm_eps", spec->norm_eps_default);
  c.arch.name = spec->name;
  c.tied_embeddings = f.boolean("tie_word_embeddings", spec->tied_default);
  c.attention_bias = f.boolean("attention_bias", false);
  c.bos_id = f.token_id("bos_token_id");
  c.eos_id = f.token_id("eos_token_id");
  c.eos_ids = f.token_ids("eos_token_id");

  if (c.n_heads % c.n_kv_heads != 0)
    throw Error(path + ": " + f.name("num_attention_heads") + " (" + std::to_string(c.n_heads) +
                ") must be a multiple of " + f.name("num_key_value_heads") + " (" + std::to_string(c.n_kv_heads) + ")");
  if (c.hidden % c.n_heads != 0 && !f.has("head_dim"))
    throw Error(path + ": hidden_size is not a multiple of num_attention_heads; give \"head_dim\" explicitly");
  c.d_head = int(f.integer("head_dim", c.hidden / c.n_heads, 1, 1 << 20));
  if (c.d_head % 2 != 0 || c.d_head < 2 || c.d_head > 1024) {
    const std::string how =
        f.has("head_dim") ? f.name("head_dim") : f.name("hidden_size") + " / " + f.name("num_attention_heads");
    throw Error(path + ": head_dim " + std::to_string(c.d_head) + " (" + how + ") must be even and in 2..1024");
  }
  // Special ids outside the vocabulary are ignored with a warning (some exporters write ids of a larger tokenizer).
  for (auto [key, id] : {std::pair<const char*, int*>{"bos_token_id", &c.bos_id}, {"eos_token_id", &c.eos_id}})
    if (*id >= c.vocab_size) {
      c.warnings.push_back(path + ": " + f.name(key) + " = " + std::to_string(*id) + " is outside the vocabulary (" +
                           f.name("vocab_size") + " " + std::to_string(c.vocab_size) + "); it is ignored");
      *id = -1;
    }
  c.eos_ids.erase(std::remove_if(c.eos_ids.begin(), c.eos_ids.end(), [&](int id) { return id >= c.vocab_size; }),
                  c.eos_ids.end());

  if (const json* fj = f.object("focal")) {
    const Fields ff(*fj, path, "focal.", aliases);
    FocalConfig& fc = c.focal;
    fc.mode = parse_attn_mode(ff.string("mode", "standard"), path + ": field \"focal.mode\"");
    fc.focal_temp = ff.positive("focal_temp", 1.0f);
    if (fc.mode == AttnMode::kLearned) {
      fc.has_tau = true;
      fc.tau_bias = ff.boolean("tau_bias", false);
      fc.tau_min = ff.number("tau_min", 0.0f);
      fc.tau_max = ff.number("tau_max", 0.0f);
      if (!(fc.tau_min > 0.0f) || !(fc.tau_max >= fc.tau_min))
        throw Error(path + ": \"focal\": learned mode needs 0 < tau_min <= tau_max (got " + std::to_string(fc.tau_min) +
                    ", " + std::to_string(fc.tau_max) + ")");
      fc.tau_mode = parse_tau_mode(ff.string("tau_mode", "prefix_mean"), path + ": field \"focal.tau_mode\"");
    }
  }
  c.add_bos = c.bos_id >= 0 && f.boolean("add_bos_token", true);
  parse_architecture(f, path, *spec, c);
  return c;
}

}  // namespace focal
