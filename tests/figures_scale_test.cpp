// Figures at real-model scale (30 layers x 9 heads, hundreds of keys): the key window, top-key labels and the
// numbered key axis of the distribution, --layers / --heads selection, the grid and matrix within a page, log colour
// when the mass is concentrated, the per-layer sweep's colour bar instead of a 30-entry legend, a stable colour per
// run kind, and matrix cells with significant digits (never "−0"). Oracles: the planted values of synthetic
// captures (which key holds the peak, which layers exist) and the palette's documented colours.
#include <cairo.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "focal/capture.h"
#include "focal/error.h"
#include "focal/metrics.h"
#include "focal/trainer.h"
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
  const std::vector<Rgb> two = run_colors({"focal_t0.3", "focal_t0.4"});
  EXPECT_FALSE(same(two[0], two[1]));  // two runs of one kind still differ
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
  EXPECT_THAT(s, HasSubstr(">0.0012")) << "significant digits";
  EXPECT_EQ(format_number(-0.3, 1.0), "0");
  EXPECT_EQ(format_sig(-0.00012, 2), kMinus + "0.00012");
}

}  // namespace
}  // namespace focal::figures
