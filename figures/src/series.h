// Series drawn as lines with markers against a shared axis (the training and retrieval figures): marker shapes that
// tell series apart without colour, a legend of line-and-marker items, series colours, and legend labels for
// series read from several files.
#pragma once

#include <string>
#include <vector>

#include "canvas.h"

namespace focal::figures {

enum class Shape { kCircle, kSquare, kTriangle, kDiamond, kTriangleDown };
// The shape of series i: circle, square, triangle, diamond, inverted triangle, then around again.
Shape series_shape(int i);
// A filled marker about as large as a circle of radius r, with a thin white edge (so that overlapping markers stay
// distinct).
void draw_shape(Canvas& c, double x, double y, double r, Shape s, Rgb fill);

// The colour of series i of n: Okabe-Ito while n fits the palette, viridis along the series beyond.
Rgb series_color(size_t i, size_t n);
// Colours of runs labelled `labels`: by attention kind (run_colors) for up to 8, else along viridis.
std::vector<Rgb> series_colors(const std::vector<std::string>& labels);
// c mixed with white: f = 0 gives c, 1 white.
Rgb lighten(Rgb c, double f);

struct SeriesItem {
  std::string label;
  Rgb color;
  Shape shape = Shape::kCircle;
  bool marker = true;  // false: the line alone
};
// A legend laid out in rows left to right within `width` (like the other kinds' legends); returns its height.
double series_legend_height(const Canvas& c, const std::vector<SeriesItem>& items, double width);
void draw_series_legend(Canvas& c, const std::vector<SeriesItem>& items, double x, double y, double width);

// Legend labels for series from several files: `preferred[i]` where it is non-empty and no other series has it,
// otherwise `fallback[i]`; a label that still repeats gets " (2)", " (3)" ...
std::vector<std::string> series_labels(const std::vector<std::string>& preferred,
                                       const std::vector<std::string>& fallback);
// --labels: the given labels (one per file, else Error naming --labels), or `automatic` when none were given.
std::vector<std::string> given_or_automatic_labels(const std::vector<std::string>& given,
                                                   const std::vector<std::string>& automatic);

}  // namespace focal::figures
