// Stored-format weights on the CPU (quant.h): block dequantisation (ggml's layouts), fused dequantise-and-dot kernels
// for decode (AVX2 + FMA + F16C by hand for the common formats, and integer-digit kernels for one row of x in
// quant_digits.cpp (AVX-512 VNNI, AVX2), picked at run time; every format also has a generic kernel compiled for the
// baseline, AVX2 and x86-64-v4 ISAs), and dequantised panels through sgemm for prefill.
#include "focal_kernels/quant.h"

#include <cblas.h>
#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "focal_kernels/quant_blocks.h"
#include "focal_kernels/shared_math.h"
#include "quant_digits.h"
#include "target_isa.h"

namespace focal::ops {

int qtype_block_elems(int t) {
  switch (t) {
    case kQF32:
    case kQF16:
    case kQBF16: return 1;
    case kQ4_0:
    case kQ4_1:
    case kQ5_0:
    case kQ5_1:
    case kQ8_0: return 32;
    case kQ2_K:
    case kQ3_K:
    case kQ4_K:
    case kQ5_K:
    case kQ6_K: return 256;
    default: return 0;
  }
}

int qtype_block_bytes(int t) {
  switch (t) {
    case kQF32: return 4;
    case kQF16:
    case kQBF16: return 2;
    case kQ4_0: return 2 + 16;                 // d, qs[16]
    case kQ4_1: return 2 + 2 + 16;             // d, m, qs[16]
    case kQ5_0: return 2 + 4 + 16;             // d, qh[4], qs[16]
    case kQ5_1: return 2 + 2 + 4 + 16;         // d, m, qh[4], qs[16]
    case kQ8_0: return 2 + 32;                 // d, qs[32]
    case kQ2_K: return 16 + 64 + 2 + 2;        // scales[16], qs[64], d, dmin
    case kQ3_K: return 32 + 64 + 12 + 2;       // hmask[32], qs[64], scales[12], d
    case kQ4_K: return 2 + 2 + 12 + 128;       // d, dmin, scales[12], qs[128]
    case kQ5_K: return 2 + 2 + 12 + 32 + 128;  // d, dmin, scales[12], qh[32], qs[128]
    case kQ6_K: return 128 + 64 + 16 + 2;      // ql[128], qh[64], scales[16] (int8), d
    default: return 0;
  }
}

namespace {

inline float f16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return math::half_bits_to_float(v);
}

using qblocks::scale_min_k4;  // Q4_K / Q5_K: eight 6-bit (scale, min) pairs packed into 12 bytes

// One block of type t (qtype_block_elems(t) values) from b into y.
inline void dequant_block(int t, const uint8_t* b, float* y) {
  switch (t) {
    case kQF32: std::memcpy(y, b, 4); break;
    case kQF16: y[0] = f16_at(b); break;
    case kQBF16: {
      uint16_t v;
      std::memcpy(&v, b, 2);
      y[0] = math::bf16_bits_to_float(v);
      break;
    }
    case kQ5_0:
    case kQ5_1: {
      const bool has_m = t == kQ5_1;
      const float d = f16_at(b), m = has_m ? f16_at(b + 2) : 0.0f;
      const uint8_t* p = b + (has_m ? 4 : 2);
      uint32_t qh;
      std::memcpy(&qh, p, 4);
      const uint8_t* qs = p + 4;
      for (int j = 0; j < 16; ++j) {
        const int hi0 = (qh >> j) & 1, hi1 = (qh >> (j + 16)) & 1;
        const int q0 = (qs[j] & 0xF) | (hi0 << 4), q1 = (qs[j] >> 4) | (hi1 << 4);
        if (has_m) {
          y[j] = q0 * d + m;
          y[j + 16] = q1 * d + m;
        } else {
          y[j] = (q0 - 16) * d;
          y[j + 16] = (q1 - 16) * d;
        }
      }
      break;
    }
    case kQ2_K: {
      const uint8_t* scales = b;
      const uint8_t* q = b + 16;
      const float d = f16_at(b + 80), dmin = f16_at(b + 82);
      int is = 0;
      for (int n = 0; n < 256; n += 128) {
        int shift = 0;
        for (int j = 0; j < 4; ++j) {
          for (int half = 0; half < 2; ++half) {
            const uint8_t sc = scales[is++];
            const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
            for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
          }
          shift += 2;
        }
        q += 32;
      }
      break;
    }
    case kQ3_K: {
      const uint8_t* hm = b;
      const uint8_t* q = b + 32;
      const uint8_t* sraw = b + 96;
      const float d_all = f16_at(b + 108);
      // 16 6-bit scales: low 4 bits in bytes 0..7 (two per byte), high 2 bits in bytes 8..11.
      int scales[16];
      for (int i = 0; i < 16; ++i) {
        const int lo = i < 8 ? (sraw[i] & 0xF) : (sraw[i - 8] >> 4);
        const int hi = (sraw[8 + (i % 4)] >> (2 * (i / 4))) & 3;
        scales[i] = (lo | (hi << 4)) - 32;
      }
      int is = 0;
      uint8_t m = 1;
      for (int n = 0; n < 256; n += 128) {
        int shift = 0;
        for (int j = 0; j < 4; ++j) {
          for (int half = 0; half < 2; ++half) {
            const float dl = d_all * scales[is++];
            for (int l = 16 * half; l < 16 * half + 16; ++l)
              *y++ = dl * ((int)((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
          }
          shift += 2;
          m <<= 1;
        }
        q += 32;
      }
      break;
    }
    case kQ4_0:
    case kQ4_1:
    case kQ8_0:
    case kQ4_K:
    case kQ5_K:
    case kQ6_K:  // the formats the CUDA kernels read too: one definition of their math (quant_blocks.h)
      for (int sub = 0; sub < qblocks::block_values(t) / 32; ++sub) qblocks::dequant_sub32(t, b, sub, y + 32 * sub);
      break;
    default: break;
  }
}

FOCAL_TARGET_CLONES void dequant_span(int t, const uint8_t* src, float* dst, int64_t n) {
  if (t == kQF32) {
    std::memcpy(dst, src, (size_t)n * 4);
    return;
  }
  if (t == kQF16 || t == kQBF16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      dst[i] = t == kQBF16 ? math::bf16_bits_to_float(v) : math::half_bits_to_float(v);
    }
    return;
  }
  const int be = qtype_block_elems(t), bb = qtype_block_bytes(t);
  for (int64_t i = 0; i < n / be; ++i) dequant_block(t, src + i * bb, dst + i * be);
}

// ---- generic fused kernel: a block dequantised into a stack tile, dotted with every row of x ----

// Rows r0..r1 of y[m, rows] (stride ldy) from the blocks of w. Eight partial sums per dot keep the loop
// vectorisable without reassociation.
FOCAL_TARGET_CLONES void fused_rows_generic(const float* x, const QMatrix& w, float* y, int m, int64_t r0, int64_t r1) {
  const int t = w.type;
  const int64_t cols = w.cols;
  const int be = std::max(qtype_block_elems(t), 32), bb = qtype_block_bytes(t) * (be / qtype_block_elems(t));
  alignas(64) float tile[256];
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    float acc[kFusedMaxRows][8] = {};
    for (int64_t c0 = 0; c0 < cols; c0 += be) {
      // be values (one K block, one 32-block, or 32 scalars); a row of scalars may end in a shorter piece
      const int nv = (int)std::min<int64_t>(be, cols - c0);
      dequant_span(t, row + (c0 / be) * bb, tile, nv);
      const int n8 = nv / 8 * 8;
      for (int i = 0; i < m; ++i) {
        const float* xi = x + (size_t)i * cols + c0;
        for (int j = 0; j < n8; j += 8)
          for (int l = 0; l < 8; ++l) acc[i][l] += tile[j + l] * xi[j + l];
        for (int j = n8; j < nv; ++j) acc[i][0] += tile[j] * xi[j];
      }
    }
    for (int i = 0; i < m; ++i) {
      float s = 0.0f;
      for (int l = 0; l < 8; ++l) s += acc[i][l];
      y[(size_t)i * w.rows + r] = s;
    }
  }
}

// ---- AVX2 fused kernels ----
// Q6_K: each of a block's eight 32-value units is decoded to 32 int8 lanes q (6-bit quant - 32) and two scales s_lo /
// s_hi (values 0..15 and 16..31, each 16 with its own int8 scale), so that value_j = s * q_j and the dot with x is
// s_lo * sum_{j<16} q_j x_j + s_hi * sum_{j>=16} q_j x_j.
struct Unit {
  __m256i q;  // 32 int8
  float s_lo, s_hi;
};

FOCAL_AVX2 inline float f16c_at(const uint8_t* p) {  // the fp16 at p, widened by F16C (same value as f16_at)
  uint16_t v;
  std::memcpy(&v, p, 2);
  return _cvtsh_ss(v);
}

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

FOCAL_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// One 32-value unit (number un of the row) dotted with M rows of x into acc[i][0] (values 0..15) and acc[i][1]
// (16..31).
template <int M>
FOCAL_AVX2 inline __attribute__((always_inline)) void unit_step(const uint8_t* row, int64_t un, const float* x,
                                                                int64_t cols, __m256 (&acc)[M][2]) {
  const Unit u = decode_q6k_unit(row + (un / 8) * qtype_block_bytes(kQ6_K), (int)(un % 8));
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
          hsum(_mm256_add_ps(_mm256_add_ps(acc_a[i][0], acc_a[i][1]), _mm256_add_ps(acc_b[i][0], acc_b[i][1])));
  }
}

// Q4_K rows: each 256-value block's scales and mins are unpacked once; each 32-byte load feeds two sub-blocks (low
// and high nibbles) with their own accumulators.
template <int T, int M>
FOCAL_AVX2 void fused_rows_q4k(const float* x, const float* xsum16, const QMatrix& w, float* y, int64_t r0,
                               int64_t r1) {
  const int64_t cols = w.cols, n_blocks = cols / 256, n16 = cols / 16;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    __m256 acc[M][4];
    float off[M];
    for (int i = 0; i < M; ++i) {
      off[i] = 0.0f;
      for (int k = 0; k < 4; ++k) acc[i][k] = _mm256_setzero_ps();
    }
    for (int64_t blk = 0; blk < n_blocks; ++blk) {
      const uint8_t* b = row + blk * 144;
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
        off[i] -= hsum(_mm256_mul_ps(_mm256_load_ps(mn), xs32));
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
          hsum(_mm256_add_ps(_mm256_add_ps(acc[i][0], acc[i][1]), _mm256_add_ps(acc[i][2], acc[i][3]))) + off[i];
  }
}

// fp16 / bf16 rows: 8 values per step, widened in registers.
template <int T, int M>
FOCAL_AVX2 void fused_rows_16(const float* x, const float* /*xsum16*/, const QMatrix& w, float* y, int64_t r0,
                              int64_t r1) {
  const int64_t cols = w.cols;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    __m256 acc[M];
    for (int i = 0; i < M; ++i) acc[i] = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 8 <= cols; c += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c));
      const __m256 wv =
          T == kQF16 ? _mm256_cvtph_ps(h) : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
      for (int i = 0; i < M; ++i) acc[i] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + (size_t)i * cols + c), acc[i]);
    }
    for (int i = 0; i < M; ++i) {
      float s = hsum(acc[i]);
      for (int64_t cc = c; cc < cols; ++cc) {
        float wv;
        dequant_block(T, row + 2 * cc, &wv);
        s += wv * x[(size_t)i * cols + cc];
      }
      y[(size_t)i * w.rows + r] = s;
    }
  }
}

bool has_f16c() {  // CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports does not know "f16c")
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}

bool has_avx2() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  return ok;
}

// FOCAL_QUANT_ISA=generic|avx2|avx512 caps the level from the start (benchmarks); anything else: all the CPU has.
QuantIsa isa_from_env() {
  const char* e = std::getenv("FOCAL_QUANT_ISA");
  if (e && !std::strcmp(e, "generic")) return QuantIsa::kGeneric;
  if (e && !std::strcmp(e, "avx2")) return QuantIsa::kAvx2;
  return QuantIsa::kAvx512;
}

std::atomic<QuantIsa> g_isa{isa_from_env()};

bool avx2_kernel(int t) {
  if (!has_avx2() || g_isa.load(std::memory_order_relaxed) < QuantIsa::kAvx2) return false;
  switch (t) {
    case kQ4_0:
    case kQ4_1:
    case kQ8_0:
    case kQ4_K:
    case kQ6_K:
    case kQF16:
    case kQBF16: return true;
    default: return false;
  }
}

using RowsFn = void (*)(const float*, const float*, const QMatrix&, float*, int64_t, int64_t);

// The 32-value formats Q4_0, Q4_1, Q8_0: each block's quants are widened straight from memory (nibbles split in
// one 16-byte register), two blocks per step with their own accumulators.
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
  constexpr int kBytes = T == kQ8_0 ? 34 : T == kQ4_1 ? 20 : 18;
  const int64_t cols = w.cols, nb = cols / 32, n16 = cols / 16;
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
      block32_step<T, M>(row + blk * kBytes, x, cols, blk * 32, acc_a, off_a, xsum16, n16);
      block32_step<T, M>(row + (blk + 1) * kBytes, x, cols, (blk + 1) * 32, acc_b, off_b, xsum16, n16);
    }
    if (blk < nb) block32_step<T, M>(row + blk * kBytes, x, cols, blk * 32, acc_a, off_a, xsum16, n16);
    for (int i = 0; i < M; ++i)
      y[(size_t)i * w.rows + r] =
          hsum(_mm256_add_ps(_mm256_add_ps(acc_a[i][0], acc_a[i][1]), _mm256_add_ps(acc_b[i][0], acc_b[i][1]))) +
          (off_a[i] + off_b[i]);
  }
}

// Each kernel family by (type, rows of x) as a class template, so that one table builder takes them all.
template <int T, int M>
struct B32 {
  static constexpr RowsFn fn = &fused_rows_b32<T, M>;
};
template <int T, int M>
struct Q4K {
  static constexpr RowsFn fn = &fused_rows_q4k<T, M>;
};
template <int T, int M>
struct Q6K {
  static constexpr RowsFn fn = &fused_rows_q6k<T, M>;
};
template <int T, int M>
struct Half {
  static constexpr RowsFn fn = &fused_rows_16<T, M>;
};

// The kernel of family K for type T and m rows of x (1..8).
template <template <int, int> class K, int T>
RowsFn rows_for(int m) {
  static const RowsFn kFns[8] = {K<T, 1>::fn, K<T, 2>::fn, K<T, 3>::fn, K<T, 4>::fn,
                                 K<T, 5>::fn, K<T, 6>::fn, K<T, 7>::fn, K<T, 8>::fn};
  return kFns[std::min(std::max(m, 1), 8) - 1];
}

RowsFn avx2_rows(int t, int m) {
  switch (t) {
    case kQ4_0: return rows_for<B32, kQ4_0>(m);
    case kQ4_1: return rows_for<B32, kQ4_1>(m);
    case kQ8_0: return rows_for<B32, kQ8_0>(m);
    case kQ4_K: return rows_for<Q4K, kQ4_K>(m);
    case kQ6_K: return rows_for<Q6K, kQ6_K>(m);
    case kQF16: return rows_for<Half, kQF16>(m);
    case kQBF16: return rows_for<Half, kQBF16>(m);
    default: return nullptr;
  }
}

void fused(const float* x, const QMatrix& w, float* y, int m) {
  const int64_t rows = w.rows;
  const QuantIsa isa = g_isa.load(std::memory_order_relaxed);
  // decode (one row of x): integer digits of x (quant_digits.h); VNNI where the CPU has it, else AVX2 for Q4_K
  const bool vnni = m == 1 && isa >= QuantIsa::kAvx512 && digits::has_avx512_vnni() && digits::vnni_kernel(w.type);
  const bool simd = avx2_kernel(w.type);
  const bool q4k_avx2 = !vnni && simd && m == 1 && w.type == kQ4_K;
  thread_local digits::XDigits xd;
  if (vnni) digits::split(x, w.cols, digits::vnni_group(w.type), digits::vnni_order(w.type), true, &xd);
  if (q4k_avx2) digits::split(x, w.cols, 256, digits::Order::kNatural, isa >= QuantIsa::kAvx512, &xd);
  const RowsFn fn = simd && !vnni && !q4k_avx2 ? avx2_rows(w.type, m) : nullptr;
  std::vector<float> xsum16;  // [m, cols / 16] sums of x, for the mins of Q4_1 / Q4_K
  if (fn && (w.type == kQ4_1 || w.type == kQ4_K)) {
    const int64_t n16 = w.cols / 16;
    xsum16.resize((size_t)m * n16);
    for (int i = 0; i < m; ++i)
      for (int64_t j = 0; j < n16; ++j) {
        float s = 0.0f;
        for (int l = 0; l < 16; ++l) s += x[(size_t)i * w.cols + j * 16 + l];
        xsum16[(size_t)i * n16 + j] = s;
      }
  }
  constexpr int64_t kChunk = 16;  // rows per scheduling unit
  const int64_t n_chunks = (rows + kChunk - 1) / kChunk;
  const bool par = rows * w.cols >= (1 << 16);
  const digits::XDigits* xdp = &xd;  // the calling thread's buffer, read by every thread
#pragma omp parallel for schedule(static) if (par)
  for (int64_t ch = 0; ch < n_chunks; ++ch) {
    const int64_t r0 = ch * kChunk, r1 = std::min(rows, r0 + kChunk);
    if (vnni)
      digits::vnni_rows(w.type, *xdp, w, y, r0, r1);
    else if (q4k_avx2)
      digits::q4k_rows_avx2(*xdp, w, y, r0, r1);
    else if (fn)
      fn(x, xsum16.data(), w, y, r0, r1);
    else
      fused_rows_generic(x, w, y, m, r0, r1);
  }
}

}  // namespace

void dequant_blocks(int type, const uint8_t* src, float* dst, int64_t n) {
  const int be = qtype_block_elems(type), bb = qtype_block_bytes(type);
  if (!be) return;
  const int64_t nb = n / be;
  constexpr int64_t kSpan = 4096;  // blocks per parallel unit
  if (nb <= kSpan) {
    dequant_span(type, src, dst, n);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t s = 0; s < (nb + kSpan - 1) / kSpan; ++s) {
    const int64_t b0 = s * kSpan, b1 = std::min(nb, b0 + kSpan);
    dequant_span(type, src + b0 * bb, dst + b0 * be, (b1 - b0) * be);
  }
}

void dequant_rows(const QMatrix& w, int64_t r0, int64_t nr, float* dst) {
  const bool par = nr * w.cols >= (1 << 16);
  if (w.panels) {  // each row back in its stored block format first (a thread's buffer), then as stored
#pragma omp parallel if (par)
    {
      std::vector<uint8_t> row(w.row_bytes);
#pragma omp for schedule(static)
      for (int64_t r = 0; r < nr; ++r) {
        unpack_panel_row(w, r0 + r, row.data());
        dequant_span(w.type, row.data(), dst + (size_t)r * w.cols, w.cols);
      }
    }
    return;
  }
#pragma omp parallel for schedule(static) if (par)
  for (int64_t r = 0; r < nr; ++r) dequant_span(w.type, w.row(r0 + r), dst + (size_t)r * w.cols, w.cols);
}

namespace {

bool panel_kernel_runs(const QMatrix& w, int m) {
  return w.panels && m == 1 && g_isa.load(std::memory_order_relaxed) >= QuantIsa::kAvx512 && digits::has_avx512_vnni();
}

// ys[i] = ws[i] x for n panel matrices of the same cols: x split once, the panels of all of them in one parallel
// region (one fork and join for Q, K and V).
void panel_matvecs(const float* x, const QMatrix* const* ws, float* const* ys, int n) {
  thread_local digits::XDigits xd;
  digits::split(x, ws[0]->cols, 32, digits::Order::kNatural, true, &xd);
  const digits::XDigits* xdp = &xd;  // the calling thread's buffer, read by every thread
  int64_t first[4] = {0, 0, 0, 0};   // first global panel of each matrix (n <= 3)
  for (int i = 0; i < n; ++i) first[i + 1] = first[i] + ws[i]->rows / kPanelRows;
  const int64_t total = first[n];
#pragma omp parallel for schedule(static) if (total * kPanelRows * ws[0]->cols >= (1 << 16))
  for (int64_t g = 0; g < total; ++g) {
    int i = 0;
    while (g >= first[i + 1]) ++i;
    digits::panel_rows(ws[i]->type, *xdp, *ws[i], ys[i], g - first[i], g - first[i] + 1);
  }
}

}  // namespace

void matmul_xwt_q(const float* x, const QMatrix& w, float* y, int m) {
  if (m <= 0 || w.rows <= 0) return;
  if (panel_kernel_runs(w, m)) {
    const QMatrix* ws[1] = {&w};
    panel_matvecs(x, ws, &y, 1);
    return;
  }
  if (m <= kFusedMaxRows && !w.panels) {  // panels with more rows (or a lower ISA level): the sgemm path below
    fused(x, w, y, m);
    return;
  }
  // Prefill: panels of w's rows dequantised into a per-thread fp32 tile, each multiplied with sgemm into its
  // column block of y (ldc = rows).
  constexpr size_t kTileFloats = (size_t)2 << 20;  // 8 MiB
  thread_local std::vector<float> tile;
  const int64_t k = w.cols;
  const int64_t panel = std::max<int64_t>(16, std::min<int64_t>(w.rows, (int64_t)(kTileFloats / (size_t)k)));
  if (tile.size() < (size_t)(panel * k)) tile.resize((size_t)(panel * k));
  for (int64_t p0 = 0; p0 < w.rows; p0 += panel) {
    const int64_t np = std::min(panel, w.rows - p0);
    dequant_rows(w, p0, np, tile.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, (int)np, (int)k, 1.0f, x, (int)k, tile.data(), (int)k, 0.0f,
                y + p0, (int)w.rows);
  }
}

void matmul_xwt_q_shared(const float* x, const QMatrix* const* ws, float* const* ys, int n, int m) {
  bool together = n >= 1 && n <= 3;
  for (int i = 0; i < n && together; ++i) together = panel_kernel_runs(*ws[i], m) && ws[i]->cols == ws[0]->cols;
  if (together) {
    panel_matvecs(x, ws, ys, n);
    return;
  }
  for (int i = 0; i < n; ++i) matmul_xwt_q(x, *ws[i], ys[i], m);
}

NonFiniteScan scan_nonfinite_stored(int type, const uint8_t* src, int64_t n_blocks) {
  int offs[2] = {-1, -1};  // byte offsets of the fp16 scale fields in a block
  switch (type) {
    case kQ4_1:
    case kQ5_1:
    case kQ4_K:
    case kQ5_K: offs[0] = 0, offs[1] = 2; break;
    case kQ2_K: offs[0] = 80, offs[1] = 82; break;
    case kQ3_K: offs[0] = 108; break;
    case kQ6_K: offs[0] = 208; break;
    case kQF16:
    case kQ4_0:
    case kQ5_0:
    case kQ8_0: offs[0] = 0; break;
    default: break;
  }
  const int bb = qtype_block_bytes(type);
  const uint16_t exp_mask = type == kQBF16 ? 0x7F80u : 0x7C00u;
  if (type == kQBF16) offs[0] = 0;
  if (offs[0] < 0 || bb <= 0) return {};
  int64_t count = 0, first = n_blocks;
#pragma omp parallel for schedule(static) reduction(+ : count) reduction(min : first) if (n_blocks > 65536)
  for (int64_t i = 0; i < n_blocks; ++i) {
    bool bad = false;
    for (int f = 0; f < 2; ++f) {
      if (offs[f] < 0) continue;
      uint16_t v;
      std::memcpy(&v, src + i * bb + offs[f], 2);
      bad |= (v & exp_mask) == exp_mask;
    }
    if (bad) {
      ++count;
      first = std::min(first, i);
    }
  }
  NonFiniteScan r;
  r.count = count;
  r.first_block = count ? first : 0;
  return r;
}

const char* qtype_kernel(int type, int m) {  // row-major matrices (panels: avx512-vnni for m = 1, else sgemm)
  if (m == 1 && g_isa.load() >= QuantIsa::kAvx512 && digits::has_avx512_vnni() && digits::vnni_kernel(type))
    return "avx512-vnni";
  return avx2_kernel(type) ? "avx2" : "generic";
}

void set_quant_isa(QuantIsa most) { g_isa.store(most); }

bool panels_pay_off(int type, int64_t rows) {  // the kernel exists and FOCAL_QUANT_ISA / set_quant_isa allow it
  return (type == kQ4_0 || type == kQ4_1 || type == kQ8_0) && rows > 0 && rows % kPanelRows == 0 &&
         g_isa.load(std::memory_order_relaxed) >= QuantIsa::kAvx512 && digits::has_avx512_vnni();
}

}  // namespace focal::ops
