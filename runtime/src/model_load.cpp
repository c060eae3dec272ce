// Loading a Hugging Face model directory (config.json, safetensors single or sharded, tokenizer.model) or a GGUF
// file (gguf_model.cpp maps it onto the same tensors).
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "focal/error.h"
#include "model_internal.h"
#include "gguf_model.h"
#include "safetensors.h"
#include "tokenizer_internal.h"

namespace focal {

using json = nlohmann::json;

const char* version() { return "0.1.0"; }

Model::~Model() = default;

const Tokenizer& Model::require_tokenizer() const {
  if (!tok_ && is_gguf_path(path_))
    throw Error("model '" + path_ +
                "' stores no tokenizer (no tokenizer.ggml.* metadata) — pass token ids instead "
                "of text");
  if (!tok_)
    throw Error("model '" + path_ +
                "' has no tokenizer.json or tokenizer.model — add the model's tokenizer files to the "
                "directory, or pass token ids instead of text");
  return *tok_;
}

static bool file_exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

static std::string read_text(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw Error("cannot read '" + p + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

static std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

static bool is_known_tensor_name(const std::string& n) {
  static const char* kSuffixes[] = {"embed_tokens.weight",
                                    "model.norm.weight",
                                    "lm_head.weight",
                                    "input_layernorm.weight",
                                    "post_attention_layernorm.weight",
                                    "q_proj.weight",
                                    "k_proj.weight",
                                    "v_proj.weight",
                                    "o_proj.weight",
                                    "q_proj.bias",
                                    "k_proj.bias",
                                    "v_proj.bias",
                                    "o_proj.bias",
                                    "q_norm.weight",
                                    "k_norm.weight",
                                    "tau_proj.weight",
                                    "tau_proj.bias",
                                    "gate_proj.weight",
                                    "up_proj.weight",
                                    "down_proj.weight",
                                    "rotary_emb.inv_freq"};
  for (const char* s : kSuffixes) {
    const size_t k = std::char_traits<char>::length(s);
    if (n.size() >= k && n.compare(n.size() - k, k, s) == 0) return true;
  }
  return false;
}

using TensorMap = std::map<std::string, std::pair<const StTensor*, std::string>>;  // name -> (tensor, file)

// A Hugging Face directory: config.json and the safetensors files (kept open in st_files).
static void open_hf_dir(const std::string& dir, ModelConfig* cfg, std::string* cfg_path_out,
                        std::vector<std::unique_ptr<SafetensorsFile>>* st_files_out, TensorMap* all_out,
                        uint64_t* checksum) {
  auto& st_files = *st_files_out;
  auto& all = *all_out;
  struct stat st {};
  if (stat(dir.c_str(), &st) != 0)
    throw Error("model '" + dir +
                "' does not exist (give a Hugging Face model directory with config.json and "
                "model.safetensors, or a .gguf file)");
  if (!S_ISDIR(st.st_mode))
    throw Error("model '" + dir +
                "' is not a directory (give a Hugging Face model directory with config.json and "
                "model.safetensors, or a .gguf file)");
  const std::string cfg_path = dir + "/config.json";
  if (!file_exists(cfg_path)) throw Error("model '" + dir + "': config.json is missing");
  *cfg_path_out = cfg_path;
  *cfg = parse_config(read_text(cfg_path), cfg_path);

  // Weight files.
  std::vector<std::string> files;
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (file_exists(dir + "/model.safetensors")) {
    files.push_back(dir + "/model.safetensors");
  } else if (file_exists(index_path)) {
    json idx;
    try {
      idx = json::parse(read_text(index_path));
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond 64 bits
      throw Error(index_path + ": malformed JSON (" + e.what() + ")");
    }
    if (!idx.contains("weight_map") || !idx["weight_map"].is_object())
      throw Error(index_path + ": \"weight_map\" object is missing");
    std::set<std::string> shard_names;
    for (auto& [k, v] : idx["weight_map"].items()) {
      if (!v.is_string()) throw Error(index_path + ": weight_map entry '" + k + "' is not a file name");
      const std::string s = v.get<std::string>();
      if (s.find('/') != std::string::npos)
        throw Error(index_path + ": shard name '" + s + "' must be a plain file name");
      shard_names.insert(s);
    }
    for (auto& s : shard_names) {
      if (!file_exists(dir + "/" + s)) throw Error(index_path + " names shard '" + s + "', which is missing");
      files.push_back(dir + "/" + s);
    }
  } else {
    throw Error("model '" + dir + "': neither model.safetensors nor model.safetensors.index.json is present");
  }

  uint64_t h = 0xcbf29ce484222325ULL;
  for (auto& f : files) {
    st_files.push_back(std::make_unique<SafetensorsFile>(f));
    h = st_files.back()->fnv1a(h);
    for (auto& [name, t] : st_files.back()->tensors()) {
      if (all.count(name))
        throw Error("tensor '" + name + "' appears in both '" + all[name].second + "' and '" + f + "'");
      all[name] = {&t, f};
    }
  }
  *checksum = h;
}

// Non-finite values of a tensor in its file's dtype: count of NaN and of ±Inf, and the first such element.
struct NonFinite {
  size_t nan = 0, inf = 0, first = 0;
};

// Non-finite values of n IEEE floats of `bytes` bytes each (4: fp32, 2: fp16 or bf16), read as bit patterns from
// possibly unaligned memory: all exponent bits set is Inf (mantissa 0) or NaN.
static NonFinite scan_nonfinite(const uint8_t* data, size_t n, WeightType type) {
  const size_t bytes = type == WeightType::kF32 ? 4 : 2;
  const uint32_t exp_mask = type == WeightType::kF32 ? 0x7F800000u : type == WeightType::kBF16 ? 0x7F80u : 0x7C00u;
  const uint32_t mant_mask = type == WeightType::kF32 ? 0x007FFFFFu : type == WeightType::kBF16 ? 0x007Fu : 0x03FFu;
  NonFinite r;
  for (size_t i = 0; i < n; ++i) {
    uint32_t b = 0;
    std::memcpy(&b, data + bytes * i, bytes);  // little-endian host, as the loaders assume
    if ((b & exp_mask) == exp_mask) {
      if (r.nan + r.inf == 0) r.first = i;
      ((b & mant_mask) ? r.nan : r.inf)++;
    }
  }
  return r;
}

// The layer indices the weights hold: 1 + the largest N of "model.layers.N." (0 without any).
static int64_t layers_in_weights(const TensorMap& all) {
  int64_t n = 0;
  static const std::string kPrefix = "model.layers.";
  for (auto& [name, _] : all) {
    if (name.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    int64_t l = 0;
    size_t i = kPrefix.size();
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && l < (1LL << 40); ++i) l = l * 10 + (name[i] - '0');
    if (i > kPrefix.size()) n = std::max(n, l + 1);
  }
  return n;
}

std::unique_ptr<Model> Model::load(const std::string& dir_in, Device device, const LoadOptions& options) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::unique_ptr<Model> m(new Model());
  m->path_ = dir;
  std::vector<std::unique_ptr<SafetensorsFile>> st_files;
  TensorMap all;
  std::string cfg_path;
  std::unique_ptr<GgufModel> gguf;  // a .gguf file in place of a directory (gguf_model.h)
  if (is_gguf_path(dir)) {
    gguf = open_gguf_model(dir);
    m->cfg_ = gguf->cfg;
    m->checksum_ = gguf->checksum;
    cfg_path = "'" + dir + "' (GGUF metadata)";
    for (auto& [name, t] : gguf->tensors) all[name] = {&t, dir};
  } else {
    open_hf_dir(dir, &m->cfg_, &cfg_path, &st_files, &all, &m->checksum_);
  }
  ModelConfig& c = m->cfg_;
  // Field names of the config's source, for errors: config.json keys, or the GGUF metadata keys they came from.
  const bool from_gguf = (bool)gguf;
  auto field = [&](const char* hf, const char* gg) { return std::string(from_gguf ? gg : hf); };

  // A config that promises more layers than the weights hold is refused before anything is sized by it.
  const int64_t stored_layers = layers_in_weights(all);
  if (c.n_layers > stored_layers)
    throw Error(cfg_path + ": " + field("num_hidden_layers", "llama.block_count") + " = " + std::to_string(c.n_layers) +
                " but the weights hold " +
                (stored_layers ? "layers 0.." + std::to_string(stored_layers - 1) : std::string("no layers")) +
                " — the config does not belong to these weights");

  // QK-norm and learned tau are detected from the weights.
  c.qk_norm = all.count("model.layers.0.self_attn.q_norm.weight") > 0;
  const bool has_tau_w = all.count("model.layers.0.self_attn.tau_proj.weight") > 0;
  if (c.focal.has_tau && !has_tau_w)
    throw Error(cfg_path +
                ": \"focal\".mode is \"learned\" but tensor 'model.layers.0.self_attn.tau_proj.weight' is "
                "missing from the weights");
  if (has_tau_w && !c.focal.has_tau) {
    // Weights carry tau_proj but config.json does not declare learned mode: refuse rather than guess the bounds.
    throw Error(cfg_path +
                ": weights contain self_attn.tau_proj but \"focal\".mode is not \"learned\" — add "
                "\"focal\": {\"mode\": \"learned\", \"tau_min\": .., \"tau_max\": ..}");
  }

  m->device_ = resolve_device(device);
  m->backend_ = make_backend(m->device_);
  Backend& be = *m->backend_;
  auto w = std::make_unique<Weights>();
  std::set<std::string> used;

  // Weight matrices (matrix = true) go through Backend::upload_weight in the file's dtype, so a backend can keep
  // F16 / BF16 values in 16 bits (the CUDA backend does); GGUF tensors arrive as fp32 (to_f32). Small vectors
  // (norms, biases, tau_proj) are widened to fp32 on the host and uploaded as fp32. No host fp32 copy outlives the
  // upload.
  // Each expected size with the config field it comes from, for shape errors (config.json or GGUF key names).
  struct Dim {
    int64_t n;
    std::string from;
  };
  const std::string hd = " * " + field("head_dim", "llama.attention.key_length");
  const Dim H{c.hidden, field("hidden_size", "llama.embedding_length")}, V{c.vocab_size, field("vocab_size", "vocab")},
      I{c.intermediate, field("intermediate_size", "llama.feed_forward_length")},
      QD{(int64_t)c.n_heads * c.d_head, field("num_attention_heads", "llama.attention.head_count") + hd},
      KD{(int64_t)c.n_kv_heads * c.d_head, field("num_key_value_heads", "llama.attention.head_count_kv") + hd},
      D{c.d_head, field("head_dim", "llama.attention.key_length")}, One{1, "1"};
  auto take = [&](const std::string& name, const std::vector<Dim>& dims, bool required = true,
                  bool matrix = false) -> const float* {
    std::vector<int64_t> shape;
    std::string labels;
    for (const Dim& d : dims) {
      shape.push_back(d.n);
      labels += (labels.empty() ? "" : ", ") + d.from;
    }
    auto it = all.find(name);
    if (it == all.end()) {
      if (!required) return nullptr;
      // A misnamed tensor shows up as one missing name plus one name that is no known LLaMA tensor.
      std::string hint;
      for (auto& kv : all)
        if (!is_known_tensor_name(kv.first)) {
          hint = " (the file has an unexpected tensor '" + kv.first + "' — misnamed?)";
          break;
        }
      throw Error("model '" + dir + "': tensor '" + name + "' is missing" + hint);
    }
    const StTensor& t = *it->second.first;
    if (t.shape != shape)
      throw Error("'" + it->second.second + "': tensor '" + name + "' has shape " + shape_str(t.shape) + ", expected " +
                  shape_str(shape) + " = [" + labels + "] from " + cfg_path);
    auto check_finite = [&](const NonFinite& nf) {
      if (nf.nan + nf.inf == 0) return;
      const std::string tensor = t.source_name.empty() ? "'" + name + "'" : "'" + t.source_name + "' (" + name + ")";
      const std::string what = "'" + it->second.second + "': tensor " + tensor + " holds " + std::to_string(nf.nan) +
                               " NaN and " + std::to_string(nf.inf) + " infinite values (the first at element " +
                               std::to_string(nf.first) + ")";
      if (!options.allow_nonfinite_weights)
        throw Error(what +
                    " — the checkpoint is broken; to study it, load it with the load option "
                    "allow_nonfinite_weights");
      c.warnings.push_back(what + "; loaded as they are");
    };
    const size_t n = t.numel();
    DeviceBuffer buf;
    if (matrix && !t.to_f32 && (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16")) {
      const WeightType type = t.dtype == "BF16"  ? WeightType::kBF16
                              : t.dtype == "F16" ? WeightType::kF16
                                                 : WeightType::kF32;
      check_finite(scan_nonfinite(t.data, n, type));
      buf = DeviceBuffer(be, be.upload_weight(t.data, type, n), n);  // straight from the mapped file
    } else {
      std::vector<float> f32 = tensor_to_f32(t, it->second.second);  // throws for unsupported dtypes
      check_finite(scan_nonfinite(reinterpret_cast<const uint8_t*>(f32.data()), n, WeightType::kF32));
      if (matrix) {
        buf = DeviceBuffer(be, be.upload_weight(f32.data(), WeightType::kF32, n), n);
      } else {
        buf = DeviceBuffer(be, n);
        be.upload(buf.data(), f32.data(), n);
      }
    }
    float* p = buf.data();
    const bool decay =
        name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 && name.find("norm") == std::string::npos;
    w->params.push_back(ParamRef{name, shape, p, n, decay});
    w->storage.push_back(std::move(buf));
    used.insert(name);
    m->n_params_ += n;
    return p;
  };

  w->embed = take("model.embed_tokens.weight", {V, H}, true, true);
  w->final_norm = take("model.norm.weight", {H});
  if (c.tied_embeddings) {
    w->lm_head = w->embed;
    used.insert("lm_head.weight");  // some exporters store the tied copy too
  } else {
    w->lm_head = take("lm_head.weight", {V, H}, true, true);
  }
  w->layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights& L = w->layers[l];
    L.attn_norm = take(p + "input_layernorm.weight", {H});
    L.wq = take(p + "self_attn.q_proj.weight", {QD, H}, true, true);
    L.wk = take(p + "self_attn.k_proj.weight", {KD, H}, true, true);
    L.wv = take(p + "self_attn.v_proj.weight", {KD, H}, true, true);
    L.wo = take(p + "self_attn.o_proj.weight", {H, QD}, true, true);
    if (c.attention_bias) {
      L.bq = take(p + "self_attn.q_proj.bias", {QD});
      L.bk = take(p + "self_attn.k_proj.bias", {KD});
      L.bv = take(p + "self_attn.v_proj.bias", {KD});
      L.bo = take(p + "self_attn.o_proj.bias", {H}, false);
    }
    if (c.qk_norm) {
      L.q_norm = take(p + "self_attn.q_norm.weight", {D});
      L.k_norm = take(p + "self_attn.k_norm.weight", {D});
    }
    if (has_tau_w) {
      L.tau_w = take(p + "self_attn.tau_proj.weight", {One, H});
      if (c.focal.tau_bias) L.tau_b = take(p + "self_attn.tau_proj.bias", {One});
    }
    L.mlp_norm = take(p + "post_attention_layernorm.weight", {H});
    L.w_gate = take(p + "mlp.gate_proj.weight", {I, H}, true, true);
    L.w_up = take(p + "mlp.up_proj.weight", {I, H}, true, true);
    L.w_down = take(p + "mlp.down_proj.weight", {H, I}, true, true);
  }
  for (auto& [name, _] : all) {
    if (used.count(name)) continue;
    static const std::string kInvFreq = "rotary_emb.inv_freq";  // buffer some exporters save; recomputed here
    if (name.size() >= kInvFreq.size() && name.compare(name.size() - kInvFreq.size(), kInvFreq.size(), kInvFreq) == 0)
      continue;
    throw Error("'" + all[name].second + "': unexpected tensor '" + name + "' (not part of a " +
                std::to_string(c.n_layers) + "-layer LlamaForCausalLM as described by config.json)");
  }
  m->w_ = std::move(w);

  m->tok_ = gguf ? std::move(gguf->tok) : load_hf_dir_tokenizer(dir, &c);  // tokenizer.json or tokenizer.model
  return m;
}

}  // namespace focal
