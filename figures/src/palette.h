// Colour-blind-safe colours: Okabe-Ito for categories (runs, layers), viridis for magnitudes, a blue-white-red
// diverging scale for differences centred at 0. Sources and choices: docs/figures.md.
#pragma once

#include <string>
#include <vector>

#include "canvas.h"

namespace focal::figures {

// Okabe & Ito (2008) categorical colours, in the order used for runs and lines: blue, vermillion, bluish green,
// orange, reddish purple, sky blue, yellow, black; i wraps around.
Rgb category_color(int i);
// Number of distinct category colours before they repeat.
constexpr int kNumCategoryColors = 8;

// One colour per run, stable across figures by the kind of attention its name says: the first standard run blue,
// the first focal run vermillion, the first learned run bluish green, the first ssmax run reddish purple; further
// runs of a kind, and runs of no known kind, take the unused Okabe-Ito colours in order. A name is matched on its
// run part (after FILE:) and case-insensitively ("standard", "focal_t0.4", "learned", "ssmax_s0.3", and the
// position-loss files' spellings "focal:0.2", "native (focal:0.4)", "standard@dynamic:2").
std::vector<Rgb> run_colors(const std::vector<std::string>& names);
// The kind a run name says: 0 standard, 1 focal, 2 learned, 3 ssmax, -1 none.
int run_kind(const std::string& name);

// Viridis (matplotlib's perceptually uniform map, van der Walt & Smith), t in [0, 1] clamped.
Rgb viridis(double t);

// Diverging map for differences, t in [-1, 1] clamped: ColorBrewer RdBu (Brewer; recommended by Paul Tol as
// colour-blind safe), blue for negative, near-white at 0, red for positive.
Rgb diverging(double t);

// Relative luminance (sRGB), to choose black or white text over a cell.
double luminance(Rgb c);

Rgb gray(double v);

}  // namespace focal::figures
