// The stored types' facts and kernels, one QTypeInfo row per type (kernels-internal; the table is in
// quant_generic.cpp, beside the generic kernels it points to), and the kernels of each instruction set:
//   quant_generic.cpp  block dequantisation and the generic fused kernel (compiled for the baseline, AVX2 and
//                      x86-64-v4, picked at load time), the split of x into digits, the table;
//   quant_avx2.cpp     hand-written AVX2 + FMA + F16C row kernels (and the split); quant_avx2_panels.cpp: the same
//                      level's panel kernels;
//   quant_avx512.cpp   hand-written AVX-512 VNNI kernels (and the vectorised split);
//   quant_gemm.cpp     prefill's blocked fp32 product (AVX-512 and AVX2 register tiles);
//   quant_cpu.cpp      what the CPU has, the level FOCAL_QUANT_ISA / set_quant_isa allow, and which kernel runs.
// The ISA kernels run only where quant_cpu.cpp found the instructions they use.
#pragma once

#include <cstdint>

#include "focal_kernels/quant.h"
#include "focal_kernels/quant_blocks.h"
#include "quant_digits.h"
#include "target_isa.h"

namespace focal::ops {

// dst[n] = n values of one type (n a multiple of its block_values) from src.
using Dequant = void(const uint8_t* src, float* dst, int64_t n);
using DequantFn = Dequant*;
// Rows r0..r1 of y[M, w.rows] = x[M, cols] . w^T for the M of the kernel; xsum16[M, cols / 16]: sums of x over
// each 16 values (read by the kernels of types with a min).
using RowsFn = void (*)(const float* x, const float* xsum16, const QMatrix& w, float* y, int64_t r0, int64_t r1);
// The RowsFn for m rows of x (1..kFusedMaxRows).
using RowsForFn = RowsFn (*)(int m);
// y[r] for rows r0..r1 of w and one row of x in digits.
using DigitRowsFn = void (*)(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t r0, int64_t r1);
// y[16 p0 .. 16 p1) for panels p0..p1 of a panel matrix and one row of x in digits (natural order, groups of the
// type's block: 32 values, Q4_K's and Q5_K's 256).
using PanelRowsFn = void (*)(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1);

// Bytes of one block of the formats with a decode kernel, at compile time: qblocks' formats, and Q2_K (scales, qs, d,
// dmin) and Q3_K (hmask, qs, scales, d), which only the CPU reads natively. The table (quant_generic.cpp) uses these.
constexpr int kernel_block_bytes(int type) {
  return type == kQ2_K ? 16 + 64 + 2 + 2 : type == kQ3_K ? 32 + 64 + 12 + 2 : qblocks::block_bytes(type);
}

// Where the fields of a K-format block sit, in bytes from its start (-1: none), for the decode kernels of
// quant_avx2.cpp and quant_avx512.cpp: the low quants (Q6_K: ql), the high bits (Q3_K hmask, Q5_K qh, Q6_K qh), the
// scales (Q2_K scale | min << 4 bytes, Q3_K / Q4_K / Q5_K packed 6-bit, Q6_K int8), d and dmin (fp16).
struct KBlockLayout {
  int qs, high, scales, d, dmin;
};
constexpr KBlockLayout k_block_layout(int type) {
  switch (type) {
    case kQ2_K: return {16, -1, 0, 80, 82};
    case kQ3_K: return {32, 0, 96, 108, -1};
    case kQ4_K: return {16, -1, 4, 0, 2};
    case kQ5_K: return {48, 16, 4, 0, 2};
    case kQ6_K: return {0, 128, 192, 208, -1};
    default: return {-1, -1, -1, -1, -1};
  }
}

struct QTypeInfo {
  int type;          // QType (ggml's number)
  int block_values;  // values per block: 1 (F32, F16, BF16), 32, or 256 (K formats)
  int block_bytes;
  bool has_min;  // values are d q + m (Q4_1, Q5_1) or d sc q - dmin mn (Q2_K, Q4_K, Q5_K)
  // Byte offsets in a block of the fp16 fields that can hold NaN or Inf (scale d, then the min), -1: none; bf16
  // values for BF16. inf_exp: their exponent bits, all set for NaN and Inf.
  int16_t nonfinite_at[2];
  uint16_t inf_exp;
  DequantFn dequant;    // generic, compiled for the baseline, AVX2 and x86-64-v4
  RowsForFn avx2_rows;  // AVX2 + FMA + F16C, 1..kFusedMaxRows rows of x; null: none
  // Kernels for one row of x split into digits with digit_group and digit_order: AVX2 and AVX-512 VNNI; null: none.
  DigitRowsFn avx2_digit_rows;
  DigitRowsFn vnni_rows;
  int digit_group;
  digits::Order digit_order;
  PanelRowsFn panel_rows;       // AVX-512 VNNI over the panel layout (pack_panels); null: the type has no panel layout
  PanelRowsFn avx2_panel_rows;  // AVX2 over the same layout; null: none (panels are then packed only with VNNI)
};

// The row of `type`; null for a type the kernels do not know.
const QTypeInfo* qtype_info(int type);

// ---- quant_generic.cpp ----
// Rows r0..r1 of y[m, w.rows] = x[m, cols] . w^T through the type's generic dequantiser, any m up to kFusedMaxRows.
void generic_rows(const float* x, const QMatrix& w, float* y, int m, int64_t r0, int64_t r1);

// ---- quant_avx2.cpp and quant_avx2_panels.cpp (declared with their ISA: GCC keeps a template's target from its
// first declaration) ----
template <int T>
RowsFn avx2_rows(int m);  // Q4_0, Q4_1, Q8_0, Q4_K, Q6_K, F16, BF16
// Q4_0 and Q4_1 with x in digits of group 64, nibble-pair order (the digits b32_rows_vnni reads).
template <int T>
FOCAL_AVX2 void b32_digit_rows_avx2(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t r0, int64_t r1);
// Q2_K, Q3_K, Q4_K, Q5_K and Q6_K with x in digits of group 256, natural order.
template <int T>
FOCAL_AVX2 void kquant_digit_rows_avx2(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t r0, int64_t r1);

// Q4_0 and Q4_1 over the panel layout with x in digits of group 32, natural order (the digits panels_vnni reads).
template <int T>
FOCAL_AVX2 void panels_avx2(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1);
// Q8_0 over the panel layout with x in digits of group 32, natural order, widened to int16 (digits::widen16).
FOCAL_AVX2 void panels_q8_avx2(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1);
// Q4_K and Q5_K over their panel layout (K4Panel) with x in digits of group 256, natural order.
template <int T>
FOCAL_AVX2 void panels_k4_avx2(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1);
// Row l of a Q4_K / Q5_K panel matrix's blocks from panel P (nb blocks), dequantised (quant_panels.cpp's
// dequant_panel_row_k4).
template <int T>
FOCAL_AVX2 void dequant_panel_row_k4_avx2(const uint8_t* P, int l, int64_t nb, float* dst);
// Q2_K and Q3_K over their panel layout (K23Panel) with x in digits of group 256, natural order.
template <int T>
FOCAL_AVX2 void panels_k23_avx2(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1);
// Row l of a Q2_K / Q3_K panel matrix's blocks from panel P (nb blocks), dequantised (quant_panels.cpp's
// dequant_panel_row_k23).
template <int T>
FOCAL_AVX2 void dequant_panel_row_k23_avx2(const uint8_t* P, int l, int64_t nb, float* dst);
// Q6_K over its panel layout (Q6Panel) with x in digits of group 256, natural order.
FOCAL_AVX2 void panels_q6_avx2(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1);
// digits::split's groups and block sums, 8 values per step (the same digits as split_groups_avx512).
FOCAL_AVX2 void split_groups_avx2(const float* x, int64_t cols, int group, digits::Order order, digits::XDigits* xd);

// ---- quant_avx512.cpp ----
template <int T>
FOCAL_AVX512 void b32_rows_vnni(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t r0,
                                int64_t r1);  // Q4_0, Q4_1, Q8_0
template <int T>
FOCAL_AVX512 void kquant_rows_vnni(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t r0,
                                   int64_t r1);  // Q2_K .. Q6_K (digits of group 256, natural order)
template <int T>
FOCAL_AVX512 void panels_vnni(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1);
template <int T>
FOCAL_AVX512 void panels_k4_vnni(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0,
                                 int64_t p1);  // Q4_K, Q5_K (K4Panel), digits of group 256, natural order
FOCAL_AVX512 void panels_q6_vnni(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0,
                                 int64_t p1);  // Q6_K (Q6Panel), digits of group 256, natural order
template <int T>
FOCAL_AVX512 void panels_k23_vnni(const digits::XDigits& xd, const QMatrix& w, float* y, int64_t p0,
                                  int64_t p1);  // Q2_K, Q3_K (K23Panel), digits of group 256, natural order
// digits::split's groups and block sums, 16 values per step (the same digits as split_groups_avx2).
FOCAL_AVX512 void split_groups_avx512(const float* x, int64_t cols, int group, digits::Order order,
                                      digits::XDigits* xd);

// A panel block (quant.h: pack_panels): kPanelRows rows' block j as [scales][mins (Q4_1)][quants]; where the quants
// start.
constexpr int panel_quant_offset(int type) { return type == kQ4_1 ? 64 : 32; }
// A Q4_K / Q5_K panel block (16 rows' block j; 2304 / 2816 bytes): the rows' fp16 d, then dmin (2 bytes a row), their
// 12 scale bytes as three words (word w of row l at kScales + 64 w + 4 l: one vector load gives one word of every
// row, as k4_scales_mins reads them), Q5_K's fifth bits (sub-block s, row l: 4 bytes at kHigh + 64 s + 4 l, byte i's
// bit 2c the fifth bit of value 8c + i, bit 2c + 1 that of value 8c + 4 + i), then the quants sub-block by
// sub-block: sub-block s, chunk c (values 8c .. 8c + 7), row l at quants(T) + 256 s + 64 c + 4 l, values 8c .. 8c + 3
// in the low nibbles, 8c + 4 .. 8c + 7 in the high ones (the chunks of the Q4_0 panels).
struct K4Panel {
  static constexpr int kD = 0, kDmin = 32, kScales = 64, kHigh = 256;
  static constexpr int quants(int type) { return type == kQ5_K ? 768 : 256; }
};
static_assert(K4Panel::quants(kQ4_K) + 8 * 256 == kPanelRows * qblocks::block_bytes(kQ4_K), "a Q4_K panel block");
static_assert(K4Panel::quants(kQ5_K) + 8 * 256 == kPanelRows * qblocks::block_bytes(kQ5_K), "a Q5_K panel block");
// A Q6_K panel block (16 rows' block j; 3360 bytes): the rows' fp16 d, their 16 int8 scales as four words (word w of
// row l at kScales + 64 w + 4 l, byte i the scale of sub-block 4 w + i: one vector load gives four sub-blocks' scales
// of every row), then per sub-block s of 16 values the high two bits (row l: 4 bytes at kHigh + 64 s + 4 l, byte i's
// bits 2k, 2k + 1 those of value 4k + i) and the low four (chunk c of 8 values, row l at kQuants + 128 s + 64 c + 4 l:
// values 8c .. 8c + 3 in the low nibbles, 8c + 4 .. 8c + 7 in the high ones, as in the other 4-bit panels).
struct Q6Panel {
  static constexpr int kD = 0, kScales = 32, kHigh = 288, kQuants = 1312;
};
static_assert(Q6Panel::kQuants + 16 * 128 == kPanelRows * qblocks::block_bytes(kQ6_K), "a Q6_K panel block");
// A Q2_K / Q3_K panel block (16 rows' block j; 1344 / 1760 bytes): the rows' fp16 d, Q2_K's dmin, their scale bytes as
// words (word w of row l at scales(T) + 64 w + 4 l: Q2_K's 16 scale | min << 4 bytes in four words, byte i of word
// w for sub-block 4 w + i; Q3_K's 12 bytes of packed 6-bit scales in three, as stored), Q3_K's high bits (sub-blocks
// s and s + 1, s even, row l: 4 bytes at kHigh + 64 (s / 2) + 4 l, byte i's bit k + 4 (s % 2) the high bit of value
// 4k + i of sub-block s), then per sub-block s of 16 values the low two bits (row l: 4 bytes at quants(T) + 64 s + 4 l,
// byte i's bits 2k, 2k + 1 those of value 4k + i).
struct K23Panel {
  static constexpr int kD = 0, kDmin = 32, kHigh = 224;  // kDmin: Q2_K; kHigh: Q3_K
  static constexpr int scales(int type) { return type == kQ2_K ? 64 : 32; }
  static constexpr int quants(int type) { return type == kQ2_K ? 320 : 736; }
};
static_assert(K23Panel::quants(kQ2_K) == K23Panel::scales(kQ2_K) + 4 * 64, "Q2_K's scale words");
static_assert(K23Panel::kHigh == K23Panel::scales(kQ3_K) + 3 * 64 &&
                  K23Panel::quants(kQ3_K) == K23Panel::kHigh + 8 * 64,
              "Q3_K's scale words and high bits");
static_assert(K23Panel::quants(kQ2_K) + 16 * 64 == kPanelRows * kernel_block_bytes(kQ2_K), "a Q2_K panel block");
static_assert(K23Panel::quants(kQ3_K) + 16 * 64 == kPanelRows * kernel_block_bytes(kQ3_K), "a Q3_K panel block");
// dst[nr, cols] = rows r0 .. r0 + nr - 1 of a panel matrix (Q4_0, Q4_1, Q8_0, Q2_K .. Q6_K), dequantised from the
// panels as dequant_rows would from the rows as stored (quant_panels.cpp).
void dequant_panel_rows(const QMatrix& w, int64_t r0, int64_t nr, float* dst);
// y[nb * block values] = blocks b0 .. b0 + nb - 1 of row r of a panel matrix, dequantised.
void dequant_panel_blocks(const QMatrix& w, int64_t r, int64_t b0, int64_t nb, float* y);

// ---- quant_gemm.cpp ----
// Whether qgemm takes y = x . w^T for m rows of x at kernel level `isa`: more rows than the fused kernels (or than
// one, for panels, which the fused kernels do not read), a format of 32-value or larger blocks, and AVX2 + FMA.
bool qgemm_runs(const QMatrix& w, int m, QuantIsa isa);
// y[m, w.rows] = x[m, w.cols] . w^T, fp32 products and sums (AVX-512 where `isa` and the CPU allow it, else AVX2).
void qgemm(const float* x, const QMatrix& w, float* y, int m, QuantIsa isa);

// ---- quant_cpu.cpp ----
// The decode kernels' prefetch distance in bytes: `resident` while the held weights fit the last-level cache; past it
// 2 KiB, or 8 KiB for the K formats (`k_formats`) on AMD Zen 5 and later; FOCAL_DECODE_PREFETCH=BYTES sets the
// streamed distance (quant.h: note_held_weight_bytes).
size_t decode_prefetch_ahead(size_t resident, bool k_formats);
bool cpu_has_avx2();         // AVX2, FMA and F16C
bool cpu_has_avx512_vnni();  // AVX-512 F, BW, VL, DQ with VNNI, and FMA

}  // namespace focal::ops
