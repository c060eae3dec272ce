// Weights in their stored format: the Backend's default for them (backends that compute only in fp16 / bf16 / fp32
// take them widened or rounded), and the names of the weights modes.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal_kernels/quant.h"
#include "focal_kernels/shared_math.h"

namespace focal {

Weight Backend::upload_weight_stored(const StoredWeight& w) {
  const size_t n = (size_t)w.rows * (size_t)w.cols;
  const bool bf16 = w.type == ops::kQBF16;
  if ((w.type == ops::kQF16 || bf16) && w.row_map.empty() && w.row_bytes == (size_t)w.cols * 2)
    return upload_weight(w.data, bf16 ? WeightType::kBF16 : WeightType::kF16, n);  // 16-bit as stored
  // Quantized blocks (Q4_K, ...) or a strided / row-mapped 16-bit tensor: dequantise blocks of rows to fp32 and
  // round them to 16 bits, the blocks in parallel (the rounding loop on one core made an 8B Q4_K model's CUDA load
  // ~50 s on a 16-core host).
  const ops::QMatrix q = w.view();
  std::unique_ptr<uint16_t[]> h(new uint16_t[n]);  // [rows, cols] in 16 bits; left uninitialised, filled in parallel
  constexpr int64_t kRows = 32;
  const int64_t n_blocks = (w.rows + kRows - 1) / kRows;
  // [threads][kRows * cols] fp32, allocated before the parallel loop (nothing inside it allocates or throws)
  std::vector<std::vector<float>> f(size_t(omp_get_max_threads()), std::vector<float>((size_t)kRows * w.cols));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t b = 0; b < n_blocks; ++b) {
    float* fb = f[size_t(omp_get_thread_num())].data();
    const int64_t r0 = b * kRows, nr = std::min(kRows, w.rows - r0);
    for (int64_t r = 0; r < nr; ++r)  // row by row: dequant_rows's own parallel loop stays off for one row
      ops::dequant_rows(q, r0 + r, 1, fb + (size_t)r * w.cols);
    uint16_t* dst = h.get() + (size_t)r0 * w.cols;
    for (size_t i = 0; i < (size_t)(nr * w.cols); ++i)
      dst[i] = bf16 ? math::float_to_bf16_bits(fb[i]) : math::float_to_half_bits(fb[i]);
  }
  return upload_weight(h.get(), bf16 ? WeightType::kBF16 : WeightType::kF16, n);
}

const char* weights_mode_name(WeightsMode m) { return m == WeightsMode::kFp32 ? "fp32" : "native"; }

WeightsMode parse_weights_mode(const std::string& s) {
  if (s == "native") return WeightsMode::kNative;
  if (s == "fp32") return WeightsMode::kFp32;
  throw Error("weights", "'" + s + "' is not one of native, fp32");
}

}  // namespace focal
