// The values of ggml's block formats, 32 at a time, shared by the CPU dequantiser (quant_generic.cpp) and
// the CUDA kernels that read quantized weights on the device (ops_cuda.cu: matvec_q, dequant_rows): one definition
// of each format's math, so both backends compute the same fp32 value of every weight. Byte loads only (blocks of
// Q4_0, Q8_0 and Q6_K are not 4-byte aligned in a row). Formats: docs/model-format.md.
#pragma once

#include <cstdint>

#include "focal_kernels/shared_math.h"

namespace focal::qblocks {

// ggml type numbers (ops::QType) of the formats below.
constexpr int kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14;

// True for the formats dequant_sub32 knows.
FOCAL_HD constexpr bool sub32_supported(int type) {
  return type == kQ4_0 || type == kQ4_1 || type == kQ8_0 || type == kQ4_K || type == kQ5_K || type == kQ6_K;
}
// Values and bytes of one block (32 or 256 values); 0 for other types. The CPU's QTypeInfo table checks that it
// agrees (quant_generic.cpp); the CPU kernels of these formats take their block sizes from here.
FOCAL_HD constexpr int block_values(int type) {
  return type == kQ4_K || type == kQ5_K || type == kQ6_K ? 256 : sub32_supported(type) ? 32 : 0;
}
FOCAL_HD constexpr int block_bytes(int type) {
  switch (type) {
    case kQ4_0: return 18;
    case kQ4_1: return 20;
    case kQ8_0: return 34;
    case kQ4_K: return 144;
    case kQ5_K: return 176;
    case kQ6_K: return 210;
    default: return 0;
  }
}

FOCAL_HD float f16_at(const uint8_t* p) { return math::half_bits_to_float((uint16_t)(p[0] | (p[1] << 8))); }

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block's 12 scale bytes q, from the three bytes
// that hold them: b0 = q[j % 4], b1 = q[4 + j % 4], b2 = q[8 + j % 4] (sub-blocks 0-3: the low 6 bits of b0 and b1;
// 4-7: b2's two nibbles, and the top 2 bits of b0 and b1).
FOCAL_HD void scale_min_k4_from(int j, int b0, int b1, int b2, int* sc, int* mn) {
  if (j < 4) {
    *sc = b0 & 63;
    *mn = b1 & 63;
  } else {
    *sc = (b2 & 0xF) | ((b0 >> 6) << 4);
    *mn = (b2 >> 4) | ((b1 >> 6) << 4);
  }
}
FOCAL_HD void scale_min_k4(int j, const uint8_t* q, int* sc, int* mn) {
  scale_min_k4_from(j, q[j & 3], q[4 + (j & 3)], q[8 + (j & 3)], sc, mn);
}
// The same with the 12 bytes as three little-endian words (bytes 0-3, 4-7, 8-11), in registers: the device's Q4_K
// dot loads the words, and scale_min_k4 over a byte array copied from them, indexed by a run-time j, put the array
// in local memory (a 16-byte stack frame in the decode kernel: stores and loads through L1 for every row and
// sub-block).
FOCAL_HD void scale_min_k4_words(int j, uint32_t w0, uint32_t w1, uint32_t w2, int* sc, int* mn) {
  const int shift = 8 * (j & 3);
  scale_min_k4_from(j, (int)((w0 >> shift) & 0xFFu), (int)((w1 >> shift) & 0xFFu), (int)((w2 >> shift) & 0xFFu), sc,
                    mn);
}

// Decode's int8 x (the CUDA fast precision's Q4_K / Q6_K matrix-vector products, as llama.cpp's q8_1 blocks): each 32
// values of x as d q with d = max |x| / 127, and q the integer nearest x inv (ties to even), inv = 127 / max |x|,
// by one fused multiply-add onto 1.5 * 2^23 (whose float has unit steps there: the rounding is the addition's; on the
// device the low byte of the sum's bits is q's two's complement byte). |q| <= 127 (d = inv = q = 0 for a block of
// zeros), and |x - d q| <= d / 2 + 2^-22 max |x|.
constexpr float kX8RoundMagic = 12582912.0f;  // 1.5 * 2^23
FOCAL_HD float x8_scale(float amax) { return amax / 127.0f; }
FOCAL_HD float x8_inv_scale(float amax) { return amax > 0.0f ? 127.0f / amax : 0.0f; }
FOCAL_HD int x8_round(float x, float inv) { return (int)(fmaf(x, inv, kX8RoundMagic) - kX8RoundMagic); }
// The same x in two int8 digits, a 16-bit x (the fast precision's decode product with x16): x = s (254 q1 + q2),
// s = x8_scale / 254, q1 = x8_round(x, inv) and q2 the integer nearest 254 (x inv - q1), the remainder taken by one
// fma (exact but for one rounding of a number of at most 1/2). |q1|, |q2| <= 127, and
// |x - s (254 q1 + q2)| <= max |x| / 64516 + 2^-22 max |x| (fp16 x: |x| / 4096 near max |x|).
constexpr int kX16Base = 254;
FOCAL_HD float x16_scale(float amax) { return amax / (127.0f * (float)kX16Base); }
FOCAL_HD void x16_round(float x, float inv, int* q1, int* q2) {
  const float r1 = fmaf(x, inv, kX8RoundMagic) - kX8RoundMagic;
  *q1 = (int)r1;
  *q2 = (int)(fmaf(fmaf(x, inv, -r1), (float)kX16Base, kX8RoundMagic) - kX8RoundMagic);
}

// out[32] = the 32 bytes at p. On the device two 16-byte loads: p must be 16-byte aligned, which the quant bytes and
// Q5_K's high bits of Q4_K / Q5_K blocks are in a row whose start is (block sizes 144 and 176, offsets 16, 48 and
// 32 c); on the host plain byte copies.
FOCAL_HD void load32_aligned(const uint8_t* p, uint8_t* out) {
#if defined(__CUDA_ARCH__)
  const uint4 a = reinterpret_cast<const uint4*>(p)[0], b = reinterpret_cast<const uint4*>(p)[1];
  const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  for (int i = 0; i < 32; ++i) out[i] = (uint8_t)(w[i / 4] >> (8 * (i % 4)));
#else
  for (int i = 0; i < 32; ++i) out[i] = p[i];
#endif
}

// One value of a 32-value format's block from its stored quant q (Q4_0 / Q4_1: the nibble 0..15; Q8_0: the int8)
// and the block's d (and Q4_1's m). Exact: an fp16 scale times an integer of at most 8 bits.
FOCAL_HD float b32_value(int type, int q, float d, float m) {
  return type == kQ4_0 ? (q - 8) * d : type == kQ4_1 ? q * d + m : q * d;
}

// One value of a Q4_K / Q5_K block from its quant q (0..31) and its sub-block's dd = d sc and mm = dmin mn.
FOCAL_HD float k4_value(int q, float dd, float mm) { return dd * q - mm; }
// One value of a Q6_K block from its 6-bit quant q (0..63), its 16 values' int8 scale and the block's d.
FOCAL_HD float q6_value(int q, int8_t scale, float d) { return d * scale * (q - 32); }

// y[32] = values 32 sub .. 32 sub + 31 of the block at b (sub = 0 for the 32-value formats, 0..7 for the K formats).
FOCAL_HD void dequant_sub32(int type, const uint8_t* b, int sub, float* y) {
  switch (type) {
    case kQ4_0:
    case kQ4_1: {
      const bool q41 = type == kQ4_1;
      const float d = f16_at(b), m = q41 ? f16_at(b + 2) : 0.0f;
      const uint8_t* qs = b + (q41 ? 4 : 2);
      for (int j = 0; j < 16; ++j) {
        y[j] = b32_value(type, qs[j] & 0xF, d, m);
        y[j + 16] = b32_value(type, qs[j] >> 4, d, m);
      }
      break;
    }
    case kQ8_0: {
      const float d = f16_at(b);
      for (int j = 0; j < 32; ++j) y[j] = b32_value(type, (int8_t)b[2 + j], d, 0.0f);
      break;
    }
    case kQ4_K:
    case kQ5_K: {
      // Chunk sub / 2 of 64 values: 32 bytes of 4-bit quants, low nibbles for the even sub-block, high for the odd;
      // Q5_K's fifth bit of value l is bit `sub` of qh[l].
      const bool five = type == kQ5_K;
      const float d = f16_at(b), dmin = f16_at(b + 2);
      int sc, mn;
      scale_min_k4(sub, b + 4, &sc, &mn);
      const float dd = d * sc, mm = dmin * mn;
      uint8_t ql[32], qh[32] = {};
      load32_aligned(b + (five ? 48 : 16) + 32 * (sub / 2), ql);
      if (five) load32_aligned(b + 16, qh);
      const int shift = (sub & 1) * 4;
      for (int l = 0; l < 32; ++l)
        y[l] = k4_value(((ql[l] >> shift) & 0xF) + (five && ((qh[l] >> sub) & 1) ? 16 : 0), dd, mm);
      break;
    }
    case kQ6_K: {
      // Half h = sub / 4 of 128 values; group g = sub % 4 takes ql bytes 64h + 32 (g & 1) .. (low nibbles for g < 2,
      // high for g >= 2), bits 2g, 2g + 1 of qh[32h + l], and the int8 scales 8h + 2g + l / 16.
      const int h = sub / 4, g = sub % 4;
      const uint8_t* ql = b + 64 * h + 32 * (g & 1);
      const uint8_t* qh = b + 128 + 32 * h;
      const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * h + 2 * g;
      const float d = f16_at(b + 208);
      const int shift = g >= 2 ? 4 : 0;
      for (int l = 0; l < 32; ++l) {
        const int q = ((ql[l] >> shift) & 0xF) | (((qh[l] >> (2 * g)) & 3) << 4);
        y[l] = q6_value(q, sc[l >> 4], d);  // the scale of values 0..15, then of 16..31
      }
      break;
    }
    default: break;
  }
}

}  // namespace focal::qblocks
