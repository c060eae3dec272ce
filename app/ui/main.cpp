// focalscope: the desktop app. GLFW window + OpenGL 3 + Dear ImGui 1.86; the panels (panel_*.cpp) over AppState
// (app/core). Starts with the bundled focal model and a default prompt; scripted runs (--script) drive the real app
// for tests and screenshots.
#include <csignal>
#include <GL/gl.h>
#include <GLFW/glfw3.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <algorithm>
#include <cfloat>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <string>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "bench.h"
#include "focal/atomic_file.h"
#include "focal/error.h"
#include "focal_figures/colormap.h"
#include "script.h"
#include "settings.h"
#include "ui.h"

namespace focalscope {
namespace {

const char* kDefaultPrompt =
    "The old man took the lamp and went down to the river. When the boy saw the lamp on the water, he called to "
    "the old man, and the old man answered him from the river.";

const char* kHelp =
    "focalscope - inspect LLaMA-style models under focal attention: drag the temperature, watch every head.\n"
    "\n"
    "usage: focalscope [MODEL_OR_CAPTURE] [options]\n"
    "  MODEL_OR_CAPTURE      a Hugging Face model directory, a .gguf file or a capture .h5\n"
    "                        (default: the last one opened, else the bundled assets/models/recall-focal-t0.4, else\n"
    "                        focal-t0.4; a model directory's view.txt, \"LAYER HEAD\", is the head shown first)\n"
    "  --prompt TEXT         prompt to run (default: the model's prompt.txt if the model is named here, else the\n"
    "                        last one, else the model's prompt.txt, else a short story)\n"
    "  --temp T              focal temperature of run A (default: the model's own setting)\n"
    "  --device D            auto | cpu | cuda: where models run (default: the last choice, else auto)\n"
    "  --weights W           native | fp32: quantized / 16-bit weights kept as stored, or widened to fp32\n"
    "                        (default: the last choice, else native)\n"
    "  --precision P         auto | exact | fast: how the GPU computes (fast: 16-bit GEMMs and attention on\n"
    "                        tensor cores; auto: fast for 16-bit and quantized weights; the CPU is always exact)\n"
    "                        (default: the last choice, else auto)\n"
    "  --size WxH            window size in pixels (default 1600x960, or the last size)\n"
    "  --script FILE         run a command file, one command per frame (open, prompt, temp, select, view, wait,\n"
    "                        screenshot PATH.png, export PATH.h5, quit, ...: docs/app.md); a script that cannot be\n"
    "                        read or parsed exits 2, a command that fails while running exits 1\n"
    "  --settings FILE       settings file (default $XDG_CONFIG_HOME/focalscope/settings.json)\n"
    "  --no-settings         neither read nor write settings\n"
    "  --bench OUT.json      measure preview / propagate latency, fps while a job runs, and with\n"
    "  --bench-long-model D  a long prompt on model D: heatmap zoom / pan, query moves, idle frames, a head\n"
    "                        switch (D a capture .h5: its tokens and stored head, no runs); writes OUT.json\n"
    "  --bench-long-tokens N its length (default 4096; a rotary model runs past its context)\n"
    "  --help                this text\n"
    "\n"
    "Exit codes: 0 ok, 1 runtime or script error, 2 bad command line.\n";

struct Args {
  std::string source, prompt, script, settings_path, bench, bench_long, device, weights, precision;
  float temp = -1.0f;
  int w = 0, h = 0;
  int bench_long_tokens = 4096;
  bool no_settings = false;
};

int parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto need = [&](const char* opt) -> std::string {
      if (i + 1 >= argc) throw focal::Error(std::string(opt) + " needs a value (see focalscope --help)");
      return argv[++i];
    };
    if (s == "--help" || s == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (s == "--prompt")
      a.prompt = need("--prompt");
    else if (s == "--script")
      a.script = need("--script");
    else if (s == "--settings")
      a.settings_path = need("--settings");
    else if (s == "--no-settings")
      a.no_settings = true;
    else if (s == "--bench")
      a.bench = need("--bench");
    else if (s == "--device") {
      a.device = need("--device");
      try {
        focal::parse_device(a.device);
      } catch (const focal::Error& e) {
        throw focal::Error("--device: " + std::string(e.what()));  // the app's own command-line option
      }
    } else if (s == "--weights") {
      a.weights = need("--weights");
      try {
        focal::parse_weights_mode(a.weights);
      } catch (const focal::Error& e) { throw focal::Error("--weights: " + std::string(e.what())); }
    } else if (s == "--precision") {
      a.precision = need("--precision");
      try {
        focal::parse_precision(a.precision);
      } catch (const focal::Error& e) { throw focal::Error("--precision: " + std::string(e.what())); }
    } else if (s == "--bench-long-model") {
      a.bench_long = need("--bench-long-model");
    } else if (s == "--bench-long-tokens") {
      const std::string v = need("--bench-long-tokens");
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 16 || n > (1 << 20))
        throw focal::Error("--bench-long-tokens: '" + v + "' is not a token count (16 .. 1048576)");
      a.bench_long_tokens = (int)n;
    } else if (s == "--temp") {
      const std::string v = need("--temp");
      char* end = nullptr;
      a.temp = std::strtof(v.c_str(), &end);
      if (*end || !(a.temp > 0.0f)) throw focal::Error("--temp must be a number > 0 (got '" + v + "')");
    } else if (s == "--size") {
      const std::string v = need("--size");
      if (std::sscanf(v.c_str(), "%dx%d", &a.w, &a.h) != 2 || a.w < 200 || a.h < 150)
        throw focal::Error("--size must be WxH with W >= 200 and H >= 150 (got '" + v + "')");
    } else if (!s.empty() && s[0] == '-') {
      throw focal::Error("unknown option '" + s + "' (see focalscope --help)");
    } else if (a.source.empty()) {
      a.source = s;
    } else {
      throw focal::Error("give one model or capture, not '" + a.source + "' and '" + s + "'");
    }
  }
  return -1;
}

bool exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}

// A model directory's own first view: DIR/view.txt holds "LAYER HEAD", the head selected when the model opens
// without a remembered selection (the bundled recall models name the head that retrieves). {-1, -1} when there is
// none or it does not parse.
std::pair<int, int> model_view(const std::string& source) {
  std::ifstream f(source + "/view.txt");
  int layer = -1, head = -1;
  if (!(f >> layer >> head) || layer < 0 || head < 0) return {-1, -1};
  return {layer, head};
}

// A model directory's own example prompt: DIR/prompt.txt (the bundled recall models carry a retrieval task), its
// trailing newlines dropped. Empty when there is none.
std::string model_prompt(const std::string& source) {
  std::ifstream f(source + "/prompt.txt");
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  std::string p = ss.str();
  while (!p.empty() && (p.back() == '\n' || p.back() == '\r')) p.pop_back();
  return p;
}

void setup_style_and_fonts(Ui& ui) {
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;
  ImGui::StyleColorsDark();
  ImGuiStyle& s = ImGui::GetStyle();
  s.WindowRounding = 0.0f;
  s.FrameRounding = 3.0f;
  s.GrabRounding = 3.0f;
  s.TabRounding = 3.0f;
  s.WindowBorderSize = 1.0f;
  s.WindowPadding = ImVec2(8, 6);
  s.ItemSpacing = ImVec2(6, 4);
  ImVec4* c = s.Colors;
  c[ImGuiCol_WindowBg] = ImVec4(0.105f, 0.11f, 0.13f, 1.0f);
  c[ImGuiCol_ChildBg] = ImVec4(0.105f, 0.11f, 0.13f, 1.0f);
  c[ImGuiCol_TitleBg] = ImVec4(0.14f, 0.15f, 0.18f, 1.0f);
  c[ImGuiCol_TitleBgActive] = ImVec4(0.17f, 0.19f, 0.24f, 1.0f);
  c[ImGuiCol_FrameBg] = ImVec4(0.17f, 0.18f, 0.22f, 1.0f);
  c[ImGuiCol_Button] = ImVec4(0.20f, 0.30f, 0.45f, 1.0f);
  c[ImGuiCol_ButtonHovered] = ImVec4(0.26f, 0.40f, 0.60f, 1.0f);
  c[ImGuiCol_SliderGrab] = ImVec4(0.35f, 0.62f, 0.95f, 1.0f);
  c[ImGuiCol_Header] = ImVec4(0.20f, 0.30f, 0.45f, 0.8f);
  c[ImGuiCol_Tab] = ImVec4(0.15f, 0.17f, 0.21f, 1.0f);
  c[ImGuiCol_TabActive] = ImVec4(0.22f, 0.33f, 0.50f, 1.0f);
  c[ImGuiCol_TabHovered] = ImVec4(0.26f, 0.40f, 0.60f, 1.0f);
  c[ImGuiCol_PlotHistogram] = ImVec4(0.0f, 0.45f, 0.70f, 1.0f);

  build_fonts(ui);  // fonts.cpp
}

// Panel rectangles for a window of w x h pixels.
void layout_and_draw(Ui& ui, float w, float h, float fps) {
  AppState& st = ui.st;
  const float status_h = 32.0f;  // the smallest window ImGui draws here: the status bar ends at the window edge
  // At 1280 x 720 the left column, the token strip and the details table each give up a little so that the heatmap
  // and the overview stay usable.
  const float left = std::clamp(w * 0.2f, 250.0f, 360.0f);
  float top = std::clamp(h * 0.22f, 120.0f, 220.0f);
  // A post-hoc banner that wraps (panel_prompt.cpp) takes its second line from the details pane below, not from the
  // token strip (at 1280 x 720 the strip kept one row of tokens) nor from the heatmap.
  float banner_extra = 0.0f;
  if (const std::string banner = st.posthoc_banner(); !banner.empty()) {
    const float text_w = std::max(80.0f, w - left) - 2.0f * ImGui::GetStyle().WindowPadding.x;
    if (ImGui::CalcTextSize(banner.c_str()).x > text_w) banner_extra = ImGui::GetTextLineHeightWithSpacing();
  }
  top += banner_extra;
  // The details pane: its height by the window, taller while the Sweep tab (two plots: at 1280 x 720 they were
  // about 40 px tall), the Corpus or Temps tab (a layer x head matrix beside a plot) shows, until its splitter is
  // dragged.
  const bool tall_tab = ui.details_tab == 2 || ui.details_tab == 5 || ui.details_tab == 6;
  const float normal_bottom = std::clamp(h * 0.24f, 110.0f, 280.0f);
  // ... but never so tall that the heatmap, grid and distribution above it drop under 380 px (at 1280 x 720 the grid
  // was 20 px tall and the distribution empty; at 300 px a 30-layer model's grid left the distribution its header
  // and no chart): in a short window the tall tabs take what is left, at least the normal height
  // With nothing to show above (a stats file opened alone: "no run yet" in each panel) the tab takes the room the
  // panels would (the Corpus tab's matrix was 25 px tall at 1280 x 720 under three empty panels).
  // A model of few layers needs less above than 380 px (its grid is short): at 1280 x 720 the Temps tab's matrix of
  // a 4-layer model was 20 px tall while its grid above used 70 px of 160.
  const focal::ModelConfig* shape = st.config();
  const float grid_need = shape ? 95.0f + 12.0f * (float)std::min(shape->n_layers, shape->n_heads) : 285.0f;
  const float above_min = st.slots[0].run ? std::clamp(grid_need + 175.0f, 300.0f, 380.0f) : 120.0f;
  const float auto_bottom =
      tall_tab ? std::max(normal_bottom, std::min(std::clamp(h * (st.slots[0].run ? 0.45f : 0.7f), 110.0f, 900.0f),
                                                  h - top - status_h - above_min))
               : normal_bottom;
  const float max_bottom = std::max(110.0f, h - top - status_h - 60.0f);
  const float bottom = std::clamp(ui.details_h > 0.0f ? ui.details_h : auto_bottom - banner_extra, 80.0f, max_bottom);
  const float mid = std::max(60.0f, h - top - bottom - status_h);
  set_run_colours(st);  // one colour per run: the main panels' A and B
  ui.labels["runs.colours"] = {run_colour_label(st, 0) + "=" + col_hex(col_run(0)),
                               run_colour_label(st, 1) + "=" + col_hex(col_run(1))};
  const float right_w = std::max(80.0f, w - left);
  // (wide enough for its one line of text while it has no run: squeezed beside a tall tab it wrapped a word a line)
  const float heat_w =
      std::max(st.slots[0].run ? 60.0f : std::min(260.0f, right_w * 0.4f), std::min(mid + 30.0f, right_w * 0.48f));
  // The overview's share of the column: more for many layers; drag the splitter under it to change it.
  const focal::ModelConfig* cfg = st.config();
  if (ui.overview_frac <= 0.0f) ui.overview_frac = cfg && cfg->n_layers > 12 ? 0.5f : 0.42f;
  ui.overview_frac = std::clamp(ui.overview_frac, 0.15f, 0.85f);
  // ... at least what its grid needs at 12 px a row (rows: the smaller of layers and heads, as it lays them out) when
  // the column is short (a 4-layer grid drew 4 px rows at 1280 x 720 with the Temps tab open), up to 60 % of it
  const float grid_min = cfg ? 95.0f + 12.0f * (float)std::min(cfg->n_layers, cfg->n_heads) : 0.0f;
  const float ov_h = std::max(mid * ui.overview_frac, std::min(grid_min, mid * 0.6f));
  draw_controls(ui, ImVec4(0, 0, left, h - status_h));
  draw_prompt(ui, ImVec4(left, 0, right_w, top));
  draw_heatmap(ui, ImVec4(left, top, heat_w, mid));
  draw_overview(ui, ImVec4(left + heat_w, top, right_w - heat_w, ov_h));
  draw_distribution(ui, ImVec4(left + heat_w, top + ov_h, right_w - heat_w, mid - ov_h));
  draw_bottom(ui, ImVec4(left, top + mid, right_w, bottom));
  // Splitter between the overview and the distribution: drag to resize.
  ImGui::SetNextWindowPos(ImVec2(left + heat_w + 20, top + ov_h - 3));
  ImGui::SetNextWindowSize(ImVec2(std::max(20.0f, right_w - heat_w - 40), 6));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(0, 0));
  ImGui::PushStyleVar(ImGuiStyleVar_WindowMinSize, ImVec2(1, 1));
  if (ImGui::Begin("##split", nullptr,
                   ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoBackground | ImGuiWindowFlags_NoSavedSettings |
                       ImGuiWindowFlags_NoMove)) {
    ImGui::InvisibleButton("split", ImVec2(std::max(20.0f, right_w - heat_w - 40), 6));
    if (ImGui::IsItemHovered() || ImGui::IsItemActive()) ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeNS);
    if (ImGui::IsItemActive()) ui.overview_frac += ImGui::GetIO().MouseDelta.y / mid;
  }
  ImGui::End();
  // Splitter above the details pane: drag to make it taller or shorter.
  ImGui::SetNextWindowPos(ImVec2(left + 20, top + mid - 3));
  ImGui::SetNextWindowSize(ImVec2(std::max(20.0f, right_w - 40), 6));
  if (ImGui::Begin("##split_details", nullptr,
                   ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoBackground | ImGuiWindowFlags_NoSavedSettings |
                       ImGuiWindowFlags_NoMove)) {
    ImGui::InvisibleButton("split_details", ImVec2(std::max(20.0f, right_w - 40), 6));
    if (ImGui::IsItemHovered() || ImGui::IsItemActive()) ImGui::SetMouseCursor(ImGuiMouseCursor_ResizeNS);
    if (ImGui::IsItemActive()) ui.details_h = std::clamp(bottom - ImGui::GetIO().MouseDelta.y, 80.0f, max_bottom);
  }
  ImGui::End();
  ImGui::PopStyleVar(2);
  // Status bar: message, jobs, frame rate.
  if (begin_panel("##status", ImVec4(0, h - status_h, w, status_h),
                  ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoScrollbar)) {
    ui.record_rect("status");
    if (!st.message.empty()) {
      ImGui::TextColored(st.message_is_error ? ImVec4(1.0f, 0.45f, 0.4f, 1.0f) : ImVec4(0.7f, 0.85f, 0.7f, 1.0f), "%s",
                         st.message.c_str());
      ImGui::SameLine();
    }
    const auto jobs = st.jobs.status();
    if (!jobs.empty()) {
      ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "| %s %.0f%%", jobs[0].label.c_str(), jobs[0].progress * 100);
      ImGui::SameLine();
    }
    const char* right = "focalscope 0.1  ";
    ImGui::SameLine(std::max(ImGui::GetCursorPosX() + 10, w - 200));
    ImGui::TextDisabled("%s%.0f fps", right, fps);
  }
  ImGui::End();
}

void save_screenshot(Ui& ui, const std::string& path, int fb_w, int fb_h) {
  std::vector<uint8_t> px((size_t)fb_w * fb_h * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, fb_w, fb_h, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  std::vector<uint8_t> flipped(px.size());
  for (int y = 0; y < fb_h; ++y)
    std::memcpy(&flipped[(size_t)y * fb_w * 4], &px[(size_t)(fb_h - 1 - y) * fb_w * 4], (size_t)fb_w * 4);
  if (!ui.screenshot_panel.empty() && ui.screenshot_panel != "window") {  // one panel: crop to its rectangle
    // The heatmap's whole panel (its options, colour bar and legend), not only the matrix "heatmap" records.
    auto it = ui.rects.find(ui.screenshot_panel == "heatmap" ? "heatmap.panel" : ui.screenshot_panel);
    if (it == ui.rects.end()) throw focal::Error("screenshot: there is no panel '" + ui.screenshot_panel + "'");
    const float sx = (float)fb_w / std::max(1.0f, ImGui::GetIO().DisplaySize.x);
    const float sy = (float)fb_h / std::max(1.0f, ImGui::GetIO().DisplaySize.y);
    const int x0 = std::clamp((int)std::lround(it->second.x * sx), 0, fb_w - 1);
    const int y0 = std::clamp((int)std::lround(it->second.y * sy), 0, fb_h - 1);
    const int w = std::clamp((int)std::lround(it->second.z * sx), 1, fb_w - x0);
    const int h = std::clamp((int)std::lround(it->second.w * sy), 1, fb_h - y0);
    std::vector<uint8_t> crop((size_t)w * h * 4);
    for (int y = 0; y < h; ++y)
      std::memcpy(&crop[(size_t)y * w * 4], &flipped[((size_t)(y0 + y) * fb_w + x0) * 4], (size_t)w * 4);
    focal::figures::write_png_rgba(path, crop.data(), w, h, w * 4);
    return;
  }
  focal::figures::write_png_rgba(path, flipped.data(), fb_w, fb_h, fb_w * 4);
  // Sidecar: where each panel is and what the state was, for the screenshot checks.
  nlohmann::json js;
  js["width"] = fb_w;
  js["height"] = fb_h;
  for (const auto& [name, r] : ui.rects) js["rects"][name] = {r.x, r.y, r.z, r.w};
  js["n_tokens"] = ui.st.n_tokens();
  js["prompt"] = ui.st.prompt;
  js["layer"] = ui.st.sel_layer;
  js["head"] = ui.st.sel_head;
  js["message"] = ui.st.message;
  js["message_is_error"] = ui.st.message_is_error;
  js["spec_a"] = ui.st.slots[0].spec.label();
  js["spec_b"] = ui.st.slots[1].spec.label();
  js["capture_only"] = ui.st.capture_only();
  js["model_path"] = ui.st.loaded.path;
  for (const auto& [name, l] : ui.labels) js["labels"][name] = l;
  js["model_b_path"] = ui.st.model_b_path;
  js["glyphs_missing"] = glyphs_missing(ui);  // code points drawn as "?"
  focal::write_file_atomically(path + ".json", js.dump(1) + "\n");
}

Ui* g_ui = nullptr;
void on_drop(GLFWwindow*, int n, const char** paths) {
  if (g_ui)
    for (int i = 0; i < n; ++i) g_ui->dropped.push_back(paths[i]);
}

}  // namespace
}  // namespace focalscope

namespace {

int run_app(int argc, char** argv) {
  using namespace focalscope;
  Args args;
  try {
    const int rc = parse_args(argc, argv, args);
    if (rc >= 0) return rc;
  } catch (const focal::Error& e) {
    std::fprintf(stderr, "focalscope: %s\n", e.what());
    return 2;
  }
  std::vector<ScriptCommand> script;
  if (!args.script.empty()) {
    std::ifstream f(args.script);
    if (!f) {
      std::fprintf(stderr, "focalscope: cannot read script '%s'\n", args.script.c_str());
      return 2;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    try {
      script = parse_script(ss.str(), args.script);
    } catch (const focal::Error& e) {
      std::fprintf(stderr, "focalscope: %s\n", e.what());
      return 2;
    }
  }
  const std::string settings_path = args.settings_path.empty() ? Settings::default_path() : args.settings_path;
  std::string warn;
  Settings settings = args.no_settings ? Settings{} : Settings::load(settings_path, &warn);
  const int win_w = args.w ? args.w : settings.window_w, win_h = args.h ? args.h : settings.window_h;

  glfwSetErrorCallback(
      [](int code, const char* msg) { std::fprintf(stderr, "focalscope: GLFW error %d: %s\n", code, msg); });
  if (!glfwInit()) {
    std::fprintf(stderr, "focalscope: cannot open a window (no display? set DISPLAY, or run under xvfb-run)\n");
    return 1;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GL_TRUE);
  GLFWwindow* win = glfwCreateWindow(win_w, win_h, "focalscope", nullptr, nullptr);
  if (!win) {
    std::fprintf(stderr, "focalscope: cannot create an OpenGL 3.3 window\n");
    glfwTerminate();
    return 1;
  }
  glfwMakeContextCurrent(win);
  const bool headless_run = !script.empty() || !args.bench.empty();
  glfwSwapInterval(headless_run ? 0 : 1);
  ImGui::CreateContext();
  int rc = 0;
  {
    AppState st;
    Ui ui(st);
    g_ui = &ui;
    glfwSetDropCallback(win, on_drop);
    setup_style_and_fonts(ui);
    ImGui_ImplGlfw_InitForOpenGL(win, true);
    ImGui_ImplOpenGL3_Init("#version 330");

    // What to open: the command line, else the last session, else the bundled focal model.
    st.recent = settings.recent;
    st.compare = settings.compare;
    try {
      st.device = focal::parse_device(!args.device.empty() ? args.device : settings.device);
    } catch (const focal::Error&) {
      st.notify(settings_path + ": device '" + settings.device + "' is not auto, cpu or cuda; using auto", true);
    }
    try {
      st.weights = focal::parse_weights_mode(!args.weights.empty() ? args.weights : settings.weights);
    } catch (const focal::Error&) {
      st.notify(settings_path + ": weights '" + settings.weights + "' is not native or fp32; using native", true);
    }
    try {
      st.precision = focal::parse_precision(!args.precision.empty() ? args.precision : settings.precision);
    } catch (const focal::Error&) {
      st.notify(settings_path + ": precision '" + settings.precision + "' is not auto, exact or fast; using auto",
                true);
    }
    // A settings file from a machine with a GPU (device cuda, precision fast) on one without: auto, said (no model
    // opened at all). A --device / --precision given here is the user's and fails as asked.
    {
      std::string why;
      const bool no_gpu = focal::resolve_device(focal::Device::kAuto, &why) != focal::Device::kCuda;
      if (no_gpu && args.device.empty() && st.device == focal::Device::kCuda) {
        st.device = focal::Device::kAuto;
        st.notify(settings_path + ": device cuda, but no CUDA device is usable here; using auto (" + why + ")", true);
      }
      if (no_gpu && args.precision.empty() && st.precision == focal::Precision::kFast &&
          st.device != focal::Device::kCuda) {
        st.precision = focal::Precision::kAuto;
        st.notify(settings_path + ": precision fast needs a CUDA device; using auto", true);
      }
    }
    st.live_propagate = settings.live_propagate;
    (void)parse_heat_color(settings.heat_color, st.view.heat_color);  // checked when the settings were read
    st.view.hide_sink = settings.hide_sink;
    if (!warn.empty()) st.notify(warn, true);
    std::string source = args.source;
    if (source.empty() && !settings.model_path.empty() && exists(settings.model_path)) source = settings.model_path;
    if (source.empty()) {  // the bundled retrieval model (its prompt and head) when it is there
      source = std::string(FOCAL_ASSETS_DIR) + "/models/recall-focal-t0.4";
      if (!exists(source + "/config.json")) source = std::string(FOCAL_ASSETS_DIR) + "/models/focal-t0.4";
    }
    const std::pair<int, int> own_view = model_view(source);
    // The prompt: --prompt; else the prompt.txt of a model named on the command line; else the last one; else the
    // model's prompt.txt; else a short story.
    const std::string own = model_prompt(source);
    if (!args.prompt.empty())
      st.prompt = args.prompt;
    else if (!args.source.empty() && !own.empty())
      st.prompt = own;
    else if (!settings.prompt.empty())
      st.prompt = settings.prompt;
    else
      st.prompt = own.empty() ? kDefaultPrompt : own;
    std::snprintf(ui.path_buf, sizeof ui.path_buf, "%s", source.c_str());
    st.open_path(source);
    bool restore_specs = args.source.empty() && source == settings.model_path && !settings.spec_a_json.empty();

    ScriptRunner runner(script, args.script);
    Bench bench(args.bench, args.bench_long, args.bench_long_tokens);
    double last_t = glfwGetTime();
    float fps = 0.0f;
    bool was_loaded = false;
    std::string shown_path;
    long frames_begun = 0;  // the backend makes its font texture in the first NewFrame
    while (!glfwWindowShouldClose(win)) {
      if (headless_run || st.busy())
        glfwPollEvents();
      else
        glfwWaitEventsTimeout(0.1);
      st.poll();
      if (!was_loaded && st.has_model()) {  // first load done: apply the command line and remembered settings
        was_loaded = true;
        try {
          if (restore_specs) {
            st.set_spec(0, focal::TempSpec::from_json(settings.spec_a_json, settings_path));
            if (!settings.spec_b_json.empty())
              st.set_spec(1, focal::TempSpec::from_json(settings.spec_b_json, settings_path));
            // The selection (clamped to the model) and model B of the last session.
            const focal::ModelConfig* c = st.config();
            if (c && settings.layer >= 0 && settings.layer < c->n_layers && settings.head >= 0 &&
                settings.head < c->n_heads)
              st.select(settings.layer, settings.head, settings.query);
            if (!settings.model_b_path.empty() && exists(settings.model_b_path)) {
              st.open_model_b(settings.model_b_path);
              ui.b_kind = 1;
            }
          }
        } catch (const focal::Error& e) {
          st.notify(settings_path + ": the saved temperature specs were not restored (" + e.what() + ")", true);
        }
        if (!restore_specs && own_view.first >= 0) st.select(own_view.first, own_view.second, -1);
        if (args.temp > 0.0f) {
          focal::TempSpec s = st.slots[0].spec;
          s.mode = focal::AttnMode::kFocal;
          s.focal_temp = args.temp;
          st.set_spec(0, s);
        }
      }
      if (st.loaded.path != shown_path) {  // keep the path field on what is loaded
        shown_path = st.loaded.path;
        std::snprintf(ui.path_buf, sizeof ui.path_buf, "%s", shown_path.c_str());
      }
      for (const std::string& p : ui.dropped) {
        std::snprintf(ui.path_buf, sizeof ui.path_buf, "%s", p.c_str());
        st.open_path(p);
      }
      ui.dropped.clear();
      if (!script.empty() && !runner.step(ui, win)) {
        if (runner.failed()) {
          std::fprintf(stderr, "focalscope: %s\n", runner.error().c_str());
          rc = 1;
        }
        break;
      }
      if (!args.bench.empty()) bench.before_frame(ui);

      add_glyphs_for_shown_text(ui, /*texture_exists=*/frames_begun > 0);  // CJK tokens etc.: fonts.cpp
      ImGui_ImplOpenGL3_NewFrame();
      ++frames_begun;
      ImGui_ImplGlfw_NewFrame();
      // A script has no user at the mouse: Xvfb's pointer sits wherever it was, and its hover tooltips would land
      // in the screenshots. Park it outside the window.
      if (!script.empty()) ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);
      ImGui::NewFrame();
      int fb_w, fb_h;
      glfwGetFramebufferSize(win, &fb_w, &fb_h);
      ui.labels.clear();  // each panel records the axis labels it draws this frame
      layout_and_draw(ui, ImGui::GetIO().DisplaySize.x, ImGui::GetIO().DisplaySize.y, fps);
      ImGui::Render();
      if (!args.bench.empty()) bench.after_render();
      glViewport(0, 0, fb_w, fb_h);
      glClearColor(0.08f, 0.085f, 0.10f, 1.0f);
      glClear(GL_COLOR_BUFFER_BIT);
      ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
      if (!ui.screenshot_request.empty()) {
        try {
          save_screenshot(ui, ui.screenshot_request, fb_w, fb_h);
          if (script.empty()) st.notify("wrote " + ui.screenshot_request, false);
        } catch (const focal::Error& e) {
          st.notify(e.what(), true);
          if (!script.empty()) {
            std::fprintf(stderr, "focalscope: %s\n", e.what());
            rc = 1;
            break;
          }
        }
        ui.screenshot_request.clear();
        ui.screenshot_panel.clear();
      }
      if (!args.bench.empty()) {
        glFinish();
        if (!bench.after_frame(ui)) {
          if (!bench.error().empty()) {
            std::fprintf(stderr, "focalscope: %s\n", bench.error().c_str());
            rc = 1;
          }
          break;
        }
      }
      glfwSwapBuffers(win);
      const double t = glfwGetTime();
      fps = fps * 0.9f + 0.1f * (float)(1.0 / std::max(1e-4, t - last_t));
      last_t = t;
    }
    // Scripted runs and benchmarks leave the user's settings alone unless --settings names a file.
    if (!args.no_settings && args.bench.empty() && (script.empty() || !args.settings_path.empty())) {
      settings.recent = st.recent;
      if (st.has_model()) settings.model_path = st.loaded.path;
      settings.model_b_path = st.slots[1].model ? st.model_b_path : "";
      settings.layer = st.sel_layer;
      settings.head = st.sel_head;
      settings.query = st.sel_query;
      settings.prompt = st.prompt;
      settings.spec_a_json = st.slots[0].spec.to_json();
      settings.spec_b_json = st.slots[1].spec.to_json();
      settings.compare = st.compare;
      if (st.loaded_choice) {  // what a model loaded under; otherwise the file's earlier choice stays
        settings.device = focal::device_name(st.loaded_device);
        settings.precision = focal::precision_name(st.loaded_precision);
      }
      settings.weights = focal::weights_mode_name(st.weights);
      settings.live_propagate = st.live_propagate;
      settings.heat_color = heat_color_name(st.view.heat_color);
      settings.hide_sink = st.view.hide_sink;
      glfwGetWindowSize(win, &settings.window_w, &settings.window_h);
      try {
        settings.save(settings_path);
      } catch (const focal::Error& e) { std::fprintf(stderr, "focalscope: %s\n", e.what()); }
    }
    g_ui = nullptr;
    ui.heat_tex.release();
    ui.gen_tex.release();
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
  }
  ImGui::DestroyContext();
  glfwDestroyWindow(win);
  glfwTerminate();
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  // A file size limit (RLIMIT_FSIZE) makes a write fail with EFBIG, reported like a full disk, instead of killing
  // the app with its unsaved settings.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    return run_app(argc, argv);
  } catch (const std::exception& e) {  // a failure no panel caught: say so instead of terminating silently
    std::fprintf(stderr, "focalscope: internal error: %s\n", e.what());
    return 3;
  }
}
