// Colour-blind-safe colours: Okabe-Ito for categories (runs, layers), viridis for magnitudes, a blue-white-red
// diverging scale for differences centred at 0. Sources and choices: docs/figures.md.
#pragma once

#include "canvas.h"

namespace focal::figures {

// Okabe & Ito (2008) categorical colours, in the order used for runs and lines: blue, vermillion, bluish green,
// orange, reddish purple, sky blue, yellow, black; i wraps around.
Rgb category_color(int i);
// Number of distinct category colours before they repeat.
constexpr int kNumCategoryColors = 8;

// Viridis (matplotlib's perceptually uniform map, van der Walt & Smith), t in [0, 1] clamped.
Rgb viridis(double t);

// Diverging map for differences, t in [-1, 1] clamped: ColorBrewer RdBu (Brewer; recommended by Paul Tol as
// colour-blind safe), blue for negative, near-white at 0, red for positive.
Rgb diverging(double t);

// Relative luminance (sRGB), to choose black or white text over a cell.
double luminance(Rgb c);

Rgb gray(double v);

}  // namespace focal::figures
