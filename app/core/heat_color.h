// The heatmap's colour choice, one list of names for the view, the settings file and the script's `log` command.
#pragma once

#include <string>

namespace focalscope {

// auto is the figures' rule (log10 p when more than half the rows shown peak below a tenth of the largest p: a
// diffuse head, which linear colour shows as one dark triangle), or linear / log as chosen.
enum class HeatColor { kAuto, kLinear, kLog };
inline constexpr HeatColor kHeatColors[] = {HeatColor::kAuto, HeatColor::kLinear, HeatColor::kLog};

inline const char* heat_color_name(HeatColor c) {  // "auto", "linear", "log"
  return c == HeatColor::kLog ? "log" : c == HeatColor::kLinear ? "linear" : "auto";
}

inline bool parse_heat_color(const std::string& s, HeatColor& c) {  // false: not one of the names
  for (HeatColor k : kHeatColors)
    if (s == heat_color_name(k)) {
      c = k;
      return true;
    }
  return false;
}

}  // namespace focalscope
