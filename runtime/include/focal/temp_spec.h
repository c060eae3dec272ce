// Temperature specification: how a run scales attention logits per (layer, head, query position). It is separate
// from the model so one model can be run, captured and compared under any setting.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "focal/config.h"

namespace focal {

// The temperatures a run takes (t, per-layer and per-head t, tau_scale, ssmax_s): finite, within [1e-6, 1e6]. Past
// them 1 / t or the scaled logits leave fp32 (t = 1e-45 gave a row scale of inf and NaN probabilities); t = 1e-6 is
// already argmax attention for any logit gap over 1e-4.
constexpr double kMinTemp = 1e-6, kMaxTemp = 1e6;
// Compared as the fp32 a run stores: 1e-6 itself (as a float, 9.99999997e-07) is in the range (it was refused once
// stored). False for NaN.
inline bool temp_in_range(double t) { return t >= (double)(float)kMinTemp && t <= kMaxTemp; }
// printf's exponent without its sign '+' and leading zeros: "1e+06" -> "1e6", "1e-06" -> "1e-6", as spec text,
// run names and the app's t field spell a temperature (a '+' inside a number would read as the spec's override
// separator: "focal:1e+06" did not parse back).
std::string tidy_exponent(const std::string& printed);
// The shortest decimal that reads back as the same float ("0.3" for 0.3f, where double(0.3f) prints
// 0.30000001192092896): how specs spell their temperatures, and what Python's TempSpec returns.
std::string shortest_decimal(float v);
// What every message about a temperature out of range says.
constexpr const char* kTempRangeText = "must be a number in [1e-6, 1e6]";

// Learned-temperature projections that do not come from the model's weights: those of a temperature file made by
// `focal calibrate --granularity tau-proj` for a model trained without tau_proj (focal/calibrate.h). The forward
// uses them as it would the model's own: tau_i = clip(mean(X_j . weight[l]) + bias[l], tau_min, tau_max) over the
// tokens tau_mode names, X the layer's input_layernorm output, logits = q.k / tau_i.
struct TauProj {
  TauMode tau_mode = TauMode::kPrefixMean;
  float tau_min = 0.0f, tau_max = 0.0f;  // clip bounds of tau (tau = t sqrt(d_head))
  int n_layers = 0, hidden = 0;
  std::vector<float> weight;  // [n_layers, hidden] w_tau of each layer
  std::vector<float> bias;    // [n_layers] b of each layer
};

struct TempSpec {
  AttnMode mode = AttnMode::kStandard;
  float focal_temp = 1.0f;                         // kFocal: global t (logits / (t sqrt(d_head)))
  std::map<int, float> layer_temp;                 // layer -> t, any mode: replaces that layer's scale by 1/t
  std::map<std::pair<int, int>, float> head_temp;  // (layer, head) -> t, overrides layer_temp
  float tau_scale = 1.0f;                          // kLearned: tau_used = tau * tau_scale
  float ssmax_s = 1.0f;                            // kSsmax: logits * ssmax_s * ln(n_visible)
  // Set when the setting came from a temperature file (`calibrated:PATH`, focal/calibrate.h): the file and the
  // weights checksum of the model it was calibrated for; a forward on other weights is refused. 0: no file.
  std::string temp_file;
  uint64_t base_checksum = 0;
  // A temperature file's setting changed by overrides given after it (`calibrated:h.json+0=0.5`, the app's sliders):
  // its label says "+overrides" (two captures, with and without, were both "calibrated:h").
  bool file_overridden = false;
  // kLearned: projections used instead of the model's tau_proj weights (a `tau-proj` temperature file); null: the
  // model's. Shared by copies of the spec; never modified once set.
  std::shared_ptr<const TauProj> tau_proj;

  // The setting the model was trained with (its config.json "focal" object); standard if none.
  static TempSpec native(const ModelConfig& cfg);
  static TempSpec standard() { return TempSpec{}; }
  static TempSpec focal(float t) {
    TempSpec s;
    s.mode = AttnMode::kFocal;
    s.focal_temp = t;
    return s;
  }

  // Throws Error naming the option when a temperature is <= 0 or not finite, a layer or head is out of range, or
  // kLearned is asked of a model without tau_proj weights and without tau_proj here (or with one of another shape).
  void validate(const ModelConfig& cfg) const;

  // The one temperature-spec grammar, used by the CLI (--temp, --compare, batch --runs), the app's `spec` script
  // command and Python (temp="..."):
  //   SPEC     := BASE ('+' OVERRIDE)*
  //   BASE     := standard | native | focal:T | T | learned | learned:X | ssmax | ssmax:S | calibrated:PATH
  //               (run names are accepted too: focal_tT, learned_xX, ssmax_sS)
  //   OVERRIDE := L=T (layer L at t = T) | L:H=T (head H of layer L at t = T)
  // e.g. "focal:0.4", "0.4", "learned:0.8", "standard+2=0.3+2:1=0.5". `native` is the model's own setting and needs
  // `native_of` (else Error). Every index must be an integer >= 0. A malformed spec throws Error with field() "spec"
  // whose message starts with `where` and lists the grammar; a well-formed number that is not a temperature (<= 0,
  // nan, inf) throws Error with no field. Ranges and learned-tau availability are checked by validate(), not here.
  // calibrated:PATH reads a temperature file (PATH without '+'; read_temp_file's errors, field "temp_file") and, with
  // native_of, refuses one whose shape differs from that model's; text() spells its temperatures out.
  static TempSpec parse(const std::string& text, const std::string& where, const ModelConfig* native_of = nullptr);
  // Adds one OVERRIDE ("L=T" or "L:H=T") with the same rules; returns true if it was a per-head override. seen: the
  // (layer, head or -1) of the list's earlier overrides; one given twice is refused (the last one won, unsaid).
  // On a temperature file's setting, L=T sets the whole layer: the file's per-head t of layer L (which would win
  // over a layer's t) are dropped, the heads given in `seen` kept.
  bool parse_override(const std::string& item, const std::string& where, std::set<std::pair<int, int>>* seen = nullptr);
  // The canonical spelling in the grammar above, e.g. "focal:0.4+2=0.3+2:1=0.5": parse(text()) == *this.
  std::string text() const;

  std::string to_json() const;
  // to_json() for people to read: a tau_proj's weights are summarised ("[n_layers x hidden values]").
  std::string to_json_brief() const;
  // to_json_brief() of a stored spec JSON; the text as it is when it does not parse.
  static std::string brief_json(const std::string& json);
  static TempSpec from_json(const std::string& json, const std::string& where);
  // Short run name, e.g. "standard", "focal_t0.4", "learned", "learned_x0.8", "ssmax_s1"; "+overrides" if any;
  // "calibrated:STEM" for a temperature file's setting (STEM: the file name without its directory and ".json").
  std::string label() const;
  // A run's own name (--name, name=) that spells another setting than this one ("focal_t0.4" for a run at t = 0.3):
  // the label it spells, which every figure and table would then show; "" for a name that spells no setting
  // ("mine") or this one. "X_b" (a compared run's name when its label clashes) names X; "native" names native_of's
  // own setting (not checked without it).
  std::string other_setting_named(const std::string& name, const ModelConfig* native_of = nullptr) const;

  // The logit multiplier this spec applies to raw scores (q.k/sqrt(d_head)) of (layer, head) for a query row with
  // n_visible keys. tau_clipped is the learned tau of that row after the clip and before tau_scale (used in kLearned
  // only; a stored capture holds tau_used = tau_clipped * tau_scale of its run). Same formulas as the forward pass.
  float row_multiplier(const ModelConfig& cfg, int layer, int head, int n_visible, float tau_clipped) const;
  // First layer whose multipliers may differ between this spec and `other` (n_layers if none): layers before it
  // give identical results under both, so an interactive re-run can start there.
  int first_changed_layer(const TempSpec& other, const ModelConfig& cfg) const;
};

}  // namespace focal
