// Tests of focal_figures and `focal figure`: every kind renders from small fixture captures, sweeps, training logs
// and evaluation files made here;
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
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "focal/calibrate.h"
#include "focal/capture.h"
#include "focal/error.h"
#include "focal/eval.h"
#include "focal/metrics.h"
#include "focal/trainer.h"
#include "app_state.h"
#include "focal_figures/figures.h"
#include "focal_figures/temps.h"
#include "palette.h"
#include "plot.h"
#include "test_util.h"
#include "select.h"
#include "series.h"

namespace focal::figures {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kLayers = 2, kHeads = 3;
const std::vector<std::string> kPieces = {"<s>",
                                          " In",
                                          " the",
                                          " beginning",
                                          " God",
                                          " created",
                                          "\n",
                                          " &<x>\"",
                                          " heaven",
                                          " and",
                                          " extraordinarilylongpiece",
                                          " earth",
                                          "."};

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

// A model config.json of 3 layers; learned adds the "focal" object of a learned-temperature model.
std::string model_config(bool learned) {
  std::string j = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256,
    "max_position_embeddings": 512)";
  if (learned) j += R"(, "focal": {"mode": "learned", "tau_bias": true, "tau_min": 1.77, "tau_max": 3.54})";
  return j + "}";
}

// A training log of 300 steps with an evaluation every 50: loss falling towards `floor`; with learned, tau per
// layer drifting apart from the middle of its range and a growing clip fraction (NaN otherwise, as the trainer
// writes for standard and focal runs).
TrainLog make_train_log(const std::string& name, double floor, bool learned) {
  TrainLog log;
  log.run_name = name;
  log.train_config_json = R"({"batch": 4, "seq_len": 64, "steps": 300, "eval_every": 50})";
  log.model_config_json = model_config(learned);
  log.tool_version = version();
  log.created_utc = "2025-01-01T00:00:00Z";
  log.n_layers = 3;
  auto loss = [&](double s) { return floor + 2.5 * std::exp(-s / 60.0); };
  for (int s = 0; s < 300; ++s) log.step_loss.push_back((float)(loss(s + 1) + 0.1 * std::sin(1.7 * s)));
  for (int s = 50; s <= 300; s += 50) {
    log.eval_step.push_back(s);
    log.val_loss.push_back((float)loss(s) + 0.05f);
    log.train_loss.push_back((float)loss(s));
    log.lr.push_back(1e-3f);
    log.grad_norm.push_back(0.5f);
    log.tokens_per_s.push_back(1000.0f);
    const double f = s / 300.0;
    for (int l = 0; l < 3; ++l) log.tau_mean.push_back(learned ? (float)(2.65 + (l - 1) * 0.6 * f) : NAN);
    log.tau_clip_frac.push_back(learned ? (float)(0.05 * f) : NAN);
  }
  return log;
}

// An evaluation of three task kinds at lengths 128-2048 (3 layers). Lengths from `beyond` on have no answers
// (beyond the model's context: NaN, as focal eval writes them).
EvalFile make_eval(const std::string& model_path, double skill, int beyond = 5,
                   const std::vector<int32_t>& lengths = {128, 256, 512, 1024, 2048}) {
  EvalFile e;
  e.model_path = model_path;
  e.model_config_json = model_config(false);
  e.temp_spec_json = TempSpec::standard().to_json();
  e.tool_version = version();
  e.created_utc = "2025-01-01T00:00:00Z";
  e.n_layers = 3;
  e.val_loss = 3.0f;
  e.val_ppl = std::exp(3.0f);
  e.val_tokens = 1000;
  e.task_kinds = {"kv", "mqar", "needle"};
  e.lengths = lengths;
  for (int k = 0; k < 3; ++k)
    for (size_t li = 0; li < lengths.size(); ++li) {
      const bool none = (int)li >= beyond;
      e.n_answers.push_back(none ? 0 : 20);
      e.accuracy.push_back(none ? NAN : (float)std::clamp(skill - 0.15 * li * (k + 1) / 2.0, 0.0, 1.0));
      for (int l = 0; l < 3; ++l) {
        e.relevant_mass.push_back(none ? NAN : (float)(skill * 0.4 * std::pow(0.7, li) * (0.6 + 0.2 * l)));
        e.entropy.push_back(none ? NAN : (float)(1.5 + 0.5 * li - skill + 0.1 * l));
      }
    }
  return e;
}

std::string temp_dir() {
  static const std::string dir = focal::test::make_temp_dir("figures_test");  // removed when the tests end
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

// Fixture files, written once per test binary. Training logs and evaluation files sit in per-run directories, as
// focal train and focal eval leave them.
struct Files {
  std::string capture, scores_only, layer1_only, metrics_only, empty, sweep;
  std::string log_std, log_focal, log_learned, log_empty;  // DIR/train_log.h5
  std::string eval_std, eval_focal, eval_learned;          // DIR/eval.h5
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
    auto in_dir = [&](const std::string& dir, const std::string& file) {
      mkdir((d + "/" + dir).c_str(), 0755);
      return d + "/" + dir + "/" + file;
    };
    x.log_std = in_dir("standard", "train_log.h5");
    write_train_log(make_train_log("standard", 2.2, false), x.log_std);
    x.log_focal = in_dir("focal_t0.4", "train_log.h5");
    write_train_log(make_train_log("focal_t0.4", 2.1, false), x.log_focal);
    x.log_learned = in_dir("learned", "train_log.h5");
    write_train_log(make_train_log("learned", 2.05, true), x.log_learned);
    x.log_empty = in_dir("fresh", "train_log.h5");
    TrainLog fresh = make_train_log("fresh", 2.0, false);
    fresh.eval_step.clear(), fresh.val_loss.clear(), fresh.train_loss.clear(), fresh.lr.clear();
    fresh.grad_norm.clear(), fresh.tokens_per_s.clear(), fresh.tau_mean.clear(), fresh.tau_clip_frac.clear();
    write_train_log(fresh, x.log_empty);
    x.eval_std = in_dir("standard", "eval.h5");
    write_eval(make_eval("out/train/standard", 0.8, 4), x.eval_std);  // 2048 is beyond its context
    x.eval_focal = in_dir("focal_t0.4", "eval.h5");
    write_eval(make_eval("out/train/focal_t0.4/", 0.9), x.eval_focal);
    x.eval_learned = in_dir("learned", "eval.h5");
    write_eval(make_eval("/abs/learned", 1.0), x.eval_learned);
    return x;
  }();
  return f;
}

struct Case {
  std::string name, kind;
  FigureOptions opt;
  bool sweep = false;
  std::vector<std::string> labels;  // text the SVG must contain
  std::string input{};              // "logs": the three training logs, "learned": the learned one, "evals": evals
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> cases() {
  std::vector<Case> v;
  FigureOptions o;
  v.push_back({"distribution",
               "distribution",
               o,
               false,
               {"Key token", "Attention probability", "beginning", "&amp;&lt;x&gt;&quot;", "standard", "focal_t0.4",
                "Layer 0, head 0, query 12"}});
  o = {};
  o.layer = 1;
  o.head = 2;
  o.query = 11;
  o.runs = {"focal_t0.4"};
  o.no_sink = true;
  v.push_back({"distribution_one_run_no_sink",
               "distribution",
               o,
               false,
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
  v.push_back(
      {"heatmap_two_runs_log", "heatmap", o, false, {"Probability (sink excluded)", "focal_t0.4", "10\xE2\x81\xBB"}});
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
  o = {};
  v.push_back(
      {"training",
       "training",
       o,
       false,
       {"Validation loss", "Validation loss (nats)", "Training step", "standard", "focal_t0.4", "learned", "300"},
       "logs"});
  o = {};
  o.metric = "step_loss";
  o.x_axis = "tokens";
  v.push_back({"training_steps_tokens",
               "training",
               o,
               false,
               {"Training loss per step", "Training tokens (thousands)", "Training loss (nats)", "standard"},
               "logs"});
  o = {};
  o.metric = "train_loss";
  o.labels = {"Standard", "Focal t = 0.4", "Learned \xCF\x84"};
  v.push_back(
      {"training_labels", "training", o, false, {"Training loss", "Focal t = 0.4", "Learned \xCF\x84"}, "logs"});
  o = {};
  o.tau = true;
  o.clip = true;
  v.push_back({"training_tau",
               "training",
               o,
               false,
               {"learned: learned \xCF\x84 per layer", "Learned \xCF\x84", "layer 0", "layer 2", "Clipped (%)",
                "\xCF\x84 max", "\xCF\x84 min"},
               "learned"});
  o = {};
  v.push_back({"retrieval",
               "retrieval",
               o,
               false,
               {"Retrieval against context length", "Accuracy (%)", "Relevant mass", "Context length (tokens)", "kv",
                "mqar", "needle", "128", "standard", "focal_t0.4", "learned"},
               "evals"});
  o = {};
  o.task_kind = "kv";
  o.metric = "relevant_mass";
  o.layer = 2;
  o.labels = {"A", "B", "C"};
  v.push_back({"retrieval_kind_layer",
               "retrieval",
               o,
               false,
               {"kv: relevant mass against context length, layer 2", "256", "1024", "2048"},
               "evals"});
  o = {};
  o.metric = "accuracy";
  o.width_in = 7;
  v.push_back(
      {"retrieval_accuracy_wide", "retrieval", o, false, {"Retrieval accuracy against context length"}, "evals"});
  o = {};
  o.metric = "entropy";
  o.task_kind = "needle";
  v.push_back({"retrieval_entropy", "retrieval", o, false, {"Entropy (nats)"}, "evals"});
  return v;
}

std::vector<std::string> inputs(const Case& c) {
  const Files& f = files();
  if (c.input == "logs") return {f.log_std, f.log_focal, f.log_learned};
  if (c.input == "learned") return {f.log_learned};
  if (c.input == "evals") return {f.eval_std, f.eval_focal, f.eval_learned};
  return {c.sweep ? f.sweep : f.capture};
}

std::string render(const Case& c, Format f) { return render_figure_files(c.kind, inputs(c), c.opt, f); }

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
  EXPECT_EQ(p.width, (int)std::lround(c.opt.width_in * 120));
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
  if (std::system("xmllint --version >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "xmllint missing: apt-get install libxml2-utils";
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
  } catch (const Error& e) { return e.what(); }
  return "(no error)";
}

// A capture whose layer 0, head 0 row of the last query q = T - 1 is `rest` spread over the keys and the peaks on top,
// and the options drawing that row of the standard run with K top keys at `width_in`.
struct LastRow {
  CaptureFile f = make_capture(true, false);
  int T = (int)f.token_ids.size(), q = T - 1;
  FigureOptions o;
  LastRow(float rest, int n_rest, const std::vector<std::pair<int, float>>& peaks, int top_keys, double width_in) {
    for (RunCapture& r : f.runs) {
      float* row = &r.probs[((size_t)0 * kHeads + 0) * T * T + (size_t)q * T];  // [T] keys of query q
      for (int j = 0; j < T; ++j) row[j] = rest / (float)n_rest;
      for (const auto& [k, p] : peaks) row[k] = p;
    }
    o.layer = 0;
    o.head = 0;
    o.query = q;
    o.top_keys = top_keys;
    o.runs = {"standard"};
    o.width_in = width_in;
  }
  std::string svg() const { return render_figure("distribution", {{&f, nullptr, ""}}, o, Format::kSvg); }
};

// Two top keys a few positions apart, the second lower: its label goes beside its bar instead of being dropped (a
// centred label would cross the taller bar next to it), and no two labels overlap.
TEST(FigureDistribution, NearbyTopKeysAreBothLabelled) {
  const int q = LastRow(0, 1, {}, 0, 1).q;
  // 0.6 at key q - 1, 0.3 at key q - 3; narrow: the keys' slots are a few points wide
  const LastRow r(0.1f, q - 1, {{q - 1, 0.6f}, {q - 3, 0.3f}}, 2, 2.4);
  const std::string svg = r.svg();
  EXPECT_THAT(svg, HasSubstr("(" + std::to_string(q - 1) + ")"));
  EXPECT_THAT(svg, HasSubstr("(" + std::to_string(q - 3) + ")"));
}

// The runner-up right beside the top key, both above a third key far off: the runner-up's label, with no room at its
// bar, goes above the top key's. It was skipped and the third key labelled, which read as the runner-up.
TEST(FigureDistribution, TheRunnerUpBesideTheTopKeyIsLabelledAboveIt) {
  const int q = LastRow(0, 1, {}, 0, 1).q;
  ASSERT_GE(q, 11);
  // 0.55 at key q, 0.35 at key q - 1, 0.05 at q - 10
  LastRow r(0.05f, q - 2, {{q, 0.55f}, {q - 1, 0.35f}, {q - 10, 0.05f}}, 3, 3.4);
  const std::string svg = r.svg();
  for (int k : {q, q - 1, q - 10}) EXPECT_THAT(svg, HasSubstr("(" + std::to_string(k) + ")<")) << "key " << k;
  r.o.top_keys = 2;  // K keys labelled are the first K of the ranking
  const std::string two = r.svg();
  EXPECT_THAT(two, HasSubstr("(" + std::to_string(q - 1) + ")<"));
  EXPECT_THAT(two, Not(HasSubstr("(" + std::to_string(q - 10) + ")<")));
}

// A log of focal calibrate (train_config_json "kind": "calibration") stores t sqrt(d_head) in tau_mean, the learned
// temperature's unit; --tau draws t, the number its temperature file holds (it showed "Learned tau" at 5.7-7.5 for
// t of 0.67-1.99), without the clip bounds of a learned model.
TEST(FigureTraining, CalibrationLogDrawsTNotTau) {
  TrainLog log = make_train_log("calib", 3.0, false);
  log.train_config_json = R"({"kind": "calibration", "granularity": "layer", "batch": 4, "seq_len": 64})";
  const ModelConfig mc = parse_config(log.model_config_json, "test");
  log.tau_mean.clear();
  for (size_t i = 0; i < log.eval_step.size(); ++i)
    for (int l = 0; l < 3; ++l) log.tau_mean.push_back((float)((0.5 + 0.25 * l) * std::sqrt((double)mc.d_head)));
  const std::string path = temp_dir() + "/calib.log.h5";
  write_train_log(log, path);
  FigureOptions o;
  o.tau = true;
  const std::string svg = render_figure_files("training", {path}, o, Format::kSvg);
  EXPECT_THAT(svg, HasSubstr("calibrated t per layer"));
  EXPECT_THAT(svg, HasSubstr("Calibrated t, mean over heads"));
  EXPECT_THAT(svg, Not(HasSubstr("Learned \xCF\x84")));
  FigureOptions clip = o;  // calibrated t is not clipped: no clip panel (it drew an empty one over a 0..1 axis)
  clip.clip = true;
  EXPECT_THROW(render_figure_files("training", {path}, clip, Format::kSvg), Error);
  // the y axis spans t (0.5 .. 1.0), not t sqrt(d_head)
  EXPECT_THAT(svg, HasSubstr(">0.5<"));
  EXPECT_THAT(svg, HasSubstr(">1.0<"));
}

// The tau bounds' labels sit where no layer's line runs: a log whose layers start on tau_min (1.77) and climb puts
// "tau min" at the right end of its line (it sat under the lines at the left end), "tau max" stays at the left.
TEST(FigureTraining, TauBoundLabelsAvoidTheLayersLines) {
  TrainLog log = make_train_log("learned_low", 3.0, true);
  log.tau_mean.clear();
  for (size_t i = 0; i < log.eval_step.size(); ++i) {
    log.eval_step[i] = (int)(i * 60);  // from step 0: the first points lie under the labels' left end
    const double f = (double)i / (log.eval_step.size() - 1);
    for (int l = 0; l < 3; ++l) log.tau_mean.push_back((float)(1.78 + f * (0.9 + 0.2 * l)));
  }
  const std::string path = temp_dir() + "/learned_low.log.h5";
  write_train_log(log, path);
  FigureOptions o;
  o.tau = true;
  const std::string svg = render_figure_files("training", {path}, o, Format::kSvg);
  // The SVG text layer: <text transform="translate(X Y)" x="DX" ...>LABEL</text>
  auto label_x = [&](const std::string& label) {
    const size_t at = svg.find(">" + label + "<");
    EXPECT_NE(at, std::string::npos) << label;
    const size_t open = svg.rfind("translate(", at);
    return std::stod(svg.substr(open + 10));
  };
  const double min_x = label_x("\xCF\x84 min"), max_x = label_x("\xCF\x84 max");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("viewBox=\"0 0 ([0-9.]+) ")));
  const double W = std::stod(m[1]);
  EXPECT_GT(min_x, 0.6 * W) << "tau min's label is not at the right end";
  EXPECT_LT(max_x, 0.4 * W) << "tau max's label left its place at the left end";
}

// Figure errors name the FigureOptions field (for the app and the Python API) and never a CLI option; the CLI puts
// its option in front (FigureCli tests below).
TEST(FigureErrors, NameTheFieldNotACliOption) {
  const Files& fx = files();
  FigureOptions o;
  o.layer = 7;
  try {
    render_figure_files("heatmap", {fx.capture}, o, Format::kPng);
    ADD_FAILURE() << "layer 7 is not stored";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "layer");
    EXPECT_EQ(std::string(e.what()).find("--"), std::string::npos) << e.what();
  }
  o = {};
  o.tau = true;
  o.metric = "val_loss";
  for (const std::string& msg : {error_of("training", {fx.log_learned}, o), error_of("entropy", {fx.capture}, o),
                                 error_of("heatmap", {fx.metrics_only}, FigureOptions{})})
    EXPECT_EQ(msg.find("--"), std::string::npos) << msg;
}

TEST(FigureErrors, BadSelectionsNameTheOptionAndTheChoices) {
  const Files& fx = files();
  FigureOptions o;
  o.layer = 0;
  EXPECT_THAT(error_of("distribution", {fx.layer1_only}, o),
              AllOf(HasSubstr("layer 0"), HasSubstr("stored layers: 1"), HasSubstr("standard")));
  o = {};
  o.layer = 7;
  EXPECT_THAT(error_of("heatmap", {fx.capture}, o), AllOf(HasSubstr("layer 7"), HasSubstr("stored layers: 0,1")));
  o = {};
  o.head = 5;
  EXPECT_THAT(error_of("distribution", {fx.capture}, o), AllOf(HasSubstr("head 5"), HasSubstr("0-2")));
  o = {};
  o.query = 40;
  EXPECT_THAT(error_of("distribution", {fx.capture}, o), AllOf(HasSubstr("query 40"), HasSubstr("0-12")));
  o = {};
  o.runs = {"nope"};
  EXPECT_THAT(error_of("entropy", {fx.capture}, o),
              AllOf(HasSubstr("runs"), HasSubstr("'nope'"), HasSubstr("standard, focal_t0.4")));
  o.runs = {"standard", "standard"};
  EXPECT_THAT(error_of("distribution", {fx.capture}, o), HasSubstr("listed twice"));
  o.runs = {"standard", "focal_t0.4"};
  EXPECT_THAT(error_of("grid", {fx.capture}, o), AllOf(HasSubstr("runs"), HasSubstr("at most 1 run")));
  o = {};
  o.metric = "entropy";
  EXPECT_THAT(error_of("entropy", {fx.capture}, o),
              AllOf(HasSubstr("metric"), HasSubstr("'entropy'"), HasSubstr("entropy_nats"), HasSubstr("sink_mass")));
  o.metric = "relevant_mass";
  EXPECT_THAT(error_of("entropy", {fx.capture}, o), HasSubstr("relevant keys"));
  o = {};
  EXPECT_THAT(error_of("bars", {fx.capture}, o),
              AllOf(HasSubstr("unknown figure kind 'bars'"), HasSubstr("distribution")));
  EXPECT_THAT(error_of("distribution", {fx.empty}, o), HasSubstr("holds no runs"));
  EXPECT_THAT(error_of("heatmap", {fx.metrics_only}, o),
              AllOf(HasSubstr("stores no attention rows"), HasSubstr("storing probabilities")));
  EXPECT_THAT(error_of("sweep", {fx.capture}, o), HasSubstr("not a focalscope sweep"));
  EXPECT_THAT(error_of("entropy", {fx.sweep}, o), HasSubstr("not a focalscope capture"));
  EXPECT_THAT(error_of("entropy", {temp_dir() + "/missing.h5"}, o), HasSubstr("no such file"));
  const std::string zero = temp_dir() + "/zero.h5";
  spit(zero, "");
  EXPECT_THAT(error_of("entropy", {zero}, o), HasSubstr("the file is empty (0 bytes)"));
  spit(zero, "plain text, not HDF5");
  EXPECT_THAT(error_of("entropy", {zero}, o), HasSubstr("not an HDF5 file"));
  o.per_layer = true;
  o.metric = "loss";
  EXPECT_THAT(error_of("sweep", {fx.sweep}, o), HasSubstr("per_layer"));
  o = {};
  o.matrix = true;
  EXPECT_THAT(error_of("distribution", {fx.capture}, o), HasSubstr("matrix does not apply"));
  o = {};
  o.width_in = 0.2;
  EXPECT_THAT(error_of("entropy", {fx.capture}, o), HasSubstr("width_in"));
  EXPECT_THROW(format_from_path("out.jpg"), Error);
  EXPECT_EQ(format_from_path("a/b.PDF"), Format::kPdf);
}

TEST(FigureErrors, TrainingAndRetrievalSelectionsNameTheOptionOrTheFile) {
  const Files& fx = files();
  FigureOptions o;
  // The wrong kind of file, named, with a pointer to the right input.
  EXPECT_THAT(error_of("training", {fx.log_std, fx.capture}, o),
              AllOf(HasSubstr(fx.capture), HasSubstr("not a focalscope training log"), HasSubstr("train_log.h5")));
  EXPECT_THAT(error_of("training", {fx.eval_std}, o), AllOf(HasSubstr(fx.eval_std), HasSubstr("training log")));
  EXPECT_THAT(error_of("retrieval", {fx.log_std}, o),
              AllOf(HasSubstr(fx.log_std), HasSubstr("not a focalscope evaluation"), HasSubstr("focal eval")));
  EXPECT_THAT(error_of("entropy", {fx.log_std}, o), HasSubstr("not a focalscope capture"));
  // training
  o.tau = true;
  EXPECT_THAT(error_of("training", {fx.log_std}, o),
              AllOf(HasSubstr("tau"), HasSubstr(fx.log_std), HasSubstr("no learned temperature"),
                    HasSubstr("standard attention")));
  EXPECT_THAT(error_of("training", {fx.log_learned, fx.log_std}, o), HasSubstr("tau draws one training log"));
  o.metric = "val_loss";
  EXPECT_THAT(error_of("training", {fx.log_learned}, o), HasSubstr("metric does not apply with tau"));
  o = {};
  o.clip = true;
  EXPECT_THAT(error_of("training", {fx.log_learned}, o), AllOf(HasSubstr("clip"), HasSubstr("tau")));
  o = {};
  o.metric = "loss";
  EXPECT_THAT(error_of("training", {fx.log_std}, o),
              AllOf(HasSubstr("metric"), HasSubstr("'loss'"), HasSubstr("val_loss, train_loss, step_loss")));
  o = {};
  o.x_axis = "epochs";
  EXPECT_THAT(error_of("training", {fx.log_std}, o), AllOf(HasSubstr("x_axis"), HasSubstr("steps, tokens")));
  o = {};
  o.labels = {"a", "b"};
  EXPECT_THAT(error_of("training", {fx.log_std}, o), AllOf(HasSubstr("labels"), HasSubstr("2 labels for 1 file")));
  o = {};
  o.layer = 1;
  EXPECT_THAT(error_of("training", {fx.log_std}, o), HasSubstr("layer does not apply to the training figure"));
  o = {};
  EXPECT_THAT(error_of("training", {fx.log_std, fx.log_empty}, o),
              AllOf(HasSubstr(fx.log_empty), HasSubstr("no evaluations yet")));
  o.metric = "step_loss";  // the per-step losses exist before the first evaluation
  EXPECT_NO_THROW(render_figure_files("training", {fx.log_std, fx.log_empty}, o, Format::kSvg));
  {
    TrainLog no_batch = make_train_log("nb", 2.0, false);
    no_batch.train_config_json = "{}";
    const std::string path = temp_dir() + "/no_batch_log.h5";
    write_train_log(no_batch, path);
    o = {};
    o.x_axis = "tokens";
    EXPECT_THAT(error_of("training", {path}, o),
                AllOf(HasSubstr("x_axis tokens"), HasSubstr(path), HasSubstr("seq_len")));
  }
  // retrieval
  const std::vector<std::string> evals = {fx.eval_std, fx.eval_focal};
  o = {};
  o.task_kind = "copy";
  EXPECT_THAT(error_of("retrieval", evals, o),
              AllOf(HasSubstr("task_kind"), HasSubstr("'copy'"), HasSubstr("kv, mqar, needle")));
  o = {};
  o.layer = 3;
  EXPECT_THAT(error_of("retrieval", evals, o), AllOf(HasSubstr("layer 3"), HasSubstr(fx.eval_std), HasSubstr("0-2")));
  o.metric = "accuracy";
  EXPECT_THAT(error_of("retrieval", evals, o), HasSubstr("layer does not apply to metric accuracy"));
  o = {};
  o.metric = "val_loss";
  EXPECT_THAT(error_of("retrieval", evals, o),
              AllOf(HasSubstr("metric"), HasSubstr("accuracy, relevant_mass, entropy")));
  o = {};
  o.tau = true;
  EXPECT_THAT(error_of("retrieval", evals, o), HasSubstr("tau does not apply to the retrieval figure"));
  o = {};
  o.runs = {"standard"};
  EXPECT_THAT(error_of("retrieval", evals, o), AllOf(HasSubstr("runs"), HasSubstr("labels")));
  // The new options are refused by the other kinds.
  o = {};
  o.task_kind = "kv";
  EXPECT_THAT(error_of("entropy", {fx.capture}, o), HasSubstr("task_kind does not apply to the entropy figure"));
  o = {};
  o.labels = {"a"};
  EXPECT_THAT(error_of("heatmap", {fx.capture}, o), HasSubstr("labels does not apply to the heatmap figure"));
  // The sweep takes one label per file (its legend named the files only): the labels in the legend, a wrong count
  // named
  const std::string sweep2 = temp_dir() + "/sweep2.h5";
  write_sweep(make_sweep(), sweep2);
  o.labels = {"first run", "second run"};
  const std::string svg = render_figure_files("sweep", {fx.sweep, sweep2}, o, Format::kSvg);
  EXPECT_THAT(svg, AllOf(HasSubstr(">first run<"), HasSubstr(">second run<")));
  EXPECT_THAT(error_of("sweep", {fx.sweep}, o), HasSubstr("2 labels for 1 file"));
  // A sweep that held a layer fixed: its line says which, and t = 1 is not marked "standard" (it was not).
  {
    SweepFile plain = make_sweep(), held = make_sweep();
    held.base_spec_json = TempSpec::parse("focal:1+0=0.3", "test").to_json();
    const std::string both =
        render_figure("sweep", {{nullptr, &held, "held"}, {nullptr, &plain, "plain"}}, {}, Format::kSvg);
    EXPECT_THAT(both, AllOf(HasSubstr(">held (fixed 0=0.3)<"), HasSubstr(">t = 1<"), Not(HasSubstr(">standard<"))));
    EXPECT_THAT(render_figure("sweep", {{nullptr, &held, "held"}}, {}, Format::kSvg),
                HasSubstr("against focal temperature (fixed 0=0.3)<"));
    EXPECT_THAT(render_figure("sweep", {{nullptr, &plain, "plain"}}, {}, Format::kSvg), HasSubstr(">standard<"));
    // A label longer than the legend is shortened in its middle, not cut at the page's edge.
    o = {};
    o.labels = {"held_" + std::string(120, 'x') + "_END", "plain"};
    const std::string long_label =
        render_figure("sweep", {{nullptr, &held, "held"}, {nullptr, &plain, "plain"}}, o, Format::kSvg);
    EXPECT_THAT(long_label, AllOf(HasSubstr("\xE2\x80\xA6"), HasSubstr("x_END (fixed 0=0.3)<")));
    EXPECT_THAT(long_label, Not(HasSubstr(std::string(120, 'x'))));
  }
  // In memory: a source of the wrong kind.
  const CaptureFile cap = make_capture(true, false);
  EXPECT_THAT(
      [&] {
        try {
          render_figure("training", {{&cap, nullptr, "cap"}}, {}, Format::kSvg);
        } catch (const Error& e) { return std::string(e.what()); }
        return std::string("(no error)");
      }(),
      AllOf(HasSubstr("'cap'"), HasSubstr("an attention capture")));
}

TEST(FigureData, RetrievalLeavesOutNanPointsLikeMissingOnes) {
  // The standard fixture has no answers at 2048 (NaN). Drawing it must equal drawing a file that never evaluated
  // 2048 (next to a file that did, so that the axes match), and differ from one whose 2048 value is 0.
  const EvalFile focal = make_eval("m/focal", 0.9);
  const EvalFile nan_end = make_eval("m/standard", 0.8, 4);
  const EvalFile missing = make_eval("m/standard", 0.8, 5, {128, 256, 512, 1024});
  EvalFile zero_end = make_eval("m/standard", 0.8);
  for (int k = 0; k < 3; ++k) zero_end.accuracy[k * 5 + 4] = 0.0f;
  auto svg = [&](const EvalFile& e) {
    Source a, b;
    a.eval = &e;
    a.label = "a";
    b.eval = &focal;
    b.label = "b";
    FigureOptions o;
    return render_figure("retrieval", {a, b}, o, Format::kSvg);
  };
  EXPECT_TRUE(svg(nan_end) == svg(missing));
  EXPECT_FALSE(svg(nan_end) == svg(zero_end));
}

TEST(FigureData, RetrievalAxisEndsAtTheLastAnsweredLength) {
  // Alone, a file whose 2048 tasks were all skipped (beyond the model's context) draws exactly like one that never
  // evaluated 2048: the axis ends at 1024 instead of leaving an empty 2048 tick. With a file that answered at 2048
  // beside it, the tick is back.
  const EvalFile nan_end = make_eval("m/standard", 0.8, 4);
  const EvalFile missing = make_eval("m/standard", 0.8, 5, {128, 256, 512, 1024});
  const EvalFile full = make_eval("m/focal", 0.9);
  auto svg = [&](const std::vector<const EvalFile*>& files) {
    std::vector<Source> src;
    for (const EvalFile* e : files) {
      src.emplace_back();
      src.back().eval = e;
      src.back().label = e->model_path;
    }
    FigureOptions o;
    o.task_kind = "kv";
    return render_figure("retrieval", src, o, Format::kSvg);
  };
  EXPECT_TRUE(svg({&nan_end}) == svg({&missing}));
  EXPECT_THAT(svg({&nan_end}), Not(HasSubstr(">2048<")));
  EXPECT_THAT(svg({&nan_end, &full}), HasSubstr(">2048<"));
}

TEST(FigureData, RetrievalAveragesFilesWithTheSameLabel) {
  // Seeds of one model share a label and are drawn as one series. Two identical files give the single file's
  // figure (no min-max bar where they agree), except for the legend that says how many were averaged; two
  // different files add a bar at every point.
  const EvalFile a = make_eval("m/a", 0.8), b = make_eval("m/b", 0.5), other = make_eval("m/o", 0.9);
  auto svg = [&](const std::vector<const EvalFile*>& files, const std::vector<std::string>& labels) {
    std::vector<Source> src;
    for (const EvalFile* e : files) {
      Source s;
      s.eval = e;
      src.push_back(s);
    }
    FigureOptions o;
    o.labels = labels;
    return render_figure("retrieval", src, o, Format::kSvg);
  };
  // Drawn paths: those after the glyph definitions (cairo's SVG keeps text glyphs in <defs>).
  auto drawn_paths = [](const std::string& s) {
    std::vector<std::string> out;
    const size_t defs = s.rfind("</defs>");
    for (size_t p = s.find("<path", defs == std::string::npos ? 0 : defs); p != std::string::npos;
         p = s.find("<path", p + 1))
      out.push_back(s.substr(p, s.find('>', p) - p));
    return out;
  };
  const std::string one = svg({&a, &other}, {"seeds", "other"});
  const std::string two = svg({&a, &a, &other}, {"seeds", "seeds", "other"});
  EXPECT_THAT(two, HasSubstr(">seeds (mean of 2, min-max)<"));
  // the same panels; only the legend's second entry moves right (2 paths per entry: swatch and marker)
  const std::vector<std::string> p1 = drawn_paths(one), p2 = drawn_paths(two);
  ASSERT_EQ(p2.size(), p1.size());
  EXPECT_TRUE(std::equal(p1.begin() + 4, p1.end(), p2.begin() + 4));
  const std::string spread = svg({&a, &b, &other}, {"seeds", "seeds", "other"});
  // one bar (3 strokes) per point where a and b differ: 3 kinds x 4 lengths with answers, 2 metric rows
  EXPECT_GE(drawn_paths(spread).size(), drawn_paths(one).size() + 3 * 12);
  EXPECT_THAT(error_of("retrieval", {files().eval_std},
                       [] {
                         FigureOptions o;
                         o.labels = {"x", "y"};
                         return o;
                       }()),
              HasSubstr("files with the same label are averaged"));
}

TEST(FigureData, RetrievalAgainstDistractorsNamesItsAxis) {
  EvalFile d = make_eval("m/d", 0.8, 5, {1, 2, 4, 8, 12});
  d.x_axis = "distractors";
  const EvalFile len = make_eval("m/l", 0.8);
  Source s;
  s.eval = &d;
  s.label = "d";
  const std::string svg = render_figure("retrieval", {s}, FigureOptions{}, Format::kSvg);
  EXPECT_THAT(svg, AllOf(HasSubstr("Retrieval against distractor pairs"), HasSubstr(">Distractor pairs")));
  EXPECT_THAT(svg, Not(HasSubstr("Context length")));
  Source t;
  t.eval = &len;
  t.label = "l";
  try {
    render_figure("retrieval", {s, t}, FigureOptions{}, Format::kSvg);
    ADD_FAILURE() << "mixed x axes accepted";
  } catch (const Error& e) { EXPECT_THAT(e.what(), HasSubstr("different x axes")); }
}

TEST(FigureData, SeriesLabelsFallBackToDirectoriesWhenRunNamesRepeat) {
  EXPECT_EQ(series_labels({"standard", "focal"}, {"a", "b"}), (std::vector<std::string>{"standard", "focal"}));
  EXPECT_EQ(series_labels({"run", "run", "x"}, {"a", "b", "c"}), (std::vector<std::string>{"a", "b", "x"}));
  EXPECT_EQ(series_labels({"", "x"}, {"a", "b"}), (std::vector<std::string>{"a", "x"}));
  EXPECT_EQ(series_labels({"r", "r"}, {"d", "d"}), (std::vector<std::string>{"d", "d (2)"}));
  // Two logs of the same run name in different directories are labelled by their directories; eval files by the
  // model directory's last component.
  const std::string d = temp_dir();
  mkdir((d + "/alpha_dir").c_str(), 0755);
  mkdir((d + "/beta_dir").c_str(), 0755);
  write_train_log(make_train_log("same", 2.0, false), d + "/alpha_dir/train_log.h5");
  write_train_log(make_train_log("same", 2.1, false), d + "/beta_dir/train_log.h5");
  const std::string svg =
      render_figure_files("training", {d + "/alpha_dir/train_log.h5", d + "/beta_dir/train_log.h5"}, {}, Format::kSvg);
  EXPECT_THAT(svg, AllOf(HasSubstr(">alpha_dir<"), HasSubstr(">beta_dir<")));
  // The same run in directories of the same name: the fewest path components that tell them apart (the full paths
  // were cut to one prefix); a log renamed from train_log.h5 is named by its own name, not its directory's.
  for (const char* seed : {"/seed1/standard", "/seed2/standard"}) {
    mkdir((d + seed).substr(0, (d + seed).rfind('/')).c_str(), 0755);
    mkdir((d + seed).c_str(), 0755);
    write_train_log(make_train_log("same", 2.0, false), d + seed + "/train_log.h5");
  }
  const std::string seeds = render_figure_files(
      "training", {d + "/seed1/standard/train_log.h5", d + "/seed2/standard/train_log.h5"}, {}, Format::kSvg);
  EXPECT_THAT(seeds, AllOf(HasSubstr(">seed1/standard<"), HasSubstr(">seed2/standard<")));
  write_train_log(make_train_log("same", 2.0, false), d + "/train_log-seed2-standard.h5");
  EXPECT_THAT(render_figure_files("training", {d + "/alpha_dir/train_log.h5", d + "/train_log-seed2-standard.h5"}, {},
                                  Format::kSvg),
              AllOf(HasSubstr(">alpha_dir<"), HasSubstr(">train_log-seed2-standard<")));
  const std::string r = render_figure_files("retrieval", {files().eval_focal, files().eval_learned}, {}, Format::kSvg);
  EXPECT_THAT(r, AllOf(HasSubstr(">focal_t0.4<"), HasSubstr(">learned<")));
}

TEST(FigureData, ScoresOnlyCapturesAreReTemperedToTheStoredProbabilities) {
  const CaptureFile full = make_capture(true, true), scores = make_capture(false, true);
  for (size_t r = 0; r < full.runs.size(); ++r) {
    const RunRef a{&full, &full.runs[r], "a", "a"}, b{&scores, &scores.runs[r], "b", "b"};
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

// The boundary lines a figure drew: the crimson dashed segments (plot.h draw_boundary) as x0, y0, x1, y1.
std::vector<std::array<double, 4>> boundary_segments(const std::string& svg) {
  std::vector<std::array<double, 4>> segs;
  const std::regex path(
      R"re(stroke:rgb\(80%,10%,35%\);[^"]*stroke-dasharray[^"]*" d="M ([-0-9.e]+) ([-0-9.e]+) L ([-0-9.e]+) ([-0-9.e]+) ")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), path); it != std::sregex_iterator(); ++it)
    segs.push_back({std::stod((*it)[1]), std::stod((*it)[2]), std::stod((*it)[3]), std::stod((*it)[4])});
  return segs;
}

// A generation capture's figures mark where the prompt ends. The heatmap: per panel a row edge and a column edge at
// the first generated position P, meeting on the diagonal, so that the row edge's length over the column edge's is
// P / (T - P) (cells are square), and the label names P. The distribution: a line before key P in each panel when
// the drawn keys straddle P, and "(generated)" in the title of a generated query. A capture of a prompt alone draws
// none. The grid marks P in every thumbnail as the heatmap does.
TEST(FigureData, GenerationBoundaryIsMarkedWherePositionsAreDrawn) {
  CaptureFile f = make_capture(true, false);
  const int T = f.n_tokens(), P = 8;
  FigureOptions o;
  o.layer = 1;
  o.head = 0;
  o.runs = {"standard"};
  const std::string plain = render_figure("heatmap", {{&f, nullptr, ""}}, o, Format::kSvg);
  EXPECT_TRUE(boundary_segments(plain).empty());
  EXPECT_THAT(plain, Not(HasSubstr("generated")));
  f.n_prompt_tokens = P;
  for (int panels : {1, 2}) {
    o.runs = panels == 1 ? std::vector<std::string>{"standard"} : std::vector<std::string>{"standard", "focal_t0.4"};
    const std::string svg = render_figure("heatmap", {{&f, nullptr, ""}}, o, Format::kSvg);
    EXPECT_THAT(svg, HasSubstr(">generated from 8<"));
    const auto segs = boundary_segments(svg);
    ASSERT_EQ(segs.size(), 2u * panels);
    for (int p = 0; p < panels; ++p) {
      const auto& row = segs[2 * p];
      const auto& col = segs[2 * p + 1];
      EXPECT_DOUBLE_EQ(row[1], row[3]);   // horizontal, at query P
      EXPECT_DOUBLE_EQ(col[0], col[2]);   // vertical, at key P
      EXPECT_NEAR(row[2], col[0], 1e-6);  // they meet on the diagonal
      EXPECT_NEAR(row[3], col[1], 1e-6);
      EXPECT_NEAR((row[2] - row[0]) / (col[3] - col[1]), (double)P / (T - P), 1e-3);  // SVG: 1/256 pt steps
    }
  }
  // The grid: the same edges in every thumbnail (its stored layers x heads), and P in the title.
  {
    FigureOptions og;
    og.runs = {"standard"};
    const std::string svg = render_figure("grid", {{&f, nullptr, ""}}, og, Format::kSvg);
    const RunCapture* r = f.find_run("standard");
    ASSERT_NE(r, nullptr);
    const auto segs = boundary_segments(svg);
    ASSERT_EQ(segs.size(), 2u * r->layers.size() * r->heads.size());
    for (size_t i = 0; i < segs.size(); i += 2) {
      const auto& row = segs[i];
      const auto& col = segs[i + 1];
      EXPECT_DOUBLE_EQ(row[1], row[3]);
      EXPECT_DOUBLE_EQ(col[0], col[2]);
      EXPECT_NEAR(row[2], col[0], 1e-6);
      EXPECT_NEAR(row[3], col[1], 1e-6);
      EXPECT_NEAR((row[2] - row[0]) / (col[3] - col[1]), (double)P / (T - P), 2e-2);  // thumbnails: small, 1/256 pt
    }
    EXPECT_THAT(svg, HasSubstr("generated from token 8"));
  }
  // Nothing generated (n_prompt_tokens = T): no mark.
  f.n_prompt_tokens = T;
  EXPECT_TRUE(boundary_segments(render_figure("heatmap", {{&f, nullptr, ""}}, o, Format::kSvg)).empty());
  {
    FigureOptions og;
    og.runs = {"standard"};
    EXPECT_TRUE(boundary_segments(render_figure("grid", {{&f, nullptr, ""}}, og, Format::kSvg)).empty());
  }

  f.n_prompt_tokens = P;
  o.runs = {"standard", "focal_t0.4"};
  o.query = 12;
  std::string svg = render_figure("distribution", {{&f, nullptr, ""}}, o, Format::kSvg);
  EXPECT_EQ(boundary_segments(svg).size(), 2u);  // one per panel
  EXPECT_THAT(svg, HasSubstr("(generated)"));
  for (const auto& s : boundary_segments(svg)) EXPECT_DOUBLE_EQ(s[0], s[2]);
  o.query = 5;  // its keys 0..5 are all prompt
  svg = render_figure("distribution", {{&f, nullptr, ""}}, o, Format::kSvg);
  EXPECT_TRUE(boundary_segments(svg).empty());
  EXPECT_THAT(svg, Not(HasSubstr("generated")));
  o.query = 12;
  o.key_first = P;  // the drawn keys start at P: no prompt key to the left of a line
  EXPECT_TRUE(boundary_segments(render_figure("distribution", {{&f, nullptr, ""}}, o, Format::kSvg)).empty());
}

// The temps figure of a calibration file: every cell prints its t (3 significant digits), the note line the
// held-out loss before and after, --layers / --heads pick rows and columns, and options it has no use for are
// refused naming them. A file whose matrix does not match its shape is refused.
TEST(FigureData, TempsFigureShowsEveryTemperatureAndTheLoss) {
  TempFile f;
  f.granularity = CalibGranularity::kHead;
  f.n_layers = 2;
  f.n_heads = 3;
  f.focal_temp = {0.5f, 0.625f, 1.25f, 0.75f, 1.5f, 0.875f};
  f.val_loss_init = 3.0;
  f.val_loss = 2.5;
  f.init_temp = 1.0;
  f.steps = 40;
  FigureOptions o;
  o.dpi = 72;
  std::string svg = render_temps(f, "t.json", nullptr, o, Format::kSvg);
  EXPECT_THAT(svg, HasSubstr(">Calibrated t per head<"));  // no model recorded
  EXPECT_THAT(svg, HasSubstr(">t.json: held-out loss"));   // the file under the title
  f.base_model = "/models/SmolLM2-135M/";
  svg = render_temps(f, "t.json", nullptr, o, Format::kSvg);
  // The model first, where a long title's … cannot cut it (it cut "SmolLM2-135M-Instruct.…").
  EXPECT_THAT(svg, HasSubstr(">SmolLM2-135M: calibrated t per head<"));
  // The line under the title in the longest form that fits a single column: the loss's unit whole ("nats/token"),
  // the steps dropped first.
  EXPECT_THAT(svg, HasSubstr("t.json: held-out loss 3.000 \xE2\x86\x92 2.500 nats/token (from t = 1)"));
  // A change under 0.005 nats gets 5 decimals (3 printed 4.75243 -> 4.75172 as "4.752 -> 4.752"); a model in the
  // Hugging Face cache is named ORG/NAME, not by its snapshot's hash.
  f.val_loss_init = 4.75243;
  f.val_loss = 4.75172;
  f.base_model = "/root/.cache/huggingface/hub/models--HuggingFaceTB--SmolLM2-135M/snapshots/abc123def4567890";
  const std::string close = render_temps(f, "t.json", nullptr, o, Format::kSvg);
  EXPECT_THAT(close, HasSubstr("held-out loss 4.75243 \xE2\x86\x92 4.75172"));
  EXPECT_THAT(close, HasSubstr(">HuggingFaceTB/SmolLM2-135M: calibrated t per head<"));
  // A GGUF file of a cached repository keeps its file's name (the quantization) after ORG/NAME.
  f.base_model = "/hub/models--bartowski--SmolLM2-GGUF/snapshots/abc123/SmolLM2-Q4_K_M.gguf";
  EXPECT_THAT(render_temps(f, "t.json", nullptr, o, Format::kSvg),
              HasSubstr(">bartowski/SmolLM2-GGUF/SmolLM2-Q4_K_M: calibrated t per head<"));
  f.val_loss_init = 3.0;
  f.val_loss = 2.5;
  f.base_model = "/models/SmolLM2-135M/";
  // three significant digits in every cell, trailing zeros kept ("0.75" beside "0.875" read as less precise)
  for (const char* t : {">0.500<", ">0.625<", ">1.25<", ">0.750<", ">1.50<", ">0.875<"}) EXPECT_THAT(svg, HasSubstr(t));
  o.layers = {1};
  o.heads = {0, 2};
  svg = render_temps(f, "t.json", nullptr, o, Format::kSvg);
  for (const char* t : {">0.750<", ">0.875<"}) EXPECT_THAT(svg, HasSubstr(t));
  for (const char* t : {">0.500<", ">0.625<", ">1.25<", ">1.50<"}) EXPECT_THAT(svg, Not(HasSubstr(t)));
  o = FigureOptions();
  o.runs = {"standard"};
  EXPECT_THROW(render_temps(f, "t.json", nullptr, o, Format::kSvg), Error);
  o = FigureOptions();
  o.layers = {2};
  EXPECT_THROW(render_temps(f, "t.json", nullptr, o, Format::kSvg), Error);
  f.focal_temp.pop_back();
  EXPECT_THROW(render_temps(f, "t.json", nullptr, FigureOptions(), Format::kSvg), Error);

  // With a capture of the same model (shape and weights checksum): the scatter of t against each head's entropy
  // under the capture's standard run (or the run --runs names), with a legend of layers; another model's capture, a
  // missing run and several runs are refused.
  const CaptureFile cap = make_capture(false, false);
  TempFile g;
  g.n_layers = cap.n_layers;
  g.n_heads = cap.n_heads;
  g.base_checksum = cap.weights_checksum;
  for (int i = 0; i < cap.n_layers * cap.n_heads; ++i) g.focal_temp.push_back(0.5f + 0.05f * (float)i);
  svg = render_temps(g, "t.json", &cap, FigureOptions(), Format::kSvg);
  EXPECT_THAT(svg, HasSubstr(">Entropy under standard (nats)<"));
  EXPECT_THAT(svg, HasSubstr(">layer 0<"));
  o = FigureOptions();
  o.runs = {"focal_t0.4"};
  EXPECT_THAT(render_temps(g, "t.json", &cap, o, Format::kSvg), HasSubstr(">Entropy under focal_t0.4 (nats)<"));
  o.runs = {"learned"};
  EXPECT_THROW(render_temps(g, "t.json", &cap, o, Format::kSvg), Error);
  o.runs = {"standard", "focal_t0.4"};
  EXPECT_THROW(render_temps(g, "t.json", &cap, o, Format::kSvg), Error);
  g.base_checksum ^= 1;
  EXPECT_THROW(render_temps(g, "t.json", &cap, FigureOptions(), Format::kSvg), Error);
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
  // FILE:RUN names a run whether or not another file holds one of that name (--help: "name a run FILE:RUN if needed";
  // "base:focal_t0.3" was refused when only base held focal_t0.3).
  CaptureFile c = make_capture(true, false);
  c.runs[1].name = "focal_t0.3";
  const std::vector<RunRef> mixed = capture_runs({{&a, nullptr, "base"}, {&c, nullptr, "other"}}, "entropy");
  EXPECT_EQ(mixed[3].label, "focal_t0.3");
  const std::vector<RunRef> got = select_runs(mixed, {"other:focal_t0.3", "base:focal_t0.4"}, 8, 8, "entropy");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].run, &c.runs[1]);
  EXPECT_EQ(got[1].run, &a.runs[1]);
  EXPECT_THROW(select_runs(mixed, {"other:focal_t0.4"}, 8, 8, "entropy"), Error);  // other holds no focal_t0.4
}

// A matrix value below a millionth of the largest is float noise, shown as 0 (an entropy difference of a sink head
// read "1.1e-08" among values of order 1); the others keep their significant digits.
TEST(FigureData, DifferenceMatrixShowsFloatNoiseAsZero) {
  // Entropy rows set by hand: run B = run A + 0.3 on every head but head (0, 0), where both are ~0 (a pure sink
  // head) and 1.1e-8 apart. That cell is float noise at the matrix's scale (0.3): the figure is the one where the two
  // are exactly equal (it read "1.1e-08"). A one-run matrix keeps a small value's digits (a value there).
  auto with_sink = [](float a, float b) {
    CaptureFile cap = make_capture(false, false);
    const int T = cap.n_tokens();
    for (int r = 0; r < 2; ++r)
      for (int l = 0; l < kLayers; ++l)
        for (int h = 0; h < kHeads; ++h)
          for (int i = 0; i < T; ++i)
            cap.runs[r].metrics[(((size_t)l * kHeads + h) * T + i) * kNumRowMetrics + kEntropyNats] =
                l == 0 && h == 0 ? (r == 0 ? a : b) : (r == 0 ? 1.0f : 1.3f);
    return cap;
  };
  FigureOptions o;
  o.matrix = true;
  o.runs = {"standard", "focal_t0.4"};
  const CaptureFile noisy = with_sink(2e-8f, 3.1e-8f), exact = with_sink(2e-8f, 2e-8f);
  const std::string svg = render_figure("entropy", {{&noisy, nullptr, ""}}, o, Format::kSvg);
  EXPECT_EQ(svg.find("e-08"), std::string::npos);
  EXPECT_EQ(svg, render_figure("entropy", {{&exact, nullptr, ""}}, o, Format::kSvg));
  o.runs = {"standard"};
  const std::string one = render_figure("entropy", {{&noisy, nullptr, ""}}, o, Format::kSvg);
  EXPECT_NE(one.find(">2e-08</text>"), std::string::npos) << "the sink head's own 2e-8";
}

TEST(FigurePlot, TicksFollowTheOneTwoFiveRule) {
  Ticks t = nice_ticks(0, 2.01, 6, true);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0.0", "0.5", "1.0", "1.5", "2.0", "2.5"}));
  EXPECT_DOUBLE_EQ(t.hi, 2.5);
  t = nice_ticks(0.16, 1.24, 6, false);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0.2", "0.4", "0.6", "0.8", "1.0", "1.2"}));
  t = nice_ticks(-1.09, 1.09, 7, false);
  const std::string minus = "\xE2\x88\x92";  // U+2212
  EXPECT_EQ(t.labels, (std::vector<std::string>{minus + "1.0", minus + "0.5", "0.0", "0.5", "1.0"}));
  t = nice_ticks(0, 37, 6, true);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0", "10", "20", "30", "40"}));
  t = log10_ticks(-4, 0, 6);
  EXPECT_EQ(t.labels.front(), "10\xE2\x81\xBB\xE2\x81\xB4");  // 10⁻⁴
  EXPECT_EQ(t.labels.back(), "10\xE2\x81\xB0");
  EXPECT_EQ(format_sig(-0.4123, 2),
            "\xE2\x88\x92"
            "0.41");
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

// The derived numbers have one definition (focal/capture.h): the app's metric table, the figures' head means and
// `focal inspect`'s table and prompt loss agree on one capture, for every layer, head and metric the table prints.
TEST(FigureCli, InspectTableAppAndFiguresAgreeOnOneCapture) {
  using focalscope::AppState;
  auto wait_idle = [](AppState& st) {
    const auto t0 = std::chrono::steady_clock::now();
    while (st.busy()) {
      st.poll();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60)) << "the app's jobs did not finish";
    }
    st.poll();
  };
  AppState st;
  st.prompt = "The old man took the lamp and went down to the river.";
  st.open_path(std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4");
  wait_idle(st);
  ASSERT_TRUE(st.has_model()) << st.message;
  const std::string dir = temp_dir();
  const std::string path = dir + "/c.h5";
  st.export_capture(path);
  AppState cap;
  cap.open_path(path);
  wait_idle(cap);
  ASSERT_TRUE(cap.capture_only()) << cap.message;
  const focal::RunCapture& run = *cap.slots[0].run;
  const int L = cap.file.n_layers, H = cap.file.n_heads;

  const std::string out = dir + "/inspect.txt";
  ASSERT_EQ(0, std::system(
                   (std::string(FOCAL_CLI_PATH) + " inspect '" + path + "' --run " + run.name + " >'" + out + "' 2>&1")
                       .c_str()));
  std::ifstream in(out);
  std::string line;
  double cli_loss = NAN;
  std::vector<std::vector<double>> rows;  // [layer * H + head] -> entropy, H/lnN, max_p, sink, tail
  while (std::getline(in, line)) {
    if (std::sscanf(line.c_str(), "  prompt loss %lf", &cli_loss) == 1) continue;
    std::istringstream ls(line);
    int l = -1, h = -1;
    std::vector<double> v(5);
    if (ls >> l >> h >> v[0] >> v[1] >> v[2] >> v[3] >> v[4]) rows.push_back(v);
  }
  ASSERT_EQ(rows.size(), (size_t)L * H) << "inspect table of " << path;
  ASSERT_FALSE(std::isnan(cli_loss));
  EXPECT_NEAR(cli_loss, cap.prompt_loss(0), 5.1e-5);  // printed with 4 decimals
  EXPECT_FLOAT_EQ(cap.prompt_loss(0), (float)focal::prompt_loss(run));

  const RunRef ref{&cap.file, &run, run.name, run.name};
  const int kCols[5] = {focal::kEntropyNats, focal::kEntropyNorm, focal::kMaxProb, focal::kSinkMass, focal::kTailMass};
  for (int c = 0; c < 5; ++c) {
    const std::vector<double> fig = head_means(ref, kCols[c]);
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        const float app = cap.head_metric(0, l, h, kCols[c]);
        ASSERT_FALSE(std::isnan(app));
        EXPECT_EQ((float)fig[(size_t)l * H + h], app) << "figures vs app, layer " << l << " head " << h;
        EXPECT_NEAR(rows[(size_t)l * H + h][c], app, 5.1e-5) << "inspect vs app, layer " << l << " head " << h;
      }
  }
}

TEST(FigureCli, WritesTheFigureAndListsKindsInHelp) {
  const CliResult help = run_cli("figure --help");
  EXPECT_EQ(help.rc, 0);
  for (const char* k : {"distribution", "heatmap", "grid", "entropy", "sweep", "training", "retrieval", "--no-sink",
                        "--dpi", "--matrix", "--tau", "--kind", "--labels", "--x"})
    EXPECT_THAT(help.out, HasSubstr(k));
  const std::string out = temp_dir() + "/cli_fig.svg";
  const CliResult r =
      run_cli("figure distribution " + files().capture + " --runs standard --layer 1 --head 2 -o " + out);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(out));
  EXPECT_THAT(slurp(out), HasSubstr("<svg"));
  const std::string png = temp_dir() + "/cli_training.png";
  CliResult t = run_cli("figure training " + files().log_std + " " + files().log_learned +
                        " --metric step_loss --x tokens -o " + png);
  EXPECT_EQ(t.rc, 0) << t.err;
  EXPECT_EQ(slurp(png).compare(0, 8, "\x89PNG\r\n\x1a\n"), 0);
  t = run_cli("figure training " + files().log_learned + " --tau --clip -o " + png);
  EXPECT_EQ(t.rc, 0) << t.err;
  const std::string pdf = temp_dir() + "/cli_retrieval.pdf";
  t = run_cli("figure retrieval " + files().eval_std + " " + files().eval_learned +
              " --kind kv --labels std,learned -o " + pdf);
  EXPECT_EQ(t.rc, 0) << t.err;
  EXPECT_EQ(slurp(pdf).compare(0, 5, "%PDF-"), 0);
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
  EXPECT_THAT(r.err, AllOf(HasSubstr(files().capture), HasSubstr("not a focalscope training log")));
  r = run_cli("figure training " + files().log_std + " --tau -o " + d + "/f.png");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, AllOf(HasSubstr("--tau"), HasSubstr("no learned temperature")));
  r = run_cli("figure retrieval " + files().eval_std + " --kind nope -o " + d + "/f.svg");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, AllOf(HasSubstr("--kind"), HasSubstr("'nope'")));
  r = run_cli("figure retrieval " + files().eval_std + " --layer 7 -o " + d + "/f.pdf");
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("--layer 7"));
  r = run_cli("figure retrieval " + files().eval_std + " --tau -o " + d + "/f.pdf");
  EXPECT_EQ(r.rc, 1);
  r = run_cli("figure heatmap " + files().capture + " -o " + d + "/f.jpg");
  EXPECT_EQ(r.rc, 1);
  r = run_cli("figure heatmap " + files().capture + " --bogus -o " + d + "/f.png");
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(list_dir(d).empty()) << "a failed figure left " << list_dir(d).front();
}
#endif

}  // namespace
}  // namespace focal::figures
