// Parsing of the architecture and attention options shared by `focal init` and `focal train`.
#include "model_options.h"

#include <cmath>
#include <string>
#include <utility>

#include "focal/error.h"
#include "focal/temp_spec.h"

namespace focal::cli {

const std::set<std::string> kModelOptions = {"--hidden",       "--layers",  "--heads",  "--kv-heads",
                                             "--intermediate", "--context", "--attn",   "--temp",
                                             "--tau-mode",     "--tau-min", "--tau-max"};
const std::set<std::string> kModelFlags = {"--qk-norm"};

ModelConfig model_config_from(const Args& a, const ArchDefaults& d) {
  ModelConfig m;
  m.hidden = a.get_int32("--hidden", d.hidden);
  m.n_layers = a.get_int32("--layers", d.layers);
  m.n_heads = a.get_int32("--heads", d.heads);
  m.n_kv_heads = a.get_int32("--kv-heads", d.kv_heads);
  m.intermediate = a.get_int32("--intermediate", d.intermediate);
  m.max_positions = a.get_int32("--context", d.context);
  // Each size is named on its own (--layers 0 read "--hidden must be a multiple of --heads").
  const std::pair<const char*, int> sizes[] = {
      {"--hidden", m.hidden},       {"--layers", m.n_layers},           {"--heads", m.n_heads},
      {"--kv-heads", m.n_kv_heads}, {"--intermediate", m.intermediate}, {"--context", m.max_positions}};
  for (const auto& [opt, v] : sizes)
    if (v <= 0) throw UsageError{std::string(opt) + " " + std::to_string(v) + ": give a size of at least 1"};
  if (m.hidden % m.n_heads || m.n_heads % m.n_kv_heads || (m.hidden / m.n_heads) % 2)
    throw UsageError{"--hidden must be a multiple of --heads (with an even head size), --heads of --kv-heads"};
  m.d_head = m.hidden / m.n_heads;
  m.tied_embeddings = true;
  m.qk_norm = a.has("--qk-norm");
  const std::string attn = a.get("--attn", "standard");
  if (attn == "ssmax")  // before the mode parser, whose error lists ssmax among the modes
    throw UsageError{"--attn: ssmax is an inference-time comparison, not a model's (use standard, focal or learned)"};
  m.focal.mode = parse_attn_mode(attn, "--attn");
  // An option of another mode is refused, as capture's are (--attn standard --temp 0.3 wrote a standard model).
  for (const char* opt : {"--temp"})
    if (a.has(opt) && m.focal.mode != AttnMode::kFocal)
      throw UsageError{std::string(opt) + " is for --attn focal, not " + attn};
  for (const char* opt : {"--tau-mode", "--tau-min", "--tau-max"})
    if (a.has(opt) && m.focal.mode != AttnMode::kLearned)
      throw UsageError{std::string(opt) + " is for --attn learned, not " + attn};
  if (m.focal.mode == AttnMode::kFocal) {
    m.focal.focal_temp = (float)a.get_double("--temp", 0.4);
    const double t = a.get_double("--temp", 0.4);
    if (!(t >= kMinTemp && t <= kMaxTemp))  // past the range a run refused it inside the training step (an abort)
      throw Error("--temp " + a.get("--temp") + ": " + kTempRangeText + " (the paper's t is about 0.4)");
  }
  if (m.focal.mode == AttnMode::kLearned) {
    const float s = std::sqrt(m.d_head / 128.0f);  // the paper's 5 and 10 at d_head = 128
    m.focal.tau_min = (float)a.get_double("--tau-min", 5.0 * s);
    m.focal.tau_max = (float)a.get_double("--tau-max", 10.0 * s);
    if (!(m.focal.tau_min > 0) || !(m.focal.tau_max > m.focal.tau_min))
      throw Error("--tau-min / --tau-max: need 0 < tau_min < tau_max");
    m.focal.tau_mode = parse_tau_mode(a.get("--tau-mode", "prefix_mean"), "--tau-mode");
    m.focal.tau_bias = true;
    m.focal.has_tau = true;
  }
  return m;
}

}  // namespace focal::cli
