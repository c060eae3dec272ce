// TempSpec: validation, JSON round trip and run labels.
#include "focal/temp_spec.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "focal/error.h"
#include "focal_kernels/shared_math.h"
#include "json_util.h"

namespace focal {

using json = nlohmann::json;

TempSpec TempSpec::native(const ModelConfig& cfg) {
  TempSpec s;
  s.mode = cfg.focal.mode;
  s.focal_temp = cfg.focal.mode == AttnMode::kFocal ? cfg.focal.focal_temp : 1.0f;
  return s;
}

static std::string fmt_g(float v);

// field: the TempSpec member; item: how the message names it ("layer_temp[7]").
static void check_temp(float t, const char* field, const std::string& item) {
  if (!std::isfinite(t) || !(t > 0.0f))
    throw Error(field, item + " = " + fmt_g(t) + " must be a finite number > 0; 1 is standard attention, " +
                           "0.4 the paper's focal setting");
}

void TempSpec::validate(const ModelConfig& cfg) const {
  if (mode == AttnMode::kFocal) check_temp(focal_temp, "focal_temp", "focal_temp");
  for (const auto& [l, t] : layer_temp) {
    const std::string item = "layer_temp[" + std::to_string(l) + "]";
    if (l < 0 || l >= cfg.n_layers)
      throw Error("layer_temp", item + ": layer " + std::to_string(l) + " is out of range (the model has " +
                                    std::to_string(cfg.n_layers) + " layers, 0.." + std::to_string(cfg.n_layers - 1) +
                                    ")");
    check_temp(t, "layer_temp", item);
  }
  for (const auto& [lh, t] : head_temp) {
    const std::string item = "head_temp[" + std::to_string(lh.first) + ":" + std::to_string(lh.second) + "]";
    if (lh.first < 0 || lh.first >= cfg.n_layers)
      throw Error("head_temp", item + ": layer " + std::to_string(lh.first) + " is out of range (the model has " +
                                   std::to_string(cfg.n_layers) + " layers)");
    if (lh.second < 0 || lh.second >= cfg.n_heads)
      throw Error("head_temp", item + ": head " + std::to_string(lh.second) + " is out of range (the model has " +
                                   std::to_string(cfg.n_heads) + " heads, 0.." + std::to_string(cfg.n_heads - 1) + ")");
    check_temp(t, "head_temp", item);
  }
  if (mode == AttnMode::kLearned) {
    if (!cfg.focal.has_tau)
      throw Error("mode",
                  "mode = learned: this model has no learned temperature (config.json \"focal\".mode is "
                  "not \"learned\"); use mode focal with a focal_temp instead");
    check_temp(tau_scale, "tau_scale", "tau_scale");
  }
  if (mode == AttnMode::kSsmax) check_temp(ssmax_s, "ssmax_s", "ssmax_s");
}

std::string TempSpec::to_json() const {
  json j;
  j["mode"] = attn_mode_name(mode);
  j["focal_temp"] = short_decimal(focal_temp);
  j["tau_scale"] = short_decimal(tau_scale);
  j["ssmax_s"] = short_decimal(ssmax_s);
  json lt = json::object();
  for (const auto& [l, t] : layer_temp) lt[std::to_string(l)] = short_decimal(t);
  j["layer_temp"] = lt;
  json ht = json::array();
  for (const auto& [lh, t] : head_temp)
    ht.push_back({{"layer", lh.first}, {"head", lh.second}, {"focal_temp", short_decimal(t)}});
  j["head_temp"] = ht;
  return j.dump();
}

TempSpec TempSpec::from_json(const std::string& text, const std::string& where) {
  TempSpec s;
  try {
    json j = json::parse(text);
    s.mode = parse_attn_mode(j.at("mode").get<std::string>(), where);
    s.focal_temp = j.value("focal_temp", 1.0f);
    s.tau_scale = j.value("tau_scale", 1.0f);
    s.ssmax_s = j.value("ssmax_s", 1.0f);
    if (j.contains("layer_temp"))
      for (auto& [k, v] : j["layer_temp"].items()) s.layer_temp[std::stoi(k)] = v.get<float>();
    if (j.contains("head_temp"))
      for (auto& e : j["head_temp"])
        s.head_temp[{e.at("layer").get<int>(), e.at("head").get<int>()}] = e.at("focal_temp").get<float>();
  } catch (const Error&) { throw; } catch (const std::exception& e) {
    throw Error(where + ": malformed temperature spec JSON (" + e.what() + ")");
  }
  return s;
}

static std::string fmt_g(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

std::string TempSpec::label() const {
  std::string s;
  switch (mode) {
    case AttnMode::kStandard: s = "standard"; break;
    case AttnMode::kFocal: s = "focal_t" + fmt_g(focal_temp); break;
    case AttnMode::kLearned: s = tau_scale == 1.0f ? "learned" : "learned_x" + fmt_g(tau_scale); break;
    case AttnMode::kSsmax: s = "ssmax_s" + fmt_g(ssmax_s); break;
  }
  if (!layer_temp.empty() || !head_temp.empty()) s += "+overrides";
  return s;
}

float TempSpec::row_multiplier(const ModelConfig& cfg, int layer, int head, int n_visible, float tau_clipped) const {
  auto ht = head_temp.find({layer, head});
  if (ht != head_temp.end()) return math::focal_scale(ht->second);
  auto lt = layer_temp.find(layer);
  if (lt != layer_temp.end()) return math::focal_scale(lt->second);
  switch (mode) {
    case AttnMode::kStandard: return 1.0f;
    case AttnMode::kFocal: return math::focal_scale(focal_temp);
    case AttnMode::kSsmax: return math::ssmax_scale(ssmax_s, n_visible);
    case AttnMode::kLearned: return math::learned_scale(tau_clipped * tau_scale, std::sqrt((float)cfg.d_head));
  }
  return 1.0f;
}

int TempSpec::first_changed_layer(const TempSpec& o, const ModelConfig& cfg) const {
  auto layer_same = [&](int l) {
    for (int h = 0; h < cfg.n_heads; ++h) {
      auto a = head_temp.find({l, h}), b = o.head_temp.find({l, h});
      if ((a == head_temp.end()) != (b == o.head_temp.end())) return false;
      if (a != head_temp.end()) {
        if (a->second != b->second) return false;
        continue;
      }
      auto la = layer_temp.find(l), lb = o.layer_temp.find(l);
      if ((la == layer_temp.end()) != (lb == o.layer_temp.end())) return false;
      if (la != layer_temp.end()) {
        if (la->second != lb->second) return false;
        continue;
      }
      if (mode != o.mode) return false;
      switch (mode) {
        case AttnMode::kStandard: break;
        case AttnMode::kFocal:
          if (focal_temp != o.focal_temp) return false;
          break;
        case AttnMode::kSsmax:
          if (ssmax_s != o.ssmax_s) return false;
          break;
        case AttnMode::kLearned:
          if (tau_scale != o.tau_scale) return false;
          break;
      }
    }
    return true;
  };
  for (int l = 0; l < cfg.n_layers; ++l)
    if (!layer_same(l)) return l;
  return cfg.n_layers;
}

}  // namespace focal
