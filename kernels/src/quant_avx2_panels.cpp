// The hand-written AVX2 + FMA + F16C panel kernels (quant_types.h; the layouts: quant.h pack_panels, quant_panels.cpp):
// the decode of Q4_0 and Q4_1 (16-row panels of 32-value blocks), of Q8_0 (x in two int16 digits) and of Q2_K, Q3_K (K23Panel), Q4_K, Q5_K (K4Panel)
// and Q6_K (Q6Panel) with x in three int8 digits, and a K4 or K23 panel row dequantised for prefill's sgemm tiles.
// The row kernels of the same level are in quant_avx2.cpp. They run only where quant_cpu.cpp found AVX2, FMA and F16C.
#include <immintrin.h>

#include <cstring>

#include "focal_kernels/quant_blocks.h"
#include "quant_simd.h"
#include "quant_types.h"
#include "target_isa.h"

namespace focal::ops {

// ---- decode: panels of Q4_0 and Q4_1 (pack_panels), x in digits of group 32 ----
// The layout panels_vnni reads (quant_avx512.cpp), as two halves of 8 rows (one 32-bit lane each): chunk c of a
// block holds values 8c..8c+3 of each row in its low nibbles and 8c+4..8c+7 in its high ones, so one vpmaddubsw
// multiplies 8 rows by four broadcast digits of x, two values a 16-bit lane (at most 2 * 15 * 128 = 3840); each
// broadcast feeds both halves (as in panels_k4_avx2: one-thread L2-resident Q4_1 27.9 -> 30.7 GB/s on a Zen 5, Q4_0
// 25.1 -> 26.0). The four
// chunks' low and high products add up in int16 (at most 8 * 3840 = 30720, no overflow) and one vpmaddwd widens each
// row's block sum per digit (< 2^16); digit 1 shifted by 8 plus digit 0 (< 2^24) and digit 2 become floats exactly
// and meet as d2 65536 + (d1 256 + d0), rounded once, as in panels_vnni. No horizontal sums: each row's block sum
// stays in its lane. Q4_0's -8 d and Q4_1's min come back through the block's sum of x.
FOCAL_AVX2 inline __m256i bcast4(const int8_t* p) {  // four digits of x in every 32-bit lane
  return _mm256_castps_si256(_mm256_broadcast_ss(reinterpret_cast<const float*>(p)));
}

template <int T>
FOCAL_AVX2 void panels_avx2(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1) {
  static_assert(T == kQ4_0 || T == kQ4_1, "Q4_0 and Q4_1 only (Q8_0's pairs would saturate vpmaddubsw)");
  constexpr int kQo = panel_quant_offset(T);
  constexpr size_t kPbb = (size_t)kPanelRows * qblocks::block_bytes(T);
  const int64_t nb = w.cols / 32;
  const int8_t* xk[3] = {xd.d[0].data(), xd.d[1].data(), xd.d[2].data()};
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  const size_t ahead = decode_prefetch_ahead(6144, false);
  alignas(32) __m256 acc[2], off[2];  // in memory on purpose, touched once a block: the registers go to the products
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* P = w.data + (size_t)(p * nb) * kPbb;
    acc[0] = acc[1] = off[0] = off[1] = _mm256_setzero_ps();
    for (int64_t j = 0; j < nb; ++j, P += kPbb) {
      for (size_t l = 0; l < kPbb; l += 64) prefetch_stream(P + ahead + l);
      const float s = xd.scale[(size_t)j], sum = xd.sum32[(size_t)j];
      __m256i t[3][2];  // int16 sums [digit][half]
      for (int k = 0; k < 3; ++k) t[k][0] = t[k][1] = _mm256_setzero_si256();
      for (int c = 0; c < 4; ++c) {  // both halves a chunk: each broadcast of x feeds two vpmaddubsw
        const __m256i L0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + kQo + 64 * c));
        const __m256i L1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + kQo + 64 * c + 32));
        const __m256i lo0 = _mm256_and_si256(L0, m4), hi0 = _mm256_and_si256(_mm256_srli_epi16(L0, 4), m4);
        const __m256i lo1 = _mm256_and_si256(L1, m4), hi1 = _mm256_and_si256(_mm256_srli_epi16(L1, 4), m4);
        const int64_t o = 32 * j + 8 * c;
        for (int k = 0; k < 3; ++k) {
          const __m256i bl = bcast4(xk[k] + o), bh = bcast4(xk[k] + o + 4);
          t[k][0] = _mm256_add_epi16(t[k][0], _mm256_maddubs_epi16(lo0, bl));
          t[k][1] = _mm256_add_epi16(t[k][1], _mm256_maddubs_epi16(lo1, bl));
          t[k][0] = _mm256_add_epi16(t[k][0], _mm256_maddubs_epi16(hi0, bh));
          t[k][1] = _mm256_add_epi16(t[k][1], _mm256_maddubs_epi16(hi1, bh));
          in_register(t[k][0]);
          in_register(t[k][1]);
        }
      }
      for (int h = 0; h < 2; ++h) {  // rows 8h .. 8h + 7
        const __m256i d0 = _mm256_madd_epi16(t[0][h], ones), d1 = _mm256_madd_epi16(t[1][h], ones);
        const __m256i d2 = _mm256_madd_epi16(t[2][h], ones);
        const __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d2), _mm256_set1_ps(65536.0f),
                                         _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_slli_epi32(d1, 8), d0)));
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(P + 16 * h)));
        acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(s)), f, acc[h]);
        if constexpr (T == kQ4_1) {
          const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(P + 32 + 16 * h)));
          off[h] = _mm256_fmadd_ps(m, _mm256_set1_ps(sum), off[h]);
        } else {
          off[h] = _mm256_fmadd_ps(d, _mm256_set1_ps(-8.0f * sum), off[h]);
        }
      }
    }
    _mm256_storeu_ps(y + p * kPanelRows, _mm256_add_ps(acc[0], off[0]));
    _mm256_storeu_ps(y + p * kPanelRows + 8, _mm256_add_ps(acc[1], off[1]));
  }
}
template void panels_avx2<kQ4_0>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void panels_avx2<kQ4_1>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);

// ---- decode: panels of Q8_0 (pack_panels), x in two int16 digits ----
// Q8_0's panel quants are w + 128 (up to 255): with an int8 digit of x, vpmaddubsw's pairs would saturate
// (2 * 255 * 128 > 2^15), so this kernel multiplies in int16 with x as v = w1 65536 + w0 (digits::widen16). A quarter
// of a chunk (4 rows' 4 values: 16 bytes) widens to 16 int16 and one vpmaddwd per digit with 4 broadcast values of x
// leaves each row's sum of two products in two int32 lanes; the 8 chunks of a block add up there (at most
// 16 * 255 * 32768 < 2^28, exact). vphaddd folds the lane pairs into rows in the order 0 1 4 5 2 3 6 7 per 8 rows (the
// rows' d are permuted to it, the panel's sums back at its end), the two digits become floats once a block and meet as
// w1 65536 + w0, times d and the digit scale; the offset -128 d comes back through the block's sum of x, as in
// panels_vnni.
FOCAL_AVX2 void panels_q8_avx2(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1) {
  constexpr int kQo = panel_quant_offset(kQ8_0);
  constexpr size_t kPbb = (size_t)kPanelRows * qblocks::block_bytes(kQ8_0);
  const int64_t nb = w.cols / 32;
  const int16_t *x0 = xd.w16[0].data(), *x1 = xd.w16[1].data();
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);  // its own inverse
  const size_t ahead = decode_prefetch_ahead(6144, false);
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* P = w.data + (size_t)(p * nb) * kPbb;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, off[2] = {acc[0], acc[1]};
    for (int64_t j = 0; j < nb; ++j, P += kPbb) {
      for (size_t l = 0; l < kPbb; l += 64) prefetch_stream(P + ahead + l);
      __m256i t0[4], t1[4];  // rows 4g .. 4g + 3, digits w0 and w1: two int32 lanes a row
      for (int g = 0; g < 4; ++g) t0[g] = t1[g] = _mm256_setzero_si256();
      for (int c = 0; c < 8; ++c) {
        const int64_t o = 32 * j + 4 * c;
        const __m256i b0 = _mm256_broadcastq_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x0 + o)));
        const __m256i b1 = _mm256_broadcastq_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x1 + o)));
        for (int g = 0; g < 4; ++g) {
          const __m256i q =
              _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(P + kQo + 64 * c + 16 * g)));
          t0[g] = _mm256_add_epi32(t0[g], _mm256_madd_epi16(q, b0));
          t1[g] = _mm256_add_epi32(t1[g], _mm256_madd_epi16(q, b1));
          in_register(t0[g]);
          in_register(t1[g]);
        }
      }
      const float s = xd.scale[(size_t)j], sum = xd.sum32[(size_t)j];
      for (int h = 0; h < 2; ++h) {  // rows 8h .. 8h + 7
        const __m256i lo = _mm256_hadd_epi32(t0[2 * h], t0[2 * h + 1]);
        const __m256i hi = _mm256_hadd_epi32(t1[2 * h], t1[2 * h + 1]);
        const __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hi), _mm256_set1_ps(65536.0f), _mm256_cvtepi32_ps(lo));
        const __m256 d = _mm256_permutevar8x32_ps(
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(P + 16 * h))), order);
        acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(s)), f, acc[h]);
        off[h] = _mm256_fmadd_ps(d, _mm256_set1_ps(-128.0f * sum), off[h]);
      }
    }
    for (int h = 0; h < 2; ++h)
      _mm256_storeu_ps(y + p * kPanelRows + 8 * h, _mm256_permutevar8x32_ps(_mm256_add_ps(acc[h], off[h]), order));
  }
}

// ---- decode: panels of Q4_K and Q5_K (K4Panel), x in digits of group 256 ----
// A whole panel (16 rows: two vectors of 8 rows, one 32-bit lane each) a chunk, so that each broadcast of x feeds the
// vpmaddubsw of both halves: per sub-block of 32 values, the chunks' products add up in int16 (Q4_K: four chunks, at
// most 8 * 2 * 15 * 128 = 30720; Q5_K: two, at most 4 * 2 * 31 * 128 = 31744) and one vpmaddwd with the rows' 6-bit
// scales (each row's scale in both 16-bit halves of its lane) both widens and weights them (at most 2 * 31744 * 63
// each, 16 a block < 2^26: exact in int32). The three digits' block sums become floats once a block and meet as
// d2 65536 + d1 256 + d0, times d and the digit scale; the mins come back through the fp32 sums of x over each 32
// values, -dmin mn S. Q5_K's fifth bit of each value is moved to bit 4 of its quant byte from the sub-block's 32 bytes
// of high bits (bit 2c for the low nibbles of chunk c, 2c + 1 for the high ones). The broadcasts take a vector ALU
// slot on AMD Zen (measured: a vpmaddubsw + vpaddw pair with a broadcast from memory ran at 0.71x the rate with a
// plain load): sharing them across the halves took the one-thread L2-resident Q4_K rate on a Zen 5 from 24.7 to
// 28.0 GB/s (Q5_K unchanged: its fifth bits fill the registers the sharing saves). The block's scales, mins and
// int32 sums live in memory, touched once a sub-block; the inner loop keeps AVX2's 16 registers.
// The vpshufb control that copies byte b of each 32-bit lane into both of its 16-bit halves: into their low bytes
// (high bytes zero), or, with `high`, into their high bytes (low bytes zero).
FOCAL_AVX2 inline __m256i lane_byte_to_halves(int b, bool high) {
  alignas(32) uint8_t ctl[32];
  for (int i = 0; i < 32; ++i) ctl[i] = i % 2 == (high ? 1 : 0) ? (uint8_t)(4 * ((i % 16) / 4) + b) : 0x80;
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(ctl));
}
template <int B>
FOCAL_AVX2 inline __m256i bit_to_4(__m256i v) {  // bit B of each byte to bit 4 (other bits: mask them after)
  if constexpr (B < 4)
    return _mm256_slli_epi16(v, 4 - B);
  else if constexpr (B > 4)
    return _mm256_srli_epi16(v, B - 4);
  else
    return v;
}
// Chunk C of sub-block s for all 16 rows of a panel (both halves): each broadcast of x feeds two vpmaddubsw.
template <int T, int C>
FOCAL_AVX2 inline __attribute__((always_inline)) void k4_chunk(const uint8_t* Q, const uint8_t* P, int s,
                                                               const int8_t* const* xk, int64_t o, __m256i (&t)[3][2]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i L0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Q + 64 * C));
  const __m256i L1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Q + 64 * C + 32));
  __m256i lo0 = _mm256_and_si256(L0, m4), hi0 = _mm256_and_si256(_mm256_srli_epi16(L0, 4), m4);
  __m256i lo1 = _mm256_and_si256(L1, m4), hi1 = _mm256_and_si256(_mm256_srli_epi16(L1, 4), m4);
  if constexpr (T == kQ5_K) {  // the sub-block's high bits loaded again each chunk (L1): two registers held across
                               // the chunks would spill the sums
    const __m256i b4 = _mm256_set1_epi8(0x10);
    const __m256i H0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + K4Panel::kHigh + 64 * s));
    lo0 = _mm256_or_si256(lo0, _mm256_and_si256(bit_to_4<2 * C>(H0), b4));
    hi0 = _mm256_or_si256(hi0, _mm256_and_si256(bit_to_4<2 * C + 1>(H0), b4));
    const __m256i H1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + K4Panel::kHigh + 64 * s + 32));
    lo1 = _mm256_or_si256(lo1, _mm256_and_si256(bit_to_4<2 * C>(H1), b4));
    hi1 = _mm256_or_si256(hi1, _mm256_and_si256(bit_to_4<2 * C + 1>(H1), b4));
  }
  for (int k = 0; k < 3; ++k) {
    const __m256i bl = bcast4(xk[k] + o + 8 * C);
    t[k][0] = _mm256_add_epi16(t[k][0], _mm256_maddubs_epi16(lo0, bl));
    t[k][1] = _mm256_add_epi16(t[k][1], _mm256_maddubs_epi16(lo1, bl));
    const __m256i bh = bcast4(xk[k] + o + 8 * C + 4);
    t[k][0] = _mm256_add_epi16(t[k][0], _mm256_maddubs_epi16(hi0, bh));
    t[k][1] = _mm256_add_epi16(t[k][1], _mm256_maddubs_epi16(hi1, bh));
    in_register(t[k][0]);
    in_register(t[k][1]);
  }
}

// The sub-block's int16 sums widened and weighted by the rows' scales into the block's int32 sums; t zeroed.
FOCAL_AVX2 inline __attribute__((always_inline)) void k4_flush(const __m256i (&sc)[2][2], const __m256i* pick, int s,
                                                               __m256i (&t)[3][2], __m256i (&a)[3][2]) {
  for (int h = 0; h < 2; ++h) {
    const __m256i scv = _mm256_shuffle_epi8(sc[h][s / 4], pick[s % 4]);
    for (int k = 0; k < 3; ++k) {
      a[k][h] = _mm256_add_epi32(a[k][h], _mm256_madd_epi16(t[k][h], scv));
      t[k][h] = _mm256_setzero_si256();
    }
  }
}

template <int T>
FOCAL_AVX2 void panels_k4_avx2(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1) {
  static_assert(T == kQ4_K || T == kQ5_K, "Q4_K and Q5_K");
  constexpr size_t kPbb = (size_t)kPanelRows * qblocks::block_bytes(T);
  constexpr int kQuants = K4Panel::quants(T);
  const int64_t nb = w.cols / 256;
  const int8_t* xk[3] = {xd.d[0].data(), xd.d[1].data(), xd.d[2].data()};
  const __m256i m6 = _mm256_set1_epi8(0x3F), m2 = _mm256_set1_epi8(0x03);
  const __m256i byte0 = _mm256_set1_epi32(0xFF);
  // pick[b]: byte b of each 32-bit lane into both of its 16-bit halves (the lane's row's scale of a sub-block)
  alignas(32) __m256i pick[4];
  for (int b = 0; b < 4; ++b) pick[b] = lane_byte_to_halves(b, false);
  const size_t ahead = decode_prefetch_ahead(6144, true);  // streamed: the K formats' distance
  // Held in memory on purpose (updated once a sub-block or block): AVX2's 16 registers go to the inner loop.
  alignas(32) __m256i sc[2][2], mn[2][2];  // [half][s / 4]: byte s % 4 of each lane, sub-block s's scale and min
  alignas(32) __m256i a[3][2];             // [digit][half] int32 block sums
  alignas(32) __m256 acc[2], off[2];
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* P = w.data + (size_t)(p * nb) * kPbb;
    acc[0] = acc[1] = off[0] = off[1] = _mm256_setzero_ps();
    for (int64_t j = 0; j < nb; ++j, P += kPbb) {
      const float* sum32 = xd.sum32.data() + 8 * j;
      for (int h = 0; h < 2; ++h) {                                                           // rows 8h .. 8h + 7
        const __m256i* sw = reinterpret_cast<const __m256i*>(P + K4Panel::kScales + 32 * h);  // word k at 2k
        const __m256i w0 = _mm256_loadu_si256(sw), w1 = _mm256_loadu_si256(sw + 2), w2 = _mm256_loadu_si256(sw + 4);
        const __m256i m4 = _mm256_set1_epi8(0x0F);
        sc[h][0] = _mm256_and_si256(w0, m6);
        sc[h][1] = _mm256_or_si256(_mm256_and_si256(w2, m4),
                                   _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w0, 6), m2), 4));
        mn[h][0] = _mm256_and_si256(w1, m6);
        mn[h][1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(w2, 4), m4),
                                   _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(w1, 6), m2), 4));
        for (int k = 0; k < 3; ++k) a[k][h] = _mm256_setzero_si256();
      }
      for (int s = 0; s < 8; ++s) {
        prefetch_slice<kPbb, 8>(P + ahead, s);
        const uint8_t* Q = P + kQuants + 256 * s;
        const int64_t o = 256 * j + 32 * s;
        __m256i t[3][2];  // int16 sums [digit][half]
        for (int k = 0; k < 3; ++k) t[k][0] = t[k][1] = _mm256_setzero_si256();
        k4_chunk<T, 0>(Q, P, s, xk, o, t);
        k4_chunk<T, 1>(Q, P, s, xk, o, t);
        if constexpr (T == kQ5_K)
          k4_flush(sc, pick, s, t, a);  // two chunks of 5-bit products: widen before the int16 sums could overflow
        k4_chunk<T, 2>(Q, P, s, xk, o, t);
        k4_chunk<T, 3>(Q, P, s, xk, o, t);
        k4_flush(sc, pick, s, t, a);
      }
      for (int h = 0; h < 2; ++h) {
        __m256 mins = _mm256_setzero_ps();
        for (int s = 0; s < 8; ++s) {
          const __m256 mnf = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(mn[h][s / 4], 8 * (s % 4)), byte0));
          mins = _mm256_fmadd_ps(mnf, _mm256_set1_ps(sum32[s]), mins);
        }
        const __m256 f = _mm256_fmadd_ps(
            _mm256_cvtepi32_ps(a[2][h]), _mm256_set1_ps(65536.0f),
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[1][h]), _mm256_set1_ps(256.0f), _mm256_cvtepi32_ps(a[0][h])));
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(P + K4Panel::kD + 16 * h)));
        const __m256 dmin =
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(P + K4Panel::kDmin + 16 * h)));
        acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(xd.scale[(size_t)j])), f, acc[h]);
        off[h] = _mm256_fnmadd_ps(dmin, mins, off[h]);
      }
    }
    _mm256_storeu_ps(y + p * kPanelRows, _mm256_add_ps(acc[0], off[0]));
    _mm256_storeu_ps(y + p * kPanelRows + 8, _mm256_add_ps(acc[1], off[1]));
  }
}
template void panels_k4_avx2<kQ4_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void panels_k4_avx2<kQ5_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);

// ---- decode: panels of Q6_K (Q6Panel), x in digits of group 256 ----
// Half a panel (8 rows, one 32-bit lane each) at a time, as panels_k4_avx2: per sub-block of 16 values, four vectors
// of 6-bit quants (values 4k .. 4k + 3 of each row: chunk k / 2's low or high nibbles, with the high two bits moved
// to bits 4 and 5 from the sub-block's high-bit bytes) times four broadcast digits (vpmaddubsw: pairs at most
// 2 * 63 * 128 = 16128; two add up in int16, at most 32256), and one vpmaddwd per pair of vectors with the rows' int8
// scales (sign-extended into both 16-bit halves of each lane) both widens and weights them (at most 4 * 32256 * 128 a
// sub-block, 16 a block < 2^29: exact in int32). The three digits' block sums become floats once a block, as in
// panels_k4_avx2; the -32 offset comes back through the fp32 sums of x over each 16 values, -32 d sc S.
template <int B>  // sub-block 4 w + B of one block, rows 8h .. 8h + 7: its scales are byte B of the word W
FOCAL_AVX2 inline __attribute__((always_inline)) void q6_sub(const uint8_t* P, int s, int h, __m256i W, __m256i pick,
                                                             const int8_t* const* xk, int64_t o, float sum16,
                                                             __m256i (&a)[3], __m256& offs) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const __m256i H = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + Q6Panel::kHigh + 64 * s + 32 * h));
  const uint8_t* Q = P + Q6Panel::kQuants + 128 * s + 32 * h;
  const __m256i L0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Q));
  const __m256i L1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(Q + 64));
  const __m256i v[4] = {
      _mm256_or_si256(_mm256_and_si256(L0, m4), _mm256_and_si256(bit_to_4<0>(H), m30)),
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), m4), _mm256_and_si256(bit_to_4<2>(H), m30)),
      _mm256_or_si256(_mm256_and_si256(L1, m4), _mm256_and_si256(bit_to_4<4>(H), m30)),
      _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), m4), _mm256_and_si256(bit_to_4<6>(H), m30))};
  const __m256i scv = _mm256_srai_epi16(_mm256_shuffle_epi8(W, pick), 8);  // the rows' scales in both halves
  for (int k = 0; k < 3; ++k) {
    const __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(v[0], bcast4(xk[k] + o)),
                                         _mm256_maddubs_epi16(v[1], bcast4(xk[k] + o + 4)));
    const __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(v[2], bcast4(xk[k] + o + 8)),
                                         _mm256_maddubs_epi16(v[3], bcast4(xk[k] + o + 12)));
    a[k] = _mm256_add_epi32(a[k], _mm256_add_epi32(_mm256_madd_epi16(p01, scv), _mm256_madd_epi16(p23, scv)));
    in_register(a[k]);
  }
  const __m256 scf = _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(W, 24 - 8 * B), 24));  // signed byte B
  offs = _mm256_fmadd_ps(scf, _mm256_set1_ps(sum16), offs);
}

FOCAL_AVX2 void panels_q6_avx2(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1) {
  constexpr size_t kPbb = (size_t)kPanelRows * qblocks::block_bytes(kQ6_K);
  const int64_t nb = w.cols / 256;
  const int8_t* xk[3] = {xd.d[0].data(), xd.d[1].data(), xd.d[2].data()};
  // pick[b]: byte b of each 32-bit lane into the high byte of both of its 16-bit halves (then shifted down, signed)
  __m256i pick[4];
  for (int b = 0; b < 4; ++b) pick[b] = lane_byte_to_halves(b, true);
  const size_t ahead = decode_prefetch_ahead(6144, true);  // streamed: the K formats' distance
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* P = w.data + (size_t)(p * nb) * kPbb;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, off[2] = {acc[0], acc[1]};
    for (int64_t j = 0; j < nb; ++j, P += kPbb) {
      const float* sum16 = xd.sum16.data() + 16 * j;
      for (int h = 0; h < 2; ++h) {                                                               // rows 8h .. 8h + 7
        __m256i a[3] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};  // int32 sums
        __m256 offs = _mm256_setzero_ps();
        for (int wd = 0; wd < 4; ++wd) {
          prefetch_slice<kPbb, 8>(P + ahead, 4 * h + wd);
          const __m256i W =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + Q6Panel::kScales + 64 * wd + 32 * h));
          const int64_t o = 256 * j + 64 * wd;
          q6_sub<0>(P, 4 * wd + 0, h, W, pick[0], xk, o + 0, sum16[4 * wd + 0], a, offs);
          q6_sub<1>(P, 4 * wd + 1, h, W, pick[1], xk, o + 16, sum16[4 * wd + 1], a, offs);
          q6_sub<2>(P, 4 * wd + 2, h, W, pick[2], xk, o + 32, sum16[4 * wd + 2], a, offs);
          q6_sub<3>(P, 4 * wd + 3, h, W, pick[3], xk, o + 48, sum16[4 * wd + 3], a, offs);
        }
        const __m256 f = _mm256_fmadd_ps(
            _mm256_cvtepi32_ps(a[2]), _mm256_set1_ps(65536.0f),
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[1]), _mm256_set1_ps(256.0f), _mm256_cvtepi32_ps(a[0])));
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(P + Q6Panel::kD + 16 * h)));
        acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(xd.scale[(size_t)j])), f, acc[h]);
        off[h] = _mm256_fmadd_ps(d, _mm256_mul_ps(offs, _mm256_set1_ps(-32.0f)), off[h]);
      }
    }
    _mm256_storeu_ps(y + p * kPanelRows, _mm256_add_ps(acc[0], off[0]));
    _mm256_storeu_ps(y + p * kPanelRows + 8, _mm256_add_ps(acc[1], off[1]));
  }
}

// ---- decode: panels of Q2_K and Q3_K (K23Panel), x in digits of group 256 ----
// Half a panel (8 rows, one 32-bit lane each) at a time, as panels_q6_avx2: per sub-block of 16 values, four vectors
// of quants (values 4k .. 4k + 3 of each row: bits 2k, 2k + 1 of the low-bit bytes; Q3_K's high bit moved to bit 2
// from the pair's high-bit bytes, so q + 4 in 0..7) times four broadcast digits (vpmaddubsw: pairs at most
// 2 * 7 * 128 = 1792; the four add up in int16, at most 7168), and one vpmaddwd with the rows' scales (in both 16-bit
// halves of each lane: Q2_K's 4-bit scale, Q3_K's 6-bit one less 32, signed) both widens and weights them (at most
// 2 * 7168 * 32 a sub-block, 16 a block < 2^23: exact in int32). The three digits' block sums become floats once a
// block, as in panels_q6_avx2; Q2_K's min (-dmin mn) and Q3_K's -4 come back through the fp32 sums of x over each
// 16 values.
template <int T>
FOCAL_AVX2 void panels_k23_avx2(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1) {
  static_assert(T == kQ2_K || T == kQ3_K, "Q2_K and Q3_K");
  constexpr bool kQ3 = T == kQ3_K;
  constexpr size_t kPbb = (size_t)kPanelRows * kernel_block_bytes(T);
  constexpr int kQuants = K23Panel::quants(T), kScales = K23Panel::scales(T);
  const int64_t nb = w.cols / 256;
  const int8_t* xk[3] = {xd.d[0].data(), xd.d[1].data(), xd.d[2].data()};
  const __m256i m3 = _mm256_set1_epi8(0x03), m4 = _mm256_set1_epi8(0x0F), four = _mm256_set1_epi8(0x04);
  const __m256i byte0 = _mm256_set1_epi32(0xFF);
  // pick[b]: byte b of each 32-bit lane into both of its 16-bit halves: the low bytes (Q2_K's unsigned scales), or
  // the high ones, then shifted down with their sign (Q3_K's)
  __m256i pick[4];
  for (int b = 0; b < 4; ++b) pick[b] = lane_byte_to_halves(b, kQ3);
  const size_t ahead = decode_prefetch_ahead(6144, true);  // streamed: the K formats' distance
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* P = w.data + (size_t)(p * nb) * kPbb;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, off[2] = {acc[0], acc[1]};
    for (int64_t j = 0; j < nb; ++j, P += kPbb) {
      const float* sum16 = xd.sum16.data() + 16 * j;
      for (int h = 0; h < 2; ++h) {                                                               // rows 8h .. 8h + 7
        __m256i a[3] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};  // int32 sums
        __m256 offs = _mm256_setzero_ps();  // Q2_K sum mn S, Q3_K sum sc S
        __m256i W[3];
        if constexpr (kQ3)
          for (int k = 0; k < 3; ++k)
            W[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + kScales + 64 * k + 32 * h));
        for (int wd = 0; wd < 4; ++wd) {
          prefetch_slice<kPbb, 8>(P + ahead, 4 * h + wd);
          __m256i sc, mn = _mm256_setzero_si256();  // byte B of each lane: sub-block 4 wd + B's scale (and min)
          if constexpr (kQ3) {                      // k3_scales' arithmetic, eight rows' words: lo | hi << 4, less 32
            const __m256i lo = wd % 2 == 0 ? W[0] : W[1];
            const __m256i lo4 = _mm256_and_si256(wd < 2 ? lo : _mm256_srli_epi32(lo, 4), m4);
            const __m256i hi2 = _mm256_and_si256(_mm256_srli_epi32(W[2], 2 * wd), m3);
            sc = _mm256_sub_epi8(_mm256_or_si256(lo4, _mm256_slli_epi32(hi2, 4)), _mm256_set1_epi8(32));
          } else {
            const __m256i S = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + kScales + 64 * wd + 32 * h));
            sc = _mm256_and_si256(S, m4);
            mn = _mm256_and_si256(_mm256_srli_epi32(S, 4), m4);
          }
          for (int B = 0; B < 4; ++B) {
            const int s = 4 * wd + B;
            const __m256i L = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + kQuants + 64 * s + 32 * h));
            __m256i v[4] = {_mm256_and_si256(L, m3), _mm256_and_si256(_mm256_srli_epi16(L, 2), m3),
                            _mm256_and_si256(_mm256_srli_epi16(L, 4), m3),
                            _mm256_and_si256(_mm256_srli_epi16(L, 6), m3)};
            if constexpr (kQ3) {  // value 4k + i's high bit is bit k + 4 (s % 2) of the row's byte i: to bit 2, as 4
              const __m256i H =
                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(P + K23Panel::kHigh + 64 * (s / 2) + 32 * h));
              for (int k = 0; k < 4; ++k) {
                const int sh = k + 4 * (s % 2) - 2;
                const __m256i hb = sh < 0 ? _mm256_slli_epi16(H, -sh) : _mm256_srli_epi16(H, sh);
                v[k] = _mm256_or_si256(v[k], _mm256_and_si256(hb, four));
              }
            }
            __m256i scv = _mm256_shuffle_epi8(sc, pick[B]);
            if constexpr (kQ3) scv = _mm256_srai_epi16(scv, 8);
            const int64_t o = 256 * j + 16 * s;
            for (int k = 0; k < 3; ++k) {
              const __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(v[0], bcast4(xk[k] + o)),
                                                   _mm256_maddubs_epi16(v[1], bcast4(xk[k] + o + 4)));
              const __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(v[2], bcast4(xk[k] + o + 8)),
                                                   _mm256_maddubs_epi16(v[3], bcast4(xk[k] + o + 12)));
              a[k] = _mm256_add_epi32(a[k], _mm256_madd_epi16(_mm256_add_epi16(p01, p23), scv));
              in_register(a[k]);
            }
            const __m256 by =
                kQ3 ? _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(sc, 24 - 8 * B), 24))  // signed byte B
                    : _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(mn, 8 * B), byte0));
            offs = _mm256_fmadd_ps(by, _mm256_set1_ps(sum16[s]), offs);
          }
        }
        const __m256 f = _mm256_fmadd_ps(
            _mm256_cvtepi32_ps(a[2]), _mm256_set1_ps(65536.0f),
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[1]), _mm256_set1_ps(256.0f), _mm256_cvtepi32_ps(a[0])));
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(P + K23Panel::kD + 16 * h)));
        acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(xd.scale[(size_t)j])), f, acc[h]);
        if constexpr (kQ3) {
          off[h] = _mm256_fmadd_ps(d, _mm256_mul_ps(offs, _mm256_set1_ps(-4.0f)), off[h]);
        } else {
          const __m256 dmin =
              _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(P + K23Panel::kDmin + 16 * h)));
          off[h] = _mm256_fnmadd_ps(dmin, offs, off[h]);
        }
      }
    }
    _mm256_storeu_ps(y + p * kPanelRows, _mm256_add_ps(acc[0], off[0]));
    _mm256_storeu_ps(y + p * kPanelRows + 8, _mm256_add_ps(acc[1], off[1]));
  }
}
template void panels_k23_avx2<kQ2_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void panels_k23_avx2<kQ3_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);

// dst[cols] = row l of a Q4_K / Q5_K panel matrix (prefill's sgemm tiles, quant_panels.cpp), as dequant_panel_row_k4
// computes it: each value dd q - mm, a product then a difference (no FMA), so the two give the same floats. A
// sub-block's 16 bytes of row l (four bytes a chunk) in one register: low nibbles values 8c .. 8c + 3, high ones
// 8c + 4 .. 8c + 7 (Q5_K: plus 16 from bits 2c and 2c + 1 of the row's four high-bit bytes), interleaved by 32-bit
// lanes into value order.
template <int T>
FOCAL_AVX2 void dequant_panel_row_k4_avx2(const uint8_t* P, int l, int64_t nb, float* dst) {
  constexpr size_t kPbb = (size_t)kPanelRows * qblocks::block_bytes(T);
  const __m128i m4 = _mm_set1_epi8(0x0F);
  for (int64_t j = 0; j < nb; ++j, P += kPbb) {
    const float d = f16c_at(P + K4Panel::kD + 2 * l), dmin = f16c_at(P + K4Panel::kDmin + 2 * l);
    const uint8_t* sw = P + K4Panel::kScales + 4 * l;
    for (int s = 0; s < 8; ++s, dst += 32) {
      int sc, mn;
      qblocks::scale_min_k4_from(s, sw[s & 3], sw[64 + (s & 3)], sw[128 + (s & 3)], &sc, &mn);
      const __m256 dd = _mm256_set1_ps(d * (float)sc), mm = _mm256_set1_ps(dmin * (float)mn);
      const uint8_t* q = P + K4Panel::quants(T) + 256 * s + 4 * l;
      int32_t c4[4];
      for (int c = 0; c < 4; ++c) std::memcpy(&c4[c], q + 64 * c, 4);
      const __m128i v = _mm_setr_epi32(c4[0], c4[1], c4[2], c4[3]);
      __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
      if constexpr (T ==
                    kQ5_K) {  // lane c: the high-bit bytes shifted by 2c, so bit 0 is the low nibble's, 1 the high's
        int32_t hw;
        std::memcpy(&hw, P + K4Panel::kHigh + 64 * s + 4 * l, 4);
        const __m128i hv = _mm_srlv_epi32(_mm_set1_epi32(hw), _mm_setr_epi32(0, 2, 4, 6));
        lo = _mm_or_si128(lo, _mm_slli_epi16(_mm_and_si128(hv, _mm_set1_epi8(0x01)), 4));
        hi = _mm_or_si128(hi, _mm_slli_epi16(_mm_and_si128(hv, _mm_set1_epi8(0x02)), 3));
      }
      const __m128i a = _mm_unpacklo_epi32(lo, hi), b = _mm_unpackhi_epi32(lo, hi);  // values 0..15, 16..31
      const __m128i part[4] = {a, _mm_srli_si128(a, 8), b, _mm_srli_si128(b, 8)};
      for (int k = 0; k < 4; ++k) {
        const __m256 qf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(part[k]));
        _mm256_storeu_ps(dst + 8 * k, _mm256_sub_ps(_mm256_mul_ps(dd, qf), mm));
      }
    }
  }
}
template void dequant_panel_row_k4_avx2<kQ4_K>(const uint8_t*, int, int64_t, float*);
template void dequant_panel_row_k4_avx2<kQ5_K>(const uint8_t*, int, int64_t, float*);

// dst[cols] = row l of a Q2_K / Q3_K panel matrix (prefill's sgemm tiles, quant_panels.cpp), as dequant_panel_row_k23
// computes it: Q2_K dl q - ml (a product then a difference, no FMA), Q3_K dl (q - 4), so the two give the same floats.
// A sub-block's four low-bit bytes of row l in every lane, lane k shifted by 2k: byte i of lane k is then value 4k + i
// (value order), and Q3_K's four high-bit bytes the same way, by k + 4 (s % 2).
template <int T>
FOCAL_AVX2 void dequant_panel_row_k23_avx2(const uint8_t* P, int l, int64_t nb, float* dst) {
  constexpr size_t kPbb = (size_t)kPanelRows * kernel_block_bytes(T);
  const __m128i m3 = _mm_set1_epi8(0x03), m1 = _mm_set1_epi8(0x01), shifts = _mm_setr_epi32(0, 2, 4, 6);
  for (int64_t j = 0; j < nb; ++j, P += kPbb) {
    const float d = f16c_at(P + K23Panel::kD + 2 * l);
    const uint8_t* sw = P + K23Panel::scales(T) + 4 * l;  // byte k of the stored scales at sw[64 (k / 4) + k % 4]
    auto sr = [sw](int k) { return (int)sw[64 * (k / 4) + k % 4]; };
    for (int s = 0; s < 16; ++s, dst += 16) {
      int32_t q4;
      std::memcpy(&q4, P + K23Panel::quants(T) + 64 * s + 4 * l, 4);
      __m128i q = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(q4), shifts), m3);
      __m256 dl, ml = _mm256_setzero_ps();
      if constexpr (T == kQ2_K) {
        const float dmin = f16c_at(P + K23Panel::kDmin + 2 * l);
        dl = _mm256_set1_ps(d * (float)(sr(s) & 0xF));
        ml = _mm256_set1_ps(dmin * (float)(sr(s) >> 4));
      } else {
        const int lo = s < 8 ? sr(s) & 0xF : sr(s - 8) >> 4, hi = (sr(8 + s % 4) >> (2 * (s / 4))) & 3;
        dl = _mm256_set1_ps(d * (float)((lo | (hi << 4)) - 32));
        int32_t h4;
        std::memcpy(&h4, P + K23Panel::kHigh + 64 * (s / 2) + 4 * l, 4);
        const __m128i hs = _mm_add_epi32(_mm_setr_epi32(0, 1, 2, 3), _mm_set1_epi32(4 * (s % 2)));
        const __m128i h = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(h4), hs), m1);
        q = _mm_sub_epi8(_mm_or_si128(q, _mm_slli_epi16(h, 2)), _mm_set1_epi8(4));  // q - 4, signed
      }
      for (int half = 0; half < 2; ++half) {
        const __m128i part = half ? _mm_srli_si128(q, 8) : q;
        const __m256 qf = _mm256_cvtepi32_ps(T == kQ2_K ? _mm256_cvtepu8_epi32(part) : _mm256_cvtepi8_epi32(part));
        _mm256_storeu_ps(dst + 8 * half, _mm256_sub_ps(_mm256_mul_ps(dl, qf), ml));
      }
    }
  }
}
template void dequant_panel_row_k23_avx2<kQ2_K>(const uint8_t*, int, int64_t, float*);
template void dequant_panel_row_k23_avx2<kQ3_K>(const uint8_t*, int, int64_t, float*);

}  // namespace focal::ops
