// Axes, ticks, token labels, legends, colour bars and cell matrices for the figure kinds (plot.h).
#include "plot.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstdio>

#include "focal/error.h"
#include "kinds.h"

namespace focal::figures {
namespace {

constexpr double kPi = 3.14159265358979323846;
const char* kMinus = "\xE2\x88\x92";  // U+2212

std::string with_minus(std::string s) {
  if (!s.empty() && s[0] == '-') s = kMinus + s.substr(1);
  return s;
}

std::string superscript(int v) {
  static const char* kDigits[10] = {"\xE2\x81\xB0", "\xC2\xB9",     "\xC2\xB2",     "\xC2\xB3",     "\xE2\x81\xB4",
                                    "\xE2\x81\xB5", "\xE2\x81\xB6", "\xE2\x81\xB7", "\xE2\x81\xB8", "\xE2\x81\xB9"};
  std::string s = v < 0 ? "\xE2\x81\xBB" : "";
  for (char d : std::to_string(std::abs(v))) s += kDigits[d - '0'];
  return s;
}

uint32_t pack(Rgb c) {
  auto q = [](double v) { return (uint32_t)std::lround(std::clamp(v, 0.0, 1.0) * 255.0); };
  return (q(c.r) << 16) | (q(c.g) << 8) | q(c.b);
}

}  // namespace

std::string format_number(double v, double step) {
  int decimals = 0;
  if (step > 0 && std::isfinite(step)) decimals = std::max(0, (int)-std::floor(std::log10(step) + 1e-9));
  if (std::fabs(v) < step * 1e-6) v = 0.0;
  char b[64];
  if (decimals >= 5 && v == 0.0) return "0";
  if (decimals >= 5) {  // steps below 1e-4 in powers of ten: "1.5×10⁻⁶", not "0.0000015"
    const int digits =
        std::max(0, (int)std::floor(std::log10(std::fabs(v)) + 1e-9) - (int)std::floor(std::log10(step) + 1e-9));
    std::snprintf(b, sizeof b, "%.*e", digits, v);
    const std::string m = b;
    const size_t e = m.find('e');
    return with_minus(m.substr(0, e)) +
           "\xC3\x97"
           "10" +
           superscript(std::atoi(m.c_str() + e + 1));  // ×10⁻⁶
  }
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  std::string s = b;
  if (s[0] == '-' && s.find_first_not_of("0.", 1) == std::string::npos) s = s.substr(1);  // "-0.0" rounds to 0
  return with_minus(s);
}

std::string format_sig(double v, int digits) {
  if (!std::isfinite(v)) return "";
  char b[64];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  std::string s = b;
  if (s.find('e') == std::string::npos && s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return with_minus(s);
}

Ticks nice_ticks(double lo, double hi, int max_ticks, bool expand) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {
    const double pad = lo == 0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  // The finest 1-2-5 step that gives at most max_ticks ticks.
  max_ticks = std::max(max_ticks, 2);
  double step = 0;
  long long first = 0, last = 0;
  for (int e = (int)std::floor(std::log10((hi - lo) / max_ticks)) - 1; step == 0; ++e)
    for (double m : {1.0, 2.0, 5.0}) {
      const double s = m * std::pow(10.0, e);
      first = expand ? (long long)std::floor(lo / s + 1e-9) : (long long)std::ceil(lo / s - 1e-9);
      last = expand ? (long long)std::ceil(hi / s - 1e-9) : (long long)std::floor(hi / s + 1e-9);
      if (last - first + 1 <= max_ticks) {
        step = s;
        break;
      }
    }
  Ticks t;
  for (long long i = first; i <= last; ++i) {
    t.values.push_back(i * step);
    t.labels.push_back(format_number(i * step, step));
  }
  t.lo = expand ? first * step : lo;
  t.hi = expand ? last * step : hi;
  return t;
}

Ticks log10_ticks(double lo_exp, double hi_exp, int max_ticks) {
  Ticks t;
  t.lo = lo_exp;
  t.hi = hi_exp;
  const int first = (int)std::ceil(lo_exp - 1e-9), last = (int)std::floor(hi_exp + 1e-9);
  int every = 1;
  while ((last - first) / every + 1 > max_ticks) ++every;
  for (int e = last; e >= first; e -= every) {  // keep the top tick (10^0 for probabilities)
    t.values.insert(t.values.begin(), e);
    t.labels.insert(t.labels.begin(), "10" + superscript(e));
  }
  return t;
}

double max_label_width(const Canvas& c, const std::vector<std::string>& labels, double size) {
  double w = 0;
  for (const auto& s : labels) w = std::max(w, c.text_width(s, size));
  return w;
}

double title_height(double size) { return (kCapHeight + kDescent) * size; }

void draw_hgrid(Canvas& c, const Rect& plot, const Ticks& t, const LinearMap& y) {
  for (double v : t.values) {
    const double py = y(v);
    if (py < plot.y - 0.01 || py > plot.bottom() + 0.01) continue;
    c.line(plot.x, py, plot.right(), py, 0.4, kGrid);
  }
}

double left_axis_width(const Canvas& c, const Ticks& t) {
  return kTickLen + 1.5 + max_label_width(c, t.labels, kTickSize);
}

double draw_left_axis(Canvas& c, const Rect& plot, const Ticks& t, const LinearMap& y) {
  c.line(plot.x, plot.y, plot.x, plot.bottom(), kAxisWidth, kInk);
  for (size_t i = 0; i < t.values.size(); ++i) {
    const double py = y(t.values[i]);
    if (py < plot.y - 0.01 || py > plot.bottom() + 0.01) continue;
    c.line(plot.x - kTickLen, py, plot.x, py, kAxisWidth, kInk);
    c.text(t.labels[i], plot.x - kTickLen - 1.5, py, kTickSize, 1.0, 0.5, 0, false, kInk);
  }
  return plot.x - left_axis_width(c, t);
}

void draw_bottom_axis(Canvas& c, const Rect& plot, const Ticks& t, const LinearMap& x) {
  c.line(plot.x, plot.bottom(), plot.right(), plot.bottom(), kAxisWidth, kInk);
  for (size_t i = 0; i < t.values.size(); ++i) {
    const double px = x(t.values[i]);
    if (px < plot.x - 0.01 || px > plot.right() + 0.01) continue;
    c.line(px, plot.bottom(), px, plot.bottom() + kTickLen, kAxisWidth, kInk);
    c.text(t.labels[i], px, plot.bottom() + kTickLen + 1.5, kTickSize, 0.5, 1.0, 0, false, kInk);
  }
}

void draw_y_title(Canvas& c, double x, const Rect& plot, const std::string& s) {
  c.text(s, x, plot.y + plot.h / 2, kLabelSize, 0.5, 1.0, 90, false, kInk);
}

void draw_x_title(Canvas& c, const Rect& plot, double y, const std::string& s) {
  c.text(s, plot.x + plot.w / 2, y, kLabelSize, 0.5, 1.0, 0, false, kInk);
}

void draw_boundary(Canvas& c, double x0, double y0, double x1, double y1) {
  c.line(x0, y0, x1, y1, 1.6, {1.0, 1.0, 1.0});
  c.line(x0, y0, x1, y1, 0.8, kBoundaryInk, true);
}

void draw_boundary_label(Canvas& c, const std::string& label, double lx, double ly) {
  if (!label.empty()) c.text(label, lx, ly, kTickSize, 0.0, 0.0, 0, false, kBoundaryInk);
}

std::string token_label(const std::string& piece, size_t max_chars) {
  std::string s = clean_utf8(piece);
  const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  if (b == std::string::npos) return s.empty() ? "" : "\xE2\x90\xA3";  // ␣
  s = s.substr(b, e - b + 1);
  if (utf8_length(s) > max_chars) s = utf8_prefix(s, max_chars - 1) + "\xE2\x80\xA6";  // …
  return s;
}

int category_step(double slot, double need) {
  if (slot <= 0) return 1 << 20;
  for (int mag = 1;; mag *= 10)
    for (int m : {1, 2, 5})
      if (slot * m * mag >= need || m * mag >= (1 << 20)) return m * mag;
}

CategoryAxis layout_category_axis(const Canvas& c, std::vector<std::string> labels, double slot, double size,
                                  bool allow_slant) {
  CategoryAxis a;
  a.labels = std::move(labels);
  // Vertical labels need a line's height between neighbours; 60-degree ones need that across their slant.
  const double need90 = 1.05 * size, need60 = 1.25 * size / std::sin(60 * kPi / 180);
  a.step = category_step(slot, need90);
  a.angle = allow_slant && a.step == 1 && slot >= need60 ? 60 : 90;
  const double rad = a.angle * kPi / 180, half_cap = 0.5 * kCapHeight * size;
  double depth = 0, over = 0;
  for (size_t i = 0; i < a.labels.size(); i += a.step) {
    const double w = c.text_width(a.labels[i], size);
    depth = std::max(depth, w * std::sin(rad) + half_cap * std::cos(rad));
    over = std::max(over, w * std::cos(rad) + half_cap * std::sin(rad) - i * slot);
  }
  a.depth = kTickLen + 1.5 + depth;
  a.left_overhang = over;
  return a;
}

void draw_category_axis(Canvas& c, const CategoryAxis& a, const std::vector<double>& xs, double y, int bold) {
  // Unlabelled slots get a minor tick while the ticks stay apart; denser ones would merge into a bar.
  const bool minor = xs.size() > 1 && std::fabs(xs[1] - xs[0]) >= kMinorTickGap;
  for (size_t i = 0; i < a.labels.size() && i < xs.size(); ++i) {
    if ((i + a.offset) % a.step != 0) {
      if (minor) c.line(xs[i], y, xs[i], y + kTickLen * 0.5, kAxisWidth * 0.7, kInk);
      continue;
    }
    c.line(xs[i], y, xs[i], y + kTickLen, kAxisWidth, kInk);
    if (a.angle == 0)  // horizontal (numbers): centred under the tick
      c.text(a.labels[i], xs[i], y + kTickLen + 1.5, kTickSize, 0.5, 1.0, 0, (int)i == bold, kInk);
    else
      c.text(a.labels[i], xs[i], y + kTickLen + 1.5, kTickSize, 1.0, 0.5, a.angle, (int)i == bold, kInk);
  }
}

namespace {
constexpr double kSwatch = 6.0, kLineSwatch = 11.0, kSwatchGap = 2.5, kItemGap = 8.0;
// The label as drawn: shortened in its middle where the item would be wider than the legend (a long run name ran
// off the page).
std::string item_label(const Canvas& c, const LegendItem& it, double width) {
  return fit_text_middle(c, it.label, kLegendSize, width - (it.line ? kLineSwatch : kSwatch) - kSwatchGap);
}
double item_width(const Canvas& c, const LegendItem& it, double width) {
  return (it.line ? kLineSwatch : kSwatch) + kSwatchGap + c.text_width(item_label(c, it, width), kLegendSize);
}
double legend_row_height() { return 1.4 * kLegendSize; }
}  // namespace

double legend_height(const Canvas& c, const std::vector<LegendItem>& items, double width) {
  if (items.empty()) return 0;
  int rows = 1;
  double x = 0;
  for (const auto& it : items) {
    const double w = item_width(c, it, width);
    if (x > 0 && x + w > width) {
      ++rows;
      x = 0;
    }
    x += w + kItemGap;
  }
  return rows * legend_row_height();
}

void draw_legend(Canvas& c, const std::vector<LegendItem>& items, double x0, double y0, double width) {
  double x = 0, y = y0 + legend_row_height() / 2;
  for (const auto& it : items) {
    const double w = item_width(c, it, width);
    if (x > 0 && x + w > width) {
      x = 0;
      y += legend_row_height();
    }
    const double cy = y;
    if (it.line) {
      if (it.stroke) c.line(x0 + x, cy, x0 + x + kLineSwatch, cy, 1.2, it.color);
      if (it.marker) c.marker(x0 + x + kLineSwatch / 2, cy, 1.7, it.color);
    } else {
      c.fill_rect(x0 + x, cy - kSwatch / 2, kSwatch, kSwatch, it.color);
    }
    c.text(item_label(c, it, width), x0 + x + (it.line ? kLineSwatch : kSwatch) + kSwatchGap, cy, kLegendSize, 0.0, 0.5,
           0, false, kInk);
    x += w + kItemGap;
  }
}

Rgb ColorScale::operator()(double v) const {
  if (divergent) return diverging(hi > 0 ? v / hi : 0.0);
  return viridis(span * (hi > lo ? (v - lo) / (hi - lo) : 0.5));
}

ColorScale linear_scale(double lo, double hi, const std::string& title) {
  ColorScale s;
  if (!(hi > lo)) hi = lo + (lo == 0 ? 1.0 : std::fabs(lo) * 0.1);
  s.lo = lo;
  s.hi = hi;
  s.ticks = nice_ticks(lo, hi, 6, false);
  s.title = title;
  return s;
}

ColorScale log_scale(double lo_exp, double hi_exp, const std::string& title) {
  ColorScale s;
  if (!(hi_exp > lo_exp)) hi_exp = lo_exp + 1;
  s.lo = lo_exp;
  s.hi = hi_exp;
  s.ticks = log10_ticks(lo_exp, hi_exp, 6);
  s.title = title;
  return s;
}

ColorScale diverging_scale(double max_abs, const std::string& title) {
  ColorScale s;
  s.divergent = true;
  if (!(max_abs > 0) || !std::isfinite(max_abs)) max_abs = 1e-6;
  s.lo = -max_abs;
  s.hi = max_abs;
  s.ticks = nice_ticks(-max_abs, max_abs, 7, false);
  s.title = title;
  return s;
}

namespace {
constexpr double kBarGap = 7.0, kBarWidth = 7.0;
}

double colorbar_width(const Canvas& c, const ColorScale& s) {
  return kBarGap + kBarWidth + 2.0 + 1.5 + max_label_width(c, s.ticks.labels, kTickSize) + 3.0 +
         (s.title.empty() ? 0.0 : title_height());
}

double colorbar_min_height(const Canvas& c, const ColorScale& s) {
  return s.title.empty() ? 0.0 : c.text_width(s.title, kLabelSize) + 4.0;
}

void draw_colorbar(Canvas& c, const ColorScale& s, double x, double top, double height) {
  const double bx = x + kBarGap;
  cairo_t* cr = c.cr();
  cairo_pattern_t* g = cairo_pattern_create_linear(0, top + height, 0, top);
  const int n = 32;
  for (int i = 0; i <= n; ++i) {
    const double f = (double)i / n;
    const Rgb col = s(s.lo + f * (s.hi - s.lo));
    cairo_pattern_add_color_stop_rgb(g, f, col.r, col.g, col.b);
  }
  cairo_rectangle(cr, bx, top, kBarWidth, height);
  cairo_set_source(cr, g);
  cairo_fill(cr);
  cairo_pattern_destroy(g);
  c.stroke_rect(bx, top, kBarWidth, height, 0.4, kInk);
  const LinearMap y{s.lo, s.hi, top + height, top};
  double label_right = bx + kBarWidth;
  for (size_t i = 0; i < s.ticks.values.size(); ++i) {
    const double py = y(s.ticks.values[i]);
    c.line(bx + kBarWidth, py, bx + kBarWidth + 2.0, py, kAxisWidth, kInk);
    c.text(s.ticks.labels[i], bx + kBarWidth + 3.5, py, kTickSize, 0.0, 0.5, 0, false, kInk);
    label_right = std::max(label_right, bx + kBarWidth + 3.5 + c.text_width(s.ticks.labels[i], kTickSize));
  }
  if (!s.title.empty()) {
    const double tx = bx + kBarWidth + 3.5 + max_label_width(c, s.ticks.labels, kTickSize) + 3.0;
    c.text(s.title, tx, top + height / 2, kLabelSize, 0.5, 1.0, 90, false, kInk);
  }
}

void draw_cells(Canvas& c, const Rect& area, int rows, int cols, const std::function<bool(int, int, Rgb*)>& cell,
                bool force_image) {
  if (rows <= 0 || cols <= 0) return;
  std::vector<int64_t> px((size_t)rows * cols, -1);  // packed 0xRRGGBB, -1 undrawn
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < cols; ++k) {
      Rgb col;
      if (cell(r, k, &col)) px[(size_t)r * cols + k] = pack(col);
    }
  cairo_t* cr = c.cr();
  const double cw = area.w / cols, ch = area.h / rows;
  if (force_image || c.format() == Format::kPng || (size_t)rows * cols > kMaxVectorCells) {
    cairo_surface_t* img = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, cols, rows);
    unsigned char* data = cairo_image_surface_get_data(img);
    const int stride = cairo_image_surface_get_stride(img);
    for (int r = 0; r < rows; ++r) {
      uint32_t* row = reinterpret_cast<uint32_t*>(data + (size_t)r * stride);
      for (int k = 0; k < cols; ++k) {
        const int64_t v = px[(size_t)r * cols + k];
        row[k] = v < 0 ? 0u : 0xFF000000u | (uint32_t)v;
      }
    }
    cairo_surface_mark_dirty(img);
    cairo_save(cr);
    cairo_rectangle(cr, area.x, area.y, area.w, area.h);
    cairo_clip(cr);
    cairo_translate(cr, area.x, area.y);
    cairo_scale(cr, cw, ch);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
    return;
  }
  // Vector: one rectangle per run of equal colour in a row, overlapping its drawn neighbours by a hair so that
  // viewers do not show seams between cells.
  const double eps = std::min(0.25, 0.2 * std::min(cw, ch));
  for (int r = 0; r < rows; ++r) {
    int k = 0;
    while (k < cols) {
      const int64_t v = px[(size_t)r * cols + k];
      if (v < 0) {
        ++k;
        continue;
      }
      int e = k + 1;
      while (e < cols && px[(size_t)r * cols + e] == v) ++e;
      const bool right = e < cols && px[(size_t)r * cols + e] >= 0;
      const bool below = r + 1 < rows && px[(size_t)(r + 1) * cols + k] >= 0 && px[(size_t)(r + 1) * cols + e - 1] >= 0;
      const Rgb col{((v >> 16) & 0xFF) / 255.0, ((v >> 8) & 0xFF) / 255.0, (v & 0xFF) / 255.0};
      c.fill_rect(area.x + k * cw, area.y + r * ch, (e - k) * cw + (right ? eps : 0), ch + (below ? eps : 0), col);
      k = e;
    }
  }
}

void draw_cell_values(Canvas& c, const Rect& plot, int rows, int cols, double cell_w, double cell_h,
                      const std::vector<double>& v, const std::function<Rgb(double)>& color, bool difference) {
  // 3 significant digits, else 2, else 2 at a smaller size (a signed difference's minus sign left "-0.8" and "-1"
  // in a 6-column matrix at the default width), else 1.
  // A difference matrix counts its digits from its largest value and prints every cell with the same decimals
  // ("−0.57", "−0.0013" took each its own three and "−0.00129" was wider than the cell, which took every value off
  // the matrix); a difference that rounds to 0 there reads "≈0", an exact one "0". A matrix of values keeps each
  // value's own digits (a small value is a value there).
  double amax = 0;
  for (double x : v)
    if (!std::isnan(x)) amax = std::max(amax, std::fabs(x));
  const int top_exp = amax > 0 ? (int)std::floor(std::log10(amax)) : 0;
  // Trailing zeros kept, so that cells side by side show the same precision ("0.9" beside "0.919" read as a value
  // known to one digit; "−0.5" beside "−0.45").
  auto text_of = [&](double x, int d) {
    char b[64];
    if (!difference || amax == 0) {
      if (x == 0) return std::string("0");
      std::snprintf(b, sizeof b, "%#.*g", d, x);
      std::string t = b;
      if (t.find('e') != std::string::npos) return format_sig(x, d);  // "2e-08", not the wider "2.00e-08"
      if (t.back() == '.') t.pop_back();
      return with_minus(t);
    }
    if (x == 0) return std::string("0");
    const int decimals = std::max(0, d - 1 - top_exp);
    std::snprintf(b, sizeof b, "%.*f", decimals, x);
    std::string t = b;
    if (t.find_first_of("123456789") == std::string::npos) return std::string("\xE2\x89\x88") + "0";  // ≈0
    return with_minus(t);
  };
  auto widest_at = [&](int d, double size) {
    double w = 0;
    for (double x : v)
      if (!std::isnan(x)) w = std::max(w, c.text_width(text_of(x, d), size));
    return w;
  };
  const std::pair<int, double> tries[] = {{3, kTickSize}, {2, kTickSize}, {2, 0.85 * kTickSize}, {1, kTickSize}};
  int digits = 1;
  double size = kTickSize, widest = 0;
  for (const auto& [d, s] : tries) {
    digits = d, size = s, widest = widest_at(d, s);
    if (widest <= cell_w - 3.0) break;
  }
  if (widest > cell_w - 3.0 || cell_h < 1.6 * size) return;
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < cols; ++k) {
      const double x = v[(size_t)r * cols + k];
      if (std::isnan(x)) continue;
      const Rgb ink = luminance(color(x)) > 0.35 ? kInk : Rgb{1, 1, 1};
      c.text(text_of(x, digits), plot.x + (k + 0.5) * cell_w, plot.y + (r + 0.5) * cell_h, size, 0.5, 0.5, 0, false,
             ink);
    }
}

void draw_matrix_ticks(Canvas& c, const Rect& plot, double cell_w, double cell_h,
                       const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels) {
  const int xstep = category_step(cell_w, c.text_width(col_labels.back(), kTickSize) + 3.0);
  const int ystep = category_step(cell_h, 1.1 * kTickSize);
  for (size_t k = 0; k < col_labels.size(); k += xstep) {
    const double x = plot.x + (k + 0.5) * cell_w;
    c.line(x, plot.bottom(), x, plot.bottom() + kTickLen, kAxisWidth, kInk);
    c.text(col_labels[k], x, plot.bottom() + kTickLen + 1.5, kTickSize, 0.5, 1.0, 0, false, kInk);
  }
  for (size_t r = 0; r < row_labels.size(); r += ystep) {
    const double y = plot.y + (r + 0.5) * cell_h;
    c.line(plot.x - kTickLen, y, plot.x, y, kAxisWidth, kInk);
    c.text(row_labels[r], plot.x - kTickLen - 1.5, y, kTickSize, 1.0, 0.5, 0, false, kInk);
  }
}

}  // namespace focal::figures
