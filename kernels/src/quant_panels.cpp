// The panel layout of Q4_0, Q4_1, Q8_0 and Q2_K .. Q6_K for decode (quant.h: pack_panels): packing, unpacking a
// row back to the stored block format, and dequantising rows straight from the panels (prefill's sgemm tiles). The
// kernels that read it for decode: quant_avx512.cpp (panels_vnni, panels_k4_vnni, panels_k23_vnni, panels_q6_vnni),
// quant_avx2_panels.cpp (panels_avx2, panels_q8_avx2, panels_k4_avx2, panels_k23_avx2, panels_q6_avx2).
#include <emmintrin.h>
#include <omp.h>

#include <cstring>
#include <vector>

#include "focal_kernels/quant.h"
#include "parallel_for.h"
#include "quant_types.h"
#include "target_isa.h"

namespace focal::ops {

namespace {

size_t panel_block_bytes(int t) { return (size_t)kPanelRows * (size_t)qtype_block_bytes(t); }
int64_t blocks_per_row(int t, int64_t cols) { return cols / qtype_block_elems(t); }

// Each packer writes whole bytes of the panel block (every byte of it once over its 16 rows), each unpacker every byte
// of the stored block: no read-modify-write, so a panel can be packed into memory that held anything.

// 16 bytes from p, each shifted right by `bits` (a count known only at run time) and masked.
inline __m128i load_bits(const uint8_t* p, int bits, __m128i mask) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm_and_si128(_mm_srl_epi16(v, _mm_cvtsi32_si128(bits)), mask);
}
// 16 bytes as four 4-byte units u0..u3 (each 4 values of a row): the units' 4 bytes to 4 places 64 bytes apart (a
// panel's chunks), starting at dst.
inline void store_units(__m128i v, uint8_t* dst) {
  alignas(16) uint8_t u[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(u), v);
  for (int c = 0; c < 4; ++c) std::memcpy(dst + 64 * c, u + 4 * c, 4);
}
// Two runs of 16 values (a, b: values 0..15 and 16..31, one per byte, each < 16) into the 4-bit panel chunks' bytes:
// unit c = values 8c .. 8c + 3 (low nibbles) and 8c + 4 .. 8c + 7 (high ones).
inline __m128i nibble_chunks(__m128i a, __m128i b) {
  const __m128 fa = _mm_castsi128_ps(a), fb = _mm_castsi128_ps(b);
  const __m128i even = _mm_castps_si128(_mm_shuffle_ps(fa, fb, _MM_SHUFFLE(2, 0, 2, 0)));  // units 0, 2, 4, 6
  const __m128i odd = _mm_castps_si128(_mm_shuffle_ps(fa, fb, _MM_SHUFFLE(3, 1, 3, 1)));   // units 1, 3, 5, 7
  return _mm_or_si128(even, _mm_slli_epi16(odd, 4));
}

// 16 values v (one per byte, each < 2^kStep) as four bytes: byte i holds value 4k + i at bits kStep k, k = 0..3.
template <int kStep>
inline int32_t quads(__m128i v) {
  const __m128i a = _mm_or_si128(v, _mm_slli_epi16(_mm_srli_si128(v, 4), kStep));
  const __m128i b =
      _mm_or_si128(_mm_slli_epi16(_mm_srli_si128(v, 8), 2 * kStep), _mm_slli_epi16(_mm_srli_si128(v, 12), 3 * kStep));
  return _mm_cvtsi128_si32(_mm_or_si128(a, b));
}

// Q4_K / Q5_K (quant_types.h: K4Panel). Sub-block s of a stored block: its 32 quants are the low (even s) or high
// (odd s) nibbles of qs[32 (s / 2) ..] (k_block_layout's qs), Q5_K's fifth bit of value v is bit s of qh[v] (high).
// In the panel, chunk c's byte i of row l holds values 8c + i (low nibble) and 8c + 4 + i (high), and the high-bit
// byte i of sub-block s bits 2c and 2c + 1 of those two values' fifth bits.
void pack_k4(int t, const uint8_t* b, int l, uint8_t* P) {
  const KBlockLayout kl = k_block_layout(t);
  std::memcpy(P + K4Panel::kD + 2 * l, b + kl.d, 2);
  std::memcpy(P + K4Panel::kDmin + 2 * l, b + kl.dmin, 2);
  for (int w = 0; w < 3; ++w) std::memcpy(P + K4Panel::kScales + 64 * w + 4 * l, b + kl.scales + 4 * w, 4);
  const __m128i m4 = _mm_set1_epi8(0x0F);
  for (int s = 0; s < 8; ++s) {
    const uint8_t* qs = b + kl.qs + 32 * (s / 2);
    const int sh = 4 * (s & 1);
    store_units(nibble_chunks(load_bits(qs, sh, m4), load_bits(qs + 16, sh, m4)),
                P + K4Panel::quants(t) + 256 * s + 4 * l);
    if (t == kQ5_K) {
      const uint8_t* qh = b + kl.high;
      uint8_t* hb = P + K4Panel::kHigh + 64 * s + 4 * l;
      for (int i = 0; i < 4; ++i) {
        int v = 0;
        for (int c = 0; c < 4; ++c)
          v |= (((qh[8 * c + i] >> s) & 1) << (2 * c)) | (((qh[8 * c + 4 + i] >> s) & 1) << (2 * c + 1));
        hb[i] = (uint8_t)v;
      }
    }
  }
}
void unpack_k4(int t, const uint8_t* P, int l, uint8_t* b) {
  const KBlockLayout kl = k_block_layout(t);
  std::memcpy(b + kl.d, P + K4Panel::kD + 2 * l, 2);
  std::memcpy(b + kl.dmin, P + K4Panel::kDmin + 2 * l, 2);
  for (int w = 0; w < 3; ++w) std::memcpy(b + kl.scales + 4 * w, P + K4Panel::kScales + 64 * w + 4 * l, 4);
  for (int pair = 0; pair < 4; ++pair) {  // sub-blocks 2 pair (the low nibbles) and 2 pair + 1 (the high ones)
    const uint8_t* Q0 = P + K4Panel::quants(t) + 256 * (2 * pair) + 4 * l;
    const uint8_t* Q1 = Q0 + 256;
    uint8_t* qs = b + kl.qs + 32 * pair;
    for (int c = 0; c < 4; ++c)
      for (int i = 0; i < 4; ++i) {
        const uint8_t a0 = Q0[64 * c + i], a1 = Q1[64 * c + i];
        qs[8 * c + i] = (uint8_t)((a0 & 15) | ((a1 & 15) << 4));
        qs[8 * c + 4 + i] = (uint8_t)((a0 >> 4) | (a1 & 0xF0));
      }
  }
  if (t == kQ5_K) {
    uint8_t* qh = b + kl.high;
    for (int v = 0; v < 32; ++v) {
      const int i = v % 4, bit = 2 * (v / 8) + (v % 8 >= 4 ? 1 : 0);
      int h = 0;
      for (int s = 0; s < 8; ++s) h |= ((P[K4Panel::kHigh + 64 * s + 4 * l + i] >> bit) & 1) << s;
      qh[v] = (uint8_t)h;
    }
  }
}

// Q6_K (quant_types.h: Q6Panel). Sub-block s (values 16s .. 16s + 15) of a stored block sits in one run of 16 bytes
// of ql and of qh (dequant_sub32's Q6_K case): value 128 h + 32 g + i (i < 32) has its low four bits in
// ql[64 h + 32 (g & 1) + i] (the high nibble for g >= 2) and its high two at bits 2g, 2g + 1 of qh[32 h + i].
struct Q6Run {
  int ql, ql_shift, qh, qh_shift;  // where sub-block s's bytes start in the block, and the shifts
};
constexpr Q6Run q6_run(int s) {
  const int h = s / 8, g = (s % 8) / 2, i0 = 16 * (s % 2);
  const KBlockLayout kl = k_block_layout(kQ6_K);
  return {kl.qs + 64 * h + 32 * (g & 1) + i0, g >= 2 ? 4 : 0, kl.high + 32 * h + i0, 2 * g};
}
// In the panel, chunk c's byte i of row l holds values 8c + i (low nibble) and 8c + 4 + i (high) of the sub-block,
// and the high-bit byte i bits 2k, 2k + 1 the high two bits of value 4k + i.
void pack_q6(const uint8_t* b, int l, uint8_t* P) {
  const KBlockLayout kl = k_block_layout(kQ6_K);
  std::memcpy(P + Q6Panel::kD + 2 * l, b + kl.d, 2);
  for (int w = 0; w < 4; ++w) std::memcpy(P + Q6Panel::kScales + 64 * w + 4 * l, b + kl.scales + 4 * w, 4);
  const __m128i m4 = _mm_set1_epi8(0x0F), m2 = _mm_set1_epi8(0x03);
  for (int s = 0; s < 16; s += 2) {  // two sub-blocks: their 32 values side by side in ql and qh
    const Q6Run run = q6_run(s);
    const __m128i lo0 = load_bits(b + run.ql, run.ql_shift, m4), lo1 = load_bits(b + run.ql + 16, run.ql_shift, m4);
    const __m128i hi0 = load_bits(b + run.qh, run.qh_shift, m2), hi1 = load_bits(b + run.qh + 16, run.qh_shift, m2);
    // the low four bits: sub-block s's chunks 0, 1, then s + 1's, 64 bytes apart
    store_units(nibble_chunks(lo0, lo1), P + Q6Panel::kQuants + 128 * s + 4 * l);
    // the high two bits: byte i of unit k of a sub-block at bits 2k: units 0..3 of s from hi0, of s + 1 from hi1
    for (int h = 0; h < 2; ++h) {
      const int32_t word = quads<2>(h ? hi1 : hi0);
      std::memcpy(P + Q6Panel::kHigh + 64 * (s + h) + 4 * l, &word, 4);
    }
  }
}
void unpack_q6(const uint8_t* P, int l, uint8_t* b) {
  const KBlockLayout kl = k_block_layout(kQ6_K);
  std::memcpy(b + kl.d, P + Q6Panel::kD + 2 * l, 2);
  for (int w = 0; w < 4; ++w) std::memcpy(b + kl.scales + 4 * w, P + Q6Panel::kScales + 64 * w + 4 * l, 4);
  uint8_t q[256];  // the block's 6-bit quants in value order
  for (int s = 0; s < 16; ++s) {
    const uint8_t* Q = P + Q6Panel::kQuants + 128 * s + 4 * l;
    const uint8_t* hb = P + Q6Panel::kHigh + 64 * s + 4 * l;
    for (int u = 0; u < 16; ++u) {
      const uint8_t byte = Q[64 * (u / 8) + u % 4];
      q[16 * s + u] = (uint8_t)(((u % 8 >= 4 ? byte >> 4 : byte) & 15) | (((hb[u % 4] >> (2 * (u / 4))) & 3) << 4));
    }
  }
  for (int h = 0; h < 2; ++h)  // each byte of ql and qh from the values that share it
    for (int i = 0; i < 32; ++i) {
      const uint8_t* v = q + 128 * h + i;  // values 128 h + 32 g + i at v[32 g]
      b[kl.qs + 64 * h + i] = (uint8_t)((v[0] & 15) | ((v[64] & 15) << 4));
      b[kl.qs + 64 * h + 32 + i] = (uint8_t)((v[32] & 15) | ((v[96] & 15) << 4));
      b[kl.high + 32 * h + i] =
          (uint8_t)((v[0] >> 4) | ((v[32] >> 4) << 2) | ((v[64] >> 4) << 4) | ((v[96] >> 4) << 6));
    }
}

// Q2_K / Q3_K (quant_types.h: K23Panel). Sub-block s of a stored block (values 16 s .. 16 s + 15; block_q2k and
// block_q3k in quant_generic.cpp): value u's low two bits are bits 2 j of qs[32 h + 16 (s % 2) + u] (h = s / 8,
// j = s % 8 / 2), Q3_K's high bit is bit 4 h + j of hmask[16 (s % 2) + u].
struct K23Run {
  int qs, shift, hm, hm_bit;  // where sub-block s's bytes start in qs and in hmask, and the bits
};
constexpr K23Run k23_run(int s) {
  const int h = s / 8, j = s % 8 / 2;
  return {32 * h + 16 * (s % 2), 2 * j, 16 * (s % 2), 4 * h + j};
}
void pack_k23(int t, const uint8_t* b, int l, uint8_t* P) {
  const KBlockLayout kl = k_block_layout(t);
  std::memcpy(P + K23Panel::kD + 2 * l, b + kl.d, 2);
  if (t == kQ2_K) std::memcpy(P + K23Panel::kDmin + 2 * l, b + kl.dmin, 2);
  for (int w = 0; w < (t == kQ2_K ? 4 : 3); ++w)
    std::memcpy(P + K23Panel::scales(t) + 64 * w + 4 * l, b + kl.scales + 4 * w, 4);
  const __m128i m3 = _mm_set1_epi8(0x03), m1 = _mm_set1_epi8(0x01);
  for (int s = 0; s < 16; ++s) {
    const K23Run run = k23_run(s);
    const int32_t low = quads<2>(load_bits(b + kl.qs + run.qs, run.shift, m3));
    std::memcpy(P + K23Panel::quants(t) + 64 * s + 4 * l, &low, 4);
  }
  if (t == kQ3_K)
    for (int s = 0; s < 16; s += 2) {  // sub-block s in bits 0..3 of each byte, s + 1 in bits 4..7
      const K23Run r0 = k23_run(s), r1 = k23_run(s + 1);
      const int32_t high = quads<1>(load_bits(b + kl.high + r0.hm, r0.hm_bit, m1)) |
                           (quads<1>(load_bits(b + kl.high + r1.hm, r1.hm_bit, m1)) << 4);
      std::memcpy(P + K23Panel::kHigh + 64 * (s / 2) + 4 * l, &high, 4);
    }
}
void unpack_k23(int t, const uint8_t* P, int l, uint8_t* b) {
  const KBlockLayout kl = k_block_layout(t);
  std::memcpy(b + kl.d, P + K23Panel::kD + 2 * l, 2);
  if (t == kQ2_K) std::memcpy(b + kl.dmin, P + K23Panel::kDmin + 2 * l, 2);
  for (int w = 0; w < (t == kQ2_K ? 4 : 3); ++w)
    std::memcpy(b + kl.scales + 4 * w, P + K23Panel::scales(t) + 64 * w + 4 * l, 4);
  uint8_t qs[64] = {}, hm[32] = {};
  for (int s = 0; s < 16; ++s) {
    const K23Run run = k23_run(s);
    const uint8_t* Q = P + K23Panel::quants(t) + 64 * s + 4 * l;
    const uint8_t* H = P + K23Panel::kHigh + 64 * (s / 2) + 4 * l;
    for (int u = 0; u < 16; ++u) {
      qs[run.qs + u] = (uint8_t)(qs[run.qs + u] | ((Q[u % 4] >> (2 * (u / 4))) & 3) << run.shift);
      if (t == kQ3_K)
        hm[run.hm + u] = (uint8_t)(hm[run.hm + u] | ((H[u % 4] >> (u / 4 + 4 * (s % 2))) & 1) << run.hm_bit);
    }
  }
  std::memcpy(b + kl.qs, qs, 64);
  if (t == kQ3_K) std::memcpy(b + kl.high, hm, 32);
}

// Q4_0 / Q4_1 / Q8_0: row l's block b (stored) into panel block P, and back. Chunk c's byte i of row l holds values
// 8c + i and 8c + 4 + i (4-bit; ggml keeps values 0..15 in the low nibbles of q[16], 16..31 in the high ones), or
// value 4c + i plus 128 (Q8_0).
void pack_b32(int t, const uint8_t* b, int l, uint8_t* P) {
  std::memcpy(P + 2 * l, b, 2);                           // d
  if (t == kQ4_1) std::memcpy(P + 32 + 2 * l, b + 2, 2);  // m
  const uint8_t* q = b + (t == kQ4_1 ? 4 : 2);
  uint8_t* Q = P + panel_quant_offset(t) + 4 * l;
  if (t == kQ8_0) {
    const __m128i flip = _mm_set1_epi8((char)0x80);
    store_units(_mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)), flip), Q);
    store_units(_mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16)), flip), Q + 256);
    return;
  }
  const __m128i m4 = _mm_set1_epi8(0x0F), v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
  store_units(nibble_chunks(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4)), Q);
}
void unpack_b32(int t, const uint8_t* P, int l, uint8_t* b) {
  std::memcpy(b, P + 2 * l, 2);
  if (t == kQ4_1) std::memcpy(b + 2, P + 32 + 2 * l, 2);
  uint8_t* q = b + (t == kQ4_1 ? 4 : 2);
  const uint8_t* Q = P + panel_quant_offset(t) + 4 * l;
  if (t == kQ8_0) {
    for (int c = 0; c < 8; ++c)
      for (int i = 0; i < 4; ++i) q[4 * c + i] = (uint8_t)(Q[64 * c + i] ^ 0x80);
    return;
  }
  uint8_t v[32];
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 4; ++i) {
      v[8 * c + i] = (uint8_t)(Q[64 * c + i] & 15);
      v[8 * c + 4 + i] = (uint8_t)(Q[64 * c + i] >> 4);
    }
  for (int k = 0; k < 16; ++k) q[k] = (uint8_t)(v[k] | (v[k + 16] << 4));
}

// Panel p of w (its 16 rows, row_map followed; or, where `held` is set, the 16 rows held there) into dst's panel p.
void pack_panel(const QMatrix& w, int64_t p, const uint8_t* held, uint8_t* dst) {
  const int t = w.type, bb = qtype_block_bytes(t);
  const int64_t nb = blocks_per_row(t, w.cols);
  const size_t pbb = panel_block_bytes(t);
  for (int l = 0; l < kPanelRows; ++l) {
    const uint8_t* row = held ? held + (size_t)l * w.row_bytes : w.row(p * kPanelRows + l);
    for (int64_t j = 0; j < nb; ++j) {
      const uint8_t* b = row + j * bb;
      uint8_t* P = dst + (size_t)(p * nb + j) * pbb;
      if (t == kQ4_K || t == kQ5_K)
        pack_k4(t, b, l, P);
      else if (t == kQ2_K || t == kQ3_K)
        pack_k23(t, b, l, P);
      else if (t == kQ6_K)
        pack_q6(b, l, P);
      else
        pack_b32(t, b, l, P);
    }
  }
}

}  // namespace

void pack_panels(const QMatrix& w, uint8_t* dst) {
  const int64_t n_panels = w.rows / kPanelRows;
  const size_t panel_bytes = (size_t)kPanelRows * w.row_bytes;
  if (dst == w.data && w.row_map) {  // in place, rows from other panels: pack from a copy of the whole matrix
    const std::vector<uint8_t> all(w.data, w.data + (size_t)w.rows * w.row_bytes);
    QMatrix from = w;
    from.data = all.data();
    pack_panels(from, dst);
    return;
  }
  const bool in_place = dst == w.data;
#pragma omp parallel if (w.rows * w.cols >= (1 << 18))
  {
    std::vector<uint8_t> held(in_place ? panel_bytes : 0);  // in place: the panel's rows, copied before it is packed
#pragma omp for schedule(static)
    for (int64_t p = 0; p < n_panels; ++p) {
      if (in_place) std::memcpy(held.data(), w.data + (size_t)p * panel_bytes, panel_bytes);
      pack_panel(w, p, in_place ? held.data() : nullptr, dst);
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
    if (t == kQ4_K || t == kQ5_K)
      unpack_k4(t, P, l, b);
    else if (t == kQ2_K || t == kQ3_K)
      unpack_k23(t, P, l, b);
    else if (t == kQ6_K)
      unpack_q6(P, l, b);
    else
      unpack_b32(t, P, l, b);
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

// dst[cols] = row l of a Q6_K panel's blocks, each value through qblocks::q6_value (dequant_sub32's formula).
inline void dequant_panel_row_q6(const uint8_t* P, int l, int64_t nb, float* dst) {
  constexpr size_t kPbb = (size_t)kPanelRows * qblocks::block_bytes(kQ6_K);
  for (int64_t j = 0; j < nb; ++j, P += kPbb) {
    const float d = qblocks::f16_at(P + Q6Panel::kD + 2 * l);
    for (int s = 0; s < 16; ++s, dst += 16) {
      const int8_t scale = (int8_t)P[Q6Panel::kScales + 64 * (s / 4) + 4 * l + s % 4];
      const uint8_t* hb = P + Q6Panel::kHigh + 64 * s + 4 * l;
      for (int c = 0; c < 2; ++c) {
        const uint8_t* q = P + Q6Panel::kQuants + 128 * s + 64 * c + 4 * l;
        for (int i = 0; i < 4; ++i) {
          dst[8 * c + i] = qblocks::q6_value((q[i] & 15) | (((hb[i] >> (4 * c)) & 3) << 4), scale, d);
          dst[8 * c + 4 + i] = qblocks::q6_value((q[i] >> 4) | (((hb[i] >> (4 * c + 2)) & 3) << 4), scale, d);
        }
      }
    }
  }
}

// dst[cols] = row l of a Q2_K / Q3_K panel's blocks, each value as block_q2k / block_q3k compute it (quant_generic.cpp):
// Q2_K d sc q - dmin mn, Q3_K d sc (q - 4) with q the three bits and sc the 6-bit scale less 32.
template <int T>
inline void dequant_panel_row_k23(const uint8_t* P, int l, int64_t nb, float* dst) {
  constexpr size_t kPbb = (size_t)kPanelRows * kernel_block_bytes(T);
  for (int64_t j = 0; j < nb; ++j, P += kPbb) {
    const float d = qblocks::f16_at(P + K23Panel::kD + 2 * l);
    const uint8_t* sw = P + K23Panel::scales(T) + 4 * l;  // byte k of the stored scales at sw[64 (k / 4) + k % 4]
    auto sr = [sw](int k) { return (int)sw[64 * (k / 4) + k % 4]; };
    for (int s = 0; s < 16; ++s, dst += 16) {
      const uint8_t* Q = P + K23Panel::quants(T) + 64 * s + 4 * l;
      if constexpr (T == kQ2_K) {
        const float dmin = qblocks::f16_at(P + K23Panel::kDmin + 2 * l);
        const float dl = d * (float)(sr(s) & 0xF), ml = dmin * (float)(sr(s) >> 4);
        for (int u = 0; u < 16; ++u) dst[u] = dl * (float)((Q[u % 4] >> (2 * (u / 4))) & 3) - ml;
      } else {
        const int lo = s < 8 ? sr(s) & 0xF : sr(s - 8) >> 4, hi = (sr(8 + s % 4) >> (2 * (s / 4))) & 3;
        const float dl = d * (float)((lo | (hi << 4)) - 32);
        const uint8_t* H = P + K23Panel::kHigh + 64 * (s / 2) + 4 * l;
        for (int u = 0; u < 16; ++u) {
          const int q = (Q[u % 4] >> (2 * (u / 4))) & 3, h = (H[u % 4] >> (u / 4 + 4 * (s % 2))) & 1;
          dst[u] = dl * (float)(q - (h ? 0 : 4));
        }
      }
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
FOCAL_TARGET_CLONES void panel_row_q2_k(const uint8_t* P, int l, int64_t nb, float* y) {
  dequant_panel_row_k23<kQ2_K>(P, l, nb, y);
}
FOCAL_TARGET_CLONES void panel_row_q3_k(const uint8_t* P, int l, int64_t nb, float* y) {
  dequant_panel_row_k23<kQ3_K>(P, l, nb, y);
}
FOCAL_TARGET_CLONES void panel_row_q6_k(const uint8_t* P, int l, int64_t nb, float* y) {
  dequant_panel_row_q6(P, l, nb, y);
}

}  // namespace

void dequant_panel_blocks(const QMatrix& w, int64_t r, int64_t b0, int64_t nb, float* y) {
  const uint8_t* P =
      w.data + (size_t)(r / kPanelRows * blocks_per_row(w.type, w.cols) + b0) * panel_block_bytes(w.type);
  const int l = (int)(r % kPanelRows);
  switch (w.type) {
    case kQ4_0: panel_row_q4_0(P, l, nb, y); break;
    case kQ4_1: panel_row_q4_1(P, l, nb, y); break;
    case kQ8_0: panel_row_q8_0(P, l, nb, y); break;
    // panels are packed only where a panel kernel runs, so the CPU has AVX2; the same floats either way
    case kQ4_K: cpu_has_avx2() ? dequant_panel_row_k4_avx2<kQ4_K>(P, l, nb, y) : panel_row_q4_k(P, l, nb, y); break;
    case kQ5_K: cpu_has_avx2() ? dequant_panel_row_k4_avx2<kQ5_K>(P, l, nb, y) : panel_row_q5_k(P, l, nb, y); break;
    case kQ2_K: cpu_has_avx2() ? dequant_panel_row_k23_avx2<kQ2_K>(P, l, nb, y) : panel_row_q2_k(P, l, nb, y); break;
    case kQ3_K: cpu_has_avx2() ? dequant_panel_row_k23_avx2<kQ3_K>(P, l, nb, y) : panel_row_q3_k(P, l, nb, y); break;
    case kQ6_K: panel_row_q6_k(P, l, nb, y); break;
    default: break;
  }
}

void dequant_panel_rows(const QMatrix& w, int64_t r0, int64_t nr, float* dst) {
  const int64_t nb = blocks_per_row(w.type, w.cols);
  const bool par = nr * w.cols >= (1 << 16);
  parallel_for(nr, par, [&](int64_t i) { dequant_panel_blocks(w, r0 + i, 0, nb, dst + (size_t)i * w.cols); });
}

}  // namespace focal::ops
