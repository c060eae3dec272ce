// The hand-written AVX2 + FMA + F16C row kernels (quant_types.h): fused dequantise-and-dot for Q4_0, Q4_1, Q8_0,
// Q4_K, Q6_K, F16 and BF16 with 1..kFusedMaxRows rows of x, the split of x into integer digits, and the decode of
// Q4_0, Q4_1 and the K formats with x in those digits, row by row. The panel kernels of the same level are in
// quant_avx2_panels.cpp. They run only where quant_cpu.cpp found AVX2, FMA and F16C.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "focal_kernels/quant_blocks.h"
#include "focal_kernels/shared_math.h"
#include "quant_simd.h"
#include "quant_types.h"
#include "target_isa.h"

namespace focal::ops {

namespace {

using qblocks::scale_min_k4;  // Q4_K: eight 6-bit (scale, min) pairs packed into 12 bytes

// ---- fused kernels, x in fp32 ----
// Q6_K: each of a block's eight 32-value units is decoded to 32 int8 lanes q (6-bit quant - 32) and two scales s_lo /
// s_hi (values 0..15 and 16..31, each 16 with its own int8 scale), so that value_j = s * q_j and the dot with x is
// s_lo * sum_{j<16} q_j x_j + s_hi * sum_{j>=16} q_j x_j.
struct Unit {
  __m256i q;  // 32 int8
  float s_lo, s_hi;
};

// Unit u (0..7) of the Q6_K block at b.
FOCAL_AVX2 inline Unit decode_q6k_unit(const uint8_t* b, int u) {
  Unit r;
  {
    const int h = u / 4, k = u % 4;
    const uint8_t* ql = b + 64 * h + (k & 1) * 32;
    const uint8_t* qh = b + 128 + 32 * h;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * h + 2 * k;
    const float d = f16c_at(b + 208);
    const __m256i lo4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
    const __m256i lo = _mm256_and_si256(k >= 2 ? _mm256_srli_epi16(lo4, 4) : lo4, m4);
    const __m256i h2 = _mm256_and_si256(_mm256_srli_epi16(hi, 2 * k), m2);
    r.q = _mm256_sub_epi8(_mm256_or_si256(lo, _mm256_slli_epi16(h2, 4)), _mm256_set1_epi8(32));
    r.s_lo = d * sc[0];
    r.s_hi = d * sc[1];
  }
  return r;
}

FOCAL_AVX2 inline __m256 i8x8_to_ps(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

// One 32-value unit (number un of the row) dotted with M rows of x into acc[i][0] (values 0..15) and acc[i][1]
// (16..31).
template <int M>
FOCAL_AVX2 inline __attribute__((always_inline)) void unit_step(const uint8_t* row, int64_t un, const float* x,
                                                                int64_t cols, __m256 (&acc)[M][2]) {
  const Unit u = decode_q6k_unit(row + (un / 8) * qblocks::block_bytes(kQ6_K), (int)(un % 8));
  const __m128i q01 = _mm256_castsi256_si128(u.q), q23 = _mm256_extracti128_si256(u.q, 1);
  const __m256 w0 = i8x8_to_ps(q01), w1 = i8x8_to_ps(_mm_srli_si128(q01, 8));
  const __m256 w2 = i8x8_to_ps(q23), w3 = i8x8_to_ps(_mm_srli_si128(q23, 8));
  const __m256 slo = _mm256_set1_ps(u.s_lo), shi = _mm256_set1_ps(u.s_hi);
  for (int i = 0; i < M; ++i) {
    const float* xi = x + (size_t)i * cols + un * 32;
    const __m256 a = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xi), _mm256_mul_ps(w1, _mm256_loadu_ps(xi + 8)));
    const __m256 b = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xi + 16), _mm256_mul_ps(w3, _mm256_loadu_ps(xi + 24)));
    acc[i][0] = _mm256_fmadd_ps(slo, a, acc[i][0]);
    acc[i][1] = _mm256_fmadd_ps(shi, b, acc[i][1]);
  }
}

// Q6_K rows r0..r1 of y[M, rows] (xsum16 unused: the row kernels share one signature). Units alternate between two
// sets of accumulators, so four FMA chains run side by side.
template <int T, int M>
FOCAL_AVX2 void fused_rows_q6k(const float* x, const float* /*xsum16*/, const QMatrix& w, float* y, int64_t r0,
                               int64_t r1) {
  const int64_t cols = w.cols, n_units = cols / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    prefetch_row_ahead(row, w.row_bytes);
    __m256 acc_a[M][2], acc_b[M][2];
    for (int i = 0; i < M; ++i)
      for (int k = 0; k < 2; ++k) acc_a[i][k] = acc_b[i][k] = _mm256_setzero_ps();
    int64_t un = 0;
    for (; un + 2 <= n_units; un += 2) {
      unit_step<M>(row, un, x, cols, acc_a);
      unit_step<M>(row, un + 1, x, cols, acc_b);
    }
    if (un < n_units) unit_step<M>(row, un, x, cols, acc_a);
    for (int i = 0; i < M; ++i)
      y[(size_t)i * w.rows + r] =
          hsum8(_mm256_add_ps(_mm256_add_ps(acc_a[i][0], acc_a[i][1]), _mm256_add_ps(acc_b[i][0], acc_b[i][1])));
  }
}

// Q4_K rows: each 256-value block's scales and mins are unpacked once; each 32-byte load feeds two sub-blocks (low
// and high nibbles) with their own accumulators.
template <int T, int M>
FOCAL_AVX2 void fused_rows_q4k(const float* x, const float* xsum16, const QMatrix& w, float* y, int64_t r0,
                               int64_t r1) {
  constexpr int kBytes = qblocks::block_bytes(kQ4_K);
  const int64_t cols = w.cols, n_blocks = cols / 256, n16 = cols / 16;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    prefetch_row_ahead(row, w.row_bytes);
    __m256 acc[M][4];
    float off[M];
    for (int i = 0; i < M; ++i) {
      off[i] = 0.0f;
      for (int k = 0; k < 4; ++k) acc[i][k] = _mm256_setzero_ps();
    }
    for (int64_t blk = 0; blk < n_blocks; ++blk) {
      const uint8_t* b = row + blk * kBytes;
      const float d = f16c_at(b), dmin = f16c_at(b + 2);
      alignas(32) float sc[8], mn[8];
      for (int j = 0; j < 8; ++j) {
        int a, c;
        scale_min_k4(j, b + 4, &a, &c);
        sc[j] = d * (float)a;
        mn[j] = dmin * (float)c;
      }
      for (int i = 0; i < M; ++i) {  // the mins: sum_j mn_j * (x sum over sub-block j)
        const float* xs = xsum16 + (size_t)i * n16 + blk * 16;
        __m256 xs32 =
            _mm256_hadd_ps(_mm256_loadu_ps(xs), _mm256_loadu_ps(xs + 8));  // pairs, lane order 0 1 4 5 2 3 6 7
        xs32 = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(xs32), 0xD8));  // -> 0..7
        off[i] -= hsum8(_mm256_mul_ps(_mm256_load_ps(mn), xs32));
      }
      for (int p = 0; p < 4; ++p) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 + 32 * p));
        const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        const __m128i l0 = _mm256_castsi256_si128(lo), l1 = _mm256_extracti128_si256(lo, 1);
        const __m128i h0 = _mm256_castsi256_si128(hi), h1 = _mm256_extracti128_si256(hi, 1);
        const __m256 a0 = i8x8_to_ps(l0), a1 = i8x8_to_ps(_mm_srli_si128(l0, 8));
        const __m256 a2 = i8x8_to_ps(l1), a3 = i8x8_to_ps(_mm_srli_si128(l1, 8));
        const __m256 b0 = i8x8_to_ps(h0), b1 = i8x8_to_ps(_mm_srli_si128(h0, 8));
        const __m256 b2 = i8x8_to_ps(h1), b3 = i8x8_to_ps(_mm_srli_si128(h1, 8));
        const __m256 s_lo = _mm256_set1_ps(sc[2 * p]), s_hi = _mm256_set1_ps(sc[2 * p + 1]);
        for (int i = 0; i < M; ++i) {
          const float* xl = x + (size_t)i * cols + blk * 256 + 64 * p;  // sub-block 2p, then 2p + 1
          const __m256 sl = _mm256_fmadd_ps(a0, _mm256_loadu_ps(xl), _mm256_mul_ps(a1, _mm256_loadu_ps(xl + 8)));
          const __m256 sl2 = _mm256_fmadd_ps(a2, _mm256_loadu_ps(xl + 16), _mm256_mul_ps(a3, _mm256_loadu_ps(xl + 24)));
          const __m256 sh = _mm256_fmadd_ps(b0, _mm256_loadu_ps(xl + 32), _mm256_mul_ps(b1, _mm256_loadu_ps(xl + 40)));
          const __m256 sh2 = _mm256_fmadd_ps(b2, _mm256_loadu_ps(xl + 48), _mm256_mul_ps(b3, _mm256_loadu_ps(xl + 56)));
          acc[i][0] = _mm256_fmadd_ps(s_lo, sl, acc[i][0]);
          acc[i][1] = _mm256_fmadd_ps(s_lo, sl2, acc[i][1]);
          acc[i][2] = _mm256_fmadd_ps(s_hi, sh, acc[i][2]);
          acc[i][3] = _mm256_fmadd_ps(s_hi, sh2, acc[i][3]);
        }
      }
    }
    for (int i = 0; i < M; ++i)
      y[(size_t)i * w.rows + r] =
          hsum8(_mm256_add_ps(_mm256_add_ps(acc[i][0], acc[i][1]), _mm256_add_ps(acc[i][2], acc[i][3]))) + off[i];
  }
}

template <int T>
FOCAL_AVX2 inline __m256 widen16(const uint8_t* p) {  // eight fp16 / bf16 values at p as floats
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return T == kQF16 ? _mm256_cvtph_ps(h) : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// fp16 / bf16 rows (every level's decode of 16-bit weights): a line of the row (32 values) a step, widened in
// registers into two accumulators per row of x, its prefetch kPrefetchAhead ahead. prefetch_row_ahead's burst of a
// whole row's lines at each row start (128 for 4096 values, 448 for 14336) and one accumulator's FMA chain held the
// 8B shape's bf16 decode at ~14 GB/s (Xeon, 2026-12-05, 4 layers, both levels: 4.84-5.06 -> 9.12-9.64 tok/s,
// ~26 GB/s: this VM's read rate).
template <int T, int M>
FOCAL_AVX2 void fused_rows_16(const float* x, const float* /*xsum16*/, const QMatrix& w, float* y, int64_t r0,
                              int64_t r1) {
  const int64_t cols = w.cols;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    __m256 acc[M][2];
    for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 32 <= cols; c += 32) {  // one line of the row a step, its prefetch kPrefetchAhead ahead
      prefetch_stream(row + 2 * c + kPrefetchAhead);
      for (int u = 0; u < 32; u += 8) {
        const __m256 wv = widen16<T>(row + 2 * (c + u));
        for (int i = 0; i < M; ++i)
          acc[i][u / 8 % 2] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + (size_t)i * cols + c + u), acc[i][u / 8 % 2]);
      }
    }
    for (; c + 8 <= cols; c += 8) {
      const __m256 wv = widen16<T>(row + 2 * c);
      for (int i = 0; i < M; ++i) acc[i][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + (size_t)i * cols + c), acc[i][0]);
    }
    for (int i = 0; i < M; ++i) {
      float s = hsum8(_mm256_add_ps(acc[i][0], acc[i][1]));
      for (int64_t cc = c; cc < cols; ++cc) {
        uint16_t v;
        std::memcpy(&v, row + 2 * cc, 2);
        s += (T == kQF16 ? math::half_bits_to_float(v) : math::bf16_bits_to_float(v)) * x[(size_t)i * cols + cc];
      }
      y[(size_t)i * w.rows + r] = s;
    }
  }
}

// The 32-value formats Q4_0, Q4_1, Q8_0: each block's quants are widened straight from memory (nibbles split in
// one 16-byte register), two blocks per step with their own accumulators. Each step prefetches the lines
// kPrefetchAhead past its pair of blocks: a steady stream, where prefetch_row_ahead's burst of a whole row's lines
// at each row start (238 for a Q8_0 row of 14336 values) left this kernel waiting on memory (Xeon, 2026-12-05, Q8_0
// at FOCAL_QUANT_ISA=avx2: the product alone streamed 15.1-15.4 -> 17.6-18.2 GB/s, the 8B Q8_0 decode 2.1 -> 3.0
// tok/s; 2 and 8 KiB ahead measured no better).
template <int T, int M>
FOCAL_AVX2 inline __attribute__((always_inline)) void block32_step(const uint8_t* b, const float* x, int64_t cols,
                                                                   int64_t c, __m256 (&acc)[M][2], float* off,
                                                                   const float* xsum16, int64_t n16) {
  __m256 w0, w1, w2, w3;
  float d, m = 0.0f;
  if constexpr (T == kQ8_0) {
    d = f16c_at(b);
    const uint8_t* q = b + 2;
    w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q))));
    w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 8))));
    w2 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 16))));
    w3 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 24))));
  } else {
    d = f16c_at(b);
    if constexpr (T == kQ4_1) m = f16c_at(b + 2);
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + (T == kQ4_1 ? 4 : 2)));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m128i lo = _mm_and_si128(v, m4), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
    if constexpr (T == kQ4_0) {
      lo = _mm_sub_epi8(lo, _mm_set1_epi8(8));
      hi = _mm_sub_epi8(hi, _mm_set1_epi8(8));
    }
    w0 = i8x8_to_ps(lo);
    w1 = i8x8_to_ps(_mm_srli_si128(lo, 8));
    w2 = i8x8_to_ps(hi);
    w3 = i8x8_to_ps(_mm_srli_si128(hi, 8));
  }
  const __m256 dv = _mm256_set1_ps(d);
  for (int i = 0; i < M; ++i) {
    const float* xi = x + (size_t)i * cols + c;
    const __m256 a = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xi), _mm256_mul_ps(w1, _mm256_loadu_ps(xi + 8)));
    const __m256 bq = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xi + 16), _mm256_mul_ps(w3, _mm256_loadu_ps(xi + 24)));
    acc[i][0] = _mm256_fmadd_ps(dv, a, acc[i][0]);
    acc[i][1] = _mm256_fmadd_ps(dv, bq, acc[i][1]);
    if constexpr (T == kQ4_1) {
      const float* xs = xsum16 + (size_t)i * n16 + c / 16;
      off[i] += m * (xs[0] + xs[1]);
    }
  }
}

template <int T, int M>
FOCAL_AVX2 void fused_rows_b32(const float* x, const float* xsum16, const QMatrix& w, float* y, int64_t r0,
                               int64_t r1) {
  constexpr int kBytes = qblocks::block_bytes(T);
  const int64_t cols = w.cols, nb = cols / 32, n16 = cols / 16;
  constexpr int kLines = (2 * kBytes + 63) / 64;  // cache lines a pair of blocks spans at most
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    __m256 acc_a[M][2], acc_b[M][2];
    float off_a[M], off_b[M];
    for (int i = 0; i < M; ++i) {
      off_a[i] = off_b[i] = 0.0f;
      for (int k = 0; k < 2; ++k) acc_a[i][k] = acc_b[i][k] = _mm256_setzero_ps();
    }
    int64_t blk = 0;
    for (; blk + 2 <= nb; blk += 2) {
      const char* ahead = reinterpret_cast<const char*>(row) + blk * kBytes + kPrefetchAhead;
      for (int l = 0; l < kLines; ++l) prefetch_stream(ahead + 64 * l);
      block32_step<T, M>(row + blk * kBytes, x, cols, blk * 32, acc_a, off_a, xsum16, n16);
      block32_step<T, M>(row + (blk + 1) * kBytes, x, cols, (blk + 1) * 32, acc_b, off_b, xsum16, n16);
    }
    if (blk < nb) block32_step<T, M>(row + blk * kBytes, x, cols, blk * 32, acc_a, off_a, xsum16, n16);
    for (int i = 0; i < M; ++i)
      y[(size_t)i * w.rows + r] =
          hsum8(_mm256_add_ps(_mm256_add_ps(acc_a[i][0], acc_a[i][1]), _mm256_add_ps(acc_b[i][0], acc_b[i][1]))) +
          (off_a[i] + off_b[i]);
  }
}

// The kernel of type T for M rows of x.
template <int T, int M>
constexpr RowsFn kernel() {
  if constexpr (T == kQ4_K)
    return &fused_rows_q4k<T, M>;
  else if constexpr (T == kQ6_K)
    return &fused_rows_q6k<T, M>;
  else if constexpr (T == kQF16 || T == kQBF16)
    return &fused_rows_16<T, M>;
  else
    return &fused_rows_b32<T, M>;  // Q4_0, Q4_1, Q8_0
}

}  // namespace

template <int T>
RowsFn avx2_rows(int m) {
  static const RowsFn kFns[8] = {kernel<T, 1>(), kernel<T, 2>(), kernel<T, 3>(), kernel<T, 4>(),
                                 kernel<T, 5>(), kernel<T, 6>(), kernel<T, 7>(), kernel<T, 8>()};
  return kFns[std::min(std::max(m, 1), 8) - 1];
}
template RowsFn avx2_rows<kQ4_0>(int);
template RowsFn avx2_rows<kQ4_1>(int);
template RowsFn avx2_rows<kQ8_0>(int);
template RowsFn avx2_rows<kQ4_K>(int);
template RowsFn avx2_rows<kQ6_K>(int);
template RowsFn avx2_rows<kQF16>(int);
template RowsFn avx2_rows<kQBF16>(int);

// ---- the split of x into digits ----

// digits::split: each group's digits and the block sums (quant_digits.h), 8 values per step: the same digits as
// split_groups_avx512 (the same product x * (1 / s), rounded to nearest even), the block sums in double.
FOCAL_AVX2 void split_groups_avx2(const float* x, int64_t cols, int group, digits::Order order, digits::XDigits* xd) {
  const int64_t groups = (cols + group - 1) / group;
  const __m256i lim = _mm256_set1_epi32(127 * 65536), neg_lim = _mm256_set1_epi32(-127 * 65536);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  // 16 int32 digits (two vectors, values 0-7 and 8-15) as 16 int8 in order; every digit fits int8, so the saturating
  // packs are exact
  const auto pack16 = [](__m256i a, __m256i b) FOCAL_AVX2 {
    const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);  // 16 int16, in order
    return _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
  };
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t c0 = g * group, n = std::min<int64_t>(group, cols - c0);  // n: a multiple of 32
    __m256 mx = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j += 8) mx = _mm256_max_ps(mx, _mm256_and_ps(_mm256_loadu_ps(x + c0 + j), abs_mask));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float m = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    const float s = m > 0.0f ? m / (127.0f * 65536.0f) : 1.0f;
    xd->scale[(size_t)g] = s;
    const __m256 inv = _mm256_set1_ps(1.0f / s);
    for (int64_t j = 0; j < n; j += 16) {
      __m256i d0[2], d1[2], d2[2];
      for (int h = 0; h < 2; ++h) {
        __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + c0 + j + 8 * h), inv));
        v = _mm256_max_epi32(_mm256_min_epi32(v, lim), neg_lim);
        d0[h] = _mm256_srai_epi32(_mm256_slli_epi32(v, 24), 24);
        const __m256i v1 = _mm256_srai_epi32(_mm256_sub_epi32(v, d0[h]), 8);
        d1[h] = _mm256_srai_epi32(_mm256_slli_epi32(v1, 24), 24);
        d2[h] = _mm256_srai_epi32(_mm256_sub_epi32(v1, d1[h]), 8);
      }
      const int64_t at = c0 + digits::placed(order, j);  // 16 values stay together in either order
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xd->d[0].data() + at), pack16(d0[0], d0[1]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xd->d[1].data() + at), pack16(d1[0], d1[1]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xd->d[2].data() + at), pack16(d2[0], d2[1]));
    }
  }
  for (int64_t b = 0; b < cols / 32; ++b) {
    double t[2];
    for (int h = 0; h < 2; ++h) {
      const __m256 v = _mm256_loadu_ps(x + b * 32 + 16 * h), u = _mm256_loadu_ps(x + b * 32 + 16 * h + 8);
      const __m256d p = _mm256_add_pd(
          _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1))),
          _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(u)), _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1))));
      const __m128d q = _mm_add_pd(_mm256_castpd256_pd128(p), _mm256_extractf128_pd(p, 1));
      t[h] = _mm_cvtsd_f64(_mm_add_sd(q, _mm_unpackhi_pd(q, q)));
    }
    xd->sum16[(size_t)(2 * b)] = (float)t[0];
    xd->sum16[(size_t)(2 * b + 1)] = (float)t[1];
    xd->sum32[(size_t)b] = (float)(t[0] + t[1]);
  }
}

// ---- Q4_0 and Q4_1, x in digits ----
// Per pair of blocks A, B (x's digits of group 64 in nibble-pair order, quant_digits.h): one 32-byte register holds
// A's and B's 16 quant bytes; its low nibbles meet digits 0..31 of the pair, its high nibbles 32..63. Per digit two
// vpmaddubsw (pairs at most 2 * 15 * 128) summed in int16 (at most 7680) and widened by vpmaddwd: lanes 0-3 hold A's
// sums, 4-7 B's, each at most 8 * 15 * 128 = 15360, so the three digits chained as d2 65536 + d1 256 + d0 (< 2^30)
// stay exact in int32 and each lane becomes a float once. Q4_0's -8 and Q4_1's min come back through the blocks' fp32
// sums of x. About half the instructions per value of the fp32 row kernel (avx2_rows), which decode was bound by.

// One digit's products with a pair's nibbles: lanes 0-3 A's sums, 4-7 B's (xk: the pair's 64 digits).
FOCAL_AVX2 inline __m256i pair_digit_dot(__m256i lo, __m256i hi, const int8_t* xk, __m256i ones) {
  const __m256i s =
      _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xk))),
                       _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xk + 32))));
  return _mm256_madd_epi16(s, ones);
}

template <int T>
FOCAL_AVX2 void b32_digit_rows_avx2(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t r0, int64_t r1) {
  static_assert(T == kQ4_0 || T == kQ4_1, "Q4_0 and Q4_1 only (Q8_0's pairs would saturate vpmaddubsw)");
  constexpr int kBytes = qblocks::block_bytes(T), kQ = T == kQ4_1 ? 4 : 2;
  const int64_t nb = w.cols / 32, n_pairs = (nb + 1) / 2;
  const int8_t *x0 = xd.d[0].data(), *x1 = xd.d[1].data(), *x2 = xd.d[2].data();
  const float *scale = xd.scale.data(), *sum32 = xd.sum32.data();
  const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  // d_A into lanes 0-3 and d_B into 4-7 from the widened scales [d_A, d_B] (Q4_1: [d_A, m_A, d_B, m_B])
  const __m256i lane_scale =
      T == kQ4_1 ? _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2) : _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    prefetch_row_ahead(row, w.row_bytes);
    __m256 acc = _mm256_setzero_ps();
    __m128 off = _mm_setzero_ps();  // lanes 0, 1 (Q4_1: 1, 3) collect c_A S_A, c_B S_B
    for (int64_t pr = 0; pr < n_pairs; ++pr) {
      const bool has_b = 2 * pr + 1 < nb;  // a lone last block pairs with itself; its B digits and sums are zero
      const uint8_t* a = row + 2 * pr * kBytes;
      const uint8_t* b = has_b ? a + kBytes : a;
      const __m256i v =
          _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + kQ))),
                                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kQ)), 1);
      const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      const int64_t c = pr * 64;
      __m256i t = pair_digit_dot(lo, hi, x2 + c, ones);
      t = _mm256_add_epi32(_mm256_slli_epi32(t, 8), pair_digit_dot(lo, hi, x1 + c, ones));
      t = _mm256_add_epi32(_mm256_slli_epi32(t, 8), pair_digit_dot(lo, hi, x0 + c, ones));
      const __m128 dm = pair_scales<T>(a, b, has_b);
      const __m256 dv = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(dm), lane_scale);
      acc = _mm256_fmadd_ps(_mm256_mul_ps(dv, _mm256_set1_ps(scale[pr])), _mm256_cvtepi32_ps(t), acc);
      off = pair_offsets<T>(dm, sum32[2 * pr], sum32[2 * pr + 1], off);
    }
    y[r] = hsum8(acc) + hsum4(off);
  }
}
template void b32_digit_rows_avx2<kQ4_0>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void b32_digit_rows_avx2<kQ4_1>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);

// ---- the K formats, x in digits ----
// Each 32-value unit's dot with the unsigned quants (Q2_K 0..3, Q3_K 0..7, Q4_K 0..15, Q5_K 0..31, Q6_K 0..63) is
// three exact integer products (vpmaddubsw: pairs at most 2 * 63 * 128, no saturation), weighted by the integer scale
// of its sub-block (vpmaddwd: Q4_K / Q5_K's 6-bit scale per 32 values; per 16 Q6_K's int8 scale, Q3_K's 6-bit scale
// minus 32, Q2_K's 4-bit scale) and summed over the block in int32 (at most 8 * 2 * 2 * 63 * 128 * 128 < 2^26 per
// lane). Only the block's three sums become floats. The offsets come back through fp32 sums of x: Q4_K / Q5_K's mins
// over each 32 values; over each 16 Q6_K's -32 d sc, Q3_K's -4 d sc and Q2_K's -dmin mn. Unit u of Q2_K / Q3_K is
// bits 2 (u % 4) .. + 1 of the 32 bytes qs + 32 (u / 4), Q3_K plus 4 where bit u of hmask[l] is set. Each block
// prefetches its lines kPrefetchAhead ahead (a steady stream, as fused_rows_b32; the row's burst at its start measured
// 10-45 % slower streamed on the Xeon, 2026-12-05: Q2_K 9.8-10.1 -> 11.7-11.8 GB/s, Q3_K 7.3-9.3 -> 9.7-11.7, Q4_K
// as stored 12.9 -> 14.3, Q6_K as stored 13.8 -> 19.6-21.3).

template <int T>
FOCAL_AVX2 void kquant_digit_rows_avx2(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t r0, int64_t r1) {
  constexpr int kBytes = kernel_block_bytes(T);
  constexpr bool kQ6 = T == kQ6_K, kLow2 = T == kQ2_K || T == kQ3_K;  // 2-bit low quants
  constexpr bool k16 = kQ6 || kLow2;                                  // a scale per 16 values
  constexpr KBlockLayout kL = k_block_layout(T);
  const int64_t n_blocks = w.cols / 256;
  const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03);
  const __m256i high = _mm256_set1_epi8(T == kQ3_K ? 4 : 16);  // Q5_K / Q3_K: what the high bit adds
  const int8_t *x0 = xd.d[0].data(), *x1 = xd.d[1].data(), *x2 = xd.d[2].data();
  // The block's integer scales as int16 lanes, both 128-bit halves alike (a scale per 16: scales 0-7, or 8-15, per
  // half); pick[u] is the vpshufb control that spreads unit u's scale over its lanes (per 16: scale 2u in the low
  // half, 2u + 1 in the high half), so a unit's scale vector is one shuffle, not a scalar broadcast.
  __m256i pick[8];
  for (int u = 0; u < 8; ++u) {
    const int lo = k16 ? (2 * u) % 8 : u, hi = k16 ? (2 * u + 1) % 8 : u;
    pick[u] =
        _mm256_set_m128i(_mm_set1_epi16((short)(0x0100 + 0x0202 * hi)), _mm_set1_epi16((short)(0x0100 + 0x0202 * lo)));
  }
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    __m256 acc = _mm256_setzero_ps();
    __m256 off = _mm256_setzero_ps();  // the offsets (above)
    for (int64_t blk = 0; blk < n_blocks; ++blk) {
      const uint8_t* b = row + blk * kBytes;
      for (int l = 0; l < kBytes; l += 64) prefetch_stream(b + kPrefetchAhead + l);
      __m256i sc_lo, sc_hi;  // units 0-3 and 4-7 read their scales here (Q4_K / Q5_K: the same register)
      if constexpr (k16) {
        __m128i sc8, om8;  // the 16 integer scales (int8) and what multiplies each group's sum of x, before its factor
        float of;          // that factor
        if constexpr (T == kQ2_K) {
          const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kL.scales));  // scale | min << 4
          sc8 = _mm_and_si128(sm, _mm_set1_epi8(0x0F));
          om8 = _mm_and_si128(_mm_srli_epi16(sm, 4), _mm_set1_epi8(0x0F));
          of = -f16c_at(b + kL.dmin);
        } else {
          sc8 = kQ6 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + kL.scales)) : k3_scales(b + kL.scales);
          om8 = sc8;
          of = (kQ6 ? -32.0f : -4.0f) * f16c_at(b + kL.d);
        }
        const __m256i s16 = _mm256_cvtepi8_epi16(sc8);
        sc_lo = _mm256_permute2x128_si256(s16, s16, 0x00);
        sc_hi = _mm256_permute2x128_si256(s16, s16, 0x11);
        const __m256 ofv = _mm256_set1_ps(of);
        const float* xs = xd.sum16.data() + blk * 16;
        off = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(om8)), ofv), _mm256_loadu_ps(xs),
                              off);
        off = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(om8, 8))), ofv),
                              _mm256_loadu_ps(xs + 8), off);
      } else {
        uint64_t sc8, mn8;
        k4_scales_mins(b + kL.scales, &sc8, &mn8);
        sc_lo = sc_hi = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)sc8)));
        const __m256 mnf = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mn8)));
        off = _mm256_fmadd_ps(_mm256_mul_ps(mnf, _mm256_set1_ps(-f16c_at(b + kL.dmin))),
                              _mm256_loadu_ps(xd.sum32.data() + blk * 8), off);
      }
      __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256(), a2 = _mm256_setzero_si256();
      for (int u = 0; u < 8; ++u) {
        __m256i q;
        if constexpr (kQ6) {
          const int h = u / 4, g = u % 4;
          const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kL.qs + 64 * h + 32 * (g & 1)));
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kL.high + 32 * h));
          q = _mm256_or_si256(_mm256_and_si256(g >= 2 ? _mm256_srli_epi16(ql, 4) : ql, m4),
                              _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), m3), 4));
        } else if constexpr (kLow2) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kL.qs + 32 * (u / 4)));
          q = _mm256_and_si256(_mm256_srli_epi16(v, 2 * (u % 4)), m3);
        } else {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kL.qs + 32 * (u / 2)));
          q = _mm256_and_si256((u & 1) ? _mm256_srli_epi16(v, 4) : v, m4);
        }
        if constexpr (T == kQ5_K || T == kQ3_K) {  // + 16 (+ 4) where bit u of qh[l] (hmask[l]) is set
          const __m256i bit = _mm256_set1_epi8((char)(1 << u));
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + kL.high));
          q = _mm256_add_epi8(q, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit), bit), high));
        }
        const __m256i scv = _mm256_shuffle_epi8(u < 4 ? sc_lo : sc_hi, pick[u]);
        const int64_t c = blk * 256 + 32 * u;
        const __m256i t0 = _mm256_maddubs_epi16(q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x0 + c)));
        const __m256i t1 = _mm256_maddubs_epi16(q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x1 + c)));
        const __m256i t2 = _mm256_maddubs_epi16(q, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x2 + c)));
        a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(t0, scv));
        a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(t1, scv));
        a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(t2, scv));
        in_register(a0);
        in_register(a1);
        in_register(a2);
      }
      const float d = f16c_at(b + kL.d);
      const __m256 f =
          _mm256_fmadd_ps(_mm256_cvtepi32_ps(a2), _mm256_set1_ps(65536.0f),
                          _mm256_fmadd_ps(_mm256_cvtepi32_ps(a1), _mm256_set1_ps(256.0f), _mm256_cvtepi32_ps(a0)));
      acc = _mm256_fmadd_ps(_mm256_set1_ps(d * xd.scale[(size_t)blk]), f, acc);
    }
    y[r] = hsum8(acc) + hsum8(off);
  }
}
template void kquant_digit_rows_avx2<kQ2_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void kquant_digit_rows_avx2<kQ3_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void kquant_digit_rows_avx2<kQ4_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void kquant_digit_rows_avx2<kQ5_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);
template void kquant_digit_rows_avx2<kQ6_K>(const digits::XDigits&, const QMatrix&, float*, int64_t, int64_t);

}  // namespace focal::ops
