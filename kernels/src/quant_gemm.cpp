// Prefill's products with quantised weights, y[m, n] = x[m, k] . w^T for more rows of x than the fused decode kernels
// take (quant_cpu.cpp: matmul_xwt_q): fp32 multiply-adds with fp32 sums, as the dequantise-then-sgemm path computes
// them, without its round trips. GotoBLAS's loop order: per pass of kMc rows of x and chunk of kKc columns, the
// threads pack the chunk of x into k-major blocks of kMr rows (it stays in L2); then each thread dequantises its
// weight rows kNr at a time into a k-major block [kKc][kNr] that stays in L1 (straight from the panels, 16 rows a
// vector, for Q4_0, Q4_1, Q8_0 and Q4_K .. Q6_K; else row by row, then transposed) and multiplies every block of x with
// it in a register tile of kMr x kNr sums, added into y. Before it, every fp32 tile of 512 weight rows was written to
// memory, packed again by OpenBLAS (and x with it, once per tile), then multiplied: ~35 % of an 8B prefill at
// T = 128 went to those copies. AVX-512 (kMr = 12 rows of x by kNr = 32 weight rows, 24 zmm sums) and AVX2 + FMA
// (6 by 16, 12 ymm sums). The default where the CPU has AVX2; FOCAL_BLOCKED_PREFILL=0 (quant.h: set_blocked_prefill)
// goes back to the sgemm path.
#include <immintrin.h>
#include <omp.h>

// GCC 12 reports the AVX-512 headers' own _mm512_undefined_* placeholders as uninitialised once they are inlined here
// (as in quant_avx512.cpp); the lanes they stand for are never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <algorithm>
#include <vector>

#include "quant_types.h"
#include "target_isa.h"

namespace focal::ops {

namespace {

constexpr int kKc = 256;  // columns per chunk: one K-format block, 32 KiB of an AVX-512 weight block
constexpr int kMc = 480;  // rows of x per pass: their packed chunk (480 KiB) stays in L2 while the weights pass

// tmp[r][kKc] (r < nr) = rows j0 .. j0 + nr - 1 of w, columns c0 .. c0 + kc - 1 (block-aligned); rows nr .. rows - 1
// zero.
void dequant_chunk(const QMatrix& w, int64_t j0, int nr, int rows, int64_t c0, int kc, float* tmp) {
  const QTypeInfo* q = qtype_info(w.type);
  const int64_t b0 = c0 / q->block_values, nb = kc / q->block_values;
  for (int r = 0; r < nr; ++r) {
    float* dst = tmp + (size_t)r * kKc;
    if (w.panels)
      dequant_panel_blocks(w, j0 + r, b0, nb, dst);
    else
      q->dequant(w.row(j0 + r) + (size_t)b0 * (size_t)q->block_bytes, dst, kc);
  }
  for (int r = nr; r < rows; ++r) std::fill(tmp + (size_t)r * kKc, tmp + (size_t)r * kKc + kc, 0.0f);
}

// xp[kk][i] = x[i][kk] (row stride ld) for kk < kc and the mr rows of one tile; rows at or past `rows` zero.
void pack_x(const float* x, int rows, int64_t ld, int kc, int mr, float* xp) {
  for (int i = 0; i < mr; ++i) {
    if (i < rows) {
      const float* src = x + (size_t)i * ld;
      for (int kk = 0; kk < kc; ++kk) xp[(size_t)kk * mr + i] = src[kk];
    } else {
      for (int kk = 0; kk < kc; ++kk) xp[(size_t)kk * mr + i] = 0.0f;
    }
  }
}

// Per-thread buffers, grown, never shrunk.
struct Scratch {
  std::vector<float> tmp, block;
};
thread_local Scratch t_scratch;
thread_local std::vector<float> t_xp;

float* aligned_in(std::vector<float>& v, size_t floats) {  // 64-byte aligned span of `floats`
  if (v.size() < floats + 16) v.resize(floats + 16);
  const uintptr_t p = reinterpret_cast<uintptr_t>(v.data());
  return v.data() + ((64 - p % 64) % 64) / sizeof(float);
}

// ---- the k-major dequantisers, once for both widths (quant_kmajor.inc) ----
// The vector operations they use, 16 and 8 floats (or 32-bit lanes) a vector.
struct Lanes16 {
  static constexpr int kLanes = 16;
  using I = __m512i;
  using F = __m512;
  FOCAL_AVX512 static I load(const uint8_t* p) { return _mm512_loadu_si512(p); }
  FOCAL_AVX512 static F half(const uint8_t* p) {  // 16 fp16 as floats
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  FOCAL_AVX512 static I set1(int v) { return _mm512_set1_epi32(v); }
  FOCAL_AVX512 static I and_(I a, I b) { return _mm512_and_si512(a, b); }
  FOCAL_AVX512 static I or_(I a, I b) { return _mm512_or_si512(a, b); }
  FOCAL_AVX512 static I srl(I a, int n) { return _mm512_srli_epi32(a, n); }
  FOCAL_AVX512 static I sll(I a, int n) { return _mm512_slli_epi32(a, n); }
  FOCAL_AVX512 static I sra(I a, int n) { return _mm512_srai_epi32(a, n); }
  FOCAL_AVX512 static I sub_i(I a, I b) { return _mm512_sub_epi32(a, b); }
  FOCAL_AVX512 static F to_float(I a) { return _mm512_cvtepi32_ps(a); }
  FOCAL_AVX512 static F fzero() { return _mm512_setzero_ps(); }
  FOCAL_AVX512 static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  FOCAL_AVX512 static F add(F a, F b) { return _mm512_add_ps(a, b); }
  FOCAL_AVX512 static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  FOCAL_AVX512 static void store(float* p, F a) { _mm512_store_ps(p, a); }
};
struct Lanes8 {
  static constexpr int kLanes = 8;
  using I = __m256i;
  using F = __m256;
  FOCAL_AVX2 static I load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  FOCAL_AVX2 static F half(const uint8_t* p) {  // 8 fp16 as floats
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  FOCAL_AVX2 static I set1(int v) { return _mm256_set1_epi32(v); }
  FOCAL_AVX2 static I and_(I a, I b) { return _mm256_and_si256(a, b); }
  FOCAL_AVX2 static I or_(I a, I b) { return _mm256_or_si256(a, b); }
  FOCAL_AVX2 static I srl(I a, int n) { return _mm256_srli_epi32(a, n); }
  FOCAL_AVX2 static I sll(I a, int n) { return _mm256_slli_epi32(a, n); }
  FOCAL_AVX2 static I sra(I a, int n) { return _mm256_srai_epi32(a, n); }
  FOCAL_AVX2 static I sub_i(I a, I b) { return _mm256_sub_epi32(a, b); }
  FOCAL_AVX2 static F to_float(I a) { return _mm256_cvtepi32_ps(a); }
  FOCAL_AVX2 static F fzero() { return _mm256_setzero_ps(); }
  FOCAL_AVX2 static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  FOCAL_AVX2 static F add(F a, F b) { return _mm256_add_ps(a, b); }
  FOCAL_AVX2 static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  FOCAL_AVX2 static void store(float* p, F a) { _mm256_store_ps(p, a); }
};
#define FOCAL_KMAJOR_TARGET FOCAL_AVX512
namespace kmajor512 {
using V = Lanes16;
#include "quant_kmajor.inc"
}  // namespace kmajor512
#undef FOCAL_KMAJOR_TARGET
#define FOCAL_KMAJOR_TARGET FOCAL_AVX2
namespace kmajor256 {
using V = Lanes8;
#include "quant_kmajor.inc"
}  // namespace kmajor256
#undef FOCAL_KMAJOR_TARGET

using KMajorFn = void (*)(const uint8_t* P, int64_t nb, float* block, int ld);

// ---- AVX-512 ----

// dst[c][ldd] (c < 16, 16 floats each) = column c of src[16][lds].
FOCAL_AVX512 inline void transpose16(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // per 128-bit lane L: u[4 g + j] holds column 4 L + j of rows 4 g .. 4 g + 3
  for (int g = 0; g < 4; ++g) {
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
    r[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 v_lo = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88), v_hi = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xDD);
    const __m512 w_lo = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    const __m512 w_hi = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xDD);
    _mm512_storeu_ps(dst + (size_t)j * ldd, _mm512_shuffle_f32x4(v_lo, w_lo, 0x88));
    _mm512_storeu_ps(dst + (size_t)(8 + j) * ldd, _mm512_shuffle_f32x4(v_lo, w_lo, 0xDD));
    _mm512_storeu_ps(dst + (size_t)(4 + j) * ldd, _mm512_shuffle_f32x4(v_hi, w_hi, 0x88));
    _mm512_storeu_ps(dst + (size_t)(12 + j) * ldd, _mm512_shuffle_f32x4(v_hi, w_hi, 0xDD));
  }
}

// c[i][0 .. ncols) (+)= sum over k of xp[k][i] bp[k][0 .. ncols), i < mrows; xp [kc][kMr], bp [kc][32] (64-byte
// aligned), sums in registers over the whole chunk (kMr = 12: 24 zmm).
template <int kMr>
FOCAL_AVX512 void tile_x32(const float* xp, const float* bp, int kc, float* c, int64_t ldc, int mrows, int ncols,
                           bool add) {
  __m512 acc[kMr][2];
  for (auto& a : acc) a[0] = a[1] = _mm512_setzero_ps();
#pragma GCC unroll 2
  for (int k = 0; k < kc; ++k, xp += kMr, bp += 32) {
    const __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);
    for (int i = 0; i < kMr; ++i) {
      const __m512 a = _mm512_set1_ps(xp[i]);
      acc[i][0] = _mm512_fmadd_ps(a, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(a, b1, acc[i][1]);
    }
  }
  const __mmask16 m0 = ncols >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << ncols) - 1);
  const __mmask16 m1 = ncols >= 32 ? (__mmask16)0xFFFF : ncols > 16 ? (__mmask16)((1u << (ncols - 16)) - 1) : 0;
  for (int i = 0; i < kMr; ++i) {  // i known at compile time, so the sums stay in registers in the loop above
    if (i >= mrows) break;
    float* ci = c + (size_t)i * ldc;
    __m512 s0 = acc[i][0], s1 = acc[i][1];
    if (add) {
      s0 = _mm512_add_ps(s0, _mm512_maskz_loadu_ps(m0, ci));
      s1 = _mm512_add_ps(s1, _mm512_maskz_loadu_ps(m1, ci + 16));
    }
    _mm512_mask_storeu_ps(ci, m0, s0);
    _mm512_mask_storeu_ps(ci + 16, m1, s1);
  }
}

// ---- AVX2 ----

// dst[c][ldd] (c < 8, 8 floats each) = column c of src[8][lds].
FOCAL_AVX2 inline void transpose8(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 2; ++g) {  // per 128-bit lane L: r[4 g + j] holds column 4 L + j of rows 4 g .. 4 g + 3
    const __m256d a = _mm256_castps_pd(t[4 * g]), b = _mm256_castps_pd(t[4 * g + 1]);
    const __m256d c = _mm256_castps_pd(t[4 * g + 2]), d = _mm256_castps_pd(t[4 * g + 3]);
    r[4 * g] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, c));
    r[4 * g + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, c));
    r[4 * g + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(b, d));
    r[4 * g + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(b, d));
  }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(dst + (size_t)j * ldd, _mm256_permute2f128_ps(r[j], r[4 + j], 0x20));
    _mm256_storeu_ps(dst + (size_t)(4 + j) * ldd, _mm256_permute2f128_ps(r[j], r[4 + j], 0x31));
  }
}

FOCAL_AVX2 inline __m256 lane_mask(int n) {  // the first n of 8 lanes set
  return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

// As tile_x32 with 6 rows of x by 16 weight rows: xp [kc][6], bp [kc][16]. The sums are named variables: held in
// an array, GCC 12 stored all twelve to the stack on every step of k (the kernel ran at half its rate).
FOCAL_AVX2 inline void store_row8x2(float* ci, __m256 s0, __m256 s1, __m256i m0, __m256i m1, bool add) {
  if (add) {
    s0 = _mm256_add_ps(s0, _mm256_maskload_ps(ci, m0));
    s1 = _mm256_add_ps(s1, _mm256_maskload_ps(ci + 8, m1));
  }
  _mm256_maskstore_ps(ci, m0, s0);
  _mm256_maskstore_ps(ci + 8, m1, s1);
}
FOCAL_AVX2 void tile_6x16(const float* xp, const float* bp, int kc, float* c, int64_t ldc, int mrows, int ncols,
                          bool add) {
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00,
         a40 = a00, a41 = a00, a50 = a00, a51 = a00;
#pragma GCC unroll 2
  for (int k = 0; k < kc; ++k, xp += 6, bp += 16) {
    const __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
    __m256 a = _mm256_broadcast_ss(xp);
    a00 = _mm256_fmadd_ps(a, b0, a00);
    a01 = _mm256_fmadd_ps(a, b1, a01);
    a = _mm256_broadcast_ss(xp + 1);
    a10 = _mm256_fmadd_ps(a, b0, a10);
    a11 = _mm256_fmadd_ps(a, b1, a11);
    a = _mm256_broadcast_ss(xp + 2);
    a20 = _mm256_fmadd_ps(a, b0, a20);
    a21 = _mm256_fmadd_ps(a, b1, a21);
    a = _mm256_broadcast_ss(xp + 3);
    a30 = _mm256_fmadd_ps(a, b0, a30);
    a31 = _mm256_fmadd_ps(a, b1, a31);
    a = _mm256_broadcast_ss(xp + 4);
    a40 = _mm256_fmadd_ps(a, b0, a40);
    a41 = _mm256_fmadd_ps(a, b1, a41);
    a = _mm256_broadcast_ss(xp + 5);
    a50 = _mm256_fmadd_ps(a, b0, a50);
    a51 = _mm256_fmadd_ps(a, b1, a51);
  }
  const __m256i m0 = _mm256_castps_si256(lane_mask(std::min(ncols, 8)));
  const __m256i m1 = _mm256_castps_si256(lane_mask(std::max(ncols - 8, 0)));
  store_row8x2(c, a00, a01, m0, m1, add);
  if (mrows > 1) store_row8x2(c + ldc, a10, a11, m0, m1, add);
  if (mrows > 2) store_row8x2(c + 2 * ldc, a20, a21, m0, m1, add);
  if (mrows > 3) store_row8x2(c + 3 * ldc, a30, a31, m0, m1, add);
  if (mrows > 4) store_row8x2(c + 4 * ldc, a40, a41, m0, m1, add);
  if (mrows > 5) store_row8x2(c + 5 * ldc, a50, a51, m0, m1, add);
}

// The loop nest of both levels: kMr rows of x by kNr weight rows a tile.
template <int kMr, int kNr, bool kAvx512>
void qgemm(const float* x, const QMatrix& w, float* y, int m) {
  const int64_t n = w.rows, k = w.cols;
  const int64_t units = (n + kNr - 1) / kNr;
  KMajorFn direct = nullptr;  // the formats read straight from their panels
  if (w.panels) {
    switch (w.type) {
      case kQ4_0: direct = kAvx512 ? &kmajor512::b32_kmajor<kQ4_0> : &kmajor256::b32_kmajor<kQ4_0>; break;
      case kQ4_1: direct = kAvx512 ? &kmajor512::b32_kmajor<kQ4_1> : &kmajor256::b32_kmajor<kQ4_1>; break;
      case kQ8_0: direct = kAvx512 ? &kmajor512::b32_kmajor<kQ8_0> : &kmajor256::b32_kmajor<kQ8_0>; break;
      case kQ4_K: direct = kAvx512 ? &kmajor512::k4_kmajor<kQ4_K> : &kmajor256::k4_kmajor<kQ4_K>; break;
      case kQ5_K: direct = kAvx512 ? &kmajor512::k4_kmajor<kQ5_K> : &kmajor256::k4_kmajor<kQ5_K>; break;
      case kQ6_K: direct = kAvx512 ? &kmajor512::q6_kmajor : &kmajor256::q6_kmajor; break;
      default: break;  // Q2_K, Q3_K: dequantised by rows, then transposed
    }
  }
  const QTypeInfo* q = qtype_info(w.type);
  const int bv = q->block_values;
  const size_t pbb = (size_t)kPanelRows * (size_t)q->block_bytes;
  const int mc_max = std::min(m, kMc);
  float* xp = aligned_in(t_xp, (size_t)((mc_max + kMr - 1) / kMr) * kKc * kMr);  // [mc / kMr][kKc][kMr]
#pragma omp parallel
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t u0 = units * t / nt, u1 = units * (t + 1) / nt;
    float* tmp = aligned_in(t_scratch.tmp, (size_t)kNr * kKc);
    float* block = aligned_in(t_scratch.block, (size_t)kKc * kNr);
    for (int m0 = 0; m0 < m; m0 += kMc) {  // rows of x a pass: their packed chunk stays in L2
      const int mc = std::min(kMc, m - m0), mb = (mc + kMr - 1) / kMr;
      for (int64_t c0 = 0; c0 < k; c0 += kKc) {
        const int kc = (int)std::min<int64_t>(kKc, k - c0);  // a multiple of 32 (qgemm_runs)
#pragma omp for schedule(static)
        for (int ib = 0; ib < mb; ++ib)
          pack_x(x + (size_t)(m0 + ib * kMr) * k + c0, mc - ib * kMr, k, kc, kMr, xp + (size_t)ib * kKc * kMr);
        for (int64_t u = u0; u < u1; ++u) {
          const int64_t j0 = u * kNr;
          const int nr = (int)std::min<int64_t>(kNr, n - j0);
          if (direct) {  // kNr / 16 panels, the last possibly past n (zero)
            for (int h = 0; h < kNr / kPanelRows; ++h) {
              if (h * kPanelRows < nr)
                direct(w.data + (size_t)((j0 / kPanelRows + h) * (k / bv) + c0 / bv) * pbb, kc / bv,
                       block + h * kPanelRows, kNr);
              else
                for (int kk = 0; kk < kc; ++kk)
                  std::fill(block + (size_t)kk * kNr + h * kPanelRows, block + (size_t)kk * kNr + (h + 1) * kPanelRows,
                            0.0f);
            }
          } else {
            dequant_chunk(w, j0, nr, kNr, c0, kc, tmp);
            for (int r = 0; r < kNr; r += kAvx512 ? 16 : 8)
              for (int kk = 0; kk < kc; kk += kAvx512 ? 16 : 8) {
                if constexpr (kAvx512)
                  transpose16(tmp + (size_t)r * kKc + kk, kKc, block + (size_t)kk * kNr + r, kNr);
                else
                  transpose8(tmp + (size_t)r * kKc + kk, kKc, block + (size_t)kk * kNr + r, kNr);
              }
          }
          if (direct && u + 1 < u1) {  // the next unit's blocks towards L2 while this one's tiles run (they are long)
            const size_t bytes = (size_t)(kc / bv) * pbb;
            for (int h = 0; h < kNr / kPanelRows; ++h) {
              const int64_t panel = (j0 + kNr) / kPanelRows + h;
              if (panel * kPanelRows >= n) break;
              const uint8_t* next = w.data + (size_t)(panel * (k / bv) + c0 / bv) * pbb;
              for (size_t l = 0; l < bytes; l += 64) _mm_prefetch(reinterpret_cast<const char*>(next + l), _MM_HINT_T1);
            }
          }
          for (int ib = 0; ib < mb; ++ib) {
            const float* xb = xp + (size_t)ib * kKc * kMr;
            float* cb = y + (size_t)(m0 + ib * kMr) * (size_t)n + (size_t)j0;
            const int mrows = std::min(kMr, mc - ib * kMr);
            if constexpr (kAvx512)
              tile_x32<kMr>(xb, block, kc, cb, n, mrows, nr, c0 > 0);
            else
              tile_6x16(xb, block, kc, cb, n, mrows, nr, c0 > 0);
          }
        }
#pragma omp barrier  // every thread is done with this chunk of x before the next is packed over it
      }
    }
  }
}

}  // namespace

bool qgemm_runs(const QMatrix& w, int m, QuantIsa isa) {
  const QTypeInfo* q = qtype_info(w.type);
  return (m > kFusedMaxRows || (m > 1 && w.panels)) && q && q->block_values >= 32 && w.cols % 32 == 0 &&
         isa >= QuantIsa::kAvx2 && cpu_has_avx2();
}

void qgemm(const float* x, const QMatrix& w, float* y, int m, QuantIsa isa) {
  if (isa >= QuantIsa::kAvx512 && cpu_has_avx512_vnni())  // (8 rows a tile at T = 128, no empty rows: no faster)
    qgemm<12, 32, true>(x, w, y, m);
  else
    qgemm<6, 16, false>(x, w, y, m);
}

}  // namespace focal::ops
