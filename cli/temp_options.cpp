// The temperature options (temp_options.h).
#include "temp_options.h"

#include <sstream>

#include "focal/error.h"

namespace focal::cli {

const char* const kTempHelp = R"(temperature options (default: the model's native setting from config.json "focal"):
  --mode M              standard | focal | learned | ssmax
  --temp T              focal temperature t: logits / (t sqrt(d_head)); implies --mode focal
  --layer-temp L=T,..   per-layer t override, e.g. 0=0.5,3=0.3
  --head-temp L:H=T,..  per-head t override, e.g. 2:1=0.4
  --tau-scale X         multiplier on the learned tau (--mode learned)
  --ssmax-s S           ssmax: logits * S * ln(n_visible)
)";

const std::set<std::string> kTempOpts = {"--mode", "--temp", "--layer-temp", "--head-temp", "--tau-scale", "--ssmax-s"};

TempSpec temp_spec_from(const Args& a, const ModelConfig& cfg) {
  TempSpec s = TempSpec::native(cfg);
  if (a.has("--temp")) {
    s.mode = AttnMode::kFocal;
    s.focal_temp = (float)a.get_double("--temp", 1.0);
  }
  if (a.has("--mode")) {
    s.mode = parse_attn_mode(a.get("--mode"), "--mode");
    if (s.mode == AttnMode::kFocal && !a.has("--temp") && cfg.focal.mode != AttnMode::kFocal)
      throw UsageError{"--mode focal needs --temp T (e.g. --temp 0.4)"};
  }
  s.tau_scale = (float)a.get_double("--tau-scale", 1.0);
  s.ssmax_s = (float)a.get_double("--ssmax-s", 1.0);
  auto parse_pairs = [&](const std::string& opt, bool per_head) {
    std::stringstream ss(a.get(opt));
    std::string item;
    while (std::getline(ss, item, ',')) {
      const size_t eq = item.find('=');
      if (eq == std::string::npos)
        throw UsageError{opt + ": '" + item + "' must look like " + (per_head ? "L:H=T" : "L=T")};
      const float t = (float)parse_double(item.substr(eq + 1), opt);
      const std::string key = item.substr(0, eq);
      if (per_head) {
        const size_t c = key.find(':');
        if (c == std::string::npos) throw UsageError{opt + ": '" + item + "' must look like L:H=T"};
        s.head_temp[{(int)parse_double(key.substr(0, c), opt), (int)parse_double(key.substr(c + 1), opt)}] = t;
      } else {
        s.layer_temp[(int)parse_double(key, opt)] = t;
      }
    }
  };
  if (a.has("--layer-temp")) parse_pairs("--layer-temp", false);
  if (a.has("--head-temp")) parse_pairs("--head-temp", true);
  s.validate(cfg);
  return s;
}

// "standard", "native", "focal:0.4", "learned", "ssmax:1"
TempSpec compare_spec(const std::string& v, const ModelConfig& cfg) {
  if (v == "standard") return TempSpec::standard();
  if (v == "native") return TempSpec::native(cfg);
  if (v.rfind("focal:", 0) == 0) return TempSpec::focal((float)parse_double(v.substr(6), "--compare"));
  if (v == "learned") {
    TempSpec s;
    s.mode = AttnMode::kLearned;
    s.validate(cfg);
    return s;
  }
  throw UsageError{"--compare: '" + v + "' is not a setting (use standard, native, focal:T or learned)"};
}

}  // namespace focal::cli
