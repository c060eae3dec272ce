// The hand-written AVX-512 VNNI quant kernels (quant_types.h), all with x in three int8 digits (quant_digits.h): the
// vectorised split, the decode kernels of Q4_0, Q4_1, Q8_0 and Q2_K .. Q6_K, and the panel kernels of the same types
// (quant.h: pack_panels). They run only where quant_cpu.cpp found AVX-512 (F, BW, VL, DQ) with VNNI.
#include <immintrin.h>

// GCC 12 reports the AVX-512 headers' own _mm512_undefined_* placeholders (used by the unmasked forms of masked
// builtins) as uninitialised once they are inlined here; the lanes they stand for are never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <algorithm>
#include <cstring>

#include "focal_kernels/quant_blocks.h"
#include "quant_simd.h"
#include "quant_types.h"
#include "target_isa.h"

namespace focal::ops {

namespace {

inline uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Four int8 digits of x in every 32-bit lane.
FOCAL_AVX512 inline __m512i bcast(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// lo in the low 256 bits, hi in the high.
FOCAL_AVX512 inline __m512i halves(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
}

}  // namespace

// digits::split: each group's digits and the block sums (quant_digits.h), 16 values per step: the same digits as
// split_groups_avx2 (the same product x * (1 / s), rounded to nearest even).
FOCAL_AVX512 void split_groups_avx512(const float* x, int64_t cols, int group, digits::Order order,
                                      digits::XDigits* xd) {
  const int64_t groups = (cols + group - 1) / group;
  const __m512i lim = _mm512_set1_epi32(127 * 65536);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t c0 = g * group, n = std::min<int64_t>(group, cols - c0);  // n: a multiple of 32
    __m512 mx = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(x + c0 + j)));
    const float m = _mm512_reduce_max_ps(mx);
    const float s = m > 0.0f ? m / (127.0f * 65536.0f) : 1.0f;
    xd->scale[(size_t)g] = s;
    const __m512 inv = _mm512_set1_ps(1.0f / s);
    for (int64_t j = 0; j < n; j += 16) {
      __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + c0 + j), inv));
      v = _mm512_max_epi32(_mm512_min_epi32(v, lim), _mm512_sub_epi32(_mm512_setzero_si512(), lim));
      const __m512i d0 = _mm512_srai_epi32(_mm512_slli_epi32(v, 24), 24);
      const __m512i v1 = _mm512_srai_epi32(_mm512_sub_epi32(v, d0), 8);
      const __m512i d1 = _mm512_srai_epi32(_mm512_slli_epi32(v1, 24), 24);
      const __m512i d2 = _mm512_srai_epi32(_mm512_sub_epi32(v1, d1), 8);
      const int64_t at = c0 + digits::placed(order, j);  // 16 values stay together in either order
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xd->d[0].data() + at), _mm512_cvtepi32_epi8(d0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xd->d[1].data() + at), _mm512_cvtepi32_epi8(d1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xd->d[2].data() + at), _mm512_cvtepi32_epi8(d2));
    }
  }
  for (int64_t b = 0; b < cols / 32; ++b) {
    const __m512 lo = _mm512_loadu_ps(x + b * 32), hi = _mm512_loadu_ps(x + b * 32 + 16);
    const double t0 = _mm512_reduce_add_pd(
        _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(lo)), _mm512_cvtps_pd(_mm512_extractf32x8_ps(lo, 1))));
    const double t1 = _mm512_reduce_add_pd(
        _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(hi)), _mm512_cvtps_pd(_mm512_extractf32x8_ps(hi, 1))));
    xd->sum16[(size_t)(2 * b)] = (float)t0;
    xd->sum16[(size_t)(2 * b + 1)] = (float)t1;
    xd->sum32[(size_t)b] = (float)(t0 + t1);
  }
}

// ---- decode: rows of w ----

// The 32-value formats, two blocks A and B (64 values, one digit group of scale s) per step. The quants go into one
// zmm as unsigned bytes: nibbles 0..15 (Q4_1), nibbles 0..15 read as q + 8 (Q4_0: value (q - 8) d), or q + 128
// (Q8_0, sign bit flipped). vpdpbusd sums four u8 * s8 products per int32 lane; with the digits chained by shifts,
//   Q4: t = ((q.d2 << 8) + q.d1 << 8) + q.d0, |t| <= 4 * 15 * 128 * (65536 + 257) < 2^29, exact in int32;
//   Q8_0: t2 = q.d2 and t = (q.d1 << 8) + q.d0 (the chain would pass 2^31), joined as floats.
// A lane's value becomes a float once; lanes of A are scaled by d_A s, lanes of B by d_B s. The unsigned offset
// (-8 d or -128 d per value) and Q4_1's min m come back through the block sums of x: + c_A S_A + c_B S_B.
// One row at a time: the rows stream through memory in order, which the hardware prefetcher follows (interleaving
// four rows to share the digit loads measured 1.6x slower).
template <int T>
FOCAL_AVX512 void b32_rows_vnni(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t r0, int64_t r1) {
  constexpr int kBytes = qblocks::block_bytes(T), kQ = T == kQ4_1 ? 4 : 2;
  const int64_t nb = w.cols / 32, n_pairs = (nb + 1) / 2;
  const int8_t *x0 = xd.d[0].data(), *x1 = xd.d[1].data(), *x2 = xd.d[2].data();
  const float *scale = xd.scale.data(), *sum32 = xd.sum32.data();
  // A's lanes and B's: nibble pairs put A in lanes 0-3 and 8-11; Q8_0 puts A in lanes 0-7. Q4_1's scales sit at
  // [d_A, m_A, d_B, m_B], the others' at [d_A, d_B].
  const __m512i lane_scale = T == kQ8_0   ? _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0)
                             : T == kQ4_1 ? _mm512_set_epi32(2, 2, 2, 2, 0, 0, 0, 0, 2, 2, 2, 2, 0, 0, 0, 0)
                                          : _mm512_set_epi32(1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    __m512 acc = _mm512_setzero_ps();
    __m128 off = _mm_setzero_ps();  // lanes 0, 1 (Q4_1: 1, 3) collect c_A S_A, c_B S_B
    for (int64_t pr = 0; pr < n_pairs; ++pr) {
      const bool has_b = 2 * pr + 1 < nb;  // a lone last block pairs with itself; its B digits and sums are zero
      const uint8_t* a = row + 2 * pr * kBytes;
      const uint8_t* b = has_b ? a + kBytes : a;
      prefetch_stream(a + 1024);  // ~1 KiB ahead: a few % faster
      __m512i q;
      if constexpr (T == kQ8_0) {
        q = _mm512_inserti64x4(_mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + kQ))),
                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kQ)), 1);
        q = _mm512_xor_si512(q, _mm512_set1_epi8((char)0x80));
      } else {
        const __m256i v =
            _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + kQ))),
                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kQ)), 1);
        q = _mm512_inserti64x4(_mm512_zextsi256_si512(_mm256_and_si256(v, m4)),
                               _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), 1);
      }
      const int64_t c = pr * 64;
      const __m512i v0 = _mm512_loadu_si512(x0 + c), v1 = _mm512_loadu_si512(x1 + c);
      const __m512i v2 = _mm512_loadu_si512(x2 + c);
      __m512 f;
      if constexpr (T == kQ8_0) {
        const __m512i t2 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, v2);
        __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, v1);
        t = _mm512_dpbusd_epi32(_mm512_slli_epi32(t, 8), q, v0);
        f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t2), _mm512_set1_ps(65536.0f), _mm512_cvtepi32_ps(t));
      } else {
        __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, v2);
        t = _mm512_dpbusd_epi32(_mm512_slli_epi32(t, 8), q, v1);
        t = _mm512_dpbusd_epi32(_mm512_slli_epi32(t, 8), q, v0);
        f = _mm512_cvtepi32_ps(t);
      }
      const __m128 dm = pair_scales<T>(a, b, has_b);
      const __m512 dv = _mm512_permutexvar_ps(lane_scale, _mm512_zextps128_ps512(dm));
      acc = _mm512_fmadd_ps(_mm512_mul_ps(dv, _mm512_set1_ps(scale[pr])), f, acc);
      off = pair_offsets<T>(dm, sum32[2 * pr], sum32[2 * pr + 1], off);
    }
    y[r] = _mm512_reduce_add_ps(acc) + hsum4(off);
  }
}

template void b32_rows_vnni<kQ4_0>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void b32_rows_vnni<kQ4_1>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void b32_rows_vnni<kQ8_0>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);

// ---- decode: the K formats ----
// A block of 256 values is four chunks of 64, each one zmm of unsigned quants with 4 values per 32-bit lane, in x's
// natural order (digits of group 256: one digit scale s per block):
//   Q4_K: the 32 bytes of chunk c, low nibbles (sub-block 2c) in lanes 0-7, high nibbles (2c + 1) in lanes 8-15;
//   Q5_K: the same, plus 16 where bit j of qh[l] is set (sub-block j, value l);
//   Q6_K: values 64c .. 64c + 63: the 64 bytes from ql + 64 (c / 2), low nibbles for even c, high for odd, with
//         bits 4 (c % 2) and 4 (c % 2) + 1 of qh[32 (c / 2) + l] above them for the first 32 values, the next two
//         bits for the last 32 (0..63);
//   Q2_K, Q3_K: the 32 bytes qs + 32 (c / 2), bits 4 (c % 2) .. + 1 for the first 32 values, the next two for the
//         last 32 (0..3); Q3_K plus 4 where bit 2c (first 32) or 2c + 1 (last 32) of hmask[l] is set (0..7).
// The digits are chained as for the 32-value formats: |t| <= 4 q_max 127 * 65536, < 2^30 for Q4_K / Q5_K and
// < 2^31 for Q6_K (q <= 63), exact in int32. Each lane's sum becomes a float once and is weighted by d s sc of its
// sub-block (32 values for Q4_K / Q5_K, 16 for Q6_K, Q3_K and Q2_K). The offsets come back through fp32 sums of x:
// Q4_K / Q5_K's mins -dmin mn over each 32, over each 16 Q6_K's -32 d sc, Q3_K's -4 d sc and Q2_K's -dmin mn. Four
// accumulators (one per chunk) keep the FMA latency off the critical path; the weights are prefetched 4 KiB ahead
// (the streamer alone left the loads waiting: +40 % measured on Q4_K), 2 KiB while the held weights pass the
// last-level cache, 8 KiB on Zen 5 (quant.h: note_held_weight_bytes).
template <int T>
FOCAL_AVX512 void kquant_rows_vnni(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t r0, int64_t r1) {
  constexpr int kBytes = kernel_block_bytes(T);
  constexpr bool kQ6 = T == kQ6_K, kLow2 = T == kQ2_K || T == kQ3_K;  // 2-bit low quants
  constexpr bool k16 = kQ6 || kLow2;                                  // a scale per 16 values
  constexpr KBlockLayout kL = k_block_layout(T);
  const int64_t n_blocks = w.cols / 256;
  const int8_t *x0 = xd.d[0].data(), *x1 = xd.d[1].data(), *x2 = xd.d[2].data();
  const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(0x03), m30 = _mm512_set1_epi8(0x30);
  const __m512i high = _mm512_set1_epi8(T == kQ3_K ? 4 : 16);  // Q5_K / Q3_K: what the high bit adds
  const size_t ahead = decode_prefetch_ahead(4096, true);
  // Q4_K / Q5_K: nibble shift per half; Q6_K (qh), Q2_K and Q3_K (qs): the bit shift per half for even and odd chunks
  const __m512i shift4 = halves(_mm256_setzero_si256(), _mm256_set1_epi16(4));
  const __m512i qh_shift[2] = {halves(_mm256_set1_epi16(0), _mm256_set1_epi16(2)),
                               halves(_mm256_set1_epi16(4), _mm256_set1_epi16(6))};
  __m512i sel[4], bit5[4];  // lane -> scale of its sub-block; Q5_K / Q3_K: the high bit of chunk c's two halves
  for (int c = 0; c < 4; ++c) {
    if constexpr (k16) {
      sel[c] = _mm512_set_epi32(4 * c + 3, 4 * c + 3, 4 * c + 3, 4 * c + 3, 4 * c + 2, 4 * c + 2, 4 * c + 2, 4 * c + 2,
                                4 * c + 1, 4 * c + 1, 4 * c + 1, 4 * c + 1, 4 * c, 4 * c, 4 * c, 4 * c);
    } else {
      sel[c] = halves(_mm256_set1_epi32(2 * c), _mm256_set1_epi32(2 * c + 1));
    }
    bit5[c] = halves(_mm256_set1_epi8((char)(1 << (2 * c))), _mm256_set1_epi8((char)(1 << (2 * c + 1))));
  }
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    __m512 off16 = _mm512_setzero_ps();  // Q6_K, Q3_K, Q2_K: the offsets of the 16 groups
    __m256 off8 = _mm256_setzero_ps();   // Q4_K / Q5_K: -dmin mn S32 over the 8 sub-blocks
    for (int64_t blk = 0; blk < n_blocks; ++blk) {
      const uint8_t* b = row + blk * kBytes;
      for (int l = 0; l < kBytes; l += 64) prefetch_stream(b + ahead + l);
      __m512 scz;  // d s sc per sub-block
      if constexpr (k16) {
        __m512 dsc, offm;  // d sc per group, and what multiplies its sum of x
        if constexpr (T == kQ2_K) {
          const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kL.scales));  // scale | min << 4
          const __m128i m4x = _mm_set1_epi8(0x0F);
          dsc = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(sm, m4x))),
                              _mm512_set1_ps(_cvtsh_ss(u16_at(b + kL.d))));
          offm = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(sm, 4), m4x))),
                               _mm512_set1_ps(-_cvtsh_ss(u16_at(b + kL.dmin))));
        } else {
          const __m128i sc8 =
              kQ6 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kL.scales)) : k3_scales(b + kL.scales);
          dsc =
              _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc8)), _mm512_set1_ps(_cvtsh_ss(u16_at(b + kL.d))));
          offm = _mm512_mul_ps(dsc, _mm512_set1_ps(kQ6 ? -32.0f : -4.0f));
        }
        scz = _mm512_mul_ps(dsc, _mm512_set1_ps(xd.scale[(size_t)blk]));
        off16 = _mm512_fmadd_ps(offm, _mm512_loadu_ps(xd.sum16.data() + blk * 16), off16);
      } else {
        uint64_t sc8, mn8;  // the 6-bit scales and mins as bytes
        k4_scales_mins(b + kL.scales, &sc8, &mn8);
        const __m128 dd =
            _mm_cvtph_ps(_mm_cvtsi32_si128((int)(u16_at(b + kL.d) | ((uint32_t)u16_at(b + kL.dmin) << 16))));
        const __m256 scf = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc8))),
                                         _mm256_set1_ps(_mm_cvtss_f32(dd) * xd.scale[(size_t)blk]));
        scz = _mm512_zextps256_ps512(scf);
        const __m256 mnf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mn8)));
        off8 = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(-_mm_cvtss_f32(_mm_movehdup_ps(dd))), mnf),
                               _mm256_loadu_ps(xd.sum32.data() + blk * 8), off8);
      }
      for (int c = 0; c < 4; ++c) {
        __m512i q;
        if constexpr (kQ6) {
          const __m512i ql = _mm512_loadu_si512(b + kL.qs + 64 * (c / 2));
          const __m512i qh =
              _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kL.high + 32 * (c / 2))));
          q = _mm512_or_si512(_mm512_and_si512((c & 1) ? _mm512_srli_epi16(ql, 4) : ql, m4),
                              _mm512_and_si512(_mm512_slli_epi16(_mm512_srlv_epi16(qh, qh_shift[c & 1]), 4), m30));
        } else if constexpr (kLow2) {
          const __m512i v =
              _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kL.qs + 32 * (c / 2))));
          q = _mm512_and_si512(_mm512_srlv_epi16(v, qh_shift[c & 1]), m3);
        } else {
          q = _mm512_and_si512(
              _mm512_srlv_epi16(
                  _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kL.qs + 32 * c))),
                  shift4),
              m4);
        }
        if constexpr (T == kQ5_K || T == kQ3_K) {  // qh (Q5_K), hmask (Q3_K)
          const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kL.high)));
          q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(qh, bit5[c]), q, high);
        }
        const int64_t at = blk * 256 + 64 * c;
        __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, _mm512_loadu_si512(x2 + at));
        t = _mm512_dpbusd_epi32(_mm512_slli_epi32(t, 8), q, _mm512_loadu_si512(x1 + at));
        t = _mm512_dpbusd_epi32(_mm512_slli_epi32(t, 8), q, _mm512_loadu_si512(x0 + at));
        acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_permutexvar_ps(sel[c], scz), acc[c]);
      }
    }
    const float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
    y[r] = sum + (k16 ? _mm512_reduce_add_ps(off16) : hsum8(off8));
  }
}
template void kquant_rows_vnni<kQ2_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void kquant_rows_vnni<kQ3_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void kquant_rows_vnni<kQ4_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void kquant_rows_vnni<kQ5_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void kquant_rows_vnni<kQ6_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);

// ---- decode: panels of w ----

// Panels p0..p1 of y = w x. Per panel block: the quants of 16 rows times 4 broadcast values of x per vpdpbusd, one
// int32 sum per row and digit over the block (|sum| <= 32 * 255 * 128 < 2^21; digit 1 shifted by 8 plus digit 0
// < 2^30, exact), which becomes a float once and is weighted by the row's d times the block's digit scale s. The
// unsigned offset (-8 d, or -128 d for Q8_0) and Q4_1's min come back through the block's sum of x. Two sets of
// accumulators (even and odd chunks) halve the dependency chains; the panel is prefetched 6 KiB ahead (the kernel
// alone on an L3-resident model: 1.8x over no prefetch; the whole SmolLM2 decode: median +14 % over 2 KiB, 8
// alternating runs, and no better at 8 KiB), 2 KiB while the held weights pass the last-level cache (quant.h:
// note_held_weight_bytes; the 8B shape's Q8_0 decode +16 %).
template <int T>
FOCAL_AVX512 void panels_vnni(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1) {
  constexpr int kChunks = T == kQ8_0 ? 8 : 4, kQo = panel_quant_offset(T);
  constexpr size_t kPbb = (size_t)kPanelRows * qblocks::block_bytes(T);
  constexpr float kOffset = T == kQ8_0 ? -128.0f : -8.0f;
  const int64_t nb = w.cols / 32;
  const int8_t *x0 = xd.d[0].data(), *x1 = xd.d[1].data(), *x2 = xd.d[2].data();
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const size_t ahead = decode_prefetch_ahead(6144, false);
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* P = w.data + (size_t)(p * nb) * kPbb;
    __m512 acc = _mm512_setzero_ps(), acc_off = _mm512_setzero_ps();
    for (int64_t j = 0; j < nb; ++j, P += kPbb) {
      for (size_t l = 0; l < kPbb; l += 64) prefetch_stream(P + ahead + l);
      __m512i a[2][3];
      for (auto& s : a)
        for (auto& v : s) v = _mm512_setzero_si512();
      for (int c = 0; c < kChunks; ++c) {
        const __m512i L = _mm512_loadu_si512(P + kQo + 64 * c);
        if constexpr (T == kQ8_0) {
          const int64_t o = 32 * j + 4 * c;
          a[c & 1][0] = _mm512_dpbusd_epi32(a[c & 1][0], L, bcast(x0 + o));
          a[c & 1][1] = _mm512_dpbusd_epi32(a[c & 1][1], L, bcast(x1 + o));
          a[c & 1][2] = _mm512_dpbusd_epi32(a[c & 1][2], L, bcast(x2 + o));
        } else {
          const __m512i lo = _mm512_and_si512(L, m4), hi = _mm512_and_si512(_mm512_srli_epi16(L, 4), m4);
          const int64_t o = 32 * j + 8 * c;
          a[0][0] = _mm512_dpbusd_epi32(a[0][0], lo, bcast(x0 + o));
          a[0][1] = _mm512_dpbusd_epi32(a[0][1], lo, bcast(x1 + o));
          a[0][2] = _mm512_dpbusd_epi32(a[0][2], lo, bcast(x2 + o));
          a[1][0] = _mm512_dpbusd_epi32(a[1][0], hi, bcast(x0 + o + 4));
          a[1][1] = _mm512_dpbusd_epi32(a[1][1], hi, bcast(x1 + o + 4));
          a[1][2] = _mm512_dpbusd_epi32(a[1][2], hi, bcast(x2 + o + 4));
        }
      }
      const __m512i d0 = _mm512_add_epi32(a[0][0], a[1][0]), d1 = _mm512_add_epi32(a[0][1], a[1][1]);
      const __m512i d2 = _mm512_add_epi32(a[0][2], a[1][2]);
      const __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d2), _mm512_set1_ps(65536.0f),
                                       _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_slli_epi32(d1, 8), d0)));
      const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(P)));
      acc = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(xd.scale[(size_t)j])), f, acc);
      if constexpr (T == kQ4_1) {
        const __m512 m = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + 32)));
        acc_off = _mm512_fmadd_ps(m, _mm512_set1_ps(xd.sum32[(size_t)j]), acc_off);
      } else {
        acc_off = _mm512_fmadd_ps(d, _mm512_set1_ps(kOffset * xd.sum32[(size_t)j]), acc_off);
      }
    }
    _mm512_storeu_ps(y + p * kPanelRows, _mm512_add_ps(acc, acc_off));
  }
}
template void panels_vnni<kQ4_0>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void panels_vnni<kQ4_1>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void panels_vnni<kQ8_0>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);

// Q4_K's and Q5_K's panels (K4Panel), 16 rows a zmm, x in digits of group 256: each chunk's low and high nibbles (Q5_K:
// with the fifth bit moved to bit 4 from the sub-block's high-bit bytes) are multiplied by four broadcast digits each
// (vpdpbusd) into per-sub-block int32 sums (at most 32 * 31 * 128); each sub-block's sum is weighted by the rows'
// 6-bit scales in fp32 (exact: < 2^23) and the digits meet once a block as in panels_vnni. The mins come back through
// the fp32 sums of x over each 32 values, -dmin mn S. Against the row kernel (kquant_rows_vnni) the same vpdpbusd
// count and about half the other instructions: the rows share each broadcast of x, each scale and each conversion,
// and no row needs a horizontal sum.
template <int B>
FOCAL_AVX512 inline __m512i bit_to_4(__m512i v) {  // bit B of each byte to bit 4 (other bits: mask them after)
  if constexpr (B < 4)
    return _mm512_slli_epi16(v, 4 - B);
  else if constexpr (B > 4)
    return _mm512_srli_epi16(v, B - 4);
  else
    return v;
}
template <int T, int C>
FOCAL_AVX512 inline __attribute__((always_inline)) void k4_chunk(const uint8_t* Q, __m512i H, const int8_t* const* xk,
                                                                 int64_t o, __m512i (&t)[3]) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i L = _mm512_loadu_si512(Q + 64 * C);
  __m512i lo = _mm512_and_si512(L, m4), hi = _mm512_and_si512(_mm512_srli_epi16(L, 4), m4);
  if constexpr (T == kQ5_K) {
    const __m512i b4 = _mm512_set1_epi8(0x10);
    lo = _mm512_or_si512(lo, _mm512_and_si512(bit_to_4<2 * C>(H), b4));
    hi = _mm512_or_si512(hi, _mm512_and_si512(bit_to_4<2 * C + 1>(H), b4));
  }
  for (int k = 0; k < 3; ++k) {
    t[k] = _mm512_dpbusd_epi32(t[k], lo, bcast(xk[k] + o + 8 * C));
    t[k] = _mm512_dpbusd_epi32(t[k], hi, bcast(xk[k] + o + 8 * C + 4));
  }
}

template <int T>
FOCAL_AVX512 void panels_k4_vnni(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1) {
  static_assert(T == kQ4_K || T == kQ5_K, "Q4_K and Q5_K");
  constexpr size_t kPbb = (size_t)kPanelRows * qblocks::block_bytes(T);
  constexpr int kQuants = K4Panel::quants(T);
  const int64_t nb = w.cols / 256;
  const int8_t* xk[3] = {xd.d[0].data(), xd.d[1].data(), xd.d[2].data()};
  const __m512i m4 = _mm512_set1_epi8(0x0F), m6 = _mm512_set1_epi8(0x3F), m2 = _mm512_set1_epi8(0x03);
  const __m512i byte0 = _mm512_set1_epi32(0xFF);
  const size_t ahead = decode_prefetch_ahead(6144, true);  // streamed: the K formats' distance
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* P = w.data + (size_t)(p * nb) * kPbb;
    __m512 acc = _mm512_setzero_ps(), off = _mm512_setzero_ps();
    for (int64_t j = 0; j < nb; ++j, P += kPbb) {
      const __m512i w0 = _mm512_loadu_si512(P + K4Panel::kScales), w1 = _mm512_loadu_si512(P + K4Panel::kScales + 64);
      const __m512i w2 = _mm512_loadu_si512(P + K4Panel::kScales + 128);
      // byte s % 4 of each lane: sub-block s's scale (sc) and min (mn), s < 4 in the first, s >= 4 in the second
      const __m512i sc[2] = {_mm512_and_si512(w0, m6),
                             _mm512_or_si512(_mm512_and_si512(w2, m4),
                                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 6), m2), 4))};
      const __m512i mn[2] = {_mm512_and_si512(w1, m6),
                             _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 4), m4),
                                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 6), m2), 4))};
      const float* sum32 = xd.sum32.data() + 8 * j;
      __m512 a[3] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
      __m512 mins = _mm512_setzero_ps();
      for (int s = 0; s < 8; ++s) {
        prefetch_slice<kPbb, 8>(P + ahead, s);
        __m512i t[3] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
        const uint8_t* Q = P + kQuants + 256 * s;
        const __m512i H = T == kQ5_K ? _mm512_loadu_si512(P + K4Panel::kHigh + 64 * s) : _mm512_setzero_si512();
        const int64_t o = 256 * j + 32 * s;
        k4_chunk<T, 0>(Q, H, xk, o, t);
        k4_chunk<T, 1>(Q, H, xk, o, t);
        k4_chunk<T, 2>(Q, H, xk, o, t);
        k4_chunk<T, 3>(Q, H, xk, o, t);
        const int sh = 8 * (s % 4);
        const __m512 scf = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(sc[s / 4], sh), byte0));
        for (int k = 0; k < 3; ++k) a[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t[k]), scf, a[k]);
        const __m512 mnf = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(mn[s / 4], sh), byte0));
        mins = _mm512_fmadd_ps(mnf, _mm512_set1_ps(sum32[s]), mins);
      }
      const __m512 f =
          _mm512_fmadd_ps(a[2], _mm512_set1_ps(65536.0f), _mm512_fmadd_ps(a[1], _mm512_set1_ps(256.0f), a[0]));
      const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + K4Panel::kD)));
      const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + K4Panel::kDmin)));
      acc = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(xd.scale[(size_t)j])), f, acc);
      off = _mm512_fnmadd_ps(dmin, mins, off);
    }
    _mm512_storeu_ps(y + p * kPanelRows, _mm512_add_ps(acc, off));
  }
}
template void panels_k4_vnni<kQ4_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void panels_k4_vnni<kQ5_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);

// Q6_K's panels (Q6Panel), 16 rows a zmm, x in digits of group 256. Per sub-block of 16 values, four vectors of 6-bit
// quants (values 4k .. 4k + 3 of each row: chunk k / 2's low or high nibbles, with the high two bits moved to bits 4
// and 5 from the sub-block's high-bit bytes, one vpternlogd each) times four broadcast digits (vpdpbusd). Digit 1's
// sum is shifted by 8 and digit 0's added to it in int32 (|256 t1 + t0| <= 257 * 16 * 63 * 128 < 2^31), digit 2's
// apart; both become floats once a sub-block, weighted by the rows' int8 scales, and meet once a block with d and the
// digit scale. The -32 offset comes back through the fp32 sums of x over each 16 values, -32 d sc S.
template <int B>  // sub-block 4 w + B of one block: its scales are byte B of the word W
FOCAL_AVX512 inline __attribute__((always_inline)) void q6_sub(const uint8_t* P, int s, __m512i W,
                                                               const int8_t* const* xk, int64_t o, float sum16,
                                                               __m512 (&a)[2], __m512& offs) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const __m512i H = _mm512_loadu_si512(P + Q6Panel::kHigh + 64 * s);
  const __m512i L0 = _mm512_loadu_si512(P + Q6Panel::kQuants + 128 * s);
  const __m512i L1 = _mm512_loadu_si512(P + Q6Panel::kQuants + 128 * s + 64);
  constexpr int kOr = 0xF8;  // A | (B & C)
  const __m512i v[4] = {
      _mm512_ternarylogic_epi32(_mm512_and_si512(L0, m4), bit_to_4<0>(H), m30, kOr),
      _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(L0, 4), m4), bit_to_4<2>(H), m30, kOr),
      _mm512_ternarylogic_epi32(_mm512_and_si512(L1, m4), bit_to_4<4>(H), m30, kOr),
      _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(L1, 4), m4), bit_to_4<6>(H), m30, kOr)};
  __m512i t2 = _mm512_setzero_si512(), t1 = _mm512_setzero_si512();
  for (int k = 0; k < 4; ++k) {
    t2 = _mm512_dpbusd_epi32(t2, v[k], bcast(xk[2] + o + 4 * k));
    t1 = _mm512_dpbusd_epi32(t1, v[k], bcast(xk[1] + o + 4 * k));
  }
  t1 = _mm512_slli_epi32(t1, 8);
  for (int k = 0; k < 4; ++k) t1 = _mm512_dpbusd_epi32(t1, v[k], bcast(xk[0] + o + 4 * k));
  const __m512 scf = _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(W, 24 - 8 * B), 24));  // signed byte B
  a[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t2), scf, a[0]);
  a[1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t1), scf, a[1]);
  offs = _mm512_fmadd_ps(scf, _mm512_set1_ps(sum16), offs);
}

FOCAL_AVX512 void panels_q6_vnni(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1) {
  constexpr size_t kPbb = (size_t)kPanelRows * qblocks::block_bytes(kQ6_K);
  const int64_t nb = w.cols / 256;
  const int8_t* xk[3] = {xd.d[0].data(), xd.d[1].data(), xd.d[2].data()};
  const size_t ahead = decode_prefetch_ahead(6144, true);  // streamed: the K formats' distance
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* P = w.data + (size_t)(p * nb) * kPbb;
    __m512 acc = _mm512_setzero_ps(), off = _mm512_setzero_ps();
    for (int64_t j = 0; j < nb; ++j, P += kPbb) {
      const float* sum16 = xd.sum16.data() + 16 * j;
      __m512 a[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};  // digit 2; digits 1 and 0
      __m512 offs = _mm512_setzero_ps();
      for (int wd = 0; wd < 4; ++wd) {
        prefetch_slice<kPbb, 4>(P + ahead, wd);
        const __m512i W = _mm512_loadu_si512(P + Q6Panel::kScales + 64 * wd);
        const int64_t o = 256 * j + 64 * wd;
        q6_sub<0>(P, 4 * wd + 0, W, xk, o + 0, sum16[4 * wd + 0], a, offs);
        q6_sub<1>(P, 4 * wd + 1, W, xk, o + 16, sum16[4 * wd + 1], a, offs);
        q6_sub<2>(P, 4 * wd + 2, W, xk, o + 32, sum16[4 * wd + 2], a, offs);
        q6_sub<3>(P, 4 * wd + 3, W, xk, o + 48, sum16[4 * wd + 3], a, offs);
      }
      const __m512 f = _mm512_fmadd_ps(a[0], _mm512_set1_ps(65536.0f), a[1]);
      const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + Q6Panel::kD)));
      acc = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(xd.scale[(size_t)j])), f, acc);
      off = _mm512_fmadd_ps(d, _mm512_mul_ps(offs, _mm512_set1_ps(-32.0f)), off);
    }
    _mm512_storeu_ps(y + p * kPanelRows, _mm512_add_ps(acc, off));
  }
}

// Q2_K's and Q3_K's panels (K23Panel), 16 rows a zmm, x in digits of group 256. Per sub-block of 16 values, four
// vectors of quants (values 4k .. 4k + 3 of each row: bits 2k, 2k + 1 of the low-bit bytes; Q3_K's high bit moved to
// bit 2 from the pair's high-bit bytes, so q + 4 in 0..7) times four broadcast digits (vpdpbusd), the three digits
// chained in one int32 sum, 256 (256 t2 + t1) + t0 (at most 16 * 7 * 128 * 65793 < 2^31). It becomes a float once a
// sub-block, weighted by the rows' scales (Q2_K the low nibble of the scale byte, Q3_K the 6-bit scale less 32), and
// meets d and the digit scale once a block. Q2_K's min (-dmin mn) and Q3_K's -4 come back through the fp32 sums of x
// over each 16 values.
template <int T>
FOCAL_AVX512 void panels_k23_vnni(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1) {
  static_assert(T == kQ2_K || T == kQ3_K, "Q2_K and Q3_K");
  constexpr bool kQ3 = T == kQ3_K;
  constexpr size_t kPbb = (size_t)kPanelRows * kernel_block_bytes(T);
  constexpr int kQuants = K23Panel::quants(T), kScales = K23Panel::scales(T);
  const int64_t nb = w.cols / 256;
  const int8_t* xk[3] = {xd.d[0].data(), xd.d[1].data(), xd.d[2].data()};
  const __m512i m3 = _mm512_set1_epi8(0x03), m4 = _mm512_set1_epi8(0x0F);
  const __m512i four = _mm512_set1_epi8(0x04);
  __m512i pick[4];  // pick[B]: byte B of each 32-bit lane into its low byte, the other three zero (vpshufb)
  for (int B = 0; B < 4; ++B)
    pick[B] = _mm512_set4_epi32((int)(0x8080800Cu | B), (int)(0x80808008u | B), (int)(0x80808004u | B),
                                (int)(0x80808000u | B));
  const size_t ahead = decode_prefetch_ahead(6144, true);  // streamed: the K formats' distance
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* P = w.data + (size_t)(p * nb) * kPbb;
    __m512 acc = _mm512_setzero_ps(), off = _mm512_setzero_ps();
    for (int64_t j = 0; j < nb; ++j, P += kPbb) {
      const float* sum16 = xd.sum16.data() + 16 * j;
      __m512 a = _mm512_setzero_ps(), offs = _mm512_setzero_ps();  // sum sc t; Q2_K sum mn S, Q3_K sum sc S
      __m512i W[3];
      if constexpr (kQ3)
        for (int k = 0; k < 3; ++k) W[k] = _mm512_loadu_si512(P + kScales + 64 * k);
      for (int wd = 0; wd < 4; ++wd) {
        prefetch_slice<kPbb, 4>(P + ahead, wd);
        // byte B of each lane: sub-block 4 wd + B's scale (Q2_K: its min in mn)
        __m512i sc, mn = _mm512_setzero_si512();
        if constexpr (kQ3) {  // k3_scales' arithmetic, four rows' words a lane: lo | hi << 4, less 32
          const __m512i lo = wd % 2 == 0 ? W[0] : W[1];
          const __m512i lo4 = _mm512_and_si512(wd < 2 ? lo : _mm512_srli_epi32(lo, 4), m4);
          const __m512i hi2 = _mm512_and_si512(_mm512_srli_epi32(W[2], 2 * wd), m3);
          sc = _mm512_sub_epi8(_mm512_or_si512(lo4, _mm512_slli_epi32(hi2, 4)), _mm512_set1_epi8(32));
        } else {
          const __m512i S = _mm512_loadu_si512(P + kScales + 64 * wd);
          sc = _mm512_and_si512(S, m4);
          mn = _mm512_and_si512(_mm512_srli_epi32(S, 4), m4);
        }
        for (int B = 0; B < 4; ++B) {
          const int s = 4 * wd + B;
          const __m512i L = _mm512_loadu_si512(P + kQuants + 64 * s);
          __m512i v[4] = {_mm512_and_si512(L, m3), _mm512_and_si512(_mm512_srli_epi16(L, 2), m3),
                          _mm512_and_si512(_mm512_srli_epi16(L, 4), m3), _mm512_and_si512(_mm512_srli_epi16(L, 6), m3)};
          if constexpr (kQ3) {  // value 4k + i's high bit is bit k + 4 (s % 2) of the row's byte i: to bit 2, as 4
            const __m512i H = _mm512_loadu_si512(P + K23Panel::kHigh + 64 * (s / 2));
            for (int k = 0; k < 4; ++k) {
              const int sh = k + 4 * (s % 2) - 2;
              const __m512i h = sh < 0 ? _mm512_slli_epi16(H, -sh) : _mm512_srli_epi16(H, sh);
              v[k] = _mm512_ternarylogic_epi32(v[k], h, four, 0xF8);  // A | (B & C)
            }
          }
          __m512i t2 = _mm512_setzero_si512(), t1 = _mm512_setzero_si512(), t0 = _mm512_setzero_si512();
          for (int k = 0; k < 4; ++k) {
            t2 = _mm512_dpbusd_epi32(t2, v[k], bcast(xk[2] + 256 * j + 16 * s + 4 * k));
            t1 = _mm512_dpbusd_epi32(t1, v[k], bcast(xk[1] + 256 * j + 16 * s + 4 * k));
            t0 = _mm512_dpbusd_epi32(t0, v[k], bcast(xk[0] + 256 * j + 16 * s + 4 * k));
          }
          const __m512i t = _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(_mm512_slli_epi32(t2, 8), t1), 8), t0);
          const __m512 scf = kQ3 ? _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(sc, 24 - 8 * B), 24))
                                 : _mm512_cvtepi32_ps(_mm512_shuffle_epi8(sc, pick[B]));
          a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), scf, a);
          const __m512 by = kQ3 ? scf : _mm512_cvtepi32_ps(_mm512_shuffle_epi8(mn, pick[B]));
          offs = _mm512_fmadd_ps(by, _mm512_set1_ps(sum16[s]), offs);
        }
      }
      const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + K23Panel::kD)));
      acc = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(xd.scale[(size_t)j])), a, acc);
      if constexpr (kQ3) {
        off = _mm512_fmadd_ps(d, _mm512_mul_ps(offs, _mm512_set1_ps(-4.0f)), off);
      } else {
        const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + K23Panel::kDmin)));
        off = _mm512_fnmadd_ps(dmin, offs, off);
      }
    }
    _mm512_storeu_ps(y + p * kPanelRows, _mm512_add_ps(acc, off));
  }
}
template void panels_k23_vnni<kQ2_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void panels_k23_vnni<kQ3_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);

}  // namespace focal::ops
