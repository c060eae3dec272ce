// Rows on demand (long prompts, past AppState::dense_rows_max_tokens): a side's rows are not held as [T, T]; each
// row's normaliser over the run's stored raw scores is computed on the view worker, and a panel reads a row, one
// probability, a key range's maximum or B - A's cells from them (HeadRows::row, at, max_in, diff2d).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "app_state.h"

namespace focalscope {

// Every row's metrics M [T, kNumRowMetrics] and normaliser N [T], no [T, T] rows, and the heatmap's b x b cells
// pooled2d[kHeatPoolLevels] (from each row's max over blocks of 8 keys). False when cancelled.
bool compute_head_norms(const RowSource& src, int layer, int head, std::vector<RowNorm>& N, std::vector<float>& M,
                        std::vector<float>* pooled2d /* [kHeatPoolLevels] */, const std::function<bool()>& cancelled);

// Whether a side's rows can be computed on demand: the offset of row 0 when its run stores the raw scores of
// (layer, head) for every query, row q at that offset + q * T; else -1.
std::ptrdiff_t raw_rows_offset(const focal::RunCapture& r, int layer, int head, int T);

}  // namespace focalscope
