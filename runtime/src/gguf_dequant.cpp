// ggml tensor types of GGUF files: names, block sizes, and dequantisation of the supported block formats to fp32
// (declared in gguf.h). Block layouts follow ggml-quants.c; docs/model-format.md lists the supported types.

#include <cstring>
#include <string>

#include "focal/error.h"
#include "focal_kernels/shared_math.h"
#include "gguf.h"

namespace focal {

// ---- ggml types ----

std::string ggml_type_name(uint32_t t) {
  static const char* kNames[] = {"F32",   "F16",        "Q4_0",       "Q4_1",       "Q4_2",     "Q4_3",     "Q5_0",
                                 "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
                                 "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
                                 "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
                                 "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
                                 "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",    "NVFP4",    "Q1_0"};
  if (t < sizeof(kNames) / sizeof(kNames[0])) return std::string(kNames[t]) + " (type " + std::to_string(t) + ")";
  return "unknown type " + std::to_string(t);
}

const char* ggml_supported_types() {
  return "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K";
}

int ggml_block_elems(uint32_t t) {
  switch (t) {
    case kGgmlF32:
    case kGgmlF16:
    case kGgmlBF16: return 1;
    case kGgmlQ4_0:
    case kGgmlQ4_1:
    case kGgmlQ5_0:
    case kGgmlQ5_1:
    case kGgmlQ8_0: return 32;
    case kGgmlQ2_K:
    case kGgmlQ3_K:
    case kGgmlQ4_K:
    case kGgmlQ5_K:
    case kGgmlQ6_K: return 256;
    default: return 0;
  }
}

int ggml_block_bytes(uint32_t t) {
  switch (t) {
    case kGgmlF32: return 4;
    case kGgmlF16:
    case kGgmlBF16: return 2;
    case kGgmlQ4_0: return 2 + 16;                 // d, qs[16]
    case kGgmlQ4_1: return 2 + 2 + 16;             // d, m, qs[16]
    case kGgmlQ5_0: return 2 + 4 + 16;             // d, qh[4], qs[16]
    case kGgmlQ5_1: return 2 + 2 + 4 + 16;         // d, m, qh[4], qs[16]
    case kGgmlQ8_0: return 2 + 32;                 // d, qs[32]
    case kGgmlQ2_K: return 16 + 64 + 2 + 2;        // scales[16], qs[64], d, dmin
    case kGgmlQ3_K: return 32 + 64 + 12 + 2;       // hmask[32], qs[64], scales[12], d
    case kGgmlQ4_K: return 2 + 2 + 12 + 128;       // d, dmin, scales[12], qs[128]
    case kGgmlQ5_K: return 2 + 2 + 12 + 32 + 128;  // d, dmin, scales[12], qh[32], qs[128]
    case kGgmlQ6_K: return 128 + 64 + 16 + 2;      // ql[128], qh[64], scales[16] (int8), d
    default: return 0;
  }
}

bool ggml_type_supported(uint32_t t) { return ggml_block_elems(t) > 0; }

static inline float f16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return math::half_bits_to_float(v);
}

// Q4_K / Q5_K: eight 6-bit (scale, min) pairs packed into 12 bytes.
static inline void scale_min_k4(int j, const uint8_t* q, int* sc, int* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

static void dequant_block(uint32_t t, const uint8_t* b, float* y) {
  switch (t) {
    case kGgmlQ4_0: {
      const float d = f16_at(b);
      const uint8_t* qs = b + 2;
      for (int j = 0; j < 16; ++j) {
        y[j] = ((qs[j] & 0xF) - 8) * d;
        y[j + 16] = ((qs[j] >> 4) - 8) * d;
      }
      break;
    }
    case kGgmlQ4_1: {
      const float d = f16_at(b), m = f16_at(b + 2);
      const uint8_t* qs = b + 4;
      for (int j = 0; j < 16; ++j) {
        y[j] = (qs[j] & 0xF) * d + m;
        y[j + 16] = (qs[j] >> 4) * d + m;
      }
      break;
    }
    case kGgmlQ5_0:
    case kGgmlQ5_1: {
      const bool has_m = t == kGgmlQ5_1;
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
    case kGgmlQ8_0: {
      const float d = f16_at(b);
      const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
      for (int j = 0; j < 32; ++j) y[j] = qs[j] * d;
      break;
    }
    case kGgmlQ2_K: {
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
    case kGgmlQ3_K: {
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
    case kGgmlQ4_K:
    case kGgmlQ5_K: {
      const bool five = t == kGgmlQ5_K;
      const float d = f16_at(b), dmin = f16_at(b + 2);
      const uint8_t* scales = b + 4;
      const uint8_t* qh = b + 16;
      const uint8_t* ql = b + (five ? 48 : 16);
      int is = 0;
      uint8_t u1 = 1, u2 = 2;
      for (int j = 0; j < 256; j += 64) {
        int sc, mn;
        scale_min_k4(is, scales, &sc, &mn);
        const float d1 = d * sc, m1 = dmin * mn;
        scale_min_k4(is + 1, scales, &sc, &mn);
        const float d2 = d * sc, m2 = dmin * mn;
        for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - m1;
        for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2;
        ql += 32;
        is += 2;
        u1 <<= 2;
        u2 <<= 2;
      }
      break;
    }
    case kGgmlQ6_K: {
      const uint8_t* ql = b;
      const uint8_t* qh = b + 128;
      const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
      const float d = f16_at(b + 208);
      for (int n = 0; n < 256; n += 128) {
        for (int l = 0; l < 32; ++l) {
          const int is = l / 16;
          const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
          const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
          const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
          const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
          y[l] = d * sc[is] * q1;
          y[l + 32] = d * sc[is + 2] * q2;
          y[l + 64] = d * sc[is + 4] * q3;
          y[l + 96] = d * sc[is + 6] * q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
      }
      break;
    }
    default: throw Error("internal: dequant_block on type " + ggml_type_name(t));
  }
}

void ggml_dequantize(uint32_t t, const uint8_t* src, float* dst, int64_t n) {
  if (t == kGgmlF32) {
    std::memcpy(dst, src, (size_t)n * 4);
    return;
  }
  if (t == kGgmlF16 || t == kGgmlBF16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      dst[i] = t == kGgmlBF16 ? math::bf16_bits_to_float(v) : math::half_bits_to_float(v);
    }
    return;
  }
  const int be = ggml_block_elems(t), bb = ggml_block_bytes(t);
  if (!be)
    throw Error("GGUF tensor type " + ggml_type_name(t) + " is not supported (supported: " + ggml_supported_types() +
                ")");
  const int64_t nb = n / be;
#pragma omp parallel for schedule(static) if (nb > 4096)
  for (int64_t i = 0; i < nb; ++i) dequant_block(t, src + i * bb, dst + i * be);
}

}  // namespace focal
