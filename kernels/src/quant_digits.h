// Decode products with x in three int8 digits (kernels-internal; quant_digits.cpp, used by quant_cpu.cpp).
//
// x is split per group of g values (g = 64 for the 32-value formats, 256 for the K formats) into
// x = s (d2 65536 + d1 256 + d0) with int8 digits, |x / s| <= 127 * 65536: x is held to 2^-24 of the group's largest
// |x|, i.e. to fp32 precision. A block's dot with its integer quants is then three exact integer products, and only
// one sum per lane becomes a float, so the products are as exact as the fp32-dequantised reference's.
#pragma once

#include <cstdint>
#include <vector>

#include "focal_kernels/quant.h"

namespace focal::ops::digits {

// Value order of the digits within each group.
enum class Order {
  kNatural,     // x's own order
  kNibblePairs  // per pair of 32-value blocks A, B: A 0..15, B 0..15, A 16..31, B 16..31 (the order in which one
                // 32-byte load of both blocks' nibbles, low nibbles then high, lays them out)
};

// Lives in a thread-local buffer; resized, never shrunk.
struct XDigits {
  std::vector<int8_t> d[3];  // [padded cols] digits d0, d1, d2 (zero past cols, up to a whole group)
  std::vector<float> scale;  // [groups] s per group
  std::vector<float> sum32;  // [padded cols / 32] fp32 sums of x over each 32 values (rounded from double), 0 past
                             // cols
  int group = 0;
};

// Splits x[cols] (cols a multiple of 32) into xd; avx512: vectorised where the CPU has AVX-512 (same digits).
void split(const float* x, int64_t cols, int group, Order order, bool avx512, XDigits* xd);

// y[r] for rows r0..r1 of a Q4_K matrix and one row of x split with group 256, natural order. AVX2.
void q4k_rows_avx2(const XDigits& xd, const QMatrix& w, float* y, int64_t r0, int64_t r1);

// AVX-512 (F, BW, VL, DQ) with VNNI: present on this CPU?
bool has_avx512_vnni();
// Whether a VNNI decode kernel exists for type t: Q4_0, Q4_1, Q8_0 (x split with group 64: nibble pairs for the
// 4-bit formats, natural for Q8_0) and Q4_K (group 256, natural).
bool vnni_kernel(int t);
int vnni_group(int t);
Order vnni_order(int t);
void vnni_rows(int t, const XDigits& xd, const QMatrix& w, float* y, int64_t r0, int64_t r1);
// y[16 p0 .. 16 p1) for a panel matrix (quant.h: pack_panels) of Q4_0, Q4_1 or Q8_0 and one row of x split with
// group 32, natural order (quant_panels.cpp). AVX-512 VNNI.
void panel_rows(int t, const XDigits& xd, const QMatrix& w, float* y, int64_t p0, int64_t p1);

}  // namespace focal::ops::digits
