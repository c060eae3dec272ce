// Figures at real-model scale (30 layers x 9 heads, hundreds of keys): the key window, top-key labels and the
// numbered key axis of the distribution, --layers / --heads selection, the grid and matrix within a page, log colour
// when the mass is concentrated, the per-layer sweep's colour bar instead of a 30-entry legend, a stable colour per
// run kind, matrix cells with significant digits (never "−0"), a probability axis that stops at 1, and the corpus
// figure of a 30 x 9 stats file with every label whole and on the page, its position axis ending where the
// documents end and one head named in the singular. Oracles: the planted values of synthetic captures and stats
// files (which key holds the peak, which layers exist, how long the documents are), the palette's documented
// colours, and each label's extent measured with the figure's own font.
#include <cairo.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <regex>
#include <string>
#include <vector>

#include "focal/capture.h"
#include "focal/error.h"
#include "focal/metrics.h"
#include "focal/model.h"
#include "focal/trainer.h"
#include "focal_batch/stats.h"
#include "focal_batch/stats_file.h"
#include "canvas.h"
#include "focal_figures/corpus.h"
#include "focal_figures/figures.h"
#include "focal_figures/ticks.h"
#include "palette.h"

namespace focal::figures {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kMinus = "\xE2\x88\x92";

// Piece of token i: "w000", "w001", ... so that every label is unique and searchable; key 181 is " to".
std::string piece(int i) {
  if (i == 181) return " to";
  char b[16];
  std::snprintf(b, sizeof b, " w%03d", i);
  return b;
}

// A capture of L x H heads over T tokens, runs "standard" (scale 1) and "focal_t0.4" (scale 2.5 + delta), with
// probabilities of the `stored` layers (every head and query) and metrics of all. Raw scores: a sink on key 0, a
// peak on key 181 (when T > 181) and a mild pattern elsewhere.
CaptureFile make_capture(int L, int H, int T, std::vector<int> stored, float delta = 0.0f) {
  CaptureFile f;
  f.model_path = "fixture";
  f.tool_version = version();
  f.created_utc = "2025-01-01T00:00:00Z";
  f.n_layers = L;
  f.n_heads = H;
  f.d_head = 8;
  for (int i = 0; i < T; ++i) {
    f.token_ids.push_back(10 + i);
    f.pieces.push_back(piece(i));
  }
  for (auto [name, scale] : {std::pair<std::string, float>{"standard", 1.0f}, {"focal_t0.4", 2.5f + delta}}) {
    RunCapture r;
    r.name = name;
    r.temp_spec_json = "{}";
    r.layers = stored;
    for (int h = 0; h < H; ++h) r.heads.push_back(h);
    for (int q = 0; q < T; ++q) r.queries.push_back(q);
    r.metrics.assign((size_t)L * H * T * kNumRowMetrics, 0.0f);
    r.row_scale.assign((size_t)L * H * T, scale);
    r.probs.assign(stored.size() * H * T * T, 0.0f);
    std::vector<float> raw(T), p(T);
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h)
        for (int i = 0; i < T; ++i) {
          for (int j = 0; j <= i; ++j)
            raw[j] =
                0.3f * std::sin(0.7f * j + 0.3f * i + l + 0.5f * h) + (j == 0 ? 4.0f : 0.0f) + (j == 181 ? 6.0f : 0.0f);
          softmax_scaled(raw.data(), i + 1, scale, p.data(),
                         &r.metrics[(((size_t)l * H + h) * T + i) * kNumRowMetrics]);
          for (size_t a = 0; a < stored.size(); ++a)
            if (stored[a] == l)
              for (int j = 0; j <= i; ++j) r.probs[((a * H + h) * T + i) * T + j] = p[j];
        }
    r.token_nll.assign(T, 1.5f);
    f.runs.push_back(std::move(r));
  }
  return f;
}

SweepFile make_sweep(int L, int H) {
  SweepFile s;
  s.model_path = "fixture";
  s.tool_version = version();
  s.created_utc = "2025-01-01T00:00:00Z";
  s.base_spec_json = "{}";
  s.n_layers = L;
  s.n_heads = H;
  s.token_ids = {1, 2, 3, 4};
  s.focal_temps = {0.3f, 0.5f, 0.7f, 1.0f};
  for (float t : s.focal_temps) {
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h)
        for (int m = 0; m < kNumRowMetrics; ++m) s.head_metrics.push_back(t * (1.0f + 0.1f * l + 0.01f * h));
    s.mean_nll.push_back(3.0f);
  }
  return s;
}

std::string svg(const std::string& kind, const CaptureFile& f, const FigureOptions& o) {
  return render_figure(kind, {{&f, nullptr, "cap"}}, o, Format::kSvg);
}

// The SVG's invisible text layer holds every label as <text ...>LABEL</text>.
bool has_label(const std::string& s, const std::string& label) {
  return s.find(">" + label + "<") != std::string::npos;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) { return e.what(); }
  return "";
}

// A stats file as `focal batch` leaves it for n_docs documents of n_tokens tokens under runs "standard" and
// "focal_t0.4" with --max-tokens 512, filled through the batch's own Accumulator. Row i of layer l, head h has
// 0.1 ln(i + 1) (1 + 0.02 l + 0.01 h) for every metric under standard and 60 % of that under focal (no relevant mass).
batch::StatsFile make_stats(int L, int H, int n_docs, int n_tokens) {
  batch::StatsShape shape;
  shape.n_runs = 2;
  shape.n_layers = L;
  shape.n_heads = H;
  shape.n_metrics = kNumRowMetrics;
  shape.max_tokens = 512;
  batch::StatsFile f;
  f.run_names = {"standard", "focal_t0.4"};
  f.run_specs_json = {"{}", "{}"};
  for (int m = 0; m < kNumRowMetrics; ++m) {
    f.metric_names.push_back(row_metric_name(m));
    f.hist_edges.push_back(batch::histogram_edges(shape, m));
  }
  f.pos_edges = batch::position_bucket_edges(shape);
  f.stats = batch::CorpusStats(shape);
  batch::Accumulator acc(shape);
  std::vector<float> metrics((size_t)H * n_tokens * kNumRowMetrics);  // [H, T, M] of one layer
  for (int d = 0; d < n_docs; ++d) {
    for (int r = 0; r < 2; ++r)
      for (int l = 0; l < L; ++l) {
        for (int h = 0; h < H; ++h)
          for (int i = 0; i < n_tokens; ++i)
            for (int m = 0; m < kNumRowMetrics; ++m)
              metrics[((size_t)h * n_tokens + i) * kNumRowMetrics + m] =
                  m == kRelevantMass ? NAN
                                     : (float)(0.1 * std::log(i + 1.0) * (1 + 0.02 * l + 0.01 * h) * (r ? 0.6 : 1.0));
        acc.add_layer(f.stats, r, l, n_tokens, metrics.data());
      }
    acc.finish_document(f.stats);
    ++f.stats.n_docs;
    f.stats.n_tokens += (uint64_t)n_tokens;
  }
  return f;
}

// One label of an SVG's text layer: the text, its anchor, its offset from the anchor, size, angle and weight.
struct SvgText {
  std::string s;
  double x = 0, y = 0, dx = 0, dy = 0, size = 0, angle = 0;
  bool bold = false;
};

std::vector<SvgText> svg_texts(const std::string& svg) {
  static const std::regex re(
      "<text transform=\"translate\\(([-0-9.e]+) ([-0-9.e]+)\\)(?: rotate\\(([-0-9.e]+)\\))?\" "
      "x=\"([-0-9.e]+)\" y=\"([-0-9.e]+)\" font-size=\"([0-9.e]+)\"( font-weight=\"bold\")?>([^<]*)</text>");
  std::vector<SvgText> out;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    SvgText t;
    t.x = std::stod(m[1]);
    t.y = std::stod(m[2]);
    t.angle = m[3].matched ? std::stod(m[3]) : 0.0;
    t.dx = std::stod(m[4]);
    t.dy = std::stod(m[5]);
    t.size = std::stod(m[6]);
    t.bold = m[7].matched;
    t.s = m[8];
    for (auto [esc, ch] :
         {std::pair<std::string, std::string>{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&amp;", "&"}})
      for (size_t at = 0; (at = t.s.find(esc, at)) != std::string::npos; at += ch.size())
        t.s.replace(at, esc.size(), ch);
    out.push_back(t);
  }
  return out;
}

// Every label of the SVG lies on its page (advance width by capitals and descenders, rotation included) and none
// is shortened with "…". Returns the offending labels, one a line.
std::string labels_off_the_page(const std::string& svg) {
  std::smatch m;
  if (!std::regex_search(svg, m, std::regex("viewBox=\"0 0 ([0-9.]+) ([0-9.]+)\""))) return "no viewBox";
  const double W = std::stod(m[1]), H = std::stod(m[2]);
  const Canvas measure(Format::kSvg, 72);
  std::string bad;
  for (const SvgText& t : svg_texts(svg)) {
    const double w = measure.text_width(t.s, t.size, t.bold), a = t.angle * 3.14159265358979 / 180;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (double u : {t.dx, t.dx + w})
      for (double v : {t.dy - kCapHeight * t.size, t.dy + kDescent * t.size}) {
        const double px = t.x + u * std::cos(a) - v * std::sin(a), py = t.y + u * std::sin(a) + v * std::cos(a);
        x0 = std::min(x0, px), x1 = std::max(x1, px), y0 = std::min(y0, py), y1 = std::max(y1, py);
      }
    if (x0 < -0.01 || x1 > W + 0.01 || y0 < -0.01 || y1 > H + 0.01)
      bad += "'" + t.s + "' spans x " + std::to_string(x0) + ".." + std::to_string(x1) + ", y " + std::to_string(y0) +
             ".." + std::to_string(y1) + " of " + std::to_string(W) + " x " + std::to_string(H) + "\n";
    if (t.s.find("\xE2\x80\xA6") != std::string::npos) bad += "'" + t.s + "' is shortened\n";
  }
  return bad;
}

// The PNG of one piece of text, 40 pt on a 120 x 60 pt page.
std::string png_of_text(const std::string& text, bool bold = false) {
  Canvas c(Format::kPng, 72);
  c.begin(120, 60, "t");
  c.text(text, 10, 45, 40, 0, 0, 0, bold);
  return c.finish();
}

TEST(FigureScale, CharactersDejaVuLacksAreDrawnFromAFallbackFontNotAsBoxes) {
  // DejaVu Sans has no CJK ideographs and no emoji: drawn from it, every such character is the same missing-glyph
  // box, so two different characters give the same pixels. From a fallback font (scripts/install-deps.sh installs
  // fonts-droid-fallback and fonts-symbola) they differ, in plain and bold text, and so do their widths' sums.
  const Canvas measure(Format::kPng, 72);
  for (const auto& [a, b] : {std::pair<std::string, std::string>{"\xE6\xB3\xA8", "\xE6\x84\x8F"},  // 注 意
                             {"\xF0\x9F\x98\x80", "\xF0\x9F\x9A\x80"}}) {                          // 😀 🚀
    SCOPED_TRACE(a + " " + b);
    EXPECT_NE(png_of_text(a), png_of_text(b)) << "both drawn as the missing-glyph box";
    EXPECT_NE(png_of_text(a, true), png_of_text(b, true)) << "bold: both drawn as the missing-glyph box";
    EXPECT_GT(measure.text_width(a, 40), 0.0);
  }
  // A character no font has (plane 16's private use) is still the box; text around it keeps its own font, and a
  // mixed string's width is the sum of its runs' widths (within rounding).
  const std::string none = "\xF4\x8F\xBF\xBD", none2 = "\xF4\x8F\xBF\xBC";
  EXPECT_EQ(png_of_text(none), png_of_text(none2));
  const std::string mixed = "t = 0.4 \xE6\xB3\xA8";
  EXPECT_NEAR(measure.text_width(mixed, 10),
              measure.text_width("t = 0.4 ", 10) + measure.text_width("\xE6\xB3\xA8", 10), 1e-9);
}

TEST(FigureScale, DistributionAtThreeHundredKeysNumbersTheAxisAndLabelsThePeak) {
  const CaptureFile f = make_capture(1, 1, 300, {0});
  FigureOptions o;
  o.runs = {"standard"};
  const std::string s = svg("distribution", f, o);
  // 300 tokens cannot all be named at 7 pt in a column: the axis shows key positions at round steps...
  EXPECT_TRUE(has_label(s, "100")) << "numbered key axis";
  EXPECT_THAT(s, HasSubstr("Key position"));
  // ...no token sits under a neighbour's bar (a thinned token axis put "stair" under key 181's peak)...
  for (int i = 170; i < 190; ++i) EXPECT_FALSE(has_label(s, piece(i).substr(1))) << i;
  // ...and the peak is named with its token and position.
  EXPECT_TRUE(has_label(s, "to (181)")) << "top key label";
  o.top_keys = 0;
  EXPECT_FALSE(has_label(svg("distribution", f, o), "to (181)"));
}

TEST(FigureScale, DistributionKeyWindowShowsOnlyThoseKeys) {
  const CaptureFile f = make_capture(1, 1, 300, {0});
  FigureOptions o;
  o.runs = {"standard"};
  o.key_first = 176;
  o.key_last = 186;
  const std::string s = svg("distribution", f, o);
  for (int i = 176; i <= 186; ++i) EXPECT_TRUE(has_label(s, piece(i).substr(1))) << i;  // 11 tokens fit: named
  EXPECT_FALSE(has_label(s, piece(175).substr(1)));
  EXPECT_FALSE(has_label(s, piece(187).substr(1)));
  o = {};
  o.runs = {"standard"};
  o.key_window = 5;  // the 5 keys ending at the query (299)
  const std::string w = svg("distribution", f, o);
  for (int i = 295; i <= 299; ++i) EXPECT_TRUE(has_label(w, piece(i).substr(1))) << i;
  EXPECT_FALSE(has_label(w, piece(294).substr(1)));
  o = {};
  o.key_first = 250;
  o.key_last = 320;
  EXPECT_THAT(error_of([&] { svg("distribution", f, o); }),
              HasSubstr("keys: keys 250:320 are not within the keys 0:299"));
  o = {};
  o.key_first = 5;
  EXPECT_THAT(error_of([&] { svg("grid", f, o); }), HasSubstr("keys does not apply to the grid figure"));
}

TEST(FigureScale, LayerAndHeadSelectionForEveryKind) {
  const CaptureFile f = make_capture(30, 9, 12, {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14,
                                                 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29});
  FigureOptions o;
  o.layers = {2, 17};
  o.heads = {1, 8};
  const std::string g = svg("grid", f, o);
  for (const char* l : {"L2", "L17", "H1", "H8"}) EXPECT_TRUE(has_label(g, l)) << l;
  for (const char* l : {"L0", "L3", "H0", "H2"}) EXPECT_FALSE(has_label(g, l)) << l;
  o.matrix = true;
  const std::string m = svg("entropy", f, o);
  EXPECT_TRUE(has_label(m, "17"));
  EXPECT_FALSE(has_label(m, "16"));
  o.matrix = false;
  o.heads = {};
  const std::string e = svg("entropy", f, o);  // bars of layers 2 and 17 only
  EXPECT_TRUE(has_label(e, "17"));
  EXPECT_FALSE(has_label(e, "3"));
  o = {};
  o.layers = {3};
  o.heads = {4};
  EXPECT_THAT(svg("distribution", f, o), HasSubstr("Layer 3, head 4"));
  o.layers = {3, 4};
  EXPECT_THAT(error_of([&] { svg("heatmap", f, o); }), HasSubstr("layers: the heatmap figure draws one head"));
  o.layers = {2};
  o.layer = 1;  // both spellings with other layers: said as such (it read "draws one head: give one layer (layer 2)")
  EXPECT_THAT(error_of([&] { svg("heatmap", f, o); }),
              HasSubstr("layers 2 and the one layer given (1) name different layers"));
  o = {};
  o.layers = {30};
  EXPECT_THAT(error_of([&] { svg("grid", f, o); }), HasSubstr("layer 30"));
  EXPECT_THAT(error_of([&] { svg("entropy", f, o); }),
              HasSubstr("layers: layer 30 is not in the model (layers: 0-29)"));
}

// A PNG in memory as a cairo image surface (the caller destroys it; check its status).
cairo_surface_t* png_surface(const std::string& png) {
  struct R {
    const std::string* s;
    size_t pos;
  } rd{&png, 0};
  return cairo_image_surface_create_from_png_stream(
      [](void* c, unsigned char* d, unsigned int n) {
        auto* r = static_cast<R*>(c);
        if (r->pos + n > r->s->size()) return CAIRO_STATUS_READ_ERROR;
        std::copy(r->s->data() + r->pos, r->s->data() + r->pos + n, d);
        r->pos += n;
        return CAIRO_STATUS_SUCCESS;
      },
      &rd);
}

// The share of a PNG's height below its last row that holds a non-white pixel (white space left at the bottom).
double bottom_white_fraction(const std::string& png) {
  cairo_surface_t* img = png_surface(png);
  if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
    cairo_surface_destroy(img);
    ADD_FAILURE() << "not a PNG";
    return 1.0;
  }
  cairo_surface_flush(img);
  const int w = cairo_image_surface_get_width(img), h = cairo_image_surface_get_height(img);
  const int stride = cairo_image_surface_get_stride(img);
  const unsigned char* data = cairo_image_surface_get_data(img);
  int last = -1;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const uint32_t px = *reinterpret_cast<const uint32_t*>(data + (size_t)y * stride + (size_t)x * 4);
      if ((px & 0xFF) < 240 || ((px >> 8) & 0xFF) < 240 || ((px >> 16) & 0xFF) < 240) last = y;
    }
  cairo_surface_destroy(img);
  return (double)(h - 1 - last) / h;
}

// A diffuse head over 60 tokens (uniform rows: row i peaks at 1 / (i + 1), 40 of 59 rows below a tenth of row 1's
// 0.5) is nearly black on a linear scale: the heatmap defaults to log colour. A sharp head (one-hot rows) stays
// linear, and --linear keeps the diffuse one linear.
TEST(FigureScale, HeatmapOfADiffuseHeadUsesLogColourASharpOneStaysLinear) {
  const int T = 60;
  CaptureFile f = make_capture(1, 1, T, {0});
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j) {
      f.runs[0].probs[(size_t)i * T + j] = j <= i ? 1.0f / float(i + 1) : 0.0f;    // standard: uniform
      f.runs[1].probs[(size_t)i * T + j] = j == std::max(0, i - 1) ? 1.0f : 0.0f;  // focal: previous token
    }
  FigureOptions o;
  o.runs = {"standard"};
  EXPECT_THAT(svg("heatmap", f, o), HasSubstr("(log scale)"));
  o.linear_scale = true;
  EXPECT_THAT(svg("heatmap", f, o), Not(HasSubstr("(log scale)")));
  o = {};
  o.runs = {"focal_t0.4"};
  EXPECT_THAT(svg("heatmap", f, o), Not(HasSubstr("(log scale)")));
  o.log_scale = true;
  EXPECT_THAT(svg("heatmap", f, o), HasSubstr("(log scale)"));
}

// Token ticks that would read the same name their positions too ("mat" four times on a repeated prompt told no
// position); distinct ones stay bare.
TEST(FigureScale, HeatmapTicksOfRepeatedTokensNameTheirPositions) {
  CaptureFile f = make_capture(1, 1, 12, {0});
  FigureOptions o;
  std::string s = svg("heatmap", f, o);
  EXPECT_TRUE(has_label(s, "w003")) << "distinct pieces are labelled bare";
  EXPECT_FALSE(has_label(s, "w003 (3)"));
  for (int i = 0; i < 12; ++i) f.pieces[(size_t)i] = i % 3 == 0 ? " the" : piece(i);
  s = svg("heatmap", f, o);
  EXPECT_TRUE(has_label(s, "the (3)")) << "a repeated piece names its position";
  EXPECT_TRUE(has_label(s, "the (9)"));
  EXPECT_TRUE(has_label(s, "w004 (4)"));
  EXPECT_FALSE(has_label(s, "the"));
}

TEST(FigureScale, GridOfThirtyByNineFitsAColumnPageAndUsesLogColourWhenMassIsConcentrated) {
  std::vector<int> all(30);
  std::iota(all.begin(), all.end(), 0);
  const CaptureFile f = make_capture(30, 9, 24, all);
  FigureOptions o;
  o.runs = {"focal_t0.4"};
  o.dpi = 72;
  const std::string png = render_figure("grid", {{&f, nullptr, "cap"}}, o, Format::kPng);
  cairo_surface_t* img = png_surface(png);
  ASSERT_EQ(cairo_surface_status(img), CAIRO_STATUS_SUCCESS);
  const int w = cairo_image_surface_get_width(img), h = cairo_image_surface_get_height(img);
  cairo_surface_destroy(img);
  EXPECT_EQ(w, (int)std::lround(3.4 * 72));
  EXPECT_LE(h, (int)std::ceil(1.3 * 3.4 * 72) + 1) << "was 8.9 in tall at 3.4 in";
  // Focal t = 0.4 puts nearly all mass on the sink and key 181: log colour by default, linear on request.
  EXPECT_THAT(svg("grid", f, o), HasSubstr("(log)"));
  o.linear_scale = true;
  EXPECT_THAT(svg("grid", f, o), Not(HasSubstr("(log)")));
  // --height is filled: the page is exactly that tall.
  o = {};
  o.height_in = 3.0;
  o.dpi = 72;
  const std::string sized = render_figure("grid", {{&f, nullptr, "cap"}}, o, Format::kSvg);
  EXPECT_THAT(sized, HasSubstr("height=\"216"));
  // ... and its thumbnails fill it (about 60 % of a --height page was left white): at most 20 % white below them,
  // for all 30 layers and for 4 of them.
  EXPECT_LE(bottom_white_fraction(render_figure("grid", {{&f, nullptr, "cap"}}, o, Format::kPng)), 0.2);
  o.layers = {0, 1, 2, 3};
  EXPECT_LE(bottom_white_fraction(render_figure("grid", {{&f, nullptr, "cap"}}, o, Format::kPng)), 0.2);
}

TEST(FigureScale, PerLayerSweepPastEightLayersTradesTheLegendForAColourBar) {
  const SweepFile many = make_sweep(30, 9), few = make_sweep(4, 2);
  FigureOptions o;
  o.per_layer = true;
  const std::string s30 = render_figure("sweep", {{nullptr, &many, "s"}}, o, Format::kSvg);
  EXPECT_FALSE(has_label(s30, "layer 17")) << "a 30-entry legend";
  EXPECT_TRUE(has_label(s30, "Layer")) << "the colour bar's title";
  EXPECT_TRUE(has_label(s30, "25"));  // a round tick on the layer colour bar
  const std::string s4 = render_figure("sweep", {{nullptr, &few, "s"}}, o, Format::kSvg);
  EXPECT_TRUE(has_label(s4, "layer 3"));  // few layers keep their legend
  o.layers = {3, 12};
  const std::string sel = render_figure("sweep", {{nullptr, &many, "s"}}, o, Format::kSvg);
  EXPECT_TRUE(has_label(sel, "layer 12"));
  EXPECT_FALSE(has_label(sel, "layer 4"));
}

// Sweeps of models of other shapes: each line is its own file's mean over all of its layers and heads (t (1 + 0.1 l
// + 0.01 h) averages to 2.49 t over 30 x 9 and 1.155 t over 4 x 2). The first file's selection was applied to all:
// the 30-layer sweep drew 1.155 t when second, and a smaller second file was read past its end.
TEST(FigureScale, SweepsOfModelsOfOtherShapesAverageTheirOwnHeads) {
  const SweepFile many = make_sweep(30, 9), few = make_sweep(4, 2);
  FigureOptions o;
  o.width_in = 5;
  for (bool many_first : {true, false}) {
    const SweepFile& a = many_first ? many : few;
    const SweepFile& b = many_first ? few : many;
    const std::string s = render_figure("sweep", {{nullptr, &a, "a"}, {nullptr, &b, "b"}}, o, Format::kSvg);
    EXPECT_TRUE(has_label(s, "2.5")) << "the 30 x 9 sweep's 2.49 at t = 1 sets the top tick";
    EXPECT_FALSE(has_label(s, "3.0")) << "nothing above 2.49";
  }
  o.layers = {0};  // a selection across models of other shapes names no common heads
  EXPECT_THROW(render_figure("sweep", {{nullptr, &many, "a"}, {nullptr, &few, "b"}}, o, Format::kSvg), Error);
}

// A learned-tau log of a 12-layer model: the tau figure colours its 12 lines by layer with a colour bar, no legend.
TEST(FigureScale, TauPerLayerPastEightLayersTradesTheLegendForAColourBar) {
  auto make_log = [](int L) {
    TrainLog log;
    log.run_name = "learned";
    log.train_config_json = R"({"batch": 4, "seq_len": 64, "steps": 100, "eval_every": 50})";
    log.model_config_json = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": )" +
                            std::to_string(L) +
                            R"(, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
      "max_position_embeddings": 512, "focal": {"mode": "learned", "tau_bias": true, "tau_min": 1.77,
      "tau_max": 3.54}})";
    log.tool_version = version();
    log.created_utc = "2025-01-01T00:00:00Z";
    log.n_layers = L;
    for (int s = 50; s <= 100; s += 50) {
      log.eval_step.push_back(s);
      log.val_loss.push_back(3.0f);
      log.train_loss.push_back(3.0f);
      log.lr.push_back(1e-3f);
      log.grad_norm.push_back(0.5f);
      log.tokens_per_s.push_back(1000.0f);
      for (int l = 0; l < L; ++l) log.tau_mean.push_back(2.0f + 0.1f * l + 0.001f * s);
      log.tau_clip_frac.push_back(0.0f);
    }
    return log;
  };
  const TrainLog many = make_log(12), few = make_log(3);
  FigureOptions o;
  o.tau = true;
  Source src;
  src.train_log = &many;
  src.label = "learned";
  const std::string s12 = render_figure("training", {src}, o, Format::kSvg);
  EXPECT_FALSE(has_label(s12, "layer 7"));
  EXPECT_TRUE(has_label(s12, "Layer"));
  // --layers picks the tau lines: 3 of the 12 get a legend again, named by their own layer numbers.
  o.layers = {0, 5, 11};
  const std::string sel = render_figure("training", {src}, o, Format::kSvg);
  EXPECT_TRUE(has_label(sel, "layer 11"));
  EXPECT_TRUE(has_label(sel, "layer 5"));
  EXPECT_FALSE(has_label(sel, "layer 1"));
  o.layers = {12};
  EXPECT_THAT(error_of([&] { render_figure("training", {src}, o, Format::kSvg); }),
              HasSubstr("layers: layer 12 is not in the training log (layers: 0-11)"));
  o.layers = {};
  src.train_log = &few;
  EXPECT_TRUE(has_label(render_figure("training", {src}, o, Format::kSvg), "layer 2"));
  // Without --tau the training figure has no layers to pick.
  o.tau = false;
  o.layers = {0};
  EXPECT_THAT(error_of([&] { render_figure("training", {src}, o, Format::kSvg); }), HasSubstr("layers"));
}

TEST(FigureScale, RunColoursFollowTheAttentionKindNotTheOrder) {
  const std::vector<Rgb> a = run_colors({"standard", "focal_t0.4"}), b = run_colors({"focal_t0.4", "standard"});
  auto same = [](Rgb x, Rgb y) { return std::fabs(x.r - y.r) + std::fabs(x.g - y.g) + std::fabs(x.b - y.b) < 1e-9; };
  EXPECT_TRUE(same(a[1], b[0]));
  EXPECT_TRUE(same(a[0], b[1]));
  EXPECT_TRUE(same(b[0], category_color(1)));  // focal: vermillion, even first
  EXPECT_TRUE(same(run_colors({"learned"})[0], category_color(2)));
  EXPECT_TRUE(same(run_colors({"cap:standard"})[0], category_color(0)));
  // A position-loss file's runs are named as spelled: "focal:0.2" is focal (it took the next free colour), as are
  // "native (focal:0.4)" and a qualified one; "standard@dynamic:2" is standard.
  EXPECT_EQ(run_kind("focal:0.2"), 1);
  EXPECT_EQ(run_kind("native (focal:0.4)"), 1);
  EXPECT_EQ(run_kind("pos:focal:0.2"), 1);
  EXPECT_EQ(run_kind("standard@dynamic:2"), 0);
  EXPECT_EQ(run_kind("standard_runs:focal_t0.4"), 1);
  EXPECT_EQ(run_kind("native (standard)"), 0);
  // "learned" anywhere is the learned kind (the bundled focal-learned model drew as a second focal run); a label
  // giving t is focal.
  EXPECT_EQ(run_kind("focal-learned"), 2);
  EXPECT_EQ(run_kind("focal_learned"), 2);
  EXPECT_EQ(run_kind("t=0.3"), 1);
  EXPECT_EQ(run_kind("t = 0.5"), 1);
  EXPECT_EQ(run_kind("t=1.0 (standard)"), 0);
  EXPECT_EQ(run_kind("temps"), -1);
  // Five lines of a temperature sweep: none yellow (faint on white) while another colour is free.
  const std::vector<Rgb> sweep = run_colors({"t=0.3", "t=0.4", "t=0.5", "t=0.6", "t=1.0 (standard)"});
  for (const Rgb& c : sweep) EXPECT_FALSE(same(c, category_color(7)));
  EXPECT_TRUE(same(sweep[0], category_color(1)));
  EXPECT_TRUE(same(sweep[4], category_color(0)));
  const std::vector<Rgb> two = run_colors({"focal_t0.3", "focal_t0.4"});
  EXPECT_FALSE(same(two[0], two[1]));  // two runs of one kind still differ
  // ... and the second takes a colour no kind owns (it took standard's blue)
  for (int kind_colour : {0, 1, 2, 4}) EXPECT_FALSE(same(two[1], category_color(kind_colour))) << kind_colour;
  // In a figure: the focal run alone draws vermillion bars (it used to be blue when it came first).
  const CaptureFile f = make_capture(2, 2, 12, {0, 1});
  FigureOptions o;
  o.runs = {"focal_t0.4"};
  o.dpi = 72;
  const std::string png = render_figure("entropy", {{&f, nullptr, "cap"}}, o, Format::kPng);
  cairo_surface_t* img = png_surface(png);
  ASSERT_EQ(cairo_surface_status(img), CAIRO_STATUS_SUCCESS);
  size_t vermillion = 0, blue = 0;
  const int w = cairo_image_surface_get_width(img), h = cairo_image_surface_get_height(img);
  const int stride = cairo_image_surface_get_stride(img);
  const unsigned char* d = cairo_image_surface_get_data(img);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const uint32_t v = reinterpret_cast<const uint32_t*>(d + (size_t)y * stride)[x] & 0xFFFFFF;
      vermillion += v == 0xD55E00;
      blue += v == 0x0072B2;
    }
  cairo_surface_destroy(img);
  EXPECT_GT(vermillion, 100u);
  EXPECT_EQ(blue, 0u);
}

TEST(FigureScale, MatrixCellsUseSignificantDigitsNeverMinusZero) {
  // Runs whose metrics differ by a little: differences of order 1e-3 were rounded to "0" and "−0".
  const CaptureFile f = make_capture(3, 3, 12, {0}, 0.0f);
  CaptureFile g = f;
  const int T = 12, H = 3;
  for (size_t i = 0; i < g.runs[1].metrics.size(); i += kNumRowMetrics) {
    const int h = (int)(i / kNumRowMetrics / T) % H;  // B - A = -0.0012, 0, +0.0012 on heads 0, 1, 2
    g.runs[1].metrics[i + kEntropyNats] = g.runs[0].metrics[i + kEntropyNats] + 0.0012f * (float)(h - 1);
  }
  FigureOptions o;
  o.matrix = true;
  o.runs = {"standard", "focal_t0.4"};
  o.width_in = 5;
  const std::string s = svg("entropy", g, o);
  EXPECT_FALSE(has_label(s, kMinus + "0")) << "a −0 cell";
  EXPECT_FALSE(has_label(s, "0.00"));
  // One difference a thousand times under the rest reads "≈0" (its digits took every value off the matrix).
  CaptureFile k = g;
  for (size_t i = 0; i < k.runs[1].metrics.size(); i += kNumRowMetrics) {
    const int h = (int)(i / kNumRowMetrics / T) % H;  // B - A = -0.6, -3.5e-5, +0.6
    k.runs[1].metrics[i + kEntropyNats] =
        k.runs[0].metrics[i + kEntropyNats] + (h == 1 ? -3.5e-5f : 0.6f * (float)(h - 1));
  }
  const std::string tiny = svg("entropy", k, o);
  EXPECT_TRUE(has_label(tiny,
                        "\xE2\x89\x88"
                        "0"))
      << "≈0";
  EXPECT_TRUE(has_label(tiny, kMinus + "0.6"));
  EXPECT_THAT(s, HasSubstr(">0.0012")) << "significant digits";
  EXPECT_EQ(format_number(-0.3, 1.0), "0");
  EXPECT_EQ(format_sig(-0.00012, 2), kMinus + "0.00012");
  // Ticks finer than 1e-4 in powers of ten (a probability axis read "0.0000015"), zero as "0".
  EXPECT_EQ(format_number(1.5e-6, 5e-7),
            "1.5\xC3\x97"
            "10\xE2\x81\xBB\xE2\x81\xB6");  // 1.5×10⁻⁶
  EXPECT_EQ(format_number(5e-7, 5e-7),
            "5\xC3\x97"
            "10\xE2\x81\xBB\xE2\x81\xB7");  // 5×10⁻⁷
  EXPECT_EQ(format_number(0.0, 5e-7), "0");
  EXPECT_EQ(format_number(0.25, 0.05), "0.25");
}

TEST(FigureScale, DistributionProbabilityAxisStopsAtOne) {
  // The focal run's peak on key 181 is p = 0.99; its label needs 12 % more room above the bar. The ticks stopped at
  // 1.5 (0.99 x 1.12 rounded up to a step of 0.5); probabilities stop at 1.
  const CaptureFile f = make_capture(1, 1, 300, {0});
  FigureOptions o;  // both runs, one panel each: at most 4 ticks
  const std::string two = svg("distribution", f, o);
  EXPECT_TRUE(has_label(two, "0.5"));
  EXPECT_TRUE(has_label(two, "1.0"));
  EXPECT_FALSE(has_label(two, "1.5"));
  EXPECT_TRUE(has_label(two, "to (181)")) << "the peak's label still has its room";
  o.runs = {"focal_t0.4"};  // one panel: at most 6 ticks, 0.2 apart
  const std::string one = svg("distribution", f, o);
  EXPECT_TRUE(has_label(one, "0.8"));
  EXPECT_TRUE(has_label(one, "1.0"));
  EXPECT_FALSE(has_label(one, "1.2"));
  // The standard run's peak is p = 0.543 (e^6 against e^4 and 298 keys near e^0), 0.608 with its label's room:
  // ticks come from the data and end at 0.8, not at 1.
  o.runs = {"standard"};
  const std::string low = svg("distribution", f, o);
  EXPECT_TRUE(has_label(low, "0.8"));
  EXPECT_FALSE(has_label(low, "1.0"));
  EXPECT_EQ(labels_off_the_page(two), "");
}

TEST(FigureScale, CorpusOfThirtyByNineHeadsKeepsEveryLabelOnThePage) {
  // SmolLM2's shape. At the default 3.4 in the title and panel titles were shortened with "…" and ran off the page
  // (bold text measured as regular).
  const batch::StatsFile f = make_stats(30, 9, 3, 24);
  FigureOptions o400;  // 400 tokens: the position axis ends at 512, a label centred on the plot's right end
  EXPECT_EQ(labels_off_the_page(render_corpus(make_stats(30, 9, 1, 400), o400, Format::kSvg)), "");
  for (double width : {3.4, 2.6, 7.0}) {
    FigureOptions o;
    o.width_in = width;
    const std::string s = render_corpus(f, o, Format::kSvg);
    EXPECT_EQ(labels_off_the_page(s), "") << width << " in";
    EXPECT_TRUE(has_label(s, "\xCE\x94 Entropy (nats)")) << width << " in";  // the metric and its unit
    o.heads = {6};
    o.layers = {3, 4, 5, 7};
    EXPECT_EQ(labels_off_the_page(render_corpus(f, o, Format::kSvg)), "") << width << " in, a selection";
  }
}

TEST(FigureScale, CorpusPositionAxisEndsWhereTheDocumentsEnd) {
  // Documents of 24 tokens count rows 1..23: buckets [1,2) [2,4) [4,8) [8,16) [16,32). The axis ran on to
  // --max-tokens 512.
  const batch::StatsFile f = make_stats(4, 2, 2, 24);
  FigureOptions o;
  const std::string s = render_corpus(f, o, Format::kSvg);
  for (const char* edge : {"1", "2", "4", "8", "16", "32"}) EXPECT_TRUE(has_label(s, edge)) << edge;
  for (const char* edge : {"64", "128", "256", "512"}) EXPECT_FALSE(has_label(s, edge)) << edge;
  // 200 tokens reach bucket [128, 200) of rows up to 199: the last edge is 256, the bucket's end.
  const std::string longer = render_corpus(make_stats(4, 2, 1, 200), o, Format::kSvg);
  EXPECT_TRUE(has_label(longer, "256"));
  EXPECT_FALSE(has_label(longer, "512"));
}

TEST(FigureScale, CorpusNamesOneHeadOrLayerInTheSingular) {
  const batch::StatsFile f = make_stats(8, 8, 1, 24);
  FigureOptions o;
  o.width_in = 7;  // each panel title on one line
  o.heads = {6};
  std::string s = render_corpus(f, o, Format::kSvg);
  EXPECT_THAT(s, HasSubstr("rows \xE2\x89\xA5 1, head 6<"));
  EXPECT_THAT(s, HasSubstr("mean over layers and head 6<"));
  EXPECT_THAT(s, Not(HasSubstr("heads 6")));
  // At a column's width the titles wrap, and "head 6" stays on one line (no "6" alone under "... and head").
  o.width_in = 3.4;
  s = render_corpus(f, o, Format::kSvg);
  size_t whole = 0;
  for (size_t at = 0; (at = s.find("head 6</text>", at)) != std::string::npos; ++at) ++whole;
  EXPECT_EQ(whole, 2u) << "panels (a) and (b) end their titles with \"head 6\"";
  o.width_in = 7;
  o.heads = {0, 2};
  o.layers = {5};
  s = render_corpus(f, o, Format::kSvg);
  EXPECT_THAT(s, HasSubstr("mean over layer 5 and heads 0,2<"));
  o.heads = {1, 2, 3, 4};
  o.layers = {};
  EXPECT_THAT(render_corpus(f, o, Format::kSvg), HasSubstr("rows \xE2\x89\xA5 1, heads 1-4<"));
}

}  // namespace
}  // namespace focal::figures
