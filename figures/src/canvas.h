// The drawing surface of one figure: a cairo surface measured in points (1/72 in) for PNG, SVG or PDF, the
// DejaVu Sans faces, text placement and measurement, and the encoding to bytes (the same bytes for the same drawing).
#pragma once

#include <cairo.h>

#include <string>
#include <vector>

#include "focal_figures/figures.h"

namespace focal::figures {

struct Rgb {
  double r = 0, g = 0, b = 0;
};

// DejaVu Sans proportions (units of the font size), used to place text by its capitals rather than by the
// per-string ink box, so that labels in a row share a baseline.
constexpr double kCapHeight = 0.729;
constexpr double kDescent = 0.236;

// Valid UTF-8 with control characters made visible: invalid bytes become U+FFFD, '\n' "↵", '\t' "⇥", other C0
// controls U+FFFD. Cairo refuses invalid UTF-8 and XML refuses C0 controls.
std::string clean_utf8(const std::string& s);
// Number of code points of valid UTF-8.
size_t utf8_length(const std::string& s);
// The first n code points of valid UTF-8.
std::string utf8_prefix(const std::string& s, size_t n);
// The last n code points of valid UTF-8.
std::string utf8_suffix(const std::string& s, size_t n);

class Canvas {
 public:
  // Loads the fonts on first use (Error if DejaVu Sans is not installed); text can be measured before begin().
  Canvas(Format format, double dpi);
  ~Canvas();
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  // Advance width in points of s (cleaned) at `size` points.
  double text_width(const std::string& s, double size, bool bold = false) const;

  // Creates the page: width x height points on a white background. title goes into the SVG <title> and the PDF
  // metadata.
  void begin(double width_pt, double height_pt, const std::string& title);
  cairo_t* cr() const { return cr_; }
  Format format() const { return format_; }
  double width() const { return width_; }
  double height() const { return height_; }

  // Draws s with its anchor at (x, y): ha 0 = left end .. 1 = right end of the advance width; va 0 = baseline,
  // 0.5 = middle of the capitals, 1 = top of the capitals; the text is rotated angle_deg counter-clockwise about the
  // anchor.
  void text(const std::string& s, double x, double y, double size, double ha, double va, double angle_deg = 0.0,
            bool bold = false, Rgb color = {});

  void fill_rect(double x, double y, double w, double h, Rgb c);
  void stroke_rect(double x, double y, double w, double h, double line_width, Rgb c);
  void line(double x0, double y0, double x1, double y1, double line_width, Rgb c, bool dashed = false);
  void polyline(const std::vector<double>& xs, const std::vector<double>& ys, double line_width, Rgb c);
  void marker(double x, double y, double radius, Rgb fill);  // a filled circle with a thin white edge

  // Finishes the surface and returns the file's bytes. The canvas cannot be drawn on afterwards.
  std::string finish();

 private:
  struct TextItem {
    std::string s;
    double x, y, size, dx, dy, angle_deg;
    bool bold;
  };
  void set_font(cairo_t* cr, size_t font, double size, bool bold) const;  // font: 0 DejaVu Sans, k a fallback
  void check(const char* what) const;

  Format format_;
  double dpi_;
  double width_ = 0, height_ = 0;
  std::string title_;
  cairo_font_options_t* font_options_ = nullptr;
  cairo_surface_t* measure_surface_ = nullptr;
  cairo_t* measure_cr_ = nullptr;
  cairo_surface_t* surface_ = nullptr;
  cairo_t* cr_ = nullptr;
  std::string stream_;           // SVG / PDF bytes as cairo writes them
  std::vector<TextItem> texts_;  // for the SVG text layer
};

}  // namespace focal::figures
