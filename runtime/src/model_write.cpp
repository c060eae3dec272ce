// Safetensors and config.json writing, and deterministic random LLaMA weights.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "focal/atomic_file.h"
#include "gguf.h"
#include "focal/error.h"
#include "json_util.h"
#include "focal/model.h"
#include "focal/model_writer.h"
#include "focal_kernels/shared_math.h"
#include "model_internal.h"

namespace focal {

using json = nlohmann::json;

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors, const std::string& dtype) {
  const int es = dtype == "F32" ? 4 : (dtype == "F16" || dtype == "BF16") ? 2 : 0;
  if (!es) throw Error("write_safetensors: dtype must be F32, F16 or BF16, not '" + dtype + "'");
  // {"format": "pt"}, as torch's safetensors writer puts it: transformers 4.47.1's from_pretrained reads the
  // metadata and failed on a file without it ("'NoneType' object has no attribute 'get'").
  json h = json::object();
  h["__metadata__"] = {{"format", "pt"}};
  size_t off = 0;
  for (const auto& t : tensors) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= (size_t)d;
    if (n != t.data.size()) throw Error("write_safetensors: tensor '" + t.name + "' data does not match its shape");
    h[t.name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {off, off + n * es}}};
    off += n * es;
  }
  std::string hs = h.dump();
  while ((hs.size() + 8) % 8) hs += ' ';  // align the data area to 8 bytes
  std::string bytes(8 + hs.size() + off, '\0');
  const uint64_t hl = hs.size();
  std::memcpy(&bytes[0], &hl, 8);
  std::memcpy(&bytes[8], hs.data(), hs.size());
  char* p = &bytes[8 + hs.size()];
  for (const auto& t : tensors)
    for (float v : t.data) {
      if (es == 4) {
        std::memcpy(p, &v, 4);
      } else {
        const uint16_t u = dtype == "BF16" ? math::float_to_bf16_bits(v) : math::float_to_half_bits(v);
        std::memcpy(p, &u, 2);
      }
      p += es;
    }
  write_file_atomically(path, bytes);
}

std::string config_to_json(const ModelConfig& c, const std::string& dtype) {
  json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden;
  j["intermediate_size"] = c.intermediate;
  j["num_hidden_layers"] = c.n_layers;
  j["num_attention_heads"] = c.n_heads;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["head_dim"] = c.d_head;
  j["max_position_embeddings"] = c.max_positions;
  j["rope_theta"] = short_decimal(c.rope_theta);
  j["rms_norm_eps"] = short_decimal(c.rms_eps);
  j["tie_word_embeddings"] = c.tied_embeddings;
  j["attention_bias"] = c.attention_bias;
  j["hidden_act"] = "silu";
  j["torch_dtype"] = dtype == "BF16" ? "bfloat16" : dtype == "F16" ? "float16" : "float32";
  if (c.bos_id >= 0) j["bos_token_id"] = c.bos_id;
  if (c.eos_ids.size() > 1)
    j["eos_token_id"] = c.eos_ids;  // every end token, as the model's own config.json listed them
  else if (c.eos_id >= 0)
    j["eos_token_id"] = c.eos_id;
  if (c.focal.mode != AttnMode::kStandard) {
    json f;
    f["mode"] = attn_mode_name(c.focal.mode);
    if (c.focal.mode == AttnMode::kFocal) f["focal_temp"] = short_decimal(c.focal.focal_temp);
    if (c.focal.mode == AttnMode::kLearned) {
      f["tau_min"] = short_decimal(c.focal.tau_min);
      f["tau_max"] = short_decimal(c.focal.tau_max);
      f["tau_mode"] = tau_mode_name(c.focal.tau_mode);
      f["tau_bias"] = c.focal.tau_bias;
    }
    j["focal"] = f;
  }
  return j.dump(2) + "\n";
}

std::vector<NamedTensor> random_model_tensors(const ModelConfig& c, uint64_t seed, bool training_init, float init_std) {
  std::mt19937_64 rng(seed);
  std::vector<NamedTensor> out;
  auto normal = [&](const std::string& name, const std::vector<int64_t>& shape, float mean, float stdv) {
    NamedTensor t{name, shape, {}};
    size_t n = 1;
    for (int64_t d : shape) n *= (size_t)d;
    std::normal_distribution<float> nd(mean, stdv);
    t.data.resize(n);
    for (auto& v : t.data) v = stdv > 0.0f ? nd(rng) : mean;
    out.push_back(std::move(t));
  };
  const int64_t H = c.hidden, QD = (int64_t)c.n_heads * c.d_head, KD = (int64_t)c.n_kv_heads * c.d_head;
  const float sh = 1.0f / std::sqrt((float)H);
  // standard deviations: embedding, q/k, v, o, mlp in, mlp out, norm noise
  const float si = init_std;  // training: HF's initializer_range, residual outputs scaled by 1/sqrt(2 n_layers)
  const float s_emb = training_init ? si : 0.5f;
  const float s_qk = training_init ? si : 1.3f * sh;
  const float s_v = training_init ? si : sh;
  const float s_o = training_init ? si / std::sqrt(2.0f * c.n_layers) : 1.0f / std::sqrt((float)QD);
  const float s_in = training_init ? si : sh;
  const float s_out = training_init ? si / std::sqrt(2.0f * c.n_layers) : 1.0f / std::sqrt((float)c.intermediate);
  const float s_norm = training_init ? 0.0f : 0.1f;
  normal("model.embed_tokens.weight", {c.vocab_size, H}, 0.0f, s_emb);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    normal(p + "input_layernorm.weight", {H}, 1.0f, s_norm);
    normal(p + "self_attn.q_proj.weight", {QD, H}, 0.0f, s_qk);
    normal(p + "self_attn.k_proj.weight", {KD, H}, 0.0f, s_qk);
    normal(p + "self_attn.v_proj.weight", {KD, H}, 0.0f, s_v);
    normal(p + "self_attn.o_proj.weight", {H, QD}, 0.0f, s_o);
    if (training_init && c.attention_bias) {  // q/k/v/o biases (llama attention_bias), zero at the start
      out.push_back({p + "self_attn.q_proj.bias", {QD}, std::vector<float>((size_t)QD, 0.0f)});
      out.push_back({p + "self_attn.k_proj.bias", {KD}, std::vector<float>((size_t)KD, 0.0f)});
      out.push_back({p + "self_attn.v_proj.bias", {KD}, std::vector<float>((size_t)KD, 0.0f)});
      out.push_back({p + "self_attn.o_proj.bias", {H}, std::vector<float>((size_t)H, 0.0f)});
    }
    if (c.qk_norm) {
      normal(p + "self_attn.q_norm.weight", {c.d_head}, 1.0f, s_norm);
      normal(p + "self_attn.k_norm.weight", {c.d_head}, 1.0f, s_norm);
    }
    if (c.focal.has_tau) {
      normal(p + "self_attn.tau_proj.weight", {1, H}, 0.0f, training_init ? 0.02f : 0.5f * sh);
      if (c.focal.tau_bias) {
        // Start in the middle of [tau_min, tau_max] so the clip is not saturated and w_tau gets gradients.
        out.push_back({p + "self_attn.tau_proj.bias", {1}, {0.5f * (c.focal.tau_min + c.focal.tau_max)}});
      }
    }
    normal(p + "post_attention_layernorm.weight", {H}, 1.0f, s_norm);
    normal(p + "mlp.gate_proj.weight", {c.intermediate, H}, 0.0f, s_in);
    normal(p + "mlp.up_proj.weight", {c.intermediate, H}, 0.0f, s_in);
    normal(p + "mlp.down_proj.weight", {H, c.intermediate}, 0.0f, s_out);
  }
  normal("model.norm.weight", {H}, 1.0f, s_norm);
  if (!c.tied_embeddings) normal("lm_head.weight", {c.vocab_size, H}, 0.0f, training_init ? si : sh);
  return out;
}

void write_model_dir(const std::string& dir, const ModelConfig& cfg, const std::vector<NamedTensor>& tensors,
                     const std::string& dtype, const std::string& tokenizer_model) {
  for (size_t at = dir.find('/', 1); at != std::string::npos; at = dir.find('/', at + 1))  // parents first
    if (mkdir(dir.substr(0, at).c_str(), 0755) != 0 && errno != EEXIST)
      throw Error("cannot create directory '" + dir.substr(0, at) + "' (for the model directory '" + dir +
                  "'): " + std::strerror(errno));
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    throw Error("cannot create model directory '" + dir + "': " + std::strerror(errno));
  write_safetensors(dir + "/model.safetensors", tensors, dtype);
  if (!tokenizer_model.empty()) {
    std::ifstream in(tokenizer_model, std::ios::binary);
    if (!in) throw Error("cannot read tokenizer '" + tokenizer_model + "'");
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    write_file_atomically(dir + "/tokenizer.model", bytes);
  }
  write_file_atomically(dir + "/config.json", config_to_json(cfg, dtype));
}

void write_model_dir_staged(const std::string& dst_in, const std::function<void(const std::string& stage)>& write) {
  namespace fs = std::filesystem;
  std::string dst = dst_in;
  while (dst.size() > 1 && dst.back() == '/') dst.pop_back();
  std::error_code link_ec;
  if (fs::is_symlink(dst, link_ec)) {  // a link to a directory: its directory gets the model, the link stays
    const fs::path to = fs::canonical(dst, link_ec);
    if (!link_ec) dst = to.string();
  }
  const std::string stage = dst + ".tmp." + std::to_string((long)::getpid());
  std::error_code ec;
  fs::remove_all(stage, ec);
  // Parents first (write_model_dir makes the stage itself).
  for (size_t at = stage.find('/', 1); at != std::string::npos; at = stage.find('/', at + 1))
    if (mkdir(stage.substr(0, at).c_str(), 0755) != 0 && errno != EEXIST)
      throw Error("cannot create directory '" + stage.substr(0, at) + "' (for the model directory '" + dst +
                  "'): " + std::strerror(errno));
  try {
    write(stage);
  } catch (const Error& e) {  // named by the directory asked for, not its stage (a full disk named DST.tmp.PID/...)
    fs::remove_all(stage, ec);
    std::string m = e.what();
    for (size_t at = m.find(stage); at != std::string::npos; at = m.find(stage, at + dst.size()))
      m.replace(at, stage.size(), dst);
    throw Error(m);
  } catch (...) {
    fs::remove_all(stage, ec);
    throw;
  }
  const bool existed = fs::exists(dst, ec);
  if (!existed || (fs::is_directory(dst, ec) && fs::is_empty(dst, ec))) {
    if (existed) (void)::rmdir(dst.c_str());
    if (std::rename(stage.c_str(), dst.c_str()) == 0) return;
    const int err = errno;
    fs::remove_all(stage, ec);
    throw Error("cannot put the model directory '" + dst + "' in place: " + std::strerror(err) +
                "; nothing was written");
  }
  // Over an existing directory's files: each staged file in, its earlier one aside (into the stage, as NAME.old);
  // undone in reverse on the first failure.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(stage, ec)) names.push_back(e.path().filename().string());
  std::vector<std::pair<std::string, bool>> done;  // name, whether an earlier file was moved aside
  auto undo = [&]() {
    for (auto it = done.rbegin(); it != done.rend(); ++it) {
      const std::string in = dst + "/" + it->first;
      (void)std::rename(in.c_str(), (stage + "/" + it->first).c_str());
      if (it->second) (void)std::rename((stage + "/" + it->first + ".old").c_str(), in.c_str());
    }
  };
  for (const std::string& n : names) {
    const std::string to = dst + "/" + n, aside = stage + "/" + n + ".old";
    struct stat st {};
    const bool had = ::lstat(to.c_str(), &st) == 0;
    if (had && std::rename(to.c_str(), aside.c_str()) != 0) {
      const int err = errno;
      undo();
      fs::remove_all(stage, ec);
      throw Error("cannot replace '" + to + "': " + std::strerror(err) + "; '" + dst + "' is as it was");
    }
    if (std::rename((stage + "/" + n).c_str(), to.c_str()) != 0) {
      const int err = errno;
      if (had) (void)std::rename(aside.c_str(), to.c_str());
      undo();
      fs::remove_all(stage, ec);
      throw Error("cannot write '" + to + "': " + std::strerror(err) + "; '" + dst + "' is as it was");
    }
    done.emplace_back(n, had);
  }
  fs::remove_all(stage, ec);  // the earlier files
}

void export_model(const std::string& src, const std::string& dst, const std::string& dtype) {
  if (is_gguf_path(src))  // no directory of files to copy: its tokenizer lives in its metadata
    throw Error("export: '" + src +
                "' is a GGUF file; export copies a model directory (config.json, safetensors, "
                "tokenizer files) into another dtype. A GGUF file runs as it is, its tokenizer inside it");
  std::error_code ec;
  if (std::filesystem::exists(dst, ec) && std::filesystem::equivalent(src, dst, ec))
    throw Error("export: DST_DIR '" + dst +
                "' is SRC_MODEL itself: its weights would be rounded in place (a "
                "training checkpoint's optimizer state then no longer matches them); give another directory");
  auto m = Model::load(src);
  std::vector<NamedTensor> tensors;
  for (const ParamRef& p : m->weights().params) {
    std::vector<float> host(p.size);
    m->backend().download_weight(host.data(), p.weight, p.size);
    tensors.push_back({p.name, p.shape, std::move(host)});
  }
  struct stat st {};
  const std::string tok = src + "/tokenizer.model";
  require_link_target(tok);  // a copy of a model that left a relative link behind exported one without a tokenizer
  write_model_dir_staged(dst, [&](const std::string& stage) {
    write_model_dir(stage, m->config(), tensors, dtype, stat(tok.c_str(), &st) == 0 ? tok : "");
    // The Hugging Face tokenizer and generation files as they are (tokenizer.json alone left an exported Llama 3,
    // Qwen2 or SmolLM2 unable to tokenize).
    for (const char* name :
         {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json"}) {
      const std::string from = src + "/" + name;
      require_link_target(from);
      if (stat(from.c_str(), &st) != 0) continue;
      std::ifstream in(from, std::ios::binary);
      if (!in) throw Error("export: cannot read '" + from + "'");
      write_file_atomically(stage + "/" + name,
                            std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
    }
  });
}

}  // namespace focal
