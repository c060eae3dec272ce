// CPU emulation of the bfloat16 storage type and its widening (see cuda_runtime.h here). bf16 is the top half of an
// fp32, so the device's __bfloat162float is exact: the 16 bits shifted into the high half of a float.
#pragma once
// NOLINTBEGIN(bugprone-reserved-identifier): this header stands in for CUDA, whose names are reserved ones
#include <cstdint>
#include <cstring>
struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t u = (uint32_t)h.bits << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
// NOLINTEND(bugprone-reserved-identifier)
