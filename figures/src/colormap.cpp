#include "focal_figures/colormap.h"

#include <cairo.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "focal/atomic_file.h"
#include "focal/error.h"
#include "palette.h"

namespace focal::figures {

namespace {
uint8_t to8(double v) { return (uint8_t)std::lround(std::fmin(1.0, std::fmax(0.0, v)) * 255.0); }
Rgb8 to8(Rgb c) { return {to8(c.r), to8(c.g), to8(c.b)}; }
}  // namespace

Rgb8 viridis8(double t) { return to8(viridis(std::isnan(t) ? 0.0 : t)); }
Rgb8 diverging8(double t) { return to8(diverging(std::isnan(t) ? 0.0 : t)); }
Rgb8 category8(int i) { return to8(category_color(i)); }

std::vector<Rgb8> run_colors8(const std::vector<std::string>& names) {
  std::vector<Rgb8> out;
  for (const Rgb& c : run_colors(names)) out.push_back(to8(c));
  return out;
}

void write_png_rgba(const std::string& path, const uint8_t* rgba, int w, int h, int stride) {
  if (w <= 0 || h <= 0) throw Error("screenshot '" + path + "': the image is empty");
  cairo_surface_t* s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
  if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
    cairo_surface_destroy(s);
    throw Error("screenshot '" + path + "': cannot allocate the image");
  }
  cairo_surface_flush(s);
  uint8_t* dst = cairo_image_surface_get_data(s);
  const int ds = cairo_image_surface_get_stride(s);
  for (int y = 0; y < h; ++y) {
    const uint8_t* src = rgba + (size_t)y * stride;
    uint32_t* d = reinterpret_cast<uint32_t*>(dst + (size_t)y * ds);
    for (int x = 0; x < w; ++x)
      d[x] = (uint32_t)src[4 * x] << 16 | (uint32_t)src[4 * x + 1] << 8 | (uint32_t)src[4 * x + 2];
  }
  cairo_surface_mark_dirty(s);
  std::string png;
  const cairo_status_t st = cairo_surface_write_to_png_stream(
      s,
      [](void* out, const unsigned char* data, unsigned int n) {
        static_cast<std::string*>(out)->append(reinterpret_cast<const char*>(data), n);
        return CAIRO_STATUS_SUCCESS;
      },
      &png);
  cairo_surface_destroy(s);
  if (st != CAIRO_STATUS_SUCCESS) throw Error("screenshot '" + path + "': cairo could not encode the PNG");
  write_file_atomically(path, png);
}

}  // namespace focal::figures
