// Plot furniture shared by the figure kinds: rectangles and linear maps in page points, 1-2-5 ticks, axes,
// token labels that thin and rotate to stay readable, legends, colour bars and matrices of cells.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "canvas.h"
#include "focal_figures/ticks.h"
#include "palette.h"

namespace focal::figures {

// Print sizes in points (a figure placed at its --width prints at these sizes).
constexpr double kTickSize = 7.0;   // tick labels, token labels
constexpr double kLabelSize = 8.0;  // axis titles
constexpr double kTitleSize = 8.5;  // figure title
constexpr double kPanelSize = 7.5;  // panel titles
constexpr double kLegendSize = 7.0;
constexpr double kTickLen = 2.5;
constexpr double kMinorTickGap = 2.0;  // closest spacing of minor ticks
constexpr double kAxisWidth = 0.6;
constexpr double kMargin = 4.0;    // page edge to the outermost ink
const Rgb kInk{0.15, 0.15, 0.15};  // axes and text: near-black
const Rgb kGrid{0.88, 0.88, 0.88};
const Rgb kMissing{0.85, 0.85, 0.85};  // cells with no data (query rows not stored)

struct Rect {
  double x = 0, y = 0, w = 0, h = 0;
  double right() const { return x + w; }
  double bottom() const { return y + h; }
};

// Maps data [d0, d1] to page [p0, p1] (p1 < p0 for a y axis pointing up).
struct LinearMap {
  double d0 = 0, d1 = 1, p0 = 0, p1 = 1;
  double operator()(double v) const { return p0 + (v - d0) / (d1 - d0) * (p1 - p0); }
};

// Widest tick label.
double max_label_width(const Canvas& c, const std::vector<std::string>& labels, double size);

// Light horizontal grid lines at the ticks (drawn before the data).
void draw_hgrid(Canvas& c, const Rect& plot, const Ticks& t, const LinearMap& y);
// Left axis: spine, outward ticks and right-aligned labels; returns the x of the labels' left edge.
double draw_left_axis(Canvas& c, const Rect& plot, const Ticks& t, const LinearMap& y);
// Width the left axis needs from the spine outwards (ticks and labels).
double left_axis_width(const Canvas& c, const Ticks& t);
// Height of an axis title (capitals and descenders) at kLabelSize.
double title_height(double size = kLabelSize);
// Bottom axis with numeric ticks.
void draw_bottom_axis(Canvas& c, const Rect& plot, const Ticks& t, const LinearMap& x);
// Axis titles: the y title rotated, centred on the plot's height with its top at x; the x title centred under the
// plot with the tops of its capitals at y.
void draw_y_title(Canvas& c, double x, const Rect& plot, const std::string& s);
void draw_x_title(Canvas& c, const Rect& plot, double y, const std::string& s);

// The prompt / generation boundary of a generation capture (CaptureFile::prompt_end): a dashed ink line over a
// white halo, visible on white and on every colour of a heat map; label (may be empty) in small ink type with its
// left end at (lx, ly), baseline there.
const Rgb kBoundaryInk{0.8, 0.1, 0.35};  // crimson: apart from the run colours and from viridis
void draw_boundary(Canvas& c, double x0, double y0, double x1, double y1);
void draw_boundary_label(Canvas& c, const std::string& label, double lx, double ly);

// A token piece as an axis label: spaces trimmed (a space-only piece shows as ␣), at most max_chars characters
// (longer pieces end in …).
std::string token_label(const std::string& piece, size_t max_chars = 10);

// Labels of a categorical axis (tokens) placed one per slot: every `step`-th label is shown so that neighbours do
// not touch; labels are vertical when dense, at 60 degrees otherwise.
struct CategoryAxis {
  std::vector<std::string> labels;
  int step = 1;
  double angle = 90;         // degrees
  double depth = 0;          // extent below the axis line, ticks included
  double left_overhang = 0;  // extent left of the first slot's centre (60-degree labels lean left)
  int offset = 0;            // label i is shown when (i + offset) % step == 0 (numbered keys: round positions)
};
CategoryAxis layout_category_axis(const Canvas& c, std::vector<std::string> labels, double slot, double size,
                                  bool allow_slant = true);
// Draws the labels under a horizontal axis at y, slot centres xs[i]; `bold` (or -1) is drawn bold.
void draw_category_axis(Canvas& c, const CategoryAxis& a, const std::vector<double>& xs, double y, int bold);
// The smallest step in 1, 2, 5, 10, 20, ... with step * slot >= need.
int category_step(double slot, double need);

struct LegendItem {
  std::string label;
  Rgb color;
  bool line = false;   // a line with a marker instead of a filled box
  bool marker = true;  // with line: the marker on it (off for lines drawn without markers)
  bool stroke = true;  // with line: the line itself (off for a scatter's dots: the marker alone)
};
// Legend laid out in rows left to right within `width`; returns its height.
double legend_height(const Canvas& c, const std::vector<LegendItem>& items, double width);
void draw_legend(Canvas& c, const std::vector<LegendItem>& items, double x, double y, double width);

// A colour scale: value -> colour, with its ticks and title. Values are in the scale's own units (log10 p for a
// log scale).
struct ColorScale {
  bool divergent = false;  // diverging map symmetric about 0 over [-hi, hi]; else viridis over [lo, hi]
  double lo = 0, hi = 1;
  Ticks ticks;
  std::string title;
  double span = 1.0;  // viridis runs over [0, span] (0.9 for lines on white: the last yellow is too faint)
  Rgb operator()(double v) const;
};
ColorScale linear_scale(double lo, double hi, const std::string& title);
ColorScale log_scale(double lo_exp, double hi_exp, const std::string& title);
ColorScale diverging_scale(double max_abs, const std::string& title);
// Width of a vertical colour bar with its labels and title, placed right of a plot.
double colorbar_width(const Canvas& c, const ColorScale& s);
// The shortest bar whose rotated title fits beside it (0 without a title).
double colorbar_min_height(const Canvas& c, const ColorScale& s);
// Draws the bar in the strip right of the plot: x is the strip's left edge, the bar spans the plot's height.
void draw_colorbar(Canvas& c, const ColorScale& s, double x, double top, double height);

// A rows x cols matrix of cells filling `area`; cell(r, col, &rgb) returns false for an undrawn cell. Rendered as an
// image for PNG, for very large matrices and with force_image, as rectangles (neighbouring equal colours merged)
// otherwise.
void draw_cells(Canvas& c, const Rect& area, int rows, int cols, const std::function<bool(int, int, Rgb*)>& cell,
                bool force_image = false);
// A matrix's values printed in its cells of cell_w x cell_h at `plot` (3 significant digits, fewer to fit, none when
// even 1 does not fit or the cells are too short), in ink that reads on each cell's colour color(v); NaN left blank.
// difference: a B − A matrix, whose values under a thousandth of its largest read "≈0".
void draw_cell_values(Canvas& c, const Rect& plot, int rows, int cols, double cell_w, double cell_h,
                      const std::vector<double>& v, const std::function<Rgb(double)>& color, bool difference = false);
// A matrix's column ticks and labels under it and row ticks and labels left of it, thinned to fit the cells.
void draw_matrix_ticks(Canvas& c, const Rect& plot, double cell_w, double cell_h,
                       const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels);
// Above this many cells in one figure, vector output embeds images instead of rectangles.
constexpr size_t kMaxVectorCells = 200000;

}  // namespace focal::figures
