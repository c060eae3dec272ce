// Scripted runs of the real focalscope binary under Xvfb + Mesa (xvfb-run): load, set t, select a head,
// screenshot, quit. Checks on the screenshots: not blank, text rendered, the heatmap region changes when t changes;
// a tiny window, a bad path and a capture opened without its model still render. The app writes a JSON sidecar per
// screenshot with its panel rectangles and state.
#include <cairo.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "focal/device.h"
#include "focal/calibrate.h"
#include "focal/capture.h"
#include "focal/model_writer.h"
#include "focal_batch/batch.h"
#include "focal_batch/stats_file.h"
#include "focal_figures/figures.h"
#include "focal/tokenizer.h"
#include "test_util.h"

namespace {

const std::string kApp = FOCAL_APP_PATH;

struct Image {
  int w = 0, h = 0;
  std::vector<uint32_t> px;  // 0xRRGGBB
  uint32_t at(int x, int y) const { return px[(size_t)y * w + x]; }
};

Image read_png(const std::string& path) {
  Image im;
  cairo_surface_t* s = cairo_image_surface_create_from_png(path.c_str());
  if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
    cairo_surface_destroy(s);
    ADD_FAILURE() << "cannot read " << path;
    return im;
  }
  im.w = cairo_image_surface_get_width(s);
  im.h = cairo_image_surface_get_height(s);
  const int stride = cairo_image_surface_get_stride(s);
  const uint8_t* d = cairo_image_surface_get_data(s);
  for (int y = 0; y < im.h; ++y)
    for (int x = 0; x < im.w; ++x)
      im.px.push_back(reinterpret_cast<const uint32_t*>(d + (size_t)y * stride)[x] & 0xFFFFFF);
  cairo_surface_destroy(s);
  return im;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "no sidecar " << path;
  return nlohmann::json::parse(f);
}

double lum(uint32_t c) { return 0.2126 * (c >> 16 & 255) + 0.7152 * (c >> 8 & 255) + 0.0722 * (c & 255); }

// Runs the app with a script; returns its exit code.
int run_app(const std::string& dir, const std::string& script, const std::string& extra = "",
            const std::string& size = "1400x860", const std::string& settings = "--no-settings") {
  const std::string sp = dir + "/script.txt";
  std::ofstream(sp) << script;
  // The app's own exit status goes to a file: xvfb-run's exit status can be its own (5 when removing its temporary
  // directory races with the X server's exit), which would read as the app's.
  const std::string rc_path = dir + "/app_rc.txt";
  std::remove(rc_path.c_str());
  const std::string cmd = "xvfb-run -a -s '-screen 0 1920x1200x24' sh -c \"" + kApp + " " + settings + " --size " +
                          size + " " + extra + " --script " + sp + " > " + dir + "/log.txt 2>&1; echo \\$? > " +
                          rc_path + "\"";
  (void)std::system(cmd.c_str());
  int rc = -1;
  std::ifstream(rc_path) >> rc;
  return rc;
}

// Pixels in rect r = [x, y, w, h] that differ between two images.
double changed_fraction(const Image& a, const Image& b, const nlohmann::json& r) {
  size_t n = 0, diff = 0;
  for (int y = (int)r[1]; y < (int)r[1] + (int)r[3] && y < a.h; ++y)
    for (int x = (int)r[0]; x < (int)r[0] + (int)r[2] && x < a.w; ++x, ++n) diff += a.at(x, y) != b.at(x, y);
  return n ? (double)diff / n : 0.0;
}

// Pixels of run A's colour (blue: B channel well above R) and run B's (vermillion: R well above B) in a
// rectangle, leaving out its top `skip_top` px (a panel's header text is coloured by run too).
std::pair<size_t, size_t> run_colour_pixels(const Image& im, const nlohmann::json& r, int skip_top) {
  size_t a = 0, b = 0;
  for (int y = (int)r[1] + skip_top; y < (int)r[1] + (int)r[3] && y < im.h; ++y)
    for (int x = (int)r[0]; x < (int)r[0] + (int)r[2] && x < im.w; ++x) {
      const int R = (int)(im.at(x, y) >> 16) & 255, B = (int)im.at(x, y) & 255;
      a += B > R + 60;
      b += R > 100 && R > B + 60;  // translucent 1-px bars over the dark background still qualify
    }
  return {a, b};
}

// Text looks like many short bright runs on a dark background: count dark->bright transitions along rows.
int text_transitions(const Image& im, const nlohmann::json& r) {
  int t = 0;
  for (int y = (int)r[1]; y < (int)r[1] + (int)r[3] && y < im.h; ++y)
    for (int x = (int)r[0] + 1; x < (int)r[0] + (int)r[2] && x < im.w; ++x)
      t += lum(im.at(x - 1, y)) < 80 && lum(im.at(x, y)) > 150;
  return t;
}

// Whether labels are numbers on a round (1-2-5 x 10^k) step: 0.24 / 0.49 / 0.73 would fail.
bool round_numbers(const std::vector<std::string>& labels) {
  if (labels.size() < 2) return false;
  std::vector<double> v;
  for (const std::string& s : labels) {
    char* end = nullptr;
    v.push_back(std::strtod(s.c_str(), &end));
    if (end == s.c_str() || *end) return false;
  }
  const double step = v[1] - v[0];
  if (!(step > 0)) return false;
  const double mant = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
  if (std::fabs(mant - 1) > 1e-6 && std::fabs(mant - 2) > 1e-6 && std::fabs(mant - 5) > 1e-6) return false;
  for (size_t i = 1; i < v.size(); ++i)
    if (std::fabs(v[i] - v[i - 1] - step) > 1e-6 * std::max(1.0, step)) return false;
  for (double x : v)
    if (std::fabs(x / step - std::round(x / step)) > 1e-6) return false;
  return true;
}

std::vector<std::string> labels_of(const nlohmann::json& j, const std::string& name) {
  std::vector<std::string> out;
  if (j.contains("labels") && j["labels"].contains(name))
    for (const auto& s : j["labels"][name]) out.push_back(s);
  return out;
}

// Panel rectangles lie in the window and the main panels do not overlap.
void expect_layout(const nlohmann::json& j, int w, int h) {
  const char* main[] = {"controls", "prompt", "heatmap", "overview", "distribution", "details", "status"};
  for (const char* p : main) {
    ASSERT_TRUE(j["rects"].contains(p)) << p;
    const auto& r = j["rects"][p];
    EXPECT_GE((double)r[0], 0) << p;
    EXPECT_GE((double)r[1], 0) << p;
    EXPECT_LE((double)r[0] + (double)r[2], w + 0.5) << p;
    EXPECT_LE((double)r[1] + (double)r[3], h + 0.5) << p;
  }
  for (const char* a : {"controls", "prompt", "overview", "distribution", "details"})
    for (const char* b : {"controls", "prompt", "overview", "distribution", "details"}) {
      if (std::string(a) >= b) continue;
      const auto &ra = j["rects"][a], &rb = j["rects"][b];
      const double ox = std::min((double)ra[0] + (double)ra[2], (double)rb[0] + (double)rb[2]) -
                        std::max((double)ra[0], (double)rb[0]);
      const double oy = std::min((double)ra[1] + (double)ra[3], (double)rb[1] + (double)rb[3]) -
                        std::max((double)ra[1], (double)rb[1]);
      EXPECT_FALSE(ox > 1.5 && oy > 1.5) << a << " overlaps " << b;
    }
}

TEST(AppScreens, LoadSetTemperatureSelectHeadScreenshot) {
  const std::string dir = focal::test::make_temp_dir("app_screens");
  // A prompt of its own (not the app's default): head 3.3 of the bundled model puts most of its mass on the sink here.
  const int rc = run_app(dir,
                         "wait\nprompt The old man took the lamp and went down to the river. When the boy saw the lamp "
                         "on the water, he called to the old man, and the old man answered him from the river.\n"
                         "wait\nselect 3 1\nwait\nscreenshot " +
                             dir +
                             "/t04.png\n"
                             "temp 0.15\nwait\nscreenshot " +
                             dir +
                             "/t015.png\n"
                             "view diff\nwait\nscreenshot " +
                             dir +
                             "/diff.png\n"
                             "view a\nselect 3 3\nwait\nscreenshot " +
                             dir +
                             "/sink.png\n"
                             "sink off\nwait\nscreenshot " +
                             dir +
                             "/nosink.png\n"
                             "figure distribution " +
                             dir + "/fig.pdf\nfigure heatmap " + dir +
                             "/fig.svg\n"
                             "figure grid " +
                             dir + "/fig.png\nfigure entropy " + dir +
                             "/ent.svg\n"
                             "log on\nfigure heatmap " +
                             dir + "/log.pdf\nsweep\nwait\nscreenshot " + dir + "/sweep.png\nquit\n",
                         std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4");  // the 4-layer text model
  ASSERT_EQ(rc, 0) << std::ifstream(dir + "/log.txt").rdbuf();
  const Image a = read_png(dir + "/t04.png"), b = read_png(dir + "/t015.png"), d = read_png(dir + "/diff.png");
  ASSERT_EQ(a.w, 1400);
  ASSERT_EQ(a.h, 860);
  const auto ja = read_json(dir + "/t04.png.json"), jb = read_json(dir + "/t015.png.json");
  EXPECT_EQ(ja["layer"], 3);
  EXPECT_EQ(ja["head"], 1);
  EXPECT_EQ(ja["spec_a"], "focal_t0.4");
  EXPECT_EQ(jb["spec_a"], "focal_t0.15");
  EXPECT_GT((int)ja["n_tokens"], 10);
  // Not blank: many colours and real contrast.
  std::set<uint32_t> colours(a.px.begin(), a.px.end());
  EXPECT_GT(colours.size(), 200u);
  double mn = 255, mx = 0;
  for (uint32_t c : a.px) {
    mn = std::min(mn, lum(c));
    mx = std::max(mx, lum(c));
  }
  EXPECT_GT(mx - mn, 150);
  // Text rendered in the controls, the prompt and the status bar.
  for (const char* panel : {"controls", "prompt", "status"})
    EXPECT_GT(text_transitions(a, ja["rects"][panel]), 60) << panel;
  // The heatmap: filled (not the empty placeholder), and it changes when t changes.
  const auto& hr = ja["rects"]["heatmap"];
  ASSERT_GT((double)hr[2], 100.0);
  std::set<uint32_t> heat_colours;
  for (int y = (int)hr[1]; y < (int)hr[1] + (int)hr[3]; ++y)
    for (int x = (int)hr[0]; x < (int)hr[0] + (int)hr[2]; ++x) heat_colours.insert(a.at(x, y));
  EXPECT_GT(heat_colours.size(), 8u);
  EXPECT_GT(changed_fraction(a, b, hr), 0.01);
  EXPECT_GT(changed_fraction(b, d, hr), 0.05);  // the difference view
  // The distribution panel changes with t as well; the controls panel shows the new t.
  EXPECT_GT(changed_fraction(a, b, ja["rects"]["distribution"]), 0.001);
  // Hiding the first-token sink renormalises the rows: on head 3.3 (most of its mass on the sink) the heatmap
  // changes beyond the sink column (its mass moves to other keys).
  const Image sk = read_png(dir + "/sink.png"), ns = read_png(dir + "/nosink.png");
  EXPECT_GT(changed_fraction(sk, ns, hr), 0.02);  // the sink column alone is ~1 %
  // Figure presets through the figures module, in the format the extension names.
  auto head = [&](const std::string& f, size_t n) {
    std::ifstream in(dir + "/" + f, std::ios::binary);
    std::string h(n, '\0');
    in.read(&h[0], (std::streamsize)n);
    return h;
  };
  EXPECT_EQ(head("fig.pdf", 5), "%PDF-");
  EXPECT_NE(head("fig.svg", 200).find("<svg"), std::string::npos);
  EXPECT_EQ(head("fig.png", 4), "\x89PNG");
  EXPECT_NE(head("ent.svg", 200).find("<svg"), std::string::npos);
  EXPECT_EQ(head("log.pdf", 5), "%PDF-");
  EXPECT_GT(read_png(dir + "/fig.png").w, 200);
  // The sweep tab: round y ticks, a labelled t = 1, t labels that do not collide (0.4 overlapped 0.5).
  const auto sw = read_json(dir + "/sweep.png.json");
  EXPECT_TRUE(round_numbers(labels_of(sw, "sweep.metric.y"))) << sw["labels"];
  const auto tl = labels_of(sw, "sweep.metric.t");
  EXPECT_NE(std::find(tl.begin(), tl.end(), "1"), tl.end()) << sw["labels"];
  EXPECT_NE(std::find(tl.begin(), tl.end(), "0.5"), tl.end()) << sw["labels"];
  EXPECT_EQ(labels_of(sw, "sweep.metric.standard_marker").size(), 1u) << "the dashed t = 1 marker";
  // No two t labels share a pixel (with 6 px between them).
  std::vector<std::pair<double, double>> ext;
  for (const std::string& e : labels_of(sw, "sweep.metric.t.extent"))
    ext.push_back({std::stod(e.substr(0, e.find(':'))), std::stod(e.substr(e.find(':') + 1))});
  ASSERT_EQ(ext.size(), tl.size());
  std::sort(ext.begin(), ext.end());
  for (size_t i = 1; i < ext.size(); ++i) EXPECT_GE(ext[i].first, ext[i - 1].second + 6.0) << sw["labels"];
}

TEST(AppScreens, TinyWindowBadPathAndCaptureWithoutModel) {
  const std::string dir = focal::test::make_temp_dir("app_screens2");
  // A load that fails stops the script at its line with exit 1 (the next command never runs).
  int rc = run_app(dir, "wait\nopen /nonexistent/model\nscreenshot " + dir + "/bad.png\nquit\n");
  EXPECT_EQ(rc, 1);
  std::stringstream bad_log;
  bad_log << std::ifstream(dir + "/log.txt").rdbuf();
  EXPECT_NE(bad_log.str().find("script.txt:2: open /nonexistent/model: "), std::string::npos) << bad_log.str();
  EXPECT_NE(bad_log.str().find("/nonexistent/model"), std::string::npos) << bad_log.str();
  EXPECT_FALSE(std::ifstream(dir + "/bad.png").good());
  // `open X` directly followed by `open-b Y`: both are applied, in order (the second load used to replace the first).
  const std::string model = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";
  const std::string model_b = std::string(FOCAL_SOURCE_DIR) + "/assets/models/standard";
  rc = run_app(dir, "open " + model + "\nopen-b " + model_b + "\nwait\nscreenshot " + dir + "/ab.png\nquit\n");
  ASSERT_EQ(rc, 0) << std::ifstream(dir + "/log.txt").rdbuf();
  const auto jab = read_json(dir + "/ab.png.json");
  EXPECT_NE(std::string(jab["model_path"]).find("focal-t0.4"), std::string::npos) << jab;
  EXPECT_NE(std::string(jab["model_b_path"]).find("standard"), std::string::npos) << jab;
  rc = run_app(dir, "wait\nexport " + dir + "/cap.h5\nresize 240 180\nwait\nscreenshot " + dir + "/tiny.png\nquit\n");
  ASSERT_EQ(rc, 0) << std::ifstream(dir + "/log.txt").rdbuf();
  const Image tiny = read_png(dir + "/tiny.png");
  EXPECT_EQ(tiny.w, 240);
  EXPECT_EQ(tiny.h, 180);

  // The exported capture, opened without its model: the heatmap is drawn from the stored rows and previews t.
  rc = run_app(dir,
               "wait\nscreenshot " + dir + "/cap1.png\ntemp 0.1\nwait\nscreenshot " + dir +
                   "/cap2.png\n"
                   "quit\n",
               dir + "/cap.h5");
  ASSERT_EQ(rc, 0) << std::ifstream(dir + "/log.txt").rdbuf();
  // A command the state refuses (a capture without its model has fixed tokens) fails the script at its line.
  EXPECT_EQ(run_app(dir, "wait\nprompt other words\nquit\n", dir + "/cap.h5"), 1);
  std::stringstream refused;
  refused << std::ifstream(dir + "/log.txt").rdbuf();
  EXPECT_NE(refused.str().find("script.txt:2: "), std::string::npos) << refused.str();
  const auto j1 = read_json(dir + "/cap1.png.json");
  EXPECT_TRUE(j1["capture_only"]);
  const Image c1 = read_png(dir + "/cap1.png"), c2 = read_png(dir + "/cap2.png");
  EXPECT_GT(changed_fraction(c1, c2, j1["rects"]["heatmap"]), 0.01);
}

// The log of the last run_app call.
std::string app_log(const std::string& dir) {
  std::stringstream log;
  log << std::ifstream(dir + "/log.txt").rdbuf();
  return log.str();
}

// A temperature file's shape and provenance for model m (loaded from model_path) at granularity g; the caller fills
// the temperatures.
focal::TempFile temp_file_for(const focal::Model& m, const std::string& model_path, focal::CalibGranularity g) {
  const focal::ModelConfig& c = m.config();
  focal::TempFile f;
  f.granularity = g;
  f.n_layers = c.n_layers;
  f.n_heads = c.n_heads;
  f.n_kv_heads = c.n_kv_heads;
  f.d_head = c.d_head;
  f.hidden = c.hidden;
  f.vocab_size = c.vocab_size;
  f.base_model = model_path;
  f.base_checksum = m.weights_checksum();
  return f;
}

// A temperature file of `focal calibrate` as A's setting (issue 34): the app names the run "calibrated:temps" (the
// file's stem) and its
// prompt loss is the library's under the same file (capture_run, printed to 3 decimals as the app prints it); a file
// made for other weights fails the script at its line, naming the file.
TEST(AppScreens, CalibratedTemperatureFileAsASetting) {
  const std::string dir = focal::test::make_temp_dir("app_calib");
  const std::string model = std::string(FOCAL_SOURCE_DIR) + "/assets/models/standard";
  auto m = focal::Model::load(model, focal::Device::kCpu);
  const focal::ModelConfig& c = m->config();
  focal::TempFile f = temp_file_for(*m, model, focal::CalibGranularity::kHead);
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_heads; ++h) f.focal_temp.push_back(l == 1 ? 0.5f : 1.0f + 0.1f * (float)h);
  const std::string temps = dir + "/temps.json";
  focal::write_temp_file(f, temps);
  const std::string prompt = "The keeper lit the lamp by the door.";
  int rc = run_app(dir, "open " + model + "\nprompt " + prompt + "\nspec calibrated:" + temps +
                            " a\ntab output\nwait\nscreenshot " + dir + "/calib.png\nquit\n");
  ASSERT_EQ(rc, 0) << app_log(dir);
  const auto j = read_json(dir + "/calib.png.json");
  EXPECT_EQ(j["spec_a"], "calibrated:temps");
  const std::vector<int32_t> ids = m->tokenizer()->encode(prompt, c.add_bos);
  focal::CaptureRequest q;
  q.store_probs = q.store_scores = false;
  const focal::RunCapture ref =
      focal::capture_run(*m, ids, focal::temp_file_spec(focal::read_temp_file(temps), temps), q, "ref");
  char want[32];
  std::snprintf(want, sizeof want, "%.3f", focal::prompt_loss(ref));
  EXPECT_EQ(labels_of(j, "output.prompt_loss.a"), std::vector<std::string>{want});
  // Another model's file: refused at its line.
  f.base_checksum ^= 1;
  const std::string other = dir + "/other.json";
  focal::write_temp_file(f, other);
  rc = run_app(dir, "open " + model + "\nprompt " + prompt + "\nspec calibrated:" + other + " a\nwait\nquit\n");
  EXPECT_NE(rc, 0);
  const std::string log = app_log(dir);
  EXPECT_NE(log.find("script.txt:3: "), std::string::npos) << log;
  EXPECT_NE(log.find("'" + other + "' was calibrated for other weights"), std::string::npos) << log;
}

// A tau-proj temperature file (the learned tau's projections calibrated on frozen weights) as A's setting: the app
// runs it as mode learned with the file's projections (prompt loss equal to the library's, 3 decimals), and the
// Learned tau tab draws its tau per layer on an axis scaled to the run's tau.
TEST(AppScreens, TauProjFileRunsAndShowsTau) {
  const std::string dir = focal::test::make_temp_dir("app_tauproj");
  const std::string model = std::string(FOCAL_SOURCE_DIR) + "/assets/models/standard";
  auto m = focal::Model::load(model, focal::Device::kCpu);
  const focal::ModelConfig& c = m->config();
  focal::TempFile f = temp_file_for(*m, model, focal::CalibGranularity::kTauProj);
  f.focal_temp.assign((size_t)c.n_layers * c.n_heads, 1.0f);
  auto proj = std::make_shared<focal::TauProj>();
  const float sqrt_d = std::sqrt((float)c.d_head);
  proj->tau_min = 0.05f * sqrt_d;
  proj->tau_max = 20.0f * sqrt_d;
  proj->n_layers = c.n_layers;
  proj->hidden = c.hidden;
  for (int l = 0; l < c.n_layers; ++l) {
    for (int i = 0; i < c.hidden; ++i) proj->weight.push_back(0.05f * sqrt_d * (float)((i * 7 + l) % 5 - 2));
    proj->bias.push_back(sqrt_d * (0.5f + 0.5f * (float)l));  // t from 0.5 (layer 0) to 2 (layer 3) at X.w = 0
  }
  f.tau_proj = proj;
  const std::string temps = dir + "/tau.json";
  focal::write_temp_file(f, temps);
  const std::string prompt = "The keeper lit the lamp by the door.";
  const int rc = run_app(dir, "open " + model + "\nprompt " + prompt + "\nspec calibrated:" + temps +
                                  " a\ntab output\nwait\nscreenshot " + dir + "/out.png\ntab tau\nwait\nscreenshot " +
                                  dir + "/tau.png\nquit\n");
  ASSERT_EQ(rc, 0) << app_log(dir);
  const std::vector<int32_t> ids = m->tokenizer()->encode(prompt, c.add_bos);
  focal::CaptureRequest q;
  q.store_probs = q.store_scores = false;
  const focal::RunCapture ref =
      focal::capture_run(*m, ids, focal::temp_file_spec(focal::read_temp_file(temps), temps), q, "ref");
  ASSERT_FALSE(ref.tau.empty());
  char want[32];
  std::snprintf(want, sizeof want, "%.3f", focal::prompt_loss(ref));
  const auto jo = read_json(dir + "/out.png.json");
  EXPECT_EQ(jo["spec_a"], "calibrated:tau");
  EXPECT_EQ(labels_of(jo, "output.prompt_loss.a"), std::vector<std::string>{want});
  const auto jt = read_json(dir + "/tau.png.json");
  const std::vector<std::string> ticks = labels_of(jt, "tau_y");
  ASSERT_GE(ticks.size(), 2u) << jt.dump();
  const float tau_max = *std::max_element(ref.tau.begin(), ref.tau.end());
  // The axis follows the run's tau (up to 1.15 times its largest), not the projection's wide clip (20 sqrt(d_head)).
  EXPECT_LE(std::stod(ticks.back()), 1.15 * (double)tau_max) << ticks.back();
  EXPECT_GT(std::stod(ticks.back()), 0.0);
}

// The left panel's rows fit it (issue 33): at 1600 x 960 the device / weights combos on one row ran past the panel
// ("weigh") and the model's shape line was cut ("context 819"); every checked row now ends inside the panel, at the
// default size too.
TEST(AppScreens, LeftPanelRowsFitThePanel) {
  const std::string dir = focal::test::make_temp_dir("app_fit");
  const std::string model = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";
  for (const char* size : {"1600x960", "1400x860"}) {
    const std::string shot = dir + "/fit-" + size + ".png";
    const int rc = run_app(
        dir, "open " + model + "\nprompt The keeper lit the lamp.\nwait\nscreenshot " + shot + "\nquit\n", "", size);
    ASSERT_EQ(rc, 0) << app_log(dir);
    const auto j = read_json(shot + ".json");
    ASSERT_TRUE(j["labels"].contains("controls.clipped")) << size;
    EXPECT_EQ(labels_of(j, "controls.clipped"), std::vector<std::string>{}) << size;
  }
}

// A capture opened without its model (issue 38): after `temp 0.2` on A the Output tab reads "n/a — needs the model"
// for A's loss and names the stored run (focal_t0.4) beside its stored loss and next tokens, as text; live propagate
// is off and greyed, and so is Generate; the Metrics tab says why induction is n/a; sweep, export and `propagate on` fail the script at
// their line saying what is needed; the model the capture names is offered and `open-model` opens it, after which
// A's loss is t = 0.2's own. A capture written before the top-k text was stored shows ids and says so.
TEST(AppScreens, CaptureWithoutItsModelShowsOnlyWhatItHolds) {
  const std::string dir = focal::test::make_temp_dir("app_capmodel");
  const std::string model = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";
  int rc = run_app(dir, "open " + model + "\nprompt The old man took the lamp and went down to the river.\n" +
                            "select 3 1\ntab generation\nwait\nscreenshot " + dir + "/gen.png\ntab output\nwait\n" +
                            "screenshot " + dir + "/live.png\nexport " + dir + "/cap.h5\nquit\n");
  ASSERT_EQ(rc, 0) << app_log(dir);
  const auto jl = read_json(dir + "/live.png.json");
  const std::vector<std::string> stored_loss = labels_of(jl, "output.prompt_loss.a");
  ASSERT_EQ(stored_loss.size(), 1u) << jl;
  const std::string cap = dir + "/cap.h5";
  rc = run_app(dir,
               "wait\ntab generation\nwait\nscreenshot " + dir + "/gen_only.png\n" +
                   "tab output\ntemp 0.2\nwait\nscreenshot " + dir + "/preview.png\ntab metrics\nwait\n" +
                   "screenshot " + dir + "/metrics.png\nopen-model\ntab output\nwait\nscreenshot " + dir +
                   "/opened.png\nquit\n",
               cap, "1600x960");
  ASSERT_EQ(rc, 0) << app_log(dir);
  const auto jp = read_json(dir + "/preview.png.json");
  EXPECT_TRUE(jp["capture_only"]);
  EXPECT_EQ(jp["spec_a"], "focal_t0.2");
  EXPECT_EQ(labels_of(jp, "output.prompt_loss.a"), std::vector<std::string>{"n/a \u2014 needs the model"});
  EXPECT_EQ(labels_of(jp, "output.run.a"), std::vector<std::string>{"focal_t0.4"});
  // the layers x heads grid holds the stored run's numbers while t = 0.2 is previewed, and says so
  EXPECT_EQ(labels_of(jp, "overview.run"), std::vector<std::string>{"A: run focal_t0.4 (not propagated)"});
  EXPECT_TRUE(labels_of(jl, "overview.run").empty()) << "the live run's grid is of its own setting";
  EXPECT_EQ(labels_of(jp, "output.run_prompt_loss.a"), stored_loss);
  EXPECT_EQ(labels_of(jp, "output.prompt_loss.b").size(), 1u);                // B is as stored: its own number
  EXPECT_EQ(labels_of(jp, "output.next.a"), labels_of(jl, "output.next.a"));  // the stored run's, as text
  const std::vector<std::string> next = labels_of(jp, "output.next.a");
  ASSERT_FALSE(next.empty());
  for (const std::string& n : next) EXPECT_EQ(n.front(), '\'') << n;
  EXPECT_EQ(labels_of(jp, "controls.live_propagate"), (std::vector<std::string>{"off", "disabled"}));
  // Generate is greyed without the model, live with it.
  EXPECT_EQ(labels_of(read_json(dir + "/gen_only.png.json"), "generation.generate"),
            std::vector<std::string>{"disabled"});
  EXPECT_EQ(labels_of(read_json(dir + "/gen.png.json"), "generation.generate"), std::vector<std::string>{"enabled"});
  const std::vector<std::string> offer = labels_of(jp, "controls.capture_model");
  ASSERT_EQ(offer.size(), 2u);
  EXPECT_EQ(offer[0], "offer");
  const auto jm = read_json(dir + "/metrics.png.json");
  const std::vector<std::string> notes = labels_of(jm, "metrics.notes");
  EXPECT_NE(std::find(notes.begin(), notes.end(), "induction: n/a \u2014 not stored in capture files: needs the model"),
            notes.end());
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(),
                          [](const std::string& n) { return n.find("A columns: run focal_t0.4") == 0; }));
  const auto jo = read_json(dir + "/opened.png.json");
  EXPECT_FALSE(jo["capture_only"]);
  EXPECT_EQ(jo["n_tokens"], jl["n_tokens"]);
  EXPECT_EQ(jo["spec_a"], "focal_t0.2");
  const std::vector<std::string> opened_loss = labels_of(jo, "output.prompt_loss.a");
  ASSERT_EQ(opened_loss.size(), 1u);
  EXPECT_NE(opened_loss, stored_loss);
  EXPECT_TRUE(labels_of(jo, "output.run.a").empty());
  EXPECT_EQ(labels_of(jo, "controls.live_propagate"), (std::vector<std::string>{"on", "enabled"}));
  const Image im = read_png(dir + "/preview.png");
  EXPECT_GT(text_transitions(im, jp["rects"]["details"]), 200);

  // What needs the model fails the script at its line and says what would do it.
  struct Refused {
    std::string script, needle;
  };
  for (const Refused& r : {Refused{"wait\nsweep\nquit\n", "Open its model"},
                           Refused{"wait\ntemp 0.2\nexport " + dir + "/x.h5\nquit\n", "preview"},
                           Refused{"wait\npropagate on\nquit\n", "open-model"}}) {
    SCOPED_TRACE(r.script);
    EXPECT_EQ(run_app(dir, r.script, cap), 1);
    const std::string log = app_log(dir);
    EXPECT_NE(log.find("script.txt:"), std::string::npos) << log;
    EXPECT_NE(log.find(r.needle), std::string::npos) << log;
  }
  EXPECT_FALSE(std::ifstream(dir + "/x.h5").good());

  // A capture from before the top-k text was stored: ids, and a line saying why.
  focal::CaptureFile old = focal::read_capture(cap);
  for (focal::RunCapture& r : old.runs) r.topk_pieces.clear();
  focal::write_capture(old, dir + "/old.h5");
  rc = run_app(dir, "wait\ntab output\nwait\nscreenshot " + dir + "/old.png\nquit\n", dir + "/old.h5");
  ASSERT_EQ(rc, 0) << app_log(dir);
  const std::vector<std::string> ids = labels_of(read_json(dir + "/old.png.json"), "output.next.a");
  ASSERT_FALSE(ids.empty());
  for (const std::string& n : ids) EXPECT_EQ(n.rfind("id ", 0), 0u) << n;

  // A capture of metrics only (focal capture --store metrics): no rows, so the heatmap and the distribution say so
  // (they drew an all-zero matrix under a log colour bar and "H nan nats"), also after a temperature change.
  focal::CaptureFile metrics_only = focal::read_capture(cap);
  for (focal::RunCapture& r : metrics_only.runs) {
    r.probs.clear();
    r.scores.clear();
  }
  focal::write_capture(metrics_only, dir + "/metrics.h5");
  rc = run_app(dir,
               "wait\ntab metrics\nscreenshot " + dir + "/m1.png\ntemp 0.2\nwait\nscreenshot " + dir + "/m2.png\n" +
                   "spec standard a\nwait\nscreenshot " + dir + "/m3.png\nquit\n",
               dir + "/metrics.h5");
  ASSERT_EQ(rc, 0) << app_log(dir);
  // KL / JS of the visible layer come from the capture's stored per-row values (they read "-"): their means over
  // rows 1..T-1, as the full capture's rows give them.
  {
    const focal::Comparison& cmp = metrics_only.comparisons.at(0);
    const auto jm = read_json(dir + "/m1.png.json");
    const std::vector<std::string> kl = labels_of(jm, "metrics.kl");
    const int layer = jm["layer"], T = metrics_only.n_tokens();
    const int li = (int)(std::find(cmp.layers.begin(), cmp.layers.end(), layer) - cmp.layers.begin());
    ASSERT_LT(li, (int)cmp.layers.size());
    ASSERT_EQ(kl.size(), cmp.heads.size()) << jm["labels"];
    for (size_t hc = 0; hc < cmp.heads.size(); ++hc) {
      double want = 0.0;
      for (int q = 1; q < T; ++q) want += cmp.kl[((size_t)li * cmp.heads.size() + hc) * cmp.queries.size() + q];
      want /= T - 1;
      ASSERT_NE(kl[hc], "-") << hc;
      EXPECT_NEAR(std::stod(kl[hc]), want, 6e-5) << "head " << cmp.heads[hc];  // printed to 4 decimals
    }
  }
  // A set to standard without the model: A's columns still hold the stored focal run, and keep its colour (they
  // took standard's blue, and the stored standard run B took another).
  const std::vector<std::string> colours = labels_of(read_json(dir + "/m3.png.json"), "runs.colours");
  ASSERT_EQ(colours.size(), 2u);
  EXPECT_EQ(colours[0].rfind("focal_t0.4=", 0), 0u) << colours[0];
  EXPECT_EQ(colours[1].rfind("standard=", 0), 0u) << colours[1];
  EXPECT_NE(colours[0].substr(colours[0].find('=')), colours[1].substr(colours[1].find('=')));
  for (const char* shot : {"/m1.png.json", "/m2.png.json"}) {
    const auto jm = read_json(dir + shot);
    for (const char* gap : {"heatmap.gap", "distribution.gap"}) {
      const std::vector<std::string> g = labels_of(jm, gap);
      ASSERT_EQ(g.size(), 1u) << shot << " " << gap << "\n" << jm;
      EXPECT_NE(g[0].find("this capture stores metrics only"), std::string::npos) << g[0];
    }
    EXPECT_TRUE(labels_of(jm, "heatmap.legend").empty()) << "a colour bar over rows that do not exist";
  }
}

// Pixels of the generation boundary's crimson (ui.h col_generated, 240 64 128; antialiased edges qualify too) in a
// rectangle.
size_t crimson_pixels(const Image& im, const nlohmann::json& r) {
  size_t n = 0;
  for (int y = (int)r[1]; y < (int)r[1] + (int)r[3] && y < im.h; ++y)
    for (int x = (int)r[0]; x < (int)r[0] + (int)r[2] && x < im.w; ++x) {
      const int R = (int)(im.at(x, y) >> 16) & 255, G = (int)(im.at(x, y) >> 8) & 255, B = (int)im.at(x, y) & 255;
      n += R > 150 && R > G + 90 && B > G + 30 && R > B + 50;
    }
  return n;
}

// Generate, then "Capture prompt + generated" (the script's capture-generation): the session runs prompt + generated
// tokens, and the token strip, the heatmap and the Output tab mark where generation begins, in crimson; the same
// prompt without it marks nothing. The capture exported from it reopens without the model with the boundary.
TEST(AppScreens, GenerationCaptureMarksWhereThePromptEnds) {
  const std::string dir = focal::test::make_temp_dir("app_gen");
  const std::string model = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";
  const std::string pre = "open " + model + "\nprompt Once upon a time, a little fox\nselect 3 1\n";
  int rc = run_app(dir,
                   pre + "tab output\nwait\nscreenshot " + dir + "/plain.png\ngenerate 12\ncapture-generation\n" +
                       "tab output\nwait\nscreenshot " + dir + "/gen.png\nexport " + dir + "/gen.h5\nquit\n",
                   "", "1600x960");
  ASSERT_EQ(rc, 0) << std::ifstream(dir + "/log.txt").rdbuf();
  const auto jp = read_json(dir + "/plain.png.json"), jg = read_json(dir + "/gen.png.json");
  const int P = jp["n_tokens"], T = jg["n_tokens"];
  EXPECT_EQ(T, P + 12);
  EXPECT_EQ(labels_of(jg, "tokens.generated_from"), std::vector<std::string>{std::to_string(P)});
  EXPECT_EQ(labels_of(jg, "heatmap.generated_from"), std::vector<std::string>{std::to_string(P)});
  EXPECT_EQ(labels_of(jg, "output.generated_loss.a").size(), 1u);
  EXPECT_EQ(labels_of(jg, "output.generated_loss.b").size(), 1u);
  EXPECT_TRUE(labels_of(jp, "tokens.generated_from").empty());
  EXPECT_TRUE(labels_of(jp, "output.generated_loss.a").empty());
  const Image plain = read_png(dir + "/plain.png"), gen = read_png(dir + "/gen.png");
  for (const char* panel : {"tokens", "heatmap", "details"}) {
    SCOPED_TRACE(panel);
    EXPECT_EQ(crimson_pixels(plain, jp["rects"][panel]), 0u);
    EXPECT_GT(crimson_pixels(gen, jg["rects"][panel]), 40u);
  }
  // Reopened without its model: the boundary comes from the file.
  rc = run_app(dir, "wait\ntab output\nwait\nscreenshot " + dir + "/reopened.png\nquit\n", dir + "/gen.h5", "1600x960");
  ASSERT_EQ(rc, 0) << std::ifstream(dir + "/log.txt").rdbuf();
  const auto jr = read_json(dir + "/reopened.png.json");
  EXPECT_TRUE(jr["capture_only"]);
  EXPECT_EQ(labels_of(jr, "tokens.generated_from"), std::vector<std::string>{std::to_string(P)});
  EXPECT_EQ(labels_of(jr, "output.generated_loss.a"), labels_of(jg, "output.generated_loss.a"));
  // capture-generation before any generation fails the script at its line.
  EXPECT_EQ(run_app(dir, pre + "capture-generation\nquit\n"), 1);
  std::stringstream log;
  log << std::ifstream(dir + "/log.txt").rdbuf();
  EXPECT_NE(log.str().find("script.txt:4: "), std::string::npos) << log.str();
}

// A model directory's prompt.txt is the prompt when the model is named on the command line without --prompt (the
// bundled recall models carry a retrieval task); --prompt wins over it, and without either the app's short story.
TEST(AppScreens, ModelPromptFile) {
  const std::string dir = focal::test::make_temp_dir("app_prompt");
  const std::string src = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";
  const std::string model = dir + "/model";
  ASSERT_EQ(std::system(("mkdir -p " + model + " && cp -L " + src + "/config.json " + src + "/model.safetensors " +
                         src + "/tokenizer.model " + model + "/")
                            .c_str()),
            0);
  std::ofstream(model + "/prompt.txt") << "Remember these pairs: cat red, dog blue. Now recall: dog\n\n";
  std::ofstream(model + "/view.txt") << "1 2\n";  // the head shown first
  nlohmann::json side;
  auto prompt_of = [&](const std::string& extra) {
    EXPECT_EQ(run_app(dir, "wait\nscreenshot " + dir + "/p.png\nquit\n", extra), 0)
        << std::ifstream(dir + "/log.txt").rdbuf();
    side = read_json(dir + "/p.png.json");
    return std::string(side["prompt"]);
  };
  EXPECT_EQ(prompt_of(model), "Remember these pairs: cat red, dog blue. Now recall: dog");
  EXPECT_EQ((int)side["layer"], 1);
  EXPECT_EQ((int)side["head"], 2);
  EXPECT_EQ(prompt_of(model + " --prompt 'other words'"), "other words");
  // No model named: the bundled recall model with its own prompt and head when it is bundled, else focal-t0.4
  // with the story.
  const std::string recall = std::string(FOCAL_SOURCE_DIR) + "/assets/models/recall-focal-t0.4";
  std::ifstream own(recall + "/prompt.txt");
  if (own) {
    std::string want((std::istreambuf_iterator<char>(own)), std::istreambuf_iterator<char>());
    while (!want.empty() && want.back() == '\n') want.pop_back();
    EXPECT_EQ(prompt_of(""), want);
    int layer = -1, head = -1;
    std::ifstream(recall + "/view.txt") >> layer >> head;
    EXPECT_EQ((int)side["layer"], layer);
    EXPECT_EQ((int)side["head"], head);
  } else {
    EXPECT_EQ(prompt_of("").rfind("The old man took the lamp", 0), 0u);
  }
}

// A random model of SmolLM2-135M's attention shape (30 layers x 9 query heads, 3 KV heads; narrower layers so that
// CI runs it in seconds) at T = 1024, at 1600 x 960 and 1280 x 720. Checks the readouts that misled: round numbered
// colour bars (B - A too), the overview's size and colour bar, the token strip showing the query, the key window,
// a standard-trained model opening against focal t = 0.4 with the loss banner. The screenshots are kept in
// docs/img/ (app-30x9-*.png) after being looked at.
TEST(AppScreens, ThirtyByNineHeadsAtAThousandTokens) {
  const std::string dir = focal::test::make_temp_dir("app_screens_309");
  const std::string tok_path = std::string(FOCAL_SOURCE_DIR) + "/assets/models/tokenizer.model";
  focal::ModelConfig c;
  c.vocab_size = focal::Tokenizer::load(tok_path)->vocab_size();
  c.hidden = 144;
  c.intermediate = 384;
  c.n_layers = 30;
  c.n_heads = 9;
  c.n_kv_heads = 3;
  c.d_head = 16;
  c.max_positions = 1024;
  c.bos_id = 1;
  c.eos_id = 2;
  const std::string model = dir + "/random-smollm2-shape";
  focal::write_model_dir(model, c, focal::random_model_tensors(c, 3), "F32", tok_path);
  // Words until the prompt is exactly the context: 1024 tokens (the tokenizer's own count, BOS included).
  std::string words;
  const char* kWords[] = {"the",   "old",      "man",   "took",  "lamp", "and",   "went",  "down",
                          "to",    "river",    "where", "boats", "lay",  "quiet", "under", "moon",
                          "while", "children", "sang",  "about", "sea",  "stars"};
  const auto tok = focal::Tokenizer::load(tok_path);
  uint32_t r = 1;
  for (int i = 0; tok->encode(words, true).size() < 1024; ++i) {
    r = r * 1103515245u + 12345u;
    words += std::string(i ? " " : "") + kWords[(r >> 16) % 22];
  }
  ASSERT_EQ(tok->encode(words, true).size(), 1024u) << "the last word made more than one token: pick another seed";
  const std::string shots = dir + "/";
  const int rc =
      run_app(dir,
              "open " + model + "\nprompt " + words + "\nwait\nselect 20 4\nwait\nscreenshot " + shots +
                  "a1600.png\nscreenshot overview " + shots + "overview.png\nview diff\nwait\nscreenshot " + shots +
                  "diff.png\nview a\nsink off\nkeys 64\nwait\nscreenshot " + shots +
                  "window.png\nsink on\nkeys 0\nresize 1280 720\nwait\nscreenshot " + shots + "a1280.png\nquit\n",
              "", "1600x960");
  ASSERT_EQ(rc, 0) << std::ifstream(dir + "/log.txt").rdbuf();
  const auto ja = read_json(shots + "a1600.png.json"), jd = read_json(shots + "diff.png.json"),
             jw = read_json(shots + "window.png.json"), js = read_json(shots + "a1280.png.json");
  EXPECT_EQ((int)ja["n_tokens"], 1024);
  EXPECT_EQ(ja["spec_a"], "standard");
  EXPECT_EQ(ja["spec_b"], "focal_t0.4") << "a standard-trained model opens against focal t = 0.4";
  ASSERT_EQ(labels_of(ja, "banner").size(), 1u);
  EXPECT_NE(labels_of(ja, "banner")[0].find("Prompt loss"), std::string::npos);
  expect_layout(ja, 1600, 960);
  expect_layout(js, 1280, 720);
  // The overview: large enough for 270 cells, with a numbered colour bar (it was 100 x 80 px without one).
  const auto& ov = ja["rects"]["overview"];
  EXPECT_GE((double)ov[2], 500);
  EXPECT_GE((double)ov[3], 150);
  EXPECT_TRUE(round_numbers(labels_of(ja, "overview.colorbar"))) << ja["labels"];
  EXPECT_GE((double)js["rects"]["overview"][2], 400);
  // PNG export of a single panel: the overview alone, at its rectangle's size.
  const Image ovp = read_png(shots + "overview.png");
  EXPECT_EQ(ovp.w, (int)std::lround((double)ov[2]));
  EXPECT_EQ(ovp.h, (int)std::lround((double)ov[3]));
  // Round numbered colour bars; B - A has numbers on both sides of 0.
  EXPECT_TRUE(round_numbers(labels_of(ja, "heatmap.colorbar"))) << ja["labels"];
  const auto dl = labels_of(jd, "heatmap.colorbar");
  EXPECT_TRUE(round_numbers(dl)) << jd["labels"];
  ASSERT_GE(dl.size(), 3u);
  EXPECT_LT(std::stod(dl.front()), 0.0);
  EXPECT_GT(std::stod(dl.back()), 0.0);
  EXPECT_TRUE(round_numbers(labels_of(ja, "distribution.y"))) << ja["labels"];
  EXPECT_TRUE(round_numbers(labels_of(ja, "distribution.x"))) << ja["labels"];  // key positions, not thinned tokens
  EXPECT_FALSE(labels_of(ja, "distribution.top").empty());
  // The token strip shows the selected query (the last token) after a 1024-token prompt.
  const auto shown = labels_of(ja, "tokens.shown");
  ASSERT_EQ(shown.size(), 2u);
  EXPECT_LE(std::stoi(shown[0]), 1023);
  EXPECT_GE(std::stoi(shown[1]), 1023);
  const auto shown_small = labels_of(js, "tokens.shown");
  ASSERT_EQ(shown_small.size(), 2u);
  EXPECT_GE(std::stoi(shown_small[1]), 1023);
  // The key window: the last 64 keys, positions 960..1023; the hidden sink keeps the header's true sink mass.
  for (const std::string& s : labels_of(jw, "distribution.x")) {
    EXPECT_GE(std::stoi(s), 960) << s;
    EXPECT_LE(std::stoi(s), 1023) << s;
  }
  EXPECT_EQ(labels_of(jw, "distribution.header"), labels_of(ja, "distribution.header"));
  // A and B both visible in the distribution's bars (B's outline used to hide A's): each run's colour covers pixels
  // below the header, in the 64-key window and over all 1024 keys.
  for (const auto& [shot, j] : {std::pair<std::string, const nlohmann::json*>{"window.png", &jw}, {"a1600.png", &ja}}) {
    const auto [pa, pb] = run_colour_pixels(read_png(shots + shot), (*j)["rects"]["distribution"], 70);
    EXPECT_GE(pa, 50u) << shot << ": run A's bars";
    EXPECT_GE(pb, 50u) << shot << ": run B's bars";
  }
  // At 1280 x 720 the heatmap and the token strip stay usable.
  EXPECT_GE((double)js["rects"]["heatmap"][2], 200);
  EXPECT_GE((double)js["rects"]["tokens"][3], 40);
  // FOCAL_KEEP_SCREENSHOTS=DIR keeps the two window shots (docs/img/app-30x9-*.png come from here).
  if (const char* keep = std::getenv("FOCAL_KEEP_SCREENSHOTS")) {
    std::ofstream(std::string(keep) + "/app-30x9-1600x960.png", std::ios::binary)
        << std::ifstream(shots + "a1600.png", std::ios::binary).rdbuf();
    std::ofstream(std::string(keep) + "/app-30x9-1280x720.png", std::ios::binary)
        << std::ifstream(shots + "a1280.png", std::ios::binary).rdbuf();
  }
}

// The prompt editor wraps (ImGui's multiline input does not): soft breaks, and the prompt is not "edited" by them.
TEST(AppScreens, PromptEditorWrapsLongLines) {
  const std::string dir = focal::test::make_temp_dir("app_screens_wrap");
  const std::string p =
      "The old man took the lamp and went down to the river where the boats lay quiet under the moon while the "
      "children sang about the sea and the stars, and nobody in the village knew that he had kept the key.";
  ASSERT_EQ(run_app(dir, "wait\nprompt " + p + "\nwait\nedit-prompt\nframes 3\nscreenshot " + dir + "/edit.png\nquit\n",
                    "", "900x600"),
            0);
  const auto j = read_json(dir + "/edit.png.json");
  const auto breaks = labels_of(j, "prompt.soft_breaks");
  ASSERT_EQ(breaks.size(), 1u) << j["labels"];
  EXPECT_GE(std::stoi(breaks[0]), 2) << "about 190 characters in a ~700 px editor";
  EXPECT_EQ(labels_of(j, "prompt.edited"), std::vector<std::string>{"no"});
}

TEST(AppScreens, PromptInOtherScriptsIsDrawnNotAsQuestionMarks) {
  // The atlas held Latin, Greek, Cyrillic and symbols only: CJK (a Qwen2 prompt), Hebrew or Armenian drew as "?".
  // Their characters are now merged in from DejaVu Sans or a fallback font (scripts/install-deps.sh installs
  // fonts-droid-fallback) when the text first shows them.
  const std::string dir = focal::test::make_temp_dir("app_screens_scripts");
  const std::string p =
      "\xE6\xB3\xA8\xE6\x84\x8F\xE5\x8A\x9B is attention, \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D, "
      "\xD5\xA2\xD5\xA1\xD6\x80\xD5\xA5\xD6\x82";  // 注意力 … שלום, բարեւ
  ASSERT_EQ(run_app(dir, "wait\nprompt " + p + "\nwait\nframes 3\nscreenshot " + dir + "/s.png\nquit\n"), 0);
  const auto j = read_json(dir + "/s.png.json");
  EXPECT_EQ(j["prompt"], p);
  EXPECT_EQ(j["glyphs_missing"], nlohmann::json::array()) << "code points the app drew as '?'";
  // What it cannot draw is reported: an emoji (past the 16-bit atlas) in the prompt box, as "?" on screen (the
  // sidecar listed nothing: ImGui decodes it as U+FFFD).
  const std::string e = "smile \xF0\x9F\x98\x80 now";
  ASSERT_EQ(run_app(dir, "wait\nprompt " + e + "\nwait\nframes 3\nscreenshot " + dir + "/e.png\nquit\n"), 0);
  EXPECT_EQ(read_json(dir + "/e.png.json")["glyphs_missing"], nlohmann::json::array({0x1F600}));
}

TEST(AppScreens, SettingsPersistBetweenLaunches) {
  const std::string dir = focal::test::make_temp_dir("app_screens4");
  const std::string settings = "--settings " + dir + "/settings.json";
  auto run = [&](const std::string& script) { return run_app(dir, script, "", "900x600", settings); };
  const std::string model_b = std::string(FOCAL_SOURCE_DIR) + "/assets/models/standard";
  const std::string model_a = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";
  ASSERT_EQ(
      run("wait\nopen " + model_a + "\nwait\ntemp 0.3\nlog on\nselect 2 3 5\nopen-b " + model_b + "\nwait\nquit\n"), 0);
  ASSERT_EQ(run("wait\nwait\nscreenshot " + dir + "/again.png\nquit\n"), 0);
  const auto j = read_json(dir + "/again.png.json");
  EXPECT_EQ(j["spec_a"], "focal_t0.3");
  // The selection and model B come back too.
  EXPECT_EQ(j["layer"], 2);
  EXPECT_EQ(j["head"], 3);
  EXPECT_NE(std::string(j["model_b_path"]).find("standard"), std::string::npos) << j;
  std::ifstream f(dir + "/settings.json");
  const auto s = nlohmann::json::parse(f);
  EXPECT_EQ(s["heat_color"], "log");
  EXPECT_NE(std::string(s["model_path"]).find("/focal-t0.4"), std::string::npos) << s["model_path"];
  // Settings written on a machine with a GPU (device cuda, precision fast) opened on one without: auto, said, and
  // the model opens (no model opened at all, on every later start); a choice that failed is not saved.
  if (focal::resolve_device(focal::Device::kAuto) != focal::Device::kCuda) {
    nlohmann::json gpu = s;
    gpu["device"] = "cuda";
    gpu["precision"] = "fast";
    std::ofstream(dir + "/settings.json") << gpu.dump();
    ASSERT_EQ(run("wait\nwait\nscreenshot " + dir + "/nogpu.png\nquit\n"), 0);
    EXPECT_EQ(read_json(dir + "/nogpu.png.json")["spec_a"], "focal_t0.3");
    EXPECT_NE(run_app(dir, "wait\nquit\n", "--device cuda", "900x600", settings), 0);  // asked for: fails as asked
    std::ifstream g(dir + "/settings.json");
    const auto after = nlohmann::json::parse(g);
    EXPECT_EQ(after["device"], "auto");
    EXPECT_EQ(after["precision"], "auto");
  }
}

TEST(AppScreens, ScriptErrorsAndBadFlagsExitNonZero) {
  const std::string dir = focal::test::make_temp_dir("app_screens3");
  EXPECT_EQ(run_app(dir, "wait\nfly away\n"), 2);
  std::stringstream log;
  log << std::ifstream(dir + "/log.txt").rdbuf();
  EXPECT_NE(log.str().find("script.txt:2: unknown command 'fly'"), std::string::npos) << log.str();
  EXPECT_EQ(run_app(dir, "wait\nscreenshot /nonexistent-dir/x.png\nquit\n"), 1);
  EXPECT_EQ(run_app(dir, "quit\n", "--size 3"), 2);
}

// A stats file of the bundled text model (4 layers x 6 heads, unlike the recall model the app starts with: 2 x 4).
std::string make_stats_file(const std::string& dir) {
  std::ofstream(dir + "/c.txt") << "the river ran past the town and the mill\n\nand every night the lamps burned low "
                                   "over the quiet water\n\nkings and queens of the old north\n";
  auto model = focal::Model::load(std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4");
  focal::batch::BatchOptions o;
  o.data_path = dir + "/c.txt";
  o.out_path = dir + "/stats.h5";
  o.runs = {{"standard", focal::TempSpec::standard()}, {"focal_t0.4", focal::TempSpec::focal(0.4f)}};
  o.max_tokens = 24;
  int argc = 0;
  char** argv = nullptr;
  auto comm = focal::batch::make_comm(&argc, &argv);
  focal::batch::run_batch(*model, o, *comm, {});
  return o.out_path;
}

std::string read_text(const std::string& path) {
  std::stringstream ss;
  ss << std::ifstream(path).rdbuf();
  return ss.str();
}

// "name=#RRGGBB" labels as a map.
std::map<std::string, std::string> colours_of(const nlohmann::json& j, const std::string& name) {
  std::map<std::string, std::string> out;
  for (const std::string& l : labels_of(j, name)) out[l.substr(0, l.find('='))] = l.substr(l.find('=') + 1);
  return out;
}

// Issue 38 item 2: a stats file opened over the bundled recall model clears the model panels, selects in its own
// shape, shows a taller pane with a colour bar and a histogram axis over the data, colours runs as everywhere else,
// opens its model on request, and fails a script command that cannot do what it says.
TEST(AppScreens, CorpusTabStandsOnItsOwn) {
  const std::string dir = focal::test::make_temp_dir("app_corpus");
  const std::string stats = make_stats_file(dir);
  const focal::batch::StatsFile sf = focal::batch::read_stats(stats, false);
  ASSERT_EQ(
      run_app(dir,
              "wait\nopen " + stats + "\nwait\nselect 3 5\nwait\nscreenshot " + dir +
                  "/alone.png\ndetails-height 300\nwait\nscreenshot " + dir + "/short.png\ndetails-height 180\nwait\n" +
                  "screenshot " + dir + "/shorter.png\ndetails-height 0\ncorpus-model\nwait\n" +
                  "select 2 4\nwait\nscreenshot " + dir + "/linked.png\nquit\n",
              "", "1600x960"),
      0)
      << read_text(dir + "/log.txt");
  const nlohmann::json ja = read_json(dir + "/alone.png.json");
  // The recall model the app started with is gone from every panel (no "perplexity 7.16e+06" banner over the corpus).
  EXPECT_EQ(ja["model_path"], "");
  EXPECT_EQ(ja["n_tokens"], 0);
  EXPECT_NE(std::string(ja["message"]).find("not the batch's model"), std::string::npos) << ja["message"];
  EXPECT_FALSE(ja["message_is_error"]);
  // Nothing names a layer or head of no model (the token strip's line said "layer 0 head 0, A" beside head 3.5 of the
  // Corpus tab), and Run is not offered with no model to run.
  EXPECT_EQ(labels_of(ja, "tokens.header"),
            std::vector<std::string>{"no model open: open one in the left column, then run a prompt"});
  EXPECT_EQ(labels_of(ja, "prompt.run"), std::vector<std::string>{"disabled (no model)"});
  // select 3 5 is head 3.5 of the 4 x 6 stats file, not a clamp to the recall model's 2 x 4.
  EXPECT_EQ(labels_of(ja, "corpus.selected"), std::vector<std::string>{"3.5"});
  // The documents by head 3.5's mean entropy under B (the file's own per-document means, highest first), each once:
  // of 3, two high and one low (the middle one was listed as both).
  const focal::batch::StatsFile sd = focal::batch::read_stats(stats);  // with the per-document tables
  ASSERT_EQ(sd.n_docs(), 3u);
  std::vector<size_t> order = {0, 1, 2};
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return sd.doc_head_mean(x, 1, 3, 5, focal::kEntropyNats) > sd.doc_head_mean(y, 1, 3, 5, focal::kEntropyNats);
  });
  EXPECT_EQ(labels_of(ja, "corpus.docs"),
            (std::vector<std::string>{"high " + sd.doc_id[order[0]], "high " + sd.doc_id[order[1]],
                                      "low " + sd.doc_id[order[2]]}));
  // The pane is tall on the Corpus tab (it was about 230 px at this size), but leaves the heatmap, grid and
  // distribution 380 px (at 0.45 of the window a 30-layer model's distribution had no room for its chart), and
  // details-height sets it.
  EXPECT_GE((double)ja["rects"]["details"][3], 0.34 * 960);
  const nlohmann::json js = read_json(dir + "/short.png.json");
  EXPECT_NEAR((double)js["rects"]["details"][3], 300, 40);
  expect_layout(js, 1600, 960);
  // A shorter pane scrolls rather than squeeze the matrix: 12 px a head (it drew 4 px rows).
  const nlohmann::json jt = read_json(dir + "/shorter.png.json");
  ASSERT_TRUE(jt["rects"].contains("corpus.matrix")) << jt["rects"];
  EXPECT_GE((double)jt["rects"]["corpus.matrix"][3], 6 * 12.0 - 1) << jt["rects"];
  // The matrix has a numbered colour bar (B - A: symmetric, so a negative and a positive end).
  const std::vector<std::string> bar = labels_of(ja, "corpus.colorbar");
  ASSERT_GE(bar.size(), 2u);
  EXPECT_LT(std::stod(bar.front()), 0.0);
  EXPECT_GT(std::stod(bar.back()), 0.0);
  // The histogram's axis spans head 3.5's data: no tick beyond the last bin with counts (plus one bin), none before
  // the first (minus one). Oracle: the counts read back here.
  const int B = sf.stats.shape.n_bins;
  const std::vector<double>& e = sf.hist_edges[focal::kEntropyNats];
  int first = B, last = -1;
  for (int run = 0; run < 2; ++run)
    for (int b = 0; b < B; ++b)
      if (sf.stats.hist[sf.stats.cell(run, 3, 5, focal::kEntropyNats) * B + b] > 0)
        first = std::min(first, b), last = std::max(last, b);
  ASSERT_GE(last, 0);
  const double lo = e[(size_t)std::max(0, first - 1)], hi = e[(size_t)std::min(B, last + 2)];
  const std::vector<std::string> hx = labels_of(ja, "corpus.hist_x");
  ASSERT_GE(hx.size(), 2u);
  for (const std::string& l : hx) {
    EXPECT_GE(std::stod(l), lo - 1e-6) << l;
    EXPECT_LE(std::stod(l), hi + 1e-6) << l;
  }
  // One colour per run: standard and focal_t0.4 keep their colours in the Corpus tab and the main panels.
  const auto corpus_col = colours_of(ja, "corpus.run_colours");
  ASSERT_EQ(corpus_col.size(), 2u);
  EXPECT_NE(corpus_col.at("standard"), corpus_col.at("focal_t0.4"));
  const nlohmann::json jl = read_json(dir + "/linked.png.json");
  const auto main_col = colours_of(jl, "runs.colours");
  ASSERT_EQ(main_col.count("focal_t0.4"), 1u);
  ASSERT_EQ(main_col.count("standard"), 1u);
  EXPECT_EQ(main_col.at("focal_t0.4"), corpus_col.at("focal_t0.4"));
  EXPECT_EQ(main_col.at("standard"), corpus_col.at("standard"));
  // corpus-model opened the batch's model; one head for both views now.
  EXPECT_EQ(jl["model_path"], sf.provenance.model_path);
  EXPECT_GT((int)jl["n_tokens"], 0);
  // With no prompt left (the recall model's was closed with it), the model runs the head's highest document.
  const std::string prompt = jl["prompt"];
  ASSERT_GE(prompt.size(), 10u);
  EXPECT_NE(read_text(dir + "/c.txt").find(prompt.substr(0, 10)), std::string::npos) << prompt;
  EXPECT_EQ(std::string(ja["prompt"]), "");
  EXPECT_EQ(jl["layer"], 2);
  EXPECT_EQ(jl["head"], 4);
  EXPECT_EQ(labels_of(jl, "corpus.selected"), std::vector<std::string>{"2.4"});
  ASSERT_EQ(labels_of(jl, "tokens.header").size(), 1u);
  EXPECT_NE(labels_of(jl, "tokens.header")[0].find("layer 2 head 4"), std::string::npos);
  EXPECT_EQ(labels_of(jl, "prompt.run"), std::vector<std::string>{"enabled"});
  if (const char* keep = std::getenv("FOCAL_KEEP_SCREENSHOTS"))  // to look at them
    for (const char* f : {"alone.png", "linked.png"})
      std::system(("cp " + dir + "/" + f + " " + keep + "/corpus-" + f).c_str());

  // A selection outside the stats file fails the script at its line; so do commands that cannot do what they say.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"wait\nopen " + stats + "\nwait\nselect 4 0\nquit\n", "script.txt:4: select 4 0: the stats file"},
      {"wait\nopen " + stats + "\nwait\ntemp 0.3\nquit\n", "script.txt:4: 'temp' needs a loaded model"},
      {"wait\ntruncate\nquit\n", "script.txt:2: truncate: there is nothing to truncate"},
      {"wait\nscreenshot heatmp " + dir + "/x.png\nquit\n", "script.txt:2: screenshot 'heatmp' is not a panel"},
      {"wait\ncorpus-model\nquit\n", "script.txt:2: no corpus statistics are open"},
      {"wait\nopen " + stats + "\nwait\nrelevant 2\nquit\n",
       "script.txt:4: relevant 2: needs a loaded model and a prompt"}};
  for (const auto& [script, want] : bad) {
    EXPECT_EQ(run_app(dir, script), 1) << script;
    const std::string log = read_text(dir + "/log.txt");
    EXPECT_NE(log.find(want), std::string::npos) << script << "\n" << log;
  }
  // A count or index that is not a whole number >= 0 is a usage error of the script, found before the window opens:
  // exit 2, as a wrong number of arguments ("frames abc" exited 1, as a failed run does).
  const std::vector<std::pair<std::string, std::string>> usage = {
      {"wait\nselect 1.5 0\nquit\n", "script.txt:2: select: '1.5' is not a whole number >= 0"},
      {"wait\nkeys -3\nquit\n", "script.txt:2: keys: '-3' is not a whole number >= 0"},
      {"frames abc\nquit\n", "script.txt:1: frames: 'abc' is not a whole number >= 0"}};
  for (const auto& [script, want] : usage) {
    EXPECT_EQ(run_app(dir, script), 2) << script;
    const std::string log = read_text(dir + "/log.txt");
    EXPECT_NE(log.find(want), std::string::npos) << script << "\n" << log;
  }
}

// The Sweep tab's lines each have their own colour: with A under learned attention the layer mean took category
// colour 2, which is learned attention's own green, so "head 1.0" and "layer 1 mean" read alike (QA of 2026-12-06).
// corpus-doc reads its document once the batch's model has loaded: a document that cannot be read (the corpus file
// gone) fails the script at its line, exit 1 (it reported the error on the status line and the script went on).
TEST(AppScreens, CorpusDocumentThatCannotBeReadFailsTheScript) {
  const std::string dir = focal::test::make_temp_dir("app_corpus_doc");
  const std::string stats = make_stats_file(dir);
  ASSERT_EQ(std::remove((dir + "/c.txt").c_str()), 0);
  const int rc = run_app(dir, "wait\nopen " + stats + "\nwait\ncorpus-doc 0\nwait\nquit\n", "", "1400x860");
  EXPECT_EQ(rc, 1) << read_text(dir + "/log.txt");
  EXPECT_NE(read_text(dir + "/log.txt").find("script.txt:4"), std::string::npos) << read_text(dir + "/log.txt");
  EXPECT_NE(read_text(dir + "/log.txt").find("c.txt"), std::string::npos) << read_text(dir + "/log.txt");
}

TEST(AppScreens, SweepLinesKeepTheirColoursUnderLearnedAttention) {
  const std::string dir = focal::test::make_temp_dir("app_sweep_learned");
  ASSERT_EQ(run_app(dir, "wait\ntab sweep\nsweep\nwait\nscreenshot " + dir + "/sweep.png\nquit\n",
                    std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-learned"),
            0)
      << read_text(dir + "/log.txt");
  const nlohmann::json j = read_json(dir + "/sweep.png.json");
  const auto runs = colours_of(j, "runs.colours");
  const auto sweep = colours_of(j, "sweep.colours");
  ASSERT_EQ(runs.size(), 2u) << j["labels"];
  ASSERT_EQ(sweep.size(), 3u) << j["labels"];
  std::set<std::string> run_cols;
  for (const auto& [name, c] : runs) run_cols.insert(c);
  const std::string a = labels_of(j, "runs.colours").at(0);  // A first: "LABEL=#RRGGBB"
  ASSERT_NE(a.find("learned"), std::string::npos) << a;
  EXPECT_EQ(sweep.at("head"), a.substr(a.find('=') + 1));  // the sweep varies A's setting
  EXPECT_NE(sweep.at("head"), sweep.at("layer_mean"));
  EXPECT_EQ(run_cols.count(sweep.at("layer_mean")), 0u) << "the layer mean shares a run's colour";
}

// The t field names a temperature below 0.01 in significant digits: t = 1e-6, the smallest a spec takes, read
// 0.000 (QA of 2026-12-06); others keep three decimals.
// The heatmap's colour: auto by default (on the recall prompt the app opens with, log for a diffuse head of the
// standard model, layer 0 head 1; linear for the sharper layer 1 head 2: the rule itself is HeatPixels.AutoColourIsLogWhenMostRowsAreFaint), and the legend names
// the scale whichever way it was chosen.
TEST(AppScreens, HeatmapColourIsAutomaticAndTheLegendSaysWhich) {
  const std::string dir = focal::test::make_temp_dir("app_heat_colour");
  ASSERT_EQ(run_app(dir, "wait\nopen " + std::string(FOCAL_SOURCE_DIR) +
                             "/assets/models/standard\nwait\nselect 0 1\nwait\nscreenshot " + dir +
                             "/diffuse.png\nscreenshot heatmap " + dir + "/panel.png\nselect 1 2\nwait\nscreenshot " +
                             dir + "/sharp.png\nlog on\nwait\nscreenshot " + dir +
                             "/log.png\nselect 0 1\nlog off\nwait\nscreenshot " + dir +
                             "/linear.png\nview diff\nlog auto\nwait\nscreenshot " + dir + "/diff.png\nquit\n"),
            0)
      << read_text(dir + "/log.txt");
  const std::pair<const char*, const char*> want[] = {{"diffuse", "p (log, auto)"},
                                                      {"sharp", "p (linear, auto)"},
                                                      {"log", "p (log)"},
                                                      {"linear", "p"},
                                                      {"diff", "B - A (blue: B lower)"}};
  for (const auto& [name, legend] : want) {
    const nlohmann::json j = read_json(dir + "/" + name + ".png.json");
    EXPECT_EQ(labels_of(j, "heatmap.legend"), std::vector<std::string>{legend}) << name;
  }
  // `screenshot heatmap` takes the whole panel, its legend and colour bar included (it took the matrix alone).
  const nlohmann::json jp = read_json(dir + "/diffuse.png.json");  // the same frame's panels (a panel shot has none)
  const Image panel = read_png(dir + "/panel.png");
  EXPECT_EQ(panel.w, (int)std::lround((double)jp["rects"]["heatmap.panel"][2]));
  EXPECT_EQ(panel.h, (int)std::lround((double)jp["rects"]["heatmap.panel"][3]));
  EXPECT_GT(panel.h, (double)jp["rects"]["heatmap"][3] + 40);
}

// A figure exported from the app draws what the view shows: the heatmap of the run viewed (it drew A whatever the
// view; B - A as both side by side), the distribution over the panel's key window; a kind the app cannot make from
// its session is refused naming the kinds it can.
TEST(AppScreens, FiguresFollowTheView) {
  const std::string dir = focal::test::make_temp_dir("app_fig_view");
  ASSERT_EQ(run_app(dir, "wait\nopen " + std::string(FOCAL_SOURCE_DIR) +
                             "/assets/models/focal-t0.4\nwait\nprompt The old man took the lamp and went down to the "
                             "river.\nwait\nselect 1 2\nview b\nwait\nfigure heatmap " +
                             dir + "/b.svg\nview a\nwait\nfigure heatmap " + dir +
                             "/a.svg\nview diff\nwait\nfigure heatmap " + dir + "/d.svg\nkeys 5\nfigure distribution " +
                             dir + "/k.svg\nquit\n"),
            0)
      << read_text(dir + "/log.txt");
  EXPECT_NE(read_text(dir + "/b.svg").find(">standard: layer 1, head 2"), std::string::npos);
  EXPECT_NE(read_text(dir + "/a.svg").find(">focal_t0.4: layer 1, head 2"), std::string::npos);
  const std::string d = read_text(dir + "/d.svg");
  EXPECT_NE(d.find(">focal_t0.4<"), std::string::npos);
  EXPECT_NE(d.find(">standard<"), std::string::npos);
  // The last 5 keys of the query ("down to the river ."), not every key of the prompt.
  const std::string k = read_text(dir + "/k.svg");
  EXPECT_NE(k.find(">down<"), std::string::npos);
  EXPECT_NE(k.find(">river<"), std::string::npos);
  EXPECT_EQ(k.find(">lamp<"), std::string::npos) << "a key before the window is drawn";
  ASSERT_NE(run_app(dir, "wait\nfigure sweep " + dir + "/s.svg\nquit\n"), 0);
  EXPECT_NE(read_text(dir + "/log.txt").find("the app makes distribution, heatmap, grid, entropy, temps figures"),
            std::string::npos)
      << read_text(dir + "/log.txt");
}

TEST(AppScreens, TemperatureFieldShowsSmallTemperatures) {
  const std::string dir = focal::test::make_temp_dir("app_small_t");
  ASSERT_EQ(run_app(dir, "wait\ntemp 0.000001\nwait\nscreenshot " + dir + "/t.png\nquit\n",
                    std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4"),
            0)
      << read_text(dir + "/log.txt");
  const nlohmann::json j = read_json(dir + "/t.png.json");
  EXPECT_EQ(labels_of(j, "controls.t.A"), std::vector<std::string>{"1e-6"}) << j["labels"];  // as the spec spells it
  EXPECT_EQ(labels_of(j, "controls.t.B"), std::vector<std::string>{"1.000"}) << j["labels"];
}

// A temperature file the app runs, shaped like the model: t of head h of layer l from `t_of`, losses 3.21875 -> 3.0625.
focal::TempFile make_temp_file(const focal::Model& m, const std::string& model_path,
                               const std::function<float(int, int)>& t_of) {
  const focal::ModelConfig& c = m.config();
  focal::TempFile f = temp_file_for(m, model_path, focal::CalibGranularity::kHead);
  f.data_path = "/data/lamps.txt";
  f.n_train_tokens = 4096;
  f.n_val_tokens = 512;
  f.steps = 40;
  f.batch = 2;
  f.seq_len = 64;
  f.val_loss_init = 3.21875;
  f.val_loss = 3.0625;
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_heads; ++h) f.focal_temp.push_back(t_of(l, h));
  return f;
}

// Issue 34 item 3: the Temps tab shows the temperature file A runs — its layer x head shape, the calibrator's
// held-out losses, blue cells where t < 1 and red where t > 1 — and each head's t against its entropy only while B
// runs standard attention (else it says what to set); its figure is the one `focal figure temps` draws from the
// app's capture; with no file it says how to make one. A 2 x 2 model prints t in its cells.
TEST(AppScreens, TempsTabShowsTheCalibratedFile) {
  const std::string dir = focal::test::make_temp_dir("app_temps");
  const std::string model = std::string(FOCAL_SOURCE_DIR) + "/assets/models/standard";  // 4 layers x 6 heads
  auto m = focal::Model::load(model, focal::Device::kCpu);
  const focal::TempFile f = make_temp_file(*m, model, [](int l, int h) { return (l + h) % 2 ? 0.5f : 1.6f; });
  const std::string temps = dir + "/lamps-t.json";
  focal::write_temp_file(f, temps);
  const int rc = run_app(dir,
                         "open " + model + "\nprompt The keeper lit the lamp by the door and walked to the river.\n" +
                             "spec calibrated:" + temps + " a\nspec standard b\ntab temps\nwait\nscreenshot " + dir +
                             "/with_b.png\nresize 1280 720\nframes 3\nscreenshot " + dir +
                             "/short.png\nresize 1400 900\nframes 3\n" + "figure temps " + dir + "/fig.svg\nexport " +
                             dir + "/cap.h5\n" + "spec focal:0.4 b\nwait\nscreenshot " + dir +
                             "/focal_b.png\nspec standard a\nwait\n" + "screenshot " + dir + "/none.png\nquit\n",
                         "", "1400x900");
  ASSERT_EQ(rc, 0) << read_text(dir + "/log.txt");
  const nlohmann::json j = read_json(dir + "/with_b.png.json");
  EXPECT_EQ(j["spec_a"], "calibrated:lamps-t");
  EXPECT_EQ(labels_of(j, "temps.side"), std::vector<std::string>{"A"});
  EXPECT_EQ(labels_of(j, "temps.shape"), (std::vector<std::string>{"4", "6"}));
  char before[16], after[16];
  std::snprintf(before, sizeof before, "%.3f", f.val_loss_init);
  std::snprintf(after, sizeof after, "%.3f", f.val_loss);
  EXPECT_EQ(labels_of(j, "temps.loss"), (std::vector<std::string>{before, after}));
  EXPECT_NE(labels_of(j, "temps.provenance").at(0).find("40 steps of 2 x 64 tokens"), std::string::npos) << j["labels"];
  EXPECT_NE(labels_of(j, "temps.provenance").at(0).find("lamps.txt"), std::string::npos) << j["labels"];
  const std::vector<std::string> bar = labels_of(j, "temps.colorbar");
  EXPECT_NE(std::find(bar.begin(), bar.end(), "1"), bar.end()) << j["labels"];
  // B is standard on the same model: one dot per head, from B's run.
  EXPECT_EQ(labels_of(j, "temps.entropy"), (std::vector<std::string>{"B", "standard"}));
  EXPECT_EQ(labels_of(j, "temps.scatter.points"), std::vector<std::string>{"24"});
  // The matrix: t = 0.5 cells blue, t = 1.6 cells red, half of the cells each.
  ASSERT_TRUE(j["rects"].contains("temps.matrix")) << j["rects"];
  const auto& mr = j["rects"]["temps.matrix"];
  EXPECT_GE((double)mr[2], 4 * 20.0);
  const Image shot = read_png(dir + "/with_b.png");
  size_t blue = 0, red = 0, n = 0;
  for (int y = (int)mr[1]; y < (int)mr[1] + (int)mr[3]; ++y)
    for (int x = (int)mr[0]; x < (int)mr[0] + (int)mr[2]; ++x, ++n) {
      const int R = (int)(shot.at(x, y) >> 16) & 255, B = (int)shot.at(x, y) & 255;
      blue += B > R + 60;
      red += R > B + 60;
    }
  EXPECT_GT(blue, n / 4);
  EXPECT_GT(red, n / 4);
  // At 1280 x 720 the pane is short: the matrix keeps 14 px a head (it drew 4 px rows) and the tab scrolls.
  const nlohmann::json js = read_json(dir + "/short.png.json");
  ASSERT_TRUE(js["rects"].contains("temps.matrix")) << js["rects"];
  EXPECT_GE((double)js["rects"]["temps.matrix"][3], 6 * 14.0 - 1) << js["rects"];
  // The app's figure is `focal figure temps FILE CAPTURE` of the app's own capture, byte for byte.
  const std::string cli_svg = focal::figures::render_figure_files(
      "temps", {temps, dir + "/cap.h5"}, focal::figures::FigureOptions(), focal::figures::Format::kSvg);
  EXPECT_EQ(read_text(dir + "/fig.svg"), cli_svg);
  EXPECT_NE(cli_svg.find("Entropy under standard"), std::string::npos);
  // B under focal attention: no entropy under the standard label, and what to set instead.
  const nlohmann::json jf = read_json(dir + "/focal_b.png.json");
  EXPECT_TRUE(labels_of(jf, "temps.entropy").empty()) << jf["labels"];
  EXPECT_TRUE(labels_of(jf, "temps.scatter.points").empty()) << jf["labels"];
  ASSERT_EQ(labels_of(jf, "temps.entropy_gap").size(), 1u) << jf["labels"];
  EXPECT_NE(labels_of(jf, "temps.entropy_gap")[0].find("set B to standard"), std::string::npos) << jf["labels"];
  EXPECT_EQ(labels_of(jf, "temps.loss"), (std::vector<std::string>{before, after}));
  // Neither side runs a file: how to make one.
  const nlohmann::json jn = read_json(dir + "/none.png.json");
  EXPECT_TRUE(labels_of(jn, "temps.shape").empty()) << jn["labels"];
  ASSERT_EQ(labels_of(jn, "temps.none").size(), 1u) << jn["labels"];
  EXPECT_NE(labels_of(jn, "temps.none")[0].find("focal calibrate MODEL --data FILE -o t.json"), std::string::npos);

  // A 2 x 2 model: cells large enough to print each t.
  const std::string tok_path = std::string(FOCAL_SOURCE_DIR) + "/assets/models/tokenizer.model";
  focal::ModelConfig c;
  c.vocab_size = focal::Tokenizer::load(tok_path)->vocab_size();
  c.hidden = 64;
  c.intermediate = 128;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.d_head = 32;
  c.max_positions = 256;
  c.bos_id = 1;
  c.eos_id = 2;
  const std::string tiny = dir + "/tiny-2x2";
  focal::write_model_dir(tiny, c, focal::random_model_tensors(c, 5), "F32", tok_path);
  auto mt = focal::Model::load(tiny, focal::Device::kCpu);
  const std::string tiny_temps = dir + "/tiny-t.json";
  focal::write_temp_file(
      make_temp_file(*mt, tiny, [](int l, int h) { return l == h ? 0.5f : (l == 0 ? 1.04f : 2.0f); }), tiny_temps);
  ASSERT_EQ(run_app(dir,
                    "open " + tiny + "\nprompt the old man took the lamp\nspec calibrated:" + tiny_temps +
                        " b\nspec standard a\ntab temps\nwait\nscreenshot " + dir + "/tiny.png\nquit\n",
                    "", "1600x1000"),
            0)
      << read_text(dir + "/log.txt");
  const nlohmann::json jt = read_json(dir + "/tiny.png.json");
  EXPECT_EQ(labels_of(jt, "temps.side"), std::vector<std::string>{"B"});
  EXPECT_EQ(labels_of(jt, "temps.entropy"), (std::vector<std::string>{"A", "standard"}));
  // Two decimals: t = 1.04 printed "1" with two significant digits, as if exactly standard.
  EXPECT_EQ(labels_of(jt, "temps.cells"), (std::vector<std::string>{"0.50", "1.04", "2.00", "0.50"}));
  if (const char* keep = std::getenv("FOCAL_KEEP_SCREENSHOTS"))  // to look at them
    for (const char* shot_name : {"with_b.png", "focal_b.png", "none.png", "tiny.png"})
      std::system(("cp " + dir + "/" + shot_name + " " + keep + "/temps-" + shot_name).c_str());
}

}  // namespace
