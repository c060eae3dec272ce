// Scripted runs of the real focalscope binary under Xvfb + Mesa (xvfb-run): load, set t, select a head,
// screenshot, quit. Checks on the screenshots: not blank, text rendered, the heatmap region changes when t changes;
// a tiny window, a bad path and a capture opened without its model still render. The app writes a JSON sidecar per
// screenshot with its panel rectangles and state.
#include <cairo.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

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
int run_app(const std::string& dir, const std::string& script, const std::string& extra = "") {
  const std::string sp = dir + "/script.txt";
  std::ofstream(sp) << script;
  const std::string cmd = "xvfb-run -a -s '-screen 0 1920x1200x24' " + kApp + " --no-settings --size 1400x860 " +
                          extra + " --script " + sp + " > " + dir + "/log.txt 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// Pixels in rect r = [x, y, w, h] that differ between two images.
double changed_fraction(const Image& a, const Image& b, const nlohmann::json& r) {
  size_t n = 0, diff = 0;
  for (int y = (int)r[1]; y < (int)r[1] + (int)r[3] && y < a.h; ++y)
    for (int x = (int)r[0]; x < (int)r[0] + (int)r[2] && x < a.w; ++x, ++n) diff += a.at(x, y) != b.at(x, y);
  return n ? (double)diff / n : 0.0;
}

// Text looks like many short bright runs on a dark background: count dark->bright transitions along rows.
int text_transitions(const Image& im, const nlohmann::json& r) {
  int t = 0;
  for (int y = (int)r[1]; y < (int)r[1] + (int)r[3] && y < im.h; ++y)
    for (int x = (int)r[0] + 1; x < (int)r[0] + (int)r[2] && x < im.w; ++x)
      t += lum(im.at(x - 1, y)) < 80 && lum(im.at(x, y)) > 150;
  return t;
}

TEST(AppScreens, LoadSetTemperatureSelectHeadScreenshot) {
  const std::string dir = focal::test::make_temp_dir("app_screens");
  const int rc = run_app(dir, "wait\nselect 3 1\nwait\nscreenshot " + dir +
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
                                  dir + "/log.pdf\nquit\n");
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

TEST(AppScreens, SettingsPersistBetweenLaunches) {
  const std::string dir = focal::test::make_temp_dir("app_screens4");
  const std::string settings = "--settings " + dir + "/settings.json";
  // run_app passes --no-settings; settings runs need their own command line.
  auto run = [&](const std::string& script) {
    std::ofstream(dir + "/s.txt") << script;
    const std::string cmd = "xvfb-run -a " + kApp + " " + settings + " --size 900x600 --script " + dir + "/s.txt > " +
                            dir + "/log.txt 2>&1";
    return std::system(cmd.c_str());
  };
  ASSERT_EQ(run("wait\ntemp 0.3\nlog on\nwait\nquit\n"), 0);
  ASSERT_EQ(run("wait\nscreenshot " + dir + "/again.png\nquit\n"), 0);
  const auto j = read_json(dir + "/again.png.json");
  EXPECT_EQ(j["spec_a"], "focal_t0.3");
  std::ifstream f(dir + "/settings.json");
  const auto s = nlohmann::json::parse(f);
  EXPECT_TRUE(s["log_color"]);
  EXPECT_NE(std::string(s["model_path"]).find("focal-t0.4"), std::string::npos);
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

}  // namespace
