// TempSpec: validation, JSON round trip and run labels.
#include "focal/temp_spec.h"

#include <cctype>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "focal/calibrate.h"
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

// field: the TempSpec member; item: how the message names it ("layer_temp[7]"); hint: what values mean.
static void check_temp(float t, const char* field, const std::string& item,
                       const char* hint = "1 is standard attention, 0.4 the paper's focal setting") {
  if (!temp_in_range(t)) throw Error(field, item + " = " + fmt_g(t) + " " + kTempRangeText + "; " + hint);
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
    if (tau_proj) {
      if (tau_proj->n_layers != cfg.n_layers || tau_proj->hidden != cfg.hidden ||
          tau_proj->weight.size() != (size_t)cfg.n_layers * cfg.hidden || tau_proj->bias.size() != (size_t)cfg.n_layers)
        throw Error("tau_proj", "the learned-temperature projections" +
                                    (temp_file.empty() ? std::string() : " of '" + temp_file + "'") + " are for " +
                                    std::to_string(tau_proj->n_layers) + " layers of hidden size " +
                                    std::to_string(tau_proj->hidden) + ", this model has " +
                                    std::to_string(cfg.n_layers) + " of " + std::to_string(cfg.hidden));
      if (!(tau_proj->tau_min > 0.0f) || !(tau_proj->tau_max > tau_proj->tau_min))
        throw Error("tau_proj", "the learned-temperature projections need 0 < tau_min < tau_max");
    } else if (!cfg.focal.has_tau) {
      throw Error("mode",
                  "mode = learned: this model has no learned temperature (config.json \"focal\".mode is "
                  "not \"learned\"); use mode focal with a focal_temp instead, or calibrate projections for it "
                  "(focal calibrate, granularity tau-proj)");
    }
    check_temp(tau_scale, "tau_scale", "tau_scale", "1 keeps the learned tau as trained");
  }
  if (mode == AttnMode::kSsmax) check_temp(ssmax_s, "ssmax_s", "ssmax_s", "1 scales the logits by ln(n_visible) alone");
}

std::string TempSpec::to_json() const {
  json j;
  j["mode"] = attn_mode_name(mode);
  // What applied: a mode's own number, and 1 for the others' (a t left from a focal setting under standard, or a
  // tau_scale under focal, never scaled a logit and is not recorded as if it had)
  j["focal_temp"] = short_decimal(mode == AttnMode::kFocal ? focal_temp : 1.0f);
  j["tau_scale"] = short_decimal(mode == AttnMode::kLearned ? tau_scale : 1.0f);
  j["ssmax_s"] = short_decimal(mode == AttnMode::kSsmax ? ssmax_s : 1.0f);
  json lt = json::object();
  for (const auto& [l, t] : layer_temp) lt[std::to_string(l)] = short_decimal(t);
  j["layer_temp"] = lt;
  json ht = json::array();
  for (const auto& [lh, t] : head_temp)
    ht.push_back({{"layer", lh.first}, {"head", lh.second}, {"focal_temp", short_decimal(t)}});
  j["head_temp"] = ht;
  if (base_checksum != 0) {
    j["temp_file"] = temp_file;
    char b[24];
    std::snprintf(b, sizeof b, "%016llx", (unsigned long long)base_checksum);
    j["base_checksum"] = b;
    if (file_overridden) j["temp_file_overridden"] = true;
  }
  if (tau_proj) {
    const TauProj& p = *tau_proj;
    j["tau_proj"] = {{"tau_mode", tau_mode_name(p.tau_mode)},
                     {"tau_min", p.tau_min},
                     {"tau_max", p.tau_max},
                     {"n_layers", p.n_layers},
                     {"hidden", p.hidden},
                     {"weight", p.weight},
                     {"bias", p.bias}};
  }
  return j.dump();
}

std::string TempSpec::to_json_brief() const {
  if (!tau_proj && temp_file.empty()) return to_json();
  json j = json::parse(to_json());
  if (tau_proj)
    j["tau_proj"]["weight"] =
        "[" + std::to_string(tau_proj->n_layers) + " x " + std::to_string(tau_proj->hidden) + " values]";
  // A temperature file's t of every layer or head (SmolLM2: 270 of them) is the file's: summarised, as the weights
  if (!temp_file.empty()) {
    auto summary = [&](size_t n, const char* what) {
      float lo = INFINITY, hi = -INFINITY;
      for (const auto& [k, t] : layer_temp) lo = std::min(lo, t), hi = std::max(hi, t);
      for (const auto& [k, t] : head_temp) lo = std::min(lo, t), hi = std::max(hi, t);
      char b[128];
      std::snprintf(b, sizeof b, "[%zu %s from the temperature file%s, t %.3g..%.3g]", n, what,
                    file_overridden ? " and overrides" : "", lo, hi);
      return std::string(b);
    };
    if (layer_temp.size() > 4) j["layer_temp"] = summary(layer_temp.size(), "layers");
    if (head_temp.size() > 4) j["head_temp"] = summary(head_temp.size(), "heads");
  }
  return j.dump();
}

std::string TempSpec::brief_json(const std::string& text) {
  try {
    return from_json(text, "temp_spec_json").to_json_brief();
  } catch (const std::exception&) { return text; }
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
    if (j.contains("base_checksum")) {
      s.temp_file = j.value("temp_file", std::string());
      s.base_checksum = std::stoull(j.at("base_checksum").get<std::string>(), nullptr, 16);
      s.file_overridden = j.value("temp_file_overridden", false);
    }
    if (j.contains("tau_proj")) {
      const json& t = j.at("tau_proj");
      auto p = std::make_shared<TauProj>();
      p->tau_mode = parse_tau_mode(t.at("tau_mode").get<std::string>(), where + ": tau_proj.tau_mode");
      p->tau_min = t.at("tau_min").get<float>();
      p->tau_max = t.at("tau_max").get<float>();
      p->n_layers = t.at("n_layers").get<int>();
      p->hidden = t.at("hidden").get<int>();
      p->weight = t.at("weight").get<std::vector<float>>();
      p->bias = t.at("bias").get<std::vector<float>>();
      s.tau_proj = std::move(p);
    }
  } catch (const Error&) { throw; } catch (const std::exception& e) {
    throw Error(where + ": malformed temperature spec JSON (" + e.what() + ")");
  }
  return s;
}

namespace {

const char* const kSpecGrammar =
    "use standard, native, focal:T (or a number t), learned, learned:X, ssmax, ssmax:S or calibrated:PATH (a "
    "temperature file of focal calibrate), each optionally followed "
    "by +L=T (layer L at t = T) or +L:H=T (head H of layer L), e.g. focal:0.4 or standard+2=0.3+2:1=0.5";

[[noreturn]] void bad_spec(const std::string& where, const std::string& what) {
  throw Error("spec", where + ": " + what + "; " + kSpecGrammar);
}

// A temperature (temp_in_range) spelled completely by `s` (the whole string; no leading blanks).
float spec_number(const std::string& s, const std::string& where, const std::string& spec, const char* what) {
  const char* b = s.c_str();
  char* end = nullptr;
  // Decimal only: strtod also reads hexadecimal ("0x10" ran as t = 16); inf and nan fail the range below.
  const bool decimal = s.find_first_not_of("0123456789.eE+-") == std::string::npos || s == "inf" || s == "nan";
  const double v = s.empty() || !decimal ? NAN : std::strtod(b, &end);
  if (!decimal || end != b + s.size() || s.empty())
    bad_spec(where, "'" + spec + "': " + what + " '" + s + "' is not a number");
  if (!temp_in_range(v))  // well formed, but not a temperature
    throw Error(where + ": '" + spec + "': " + what + " = " + s + " " + kTempRangeText +
                (std::string(what) == "t" ? " (1 is standard attention, 0.4 the paper's focal setting)" : ""));
  return (float)v;
}

// Whether `s` is one whole number as strtod reads it (nan and inf included, to be refused as temperatures).
bool is_number(const std::string& s) {
  if (s.empty() || std::isspace((unsigned char)s[0])) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// A layer or head index: digits only.
int spec_index(const std::string& s, const std::string& where, const std::string& item, const char* what) {
  if (s.empty() || s.size() > 6 || s.find_first_not_of("0123456789") != std::string::npos)
    bad_spec(where, "'" + item + "': " + what + " '" + s + "' is not an integer >= 0");
  return std::stoi(s);
}

std::string spec_decimal(float v) { return shortest_decimal(v); }

}  // namespace

std::string shortest_decimal(float v) {
  char b[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(b, sizeof b, "%.*g", digits, v);
    if (std::strtof(b, nullptr) == v) break;
  }
  return tidy_exponent(b);
}

std::string tidy_exponent(const std::string& printed) {
  const size_t e = printed.find('e');
  if (e == std::string::npos) return printed;
  std::string mant = printed.substr(0, e), exp = printed.substr(e + 1);
  const bool neg = !exp.empty() && exp[0] == '-';
  if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) exp.erase(0, 1);
  while (exp.size() > 1 && exp[0] == '0') exp.erase(0, 1);
  return mant + "e" + (neg ? "-" : "") + exp;
}

bool TempSpec::parse_override(const std::string& item, const std::string& where, std::set<std::pair<int, int>>* seen) {
  const size_t eq = item.find('=');
  if (eq == std::string::npos) bad_spec(where, "override '" + item + "' must look like L=T or L:H=T");
  const float t = spec_number(item.substr(eq + 1), where, item, "t");
  const std::string key = item.substr(0, eq);
  const size_t colon = key.find(':');
  const int layer = spec_index(colon == std::string::npos ? key : key.substr(0, colon), where, item, "layer");
  const int head = colon == std::string::npos ? -1 : spec_index(key.substr(colon + 1), where, item, "head");
  if (seen && !seen->insert({layer, head}).second)
    bad_spec(where, "override '" + item + "': " +
                        (head < 0 ? "layer " + std::to_string(layer)
                                  : "layer " + std::to_string(layer) + " head " + std::to_string(head)) +
                        " is given twice (give each layer or head one t)");
  if (!temp_file.empty()) file_overridden = true;
  if (head < 0) {
    layer_temp[layer] = t;
    if (!temp_file.empty())  // a head-granularity file's t of this layer would win over it: +0=0.5 changed nothing
      for (auto it = head_temp.lower_bound({layer, 0}); it != head_temp.end() && it->first.first == layer;)
        it = seen && seen->count(it->first) ? std::next(it) : head_temp.erase(it);
    return false;
  }
  head_temp[{layer, head}] = t;
  return true;
}

TempSpec TempSpec::parse(const std::string& text, const std::string& where, const ModelConfig* native_of) {
  if (text.empty()) bad_spec(where, "the temperature setting is empty");
  const size_t plus = text.find('+');
  const std::string base = text.substr(0, plus);
  TempSpec s;
  // "name:ARG" (the grammar) or "name_pARG" (a run name, e.g. focal_t0.4)
  auto arg_of = [&](const std::string& name, const std::string& run_prefix, std::string* arg) {
    if (base == name) return true;
    if (base.rfind(name + ":", 0) == 0) {
      *arg = base.substr(name.size() + 1);
      if (arg->empty()) bad_spec(where, "'" + text + "': " + name + ": needs a number after the colon");
      return true;
    }
    if (!run_prefix.empty() && base.rfind(run_prefix, 0) == 0 && base.size() > run_prefix.size()) {
      *arg = base.substr(run_prefix.size());
      return true;
    }
    return false;
  };
  std::string arg;
  if (base == "standard") {
  } else if (base == "native") {
    if (!native_of) bad_spec(where, "'native' is the model's own setting and needs a model");
    s = native(*native_of);
  } else if (arg_of("focal", "focal_t", &arg)) {
    if (arg.empty()) bad_spec(where, "'" + text + "': focal needs its t, e.g. focal:0.4");
    s = focal(spec_number(arg, where, text, "t"));
  } else if (arg_of("learned", "learned_x", &arg)) {
    s.mode = AttnMode::kLearned;
    if (!arg.empty()) s.tau_scale = spec_number(arg, where, text, "the tau multiplier X");
  } else if (arg_of("ssmax", "ssmax_s", &arg)) {
    s.mode = AttnMode::kSsmax;
    if (!arg.empty()) s.ssmax_s = spec_number(arg, where, text, "s");
  } else if (base.rfind("calibrated:", 0) == 0) {
    const std::string path = base.substr(std::string("calibrated:").size());
    if (path.empty()) bad_spec(where, "'" + text + "': calibrated: needs the temperature file, e.g. calibrated:t.json");
    const TempFile f = read_temp_file(path);
    if (native_of) check_temp_file_shape(f, *native_of, path);
    s = temp_file_spec(f, path);
  } else if (is_number(base)) {
    s = focal(spec_number(base, where, text, "t"));
  } else {
    bad_spec(where, "'" + text + "' is not a temperature setting");
  }
  if (plus == std::string::npos) return s;
  std::string rest = text.substr(plus + 1);
  if (rest == "overrides")
    bad_spec(where, "'" + text + "' is a run name whose overrides are not spelled out; give each as +L=T or +L:H=T");
  size_t start = 0;
  std::set<std::pair<int, int>> seen;
  while (true) {
    const size_t next = rest.find('+', start);
    const std::string item = rest.substr(start, next == std::string::npos ? std::string::npos : next - start);
    if (item.empty()) bad_spec(where, "'" + text + "' has an empty override");
    s.parse_override(item, where, &seen);
    if (next == std::string::npos) break;
    start = next + 1;
  }
  return s;
}

// The mode and its number in one of the two spellings: the grammar's ("focal:0.4", exact decimals) or a run name's
// ("focal_t0.4", %g), which TempSpec::parse reads too.
static std::string spelled_mode(const TempSpec& t, bool run_name) {
  std::string (*num)(float) = run_name ? fmt_g : spec_decimal;
  switch (t.mode) {
    case AttnMode::kStandard: return "standard";
    case AttnMode::kFocal: return (run_name ? "focal_t" : "focal:") + num(t.focal_temp);
    case AttnMode::kLearned:
      return t.tau_scale == 1.0f ? "learned" : (run_name ? "learned_x" : "learned:") + num(t.tau_scale);
    case AttnMode::kSsmax: return (run_name ? "ssmax_s" : "ssmax:") + num(t.ssmax_s);
  }
  return "standard";
}

std::string TempSpec::text() const {
  if (tau_proj && !temp_file.empty()) return "calibrated:" + temp_file;  // projections have no spelling but the file
  std::string s = spelled_mode(*this, false);
  for (const auto& [l, t] : layer_temp) s += "+" + std::to_string(l) + "=" + spec_decimal(t);
  for (const auto& [lh, t] : head_temp)
    s += "+" + std::to_string(lh.first) + ":" + std::to_string(lh.second) + "=" + spec_decimal(t);
  return s;
}

static std::string fmt_g(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return tidy_exponent(b);
}

std::string TempSpec::label() const {
  if (!temp_file.empty()) {  // the file's temperatures (its overrides are the setting), named by the file's stem:
    // two files compared read "calibrated:t_head" and "calibrated:t_layer", not "calibrated" and "calibrated_b"
    std::string stem = temp_file.substr(temp_file.find_last_of('/') + 1);
    if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".json") == 0) stem.resize(stem.size() - 5);
    return (stem.empty() ? "calibrated" : "calibrated:" + stem) + (file_overridden ? "+overrides" : "");
  }
  std::string s = spelled_mode(*this, true);
  if (!layer_temp.empty() || !head_temp.empty()) s += "+overrides";
  return s;
}

std::string TempSpec::other_setting_named(const std::string& name, const ModelConfig* native_of) const {
  // "X_b" is the name a compared run gets when its label clashes with the main run's: it names setting X too.
  std::string spelled = name;
  if (spelled.size() > 2 && spelled.compare(spelled.size() - 2, 2, "_b") == 0) spelled.resize(spelled.size() - 2);
  TempSpec named;
  try {
    named = TempSpec::parse(spelled, "name", native_of);
  } catch (const Error&) {  // not a setting's spelling (or native without the model): a name
    return "";
  }
  const std::string l = named.label();
  return l == label() ? "" : l;
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
        case AttnMode::kLearned: {
          if (tau_scale != o.tau_scale || !tau_proj != !o.tau_proj) return false;
          if (!tau_proj || tau_proj == o.tau_proj) break;
          const TauProj &a = *tau_proj, &b = *o.tau_proj;
          const auto row = [&](const TauProj& p) {
            return std::vector<float>(p.weight.begin() + (ptrdiff_t)l * p.hidden,
                                      p.weight.begin() + (ptrdiff_t)(l + 1) * p.hidden);
          };
          if (a.tau_mode != b.tau_mode || a.tau_min != b.tau_min || a.tau_max != b.tau_max || a.bias[l] != b.bias[l] ||
              row(a) != row(b))
            return false;
          break;
        }
      }
    }
    return true;
  };
  for (int l = 0; l < cfg.n_layers; ++l)
    if (!layer_same(l)) return l;
  return cfg.n_layers;
}

}  // namespace focal
