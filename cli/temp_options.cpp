// The temperature options (temp_options.h).
#include "temp_options.h"

#include <cstdio>
#include <set>
#include <sstream>

#include "focal/error.h"

namespace focal::cli {

const char* const kTempHelp = R"(temperature options (default: the model's native setting from config.json "focal"):
  --temp SPEC           the setting, in the spec grammar below; a number t is focal attention at t:
                        logits / (t sqrt(d_head))
  --mode M              standard | focal | learned | ssmax (replaces the mode of --temp or the native setting)
  --layer-temp L=T,..   per-layer t override, e.g. 0=0.5,3=0.3
  --head-temp L:H=T,..  per-head t override, e.g. 2:1=0.4
  --tau-scale X         multiplier on the learned tau (--mode learned)
  --ssmax-s S           ssmax: logits * S * ln(n_visible)
spec grammar (--temp, --compare, batch --runs; the app's `spec` command and Python's temp= take the same):
  standard | native | focal:T | T | learned[:X] | ssmax[:S] | calibrated:FILE, then any number of +L=T
  (layer L at t = T) or +L:H=T (head H of layer L); run names work too (focal_t0.4, learned_x0.8, ssmax_s1).
  calibrated:FILE is a temperature file of focal calibrate; one made for another model is refused.
  e.g. focal:0.4   0.4   learned:0.8   standard+2=0.3+2:1=0.5   calibrated:temps.json
)";

const std::set<std::string> kTempOpts = {"--mode", "--temp", "--layer-temp", "--head-temp", "--tau-scale", "--ssmax-s"};

namespace {

// TempSpec::parse with the CLI's exit codes: a malformed spec is a usage error (2), a well-formed value that is not
// a temperature an error (1).
TempSpec parse_spec(const std::string& v, const std::string& opt, const ModelConfig& cfg) {
  try {
    return TempSpec::parse(v, opt, &cfg);
  } catch (const Error& e) {
    if (e.field() == "spec") throw UsageError{e.what()};
    throw;
  }
}

}  // namespace

TempSpec temp_spec_from(const Args& a, const ModelConfig& cfg) {
  TempSpec s = a.has("--temp") ? parse_spec(a.get("--temp"), "--temp", cfg) : TempSpec::native(cfg);
  if (a.has("--mode")) {
    s.mode = parse_attn_mode(a.get("--mode"), "--mode");
    if (s.mode == AttnMode::kFocal && !a.has("--temp") && cfg.focal.mode != AttnMode::kFocal)
      throw UsageError{"--mode focal needs --temp T (e.g. --temp 0.4)"};
  }
  if (s.mode != AttnMode::kFocal) s.focal_temp = 1.0f;  // as `--temp standard` / `ssmax` record it (t unused)
  // Options of another mode than the one that runs would be recorded in the run's spec without any effect.
  if (a.has("--tau-scale") && s.mode != AttnMode::kLearned)
    throw UsageError{std::string("--tau-scale applies to learned attention only; this run's mode is ") +
                     attn_mode_name(s.mode) + " (add --mode learned, or leave --tau-scale out)"};
  if (a.has("--ssmax-s") && s.mode != AttnMode::kSsmax)
    throw UsageError{std::string("--ssmax-s applies to ssmax attention only; this run's mode is ") +
                     attn_mode_name(s.mode) + " (add --mode ssmax, or leave --ssmax-s out)"};
  if (a.has("--tau-scale")) s.tau_scale = (float)a.get_double("--tau-scale", 1.0);
  if (a.has("--ssmax-s")) s.ssmax_s = (float)a.get_double("--ssmax-s", 1.0);
  std::set<std::pair<int, int>> seen;  // a layer or head given twice is refused
  for (const char* opt : {"--layer-temp", "--head-temp"}) {
    if (!a.has(opt)) continue;
    const bool per_head = std::string(opt) == "--head-temp";
    std::stringstream ss(a.get(opt));
    std::string item;
    while (std::getline(ss, item, ',')) {
      bool was_head = false;
      try {
        was_head = s.parse_override(item, opt, &seen);
      } catch (const Error& e) {
        if (e.field() == "spec" && std::string(e.what()).find("given twice") != std::string::npos)
          throw UsageError{std::string(opt) + ": '" + item + "' gives a layer or head a second t"};
        if (e.field() == "spec")
          throw UsageError{std::string(opt) + ": '" + item + "' must look like " + (per_head ? "L:H=T" : "L=T")};
        throw;
      }
      if (was_head != per_head)
        throw UsageError{std::string(opt) + ": '" + item + "' must look like " + (per_head ? "L:H=T" : "L=T")};
    }
  }
  s.validate(cfg);
  return s;
}

TempSpec compare_spec(const std::string& v, const std::string& opt, const ModelConfig& cfg) {
  TempSpec s = parse_spec(v, opt, cfg);
  try {
    s.validate(cfg);
  } catch (const Error& e) {  // named by this option, not by the TempSpec field's own option (--layer-temp, ...)
    throw Error(opt + ": " + v + ": " + e.what());
  }
  return s;
}

void print_temp_table(const TempFile& f) {
  if (f.granularity == CalibGranularity::kTauProj) {
    std::printf("mean t = tau / sqrt(d_head) over the held-out tokens, by layer:\nlayer      t\n");
    for (int l = 0; l < f.n_layers; ++l) std::printf("%5d %6.3f\n", l, f.focal_temp[(size_t)l * f.n_heads]);
    return;
  }
  if (f.granularity == CalibGranularity::kModel) {
    std::printf("t = %.4f for every head\n", f.focal_temp[0]);
    return;
  }
  const int cols = f.granularity == CalibGranularity::kLayer ? 1 : f.n_heads;
  std::printf("t by layer x head%s:\n%s", cols == 1 ? " (one t per layer)" : "", cols == 1 ? "layer" : "layer\\head");
  for (int h = 0; h < cols; ++h) std::printf(cols == 1 ? "      t" : " %6d", h);
  std::printf("\n");
  for (int l = 0; l < f.n_layers; ++l) {
    std::printf(cols == 1 ? "%5d" : "%10d", l);  // under "layer" or "layer\\head"
    for (int h = 0; h < cols; ++h) std::printf(" %6.3f", f.focal_temp[(size_t)l * f.n_heads + h]);
    std::printf("\n");
  }
}

}  // namespace focal::cli
