// SIMD helpers shared by the hand-written AVX2 and AVX-512 quant kernels (kernels-internal).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "target_isa.h"

namespace focal::ops {

// Decode reads each weight once, row after row: the row kernels ask for the bytes kPrefetchAhead past the row they
// start (the rows that follow, when the matrix is stored row-major), one prefetch per cache line of the row. Without
// it the AVX2 kernels waited on their loads (Intel Xeon, SmolLM2 decode at FOCAL_QUANT_ISA=avx2: 43 % of the kernel's
// samples on the two quant loads). A prefetch of an address past the matrix does not fault; it is only wasted.
constexpr size_t kPrefetchAhead = 4096;
inline void prefetch_row_ahead(const uint8_t* row, size_t row_bytes) {
  const char* p = reinterpret_cast<const char*>(row) + kPrefetchAhead;
  for (size_t l = 0; l < row_bytes; l += 64) _mm_prefetch(p + l, _MM_HINT_T0);
}

// The sum of v's eight lanes: halves, then pairs, then the last two.
FOCAL_AVX2 inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace focal::ops
