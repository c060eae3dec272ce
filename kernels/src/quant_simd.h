// SIMD helpers shared by the hand-written AVX2 and AVX-512 quant kernels (kernels-internal).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "focal_kernels/quant.h"
#include "target_isa.h"

namespace focal::ops {

// The fp16 at p, widened by F16C (= half_bits_to_float).
FOCAL_AVX2 inline float f16c_at(const uint8_t* p) {
  uint16_t v;
  __builtin_memcpy(&v, p, 2);
  return _cvtsh_ss(v);
}

// Every decode kernel's prefetch of the weights it streams goes through here: its cache level is one fact. Into L1
// (T0): T1 (into L2) reads a plain stream 14 % faster on the Xeon (29.2 against 25.5 GB/s, 2 threads), but 8B decode
// did not gain (Q8_0 3.50-3.64 against 3.44-3.64 tok/s) and Q4_K_M lost 2-6 % (2026-12-05, three alternating rounds).
inline __attribute__((always_inline)) void prefetch_stream(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
}

// Decode reads each weight once, row after row: the row kernels ask for the bytes kPrefetchAhead past the row they
// start (the rows that follow, when the matrix is stored row-major), one prefetch per cache line of the row. Without
// it the AVX2 kernels waited on their loads (Intel Xeon, SmolLM2 decode at FOCAL_QUANT_ISA=avx2: 43 % of the kernel's
// samples on the two quant loads). A prefetch of an address past the matrix does not fault; it is only wasted. The
// decode row kernels (fused_rows_b32, kquant_digit_rows_avx2) now prefetch the same distance block by block instead,
// which streams faster than this burst at each row's start, as does fused_rows_16 (F16 / BF16) line by line; the
// other fp32 row kernels (Q4_K, Q6_K) keep it.
constexpr size_t kPrefetchAhead = 4096;
inline void prefetch_row_ahead(const uint8_t* row, size_t row_bytes) {
  const char* p = reinterpret_cast<const char*>(row) + kPrefetchAhead;
  for (size_t l = 0; l < row_bytes; l += 64) prefetch_stream(p + l);
}

// The panel kernels' prefetch: slice i of n of a panel block's kPbb bytes at `at`, one slice per step of the block's
// n steps — a steady stream. The whole block's lines in one burst at its start (36–53 lines for the K formats)
// stalled the kernel on its fill buffers: 8B Q4_K_M decode at the AVX2 level +17–23 %, Q6_K +21–24 % (2026-12-05).
template <size_t kPbb, int n>
inline __attribute__((always_inline)) void prefetch_slice(const uint8_t* at, int i) {
  for (size_t l = kPbb * i / n / 64 * 64; l < kPbb * (i + 1) / n; l += 64) prefetch_stream(at + l);
}

// Q4_K / Q5_K's eight 6-bit scales and mins (qblocks::scale_min_k4 of the 12 bytes at q) as the bytes of two words,
// sub-block j in byte j: scales 0-3 = w0 & 63, mins 0-3 = w1 & 63, scales 4-7 = the low nibbles of w2 with w0's top
// two bits above them, mins 4-7 = the high nibbles of w2 with w1's top bits.
inline void k4_scales_mins(const uint8_t* q, uint64_t* sc8, uint64_t* mn8) {
  uint32_t w0, w1, w2;
  __builtin_memcpy(&w0, q, 4);
  __builtin_memcpy(&w1, q + 4, 4);
  __builtin_memcpy(&w2, q + 8, 4);
  *sc8 = (uint64_t)(w0 & 0x3F3F3F3Fu) | ((uint64_t)((w2 & 0x0F0F0F0Fu) | (((w0 >> 6) & 0x03030303u) << 4)) << 32);
  *mn8 =
      (uint64_t)(w1 & 0x3F3F3F3Fu) | ((uint64_t)(((w2 >> 4) & 0x0F0F0F0Fu) | (((w1 >> 6) & 0x03030303u) << 4)) << 32);
}

// Q3_K's sixteen 6-bit scales (the 12 bytes at q: low nibbles of bytes 0-7, then their high nibbles, the top two bits
// of scale i at bits 2 (i / 4) of byte 8 + i % 4) as int8 lanes minus 32 (-32..31), scale i in lane i.
inline __m128i k3_scales(const uint8_t* q) {
  uint32_t w0, w1, w2;
  __builtin_memcpy(&w0, q, 4);
  __builtin_memcpy(&w1, q + 4, 4);
  __builtin_memcpy(&w2, q + 8, 4);
  const uint32_t m4 = 0x0F0F0F0Fu, m2 = 0x03030303u;
  const __m128i s = _mm_setr_epi32((int)((w0 & m4) | ((w2 & m2) << 4)), (int)((w1 & m4) | (((w2 >> 2) & m2) << 4)),
                                   (int)(((w0 >> 4) & m4) | (((w2 >> 4) & m2) << 4)),
                                   (int)(((w1 >> 4) & m4) | (((w2 >> 6) & m2) << 4)));
  return _mm_sub_epi8(s, _mm_set1_epi8(32));
}

// A pair of 32-value blocks A, B (Q4_0, Q4_1, Q8_0) in the decode kernels with x in digits: their fp16 scales widened,
// [d_A, d_B, 0, 0] or Q4_1's [d_A, m_A, d_B, m_B] (B's zero when A is a lone last block), and off plus the pair's
// offsets through the blocks' sums of x sa, sb: Q4_1's m S in lanes 1 and 3, the others' -8 d S (Q8_0: -128 d S)
// in lanes 0 and 1.
template <int T>
FOCAL_AVX2 inline __m128 pair_scales(const uint8_t* a, const uint8_t* b, bool has_b) {
  if constexpr (T == kQ4_1) {
    uint32_t ua, ub;
    __builtin_memcpy(&ua, a, 4);
    __builtin_memcpy(&ub, b, 4);
    return _mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128((int)ua), has_b ? (int)ub : 0, 1));
  } else {
    uint16_t ua, ub;
    __builtin_memcpy(&ua, a, 2);
    __builtin_memcpy(&ub, b, 2);
    return _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(ua), has_b ? ub : 0, 1));
  }
}
template <int T>
FOCAL_AVX2 inline __m128 pair_offsets(__m128 dm, float sa, float sb, __m128 off) {
  constexpr float kOffset = T == kQ8_0 ? -128.0f : -8.0f;  // Q4_0, Q8_0: value = (stored unsigned + offset) d
  return _mm_fmadd_ps(dm, T == kQ4_1 ? _mm_setr_ps(0.0f, sa, 0.0f, sb) : _mm_setr_ps(kOffset * sa, kOffset * sb, 0, 0),
                      off);
}
// The sum of v's four lanes: pairs, then the last two.
FOCAL_AVX2 inline float hsum4(__m128 v) {
  const __m128 s = _mm_add_ps(v, _mm_movehl_ps(v, v));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// The sum of v's eight lanes: halves, then the four as hsum4 sums them (the same order as before).
FOCAL_AVX2 inline float hsum8(__m256 v) {
  return hsum4(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)));
}

// An empty asm that takes v in a register and gives it back: the compiler cannot reorder the additions into v across
// it. The AVX2 digit kernels (quant_avx2_panels.cpp, quant_avx2.cpp) pass their integer sums through it after each
// step. Without it GCC 12 reassociated a block's products into a tree, computed all of them first and spilled them to
// the stack: panels_k4_avx2 ran at ~60 % of its rate, panels_avx2 (Q4_1) at 70 % and panels_q8_avx2 at 84 % (one
// thread, an L2-resident matrix, Zen 5).
FOCAL_AVX2 inline void in_register(__m256i& v) { asm("" : "+x"(v)); }

}  // namespace focal::ops
