// The panel layout of Q4_0, Q4_1, Q8_0, Q4_K and Q5_K for decode (quant.h: pack_panels): packing, unpacking a row
// back to the stored block format, and dequantising rows straight from the panels (prefill's sgemm tiles). The
// kernels that read it for decode: quant_avx512.cpp (panels_vnni, panels_k4_vnni), quant_avx2.cpp (panels_avx2,
// panels_k4_avx2).
#include <omp.h>

#include <cstring>

#include "focal_kernels/quant.h"
#include "quant_types.h"
#include "target_isa.h"

namespace focal::ops {

namespace {

size_t panel_block_bytes(int t) { return (size_t)kPanelRows * (size_t)qtype_block_bytes(t); }
int64_t blocks_per_row(int t, int64_t cols) { return cols / qtype_block_elems(t); }

// Q4_K / Q5_K (quant_types.h: K4Panel): the byte of lane l that holds value v (0..31) of sub-block s, and whether v
// sits in its high nibble; the byte that holds v's fifth bit (Q5_K), and the bit.
inline size_t k4_quant_byte(int t, int l, int s, int v, bool* high) {
  *high = v % 8 >= 4;
  const int at = K4Panel::quants(t) + 256 * s + 64 * (v / 8) + 4 * l + v % 4;
  return (size_t)at;
}
inline size_t k5_high_byte(int l, int s, int v, int* bit) {
  *bit = 2 * (v / 8) + (v % 8 >= 4 ? 1 : 0);
  const int at = K4Panel::kHigh + 64 * s + 4 * l + v % 4;
  return (size_t)at;
}
// Value v of sub-block s of a stored Q4_K / Q5_K block's quants qs[128] (k_block_layout's qs): pair s / 2's 32
// bytes, low nibbles for even s. Q5_K's fifth bit of it is bit s of qh[v] (k_block_layout's high).
inline int k4_nibble(const uint8_t* qs, int s, int v) { return (qs[32 * (s / 2) + v] >> (4 * (s & 1))) & 15; }

// Row l's Q4_K / Q5_K block b (stored) into panel block P, and back.
void pack_k4(int t, const uint8_t* b, int l, uint8_t* P) {
  const KBlockLayout kl = k_block_layout(t);
  std::memcpy(P + K4Panel::kD + 2 * l, b + kl.d, 2);
  std::memcpy(P + K4Panel::kDmin + 2 * l, b + kl.dmin, 2);
  for (int w = 0; w < 3; ++w) std::memcpy(P + K4Panel::kScales + 64 * w + 4 * l, b + kl.scales + 4 * w, 4);
  for (int s = 0; s < 8; ++s)
    for (int v = 0; v < 32; ++v) {
      bool high;
      uint8_t& at = P[k4_quant_byte(t, l, s, v, &high)];
      const int q = k4_nibble(b + kl.qs, s, v);
      at = high ? (uint8_t)((at & 0x0F) | (q << 4)) : (uint8_t)((at & 0xF0) | q);
      if (t == kQ5_K) {
        int bit;
        uint8_t& hb = P[k5_high_byte(l, s, v, &bit)];
        hb = (uint8_t)((hb & ~(1 << bit)) | (((b[kl.high + v] >> s) & 1) << bit));
      }
    }
}
void unpack_k4(int t, const uint8_t* P, int l, uint8_t* b) {
  const KBlockLayout kl = k_block_layout(t);
  std::memcpy(b + kl.d, P + K4Panel::kD + 2 * l, 2);
  std::memcpy(b + kl.dmin, P + K4Panel::kDmin + 2 * l, 2);
  for (int w = 0; w < 3; ++w) std::memcpy(b + kl.scales + 4 * w, P + K4Panel::kScales + 64 * w + 4 * l, 4);
  uint8_t* qs = b + kl.qs;
  std::memset(qs, 0, 128);
  if (t == kQ5_K) std::memset(b + kl.high, 0, 32);
  for (int s = 0; s < 8; ++s)
    for (int v = 0; v < 32; ++v) {
      bool high;
      const uint8_t at = P[k4_quant_byte(t, l, s, v, &high)];
      qs[32 * (s / 2) + v] |= (uint8_t)(((high ? at >> 4 : at) & 15) << (4 * (s & 1)));
      if (t == kQ5_K) {
        int bit;
        const size_t at5 = k5_high_byte(l, s, v, &bit);  // sets bit: read it only after
        b[kl.high + v] |= (uint8_t)(((P[at5] >> bit) & 1) << s);
      }
    }
}

// Byte of lane l (row l of the panel) that holds value k of the block, and, for the 4-bit formats, whether k sits
// in its high nibble.
inline size_t quant_byte(int t, int l, int k, bool* high) {
  if (t == kQ8_0) {
    *high = false;
    const int at = panel_quant_offset(t) + 64 * (k / 4) + 4 * l + k % 4;
    return (size_t)at;
  }
  const int c = k / 8, w = k % 8;
  *high = w >= 4;
  const int at = panel_quant_offset(t) + 64 * c + 4 * l + w % 4;
  return (size_t)at;
}

// Value k (0..31) of a stored 4-bit block's quants q[16]: ggml keeps values 0..15 in the low nibbles, 16..31 high.
inline int nibble(const uint8_t* q, int k) { return k < 16 ? q[k] & 15 : q[k - 16] >> 4; }

}  // namespace

void pack_panels(const QMatrix& w, uint8_t* dst) {
  const int t = w.type, bb = qtype_block_bytes(t);
  const int64_t nb = blocks_per_row(t, w.cols), n_panels = w.rows / kPanelRows;
  const size_t pbb = panel_block_bytes(t);
#pragma omp parallel for schedule(static) if (w.rows * w.cols >= (1 << 18))
  for (int64_t p = 0; p < n_panels; ++p)
    for (int l = 0; l < kPanelRows; ++l) {
      const uint8_t* row = w.row(p * kPanelRows + l);
      for (int64_t j = 0; j < nb; ++j) {
        const uint8_t* b = row + j * bb;
        uint8_t* P = dst + (size_t)(p * nb + j) * pbb;
        if (t == kQ4_K || t == kQ5_K) {
          pack_k4(t, b, l, P);
          continue;
        }
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
  const int64_t nb = blocks_per_row(t, w.cols), p = r / kPanelRows;
  const int l = (int)(r % kPanelRows);
  const size_t pbb = panel_block_bytes(t);
  for (int64_t j = 0; j < nb; ++j) {
    const uint8_t* P = w.data + (size_t)(p * nb + j) * pbb;
    uint8_t* b = out + j * bb;
    if (t == kQ4_K || t == kQ5_K) {
      unpack_k4(t, P, l, b);
      continue;
    }
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

namespace {

// dst[cols] = row l of panel P's blocks, each value through qblocks::b32_value (dequant_sub32's formula).
template <int T>
inline void dequant_panel_row(const uint8_t* P, int l, int64_t nb, float* dst) {
  constexpr int kQo = panel_quant_offset(T);
  const size_t pbb = panel_block_bytes(T);
  for (int64_t j = 0; j < nb; ++j, P += pbb, dst += 32) {
    const float d = qblocks::f16_at(P + 2 * l), m = T == kQ4_1 ? qblocks::f16_at(P + 32 + 2 * l) : 0.0f;
    if constexpr (T == kQ8_0) {
      for (int c = 0; c < 8; ++c) {
        const uint8_t* q = P + kQo + 64 * c + 4 * l;  // values 4c .. 4c + 3, stored + 128
        for (int i = 0; i < 4; ++i) dst[4 * c + i] = qblocks::b32_value(T, (int8_t)(q[i] ^ 0x80), d, m);
      }
    } else {
      for (int c = 0; c < 4; ++c) {
        const uint8_t* q = P + kQo + 64 * c + 4 * l;  // values 8c .. 8c + 3 low, 8c + 4 .. 8c + 7 high
        for (int i = 0; i < 4; ++i) {
          dst[8 * c + i] = qblocks::b32_value(T, q[i] & 0xF, d, m);
          dst[8 * c + 4 + i] = qblocks::b32_value(T, q[i] >> 4, d, m);
        }
      }
    }
  }
}

// dst[cols] = row l of a Q4_K / Q5_K panel's blocks, each value through qblocks::k4_value (dequant_sub32's formula).
template <int T>
inline void dequant_panel_row_k4(const uint8_t* P, int l, int64_t nb, float* dst) {
  const size_t pbb = panel_block_bytes(T);
  for (int64_t j = 0; j < nb; ++j, P += pbb) {
    const float d = qblocks::f16_at(P + K4Panel::kD + 2 * l), dmin = qblocks::f16_at(P + K4Panel::kDmin + 2 * l);
    const uint8_t* sw = P + K4Panel::kScales + 4 * l;  // the three scale words at 64 bytes apart
    for (int s = 0; s < 8; ++s, dst += 32) {
      int sc, mn;
      qblocks::scale_min_k4_from(s, sw[s & 3], sw[64 + (s & 3)], sw[128 + (s & 3)], &sc, &mn);
      const float dd = d * sc, mm = dmin * mn;
      const uint8_t* hb = P + K4Panel::kHigh + 64 * s + 4 * l;  // Q5_K's fifth bits
      uint8_t qv[32];  // the sub-block's quants in value order, then one vectorisable pass over them
      for (int c = 0; c < 4; ++c) {
        const uint8_t* q = P + K4Panel::quants(T) + 256 * s + 64 * c + 4 * l;  // 8c .. 8c + 3 low, + 4 .. high
        for (int i = 0; i < 4; ++i) {
          qv[8 * c + i] = (uint8_t)((q[i] & 0xF) + (T == kQ5_K ? ((hb[i] >> (2 * c)) & 1) << 4 : 0));
          qv[8 * c + 4 + i] = (uint8_t)((q[i] >> 4) + (T == kQ5_K ? ((hb[i] >> (2 * c + 1)) & 1) << 4 : 0));
        }
      }
      for (int v = 0; v < 32; ++v) dst[v] = qblocks::k4_value(qv[v], dd, mm);
    }
  }
}

// Each compiled for the baseline, AVX2 and x86-64-v4 (target_clones takes no templates).
FOCAL_TARGET_CLONES void panel_row_q4_0(const uint8_t* P, int l, int64_t nb, float* y) {
  dequant_panel_row<kQ4_0>(P, l, nb, y);
}
FOCAL_TARGET_CLONES void panel_row_q4_1(const uint8_t* P, int l, int64_t nb, float* y) {
  dequant_panel_row<kQ4_1>(P, l, nb, y);
}
FOCAL_TARGET_CLONES void panel_row_q8_0(const uint8_t* P, int l, int64_t nb, float* y) {
  dequant_panel_row<kQ8_0>(P, l, nb, y);
}
FOCAL_TARGET_CLONES void panel_row_q4_k(const uint8_t* P, int l, int64_t nb, float* y) {
  dequant_panel_row_k4<kQ4_K>(P, l, nb, y);
}
FOCAL_TARGET_CLONES void panel_row_q5_k(const uint8_t* P, int l, int64_t nb, float* y) {
  dequant_panel_row_k4<kQ5_K>(P, l, nb, y);
}

}  // namespace

void dequant_panel_rows(const QMatrix& w, int64_t r0, int64_t nr, float* dst) {
  const int64_t nb = blocks_per_row(w.type, w.cols);
  const size_t pbb = panel_block_bytes(w.type);
  const bool par = nr * w.cols >= (1 << 16);
#pragma omp parallel for schedule(static) if (par)
  for (int64_t i = 0; i < nr; ++i) {
    const int64_t r = r0 + i;
    const uint8_t* P = w.data + (size_t)(r / kPanelRows * nb) * pbb;
    const int l = (int)(r % kPanelRows);
    float* y = dst + (size_t)i * w.cols;
    switch (w.type) {
      case kQ4_0: panel_row_q4_0(P, l, nb, y); break;
      case kQ4_1: panel_row_q4_1(P, l, nb, y); break;
      case kQ8_0: panel_row_q8_0(P, l, nb, y); break;
      // panels are packed only where a panel kernel runs, so the CPU has AVX2; the same floats either way
      case kQ4_K: cpu_has_avx2() ? dequant_panel_row_k4_avx2<kQ4_K>(P, l, nb, y) : panel_row_q4_k(P, l, nb, y); break;
      case kQ5_K: cpu_has_avx2() ? dequant_panel_row_k4_avx2<kQ5_K>(P, l, nb, y) : panel_row_q5_k(P, l, nb, y); break;
      default: break;
    }
  }
}

}  // namespace focal::ops
