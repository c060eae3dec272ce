// GGUF (llama architecture) -> ModelConfig + HF-named tensors + tokenizer. Key mapping: docs/model-format.md.
#include "gguf_model.h"

#include "arch_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "focal/error.h"
#include "tokenizer_internal.h"

namespace focal {

using json = nlohmann::json;

namespace {

struct Meta {
  const GgufFile& f;
  std::string where;  // "'path'"

  const GgufValue* get(const std::string& k) const { return f.find(k); }
  int64_t int_req(const std::string& k) const {
    const GgufValue* v = get(k);
    if (!v) throw Error(where + ": metadata key '" + k + "' is missing — the file is not a complete llama GGUF");
    if (!v->is_int()) throw Error(where + ": metadata key '" + k + "' must be an integer");
    if (v->i64 <= 0 || v->i64 > (1 << 30))
      throw Error(where + ": metadata key '" + k + "' is " + std::to_string(v->i64) + ", expected a positive size");
    return v->i64;
  }
  int64_t int_opt(const std::string& k, int64_t def) const { return get(k) ? int_req(k) : def; }
  // An integer key whose 0 means "none", as llama.cpp reads it (ARCH.attention.sliding_window: the converter writes 0
  // for a Phi-3-family config with "sliding_window": null, Phi-4's); present and not 0: int_req's checks.
  bool nonzero_int(const std::string& k) const {
    const GgufValue* v = get(k);
    return v && !(v->is_int() && v->i64 == 0);
  }
  double num_opt(const std::string& k, double def) const {
    const GgufValue* v = get(k);
    if (!v) return def;
    if (v->type == kGgufString || v->type == kGgufArray)
      throw Error(where + ": metadata key '" + k + "' must be a number");
    if (!std::isfinite(v->num))
      throw Error(where + ": metadata key '" + k + "' is " + std::to_string(v->num) + ", expected a finite number");
    return v->num;
  }
  int token_id(const std::string& k) const {
    const GgufValue* v = get(k);
    if (!v) return -1;
    if (!v->is_int() || v->i64 < 0 || v->i64 > INT32_MAX)
      throw Error(where + ": metadata key '" + k + "' must be a token id");
    return (int)v->i64;
  }
  bool bool_opt(const std::string& k, bool def) const {
    const GgufValue* v = get(k);
    if (!v) return def;
    if (v->type != kGgufBool) throw Error(where + ": metadata key '" + k + "' must be a bool");
    return v->num != 0;
  }
  std::string str_opt(const std::string& k, const std::string& def) const {
    const GgufValue* v = get(k);
    if (!v) return def;
    if (v->type != kGgufString) throw Error(where + ": metadata key '" + k + "' must be a string");
    return v->str;
  }
  const GgufValue* array(const std::string& k, uint32_t elem) const {
    const GgufValue* v = get(k);
    if (!v) return nullptr;
    const bool num_ok = elem != kGgufString && v->elem_type != kGgufString;
    if (v->type != kGgufArray || (v->elem_type != elem && !num_ok))
      throw Error(where + ": metadata key '" + k + "' must be an array of " +
                  (elem == kGgufString ? "strings" : "numbers"));
    return v;
  }
};

// ARCH.attention.sliding_window present and not 0 (Meta::nonzero_int).
bool window_set(const Meta& m, const std::string& A) { return m.nonzero_int(A + "attention.sliding_window"); }

// GGUF tensor name (llama.cpp's names for `arch`) -> HF name; "" if the name is no tensor of that architecture.
std::string hf_name(const std::string& g, const ArchSpec& arch) {
  const bool gpt2 = arch.layout == TensorLayout::kGpt2;
  if (g == "token_embd.weight") return gpt2 ? "transformer.wte.weight" : "model.embed_tokens.weight";
  if (g == "output_norm.weight") return gpt2 ? "transformer.ln_f.weight" : "model.norm.weight";
  if (gpt2 && g == "output_norm.bias") return "transformer.ln_f.bias";
  if (gpt2 && g == "position_embd.weight") return "transformer.wpe.weight";
  if (g == "output.weight") return "lm_head.weight";
  if (g.compare(0, 4, "blk.") != 0) return "";
  const size_t dot = g.find('.', 4);
  if (dot == std::string::npos || dot == 4) return "";
  const std::string layer = g.substr(4, dot - 4);
  for (char ch : layer)
    if (ch < '0' || ch > '9') return "";
  const std::string rest = g.substr(dot + 1);
  if (gpt2) {
    static const std::pair<const char*, const char*> kGpt2[] = {
        {"attn_norm.weight", "ln_1.weight"},          {"attn_norm.bias", "ln_1.bias"},
        {"attn_qkv.weight", "attn.c_attn.weight"},    {"attn_qkv.bias", "attn.c_attn.bias"},
        {"attn_output.weight", "attn.c_proj.weight"}, {"attn_output.bias", "attn.c_proj.bias"},
        {"ffn_norm.weight", "ln_2.weight"},           {"ffn_norm.bias", "ln_2.bias"},
        {"ffn_up.weight", "mlp.c_fc.weight"},         {"ffn_up.bias", "mlp.c_fc.bias"},
        {"ffn_down.weight", "mlp.c_proj.weight"},     {"ffn_down.bias", "mlp.c_proj.bias"}};
    for (auto& [a, b] : kGpt2)
      if (rest == a) return "transformer.h." + layer + "." + b;
    return "";
  }
  // Norm names whose HF counterpart depends on the architecture: ffn_norm is LLaMA's post_attention_layernorm but
  // Gemma 2's pre_feedforward_layernorm; post_attention_norm is Gemma 2's / OLMo 2's post_attention_layernorm.
  const bool post_norms = arch.post_norms;
  if (rest == "ffn_norm.weight")
    return "model.layers." + layer + "." +
           (post_norms ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight");
  if (rest == "post_attention_norm.weight" && post_norms)
    return "model.layers." + layer + ".post_attention_layernorm.weight";
  if (arch.fused_qkv && rest == "attn_qkv.weight") return "model.layers." + layer + ".self_attn.qkv_proj.weight";
  if (arch.fused_gate_up && rest == "ffn_up.weight") return "model.layers." + layer + ".mlp.gate_up_proj.weight";
  static const std::pair<const char*, const char*> kMap[] = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},
      {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},
      {"attn_output.bias", "self_attn.o_proj.bias"},
      {"attn_q_norm.weight", "self_attn.q_norm.weight"},
      {"attn_k_norm.weight", "self_attn.k_norm.weight"},
      {"post_ffw_norm.weight", "post_feedforward_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
      {"attn_rot_embd", "rotary_emb.inv_freq"},
      {"ffn_gate.bias", "mlp.gate_proj.bias"},
      {"ffn_up.bias", "mlp.up_proj.bias"},
      {"ffn_down.bias", "mlp.down_proj.bias"}};
  for (auto& [a, b] : kMap)
    if (rest == a) return "model.layers." + layer + "." + b;
  return "";
}

}  // namespace

void unpermute_rope_rows(float* w, int n_heads, int d_head, int64_t cols) {
  const int half = d_head / 2;
  std::vector<float> tmp((size_t)d_head * cols);
  for (int h = 0; h < n_heads; ++h) {
    float* head = w + (int64_t)h * d_head * cols;  // [d_head, cols]
    std::memcpy(tmp.data(), head, tmp.size() * sizeof(float));
    for (int i = 0; i < half; ++i)
      for (int s = 0; s < 2; ++s)
        std::memcpy(head + (int64_t)(s * half + i) * cols, tmp.data() + (int64_t)(2 * i + s) * cols,
                    (size_t)cols * sizeof(float));
  }
}

std::unique_ptr<Tokenizer> gguf_tokenizer(const GgufFile& f) {
  Meta m{f, "'" + f.path() + "'"};
  const std::string model = m.str_opt("tokenizer.ggml.model", "");
  if (model.empty()) return nullptr;
  const GgufValue* tokens = m.array("tokenizer.ggml.tokens", kGgufString);
  if (!tokens) throw Error(m.where + ": tokenizer.ggml.model is '" + model + "' but tokenizer.ggml.tokens is missing");
  const GgufValue* types = m.array("tokenizer.ggml.token_type", kGgufI32);
  std::vector<int> type_v;
  if (types) {
    if (types->nums.size() != tokens->strs.size())
      throw Error(m.where + ": tokenizer.ggml.token_type has " + std::to_string(types->nums.size()) +
                  " entries but tokenizer.ggml.tokens has " + std::to_string(tokens->strs.size()));
    for (double t : types->nums) type_v.push_back(t >= kTokNormal && t <= kTokByte ? (int)t : kTokNormal);
  }
  const std::string where = m.where + " (tokenizer.ggml.*)";
  if (model == "gpt2") {
    BpeVocab v;
    v.tokens = tokens->strs;
    v.types = type_v;
    const GgufValue* merges = m.array("tokenizer.ggml.merges", kGgufString);
    if (!merges) throw Error(m.where + ": a gpt2 tokenizer needs tokenizer.ggml.merges, which is missing");
    v.merges = merges->strs;
    v.bos_id = m.token_id("tokenizer.ggml.bos_token_id");
    v.eos_id = m.token_id("tokenizer.ggml.eos_token_id");
    v.unk_id = m.token_id("tokenizer.ggml.unknown_token_id");
    const std::string pre = m.str_opt("tokenizer.ggml.pre", "gpt2");
    // The names llama.cpp's converter writes (its hash of the tokenizer) and llama.cpp reads, by the pattern they
    // select there: "gpt-2" is openai-community/gpt2's (the older "gpt2" too), "dbrx" the cl100k tokenizer of
    // OLMo 2, "deepseek-r1-qwen" the Qwen2.5 distills'.
    if (pre == "gpt2" || pre == "gpt-2" || pre == "phi-2" || pre == "mpt" || pre == "olmo") {
      v.pre = BpePre::kGpt2;
    } else if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "codeshell" || pre == "exaone" ||
               pre == "minerva") {
      v.pre = BpePre::kDigitsGpt2;
    } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
      // Llama 3.x as llama.cpp's converter names it: the regex of its tokenizer.json, and a pre-tokenized word that
      // is itself a token stays whole (tokenizer.json's ignore_merges).
      v.pre = BpePre::kLlama3;
      v.ignore_merges = true;
    } else if (pre == "dbrx" || pre == "smaug-bpe") {
      v.pre = BpePre::kLlama3;  // the same pattern, merged as usual (llama.cpp sets no ignore_merges for them)
    } else if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
      v.pre = BpePre::kQwen2;
      v.nfc = true;  // Qwen2's tokenizer.json normalizes to NFC first
    } else {
      throw Error(m.where + ": tokenizer.ggml.pre '" + pre +
                  "' is not supported (focalscope's byte-level BPE knows gpt2 / gpt-2 / phi-2 / mpt / olmo, "
                  "llama-bpe / llama3 / llama-v3, dbrx / smaug-bpe, qwen2 / deepseek-r1-qwen, smollm, starcoder, "
                  "refact, codeshell, exaone, minerva)");
    }
    auto t = make_bpe_tokenizer(std::move(v), where);
    t->source = "GGUF '" + model + "' (byte-level BPE)";
    return t;
  }
  if (model == "llama") {
    SpmVocab v;
    v.tokens = tokens->strs;
    const GgufValue* scores = m.array("tokenizer.ggml.scores", kGgufF32);
    if (!scores) throw Error(m.where + ": a llama tokenizer needs tokenizer.ggml.scores, which is missing");
    for (double x : scores->nums)  // scores outside float's range (corrupt files) are clamped, not converted
      v.scores.push_back(std::isfinite(x) ? (float)std::max(-3.0e38, std::min(3.0e38, x)) : 0.0f);
    v.types = type_v.empty() ? std::vector<int>(v.tokens.size(), kTokNormal) : type_v;
    v.bos_id = m.token_id("tokenizer.ggml.bos_token_id");
    v.eos_id = m.token_id("tokenizer.ggml.eos_token_id");
    const int unk = m.token_id("tokenizer.ggml.unknown_token_id");
    v.unk_id = unk >= 0 ? unk : 0;
    v.pad_id = m.token_id("tokenizer.ggml.padding_token_id");
    v.add_space_prefix = m.bool_opt("tokenizer.ggml.add_space_prefix", true);
    v.remove_extra_whitespaces = m.bool_opt("tokenizer.ggml.remove_extra_whitespaces", false);
    auto t = make_spm_tokenizer(v, where);
    t->source = "GGUF '" + model + "' (sentencepiece)";
    return t;
  }
  throw Error(m.where + ": tokenizer.ggml.model '" + model +
              "' is not supported (focalscope reads 'llama' "
              "sentencepiece and 'gpt2' byte-level BPE vocabularies)");
}

void GgufModel::read_into_memory(const std::function<void(size_t done, size_t total)>& progress) {
  const std::ptrdiff_t delta = file->read_into_memory(progress);
  if (delta == 0) return;
  for (auto& [name, t] : tensors)
    if (t.data) t.data += delta;
}

std::unique_ptr<GgufModel> open_gguf_model(const std::string& path) {
  auto g = std::make_unique<GgufModel>();
  g->file = std::make_unique<GgufFile>(path);
  const GgufFile& f = *g->file;
  Meta m{f, "'" + path + "'"};

  const GgufValue* arch_v = f.find("general.architecture");
  if (!arch_v || arch_v->type != kGgufString)
    throw Error(m.where + ": metadata key 'general.architecture' is missing — not a model GGUF");
  const std::string arch = arch_v->str;
  const ArchSpec* spec_p = find_arch_gguf(arch);
  if (!spec_p)
    throw Error(m.where + ": architecture '" + arch + "' is not supported (focalscope loads the GGUF architectures " +
                arch_names(false) + ")");
  const ArchSpec& spec = *spec_p;
  const std::string A = arch + ".";
  if (m.get(A + "expert_count") && m.int_opt(A + "expert_count", 0) > 0)
    throw Error(m.where + ": mixture-of-experts models (" + A + "expert_count) are not supported");
  const std::string scaling = m.str_opt(A + "rope.scaling.type", "none");
  bool scaling_read = scaling == "none";
  for (const char* s : spec.gguf_rope_scalings) scaling_read = scaling_read || scaling == s;
  // linear / yarn go onto rope_scaling below; longrope comes with its factor tensors
  const bool key_scaling = scaling == "linear" || scaling == "yarn";
  if (!scaling_read)
    throw Error(m.where + ": RoPE scaling '" + scaling + "' (" + A + "rope.scaling.type) is not supported");

  const int64_t n_layers = m.int_req(A + "block_count");
  const int64_t hidden = m.int_req(A + "embedding_length");
  const int64_t inter =
      spec.ffn_default_4h ? m.int_opt(A + "feed_forward_length", 4 * hidden) : m.int_req(A + "feed_forward_length");
  const int64_t n_heads = m.int_req(A + "attention.head_count");
  const int64_t n_kv = m.int_opt(A + "attention.head_count_kv", n_heads);
  if (hidden % n_heads != 0 && !m.get(A + "attention.key_length"))
    throw Error(m.where + ": " + A + "embedding_length (" + std::to_string(hidden) + ") is not a multiple of " + A +
                "attention.head_count (" + std::to_string(n_heads) + ") and " + A + "attention.key_length is missing");
  const int64_t d_head = m.int_opt(A + "attention.key_length", hidden / n_heads);
  if (m.int_opt(A + "attention.value_length", d_head) != d_head)
    throw Error(m.where + ": " + A + "attention.value_length differs from key_length (not a llama model)");
  if (m.get(A + "rope.dimension_count") && m.int_req(A + "rope.dimension_count") != d_head)
    throw Error(m.where + ": " + A + "rope.dimension_count (" + std::to_string(m.int_req(A + "rope.dimension_count")) +
                ") differs from the head dimension " + std::to_string(d_head) + " (partial RoPE is not supported)");

  // Vocabulary size: the embedding's row count, which the tokenizer and llama.vocab_size must agree with.
  const GgufTensor* embd = nullptr;
  bool has_output = false, has_bias = false, has_mlp_bias = false;
  const GgufTensor *rope_long = nullptr, *rope_short = nullptr;  // phi3 longrope factors
  const GgufTensor* rope_freqs = nullptr;                        // llama 3.x frequency factors
  for (const GgufTensor& t : f.tensors()) {
    if (t.name == "token_embd.weight") embd = &t;
    if (t.name == "rope_factors_long.weight") rope_long = &t;
    if (t.name == "rope_factors_short.weight") rope_short = &t;
    if (t.name == "output.weight") has_output = true;
    if (t.name == "blk.0.attn_q.bias") has_bias = true;
    if (t.name == "blk.0.ffn_gate.bias") has_mlp_bias = true;
    if (t.name == "rope_freqs.weight") rope_freqs = &t;
  }
  if (!embd) throw Error(m.where + ": tensor 'token_embd.weight' is missing");
  if (embd->dims.size() != 2)
    throw Error(m.where + ": tensor 'token_embd.weight' must have 2 dimensions, has " +
                std::to_string(embd->dims.size()));
  const int64_t vocab = (int64_t)embd->dims[1];
  if (m.get(A + "vocab_size") && m.int_req(A + "vocab_size") != vocab)
    throw Error(m.where + ": " + A + "vocab_size (" + std::to_string(m.int_req(A + "vocab_size")) +
                ") disagrees with token_embd.weight's " + std::to_string(vocab) + " rows — inconsistent metadata");
  if (const GgufValue* toks = m.array("tokenizer.ggml.tokens", kGgufString))
    if ((int64_t)toks->strs.size() != vocab)  // fewer: ids past the list decoded as "" and prompts as unknown
      throw Error(m.where + ": tokenizer.ggml.tokens has " + std::to_string(toks->strs.size()) + " entries but " +
                  "token_embd.weight has " + std::to_string(vocab) +
                  " rows — inconsistent metadata (a converter pads the list to the embedding's rows; llama.cpp "
                  "refuses such a file too)");

  const std::string model_kind = m.str_opt("tokenizer.ggml.model", "");
  json c;
  c["architectures"] = {spec.hf_class};
  c["model_type"] = spec.model_type;
  c["vocab_size"] = vocab;
  c["hidden_size"] = hidden;
  c["intermediate_size"] = inter;
  c["num_hidden_layers"] = n_layers;
  c["num_attention_heads"] = n_heads;
  c["num_key_value_heads"] = n_kv;
  c["head_dim"] = d_head;
  c["max_position_embeddings"] = m.int_opt(A + "context_length", 2048);
  c["rope_theta"] = m.num_opt(A + "rope.freq_base", 10000.0);
  c["rms_norm_eps"] = spec.layer_norm ? m.num_opt(A + "attention.layer_norm_epsilon", 1e-5)
                                      : m.num_opt(A + "attention.layer_norm_rms_epsilon", 1e-5);
  c["tie_word_embeddings"] = !has_output;
  c["attention_bias"] = has_bias && spec.gguf_o_bias;  // without: q/k/v biases by the architecture (Qwen2)
  if (has_mlp_bias) c["mlp_bias"] = true;
  if (spec.gguf_silu) c["hidden_act"] = "silu";
  if (spec.gguf_softcaps) {
    // Soft-caps and the window in llama.cpp's keys; query_pre_attn_scalar from <arch>.attention.scale when written
    // (= query_pre_attn_scalar^-1/2), else as llama.cpp decides without it: hidden / heads for the 46-layer 27B
    // (query_pre_attn_scalar 144, head_dim 128), head_dim for the 2B and 9B.
    c["attn_logit_softcapping"] = m.num_opt(A + "attn_logit_softcapping", 50.0);
    c["final_logit_softcapping"] = m.num_opt(A + "final_logit_softcapping", 30.0);
    if (window_set(m, A)) c["sliding_window"] = m.int_req(A + "attention.sliding_window");
    const double scale = m.num_opt(A + "attention.scale", 0.0);
    c["query_pre_attn_scalar"] = scale > 0.0      ? 1.0 / (scale * scale)
                                 : n_layers == 46 ? (double)hidden / (double)n_heads
                                                  : (double)d_head;
  }
  if (spec.gguf_sliding_window) {
    if (window_set(m, A)) {
      c["sliding_window"] = m.int_req(A + "attention.sliding_window");
      c["use_sliding_window"] = true;
    }
  }
  if (spec.gguf_rope_factor_pair && (rope_long || rope_short)) {
    if (!rope_long || !rope_short || rope_long->numel != (uint64_t)d_head / 2 ||
        rope_short->numel != (uint64_t)d_head / 2)
      throw Error(m.where +
                  ": tensors rope_factors_long.weight / rope_factors_short.weight must both hold head_dim / 2 = " +
                  std::to_string(d_head / 2) + " values");
    auto factors = [](const GgufTensor* t) {
      std::vector<float> v((size_t)t->numel);
      ggml_dequantize(t->type, t->data, v.data(), (int64_t)t->numel);
      return json(v);
    };
    c["rope_scaling"] = {
        {"type", "longrope"}, {"long_factor", factors(rope_long)}, {"short_factor", factors(rope_short)}};
    c["original_max_position_embeddings"] = m.int_req(A + "rope.scaling.original_context_length");
  }
  if (key_scaling) {  // llama.cpp's linear / yarn keys onto rope_scaling (transformers' semantics)
    c["rope_scaling"] = {{"rope_type", scaling}, {"factor", m.num_opt(A + "rope.scaling.factor", 1.0)}};
    if (m.get(A + "rope.scaling.attn_factor"))
      c["rope_scaling"]["attention_factor"] = m.num_opt(A + "rope.scaling.attn_factor", 1.0);
  }
  for (auto [llama_key, own_key] : spec.key_names) {  // the architecture's own config names (GPT-2's n_embd, ...)
    c[own_key] = c[llama_key];
    c.erase(llama_key);
  }
  const int bos = m.token_id("tokenizer.ggml.bos_token_id"), eos = m.token_id("tokenizer.ggml.eos_token_id");
  for (int id : {bos, eos})
    if (id >= vocab)
      throw Error(m.where + ": special token id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(vocab) + " — inconsistent metadata");
  if (bos >= 0) c["bos_token_id"] = bos;
  // llama.cpp ends generation at the end-of-turn token too (Llama 3.x Instruct's <|eot_id|>).
  const int eot = m.token_id("tokenizer.ggml.eot_token_id");
  if (eos >= 0 && eot >= 0 && eot != eos)
    c["eos_token_id"] = nlohmann::json::array({eos, eot});
  else if (eos >= 0)
    c["eos_token_id"] = eos;
  else if (eot >= 0)
    c["eos_token_id"] = eot;
  c["add_bos_token"] = m.bool_opt("tokenizer.ggml.add_bos_token", model_kind != "gpt2");
  c["gguf_file"] = path;
  if (const GgufValue* name = f.find("general.name"); name && name->type == kGgufString) c["gguf_name"] = name->str;
  // Errors about these fields name the metadata keys they came from.
  const ConfigFieldNames keys = {{"vocab_size", "token_embd.weight rows"},
                                 {"hidden_size", A + "embedding_length"},
                                 {"intermediate_size", A + "feed_forward_length"},
                                 {"num_hidden_layers", A + "block_count"},
                                 {"num_attention_heads", A + "attention.head_count"},
                                 {"num_key_value_heads", A + "attention.head_count_kv"},
                                 {"head_dim", A + "attention.key_length"},
                                 {"max_position_embeddings", A + "context_length"},
                                 {"rope_theta", A + "rope.freq_base"},
                                 {"rms_norm_eps", A + "attention.layer_norm_rms_epsilon"},
                                 {"bos_token_id", "tokenizer.ggml.bos_token_id"},
                                 {"eos_token_id", "tokenizer.ggml.eos_token_id"},
                                 {"add_bos_token", "tokenizer.ggml.add_bos_token"}};
  g->cfg = parse_config(c.dump(2), m.where + " (GGUF metadata)", &keys);
  if (rope_freqs) {  // llama 3.x: per-pair frequency factors (llama.cpp divides the default frequencies by them)
    if (!spec.gguf_rope_freqs || rope_freqs->numel != (uint64_t)d_head / 2)
      throw Error(m.where + ": tensor 'rope_freqs.weight' must hold head_dim / 2 = " + std::to_string(d_head / 2) +
                  " factors of a llama model");
    if (g->cfg.arch.rope.type != RopeType::kDefault)
      throw Error(m.where + ": tensor 'rope_freqs.weight' and " + A + "rope.scaling.type '" + scaling +
                  "' both scale RoPE; give one");
    std::vector<float> v((size_t)rope_freqs->numel);
    ggml_dequantize(rope_freqs->type, rope_freqs->data, v.data(), (int64_t)rope_freqs->numel);
    for (float x : v)
      if (!std::isfinite(x) || !(x > 0.0f))
        throw Error(m.where + ": tensor 'rope_freqs.weight' holds " + std::to_string(x) + " (factors must be > 0)");
    g->cfg.arch.rope.type = RopeType::kFreqFactors;
    g->cfg.arch.rope.freq_factors = std::move(v);
  }

  const int nh = (int)n_heads, nkv = (int)n_kv, dh = (int)d_head;
  for (const GgufTensor& t : f.tensors()) {
    if (t.name == "rope_factors_long.weight" || t.name == "rope_factors_short.weight" || t.name == "rope_freqs.weight")
      continue;  // in the config's RoPE scaling
    const std::string name = hf_name(t.name, spec);
    if (name.empty())
      throw Error(m.where + ": unexpected tensor '" + t.name + "' (not part of a " + arch + " model focalscope runs)");
    StTensor s;
    s.name = name;
    s.source_name = t.name;
    s.dtype = "GGUF " + ggml_type_name(t.type);
    for (size_t d = t.dims.size(); d-- > 0;) s.shape.push_back((int64_t)t.dims[d]);
    // GPT-2: llama.cpp stores the Conv1D matrices as [out, in]; handed to the loader in HF's [in, out].
    const bool conv1d = spec.layout == TensorLayout::kGpt2 && s.shape.size() == 2 && t.name != "token_embd.weight" &&
                        t.name != "position_embd.weight" && t.name != "output.weight";
    if (conv1d) std::swap(s.shape[0], s.shape[1]);
    // Gemma 2: llama.cpp stores the norms as 1 + w; the loader adds the 1 itself (exact: (1 + w) - 1 + 1).
    const bool minus_one = spec.gguf_norms_plus_one && t.name.find("norm.weight") != std::string::npos;
    const bool permuted = spec.gguf_qk_permuted;  // llama.cpp permutes q / k rows for llama only (NEOX elsewhere)
    s.data = t.data;
    s.n_bytes = t.n_bytes;
    const bool is_q = t.name.size() > 7 && t.name.find(".attn_q.") != std::string::npos;
    const bool is_k = t.name.size() > 7 && t.name.find(".attn_k.") != std::string::npos;
    const int perm_heads = !permuted ? 0 : is_q ? nh : is_k ? nkv : 0;
    const GgufTensor* tp = &t;
    const std::vector<int64_t> shape = s.shape;
    if (!minus_one) s.stored_type = (int)t.type;
    s.perm_heads = perm_heads;
    s.perm_d_head = dh;
    s.stored_transposed = conv1d;
    s.to_f32 = [tp, perm_heads, dh, conv1d, minus_one, shape]() {
      std::vector<float> out((size_t)tp->numel);
      ggml_dequantize(tp->type, tp->data, out.data(), (int64_t)tp->numel);
      if (minus_one)
        for (float& x : out) x -= 1.0f;
      if (conv1d) {  // [out, in] -> [in, out]
        const int64_t in = shape[0], o = shape[1];
        std::vector<float> tr(out.size());
        for (int64_t r = 0; r < o; ++r)
          for (int64_t k = 0; k < in; ++k) tr[(size_t)(k * o + r)] = out[(size_t)(r * in + k)];
        out.swap(tr);
      }
      if (perm_heads > 0) {
        const int64_t cols = (int64_t)(tp->numel / ((uint64_t)perm_heads * dh));
        if ((uint64_t)cols * perm_heads * dh == tp->numel) unpermute_rope_rows(out.data(), perm_heads, dh, cols);
      }
      return out;
    };
    g->tensors[name] = std::move(s);
  }
  g->tok = gguf_tokenizer(f);
  return g;
}

}  // namespace focal
