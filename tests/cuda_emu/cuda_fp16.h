// CPU emulation of the IEEE binary16 storage type and its widening (see cuda_runtime.h here). Every binary16 value
// is exactly representable in fp32, so the device's __half2float is exact; this rebuilds the same fp32 bits:
// normals rebias the exponent (15 -> 127), subnormals are normalised, infinities and NaNs keep their payload.
#pragma once
// NOLINTBEGIN(bugprone-reserved-identifier): this header stands in for CUDA, whose names are reserved ones
#include <cstdint>
#include <cstring>
struct __half {
  uint16_t bits;
};
inline float __half2float(__half h) {
  const uint32_t sign = (uint32_t)(h.bits >> 15) << 31;
  uint32_t exp5 = (h.bits >> 10) & 0x1fu, mant10 = h.bits & 0x3ffu, u;
  if (exp5 == 0x1fu) {
    u = sign | 0x7f800000u | (mant10 << 13);  // inf / NaN
  } else if (exp5 != 0) {
    u = sign | ((exp5 + 112u) << 23) | (mant10 << 13);  // 127 - 15 = 112
  } else if (mant10 == 0) {
    u = sign;  // +-0
  } else {
    int e = -14;  // subnormal: mant10 * 2^-24; shift the leading one up to bit 10
    while (!(mant10 & 0x400u)) {
      mant10 <<= 1;
      --e;
    }
    u = sign | ((uint32_t)(e + 127) << 23) | ((mant10 & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
// NOLINTEND(bugprone-reserved-identifier)
