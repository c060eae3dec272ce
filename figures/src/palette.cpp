// The colour tables behind palette.h, interpolated linearly in sRGB between their stops.
#include "palette.h"

#include <cctype>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace focal::figures {
namespace {

Rgb hex(uint32_t v) { return {((v >> 16) & 0xFF) / 255.0, ((v >> 8) & 0xFF) / 255.0, (v & 0xFF) / 255.0}; }

Rgb lerp_table(const uint32_t* table, int n, double t) {
  if (!(t >= 0.0)) t = 0.0;  // also NaN
  if (t > 1.0) t = 1.0;
  const double x = t * (n - 1);
  const int i = std::min((int)x, n - 2);
  const double f = x - i;
  const Rgb a = hex(table[i]), b = hex(table[i + 1]);
  return {a.r + (b.r - a.r) * f, a.g + (b.g - a.g) * f, a.b + (b.b - a.b) * f};
}

// Okabe-Ito, reordered so that the first colours are the most distinct on white; yellow last (weak on white).
const uint32_t kOkabeIto[kNumCategoryColors] = {0x0072B2, 0xD55E00, 0x009E73, 0xE69F00,
                                                0xCC79A7, 0x56B4E9, 0x000000, 0xF0E442};

// Viridis at t = 0, 1/8, ..., 1 (matplotlib's viridis sampled at 9 points, as R's viridis(9) lists them). Between
// stops the map is close to linear in sRGB, so linear interpolation keeps its even lightness ramp.
const uint32_t kViridis[9] = {0x440154, 0x472D7B, 0x3B528B, 0x2C728E, 0x21908C, 0x27AD81, 0x5DC863, 0xAADC32, 0xFDE725};

// ColorBrewer RdBu, 11 classes, from blue (-1) through near-white (0) to red (+1).
const uint32_t kRdBu[11] = {0x053061, 0x2166AC, 0x4393C3, 0x92C5DE, 0xD1E5F0, 0xF7F7F7,
                            0xFDDBC7, 0xF4A582, 0xD6604D, 0xB2182B, 0x67001F};

}  // namespace

Rgb category_color(int i) {
  return hex(kOkabeIto[((i % kNumCategoryColors) + kNumCategoryColors) % kNumCategoryColors]);
}

namespace {
int kind_named(std::string n) {
  for (char& ch : n) ch = (char)std::tolower((unsigned char)ch);
  // A learned temperature is focal attention with a learned tau: "focal-learned" (the bundled model) is learned.
  if (n.find("learned") != std::string::npos) return 2;
  static const char* kKinds[] = {"standard", "focal", "learned", "ssmax"};
  size_t best = std::string::npos;
  int kind = -1;
  for (int k = 0; k < 4; ++k) {  // otherwise the kind named first wins
    const size_t at = n.find(kKinds[k]);
    if (at < best) best = at, kind = k;
  }
  // A label that gives a temperature ("t=0.3", "t = 0.5") is a focal run.
  if (kind < 0 && (n.rfind("t=", 0) == 0 || n.rfind("t =", 0) == 0)) kind = 1;
  return kind;
}
}  // namespace

int run_kind(const std::string& name) {
  // The run part of FILE:RUN first; a name whose part after its last ':' names no kind is a run's own spelling with
  // a ':' ("focal:0.2", "native (focal:0.4)", "standard@dynamic:2": a position-loss file's runs), read whole.
  const size_t colon = name.rfind(':');
  const int k = kind_named(colon == std::string::npos ? name : name.substr(colon + 1));
  return k >= 0 || colon == std::string::npos ? k : kind_named(name);
}

std::vector<Rgb> run_colors(const std::vector<std::string>& names) {
  static const int kKindColor[4] = {0, 1, 2, 4};  // Okabe-Ito blue, vermillion, bluish green, reddish purple
  std::vector<int> idx(names.size(), -1);
  std::vector<bool> used(kNumCategoryColors, false);
  for (size_t i = 0; i < names.size(); ++i) {
    const int k = run_kind(names[i]);
    if (k >= 0 && !used[kKindColor[k]]) used[kKindColor[k]] = true, idx[i] = kKindColor[k];
  }
  // The rest (a second run of one kind, a name of no kind) take the colours no kind owns first (orange, sky blue,
  // black), then the colours of kinds the figure does not draw (a second focal run took blue, which says
  // "standard", so that comes last of them), and yellow last of all: it is faint on white (five t labels drew one
  // line yellow while three colours stood unused).
  static const int kFallback[kNumCategoryColors] = {3, 5, 6, 2, 4, 1, 0, 7};
  std::vector<Rgb> out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (idx[i] < 0) {
      int pick = -1;
      for (int c : kFallback)
        if (!used[c]) {
          pick = c;
          break;
        }
      idx[i] = pick >= 0 ? pick : (int)(i % kNumCategoryColors);
      if (pick >= 0) used[pick] = true;
    }
    out.push_back(category_color(idx[i]));
  }
  return out;
}

Rgb viridis(double t) { return lerp_table(kViridis, 9, t); }

Rgb diverging(double t) {
  if (std::isnan(t)) t = 0.0;
  return lerp_table(kRdBu, 11, (t + 1.0) / 2.0);
}

double luminance(Rgb c) {
  auto lin = [](double v) { return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * lin(c.r) + 0.7152 * lin(c.g) + 0.0722 * lin(c.b);
}

Rgb gray(double v) { return {v, v, v}; }

}  // namespace focal::figures
