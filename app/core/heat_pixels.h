// The heatmap's pixels (app/ui's heatmap panel draws them; here so that they are tested without a window): the
// view's block of the selected head's rows, max-pooled to w x h texels, coloured.
#pragma once

#include <cstdint>
#include <vector>

#include "app_state.h"

namespace focalscope {

// The heatmap's view: keys [k0, k1) by query rows [q0, q1) of a prompt of T tokens (zoom and pan).
struct HeatView {
  double k0 = 0, k1 = 0, q0 = 0, q1 = 0;
  int T = 0;
};

// Builds the RGBA pixels of the heatmap view into out (w x h texels, max-pooled so single peaks stay visible).
// Returns the value at the top of the linear scale (the largest p, or |B - A|, in view), or -1 when B - A at this
// zoom needs cells that are not there yet. texels, if given: [h, w] each texel's max-pooled value (signed for B - A;
// 0 where masked). log_used, if given: whether p was coloured by log10 p (st.view.heat_color, auto resolved on the
// texels shown: more than half the texel rows past query 0 peak below 0.1 of the largest p).
float build_heat_pixels(const AppState& st, const HeadRows& rows, const HeatView& v, int w, int h,
                        std::vector<uint8_t>& out, std::vector<float>* texels = nullptr, bool* log_used = nullptr);

}  // namespace focalscope
