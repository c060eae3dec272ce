// SIMD helpers shared by the hand-written AVX2 and AVX-512 quant kernels (kernels-internal).
#pragma once

#include <immintrin.h>

#include "target_isa.h"

namespace focal::ops {

// The sum of v's eight lanes: halves, then pairs, then the last two.
FOCAL_AVX2 inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace focal::ops
