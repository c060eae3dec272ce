// GGUF (llama architecture) -> ModelConfig + HF-named tensors + tokenizer. Key mapping: docs/model-format.md.
#include "gguf_model.h"

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

// GGUF tensor name -> HF name; "" if the name is no llama tensor.
std::string hf_name(const std::string& g) {
  if (g == "token_embd.weight") return "model.embed_tokens.weight";
  if (g == "output_norm.weight") return "model.norm.weight";
  if (g == "output.weight") return "lm_head.weight";
  if (g.compare(0, 4, "blk.") != 0) return "";
  const size_t dot = g.find('.', 4);
  if (dot == std::string::npos || dot == 4) return "";
  const std::string layer = g.substr(4, dot - 4);
  for (char ch : layer)
    if (ch < '0' || ch > '9') return "";
  const std::string rest = g.substr(dot + 1);
  static const std::pair<const char*, const char*> kMap[] = {
      {"attn_norm.weight", "input_layernorm.weight"}, {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},   {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},   {"attn_output.weight", "self_attn.o_proj.weight"},
      {"attn_q.bias", "self_attn.q_proj.bias"},       {"attn_k.bias", "self_attn.k_proj.bias"},
      {"attn_v.bias", "self_attn.v_proj.bias"},       {"attn_output.bias", "self_attn.o_proj.bias"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},    {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},    {"attn_rot_embd", "rotary_emb.inv_freq"}};
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
    if (pre == "gpt2") {
      v.pre = BpePre::kGpt2;
    } else if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "codeshell" || pre == "exaone" ||
               pre == "minerva") {
      v.pre = BpePre::kDigitsGpt2;
    } else {
      throw Error(m.where + ": tokenizer.ggml.pre '" + pre +
                  "' is not supported (focalscope's byte-level BPE "
                  "knows gpt2, smollm, starcoder, refact, codeshell, exaone, minerva)");
    }
    return make_bpe_tokenizer(std::move(v), where);
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
    return make_spm_tokenizer(v, where);
  }
  throw Error(m.where + ": tokenizer.ggml.model '" + model +
              "' is not supported (focalscope reads 'llama' "
              "sentencepiece and 'gpt2' byte-level BPE vocabularies)");
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
  if (arch != "llama")
    throw Error(m.where + ": architecture '" + arch +
                "' is not supported (focalscope loads llama-architecture "
                "GGUF files)");
  const std::string A = arch + ".";
  if (m.get(A + "expert_count") && m.int_opt(A + "expert_count", 0) > 0)
    throw Error(m.where + ": mixture-of-experts models (" + A + "expert_count) are not supported");
  const std::string scaling = m.str_opt(A + "rope.scaling.type", "none");
  if (scaling != "none")
    throw Error(m.where + ": RoPE scaling '" + scaling + "' (" + A + "rope.scaling.type) is not supported");

  const int64_t n_layers = m.int_req(A + "block_count");
  const int64_t hidden = m.int_req(A + "embedding_length");
  const int64_t inter = m.int_req(A + "feed_forward_length");
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
  bool has_output = false, has_bias = false;
  for (const GgufTensor& t : f.tensors()) {
    if (t.name == "token_embd.weight") embd = &t;
    if (t.name == "output.weight") has_output = true;
    if (t.name == "blk.0.attn_q.bias") has_bias = true;
    if (t.name == "rope_freqs.weight")
      throw Error(m.where + ": tensor 'rope_freqs.weight' (llama 3.1-style RoPE frequency factors) is not supported");
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
    if ((int64_t)toks->strs.size() > vocab)
      throw Error(m.where + ": tokenizer.ggml.tokens has " + std::to_string(toks->strs.size()) +
                  " entries but token_embd.weight has only " + std::to_string(vocab) + " rows — inconsistent metadata");

  const std::string model_kind = m.str_opt("tokenizer.ggml.model", "");
  json c;
  c["architectures"] = {"LlamaForCausalLM"};
  c["model_type"] = "llama";
  c["vocab_size"] = vocab;
  c["hidden_size"] = hidden;
  c["intermediate_size"] = inter;
  c["num_hidden_layers"] = n_layers;
  c["num_attention_heads"] = n_heads;
  c["num_key_value_heads"] = n_kv;
  c["head_dim"] = d_head;
  c["max_position_embeddings"] = m.int_opt(A + "context_length", 2048);
  c["rope_theta"] = m.num_opt(A + "rope.freq_base", 10000.0);
  c["rms_norm_eps"] = m.num_opt(A + "attention.layer_norm_rms_epsilon", 1e-5);
  c["tie_word_embeddings"] = !has_output;
  c["attention_bias"] = has_bias;
  c["hidden_act"] = "silu";
  const int bos = m.token_id("tokenizer.ggml.bos_token_id"), eos = m.token_id("tokenizer.ggml.eos_token_id");
  for (int id : {bos, eos})
    if (id >= vocab)
      throw Error(m.where + ": special token id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(vocab) + " — inconsistent metadata");
  if (bos >= 0) c["bos_token_id"] = bos;
  if (eos >= 0) c["eos_token_id"] = eos;
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

  const int nh = (int)n_heads, nkv = (int)n_kv, dh = (int)d_head;
  for (const GgufTensor& t : f.tensors()) {
    const std::string name = hf_name(t.name);
    if (name.empty())
      throw Error(m.where + ": unexpected tensor '" + t.name + "' (not part of a llama model focalscope runs)");
    StTensor s;
    s.name = name;
    s.source_name = t.name;
    s.dtype = "GGUF " + ggml_type_name(t.type);
    for (size_t d = t.dims.size(); d-- > 0;) s.shape.push_back((int64_t)t.dims[d]);
    s.data = t.data;
    s.n_bytes = t.n_bytes;
    const bool is_q = t.name.size() > 7 && t.name.find(".attn_q.") != std::string::npos;
    const bool is_k = t.name.size() > 7 && t.name.find(".attn_k.") != std::string::npos;
    const int perm_heads = is_q ? nh : is_k ? nkv : 0;
    const GgufTensor* tp = &t;
    s.to_f32 = [tp, perm_heads, dh]() {
      std::vector<float> out((size_t)tp->numel);
      ggml_dequantize(tp->type, tp->data, out.data(), (int64_t)tp->numel);
      if (perm_heads > 0) {
        const int64_t cols = (int64_t)(tp->numel / ((uint64_t)perm_heads * dh));
        if ((uint64_t)cols * perm_heads * dh == tp->numel) unpermute_rope_rows(out.data(), perm_heads, dh, cols);
      }
      return out;
    };
    g->tensors[name] = std::move(s);
  }
  g->checksum = f.fnv1a(0xcbf29ce484222325ULL);
  g->tok = gguf_tokenizer(f);
  return g;
}

}  // namespace focal
