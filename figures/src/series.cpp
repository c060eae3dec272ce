// Marker shapes, series legends, colours and labels for the line figures (series.h).
#include "series.h"

#include <cmath>
#include <map>

#include "focal/error.h"
#include "palette.h"
#include "kinds.h"
#include "plot.h"

namespace focal::figures {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kLineSwatch = 13.0, kSwatchGap = 2.5, kItemGap = 8.0;

// The label as drawn: shortened in its middle where the item would be wider than the legend.
std::string item_label(const Canvas& c, const SeriesItem& it, double width) {
  return fit_text_middle(c, it.label, kLegendSize, width - kLineSwatch - kSwatchGap);
}
double item_width(const Canvas& c, const SeriesItem& it, double width) {
  return kLineSwatch + kSwatchGap + c.text_width(item_label(c, it, width), kLegendSize);
}
double row_height() { return 1.4 * kLegendSize; }

}  // namespace

Shape series_shape(int i) {
  static const Shape kOrder[] = {Shape::kCircle, Shape::kSquare, Shape::kTriangle, Shape::kDiamond,
                                 Shape::kTriangleDown};
  return kOrder[((i % 5) + 5) % 5];
}

void draw_shape(Canvas& c, double x, double y, double r, Shape s, Rgb fill) {
  cairo_t* cr = c.cr();
  cairo_new_path(cr);
  switch (s) {
    case Shape::kCircle: cairo_arc(cr, x, y, r, 0, 2 * kPi); break;
    case Shape::kSquare: {
      const double h = 0.886 * r;  // the circle's area
      cairo_rectangle(cr, x - h, y - h, 2 * h, 2 * h);
      break;
    }
    case Shape::kDiamond: {
      const double h = 1.2 * r;
      cairo_move_to(cr, x, y - h);
      cairo_line_to(cr, x + h, y);
      cairo_line_to(cr, x, y + h);
      cairo_line_to(cr, x - h, y);
      cairo_close_path(cr);
      break;
    }
    case Shape::kTriangle:
    case Shape::kTriangleDown: {
      const double h = 1.35 * r, d = s == Shape::kTriangle ? 1.0 : -1.0;  // centred on the centroid
      cairo_move_to(cr, x, y - d * h);
      cairo_line_to(cr, x + 0.866 * h, y + d * 0.5 * h);
      cairo_line_to(cr, x - 0.866 * h, y + d * 0.5 * h);
      cairo_close_path(cr);
      break;
    }
  }
  cairo_set_source_rgb(cr, fill.r, fill.g, fill.b);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_set_line_width(cr, 0.4);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_MITER);
  cairo_stroke(cr);
}

Rgb series_color(size_t i, size_t n) {
  if (n <= (size_t)kNumCategoryColors) return category_color((int)i);
  return viridis(0.9 * (double)i / (double)(n - 1));
}

std::vector<Rgb> series_colors(const std::vector<std::string>& labels) {
  if (labels.size() <= (size_t)kNumCategoryColors) return run_colors(labels);
  std::vector<Rgb> out;
  for (size_t i = 0; i < labels.size(); ++i) out.push_back(series_color(i, labels.size()));
  return out;
}

Rgb lighten(Rgb c, double f) { return {c.r + (1 - c.r) * f, c.g + (1 - c.g) * f, c.b + (1 - c.b) * f}; }

double series_legend_height(const Canvas& c, const std::vector<SeriesItem>& items, double width) {
  if (items.empty()) return 0;
  int rows = 1;
  double x = 0;
  for (const auto& it : items) {
    const double w = item_width(c, it, width);
    if (x > 0 && x + w > width) ++rows, x = 0;
    x += w + kItemGap;
  }
  return rows * row_height();
}

void draw_series_legend(Canvas& c, const std::vector<SeriesItem>& items, double x0, double y0, double width) {
  double x = 0, y = y0 + row_height() / 2;
  for (const auto& it : items) {
    const double w = item_width(c, it, width);
    if (x > 0 && x + w > width) x = 0, y += row_height();
    c.line(x0 + x, y, x0 + x + kLineSwatch, y, 1.2, it.color);
    if (it.marker) draw_shape(c, x0 + x + kLineSwatch / 2, y, 1.9, it.shape, it.color);
    c.text(item_label(c, it, width), x0 + x + kLineSwatch + kSwatchGap, y, kLegendSize, 0.0, 0.5, 0, false, kInk);
    x += w + kItemGap;
  }
}

std::vector<std::string> series_labels(const std::vector<std::string>& preferred,
                                       const std::vector<std::string>& fallback) {
  std::map<std::string, int> count;
  for (const auto& s : preferred) ++count[s];
  std::vector<std::string> out;
  for (size_t i = 0; i < preferred.size(); ++i)
    out.push_back(!preferred[i].empty() && count[preferred[i]] == 1 ? preferred[i] : fallback[i]);
  std::map<std::string, int> again, seen;
  for (const auto& s : out) ++again[s];
  for (auto& s : out)
    if (again[s] > 1 && ++seen[s] > 1) s += " (" + std::to_string(seen[s]) + ")";
  return out;
}

std::vector<std::string> given_or_automatic_labels(const std::vector<std::string>& given,
                                                   const std::vector<std::string>& automatic) {
  if (given.empty()) return automatic;
  if (given.size() != automatic.size())
    throw Error("labels", "labels: " + std::to_string(given.size()) + " label" + (given.size() == 1 ? "" : "s") +
                              " for " + std::to_string(automatic.size()) + " file" +
                              (automatic.size() == 1 ? "" : "s") + "; give one label per file, in file order");
  for (size_t i = 0; i < given.size(); ++i)
    for (size_t j = i + 1; j < given.size(); ++j)
      if (given[i] == given[j]) throw Error("labels", "labels: '" + given[i] + "' is given twice");
  return given;
}

}  // namespace focal::figures
