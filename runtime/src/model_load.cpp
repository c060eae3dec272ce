// Loading a Hugging Face model directory (config.json, safetensors single or sharded, tokenizer.model) or a GGUF
// file (gguf_model.cpp maps it onto the same tensors).
#include <filesystem>
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
#include "focal/byte_size.h"
#include "focal/atomic_file.h"
#include "focal/error.h"
#include "focal/hf_cache.h"
#include "focal_kernels/ops.h"
#include "focal_kernels/quant.h"
#include "model_internal.h"
#include "gguf_model.h"
#include "safetensors.h"
#include "tokenizer_internal.h"
#include "weight_binder.h"

namespace focal {

using json = nlohmann::json;

const char* version() { return "0.1.0"; }
const char* cpu_gemm_kernels() { return ops::blas_core(); }

Model::~Model() = default;

// Model::recorded_path: absolute for a local path (resolved at load, against the directory the load ran in), in one
// spelling: "." and "DIR/" recorded "DIR/" with its slash, unlike "DIR".
static std::string recorded_path_of(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return path;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) return path;
  std::string s = abs.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

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
  // transformers' generate stops at generation_config.json's eos_token_id when the directory has one (Llama 3.x
  // Instruct lists <|eot_id|> there and in config.json); a file that does not parse is noted and left out.
  const std::string gen_path = dir + "/generation_config.json";
  if (file_exists(gen_path)) {
    try {
      const nlohmann::json gj = nlohmann::json::parse(read_text(gen_path));
      if (gj.is_object() && gj.contains("eos_token_id") && !gj["eos_token_id"].is_null()) {
        std::vector<int> ids;
        const nlohmann::json& e = gj["eos_token_id"];
        for (const nlohmann::json& x : e.is_array() ? e : nlohmann::json::array({e}))
          if (x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() < cfg->vocab_size)
            ids.push_back(x.get<int>());
        if (!ids.empty()) {
          cfg->eos_ids = ids;
          cfg->eos_id = ids[0];
        }
      }
    } catch (const nlohmann::json::exception& e) {
      cfg->warnings.push_back(gen_path + " is not JSON (" + std::string(e.what()) +
                              "); generation stops at config.json's eos_token_id");
    }
  }

  // Weight files.
  std::vector<std::string> files;
  std::map<std::string, std::string> index_map;  // tensor name -> the shard path model.safetensors.index.json names
  const std::string index_path = dir + "/model.safetensors.index.json";
  require_link_target(dir + "/model.safetensors");  // a dangling link read as "neither ... is present"
  require_link_target(index_path);
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
    if (idx["weight_map"]
            .empty())  // read as "the weights hold no layers — the config does not belong to these weights"
      throw Error(index_path + ": \"weight_map\" is empty: it names no tensor and no shard (an interrupted export?)");
    std::set<std::string> shard_names;
    for (auto& [k, v] : idx["weight_map"].items()) {
      if (!v.is_string()) throw Error(index_path + ": weight_map entry '" + k + "' is not a file name");
      const std::string s = v.get<std::string>();
      if (s.find('/') != std::string::npos)
        throw Error(index_path + ": shard name '" + s + "' must be a plain file name");
      shard_names.insert(s);
      index_map[k] = dir + "/" + s;
    }
    for (auto& s : shard_names) {
      if (!file_exists(dir + "/" + s)) throw Error(index_path + " names shard '" + s + "', which is missing");
      files.push_back(dir + "/" + s);
    }
  } else if (file_exists(dir + "/pytorch_model.bin") || file_exists(dir + "/pytorch_model.bin.index.json")) {
    throw Error("model '" + dir +
                "' holds PyTorch pickle weights (pytorch_model.bin), which focalscope does not read (a pickle can run "
                "code): convert them once with transformers, model.save_pretrained(DIR, safe_serialization=True), "
                "and open DIR");
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
  // Each tensor is read from the shard that holds it; an index that places tensors elsewhere (shards of two
  // revisions mixed, or an index edited by hand) is said once, since the files may not belong together.
  size_t misplaced = 0;
  std::string example;
  for (const auto& [name, shard] : index_map) {
    const auto it = all.find(name);
    const std::string held = it == all.end() ? std::string("no shard") : "'" + it->second.second + "'";
    if (it != all.end() && it->second.second == shard) continue;
    if (misplaced++ == 0) example = "'" + name + "' in '" + shard + "', but " + held + " holds it";
  }
  if (misplaced > 0)
    cfg->warnings.push_back(index_path + " places " + std::to_string(misplaced) + " tensor" +
                            (misplaced == 1 ? "" : "s") + " in a shard that does not hold them (first: " + example +
                            "): were the shards downloaded from one revision?");
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

namespace {

// A model's files, opened: a .gguf file or a Hugging Face directory, with its config and every tensor.
struct OpenedFiles {
  ModelConfig cfg;
  std::string cfg_path;  // how errors name the config: config.json's path, or the GGUF file's metadata
  std::vector<std::shared_ptr<SafetensorsFile>> st_files;
  std::shared_ptr<GgufModel> gguf;  // a .gguf file in place of a directory (gguf_model.h)
  TensorMap all;
  // Field names of the config's source, for errors: config.json keys, or the GGUF metadata keys they came from.
  std::string field(const char* hf, const char* gg) const { return gguf ? gg : hf; }
};

OpenedFiles open_model_files(const std::string& dir) {
  OpenedFiles f;
  if (is_gguf_path(dir)) {
    f.gguf = open_gguf_model(dir);
    f.cfg = f.gguf->cfg;
    f.cfg_path = "'" + dir + "' (GGUF metadata)";
    for (auto& [name, t] : f.gguf->tensors) f.all[name] = {&t, dir};
  } else {
    open_hf_dir(dir, &f.cfg, &f.cfg_path, &f.st_files, &f.all);
  }
  return f;
}

// The config against the tensors, before anything is sized by it: the layers it promises, and QK-norm and learned
// tau, which are detected from the weights. Returns whether tau_proj is present.
bool check_config_against_tensors(OpenedFiles& f, const ArchSpec& spec) {
  ModelConfig& c = f.cfg;
  const std::string layer_prefix = spec.layout == TensorLayout::kGpt2 ? "transformer.h." : "model.layers.";
  const int64_t stored_layers = layers_in_weights(f.all, layer_prefix);
  if (c.n_layers > stored_layers)
    throw Error(f.cfg_path + ": " + f.field("num_hidden_layers", "llama.block_count") + " = " +
                std::to_string(c.n_layers) + " but the weights hold " +
                (stored_layers ? "layers 0.." + std::to_string(stored_layers - 1) : std::string("no layers")) +
                " — the config does not belong to these weights");
  c.qk_norm = f.all.count("model.layers.0.self_attn.q_norm.weight") > 0;
  const bool has_tau_w = f.all.count("model.layers.0.self_attn.tau_proj.weight") > 0;
  if (c.focal.has_tau && !has_tau_w)
    throw Error(f.cfg_path +
                ": \"focal\".mode is \"learned\" but tensor 'model.layers.0.self_attn.tau_proj.weight' is "
                "missing from the weights");
  if (has_tau_w && !c.focal.has_tau) {
    // Weights carry tau_proj but config.json does not declare learned mode: refuse rather than guess the bounds.
    throw Error(f.cfg_path +
                ": weights contain self_attn.tau_proj but \"focal\".mode is not \"learned\" — add "
                "\"focal\": {\"mode\": \"learned\", \"tau_min\": .., \"tau_max\": ..}");
  }
  return has_tau_w;
}

// The weights' memory as they will be held, checked against the budget before anything is allocated: stored bytes
// for the matrices native mode keeps as they are, 4 bytes a value for everything widened to fp32.
void check_budget(const TensorMap& all, const std::string& dir, const LoadOptions& options) {
  if (options.budget_bytes == 0) return;
  size_t held = 0, fp32 = 0;
  for (const auto& [name, tf] : all) {
    const StTensor& t = *tf.first;
    const bool stored = options.weights == WeightsMode::kNative && t.shape.size() == 2 &&
                        (t.to_f32 ? t.stored_type > 0 : (t.dtype == "F16" || t.dtype == "BF16"));
    held += stored ? t.n_bytes : 4 * t.numel();
    fp32 += 4 * t.numel();
  }
  if (held <= options.budget_bytes) return;
  const auto gb = [](size_t b) { return format_byte_size(b); };
  const std::string msg = "model '" + dir + "' needs about " + gb(held) + " for its weights (--weights " +
                          weights_mode_name(options.weights) + "; fp32 would take " + gb(fp32) + "), over " +
                          (options.budget_is_machine ? "this machine's memory of " : "the memory budget of ") +
                          gb(options.budget_bytes) + " — " + (options.budget_is_machine ? "" : "raise --budget, or ") +
                          (options.weights == WeightsMode::kFp32 ? "load with --weights native, or " : "") +
                          "use a smaller or more quantized file";
  if (options.budget_is_machine) throw Error(msg);
  throw Error("budget", msg);
}

// Every tensor of the files was bound (or is a buffer some exporters save): anything else is refused, not ignored.
void check_all_bound(const TensorMap& all, const std::set<std::string>& used, const ModelConfig& c) {
  for (const auto& [name, tf] : all) {
    if (used.count(name) || is_saved_buffer(name)) continue;
    throw Error("'" + tf.second + "': unexpected tensor '" + name + "' (not part of a " + std::to_string(c.n_layers) +
                "-layer '" + c.arch.name + "' model as described by config.json)");
  }
}

// FNV-1a 64 over the weight files' bytes, in the order they were opened: Model::weights_checksum's definition.
uint64_t hash_weight_files(const std::shared_ptr<GgufModel>& gguf,
                           const std::vector<std::shared_ptr<SafetensorsFile>>& st_files) {
  uint64_t h = 0xcbf29ce484222325ULL;
  if (gguf) return gguf->file->fnv1a(h);
  for (const auto& f : st_files) h = f->fnv1a(h);
  return h;
}

}  // namespace

uint64_t Model::files_checksum(const std::string& path_in) {
  std::string path = path_in;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const OpenedFiles files = open_model_files(resolve_model_path(path, nullptr));
  return hash_weight_files(files.gguf, files.st_files);
}

// Opening (the files, the config), checks (config against tensors, the memory budget, the device), binding (the
// architecture table's tensors, weight_binder.h), checks (nothing left unbound), then the tokenizer and checksum.
std::unique_ptr<Model> Model::load(const std::string& dir_in, Device device, const LoadOptions& options) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::string note;
  dir = resolve_model_path(dir, &note);  // ORG/NAME[@REVISION]: its snapshot in the Hugging Face cache
  std::unique_ptr<Model> m(new Model());
  m->path_ = dir;
  m->recorded_path_ = recorded_path_of(dir);
  OpenedFiles files = open_model_files(dir);
  if (!note.empty()) files.cfg.warnings.push_back(note);
  if (!options.rope_scaling.empty()) {  // before any check that reads the positions
    apply_rope_override(files.cfg, options.rope_scaling);
    files.cfg.warnings.push_back("rope_scaling " + options.rope_scaling + " replaces the model's own (" + dir + ")");
    files.cfg.rope_override = options.rope_scaling;
  }
  const ArchSpec& spec = arch_spec(files.cfg.arch.name);
  const bool has_tau_w = check_config_against_tensors(files, spec);
  check_budget(files.all, dir, options);
  m->cfg_ = files.cfg;
  ModelConfig& c = m->cfg_;
  std::shared_ptr<GgufModel> gguf = files.gguf;

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
  m->backend_ = make_backend(m->device_);
  Backend& be = *m->backend_;

  WeightBinder binder(be, options, c, files.all, dir, files.cfg_path, gguf.get(), held);
  std::unique_ptr<Weights> w = binder.bind(spec, has_tau_w);
  check_all_bound(files.all, binder.used(), c);
  m->n_params_ = binder.n_params();
  const bool any_stored = binder.any_stored();
  m->decode_panels_ = binder.n_relaid();

  m->tok_ = gguf ? std::move(gguf->tok) : load_hf_dir_tokenizer(dir, &c);  // tokenizer.json or tokenizer.model
  // The files' checksum: at once when every weight was copied out of them (the mappings then close), on the first
  // weights_checksum() call when stored weights keep them open (hashing an 8B file takes seconds).
  auto hash_files = [gguf, st_files = files.st_files]() { return hash_weight_files(gguf, st_files); };
  if (any_stored) {
    m->weights_mode_ = WeightsMode::kNative;
    m->checksum_fn_ = hash_files;
    if (gguf) w->files.push_back(gguf);
    for (const auto& f : files.st_files) w->files.push_back(f);
  } else {
    m->checksum_ = hash_files();
    std::call_once(m->checksum_once_, [] {});
  }
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
size_t Model::device_bytes_peak() const { return backend_->device_bytes_peak(); }

}  // namespace focal
