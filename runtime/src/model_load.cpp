// Loading a Hugging Face model directory (config.json, safetensors single or sharded, tokenizer.model) or a GGUF
// file (gguf_model.cpp maps it onto the same tensors).
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "arch_table.h"
#include "focal/error.h"
#include "focal_kernels/quant.h"
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

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

static bool is_known_tensor_name(const std::string& n) {
  static const char* kSuffixes[] = {"embed_tokens.weight",
                                    "qkv_proj.weight",
                                    "gate_up_proj.weight",
                                    "pre_feedforward_layernorm.weight",
                                    "post_feedforward_layernorm.weight",
                                    "gate_proj.bias",
                                    "up_proj.bias",
                                    "down_proj.bias",
                                    "wte.weight",
                                    "wpe.weight",
                                    "ln_f.weight",
                                    "ln_f.bias",
                                    "ln_1.weight",
                                    "ln_1.bias",
                                    "ln_2.weight",
                                    "ln_2.bias",
                                    "c_attn.weight",
                                    "c_attn.bias",
                                    "c_proj.weight",
                                    "c_proj.bias",
                                    "c_fc.weight",
                                    "c_fc.bias",
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
                        std::vector<std::shared_ptr<SafetensorsFile>>* st_files_out, TensorMap* all_out) {
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

  for (auto& f : files) {
    st_files.push_back(std::make_shared<SafetensorsFile>(f));
    for (auto& [name, t] : st_files.back()->tensors()) {
      if (all.count(name))
        throw Error("tensor '" + name + "' appears in both '" + all[name].second + "' and '" + f + "'");
      all[name] = {&t, f};
    }
  }
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
static int64_t layers_in_weights(const TensorMap& all, const std::string& kPrefix) {
  int64_t n = 0;
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
  std::vector<std::shared_ptr<SafetensorsFile>> st_files;
  TensorMap all;
  std::string cfg_path;
  std::shared_ptr<GgufModel> gguf;  // a .gguf file in place of a directory (gguf_model.h)
  if (is_gguf_path(dir)) {
    gguf = open_gguf_model(dir);
    m->cfg_ = gguf->cfg;
    cfg_path = "'" + dir + "' (GGUF metadata)";
    for (auto& [name, t] : gguf->tensors) all[name] = {&t, dir};
  } else {
    open_hf_dir(dir, &m->cfg_, &cfg_path, &st_files, &all);
  }
  ModelConfig& c = m->cfg_;
  // Field names of the config's source, for errors: config.json keys, or the GGUF metadata keys they came from.
  const bool from_gguf = (bool)gguf;
  auto field = [&](const char* hf, const char* gg) { return std::string(from_gguf ? gg : hf); };

  // A config that promises more layers than the weights hold is refused before anything is sized by it.
  const ArchSpec& spec = arch_spec(c.arch.name);
  const bool gpt2_layout = spec.layout == TensorLayout::kGpt2;
  const std::string layer_prefix = gpt2_layout ? "transformer.h." : "model.layers.";
  const int64_t stored_layers = layers_in_weights(all, layer_prefix);
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

  // The weights' memory as they will be held, checked against the budget before anything is allocated: stored
  // bytes for the matrices native mode keeps as they are, 4 bytes a value for everything widened to fp32.
  if (options.budget_bytes > 0) {
    size_t held = 0, fp32 = 0;
    for (const auto& [name, tf] : all) {
      const StTensor& t = *tf.first;
      const bool stored = options.weights == WeightsMode::kNative && t.shape.size() == 2 &&
                          (t.to_f32 ? t.stored_type > 0 : (t.dtype == "F16" || t.dtype == "BF16"));
      held += stored ? t.n_bytes : 4 * t.numel();
      fp32 += 4 * t.numel();
    }
    if (held > options.budget_bytes) {
      auto gb = [](size_t b) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
        return std::string(buf);
      };
      const std::string msg = "model '" + dir + "' needs about " + gb(held) + " for its weights (--weights " +
                              weights_mode_name(options.weights) + "; fp32 would take " + gb(fp32) + "), over " +
                              (options.budget_is_machine ? "this machine's memory of " : "the memory budget of ") +
                              gb(options.budget_bytes) + " — " +
                              (options.budget_is_machine ? "" : "raise --budget, or ") +
                              (options.weights == WeightsMode::kFp32 ? "load with --weights native, or " : "") +
                              "use a smaller or more quantized file";
      if (options.budget_is_machine) throw Error(msg);
      throw Error("budget", msg);
    }
  }

  m->device_ = resolve_device(device);
  if (options.precision == Precision::kFast && m->device_ != Device::kCuda)
    throw Error("precision",
                "precision fast runs on the CUDA backend only (this model would run on the CPU, which computes in "
                "fp32): choose device cuda on a machine with a GPU, or precision exact or auto");
  // Native GGUF weights on the CPU are read from the file at every decode step: held in process memory unless the
  // caller asks for the map (LoadOptions::map_weights). fp32 mode and the GPU copy the weights out at load anyway.
  const bool held =
      gguf && !options.map_weights && options.weights == WeightsMode::kNative && m->device_ == Device::kCpu;
  if (held) gguf->read_into_memory(options.on_read);
  std::set<const uint8_t*> relaid;  // held rows re-laid out for decode (a tied matrix arrives once per use)
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
  // The tensor `name`, checked against the shape dims (a misnamed or misshaped tensor is an error naming both);
  // null when it is absent and not required.
  auto lookup = [&](const std::string& name, const std::vector<Dim>& dims, bool required) -> const StTensor* {
    std::vector<int64_t> shape;
    std::string labels;
    for (const Dim& d : dims) {
      shape.push_back(d.n);
      labels += (labels.empty() ? "" : ", ") + d.from;
    }
    auto it = all.find(name);
    if (it == all.end()) {
      if (!required) return nullptr;
      // A misnamed tensor shows up as one missing name plus one name that is no known tensor of these architectures.
      std::string hint;
      for (auto& kv : all)
        if (!is_known_tensor_name(kv.first)) {
          hint = " (the file has an unexpected tensor '" + kv.first + "' — misnamed?)";
          break;
        }
      throw Error("model '" + dir + "': tensor '" + name + "' is missing" + hint);
    }
    const StTensor& t = *it->second.first;
    if (t.shape != shape) {
      std::string why;
      if (t.shape.size() == 2 && shape.size() == 2 && t.shape[0] == shape[1] && t.shape[1] == shape[0])
        why =
            gpt2_layout ? " — it looks transposed: GPT-2 stores Conv1D weights as [in, out]" : " — it looks transposed";
      throw Error("'" + it->second.second + "': tensor '" + name + "' has shape " + shape_str(t.shape) + ", expected " +
                  shape_str(shape) + " = [" + labels + "] from " + cfg_path + why);
    }
    return &t;
  };
  // Native weights: a 2-D tensor whose stored rows can be used as they are (GGUF blocks, fp16, bf16; not fp32,
  // which loads the same either way) becomes a StoredWeight over rows row0 .. row0 + n_rows - 1 of the stored
  // matrix, [n_rows, cols]; `transposed_ok`: the caller wants the transpose of `shape` (GGUF GPT-2 Conv1D).
  bool any_stored = false;
  auto stored_type = [&](const StTensor& t, bool want_transposed) -> int {
    if (options.weights != WeightsMode::kNative || t.shape.size() != 2) return -1;
    int type = t.stored_type;
    if (!t.to_f32) type = t.dtype == "BF16" ? ops::kQBF16 : t.dtype == "F16" ? ops::kQF16 : -1;
    if (type < 0 || type == ops::kQF32 || t.stored_transposed != want_transposed) return -1;
    const int64_t cols = want_transposed ? t.shape[0] : t.shape[1];
    const int be = ops::qtype_block_elems(type);
    return be > 0 && cols % be == 0 ? type : -1;
  };
  auto stored_weight = [&](const StTensor& t, int type, const std::string& file, int64_t row0, int64_t n_rows,
                           int64_t cols) {
    StoredWeight sw;
    sw.type = type;
    sw.cols = cols;
    sw.rows = n_rows;
    sw.row_bytes = (size_t)(cols / ops::qtype_block_elems(type)) * (size_t)ops::qtype_block_bytes(type);
    sw.data = t.data + (size_t)row0 * sw.row_bytes;
    if (t.perm_heads > 0 && n_rows == (int64_t)t.perm_heads * t.perm_d_head) {  // HF row (h, s, i) <- (h, i, s)
      const int dh = t.perm_d_head, half = dh / 2;
      sw.row_map.resize((size_t)n_rows);
      for (int h = 0; h < t.perm_heads; ++h)
        for (int s = 0; s < 2; ++s)
          for (int i = 0; i < half; ++i) sw.row_map[(size_t)h * dh + s * half + i] = h * dh + 2 * i + s;
    }
    const int64_t n_blocks = (int64_t)(n_rows * sw.row_bytes / ops::qtype_block_bytes(type));
    const ops::NonFiniteScan nf = ops::scan_nonfinite_stored(type, sw.data, n_blocks);
    if (nf.count > 0) {
      const std::string tensor =
          t.source_name.empty() ? "'" + t.name + "'" : "'" + t.source_name + "' (" + t.name + ")";
      const std::string what = "'" + file + "': tensor " + tensor + " holds " + std::to_string(nf.count) +
                               " blocks with a non-finite value or scale (the first at element " +
                               std::to_string(nf.first_block * ops::qtype_block_elems(type)) + ")";
      if (!options.allow_nonfinite_weights)
        throw Error(what +
                    " — the checkpoint is broken; to study it, load it with the load option "
                    "allow_nonfinite_weights");
      c.warnings.push_back(what + "; loaded as they are");
    }
    // Held in memory on a CPU with the kernel for it: Q4_0 / Q4_1 / Q8_0 rows re-laid out in panels of 16 for
    // decode (ops::pack_panels; row_map applied), in place; the file's checksum still hashes its own bytes.
    if (held && ops::panels_pay_off(type, n_rows)) {
      if (relaid.insert(sw.data).second) {
        ops::QMatrix src = sw.view(), packed = sw.view();
        packed.row_map = nullptr;
        packed.panels = true;
        std::vector<int32_t> stored_to_row;  // inverse of row_map: where stored row s went
        if (!sw.row_map.empty()) {
          stored_to_row.resize(sw.row_map.size());
          for (size_t r = 0; r < sw.row_map.size(); ++r) stored_to_row[(size_t)sw.row_map[r]] = (int32_t)r;
        }
        gguf->file->relayout(
            sw.data, n_rows, sw.row_bytes,
            [&src](const uint8_t* original, uint8_t* dst) {
              src.data = original;
              ops::pack_panels(src, dst);
            },
            [packed, stored_to_row](int64_t s, uint8_t* out) {
              ops::unpack_panel_row(packed, stored_to_row.empty() ? s : stored_to_row[(size_t)s], out);
            });
      }
      sw.row_map.clear();
      sw.panels = true;
    }
    any_stored = true;
    return sw;
  };
  // Records a loaded tensor: a matrix (its WeightBuffer) or a vector (its DeviceBuffer of fp32 values).
  auto keep = [&](const std::string& name, std::vector<int64_t> shape, size_t n, bool decay, WeightBuffer* mat,
                  DeviceBuffer* vec) -> Weight {
    const Weight weight = mat ? mat->get() : Weight::of_f32(vec->data(), n);
    w->params.push_back(ParamRef{name, std::move(shape), weight.f32(), n, decay, weight});
    if (mat)
      w->matrices.push_back(std::move(*mat));
    else
      w->storage.push_back(std::move(*vec));
    m->n_params_ += n;
    return weight;
  };
  // `host_fn`, when given, edits the tensor's fp32 values on the host before the upload (Gemma's 1 + w norms). A
  // matrix becomes a Weight in the form the backend keeps; a vector fp32 backend memory (Weight::f32()).
  auto take = [&](const std::string& name, const std::vector<Dim>& dims, bool required = true, bool matrix = false,
                  const std::function<void(std::vector<float>&)>& host_fn = nullptr) -> Weight {
    const StTensor* tp = lookup(name, dims, required);
    if (!tp) return Weight{};
    const StTensor& t = *tp;
    auto it = all.find(name);
    std::vector<int64_t> shape = t.shape;
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
    WeightBuffer mat;
    DeviceBuffer vec;
    const int st_type = matrix && !host_fn ? stored_type(t, false) : -1;
    if (st_type >= 0) {
      const StoredWeight sw = stored_weight(t, st_type, it->second.second, 0, t.shape[0], t.shape[1]);
      mat = WeightBuffer(be, be.upload_weight_stored(sw));  // rows where the mapped file has them
    } else if (matrix && !host_fn && !t.to_f32 && (t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16")) {
      const WeightType type = t.dtype == "BF16"  ? WeightType::kBF16
                              : t.dtype == "F16" ? WeightType::kF16
                                                 : WeightType::kF32;
      check_finite(scan_nonfinite(t.data, n, type));
      mat = WeightBuffer(be, be.upload_weight(t.data, type, n));  // straight from the mapped file
    } else {
      std::vector<float> f32 = tensor_to_f32(t, it->second.second);  // throws for unsupported dtypes
      check_finite(scan_nonfinite(reinterpret_cast<const uint8_t*>(f32.data()), n, WeightType::kF32));
      if (host_fn) host_fn(f32);
      if (matrix) {
        mat = WeightBuffer(be, be.upload_weight(f32.data(), WeightType::kF32, n));
      } else {
        vec = DeviceBuffer(be, n);
        be.upload(vec.data(), f32.data(), n);
      }
    }
    const bool decay =
        name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 && name.find("norm") == std::string::npos;
    used.insert(name);
    return keep(name, shape, n, decay, matrix ? &mat : nullptr, &vec);
  };

  // A fused or Conv1D tensor: its fp32 values (transposed from [in, out] when `conv1d`), cut into consecutive row
  // blocks, each uploaded as its own matrix (or vector) under the name `<name>#<i>`.
  auto take_parts = [&](const std::string& name, const std::vector<Dim>& dims, bool conv1d,
                        const std::vector<int64_t>& rows, bool matrix) -> std::vector<Weight> {
    const StTensor& t = *lookup(name, dims, true);
    if (const int st_type = matrix ? stored_type(t, conv1d) : -1; st_type >= 0) {  // row blocks of the stored rows
      const int64_t cols = conv1d ? t.shape[0] : t.shape[1];
      std::vector<Weight> out;
      int64_t row0 = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        const StoredWeight sw = stored_weight(t, st_type, all.at(name).second, row0, rows[i], cols);
        const size_t cnt = (size_t)(rows[i] * cols);
        WeightBuffer mat(be, be.upload_weight_stored(sw));
        out.push_back(keep(name + "#" + std::to_string(i), {rows[i], cols}, cnt, false, &mat, nullptr));
        row0 += rows[i];
      }
      used.insert(name);
      return out;
    }
    std::vector<float> f32 = tensor_to_f32(t, all.at(name).second);
    const NonFinite nf = scan_nonfinite(reinterpret_cast<const uint8_t*>(f32.data()), f32.size(), WeightType::kF32);
    if (nf.nan + nf.inf > 0) {
      const std::string what = "'" + all.at(name).second + "': tensor '" + name + "' holds " + std::to_string(nf.nan) +
                               " NaN and " + std::to_string(nf.inf) + " infinite values";
      if (!options.allow_nonfinite_weights)
        throw Error(what +
                    " — the checkpoint is broken; to study it, load it with the load option "
                    "allow_nonfinite_weights");
      c.warnings.push_back(what + "; loaded as they are");
    }
    const int64_t cols = t.shape.size() == 2 ? (conv1d ? t.shape[0] : t.shape[1]) : 1;
    if (conv1d) {  // [in, out] -> [out, in]
      std::vector<float> tr(f32.size());
      const int64_t in = t.shape[0], out = t.shape[1];
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < out; ++o) tr[(size_t)(o * in + i)] = f32[(size_t)(i * out + o)];
      f32.swap(tr);
    }
    std::vector<Weight> out;
    size_t off = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const size_t cnt = (size_t)(rows[i] * cols);
      WeightBuffer mat;
      DeviceBuffer vec;
      if (matrix) {
        mat = WeightBuffer(be, be.upload_weight(f32.data() + off, WeightType::kF32, cnt));
      } else {
        vec = DeviceBuffer(be, cnt);
        be.upload(vec.data(), f32.data() + off, cnt);
      }
      off += cnt;
      std::vector<int64_t> shape =
          t.shape.size() == 2 ? std::vector<int64_t>{rows[i], cols} : std::vector<int64_t>{rows[i]};
      out.push_back(keep(name + "#" + std::to_string(i), shape, cnt, false, matrix ? &mat : nullptr, &vec));
    }
    used.insert(name);
    return out;
  };
  const ArchConfig& arch = c.arch;
  // Gemma's RMSNorm scales by (1 + w): the 1 is added to the stored weights once, here (fp32, as transformers does).
  const std::function<void(std::vector<float>&)> plus_one = [](std::vector<float>& v) {
    for (float& x : v) x = 1.0f + x;
  };
  auto take_norm = [&](const std::string& name) {
    return take(name, {H}, true, false, arch.norm_plus_one ? plus_one : nullptr).f32();
  };
  const bool gpt2 = gpt2_layout;
  if (gpt2) {
    const Dim P{c.max_positions, field("n_positions", "gpt2.context_length")};
    w->embed = take("transformer.wte.weight", {V, H}, true, true);
    w->pos_embed = take("transformer.wpe.weight", {P, H}, true, true);
    w->final_norm = take("transformer.ln_f.weight", {H}).f32();
    w->final_norm_b = take("transformer.ln_f.bias", {H}).f32();
  } else {
    w->embed = take("model.embed_tokens.weight", {V, H}, true, true);
    w->final_norm = take_norm("model.norm.weight");
  }
  if (c.tied_embeddings) {
    w->lm_head = w->embed;
    used.insert("lm_head.weight");  // some exporters store the tied copy too
  } else {
    w->lm_head = take("lm_head.weight", {V, H}, true, true);
  }
  const Dim H3{3 * (int64_t)c.hidden, "3 * " + H.from}, I2{2 * (int64_t)c.intermediate, "2 * " + I.from},
      QKV{QD.n + 2 * KD.n, "(" + QD.from + " + 2 * " + KD.from + ")"};
  w->layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = layer_prefix + std::to_string(l) + ".";
    LayerWeights& L = w->layers[l];
    if (gpt2) {  // Conv1D weights stored [in, out]; c_attn holds q, k and v side by side
      L.attn_norm = take(p + "ln_1.weight", {H}).f32();
      L.attn_norm_b = take(p + "ln_1.bias", {H}).f32();
      auto qkv = take_parts(p + "attn.c_attn.weight", {H, H3}, true, {QD.n, KD.n, KD.n}, true);
      auto qkv_b = take_parts(p + "attn.c_attn.bias", {H3}, false, {QD.n, KD.n, KD.n}, false);
      L.wq = qkv[0], L.wk = qkv[1], L.wv = qkv[2];
      L.bq = qkv_b[0].f32(), L.bk = qkv_b[1].f32(), L.bv = qkv_b[2].f32();
      L.wo = take_parts(p + "attn.c_proj.weight", {H, H}, true, {H.n}, true)[0];
      L.bo = take(p + "attn.c_proj.bias", {H}).f32();
      L.mlp_norm = take(p + "ln_2.weight", {H}).f32();
      L.mlp_norm_b = take(p + "ln_2.bias", {H}).f32();
      L.w_up = take_parts(p + "mlp.c_fc.weight", {H, I}, true, {I.n}, true)[0];
      L.b_up = take(p + "mlp.c_fc.bias", {I}).f32();
      L.w_down = take_parts(p + "mlp.c_proj.weight", {I, H}, true, {H.n}, true)[0];
      L.b_down = take(p + "mlp.c_proj.bias", {H}).f32();
      for (const char* buf : {"attn.bias", "attn.masked_bias"}) used.insert(p + buf);  // old causal-mask buffers
      continue;
    }
    if (arch.pre_attn_norm) L.attn_norm = take_norm(p + "input_layernorm.weight");
    if (spec.fused_qkv) {
      auto qkv = take_parts(p + "self_attn.qkv_proj.weight", {QKV, H}, false, {QD.n, KD.n, KD.n}, true);
      L.wq = qkv[0], L.wk = qkv[1], L.wv = qkv[2];
    } else {
      L.wq = take(p + "self_attn.q_proj.weight", {QD, H}, true, true);
      L.wk = take(p + "self_attn.k_proj.weight", {KD, H}, true, true);
      L.wv = take(p + "self_attn.v_proj.weight", {KD, H}, true, true);
    }
    L.wo = take(p + "self_attn.o_proj.weight", {H, QD}, true, true);
    if (arch.qkv_bias) {
      L.bq = take(p + "self_attn.q_proj.bias", {QD}).f32();
      L.bk = take(p + "self_attn.k_proj.bias", {KD}).f32();
      L.bv = take(p + "self_attn.v_proj.bias", {KD}).f32();
    }
    if (arch.o_bias) L.bo = take(p + "self_attn.o_proj.bias", {H}, false).f32();
    if (arch.qk_norm == QkNormKind::kWhole) {
      L.q_norm = take(p + "self_attn.q_norm.weight", {QD}).f32();
      L.k_norm = take(p + "self_attn.k_norm.weight", {KD}).f32();
    } else if (c.qk_norm) {
      L.q_norm = take(p + "self_attn.q_norm.weight", {D}).f32();
      L.k_norm = take(p + "self_attn.k_norm.weight", {D}).f32();
    }
    if (has_tau_w) {
      L.tau_w = take(p + "self_attn.tau_proj.weight", {One, H});  // fp32 memory, used as a [1, hidden] matrix
      if (c.focal.tau_bias) L.tau_b = take(p + "self_attn.tau_proj.bias", {One}).f32();
    }
    // Norm names: LLaMA's post_attention_layernorm is its pre-MLP norm; Gemma 2 / OLMo 2 use it after attention.
    if (arch.post_attn_norm) L.post_attn_norm = take_norm(p + "post_attention_layernorm.weight");
    if (arch.pre_mlp_norm)
      L.mlp_norm =
          take_norm(p + (arch.post_attn_norm ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight"));
    if (arch.post_mlp_norm) L.post_mlp_norm = take_norm(p + "post_feedforward_layernorm.weight");
    if (spec.fused_gate_up) {
      auto gu = take_parts(p + "mlp.gate_up_proj.weight", {I2, H}, false, {I.n, I.n}, true);
      L.w_gate = gu[0], L.w_up = gu[1];
    } else {
      L.w_gate = take(p + "mlp.gate_proj.weight", {I, H}, true, true);
      L.w_up = take(p + "mlp.up_proj.weight", {I, H}, true, true);
    }
    L.w_down = take(p + "mlp.down_proj.weight", {H, I}, true, true);
    if (arch.mlp_bias) {
      L.b_gate = take(p + "mlp.gate_proj.bias", {I}).f32();
      L.b_up = take(p + "mlp.up_proj.bias", {I}).f32();
      L.b_down = take(p + "mlp.down_proj.bias", {H}).f32();
    }
  }
  for (auto& [name, _] : all) {
    if (used.count(name)) continue;
    static const std::string kInvFreq = "rotary_emb.inv_freq";  // buffer some exporters save; recomputed here
    if (name.size() >= kInvFreq.size() && name.compare(name.size() - kInvFreq.size(), kInvFreq.size(), kInvFreq) == 0)
      continue;
    throw Error("'" + all[name].second + "': unexpected tensor '" + name + "' (not part of a " +
                std::to_string(c.n_layers) + "-layer '" + c.arch.name + "' model as described by config.json)");
  }
  m->tok_ = gguf ? std::move(gguf->tok) : load_hf_dir_tokenizer(dir, &c);  // tokenizer.json or tokenizer.model
  // The files' checksum: at once when every weight was copied out of them (the mappings then close), on the first
  // weights_checksum() call when stored weights keep them open (hashing an 8B file takes seconds).
  auto hash_files = [gguf, st_files]() {
    uint64_t h = 0xcbf29ce484222325ULL;
    if (gguf) return gguf->file->fnv1a(h);
    for (const auto& f : st_files) h = f->fnv1a(h);
    return h;
  };
  if (any_stored) {
    m->weights_mode_ = WeightsMode::kNative;
    m->checksum_fn_ = hash_files;
    if (gguf) w->files.push_back(gguf);
    for (const auto& f : st_files) w->files.push_back(f);
  } else {
    m->checksum_ = hash_files();
    std::call_once(m->checksum_once_, [] {});
  }
  m->decode_panels_ = (int)relaid.size();
  // auto: fast on the GPU when a matrix is held in 16 bits or quantized (focal/device.h); the CPU is always exact.
  const bool fast = m->device_ == Device::kCuda &&
                    (options.precision == Precision::kFast || (options.precision == Precision::kAuto && any_stored));
  m->precision_ = fast ? Precision::kFast : Precision::kExact;
  be.set_fast(fast);
  m->w_ = std::move(w);
  return m;
}

uint64_t Model::weights_checksum() const {
  std::call_once(checksum_once_, [this] { checksum_ = checksum_fn_ ? checksum_fn_() : 0; });
  return checksum_;
}

size_t Model::weight_bytes() const { return backend_->weight_bytes(); }

}  // namespace focal
