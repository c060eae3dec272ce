// Small helpers of the app core shared by its files (app_state.cpp, preview.cpp).
#pragma once

#include <algorithm>
#include <vector>

namespace focalscope {

// Position of x in v, or -1 (a run's stored layers / heads / queries).
inline int index_of(const std::vector<int>& v, int x) {
  auto it = std::find(v.begin(), v.end(), x);
  return it == v.end() ? -1 : (int)(it - v.begin());
}

}  // namespace focalscope
