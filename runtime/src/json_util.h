// Small helpers for the JSON the runtime writes (config.json, temperature specs), runtime-internal.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace focal {

// An fp32 value as the short decimal a person wrote (0.4, not 0.4000000059604645): the fewest digits that read back
// as the same float (7 digits alone did not always: a calibrated t stored in a capture read back as its neighbour,
// and the app took the capture's own setting for another one).
inline double short_decimal(float v) {
  char b[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(b, sizeof b, "%.*g", digits, v);
    if (std::strtof(b, nullptr) == v) break;
  }
  return std::strtod(b, nullptr);
}

}  // namespace focal
