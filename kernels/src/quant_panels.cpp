// The panel layout of Q4_0, Q4_1 and Q8_0 for decode (quant.h: pack_panels): packing, unpacking a row back to the
// stored block format, and the AVX-512 VNNI product of one row of x with a panel matrix, x in three int8 digits
// (quant_digits.h, groups of 32: one scale per block).
#include <immintrin.h>
#include <omp.h>

#include <cstring>

#include "focal_kernels/quant.h"
#include "quant_digits.h"
#include "target_isa.h"

// GCC 12 reports the AVX-512 headers' own _mm512_undefined_* placeholders as uninitialised once inlined
// (quant_digits.cpp has the same note).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace focal::ops {

namespace {

// A panel block: kPanelRows rows' block j, [scales][mins (Q4_1)][quants]; quant_off: where the quants start.
int quant_off(int t) { return t == kQ4_1 ? 64 : 32; }
size_t panel_block_bytes(int t) { return (size_t)kPanelRows * (size_t)qtype_block_bytes(t); }

// Byte of lane l (row l of the panel) that holds value k of the block, and, for the 4-bit formats, whether k sits
// in its high nibble.
inline size_t quant_byte(int t, int l, int k, bool* high) {
  if (t == kQ8_0) {
    *high = false;
    const int at = quant_off(t) + 64 * (k / 4) + 4 * l + k % 4;
    return (size_t)at;
  }
  const int c = k / 8, w = k % 8;
  *high = w >= 4;
  const int at = quant_off(t) + 64 * c + 4 * l + w % 4;
  return (size_t)at;
}

// Value k (0..31) of a stored 4-bit block's quants q[16]: ggml keeps values 0..15 in the low nibbles, 16..31 high.
inline int nibble(const uint8_t* q, int k) { return k < 16 ? q[k] & 15 : q[k - 16] >> 4; }

}  // namespace

void pack_panels(const QMatrix& w, uint8_t* dst) {
  const int t = w.type, bb = qtype_block_bytes(t);
  const int64_t nb = w.cols / 32, n_panels = w.rows / kPanelRows;
  const size_t pbb = panel_block_bytes(t);
#pragma omp parallel for schedule(static) if (w.rows * w.cols >= (1 << 18))
  for (int64_t p = 0; p < n_panels; ++p)
    for (int l = 0; l < kPanelRows; ++l) {
      const uint8_t* row = w.row(p * kPanelRows + l);
      for (int64_t j = 0; j < nb; ++j) {
        const uint8_t* b = row + j * bb;
        uint8_t* P = dst + (size_t)(p * nb + j) * pbb;
        std::memcpy(P + 2 * l, b, 2);                           // d
        if (t == kQ4_1) std::memcpy(P + 32 + 2 * l, b + 2, 2);  // m
        const uint8_t* q = b + (t == kQ4_1 ? 4 : 2);
        for (int k = 0; k < 32; ++k) {
          bool high;
          uint8_t& at = P[quant_byte(t, l, k, &high)];
          if (t == kQ8_0)
            at = (uint8_t)(q[k] ^ 0x80);
          else  // each byte holds two values: this one's nibble replaced, the other kept
            at = high ? (uint8_t)((at & 0x0F) | (nibble(q, k) << 4)) : (uint8_t)((at & 0xF0) | nibble(q, k));
        }
      }
    }
}

void unpack_panel_row(const QMatrix& w, int64_t r, uint8_t* out) {
  const int t = w.type, bb = qtype_block_bytes(t);
  const int64_t nb = w.cols / 32, p = r / kPanelRows;
  const int l = (int)(r % kPanelRows);
  const size_t pbb = panel_block_bytes(t);
  for (int64_t j = 0; j < nb; ++j) {
    const uint8_t* P = w.data + (size_t)(p * nb + j) * pbb;
    uint8_t* b = out + j * bb;
    std::memcpy(b, P + 2 * l, 2);
    if (t == kQ4_1) std::memcpy(b + 2, P + 32 + 2 * l, 2);
    uint8_t* q = b + (t == kQ4_1 ? 4 : 2);
    if (t == kQ8_0) {
      for (int k = 0; k < 32; ++k) {
        bool high;
        q[k] = (uint8_t)(P[quant_byte(t, l, k, &high)] ^ 0x80);
      }
    } else {
      for (int k = 0; k < 16; ++k) {
        bool hl, hh;
        const uint8_t lo = P[quant_byte(t, l, k, &hl)], hi = P[quant_byte(t, l, k + 16, &hh)];
        q[k] = (uint8_t)(((hl ? lo >> 4 : lo) & 15) | (((hh ? hi >> 4 : hi) & 15) << 4));
      }
    }
  }
}

namespace digits {

namespace {

// Four int8 digits of x in every 32-bit lane.
FOCAL_AVX512 inline __m512i bcast(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Panels p0..p1 of y = w x. Per panel block: the quants of 16 rows times 4 broadcast values of x per vpdpbusd, one
// int32 sum per row and digit over the block (|sum| <= 32 * 255 * 128 < 2^21; digit 1 shifted by 8 plus digit 0
// < 2^30, exact), which becomes a float once and is weighted by the row's d times the block's digit scale s. The
// unsigned offset (-8 d, or -128 d for Q8_0) and Q4_1's min come back through the block's sum of x. Two sets of
// accumulators (even and odd chunks) halve the dependency chains; the panel is prefetched 6 KiB ahead (the kernel
// alone on an L3-resident model: 1.8x over no prefetch; the whole SmolLM2 decode: median +14 % over 2 KiB, 8
// alternating runs, and no better at 8 KiB).
template <int T>
FOCAL_AVX512 void panels_vnni(const XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1) {
  constexpr int kChunks = T == kQ8_0 ? 8 : 4, kQo = T == kQ4_1 ? 64 : 32;
  constexpr size_t kPbb = (size_t)kPanelRows * (T == kQ8_0 ? 34 : T == kQ4_1 ? 20 : 18);
  constexpr float kOffset = T == kQ8_0 ? -128.0f : -8.0f;
  const int64_t nb = w.cols / 32;
  const int8_t *x0 = xd.d[0].data(), *x1 = xd.d[1].data(), *x2 = xd.d[2].data();
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int64_t p = p0; p < p1; ++p) {
    const uint8_t* P = w.data + (size_t)(p * nb) * kPbb;
    __m512 acc = _mm512_setzero_ps(), acc_off = _mm512_setzero_ps();
    for (int64_t j = 0; j < nb; ++j, P += kPbb) {
      for (size_t l = 0; l < kPbb; l += 64) _mm_prefetch(reinterpret_cast<const char*>(P) + 6144 + l, _MM_HINT_T0);
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

}  // namespace

void panel_rows(int t, const XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1) {
  switch (t) {
    case kQ4_0: panels_vnni<kQ4_0>(xd, w, y, p0, p1); break;
    case kQ4_1: panels_vnni<kQ4_1>(xd, w, y, p0, p1); break;
    case kQ8_0: panels_vnni<kQ8_0>(xd, w, y, p0, p1); break;
    default: break;
  }
}

}  // namespace digits

}  // namespace focal::ops
