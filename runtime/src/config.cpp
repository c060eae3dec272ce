// Parsing of config.json (Hugging Face LlamaForCausalLM family plus focalscope's "focal" object).
#include "focal/config.h"

#include <cmath>
#include <nlohmann/json.hpp>

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

int get_int(const json& j, const char* key, const std::string& path, int def, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) throw Error(path + ": required field \"" + key + "\" is missing");
    return def;
  }
  if (!it->is_number_integer()) throw Error(path + ": field \"" + key + "\" must be an integer");
  const long long v = it->get<long long>();
  if (v < 0 || v > (1LL << 30)) throw Error(path + ": field \"" + key + "\" = " + std::to_string(v) + " is out of range");
  return (int)v;
}

float get_float(const json& j, const char* key, const std::string& path, float def) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_number()) throw Error(path + ": field \"" + key + "\" must be a number");
  const double v = it->get<double>();
  if (!std::isfinite(v) || std::fabs(v) > 3.0e38)
    throw Error(path + ": field \"" + key + "\" must be finite (and within float range)");
  return (float)v;
}

bool get_bool(const json& j, const char* key, const std::string& path, bool def) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return def;
  if (!it->is_boolean()) throw Error(path + ": field \"" + key + "\" must be true or false");
  return it->get<bool>();
}

int get_token_id(const json& j, const char* key, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return -1;
  if (it->is_array()) {  // some configs list several eos ids; the first is used
    if (it->empty() || !(*it)[0].is_number_integer()) throw Error(path + ": field \"" + key + "\" is malformed");
    return (*it)[0].get<int>();
  }
  if (!it->is_number_integer()) throw Error(path + ": field \"" + key + "\" must be an integer");
  return it->get<int>();
}

}  // namespace

ModelConfig parse_config(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond 64 bits
    throw Error(path + ": malformed JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error(path + ": expected a JSON object");

  // Architecture: LLaMA family (LLaMA, Mistral without sliding window, Qwen-style QK-norm models with the same
  // tensor names). Anything else is refused rather than run wrongly.
  std::string arch;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    arch = j["architectures"][0].get<std::string>();
  const std::string model_type = j.value("model_type", std::string());
  const bool ok_arch = arch == "LlamaForCausalLM" || arch == "MistralForCausalLM" || arch == "Qwen3ForCausalLM" ||
                       (arch.empty() && (model_type == "llama" || model_type == "mistral" || model_type == "qwen3"));
  if (!ok_arch)
    throw Error(path + ": unsupported architecture '" + (arch.empty() ? model_type : arch) +
                "' (focalscope runs LlamaForCausalLM-family models: llama, mistral, qwen3)");
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    throw Error(path + ": \"rope_scaling\" is not supported yet (remove it or use a model without RoPE scaling)");
  if (get_bool(j, "mlp_bias", path, false)) throw Error(path + ": \"mlp_bias\": true is not supported");
  if (j.contains("sliding_window") && !j["sliding_window"].is_null() && j.value("use_sliding_window", true) &&
      model_type == "mistral")
    throw Error(path + ": sliding-window attention is not supported (set \"sliding_window\": null)");
  const std::string act = j.value("hidden_act", std::string("silu"));
  if (act != "silu") throw Error(path + ": \"hidden_act\" '" + act + "' is not supported (only silu)");

  ModelConfig c;
  c.source_json = text;
  c.vocab_size = get_int(j, "vocab_size", path, 0, true);
  c.hidden = get_int(j, "hidden_size", path, 0, true);
  c.intermediate = get_int(j, "intermediate_size", path, 0, true);
  c.n_layers = get_int(j, "num_hidden_layers", path, 0, true);
  c.n_heads = get_int(j, "num_attention_heads", path, 0, true);
  c.n_kv_heads = get_int(j, "num_key_value_heads", path, c.n_heads, false);
  c.max_positions = get_int(j, "max_position_embeddings", path, 2048, false);
  c.rope_theta = get_float(j, "rope_theta", path, 10000.0f);
  c.rms_eps = get_float(j, "rms_norm_eps", path, 1e-6f);
  c.tied_embeddings = get_bool(j, "tie_word_embeddings", path, false);
  c.attention_bias = get_bool(j, "attention_bias", path, false);
  c.bos_id = get_token_id(j, "bos_token_id", path);
  c.eos_id = get_token_id(j, "eos_token_id", path);

  for (auto [name, v] : {std::pair<const char*, int>{"vocab_size", c.vocab_size}, {"hidden_size", c.hidden},
                         {"intermediate_size", c.intermediate}, {"num_hidden_layers", c.n_layers},
                         {"num_attention_heads", c.n_heads}, {"num_key_value_heads", c.n_kv_heads},
                         {"max_position_embeddings", c.max_positions}})
    if (v <= 0) throw Error(path + ": field \"" + name + "\" must be positive");
  if (c.n_heads % c.n_kv_heads != 0)
    throw Error(path + ": num_attention_heads (" + std::to_string(c.n_heads) +
                ") must be a multiple of num_key_value_heads (" + std::to_string(c.n_kv_heads) + ")");
  if (c.hidden % c.n_heads != 0 && !j.contains("head_dim"))
    throw Error(path + ": hidden_size is not a multiple of num_attention_heads; give \"head_dim\" explicitly");
  c.d_head = get_int(j, "head_dim", path, c.hidden / c.n_heads, false);
  if (c.d_head <= 0 || c.d_head % 2 != 0 || c.d_head > 1024)
    throw Error(path + ": head_dim " + std::to_string(c.d_head) + " must be even and in 2..1024");
  if (!(c.rope_theta > 0.0f)) throw Error(path + ": rope_theta must be positive");
  if (!(c.rms_eps > 0.0f)) throw Error(path + ": rms_norm_eps must be positive");

  if (j.contains("focal") && !j["focal"].is_null()) {
    const json& f = j["focal"];
    const std::string fp = path + ": \"focal\"";
    if (!f.is_object()) throw Error(fp + " must be an object");
    FocalConfig& fc = c.focal;
    fc.mode = parse_attn_mode(f.value("mode", std::string("standard")), fp + ".mode");
    fc.focal_temp = get_float(f, "focal_temp", fp, 1.0f);
    if (!(fc.focal_temp > 0.0f)) throw Error(fp + ".focal_temp must be > 0");
    if (fc.mode == AttnMode::kLearned) {
      fc.has_tau = true;
      fc.tau_bias = get_bool(f, "tau_bias", fp, false);
      fc.tau_min = get_float(f, "tau_min", fp, 0.0f);
      fc.tau_max = get_float(f, "tau_max", fp, 0.0f);
      if (!(fc.tau_min > 0.0f) || !(fc.tau_max >= fc.tau_min))
        throw Error(fp + ": learned mode needs 0 < tau_min <= tau_max (got " + std::to_string(fc.tau_min) + ", " +
                    std::to_string(fc.tau_max) + ")");
      fc.tau_mode = parse_tau_mode(f.value("tau_mode", std::string("prefix_mean")), fp + ".tau_mode");
    }
  }
  c.add_bos = c.bos_id >= 0 && get_bool(j, "add_bos_token", path, true);
  return c;
}

}  // namespace focal
