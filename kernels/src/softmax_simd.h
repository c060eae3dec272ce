// The exponential pass of one softmax row, hand-vectorised (kernels-internal): e[j] = exp_nonpos(raw[j] * scale - mx)
// with the two sums the row's normalisation and entropy need. The attention spends most of its non-GEMM time here;
// the compiler's vectorisation of the scalar formula (contraction off, the clamps as selects) took ~40 vector
// instructions per 16 keys, these take ~22 (FMA, vscalefps / a shift for 2^n, masks for the clamps).
#pragma once

namespace focal::ops {

struct ExpSums {
  float z = 0.0f;  // sum_j e[j]
  float a = 0.0f;  // sum_j e[j] * max(d[j], exp_coef::kMin), d[j] = raw[j] * scale - mx (entropy's sum)
};

// e[n] = exp_nonpos(raw[n] * scale - mx) (e may be raw) and its sums. scale >= 0 and mx = scale * max(raw), so that
// every d <= 0; d below exp_coef::kMin gives exactly 0 and a NaN d gives NaN (which then reaches z), as exp_nonpos.
// Picks the widest variant the CPU has.
ExpSums softmax_exp_pass(const float* raw, float scale, float mx, float* e, int n);

// The variants, for tests (each one's caller checks the CPU: cpu_has_avx2_fma / cpu_has_avx512f).
ExpSums softmax_exp_pass_generic(const float* raw, float scale, float mx, float* e, int n);
ExpSums softmax_exp_pass_avx2(const float* raw, float scale, float mx, float* e, int n);
ExpSums softmax_exp_pass_avx512(const float* raw, float scale, float mx, float* e, int n);
// What the CPU has, checked here rather than with quant_types.h's cpu_has_avx2 (which also wants F16C), so that this
// file links without the quant kernels (the capture fuzz target).
bool cpu_has_avx2_fma();  // AVX2 with FMA
bool cpu_has_avx512f();   // AVX-512 F with FMA

}  // namespace focal::ops
