// Decode products with x in three int8 digits (kernels-internal): the split of x (quant_generic.cpp) that the digit
// kernels of quant_avx2.cpp and quant_avx512.cpp read (quant_types.h).
//
// x is split per group of g values (g = 64 for the 32-value formats, 256 for the K formats) into
// x = s (d2 65536 + d1 256 + d0) with int8 digits, |x / s| <= 127 * 65536: x is held to 2^-24 of the group's largest
// |x|, i.e. to fp32 precision. A block's dot with its integer quants is then three exact integer products, and only
// one sum per lane becomes a float, so the products are as exact as the fp32-dequantised reference's.
#pragma once

#include <cstdint>
#include <vector>

namespace focal::ops::digits {

// Value order of the digits within each group.
enum class Order {
  kNatural,     // x's own order
  kNibblePairs  // per pair of 32-value blocks A, B: A 0..15, B 0..15, A 16..31, B 16..31 (the order in which one
                // 32-byte load of both blocks' nibbles, low nibbles then high, lays them out)
};

// Lives in a thread-local buffer; resized, never shrunk.
struct XDigits {
  std::vector<int8_t> d[3];     // [padded cols] digits d0, d1, d2 (zero past cols, up to a whole group)
  std::vector<float> scale;     // [groups] s per group
  std::vector<float> sum32;     // [padded cols / 32] fp32 sums of x over each 32 values (rounded from double), 0 past
                                // cols
  std::vector<float> sum16;     // [padded cols / 16] the same over each 16 values (Q6_K's scale groups)
  std::vector<int16_t> w16[2];  // [padded cols] the same v as two int16 digits, v = w1 65536 + w0 (widen16; read by
                                // Q8_0's AVX2 panels, whose unsigned quants would saturate vpmaddubsw's int8 pairs)
  int group = 0;
};

// Position, within its group, of the value at offset j of the group (Order::kNibblePairs permutes each 64).
inline int64_t placed(Order order, int64_t j) {
  if (order == Order::kNatural) return j;
  const int64_t blk = j / 32, k = j % 32;  // block A (0) or B (1) of the pair, value k
  return (k / 16) * 32 + blk * 16 + k % 16;
}

// Splits x[cols] (cols a multiple of 32) into xd: each group's s = max |x| / (127 * 65536), v = x * (1 / s) rounded
// to nearest even and clamped to +-127 * 65536, its digits d0 = v's low byte as int8, d1 the next of (v - d0) / 256,
// d2 the rest; the block sums in double, rounded to float. With AVX-512 VNNI where avx512 is set, else with AVX2
// (the same digits); only for CPUs with AVX2, where the digit kernels run.
void split(const float* x, int64_t cols, int group, Order order, bool avx512, XDigits* xd);

// After split of cols values: xd's v = d2 65536 + d1 256 + d0 of each (up to a whole group) as w0 = v's low 16 bits
// as int16 and w1 = (v - w0) / 65536 (|w1| <= 128), exactly.
void widen16(int64_t cols, XDigits* xd);

}  // namespace focal::ops::digits
