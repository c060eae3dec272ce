// Cairo surfaces for PNG, SVG and PDF, DejaVu Sans loaded from its files, and the byte-level finishing that makes the
// output reproducible: PDF dates left out, SVG surface/image ids renumbered, a pHYs chunk carrying the PNG's dpi.
#include "canvas.h"

#include <cairo-ft.h>
#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "focal/error.h"
#include "focal/model.h"
#include "focal_figures/figures.h"
#include "focal_figures/fonts.h"

namespace focal::figures {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Decodes one code point at s[i]; returns its byte length, 0 if the sequence is invalid.
int utf8_seq(const std::string& s, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return (unsigned char)s[k]; };
  const unsigned char c = b(i);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  int n = 0;
  uint32_t v = 0, min = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    v = c & 0x1F;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    v = c & 0x0F;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    v = c & 0x07;
    min = 0x10000;
  } else
    return 0;
  if (i + n > s.size()) return 0;
  for (int k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(i + k) & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return n;
}

// The font files, looked up by path rather than through fontconfig, so that the figures do not depend on the
// machine's font configuration (and fontconfig's configuration parser, which leaks, is never loaded).
const char* const kFontDirs[] = {"/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/dejavu-sans-fonts",
                                 "/usr/share/fonts/dejavu", "/usr/share/fonts/TTF", "/usr/local/share/fonts/dejavu"};

std::string find_font_dir() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("FOCAL_FONT_DIR")) dirs.push_back(env);
  for (const char* d : kFontDirs) dirs.push_back(d);
  for (const std::string& d : dirs)
    if (::access((d + "/DejaVuSans.ttf").c_str(), R_OK) == 0 &&
        ::access((d + "/DejaVuSans-Bold.ttf").c_str(), R_OK) == 0)
      return d;
  throw Error(
      "figures need the font DejaVu Sans (DejaVuSans.ttf and DejaVuSans-Bold.ttf), found in none of "
      "/usr/share/fonts/truetype/dejavu and the usual places: apt-get install fonts-dejavu-core, or set "
      "FOCAL_FONT_DIR to a directory holding them");
}

// One font: the faces cairo draws with, and a face of its own that answers which characters it has (cairo locks
// the faces it draws with; this one is only read under g_cover_mutex).
struct Font {
  std::string path;  // the regular face's file
  cairo_font_face_t* regular = nullptr;
  cairo_font_face_t* bold = nullptr;
  FT_Face cover = nullptr;
};

std::mutex g_cover_mutex;

bool has_glyph(const Font& f, uint32_t cp) {
  std::lock_guard<std::mutex> lock(g_cover_mutex);
  return FT_Get_Char_Index(f.cover, cp) != 0;
}

FT_Library freetype() {
  static FT_Library lib = [] {
    FT_Library l = nullptr;
    if (FT_Init_FreeType(&l) != 0) throw Error("cannot initialise FreeType for the figure fonts");
    return l;
  }();
  return lib;
}

// A FreeType face of the font file (the first face of a collection).
FT_Face open_face(const std::string& path) {
  FT_Face face = nullptr;
  if (FT_New_Face(freetype(), path.c_str(), 0, &face) != 0) throw Error("cannot load the font " + path + " (FreeType)");
  return face;
}

cairo_user_data_key_t g_ft_face_key;

// A face for cairo to draw with (cairo owns its FT face through the user data); synthetic_bold asks cairo to
// embolden it.
cairo_font_face_t* load_face(const std::string& path, bool synthetic_bold = false) {
  FT_Face face = open_face(path);
  cairo_font_face_t* f = cairo_ft_font_face_create_for_ft_face(face, 0);
  cairo_font_face_set_user_data(f, &g_ft_face_key, face, [](void* p) { FT_Done_Face(static_cast<FT_Face>(p)); });
  if (cairo_font_face_status(f) != CAIRO_STATUS_SUCCESS) throw Error("cairo cannot use the font " + path);
  if (synthetic_bold) cairo_ft_font_face_set_synthesize(f, CAIRO_FT_SYNTHESIZE_BOLD);
  return f;
}

// Loaded once per process and kept: cairo caches faces past their last use, so they must outlive every surface.
// Cairo locks an FT face while it uses it, so the faces may be shared between threads.
const Font& dejavu() {
  static const Font f = [] {
    const std::string dir = find_font_dir();
    Font x;
    x.regular = load_face(dir + "/DejaVuSans.ttf");
    x.bold = load_face(dir + "/DejaVuSans-Bold.ttf");
    x.cover = open_face(dir + "/DejaVuSans.ttf");
    x.path = dir + "/DejaVuSans.ttf";
    return x;
  }();
  return f;
}

// Fonts for the characters DejaVu Sans lacks (CJK, emoji, most scripts beyond Latin, Greek and Cyrillic), tried in
// order: the files named in FOCAL_FONT_FALLBACK (colon-separated), then the Debian packages' files that exist. Bold
// text takes the regular face emboldened. Loaded at the first character DejaVu Sans lacks.
const char* const kFallbackFiles[] = {
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",      // fonts-noto-cjk
    "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",   // fonts-droid-fallback
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",              // fonts-wqy-microhei
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",                // fonts-wqy-zenhei
    "/usr/share/fonts/truetype/noto/NotoSans-Regular.ttf",         // fonts-noto-core
    "/usr/share/fonts/truetype/ancient-scripts/Symbola_hint.ttf",  // fonts-symbola (emoji, symbols)
    "/usr/share/fonts/opentype/unifont/unifont.otf",               // fonts-unifont (every BMP character)
};

const std::vector<Font>& fallbacks() {
  static const std::vector<Font> v = [] {
    std::vector<std::string> paths;
    if (const char* env = std::getenv("FOCAL_FONT_FALLBACK")) {
      std::string list = env;
      for (size_t at = 0; at <= list.size();) {
        const size_t end = std::min(list.find(':', at), list.size());
        if (end > at) paths.push_back(list.substr(at, end - at));
        at = end + 1;
      }
    }
    for (const char* p : kFallbackFiles) paths.emplace_back(p);
    std::vector<Font> fonts;
    for (const std::string& p : paths) {
      if (::access(p.c_str(), R_OK) != 0) continue;
      try {
        Font f;
        f.path = p;
        f.cover = open_face(p);
        f.regular = load_face(p);
        f.bold = load_face(p, /*synthetic_bold=*/true);
        fonts.push_back(f);
      } catch (const Error&) {
        // A file FreeType cannot read is skipped: the characters it would have drawn fall to the next font.
      }
    }
    return fonts;
  }();
  return v;
}

// The font that draws code point cp: DejaVu Sans when it has it, else the first fallback that does, else DejaVu
// Sans (its missing-glyph box). 0 is DejaVu Sans, k > 0 fallbacks()[k - 1].
size_t font_for(uint32_t cp) {
  if (cp < 0x80 || has_glyph(dejavu(), cp)) return 0;
  const std::vector<Font>& fb = fallbacks();
  for (size_t k = 0; k < fb.size(); ++k)
    if (has_glyph(fb[k], cp)) return k + 1;
  return 0;
}

cairo_font_face_t* face_of(size_t font, bool bold) {
  const Font& f = font == 0 ? dejavu() : fallbacks()[font - 1];
  return bold ? f.bold : f.regular;
}

// Splits cleaned text into runs drawn by one font each.
std::vector<std::pair<size_t, std::string>> font_runs(const std::string& s) {
  std::vector<std::pair<size_t, std::string>> runs;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    int n = utf8_seq(s, i, &cp);
    if (n == 0) n = 1;  // not reached for cleaned text
    const size_t font = font_for(cp);
    if (runs.empty() || runs.back().first != font) runs.emplace_back(font, std::string());
    runs.back().second.append(s, i, size_t(n));
    i += size_t(n);
  }
  return runs;
}

cairo_status_t append_to_string(void* closure, const unsigned char* data, unsigned int n) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), n);
  return CAIRO_STATUS_SUCCESS;
}

uint32_t crc32(const unsigned char* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

void put_be32(std::string& s, uint32_t v) {
  for (int k = 3; k >= 0; --k) s.push_back((char)((v >> (8 * k)) & 0xFF));
}

// Inserts a pHYs chunk (pixels per metre) after IHDR, so LaTeX and image viewers know the intended print size.
std::string add_png_dpi(const std::string& png, double dpi) {
  const size_t after_ihdr = 8 + 4 + 4 + 13 + 4;
  if (png.size() < after_ihdr || png.compare(12, 4, "IHDR") != 0) return png;
  const uint32_t ppm = (uint32_t)std::lround(dpi / 0.0254);
  std::string chunk = "pHYs";
  put_be32(chunk, ppm);
  put_be32(chunk, ppm);
  chunk.push_back(1);  // unit: metre
  std::string out = png.substr(0, after_ihdr);
  put_be32(out, 9);
  out += chunk;
  put_be32(out, crc32((const unsigned char*)chunk.data(), chunk.size()));
  out += png.substr(after_ihdr);
  return out;
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f", std::fabs(v) < 5e-4 ? 0.0 : v);
  std::string s = b;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// Cairo numbers some SVG ids from process-wide counters (surface and image ids), so the same figure drawn twice
// in one process would differ. Renumber them in order of first appearance; every other byte is kept.
std::string canonical_svg_ids(const std::string& svg) {
  static const char* kPrefixes[] = {"surface", "image", "source", "pattern", "mask", "clip", "linear", "radial"};
  std::map<std::string, std::map<std::string, int>> ids;
  std::string out;
  out.reserve(svg.size());
  size_t i = 0;
  while (i < svg.size()) {
    const char c = svg[i];
    out.push_back(c);
    ++i;
    if (c != '"' && c != '#') continue;
    for (const char* pre : kPrefixes) {
      const size_t n = std::char_traits<char>::length(pre);
      if (svg.compare(i, n, pre) != 0) continue;
      size_t j = i + n;
      while (j < svg.size() && svg[j] >= '0' && svg[j] <= '9') ++j;
      if (j == i + n || j >= svg.size() || (svg[j] != '"' && svg[j] != ')')) continue;
      auto& m = ids[pre];
      const std::string digits = svg.substr(i + n, j - i - n);
      auto it = m.find(digits);
      if (it == m.end()) it = m.emplace(digits, (int)m.size() + 1).first;
      out += pre;
      out += std::to_string(it->second);
      i = j;
      break;
    }
  }
  return out;
}

}  // namespace

std::string font_file_for(uint32_t code_point) {
  const size_t font = font_for(code_point);
  if (font > 0) return fallbacks()[font - 1].path;
  return has_glyph(dejavu(), code_point) ? dejavu().path : std::string();
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o.push_back(c);
    }
  }
  return o;
}

std::string clean_utf8(const std::string& s) {
  std::string o;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const int n = utf8_seq(s, i, &cp);
    if (n == 0) {
      o += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    if (cp == '\n' || cp == '\r')
      o += "\xE2\x86\xB5";  // ↵
    else if (cp == '\t')
      o += "\xE2\x87\xA5";  // ⇥
    else if (cp < 0x20 || cp == 0x7F)
      o += "\xEF\xBF\xBD";
    else
      o.append(s, i, n);
    i += n;
  }
  return o;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string utf8_prefix(const std::string& s, size_t n) {
  size_t count = 0, i = 0;
  for (; i < s.size(); ++i) {
    if (((unsigned char)s[i] & 0xC0) != 0x80) {
      if (count == n) break;
      ++count;
    }
  }
  return s.substr(0, i);
}

std::string utf8_suffix(const std::string& s, size_t n) {
  const size_t len = utf8_length(s);
  return len <= n ? s : s.substr(utf8_prefix(s, len - n).size());
}

Canvas::Canvas(Format format, double dpi) : format_(format), dpi_(dpi) {
  (void)dejavu();  // Error now if DejaVu Sans is missing
  // No hinting: glyph positions scale exactly with the page, so PNG, SVG and PDF share one layout.
  font_options_ = cairo_font_options_create();
  cairo_font_options_set_hint_style(font_options_, CAIRO_HINT_STYLE_NONE);
  cairo_font_options_set_hint_metrics(font_options_, CAIRO_HINT_METRICS_OFF);
  cairo_font_options_set_antialias(font_options_, CAIRO_ANTIALIAS_GRAY);
  measure_surface_ = cairo_image_surface_create(CAIRO_FORMAT_A8, 1, 1);
  measure_cr_ = cairo_create(measure_surface_);
  cairo_set_font_options(measure_cr_, font_options_);
}

Canvas::~Canvas() {
  if (cr_) cairo_destroy(cr_);
  if (surface_) cairo_surface_destroy(surface_);
  cairo_destroy(measure_cr_);
  cairo_surface_destroy(measure_surface_);
  cairo_font_options_destroy(font_options_);
}

void Canvas::set_font(cairo_t* cr, size_t font, double size, bool bold) const {
  cairo_set_font_face(cr, face_of(font, bold));
  cairo_set_font_size(cr, size);
}

double Canvas::text_width(const std::string& s, double size, bool bold) const {
  double w = 0.0;
  for (const auto& [font, run] : font_runs(clean_utf8(s))) {
    set_font(measure_cr_, font, size, bold);
    cairo_text_extents_t e;
    cairo_text_extents(measure_cr_, run.c_str(), &e);
    w += e.x_advance;
  }
  return w;
}

void Canvas::begin(double width_pt, double height_pt, const std::string& title) {
  width_ = width_pt;
  height_ = height_pt;
  title_ = clean_utf8(title);
  switch (format_) {
    case Format::kPng: {
      const int w = (int)std::lround(width_pt / 72.0 * dpi_), h = (int)std::lround(height_pt / 72.0 * dpi_);
      surface_ = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
      break;
    }
    case Format::kSvg:
      surface_ = cairo_svg_surface_create_for_stream(append_to_string, &stream_, width_pt, height_pt);
      cairo_svg_surface_restrict_to_version(surface_, CAIRO_SVG_VERSION_1_1);
      break;
    case Format::kPdf:
      surface_ = cairo_pdf_surface_create_for_stream(append_to_string, &stream_, width_pt, height_pt);
      // No creation or modification date, so the same figure gives the same bytes.
      cairo_pdf_surface_set_metadata(surface_, CAIRO_PDF_METADATA_CREATE_DATE, "");
      cairo_pdf_surface_set_metadata(surface_, CAIRO_PDF_METADATA_MOD_DATE, "");
      cairo_pdf_surface_set_metadata(surface_, CAIRO_PDF_METADATA_TITLE, title_.c_str());
      cairo_pdf_surface_set_metadata(surface_, CAIRO_PDF_METADATA_CREATOR,
                                     (std::string("focalscope ") + version()).c_str());
      break;
  }
  if (cairo_surface_status(surface_) != CAIRO_STATUS_SUCCESS)
    throw Error(std::string("cannot create the ") + format_name(format_) + " surface (" +
                cairo_status_to_string(cairo_surface_status(surface_)) + "); is the figure size reasonable?");
  cr_ = cairo_create(surface_);
  cairo_set_font_options(cr_, font_options_);
  if (format_ == Format::kPng) cairo_scale(cr_, dpi_ / 72.0, dpi_ / 72.0);
  cairo_set_source_rgb(cr_, 1, 1, 1);
  cairo_paint(cr_);
  cairo_set_line_join(cr_, CAIRO_LINE_JOIN_ROUND);
}

void Canvas::check(const char* what) const {
  const cairo_status_t st = cairo_status(cr_);
  if (st != CAIRO_STATUS_SUCCESS) throw Error(std::string("cairo failed ") + what + ": " + cairo_status_to_string(st));
}

void Canvas::text(const std::string& s0, double x, double y, double size, double ha, double va, double angle_deg,
                  bool bold, Rgb color) {
  const std::string s = clean_utf8(s0);
  if (s.empty()) return;
  const double dx = -ha * text_width(s, size, bold), dy = va * kCapHeight * size;
  cairo_save(cr_);
  cairo_translate(cr_, x, y);
  cairo_rotate(cr_, -angle_deg * kPi / 180.0);
  cairo_set_source_rgb(cr_, color.r, color.g, color.b);
  cairo_move_to(cr_, dx, dy);
  for (const auto& [font, run] : font_runs(s)) {  // each run moves the current point on by its advance
    set_font(cr_, font, size, bold);
    cairo_show_text(cr_, run.c_str());
  }
  cairo_restore(cr_);
  check("drawing text");
  if (format_ == Format::kSvg) texts_.push_back({s, x, y, size, dx, dy, angle_deg, bold});
}

void Canvas::fill_rect(double x, double y, double w, double h, Rgb c) {
  cairo_rectangle(cr_, x, y, w, h);
  cairo_set_source_rgb(cr_, c.r, c.g, c.b);
  cairo_fill(cr_);
}

void Canvas::stroke_rect(double x, double y, double w, double h, double lw, Rgb c) {
  cairo_rectangle(cr_, x, y, w, h);
  cairo_set_source_rgb(cr_, c.r, c.g, c.b);
  cairo_set_line_width(cr_, lw);
  cairo_stroke(cr_);
}

void Canvas::line(double x0, double y0, double x1, double y1, double lw, Rgb c, bool dashed) {
  cairo_save(cr_);
  if (dashed) {
    const double d[2] = {2.0, 1.5};
    cairo_set_dash(cr_, d, 2, 0);
  }
  cairo_move_to(cr_, x0, y0);
  cairo_line_to(cr_, x1, y1);
  cairo_set_source_rgb(cr_, c.r, c.g, c.b);
  cairo_set_line_width(cr_, lw);
  cairo_set_line_cap(cr_, CAIRO_LINE_CAP_BUTT);
  cairo_stroke(cr_);
  cairo_restore(cr_);
}

void Canvas::polyline(const std::vector<double>& xs, const std::vector<double>& ys, double lw, Rgb c) {
  bool pen = false;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!std::isfinite(xs[i]) || !std::isfinite(ys[i])) {  // a gap in the line
      pen = false;
      continue;
    }
    if (pen)
      cairo_line_to(cr_, xs[i], ys[i]);
    else
      cairo_move_to(cr_, xs[i], ys[i]);
    pen = true;
  }
  cairo_set_source_rgb(cr_, c.r, c.g, c.b);
  cairo_set_line_width(cr_, lw);
  cairo_stroke(cr_);
}

void Canvas::marker(double x, double y, double radius, Rgb fill) {
  cairo_new_path(cr_);
  cairo_arc(cr_, x, y, radius, 0, 2 * kPi);
  cairo_set_source_rgb(cr_, fill.r, fill.g, fill.b);
  cairo_fill_preserve(cr_);
  cairo_set_source_rgb(cr_, 1, 1, 1);
  cairo_set_line_width(cr_, 0.4);
  cairo_stroke(cr_);
}

std::string Canvas::finish() {
  check("drawing the figure");
  cairo_destroy(cr_);
  cr_ = nullptr;
  std::string out;
  if (format_ == Format::kPng) {
    cairo_surface_flush(surface_);
    const cairo_status_t st = cairo_surface_write_to_png_stream(surface_, append_to_string, &out);
    if (st != CAIRO_STATUS_SUCCESS) throw Error(std::string("cannot encode the PNG: ") + cairo_status_to_string(st));
    out = add_png_dpi(out, dpi_);
  } else {
    cairo_surface_finish(surface_);
    const cairo_status_t st = cairo_surface_status(surface_);
    if (st != CAIRO_STATUS_SUCCESS)
      throw Error(std::string("cannot write the ") + format_name(format_) + ": " + cairo_status_to_string(st));
    out.swap(stream_);
  }
  cairo_surface_destroy(surface_);
  surface_ = nullptr;
  if (format_ != Format::kSvg) return out;

  // SVG: stable ids, a <title>, and the text as an invisible layer of <text> elements over cairo's glyph outlines,
  // so the labels can be searched, selected and read by tools.
  out = canonical_svg_ids(out);
  const size_t svg_open = out.find("<svg");
  const size_t svg_open_end = svg_open == std::string::npos ? svg_open : out.find('>', svg_open);
  const size_t svg_close = out.rfind("</svg>");
  if (svg_open_end == std::string::npos || svg_close == std::string::npos || svg_close < svg_open_end)
    throw Error("cairo wrote an SVG without an <svg> element");
  std::string layer =
      "<g id=\"text\" style=\"fill:#000000;fill-opacity:0;stroke:none\" "
      "font-family=\"DejaVu Sans\" xml:space=\"preserve\">\n";
  for (const TextItem& t : texts_) {
    layer += "<text transform=\"translate(" + num(t.x) + " " + num(t.y) + ")";
    if (t.angle_deg != 0.0) layer += " rotate(" + num(-t.angle_deg) + ")";
    layer += "\" x=\"" + num(t.dx) + "\" y=\"" + num(t.dy) + "\" font-size=\"" + num(t.size) + "\"";
    if (t.bold) layer += " font-weight=\"bold\"";
    layer += ">" + xml_escape(t.s) + "</text>\n";
  }
  layer += "</g>\n";
  std::string result = out.substr(0, svg_open_end + 1);
  result += "\n<title>" + xml_escape(title_) + "</title>";
  result += out.substr(svg_open_end + 1, svg_close - svg_open_end - 1);
  result += layer;
  result += out.substr(svg_close);
  return result;
}

}  // namespace focal::figures
