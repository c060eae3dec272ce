// The field -> control table behind with_control (error_controls.h).
#include "error_controls.h"

#include <map>

namespace focalscope {

std::string control_for_field(const std::string& field) {
  // Fields of TempSpec, CaptureRequest / RunOptions, run_sweep, Device and FigureOptions, and the controls
  // (app/ui) that set them.
  static const std::map<std::string, std::string> kControls = {
      {"mode", "mode menu"},          {"focal_temp", "t slider"},        {"layer_temp", "layer override"},
      {"head_temp", "head override"}, {"tau_scale", "tau x slider"},     {"ssmax_s", "s slider"},
      {"prompt", "prompt box"},       {"relevant", "relevant keys"},     {"device", "device menu"},
      {"temps", "sweep range"},       {"layers", "layer selection"},     {"heads", "head selection"},
      {"queries", "query selection"}, {"budget_bytes", "memory budget"}, {"output", "figure path"},
      {"layer", "layer selection"},   {"head", "head selection"},        {"query", "query selection"},
  };
  const auto it = kControls.find(field);
  return it == kControls.end() ? std::string() : it->second;
}

std::string with_control(const focal::Error& e) {
  const std::string control = control_for_field(e.field());
  return control.empty() ? std::string(e.what()) : control + ": " + e.what();
}

}  // namespace focalscope
