// Tests of focal_figures and `focal figure`: every kind renders from small fixture captures and sweeps made here;
// PNGs decode at the requested size with varied pixels; SVGs are well-formed XML (xmllint) holding their labels;
// SVG and PDF bytes repeat exactly; bad selections fail with messages naming the option and the choices, and the
// CLI then leaves no file behind. Also the ticks, palettes and row selection underneath.
#include <cairo.h>
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "focal/capture.h"
#include "focal/error.h"
#include "focal/metrics.h"
#include "focal_figures/figures.h"
#include "palette.h"
#include "plot.h"
#include "select.h"

namespace focal::figures {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int kLayers = 2, kHeads = 3;
const std::vector<std::string> kPieces = {"<s>", " In", " the", " beginning", " God", " created", "\n", " &<x>\"",
                                          " heaven", " and", " extraordinarilylongpiece", " earth", "."};

// Scores with a sink on key 0 and a pattern that differs per layer and head.
float raw_score(int l, int h, int i, int j) {
  return 2.0f * std::sin(0.7f * j + 0.3f * i + l + 0.5f * h) + (j == 0 ? 2.0f : 0.0f);
}

// A capture of T = 13 tokens with runs "standard" (scale 1) and "focal_t0.4" (scale 2.5) storing `layers` x
// every head x every query, with probabilities and/or raw scores.
CaptureFile make_capture(bool probs, bool scores, std::vector<int> layers = {0, 1}) {
  CaptureFile f;
  f.model_path = "fixture";
  f.tool_version = version();
  f.created_utc = "2025-01-01T00:00:00Z";
  f.n_layers = kLayers;
  f.n_heads = kHeads;
  f.d_head = 8;
  const int T = (int)kPieces.size();
  for (int i = 0; i < T; ++i) f.token_ids.push_back(10 + i);
  f.pieces = kPieces;
  for (auto [name, scale] : {std::pair<std::string, float>{"standard", 1.0f}, {"focal_t0.4", 2.5f}}) {
    RunCapture r;
    r.name = name;
    r.temp_spec_json = "{}";
    r.layers = layers;
    for (int h = 0; h < kHeads; ++h) r.heads.push_back(h);
    for (int q = 0; q < T; ++q) r.queries.push_back(q);
    r.metrics.assign((size_t)kLayers * kHeads * T * kNumRowMetrics, 0.0f);
    r.row_scale.assign((size_t)kLayers * kHeads * T, scale);
    std::vector<float> raw(T), p(T);
    for (int l = 0; l < kLayers; ++l)
      for (int h = 0; h < kHeads; ++h)
        for (int i = 0; i < T; ++i) {
          for (int j = 0; j <= i; ++j) raw[j] = raw_score(l, h, i, j);
          softmax_scaled(raw.data(), i + 1, scale, p.data(),
                         &r.metrics[(((size_t)l * kHeads + h) * T + i) * kNumRowMetrics]);
        }
    const size_t n = layers.size() * kHeads * T * T;
    if (probs) r.probs.assign(n, 0.0f);
    if (scores) r.scores.assign(n, 0.0f);
    for (size_t a = 0; a < layers.size(); ++a)
      for (int h = 0; h < kHeads; ++h)
        for (int i = 0; i < T; ++i) {
          for (int j = 0; j <= i; ++j) raw[j] = raw_score(layers[a], h, i, j);
          softmax_scaled(raw.data(), i + 1, scale, p.data());
          const size_t off = ((a * kHeads + h) * T + i) * T;
          for (int j = 0; j <= i; ++j) {
            if (probs) r.probs[off + j] = p[j];
            if (scores) r.scores[off + j] = raw[j];
          }
        }
    r.token_nll.assign(T, 1.5f);
    r.token_nll.back() = NAN;
    f.runs.push_back(std::move(r));
  }
  return f;
}

SweepFile make_sweep() {
  SweepFile s;
  s.model_path = "fixture";
  s.tool_version = version();
  s.created_utc = "2025-01-01T00:00:00Z";
  s.base_spec_json = "{}";
  s.n_layers = kLayers;
  s.n_heads = kHeads;
  s.token_ids = {1, 2, 3, 4};
  s.focal_temps = {0.3f, 0.5f, 0.7f, 1.0f};
  for (float t : s.focal_temps) {
    for (int l = 0; l < kLayers; ++l)
      for (int h = 0; h < kHeads; ++h)
        for (int m = 0; m < kNumRowMetrics; ++m)
          s.head_metrics.push_back(m == kRelevantMass ? NAN : t * (1.0f + 0.2f * l + 0.05f * h) / (1 + m));
    s.mean_nll.push_back(3.0f + (t - 0.6f) * (t - 0.6f));
  }
  return s;
}

std::string temp_dir() {
  static std::string dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/focal_figures_test_XXXXXX";
    dir = mkdtemp(tmpl);
  }
  return dir;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

// Fixture files, written once per test binary.
struct Files {
  std::string capture, scores_only, layer1_only, metrics_only, empty, sweep;
};
const Files& files() {
  static Files f = [] {
    Files x;
    const std::string d = temp_dir();
    x.capture = d + "/cap.h5";
    write_capture(make_capture(true, true), x.capture);
    x.scores_only = d + "/scores.h5";
    write_capture(make_capture(false, true), x.scores_only);
    x.layer1_only = d + "/layer1.h5";
    write_capture(make_capture(true, false, {1}), x.layer1_only);
    x.metrics_only = d + "/metrics.h5";
    CaptureFile m = make_capture(false, false);
    for (RunCapture& r : m.runs) r.layers.clear(), r.heads.clear(), r.queries.clear();
    write_capture(m, x.metrics_only);
    x.empty = d + "/empty.h5";
    CaptureFile e = make_capture(true, true);
    e.runs.clear();
    write_capture(e, x.empty);
    x.sweep = d + "/sweep.h5";
    write_sweep(make_sweep(), x.sweep);
    return x;
  }();
  return f;
}

struct Case {
  std::string name, kind;
  FigureOptions opt;
  bool sweep = false;
  std::vector<std::string> labels;  // text the SVG must contain
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> cases() {
  std::vector<Case> v;
  FigureOptions o;
  v.push_back({"distribution", "distribution", o, false,
               {"Key token", "Attention probability", "beginning", "&amp;&lt;x&gt;&quot;", "standard", "focal_t0.4",
                "Layer 0, head 0, query 12"}});
  o = {};
  o.layer = 1;
  o.head = 2;
  o.query = 11;
  o.runs = {"focal_t0.4"};
  o.no_sink = true;
  v.push_back({"distribution_one_run_no_sink", "distribution", o, false,
               {"Probability (sink excluded)", "focal_t0.4: layer 1, head 2, query 11", "extraordi\xE2\x80\xA6"}});
  o = {};
  o.overlay = true;
  o.runs = {"standard", "focal_t0.4"};
  v.push_back({"distribution_overlay", "distribution", o, false, {"standard", "focal_t0.4", "Key token"}});
  o = {};
  o.layer = 1;
  v.push_back({"heatmap", "heatmap", o, false, {"Query token", "Key token", "standard: layer 1, head 0"}});
  o = {};
  o.runs = {"standard", "focal_t0.4"};
  o.log_scale = true;
  o.no_sink = true;
  v.push_back({"heatmap_two_runs_log", "heatmap", o, false, {"Probability (sink excluded)", "focal_t0.4", "10\xE2\x81\xBB"}});
  o = {};
  v.push_back({"grid", "grid", o, false, {"L0", "L1", "H2", "standard: attention by layer and head"}});
  o = {};
  v.push_back({"entropy", "entropy", o, false, {"Layer", "Entropy (nats)", "standard", "focal_t0.4"}});
  o = {};
  o.metric = "tail_mass";
  o.lines = true;
  v.push_back({"entropy_lines", "entropy", o, false, {"Tail mass (below 1/n)"}});
  o = {};
  o.matrix = true;
  v.push_back({"entropy_matrix", "entropy", o, false, {"Head", "Layer", "standard: attention entropy"}});
  o = {};
  o.matrix = true;
  o.runs = {"standard", "focal_t0.4"};
  o.metric = "sink_mass";
  v.push_back({"entropy_matrix_diff", "entropy", o, false, {"focal_t0.4 \xE2\x88\x92 standard", "\xCE\x94 Sink mass"}});
  o = {};
  v.push_back({"sweep", "sweep", o, true, {"Focal temperature t", "Entropy (nats)", "standard"}});
  o = {};
  o.per_layer = true;
  o.metric = "entropy_norm";
  v.push_back({"sweep_per_layer", "sweep", o, true, {"layer 0", "layer 1", "Normalised entropy"}});
  o = {};
  o.metric = "loss";
  o.title = "Loss & temperature";
  v.push_back({"sweep_loss", "sweep", o, true, {"Prompt loss (nats/token)", "Loss &amp; temperature"}});
  return v;
}

std::string render(const Case& c, Format f) {
  return render_figure_files(c.kind, {c.sweep ? files().sweep : files().capture}, c.opt, f);
}

struct Png {
  int width = 0, height = 0;
  double stddev = 0;
  size_t colours = 0;
};

Png decode_png(const std::string& bytes) {
  struct Reader {
    const std::string* s;
    size_t pos;
  } rd{&bytes, 0};
  cairo_surface_t* img = cairo_image_surface_create_from_png_stream(
      [](void* closure, unsigned char* data, unsigned int n) {
        auto* r = static_cast<Reader*>(closure);
        if (r->pos + n > r->s->size()) return CAIRO_STATUS_READ_ERROR;
        std::copy(r->s->data() + r->pos, r->s->data() + r->pos + n, data);
        r->pos += n;
        return CAIRO_STATUS_SUCCESS;
      },
      &rd);
  Png p;
  EXPECT_EQ(cairo_surface_status(img), CAIRO_STATUS_SUCCESS);
  if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) return p;
  p.width = cairo_image_surface_get_width(img);
  p.height = cairo_image_surface_get_height(img);
  const unsigned char* data = cairo_image_surface_get_data(img);
  const int stride = cairo_image_surface_get_stride(img);
  double sum = 0, sum2 = 0;
  std::vector<uint32_t> seen;
  for (int y = 0; y < p.height; ++y)
    for (int x = 0; x < p.width; ++x) {
      const uint32_t v = reinterpret_cast<const uint32_t*>(data + (size_t)y * stride)[x] & 0xFFFFFF;
      const double lum = 0.3 * ((v >> 16) & 255) + 0.59 * ((v >> 8) & 255) + 0.11 * (v & 255);
      sum += lum;
      sum2 += lum * lum;
      if (seen.size() < 5000 && std::find(seen.begin(), seen.end(), v) == seen.end()) seen.push_back(v);
    }
  const double n = (double)p.width * p.height;
  p.stddev = std::sqrt(std::max(0.0, sum2 / n - (sum / n) * (sum / n)));
  p.colours = seen.size();
  cairo_surface_destroy(img);
  return p;
}

class EachKind : public ::testing::TestWithParam<Case> {};

TEST_P(EachKind, PngDecodesAtTheRequestedSizeWithVariedPixels) {
  Case c = GetParam();
  c.opt.dpi = 120;
  const std::string png = render(c, Format::kPng);
  ASSERT_EQ(png.compare(0, 8, "\x89PNG\r\n\x1a\n"), 0);
  EXPECT_NE(png.find("pHYs"), std::string::npos) << "the PNG should carry its dpi";
  const Png p = decode_png(png);
  EXPECT_EQ(p.width, (int)std::lround(3.4 * 120));
  EXPECT_GT(p.height, 100);
  EXPECT_LT(p.height, 1200);
  EXPECT_GT(p.stddev, 15.0) << c.name;
  EXPECT_GT(p.colours, 20u) << c.name;

  c.opt.width_in = 5.0;
  c.opt.height_in = 3.0;
  c.opt.dpi = 100;
  const Png q = decode_png(render(c, Format::kPng));
  EXPECT_EQ(q.width, 500);
  EXPECT_EQ(q.height, 300);
}

TEST_P(EachKind, SvgIsWellFormedAndHoldsItsLabels) {
  const Case& c = GetParam();
  const std::string svg = render(c, Format::kSvg);
  const std::string path = temp_dir() + "/" + c.name + ".svg";
  spit(path, svg);
  if (std::system("xmllint --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "xmllint missing: apt-get install libxml2-utils";
  EXPECT_EQ(std::system(("xmllint --noout '" + path + "'").c_str()), 0) << path;
  for (const std::string& label : c.labels) EXPECT_THAT(svg, HasSubstr(label)) << c.name;
  EXPECT_THAT(svg, HasSubstr("<title>"));
}

TEST_P(EachKind, SvgAndPdfBytesRepeat) {
  const Case& c = GetParam();
  const std::string svg1 = render(c, Format::kSvg), svg2 = render(c, Format::kSvg);
  EXPECT_TRUE(svg1 == svg2) << c.name << ": SVG differs between two renderings";
  const std::string pdf1 = render(c, Format::kPdf), pdf2 = render(c, Format::kPdf);
  ASSERT_EQ(pdf1.compare(0, 5, "%PDF-"), 0);
  EXPECT_TRUE(pdf1 == pdf2) << c.name << ": PDF differs between two renderings";
  EXPECT_EQ(pdf1.find("CreationDate"), std::string::npos);
  EXPECT_EQ(pdf1.find("ModDate"), std::string::npos);
  const std::string png1 = render(c, Format::kPng), png2 = render(c, Format::kPng);
  EXPECT_TRUE(png1 == png2);
}

INSTANTIATE_TEST_SUITE_P(Figures, EachKind, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

std::string error_of(const std::string& kind, const std::vector<std::string>& paths, const FigureOptions& opt,
                     Format f = Format::kPng) {
  try {
    render_figure_files(kind, paths, opt, f);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(FigureErrors, BadSelectionsNameTheOptionAndTheChoices) {
  const Files& fx = files();
  FigureOptions o;
  o.layer = 0;
  EXPECT_THAT(error_of("distribution", {fx.layer1_only}, o),
              AllOf(HasSubstr("--layer 0"), HasSubstr("stored layers: 1"), HasSubstr("standard")));
  o = {};
  o.layer = 7;
  EXPECT_THAT(error_of("heatmap", {fx.capture}, o), AllOf(HasSubstr("--layer 7"), HasSubstr("stored layers: 0,1")));
  o = {};
  o.head = 5;
  EXPECT_THAT(error_of("distribution", {fx.capture}, o), AllOf(HasSubstr("--head 5"), HasSubstr("0-2")));
  o = {};
  o.query = 40;
  EXPECT_THAT(error_of("distribution", {fx.capture}, o), AllOf(HasSubstr("--query 40"), HasSubstr("0-12")));
  o = {};
  o.runs = {"nope"};
  EXPECT_THAT(error_of("entropy", {fx.capture}, o),
              AllOf(HasSubstr("--runs"), HasSubstr("'nope'"), HasSubstr("standard, focal_t0.4")));
  o.runs = {"standard", "standard"};
  EXPECT_THAT(error_of("distribution", {fx.capture}, o), HasSubstr("listed twice"));
  o.runs = {"standard", "focal_t0.4"};
  EXPECT_THAT(error_of("grid", {fx.capture}, o), AllOf(HasSubstr("--runs"), HasSubstr("at most 1 run")));
  o = {};
  o.metric = "entropy";
  EXPECT_THAT(error_of("entropy", {fx.capture}, o),
              AllOf(HasSubstr("--metric"), HasSubstr("'entropy'"), HasSubstr("entropy_nats"), HasSubstr("sink_mass")));
  o.metric = "relevant_mass";
  EXPECT_THAT(error_of("entropy", {fx.capture}, o), HasSubstr("--relevant"));
  o = {};
  EXPECT_THAT(error_of("bars", {fx.capture}, o), AllOf(HasSubstr("unknown figure kind 'bars'"), HasSubstr("distribution")));
  EXPECT_THAT(error_of("training", {fx.capture}, o), HasSubstr("not available yet"));
  EXPECT_THAT(error_of("retrieval", {fx.capture}, o), HasSubstr("not available yet"));
  EXPECT_THAT(error_of("distribution", {fx.empty}, o), HasSubstr("holds no runs"));
  EXPECT_THAT(error_of("heatmap", {fx.metrics_only}, o), AllOf(HasSubstr("stores no attention rows"), HasSubstr("--store")));
  EXPECT_THAT(error_of("sweep", {fx.capture}, o), HasSubstr("not a focalscope sweep"));
  EXPECT_THAT(error_of("entropy", {fx.sweep}, o), HasSubstr("not a focalscope capture"));
  EXPECT_THAT(error_of("entropy", {temp_dir() + "/missing.h5"}, o), HasSubstr("no such file"));
  const std::string zero = temp_dir() + "/zero.h5";
  spit(zero, "");
  EXPECT_THAT(error_of("entropy", {zero}, o), HasSubstr("not an HDF5 file"));
  o.per_layer = true;
  o.metric = "loss";
  EXPECT_THAT(error_of("sweep", {fx.sweep}, o), HasSubstr("--per-layer"));
  o = {};
  o.matrix = true;
  EXPECT_THAT(error_of("distribution", {fx.capture}, o), HasSubstr("--matrix does not apply"));
  o = {};
  o.width_in = 0.2;
  EXPECT_THAT(error_of("entropy", {fx.capture}, o), HasSubstr("--width"));
  EXPECT_THROW(format_from_path("out.jpg"), Error);
  EXPECT_EQ(format_from_path("a/b.PDF"), Format::kPdf);
}

TEST(FigureData, ScoresOnlyCapturesAreReTemperedToTheStoredProbabilities) {
  const CaptureFile full = make_capture(true, true), scores = make_capture(false, true);
  for (size_t r = 0; r < full.runs.size(); ++r) {
    const RunRef a{&full, &full.runs[r], "a"}, b{&scores, &scores.runs[r], "b"};
    for (int c : {0, 5, 12}) {
      const std::vector<double> pa = attention_row(a, 1, 2, c), pb = attention_row(b, 1, 2, c);
      ASSERT_EQ(pa.size(), (size_t)c + 1);
      ASSERT_EQ(pb.size(), pa.size());
      for (size_t j = 0; j < pa.size(); ++j) EXPECT_NEAR(pa[j], pb[j], 1e-6);
    }
  }
  // The distribution figure draws the same bars from either file.
  FigureOptions o;
  o.dpi = 72;
  EXPECT_EQ(render_figure_files("distribution", {files().capture}, o, Format::kSvg),
            render_figure_files("distribution", {files().scores_only}, o, Format::kSvg));
}

TEST(FigureData, DroppingTheSinkRenormalises) {
  const std::vector<double> p = drop_sink({0.5, 0.25, 0.125, 0.125});
  ASSERT_EQ(p.size(), 3u);
  EXPECT_DOUBLE_EQ(p[0], 0.5);
  EXPECT_DOUBLE_EQ(p[1], 0.25);
  EXPECT_TRUE(drop_sink({1.0}).empty());
}

TEST(FigureData, RunsFromSeveralFilesGetFileLabelsWhenNamesRepeat) {
  const CaptureFile a = make_capture(true, false), b = make_capture(true, false);
  const std::vector<RunRef> runs = capture_runs({{&a, nullptr, "base"}, {&b, nullptr, "tuned"}}, "entropy");
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].label, "base:standard");
  EXPECT_EQ(runs[3].label, "tuned:focal_t0.4");
  EXPECT_EQ(select_runs(runs, {"tuned:standard"}, 8, 8, "entropy")[0].run, &b.runs[0]);
  EXPECT_THROW(select_runs(runs, {"standard"}, 8, 8, "entropy"), Error);
}

TEST(FigurePlot, TicksFollowTheOneTwoFiveRule) {
  Ticks t = nice_ticks(0, 2.01, 6, true);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0.0", "0.5", "1.0", "1.5", "2.0", "2.5"}));
  EXPECT_DOUBLE_EQ(t.hi, 2.5);
  t = nice_ticks(0.16, 1.24, 6, false);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0.2", "0.4", "0.6", "0.8", "1.0", "1.2"}));
  t = nice_ticks(-1.09, 1.09, 7, false);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"\xE2\x88\x92" "1.0", "\xE2\x88\x92" "0.5", "0.0", "0.5", "1.0"}));
  t = nice_ticks(0, 37, 6, true);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0", "10", "20", "30", "40"}));
  t = log10_ticks(-4, 0, 6);
  EXPECT_EQ(t.labels.front(), "10\xE2\x81\xBB\xE2\x81\xB4");  // 10⁻⁴
  EXPECT_EQ(t.labels.back(), "10\xE2\x81\xB0");
  EXPECT_EQ(format_sig(-0.4123, 2), "\xE2\x88\x92" "0.41");
}

TEST(FigurePlot, TokenLabelsAreTrimmedAbbreviatedAndVisible) {
  EXPECT_EQ(token_label(" the"), "the");
  EXPECT_EQ(token_label(" "), "\xE2\x90\xA3");
  EXPECT_EQ(token_label("\n"), "\xE2\x86\xB5");
  EXPECT_EQ(token_label(" extraordinarilylongpiece"), "extraordi\xE2\x80\xA6");
  EXPECT_EQ(clean_utf8("a\xC3"), "a\xEF\xBF\xBD");  // a cut multi-byte character
}

TEST(FigurePalette, ViridisDivergingAndCategoriesAreWhatTheDocsSay) {
  auto near = [](Rgb a, Rgb b) { return std::fabs(a.r - b.r) + std::fabs(a.g - b.g) + std::fabs(a.b - b.b) < 0.02; };
  EXPECT_TRUE(near(viridis(0), {0x44 / 255.0, 0x01 / 255.0, 0x54 / 255.0}));
  EXPECT_TRUE(near(viridis(0.5), {0x21 / 255.0, 0x90 / 255.0, 0x8C / 255.0}));
  EXPECT_TRUE(near(viridis(1), {0xFD / 255.0, 0xE7 / 255.0, 0x25 / 255.0}));
  for (int i = 1; i <= 20; ++i) EXPECT_GT(luminance(viridis(i / 20.0)), luminance(viridis((i - 1) / 20.0)));
  EXPECT_GT(luminance(diverging(0)), 0.85);
  EXPECT_GT(diverging(1).r, diverging(1).b);
  EXPECT_GT(diverging(-1).b, diverging(-1).r);
  EXPECT_TRUE(near(category_color(0), {0, 0x72 / 255.0, 0xB2 / 255.0}));  // Okabe-Ito blue
  EXPECT_TRUE(near(category_color(1), {0xD5 / 255.0, 0x5E / 255.0, 0}));  // vermillion
}

#ifdef FOCAL_CLI_PATH
struct CliResult {
  int rc = -1;
  std::string out, err;
};

CliResult run_cli(const std::string& args) {
  const std::string d = temp_dir();
  const std::string cmd = std::string(FOCAL_CLI_PATH) + " " + args + " >" + d + "/cli.out 2>" + d + "/cli.err";
  const int st = std::system(cmd.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(d + "/cli.out"), slurp(d + "/cli.err")};
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* dp = opendir(dir.c_str())) {
    while (dirent* e = readdir(dp))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") names.push_back(e->d_name);
    closedir(dp);
  }
  return names;
}

TEST(FigureCli, WritesTheFigureAndListsKindsInHelp) {
  const CliResult help = run_cli("figure --help");
  EXPECT_EQ(help.rc, 0);
  for (const char* k : {"distribution", "heatmap", "grid", "entropy", "sweep", "--no-sink", "--dpi", "--matrix"})
    EXPECT_THAT(help.out, HasSubstr(k));
  const std::string out = temp_dir() + "/cli_fig.svg";
  const CliResult r = run_cli("figure distribution " + files().capture + " --runs standard --layer 1 --head 2 -o " + out);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(out));
  EXPECT_THAT(slurp(out), HasSubstr("<svg"));
}

TEST(FigureCli, ABadSelectionExitsOneAndWritesNothing) {
  const std::string d = temp_dir() + "/cli_bad";
  mkdir(d.c_str(), 0755);
  CliResult r = run_cli("figure distribution " + files().capture + " --layer 9 -o " + d + "/f.png");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, AllOf(HasSubstr("--layer 9"), HasSubstr("stored layers: 0,1")));
  r = run_cli("figure entropy " + files().capture + " --runs standard,nope -o " + d + "/f.pdf");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("'nope'"));
  r = run_cli("figure training " + files().capture + " -o " + d + "/f.png");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("not available yet"));
  r = run_cli("figure heatmap " + files().capture + " -o " + d + "/f.jpg");
  EXPECT_EQ(r.rc, 1);
  r = run_cli("figure heatmap " + files().capture + " --bogus -o " + d + "/f.png");
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(list_dir(d).empty()) << "a failed figure left " << list_dir(d).front();
}
#endif

}  // namespace
}  // namespace focal::figures
