// The temperature file of a calibration (focal/calibrate.h): JSON read and write, the setting it stands for, and
// the checks that tie it to one model (shape fields at parse time, the weights checksum before a forward).
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "focal/atomic_file.h"
#include "focal/calibrate.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal/provenance.h"

namespace focal {

using json = nlohmann::json;

const char* calib_granularity_name(CalibGranularity g) {
  switch (g) {
    case CalibGranularity::kModel: return "model";
    case CalibGranularity::kLayer: return "layer";
    case CalibGranularity::kHead: return "head";
    case CalibGranularity::kTauProj: return "tau-proj";
  }
  return "head";
}

CalibGranularity parse_calib_granularity(const std::string& s, const std::string& where) {
  if (s == "model") return CalibGranularity::kModel;
  if (s == "layer") return CalibGranularity::kLayer;
  if (s == "head") return CalibGranularity::kHead;
  if (s == "tau-proj") return CalibGranularity::kTauProj;
  throw Error("granularity", where + ": '" + s + "' is not a granularity; use model (one t), layer (one t per " +
                                 "layer), head (one t per head) or tau-proj (the learned tau's projection per layer)");
}

namespace {

std::string hex64(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", (unsigned long long)v);
  return b;
}

}  // namespace

void write_temp_file(const TempFile& f, const std::string& path) {
  if (f.focal_temp.size() != (size_t)f.n_layers * f.n_heads)
    throw Error("temperature file '" + path + "': focal_temp must hold n_layers x n_heads values");
  json j;
  j["format"] = TempFile::kFormatName;
  j["format_version"] = TempFile::kFormatVersion;
  j["granularity"] = calib_granularity_name(f.granularity);
  j["shape"] = {{"n_layers", f.n_layers}, {"n_heads", f.n_heads}, {"n_kv_heads", f.n_kv_heads},
                {"d_head", f.d_head},     {"hidden", f.hidden},   {"vocab_size", f.vocab_size}};
  json rows = json::array();
  for (int l = 0; l < f.n_layers; ++l)
    rows.push_back(std::vector<float>(f.focal_temp.begin() + (size_t)l * f.n_heads,
                                      f.focal_temp.begin() + (size_t)(l + 1) * f.n_heads));
  j["focal_temp"] = rows;  // [n_layers][n_heads]
  if (f.granularity == CalibGranularity::kTauProj) {
    const TauProj* p = f.tau_proj.get();
    if (!p || p->n_layers != f.n_layers || p->hidden != f.hidden || p->weight.size() != (size_t)f.n_layers * f.hidden ||
        p->bias.size() != (size_t)f.n_layers)
      throw Error("temperature file '" + path + "': a tau-proj file needs n_layers projections of hidden values");
    json w = json::array();
    for (int l = 0; l < f.n_layers; ++l)
      w.push_back(std::vector<float>(p->weight.begin() + (ptrdiff_t)l * f.hidden,
                                     p->weight.begin() + (ptrdiff_t)(l + 1) * f.hidden));
    j["tau_proj"] = {{"tau_mode", tau_mode_name(p->tau_mode)},
                     {"tau_min", p->tau_min},
                     {"tau_max", p->tau_max},
                     {"weight", w},  // [n_layers][hidden]
                     {"bias", p->bias}};
  }
  j["base_model"] = f.base_model;
  j["base_checksum"] = hex64(f.base_checksum);
  j["data"] = {{"path", f.data_path},
               {"token_checksum", hex64(f.data_checksum)},
               {"n_train_tokens", f.n_train_tokens},
               {"n_val_tokens", f.n_val_tokens}};
  j["calibration"] = {{"steps", f.steps}, {"seq_len", f.seq_len}, {"batch", f.batch},
                      {"lr", f.lr},       {"seed", f.seed},       {"init_temp", f.init_temp}};
  j["losses"] = {{"val_loss_init", f.val_loss_init}, {"val_loss", f.val_loss}, {"train_loss", f.train_loss}};
  j["tool_version"] = f.tool_version.empty() ? std::string(version()) : f.tool_version;
  j["created_utc"] = f.created_utc.empty() ? utc_timestamp_now() : f.created_utc;
  write_file_atomically(path, j.dump(1) + "\n");
}

TempFile read_temp_file(const std::string& path) {
  const std::string where = "temperature file '" + path + "'";
  try {
    require_regular_input(path, "temperature file");  // a FIFO would block the open
  } catch (const Error& e) { throw Error("temp_file", e.what()); }
  std::ifstream in(path);
  if (!in)
    throw Error("temp_file", where + " cannot be opened: " + std::strerror(errno) + "; give the file that " +
                                 "focal calibrate wrote (-o)");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception&) {
    // The parser's own message quotes the byte it stopped at, raw (a capture's '\x89'): say what the file is.
    std::ifstream head(path, std::ios::binary);
    char magic[8] = {};
    head.read(magic, sizeof magic);
    const bool hdf5 = std::string(magic, 8) == std::string("\x89HDF\r\n\x1a\n", 8);
    throw Error("temp_file",
                where +
                    (hdf5 ? " is an HDF5 file (a capture, sweep or log?), not a temperature file" : " is not JSON") +
                    "; give the TEMPS.json file that focal calibrate wrote (-o)");
  }
  if (!j.is_object() || j.value("format", std::string()) != TempFile::kFormatName)
    throw Error("temp_file", where + " is not a temperature file (its \"format\" is not \"" +
                                 std::string(TempFile::kFormatName) + "\"); give the file that focal calibrate wrote");
  TempFile f;
  std::string field;  // the one being read, for a malformed value's message
  try {
    field = "format_version";
    if (j.at("format_version").get<int>() > TempFile::kFormatVersion)
      throw Error("temp_file", where + ": format_version " + std::to_string(j.at("format_version").get<int>()) +
                                   " is newer than this focalscope reads (" + std::to_string(TempFile::kFormatVersion) +
                                   "); update focalscope");
    field = "granularity";
    f.granularity = parse_calib_granularity(j.at("granularity").get<std::string>(), where + ": granularity");
    field = "shape";
    const json& s = j.at("shape");
    f.n_layers = s.at("n_layers").get<int>();
    f.n_heads = s.at("n_heads").get<int>();
    f.n_kv_heads = s.at("n_kv_heads").get<int>();
    f.d_head = s.at("d_head").get<int>();
    f.hidden = s.at("hidden").get<int>();
    f.vocab_size = s.at("vocab_size").get<int>();
    field = "focal_temp";
    const json& rows = j.at("focal_temp");
    if (!rows.is_array() || (int)rows.size() != f.n_layers || f.n_layers <= 0 || f.n_heads <= 0)
      throw Error("temp_file",
                  where + ": focal_temp must be an array of n_layers = " + std::to_string(f.n_layers) + " rows");
    for (int l = 0; l < f.n_layers; ++l) {
      const json& r = rows[l];
      if (!r.is_array() || (int)r.size() != f.n_heads)
        throw Error("temp_file", where + ": focal_temp[" + std::to_string(l) +
                                     "] must hold n_heads = " + std::to_string(f.n_heads) + " values");
      for (int h = 0; h < f.n_heads; ++h) {
        const float t = r[h].is_number() ? r[h].get<float>() : NAN;
        if (!temp_in_range(t))
          throw Error("temp_file",
                      where + ": focal_temp[" + std::to_string(l) + "][" + std::to_string(h) + "] " + kTempRangeText);
        f.focal_temp.push_back(t);
      }
    }
    // A model file holds one t and a layer file one per layer: a value that differs (a hand edit) was applied as the
    // first of its group, without a word, while inspect reported the differing one.
    if (f.granularity == CalibGranularity::kModel || f.granularity == CalibGranularity::kLayer)
      for (int l = 0; l < f.n_layers; ++l)
        for (int h = 0; h < f.n_heads; ++h) {
          const int l0 = f.granularity == CalibGranularity::kModel ? 0 : l;
          const float t = f.focal_temp[(size_t)l * f.n_heads + h], t0 = f.focal_temp[(size_t)l0 * f.n_heads];
          if (t != t0)
            throw Error("temp_file", where + ": granularity " + calib_granularity_name(f.granularity) +
                                         " holds one t " +
                                         (f.granularity == CalibGranularity::kModel ? "for the model" : "per layer") +
                                         ", but focal_temp[" + std::to_string(l) + "][" + std::to_string(h) +
                                         "] = " + shortest_decimal(t) + " differs from focal_temp[" +
                                         std::to_string(l0) + "][0] = " + shortest_decimal(t0) +
                                         " (an edited file?): give them one value, or set granularity to head");
        }
    field = "tau_proj";
    if (f.granularity == CalibGranularity::kTauProj) {
      const json& t = j.at("tau_proj");
      auto p = std::make_shared<TauProj>();
      p->tau_mode = parse_tau_mode(t.at("tau_mode").get<std::string>(), where + ": tau_proj.tau_mode");
      p->tau_min = t.at("tau_min").get<float>();
      p->tau_max = t.at("tau_max").get<float>();
      p->n_layers = f.n_layers;
      p->hidden = f.hidden;
      const json& w = t.at("weight");
      if (!w.is_array() || (int)w.size() != f.n_layers)
        throw Error("temp_file", where + ": tau_proj.weight must hold n_layers = " + std::to_string(f.n_layers) +
                                     " rows of hidden = " + std::to_string(f.hidden) + " values");
      for (int l = 0; l < f.n_layers; ++l) {
        const std::vector<float> row = w[l].get<std::vector<float>>();
        if ((int)row.size() != f.hidden)
          throw Error("temp_file", where + ": tau_proj.weight[" + std::to_string(l) +
                                       "] must hold hidden = " + std::to_string(f.hidden) + " values");
        p->weight.insert(p->weight.end(), row.begin(), row.end());
      }
      p->bias = t.at("bias").get<std::vector<float>>();
      if ((int)p->bias.size() != f.n_layers)
        throw Error("temp_file",
                    where + ": tau_proj.bias must hold n_layers = " + std::to_string(f.n_layers) + " values");
      for (float v : p->weight)
        if (!std::isfinite(v)) throw Error("temp_file", where + ": tau_proj.weight holds a value that is not finite");
      for (float v : p->bias)
        if (!std::isfinite(v)) throw Error("temp_file", where + ": tau_proj.bias holds a value that is not finite");
      if (!(p->tau_min > 0.0f) || !(p->tau_max > p->tau_min))
        throw Error("temp_file", where + ": tau_proj needs 0 < tau_min < tau_max");
      f.tau_proj = std::move(p);
    }
    field = "base_model";
    f.base_model = j.value("base_model", std::string());
    field = "base_checksum";
    f.base_checksum = std::stoull(j.at("base_checksum").get<std::string>(), nullptr, 16);
    field = "data";
    if (j.contains("data")) {
      const json& d = j.at("data");
      f.data_path = d.value("path", std::string());
      f.data_checksum = std::stoull(d.value("token_checksum", std::string("0")), nullptr, 16);
      f.n_train_tokens = d.value("n_train_tokens", (int64_t)0);
      f.n_val_tokens = d.value("n_val_tokens", (int64_t)0);
    }
    field = "calibration";
    if (j.contains("calibration")) {
      const json& c = j.at("calibration");
      f.steps = c.value("steps", 0);
      f.seq_len = c.value("seq_len", 0);
      f.batch = c.value("batch", 0);
      f.lr = c.value("lr", 0.0);
      f.seed = c.value("seed", (uint64_t)0);
      f.init_temp = c.value("init_temp", 1.0);
    }
    field = "losses";
    if (j.contains("losses")) {
      const json& lo = j.at("losses");
      f.val_loss_init = lo.value("val_loss_init", 0.0);
      f.val_loss = lo.value("val_loss", 0.0);
      f.train_loss = lo.value("train_loss", 0.0);
    }
    field = "tool_version / created_utc";
    f.tool_version = j.value("tool_version", std::string());
    f.created_utc = j.value("created_utc", std::string());
  } catch (const json::exception& e) {
    // The library's words without its tag ("[json.exception.type_error.302] type must be string, but is number").
    std::string why = e.what();
    if (why.rfind("[json.exception.", 0) == 0 && why.find("] ") != std::string::npos)
      why = why.substr(why.find("] ") + 2);
    throw Error("temp_file", where + ": field \"" + field + "\" is malformed (" + why +
                                 "); give the file that focal calibrate wrote");
  } catch (const std::invalid_argument&) {
    throw Error("temp_file", where + ": base_checksum must be 16 hexadecimal digits");
  } catch (const std::out_of_range&) {
    throw Error("temp_file", where + ": base_checksum must be 16 hexadecimal digits");
  }
  return f;
}

TempSpec temp_file_spec(const TempFile& f, const std::string& path) {
  TempSpec s;
  switch (f.granularity) {
    case CalibGranularity::kModel: s = TempSpec::focal(f.focal_temp[0]); break;
    case CalibGranularity::kLayer:
      for (int l = 0; l < f.n_layers; ++l) s.layer_temp[l] = f.focal_temp[(size_t)l * f.n_heads];
      break;
    case CalibGranularity::kHead:
      for (int l = 0; l < f.n_layers; ++l)
        for (int h = 0; h < f.n_heads; ++h) s.head_temp[{l, h}] = f.focal_temp[(size_t)l * f.n_heads + h];
      break;
    case CalibGranularity::kTauProj:
      s.mode = AttnMode::kLearned;
      s.tau_proj = f.tau_proj;
      break;
  }
  s.temp_file = path;
  s.base_checksum = f.base_checksum;
  return s;
}

void check_temp_file_shape(const TempFile& f, const ModelConfig& cfg, const std::string& path) {
  auto cmp = [&](const char* name, int file, int model) {
    if (file != model)
      throw Error("temp_file", "temperature file '" + path + "' was calibrated for another model: " + name + " " +
                                   std::to_string(file) + " (file) vs " + std::to_string(model) +
                                   " (this model); calibrate this model with focal calibrate");
  };
  cmp("n_layers", f.n_layers, cfg.n_layers);
  cmp("n_heads", f.n_heads, cfg.n_heads);
  cmp("n_kv_heads", f.n_kv_heads, cfg.n_kv_heads);
  cmp("d_head", f.d_head, cfg.d_head);
  cmp("hidden", f.hidden, cfg.hidden);
  cmp("vocab_size", f.vocab_size, cfg.vocab_size);
}

void check_spec_weights(const TempSpec& spec, const Model& model) {
  if (spec.base_checksum == 0) return;
  const uint64_t have = model.weights_checksum();
  if (have != spec.base_checksum)
    throw Error("temp_file", "temperature file '" + spec.temp_file + "' was calibrated for other weights: base " +
                                 "checksum " + hex64(spec.base_checksum) + " (file) vs " + hex64(have) + " ('" +
                                 model.path() + "'); calibrate this model with focal calibrate");
}

std::vector<std::string> calibration_gaps(const ModelConfig& c, int seq_len) {
  const ArchConfig& a = c.arch;
  std::vector<std::string> gaps;
  if (a.norm != NormKind::kRms || a.norm_plus_one) gaps.emplace_back("a norm other than RMSNorm (w)");
  if (!a.pre_attn_norm || !a.pre_mlp_norm) gaps.emplace_back("blocks without pre-norms");
  if (a.post_attn_norm || a.post_mlp_norm) gaps.emplace_back("post-norms");
  if (a.qk_norm == QkNormKind::kWhole) gaps.emplace_back("QK-norm over the whole projection");
  if (a.act != MlpActivation::kSilu || !a.gated_mlp) gaps.emplace_back("an MLP other than SwiGLU");
  if (a.mlp_bias) gaps.emplace_back("MLP biases");
  if (a.query_pre_attn_scalar != 0.0f) gaps.emplace_back("query_pre_attn_scalar");
  if (a.attn_softcap != 0.0f || a.final_softcap != 0.0f) gaps.emplace_back("logit soft-caps");
  if (a.embed_scale != 1.0f) gaps.emplace_back("a scaled embedding");
  if (a.sliding_window != 0 && a.sliding_window < seq_len)
    gaps.emplace_back("a sliding window (sliding_window " + std::to_string(a.sliding_window) +
                      ") narrower than the windows of " + std::to_string(seq_len) + " tokens: give --seq-len " +
                      std::to_string(a.sliding_window) + " or less");
  if (a.position != PositionKind::kRope) gaps.emplace_back("positions other than RoPE");
  return gaps;
}

}  // namespace focal
