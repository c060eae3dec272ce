// The architecture part of config.json: how LLaMA, Mistral, Qwen2/3, Gemma 2, Phi-3, OLMo 2 and GPT-2 differ, as
// data in ArchConfig (norms, activation, biases, logit scales, soft-caps, windows, positions, rope_scaling). The
// forward pass reads these fields; nothing here is a copy of it. Semantics: transformers 4.47.1, docs/model-format.md.
#include <cmath>
#include <cstdio>

#include "arch_table.h"
#include "config_fields.h"

namespace focal {

const char* rope_type_name(RopeType t) {
  switch (t) {
    case RopeType::kDefault: return "default";
    case RopeType::kLinear: return "linear";
    case RopeType::kDynamic: return "dynamic";
    case RopeType::kYarn: return "yarn";
    case RopeType::kLongrope: return "longrope";
    case RopeType::kLlama3: return "llama3";
    case RopeType::kFreqFactors: return "rope_freqs";
  }
  return "?";
}

bool rope_type_from_name(const std::string& name, RopeType* type) {
  for (RopeType t : {RopeType::kDefault, RopeType::kLinear, RopeType::kDynamic, RopeType::kYarn, RopeType::kLongrope,
                     RopeType::kLlama3, RopeType::kFreqFactors})
    if (name == rope_type_name(t)) {
      *type = t;
      return true;
    }
  return false;
}

float attn_logit_scale(const ModelConfig& c) {
  const float denom = c.arch.query_pre_attn_scalar > 0.0f ? c.arch.query_pre_attn_scalar : (float)c.d_head;
  return 1.0f / sqrtf(denom);
}

int layer_window(const ModelConfig& c, int layer) {
  if (c.arch.sliding_window <= 0) return 0;
  return layer % c.arch.window_period == 0 ? c.arch.sliding_window : 0;
}

bool is_llama_layout(const ModelConfig& c) {
  const ArchConfig& a = c.arch;
  return a.norm == NormKind::kRms && a.pre_attn_norm && !a.post_attn_norm && a.pre_mlp_norm && !a.post_mlp_norm &&
         a.qk_norm != QkNormKind::kWhole && a.act == MlpActivation::kSilu && a.gated_mlp && !a.mlp_bias &&
         a.query_pre_attn_scalar == 0.0f && a.attn_softcap == 0.0f && a.final_softcap == 0.0f &&
         a.embed_scale == 1.0f && a.sliding_window == 0 && a.position == PositionKind::kRope &&
         a.rope.type == RopeType::kDefault && !a.norm_plus_one;
}

namespace {

std::string num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> arch_summary(const ModelConfig& c) {
  const ArchConfig& a = c.arch;
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("architecture", a.name);
  std::string norm = a.norm == NormKind::kLayerNorm ? "LayerNorm (with bias)"
                     : a.norm_plus_one              ? "RMSNorm (1 + w)"
                                                    : "RMSNorm";
  std::string where;
  for (auto [on, what] : {std::pair<bool, const char*>{a.pre_attn_norm, "pre-attention"},
                          {a.post_attn_norm, "post-attention"},
                          {a.pre_mlp_norm, "pre-MLP"},
                          {a.post_mlp_norm, "post-MLP"}})
    if (on) where += (where.empty() ? "" : ", ") + std::string(what);
  out.emplace_back("norms", norm + ": " + where);
  if (a.qk_norm != QkNormKind::kNone || c.qk_norm)
    out.emplace_back("qk_norm",
                     a.qk_norm == QkNormKind::kWhole ? "RMSNorm over the whole q / k projection" : "RMSNorm per head");
  const char* act = a.act == MlpActivation::kSilu ? "SiLU" : a.act == MlpActivation::kGeluTanh ? "GELU (tanh)" : "GELU";
  out.emplace_back("mlp", std::string(a.gated_mlp ? "gated, " : "plain, ") + act);
  std::string bias;
  for (auto [on, what] : {std::pair<bool, const char*>{a.qkv_bias, "q/k/v"}, {a.o_bias, "o"}, {a.mlp_bias, "mlp"}})
    if (on) bias += (bias.empty() ? "" : ", ") + std::string(what);
  out.emplace_back("biases", bias.empty() ? "none" : bias);
  out.emplace_back("logit_scale", a.query_pre_attn_scalar > 0.0f
                                      ? "1/sqrt(" + num(a.query_pre_attn_scalar) + ") (query_pre_attn_scalar)"
                                      : "1/sqrt(" + std::to_string(c.d_head) + ") (head_dim)");
  out.emplace_back("softcap", a.attn_softcap > 0.0f || a.final_softcap > 0.0f
                                  ? "attention " + (a.attn_softcap > 0.0f ? num(a.attn_softcap) : "none") + ", final " +
                                        (a.final_softcap > 0.0f ? num(a.final_softcap) : "none")
                                  : "none");
  out.emplace_back("window", a.sliding_window <= 0 ? "none (full causal)"
                             : a.window_period == 1
                                 ? std::to_string(a.sliding_window) + " keys, every layer"
                                 : std::to_string(a.sliding_window) + " keys, on every " +
                                       std::to_string(a.window_period) + " layers from layer 0 (0, " +
                                       std::to_string(a.window_period) + ", ...)");
  if (a.position == PositionKind::kLearned) {
    out.emplace_back("positions", "learned absolute (" + std::to_string(c.max_positions) + ")");
  } else {
    std::string r = "RoPE theta " + num(c.rope_theta);
    const RopeScaling& rs = a.rope;
    if (rs.type != RopeType::kDefault) {
      r += ", scaling " + std::string(rope_type_name(rs.type));
      if (rs.type != RopeType::kLongrope && rs.type != RopeType::kFreqFactors) r += " factor " + num(rs.factor);
      if (rs.original_max_positions > 0) r += ", original context " + std::to_string(rs.original_max_positions);
      float f = 1.0f;
      (void)rope_inv_freq(c, c.max_positions, &f);
      if (f != 1.0f) r += ", attention factor " + num(f) + " (logits x " + num((double)f * f) + ")";
    }
    out.emplace_back("positions", r);
  }
  if (a.embed_scale != 1.0f) out.emplace_back("embed_scale", num(a.embed_scale));
  return out;
}

namespace {

// A soft-cap field: null or absent is none; a number must be > 0.
float softcap_field(const Fields& f, const char* key, float def) {
  if (!f.has(key)) return f.find(key) ? 0.0f : def;
  const float x = f.number(key, def);
  if (!(x > 0.0f)) f.fail(key, "= " + std::to_string(x) + " must be > 0 (or null for no soft-capping)");
  return x;
}

std::vector<float> factor_list(const Fields& rf, const char* key, int want) {
  const json* v = rf.find(key);
  if (!v) rf.fail(key, "is required for longrope (a list of head_dim / 2 = " + std::to_string(want) + " numbers)");
  if (!v->is_array()) rf.fail(key, "must be a list of numbers, found " + describe(*v));
  if ((int)v->size() != want)
    rf.fail(key, "has " + std::to_string(v->size()) + " entries but needs head_dim / 2 = " + std::to_string(want));
  std::vector<float> out;
  for (const json& x : *v) {
    if (!x.is_number() || !std::isfinite(x.get<double>()) || !(x.get<double>() > 0.0))
      rf.fail(key, "must hold positive numbers, found " + describe(x));
    out.push_back((float)x.get<double>());
  }
  return out;
}

// su_is_longrope: Phi-3's older configs name longrope "su" or "yarn"; Phi3Config reads both as longrope.
void parse_rope_scaling(const Fields& f, const std::string& path, ModelConfig& c, bool su_is_longrope = false) {
  RopeScaling& r = c.arch.rope;
  const json* rs = f.object("rope_scaling");
  if (!rs) return;
  const Fields rf(*rs, path, "rope_scaling.", nullptr);
  std::string type = rf.string("rope_type", "");
  if (type.empty()) type = rf.string("type", "");
  if (type.empty()) rf.fail("rope_type", "is missing (give one of default, linear, dynamic, yarn, longrope, llama3)");
  if (type == "default") return;
  if (su_is_longrope && type == "yarn") type = "longrope";
  if (type == "su") type = "longrope";  // the older name
  if (!rope_type_from_name(type, &r.type) || r.type == RopeType::kFreqFactors)
    rf.fail("rope_type",
            "= '" + type + "' is not supported (supported: default, linear, dynamic, yarn, longrope (or su), llama3)");
  if (r.type != RopeType::kLongrope) {
    if (!rf.has("factor")) rf.fail("factor", "is required for rope type '" + type + "'");
    r.factor = rf.positive("factor", 1.0f);
    if (r.factor < 1.0f && r.type != RopeType::kLinear) rf.fail("factor", "must be >= 1 for rope type '" + type + "'");
  }
  if (r.type == RopeType::kLlama3) {
    r.low_freq_factor = rf.positive("low_freq_factor", 1.0f);
    r.high_freq_factor = rf.positive("high_freq_factor", 4.0f);
    if (!(r.high_freq_factor > r.low_freq_factor))
      rf.fail("high_freq_factor", "must be larger than rope_scaling.low_freq_factor");
    r.original_max_positions = (int)rf.integer("original_max_position_embeddings", 0, 1, 1LL << 30, true);
  }
  if (r.type == RopeType::kYarn) {
    r.attention_factor = rf.has("attention_factor") ? rf.positive("attention_factor", 1.0f) : 0.0f;
    r.beta_fast = rf.positive("beta_fast", 32.0f);
    r.beta_slow = rf.positive("beta_slow", 1.0f);
  }
  if (r.type == RopeType::kLongrope) {
    r.short_factor = factor_list(rf, "short_factor", c.d_head / 2);
    r.long_factor = factor_list(rf, "long_factor", c.d_head / 2);
    r.attention_factor = rf.has("attention_factor") ? rf.positive("attention_factor", 1.0f) : 0.0f;
    r.factor = rf.has("factor") ? rf.positive("factor", 1.0f) : 0.0f;
    r.original_max_positions = (int)f.integer("original_max_position_embeddings", 0, 1, 1LL << 30);
    if (r.original_max_positions == 0 && r.factor == 0.0f)
      f.fail("original_max_position_embeddings", "is required for longrope (or give rope_scaling.factor)");
  }
}

// A sliding window of `key` applied to every window_period-th layer; larger than the context is refused, except
// where `beyond_context_ok`: Phi-3's 128k checkpoints (Phi-3-mini-128k, Phi-3.5-mini) ship sliding_window 262144
// with a 131072 context, a window that never masks a key (transformers applies it the same way), so it loads as
// no window.
void set_window(const Fields& f, ModelConfig& c, const char* key, int period, bool beyond_context_ok = false) {
  if (!f.has(key)) return;
  const int w = (int)f.integer(key, 0, 1, 1LL << 30);
  if (w > c.max_positions) {
    if (beyond_context_ok) return;
    f.fail(key, "= " + std::to_string(w) + " is larger than the context (" + f.name("max_position_embeddings") + " = " +
                    std::to_string(c.max_positions) + ")");
  }
  c.arch.sliding_window = w;
  c.arch.window_period = period;
}

void require_act(const Fields& f, const char* key, const std::string& def, const char* want) {
  const std::string act = f.string(key, def);
  if (act != want) f.fail(key, "= '" + act + "' is not supported for this architecture (only " + want + ")");
}

}  // namespace

void parse_architecture(const Fields& f, const std::string& path, const ArchSpec& spec, ModelConfig& c) {
  ArchConfig& a = c.arch;
  a.name = spec.name;
  a.qkv_bias = a.o_bias = c.attention_bias;
  if (f.has("sliding_window")) (void)f.integer("sliding_window", 0, 0, 1LL << 30);  // typed even where unused
  spec.parse_fields(f, path, c);
}

// The architectures' own fields (the table's parse_fields, arch_table.cpp).

void parse_llama_family(const Fields& f, const std::string& path, ModelConfig& c) {
  require_act(f, "hidden_act", "silu", "silu");
  c.arch.mlp_bias = f.boolean("mlp_bias", false);
  parse_rope_scaling(f, path, c);
}

void parse_mistral(const Fields& f, const std::string& path, ModelConfig& c) {
  parse_llama_family(f, path, c);
  set_window(f, c, "sliding_window", 1);
}

void parse_phi3(const Fields& f, const std::string& path, ModelConfig& c) {
  require_act(f, "hidden_act", "silu", "silu");
  c.arch.mlp_bias = f.boolean("mlp_bias", false);
  parse_rope_scaling(f, path, c, /*su_is_longrope=*/true);
  set_window(f, c, "sliding_window", 1, /*beyond_context_ok=*/true);
}

void parse_qwen2(const Fields& f, const std::string& path, ModelConfig& c) {
  parse_llama_family(f, path, c);
  c.arch.qkv_bias = true;  // Qwen2: q/k/v biases, none on o_proj
  c.arch.o_bias = false;
  if (const json* sw = f.find("sliding_window"))
    if (!sw->is_number_integer()) f.fail("sliding_window", "must be an integer or null, found " + describe(*sw));
  if (f.boolean("use_sliding_window", false)) set_window(f, c, "sliding_window", 1);
}

void parse_qwen3(const Fields& f, const std::string& path, ModelConfig& c) {
  parse_llama_family(f, path, c);
  if (f.boolean("use_sliding_window", false))
    f.fail("use_sliding_window", "= true is not supported for Qwen3 (set it to false)");
}

void parse_olmo2(const Fields& f, const std::string& path, ModelConfig& c) {
  parse_llama_family(f, path, c);
  ArchConfig& a = c.arch;
  a.pre_attn_norm = a.pre_mlp_norm = false;
  a.post_attn_norm = a.post_mlp_norm = true;
  a.qk_norm = QkNormKind::kWhole;
}

void parse_gemma2(const Fields& f, const std::string& path, ModelConfig& c) {
  ArchConfig& a = c.arch;
  a.attn_softcap = softcap_field(f, "attn_logit_softcapping", 50.0f);
  a.final_softcap = softcap_field(f, "final_logit_softcapping", 30.0f);
  a.query_pre_attn_scalar = f.positive("query_pre_attn_scalar", 256.0f);
  const char* act_key = f.has("hidden_activation") ? "hidden_activation" : "hidden_act";
  const std::string act = f.string(act_key, "gelu_pytorch_tanh");
  if (act != "gelu_pytorch_tanh" && act != "gelu_tanh")
    f.fail(act_key, "= '" + act + "' is not supported (Gemma 2 uses gelu_pytorch_tanh)");
  a.act = MlpActivation::kGeluTanh;
  a.norm_plus_one = true;
  a.post_attn_norm = a.post_mlp_norm = true;
  a.embed_scale = (float)std::sqrt((double)c.hidden);  // torch.tensor(hidden ** 0.5, dtype=float32)
  set_window(f, c, "sliding_window", 2);
  parse_rope_scaling(f, path, c);
}

void parse_gpt2(const Fields& f, const std::string& path, ModelConfig& c) {
  (void)path;
  ArchConfig& a = c.arch;
  const std::string act = f.string("activation_function", "gelu_new");
  if (act == "gelu_new" || act == "gelu_pytorch_tanh")
    a.act = MlpActivation::kGeluTanh;
  else if (act == "gelu")
    a.act = MlpActivation::kGelu;
  else
    f.fail("activation_function", "= '" + act + "' is not supported (gelu_new, gelu_pytorch_tanh or gelu)");
  if (f.boolean("scale_attn_by_inverse_layer_idx", false))
    f.fail("scale_attn_by_inverse_layer_idx", "= true is not supported (set it to false)");
  a.norm = NormKind::kLayerNorm;
  a.gated_mlp = false;
  a.qkv_bias = a.o_bias = a.mlp_bias = true;
  a.position = PositionKind::kLearned;
  c.add_bos = c.bos_id >= 0 && f.boolean("add_bos_token", false);              // GPT-2 prompts start without BOS
  if (!f.boolean("scale_attn_weights", true)) a.query_pre_attn_scalar = 1.0f;  // logits q.k unscaled
}

}  // namespace focal
