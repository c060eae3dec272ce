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

// How a JSON value looks in an error message: its type and (short) value.
std::string describe(const json& v) {
  if (v.is_array() || v.is_object())  // not dumped: a hostile file may nest them deeply
    return std::string(v.is_array() ? "an array" : "an object") + " of " + std::to_string(v.size()) + " entries";
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  const char* kind = v.is_string()           ? "a string"
                     : v.is_boolean()        ? "a boolean"
                     : v.is_null()           ? "null"
                     : v.is_array()          ? "an array"
                     : v.is_object()         ? "an object"
                     : v.is_number_integer() ? "an integer"
                                             : "a number";
  return std::string(kind) + " (" + text + ")";
}

// Every config.json field is read through this: a missing field takes its default; a present one must have the
// expected type and range, or the error names the file, the field, what was expected and what was found. `prefix`
// names a nested object ("focal."); `aliases` maps a field to the name its source used (GGUF metadata keys).
class Fields {
 public:
  Fields(const json& j, std::string path, std::string prefix, const ConfigFieldNames* aliases)
      : j_(j), path_(std::move(path)), prefix_(std::move(prefix)), aliases_(aliases) {}

  std::string name(const char* key) const {
    std::string full = prefix_ + key;
    if (aliases_) {
      auto it = aliases_->find(full);
      if (it != aliases_->end()) return it->second;
    }
    return full;
  }
  [[noreturn]] void fail(const char* key, const std::string& what) const {
    throw Error(path_ + ": field \"" + name(key) + "\" " + what);
  }
  const json* find(const char* key) const {
    auto it = j_.find(key);
    return (it == j_.end() || it->is_null()) ? nullptr : &*it;
  }
  bool has(const char* key) const { return find(key) != nullptr; }

  int64_t integer(const char* key, int64_t def, int64_t lo, int64_t hi, bool required = false) const {
    const json* v = find(key);
    if (!v) {
      if (required) fail(key, "is required but missing");
      return def;
    }
    if (!v->is_number_integer()) fail(key, "must be an integer, found " + describe(*v));
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi))
      fail(key, "= " + v->dump() + " is out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi)
      fail(key, "= " + std::to_string(x) + " is out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    return x;
  }
  float number(const char* key, float def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_number()) fail(key, "must be a number, found " + describe(*v));
    const double x = v->get<double>();
    if (!std::isfinite(x) || std::fabs(x) > 3.0e38)
      fail(key, "= " + v->dump() + " must be finite (and within float range)");
    return float(x);
  }
  float positive(const char* key, float def) const {
    const float x = number(key, def);
    if (!(x > 0.0f)) fail(key, "= " + std::to_string(x) + " must be > 0");
    return x;
  }
  bool boolean(const char* key, bool def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_boolean()) fail(key, "must be true or false, found " + describe(*v));
    return v->get<bool>();
  }
  std::string string(const char* key, const std::string& def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_string()) fail(key, "must be a string, found " + describe(*v));
    return v->get<std::string>();
  }
  // A token id, or a list of them (some configs list several eos ids; the first is used). -1: absent.
  int token_id(const char* key) const {
    const json* v = find(key);
    if (!v) return -1;
    const json* first = v;
    if (v->is_array()) {
      if (v->empty()) fail(key, "is an empty list (give a token id)");
      first = &(*v)[0];
    }
    if (!first->is_number_integer()) fail(key, "must be an integer token id, found " + describe(*v));
    if (first->get<int64_t>() < 0 || first->get<int64_t>() > (1LL << 30))
      fail(key, "= " + first->dump() + " is not a valid token id");
    return int(first->get<int64_t>());
  }
  const json* object(const char* key) const {
    const json* v = find(key);
    if (v && !v->is_object()) fail(key, "must be an object, found " + describe(*v));
    return v;
  }

 private:
  const json& j_;
  std::string path_, prefix_;
  const ConfigFieldNames* aliases_;
};

// Largest sizes config.json may declare; real models are far below (the weights are checked against them at load).
constexpr int64_t kMaxDim = 1LL << 24;

}  // namespace

ModelConfig parse_config(const std::string& text, const std::string& path, const ConfigFieldNames* aliases) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond 64 bits
    throw Error(path + ": malformed JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw Error(path + ": expected a JSON object, found " + describe(j));
  const Fields f(j, path, "", aliases);

  // Architecture: LLaMA family (LLaMA, Mistral without sliding window, Qwen-style QK-norm models with the same
  // tensor names). Anything else is refused rather than run wrongly.
  std::string arch;
  if (const json* a = f.find("architectures")) {
    if (!a->is_array() || a->empty() || !(*a)[0].is_string())
      f.fail("architectures", "must be a list of class names such as [\"LlamaForCausalLM\"], found " + describe(*a));
    arch = (*a)[0].get<std::string>();
  }
  const std::string model_type = f.string("model_type", "");
  const bool ok_arch = arch == "LlamaForCausalLM" || arch == "MistralForCausalLM" || arch == "Qwen3ForCausalLM" ||
                       (arch.empty() && (model_type == "llama" || model_type == "mistral" || model_type == "qwen3"));
  if (!ok_arch)
    throw Error(path + ": unsupported architecture '" + (arch.empty() ? model_type : arch) +
                "' (focalscope runs LlamaForCausalLM-family models: llama, mistral, qwen3)");
  if (f.has("rope_scaling"))
    throw Error(path + ": \"rope_scaling\" is not supported yet (remove it or use a model without RoPE scaling)");
  if (f.boolean("mlp_bias", false)) throw Error(path + ": \"mlp_bias\": true is not supported");
  if (const json* sw = f.find("sliding_window")) {
    if (!sw->is_number_integer()) f.fail("sliding_window", "must be an integer or null, found " + describe(*sw));
    if (f.boolean("use_sliding_window", true) && model_type == "mistral")
      throw Error(path + ": sliding-window attention is not supported (set \"sliding_window\": null)");
  }
  const std::string act = f.string("hidden_act", "silu");
  if (act != "silu") f.fail("hidden_act", "= '" + act + "' is not supported (only silu)");

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
  c.rms_eps = f.positive("rms_norm_eps", 1e-6f);
  c.tied_embeddings = f.boolean("tie_word_embeddings", false);
  c.attention_bias = f.boolean("attention_bias", false);
  c.bos_id = f.token_id("bos_token_id");
  c.eos_id = f.token_id("eos_token_id");

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
  return c;
}

}  // namespace focal
