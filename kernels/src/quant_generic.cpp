// The generic (scalar) quant kernels, compiled for the baseline, AVX2 and x86-64-v4 ISAs and picked at load time
// (FOCAL_TARGET_CLONES): each type's block dequantisation (ggml's layouts; the formats the CUDA kernels read too
// through quant_blocks.h), the fused kernel that dots dequantised blocks with x, and the split of x into digits. Also
// the QTypeInfo table (quant_types.h), here because it points to these functions: a target_clones function is
// declared with its attribute and used only in the file that defines it (GCC and clang each resolve it there).
#include <algorithm>
#include <cstring>

#include "focal_kernels/quant_blocks.h"
#include "focal_kernels/shared_math.h"
#include "quant_types.h"
#include "target_isa.h"

namespace focal::ops {

namespace {

// Each type's dequantiser (Dequant), defined below; the table points to them.
FOCAL_TARGET_CLONES Dequant dequant_f32, dequant_f16, dequant_bf16, dequant_q4_0, dequant_q4_1, dequant_q5_0,
    dequant_q5_1, dequant_q8_0, dequant_q2_k, dequant_q3_k, dequant_q4_k, dequant_q5_k, dequant_q6_k;

using digits::Order;

// One row per stored type. bytes: the sizes of the block's fields, named after the row; nonfinite_at: the block's
// fp16 scale d, then its min (dmin).
// clang-format off
constexpr QTypeInfo kQTypes[] = {
    // type  values bytes                has_min nonfinite_at inf_exp dequant
    //   avx2_rows           avx2_digit_rows       vnni_rows              digit_group, _order  panel_rows
    //   avx2_panel_rows
    {kQF32,  1,   4,                     false, {-1, -1},  0,       &dequant_f32,
     nullptr,            nullptr,              nullptr,               0,   Order::kNatural,     nullptr, nullptr},
    {kQF16,  1,   2,                     false, {0, -1},   0x7C00u, &dequant_f16,
     &avx2_rows<kQF16>,  nullptr,              nullptr,               0,   Order::kNatural,     nullptr, nullptr},
    {kQBF16, 1,   2,                     false, {0, -1},   0x7F80u, &dequant_bf16,
     &avx2_rows<kQBF16>, nullptr,              nullptr,               0,   Order::kNatural,     nullptr, nullptr},
    {kQ4_0,  32,  2 + 16,                false, {0, -1},   0x7C00u, &dequant_q4_0,  // d, qs
     &avx2_rows<kQ4_0>,  &b32_digit_rows_avx2<kQ4_0>, &b32_rows_vnni<kQ4_0>, 64, Order::kNibblePairs, &panels_vnni<kQ4_0>,
     &panels_avx2<kQ4_0>},
    {kQ4_1,  32,  2 + 2 + 16,            true,  {0, 2},    0x7C00u, &dequant_q4_1,  // d, m, qs
     &avx2_rows<kQ4_1>,  &b32_digit_rows_avx2<kQ4_1>, &b32_rows_vnni<kQ4_1>, 64, Order::kNibblePairs, &panels_vnni<kQ4_1>,
     &panels_avx2<kQ4_1>},
    {kQ5_0,  32,  2 + 4 + 16,            false, {0, -1},   0x7C00u, &dequant_q5_0,  // d, qh, qs
     nullptr,            nullptr,              nullptr,               0,   Order::kNatural,     nullptr, nullptr},
    {kQ5_1,  32,  2 + 2 + 4 + 16,        true,  {0, 2},    0x7C00u, &dequant_q5_1,  // d, m, qh, qs
     nullptr,            nullptr,              nullptr,               0,   Order::kNatural,     nullptr, nullptr},
    {kQ8_0,  32,  2 + 32,                false, {0, -1},   0x7C00u, &dequant_q8_0,  // d, qs
     &avx2_rows<kQ8_0>,  nullptr,              &b32_rows_vnni<kQ8_0>, 64,  Order::kNatural,     &panels_vnni<kQ8_0>,
     &panels_q8_avx2},
    {kQ2_K,  256, kernel_block_bytes(kQ2_K), true,  {80, 82},  0x7C00u, &dequant_q2_k,  // scales, qs, d, dmin
     nullptr,            &kquant_digit_rows_avx2<kQ2_K>, &kquant_rows_vnni<kQ2_K>, 256, Order::kNatural, &panels_k23_vnni<kQ2_K>,
     &panels_k23_avx2<kQ2_K>},
    {kQ3_K,  256, kernel_block_bytes(kQ3_K), false, {108, -1}, 0x7C00u, &dequant_q3_k,  // hmask, qs, scales, d
     nullptr,            &kquant_digit_rows_avx2<kQ3_K>, &kquant_rows_vnni<kQ3_K>, 256, Order::kNatural, &panels_k23_vnni<kQ3_K>,
     &panels_k23_avx2<kQ3_K>},
    {kQ4_K,  256, 2 + 2 + 12 + 128,      true,  {0, 2},    0x7C00u, &dequant_q4_k,  // d, dmin, scales, qs
     &avx2_rows<kQ4_K>,  &kquant_digit_rows_avx2<kQ4_K>, &kquant_rows_vnni<kQ4_K>, 256, Order::kNatural, &panels_k4_vnni<kQ4_K>,
     &panels_k4_avx2<kQ4_K>},
    {kQ5_K,  256, 2 + 2 + 12 + 32 + 128, true,  {0, 2},    0x7C00u, &dequant_q5_k,  // d, dmin, scales, qh, qs
     nullptr,            &kquant_digit_rows_avx2<kQ5_K>, &kquant_rows_vnni<kQ5_K>, 256, Order::kNatural, &panels_k4_vnni<kQ5_K>,
     &panels_k4_avx2<kQ5_K>},
    {kQ6_K,  256, 128 + 64 + 16 + 2,     false, {208, -1}, 0x7C00u, &dequant_q6_k,  // ql, qh, scales (int8), d
     &avx2_rows<kQ6_K>,  &kquant_digit_rows_avx2<kQ6_K>, &kquant_rows_vnni<kQ6_K>, 256, Order::kNatural, &panels_q6_vnni,
     &panels_q6_avx2},
};
// clang-format on

constexpr const QTypeInfo* find(int type) {
  for (const QTypeInfo& q : kQTypes)
    if (q.type == type) return &q;
  return nullptr;
}

// The formats quant_blocks.h defines for both backends: the same block sizes there.
constexpr bool agrees_with_qblocks() {
  for (const QTypeInfo& q : kQTypes)
    if (qblocks::sub32_supported(q.type) &&
        (qblocks::block_values(q.type) != q.block_values || qblocks::block_bytes(q.type) != q.block_bytes))
      return false;
  return true;
}
static_assert(agrees_with_qblocks(), "kQTypes and quant_blocks.h disagree on a block size");

// ---- block dequantisation ----

inline float f16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return math::half_bits_to_float(v);
}

// The blocks of type T in src[n values], each decoded by Block(block, values).
template <int T, void (*Block)(const uint8_t*, float*)>
inline void blocks(const uint8_t* src, float* dst, int64_t n) {
  constexpr int kValues = find(T)->block_values, kBytes = find(T)->block_bytes;
  for (int64_t i = 0; i < n / kValues; ++i) Block(src + i * kBytes, dst + i * kValues);
}

// The formats the CUDA kernels read too: one definition of their math (quant_blocks.h).
template <int T>
inline void sub32(const uint8_t* b, float* y) {
  for (int sub = 0; sub < qblocks::block_values(T) / 32; ++sub) qblocks::dequant_sub32(T, b, sub, y + 32 * sub);
}

FOCAL_TARGET_CLONES void dequant_q4_0(const uint8_t* s, float* d, int64_t n) { blocks<kQ4_0, sub32<kQ4_0>>(s, d, n); }
FOCAL_TARGET_CLONES void dequant_q4_1(const uint8_t* s, float* d, int64_t n) { blocks<kQ4_1, sub32<kQ4_1>>(s, d, n); }
FOCAL_TARGET_CLONES void dequant_q8_0(const uint8_t* s, float* d, int64_t n) { blocks<kQ8_0, sub32<kQ8_0>>(s, d, n); }
FOCAL_TARGET_CLONES void dequant_q4_k(const uint8_t* s, float* d, int64_t n) { blocks<kQ4_K, sub32<kQ4_K>>(s, d, n); }
FOCAL_TARGET_CLONES void dequant_q5_k(const uint8_t* s, float* d, int64_t n) { blocks<kQ5_K, sub32<kQ5_K>>(s, d, n); }
FOCAL_TARGET_CLONES void dequant_q6_k(const uint8_t* s, float* d, int64_t n) { blocks<kQ6_K, sub32<kQ6_K>>(s, d, n); }

template <bool kMin>  // Q5_1 (d, m), else Q5_0
inline void block_q5(const uint8_t* b, float* y) {
  const float d = f16_at(b), m = kMin ? f16_at(b + 2) : 0.0f;
  const uint8_t* p = b + (kMin ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const uint8_t* qs = p + 4;
  for (int j = 0; j < 16; ++j) {
    const int hi0 = (qh >> j) & 1, hi1 = (qh >> (j + 16)) & 1;
    const int q0 = (qs[j] & 0xF) | (hi0 << 4), q1 = (qs[j] >> 4) | (hi1 << 4);
    if (kMin) {
      y[j] = q0 * d + m;
      y[j + 16] = q1 * d + m;
    } else {
      y[j] = (q0 - 16) * d;
      y[j + 16] = (q1 - 16) * d;
    }
  }
}

FOCAL_TARGET_CLONES void dequant_q5_0(const uint8_t* s, float* d, int64_t n) {
  blocks<kQ5_0, block_q5<false>>(s, d, n);
}
FOCAL_TARGET_CLONES void dequant_q5_1(const uint8_t* s, float* d, int64_t n) { blocks<kQ5_1, block_q5<true>>(s, d, n); }

inline void block_q2k(const uint8_t* b, float* y) {
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
}

FOCAL_TARGET_CLONES void dequant_q2_k(const uint8_t* s, float* d, int64_t n) { blocks<kQ2_K, block_q2k>(s, d, n); }

inline void block_q3k(const uint8_t* b, float* y) {
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
}

FOCAL_TARGET_CLONES void dequant_q3_k(const uint8_t* s, float* d, int64_t n) { blocks<kQ3_K, block_q3k>(s, d, n); }

FOCAL_TARGET_CLONES void dequant_f32(const uint8_t* src, float* dst, int64_t n) {
  std::memcpy(dst, src, (size_t)n * 4);
}

FOCAL_TARGET_CLONES void dequant_f16(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_at(src + 2 * i);
}

FOCAL_TARGET_CLONES void dequant_bf16(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t v;
    std::memcpy(&v, src + 2 * i, 2);
    dst[i] = math::bf16_bits_to_float(v);
  }
}

// ---- generic fused kernel: a block dequantised into a stack tile, dotted with every row of x ----

// Eight partial sums per dot keep the loop vectorisable without reassociation.
FOCAL_TARGET_CLONES void fused_rows_generic(const float* x, const QMatrix& w, float* y, int m, int64_t r0, int64_t r1) {
  const QTypeInfo& q = *find(w.type);
  const int64_t cols = w.cols;
  const int be = std::max(q.block_values, 32), bb = q.block_bytes * (be / q.block_values);
  alignas(64) float tile[256];
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w.row(r);
    float acc[kFusedMaxRows][8] = {};
    for (int64_t c0 = 0; c0 < cols; c0 += be) {
      // be values (one K block, one 32-block, or 32 scalars); a row of scalars may end in a shorter piece
      const int nv = (int)std::min<int64_t>(be, cols - c0);
      q.dequant(row + (c0 / be) * bb, tile, nv);
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

}  // namespace

const QTypeInfo* qtype_info(int type) { return find(type); }

void generic_rows(const float* x, const QMatrix& w, float* y, int m, int64_t r0, int64_t r1) {
  fused_rows_generic(x, w, y, m, r0, r1);
}

// ---- x in digits ----

void digits::split(const float* x, int64_t cols, int group, Order order, bool avx512, XDigits* xd) {
  const int64_t groups = (cols + group - 1) / group, padded = groups * group;
  for (auto& d : xd->d) {  // the last group zeroed first: its values may be placed past cols, its pad before
    if ((int64_t)d.size() < padded) d.resize((size_t)padded);
    std::fill(d.begin() + (groups - 1) * group, d.begin() + padded, (int8_t)0);
  }
  if ((int64_t)xd->scale.size() < groups) xd->scale.resize((size_t)groups);
  if ((int64_t)xd->sum32.size() < padded / 32) xd->sum32.resize((size_t)(padded / 32));
  std::fill(xd->sum32.begin() + cols / 32, xd->sum32.begin() + padded / 32, 0.0f);
  if ((int64_t)xd->sum16.size() < padded / 16) xd->sum16.resize((size_t)(padded / 16));
  std::fill(xd->sum16.begin() + cols / 16, xd->sum16.begin() + padded / 16, 0.0f);
  xd->group = group;
  // the digit kernels run only where the CPU has AVX2 (quant_cpu.cpp), so the split is always vectorised
  if (avx512 && cpu_has_avx512_vnni())
    split_groups_avx512(x, cols, group, order, xd);
  else
    split_groups_avx2(x, cols, group, order, xd);
}

void digits::widen16(int64_t cols, XDigits* xd) {
  const size_t n = (size_t)((cols + xd->group - 1) / xd->group * xd->group);
  for (auto& w : xd->w16)
    if (w.size() < n) w.resize(n);
  const int8_t *d0 = xd->d[0].data(), *d1 = xd->d[1].data(), *d2 = xd->d[2].data();
  int16_t *w0 = xd->w16[0].data(), *w1 = xd->w16[1].data();
  for (size_t i = 0; i < n; ++i) {
    const int32_t v = d2[i] * 65536 + d1[i] * 256 + d0[i];
    const int16_t lo = (int16_t)(uint16_t)((uint32_t)v & 0xFFFFu);
    w0[i] = lo;
    w1[i] = (int16_t)((v - lo) / 65536);
  }
}

}  // namespace focal::ops
