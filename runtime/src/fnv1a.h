// FNV-1a 64, the hash of every checksum focalscope records: weight files (Model::weights_checksum), the token data of
// a training or calibration run. One fold, so that each checksum is the same function of the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace focal {

constexpr uint64_t kFnv1aOffset = 1469598103934665603ULL;  // 0xcbf29ce484222325

// `h` with the `n` bytes at `bytes` folded in, in order.
inline uint64_t fnv1a_fold(uint64_t h, const void* bytes, size_t n) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

}  // namespace focal
