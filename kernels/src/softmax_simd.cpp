// softmax_exp_pass (softmax_simd.h): the scalar formula (shared_math.h's exp_nonpos), an AVX2 + FMA and an AVX-512
// variant of the same range reduction and polynomial, and the choice between them.
#include "softmax_simd.h"

#include <immintrin.h>

// GCC 12 reports the AVX-512 headers' own _mm512_undefined_* placeholders (in _mm512_roundscale_ps and
// _mm512_reduce_add_ps) as uninitialised once inlined; the lanes they stand for are never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "focal_kernels/shared_math.h"
#include "target_isa.h"

namespace focal::ops {

namespace ec = math::exp_coef;

ExpSums softmax_exp_pass_generic(const float* raw, float scale, float mx, float* e, int n) {
  float z = 0.0f, a = 0.0f;
#pragma omp simd reduction(+ : z, a)
  for (int j = 0; j < n; ++j) {
    const float d = raw[j] * scale - mx;
    const float v = math::exp_nonpos(d);
    e[j] = v;
    z += v;
    // v * d where v > 0 (d >= -87); a term with v == 0 contributes 0 even when d is -inf.
    a += v * (d >= ec::kMin ? d : 0.0f);
  }
  return {z, a};
}

// exp_nonpos's range reduction and polynomial on one vector, for both widths (PFX: _mm256 or _mm512): from x in
// [kMin, 0] and nf = round(x log2 e), p = e^r with r = x - nf ln 2; the caller scales p by 2^nf.
#define FOCAL_EXP_POLY(PFX, x, nf, p)                                                       \
  do {                                                                                      \
    auto r_ = PFX##_fnmadd_ps((nf), PFX##_set1_ps(ec::kLn2Hi), (x));                        \
    r_ = PFX##_fnmadd_ps((nf), PFX##_set1_ps(ec::kLn2Lo), r_);                              \
    (p) = PFX##_fmadd_ps(PFX##_set1_ps(ec::kP0), r_, PFX##_set1_ps(ec::kP1));               \
    (p) = PFX##_fmadd_ps((p), r_, PFX##_set1_ps(ec::kP2));                                  \
    (p) = PFX##_fmadd_ps((p), r_, PFX##_set1_ps(ec::kP3));                                  \
    (p) = PFX##_fmadd_ps((p), r_, PFX##_set1_ps(ec::kP4));                                  \
    (p) = PFX##_fmadd_ps((p), r_, PFX##_set1_ps(ec::kP5));                                  \
    (p) = PFX##_add_ps(PFX##_fmadd_ps(PFX##_mul_ps((p), r_), r_, r_), PFX##_set1_ps(1.0f)); \
  } while (0)

FOCAL_AVX2 ExpSums softmax_exp_pass_avx2(const float* raw, float scale, float mx, float* e, int n) {
  const __m256 vs = _mm256_set1_ps(scale), vm = _mm256_set1_ps(mx), lo = _mm256_set1_ps(ec::kMin);
  __m256 z = _mm256_setzero_ps(), a = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(raw + j), vs), vm);
    const __m256 x = _mm256_max_ps(d, lo);  // a NaN d gives lo here (max returns its second operand)
    const __m256 nf =
        _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(ec::kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 p;
    FOCAL_EXP_POLY(_mm256, x, nf, p);
    // 2^nf from the exponent bits (nf >= -126: a normal float)
    const __m256i ni = _mm256_cvtps_epi32(nf);
    const __m256 two_n = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23));
    __m256 v = _mm256_and_ps(_mm256_mul_ps(p, two_n), _mm256_cmp_ps(d, lo, _CMP_GE_OQ));  // 0 below kMin
    v = _mm256_blendv_ps(v, d, _mm256_cmp_ps(d, d, _CMP_UNORD_Q));                        // NaN stays NaN
    _mm256_storeu_ps(e + j, v);
    z = _mm256_add_ps(z, v);
    a = _mm256_fmadd_ps(v, x, a);  // x, not d: v == 0 where d < kMin, and x is finite there
  }
  alignas(32) float zs[8], as[8];
  _mm256_store_ps(zs, z);
  _mm256_store_ps(as, a);
  ExpSums s;
  for (int i = 0; i < 8; ++i) s.z += zs[i], s.a += as[i];
  const ExpSums rest = softmax_exp_pass_generic(raw + j, scale, mx, e + j, n - j);
  s.z += rest.z;
  s.a += rest.a;
  return s;
}

#define FOCAL_AVX512F __attribute__((target("avx2,fma,avx512f")))

FOCAL_AVX512F ExpSums softmax_exp_pass_avx512(const float* raw, float scale, float mx, float* e, int n) {
  const __m512 vs = _mm512_set1_ps(scale), vm = _mm512_set1_ps(mx), lo = _mm512_set1_ps(ec::kMin);
  __m512 z = _mm512_setzero_ps(), a = _mm512_setzero_ps();
  for (int j = 0; j < n; j += 16) {
    const __mmask16 live = j + 16 <= n ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1u);
    const __m512 d = _mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(live, raw + j), vs), vm);
    const __m512 x = _mm512_maskz_max_ps(live, d, lo);  // NaN d: lo; lanes past n: 0
    const __m512 nf = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(ec::kLog2e)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 p;
    FOCAL_EXP_POLY(_mm512, x, nf, p);
    const __mmask16 keep = _mm512_cmp_ps_mask(d, lo, _CMP_GE_OQ) & live;  // false for NaN and below kMin
    const __mmask16 nan = _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q) & live;
    __m512 v = _mm512_maskz_scalef_ps(keep, p, nf);  // p * 2^n
    v = _mm512_mask_mov_ps(v, nan, d);
    _mm512_mask_storeu_ps(e + j, live, v);
    z = _mm512_add_ps(z, v);
    a = _mm512_fmadd_ps(v, x, a);
  }
  return {_mm512_reduce_add_ps(z), _mm512_reduce_add_ps(a)};
}

bool cpu_has_avx2_fma() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}

bool cpu_has_avx512f() {
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  return ok;
}

ExpSums softmax_exp_pass(const float* raw, float scale, float mx, float* e, int n) {
  using Fn = ExpSums (*)(const float*, float, float, float*, int);
  static const Fn fn = cpu_has_avx512f()    ? softmax_exp_pass_avx512
                       : cpu_has_avx2_fma() ? softmax_exp_pass_avx2
                                            : softmax_exp_pass_generic;
  return fn(raw, scale, mx, e, n);
}

}  // namespace focal::ops
