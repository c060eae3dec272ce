// Small helpers for the JSON the runtime writes (config.json, temperature specs), runtime-internal.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace focal {

// An fp32 value as the short decimal a person wrote (0.4, not 0.4000000059604645).
inline double short_decimal(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.7g", v);
  return std::strtod(b, nullptr);
}

}  // namespace focal
