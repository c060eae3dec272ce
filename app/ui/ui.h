// What the panels share: the app state, textures, layout rectangles (for screenshots' checks), fonts and helpers.
// One panel per file (panel_*.cpp), each a draw_* function called once per frame by main.cpp.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "app_state.h"

namespace focalscope {

// An RGBA texture owned by the UI thread.
struct Texture {
  unsigned id = 0;
  int w = 0, h = 0;
  void upload(const std::vector<uint8_t>& rgba, int w, int h);  // creates or resizes
  void release();
};

// The heatmap's view of the [T, T] matrix: keys [k0, k1) by queries [q0, q1), in matrix units.
struct HeatView {
  double k0 = 0, k1 = 0, q0 = 0, q1 = 0;
  int T = 0;
};

struct Ui {
  AppState& st;
  explicit Ui(AppState& s) : st(s) {}

  ImFont* font = nullptr;
  ImFont* font_small = nullptr;
  ImFont* font_mono = nullptr;

  // Layout: panel rectangles of this frame by name (x, y, w, h in window pixels).
  std::map<std::string, ImVec4> rects;
  void record_rect(const std::string& name);  // the current window's content region

  // Heatmap state.
  Texture heat_tex;
  HeatView heat_view;
  uint64_t heat_key = 0;  // what the texture shows (rows version + view + options)
  double heat_build_ms = 0.0;
  Texture gen_tex;
  size_t gen_rows_shown = 0;

  // Text fields.
  char path_buf[1024] = {};
  char path_b_buf[1024] = {};
  char prompt_buf[16384] = {};
  char export_buf[1024] = "out/focalscope.h5";
  char figure_buf[1024] = "out/focalscope-figure.pdf";
  char png_buf[1024] = "out/focalscope.png";
  bool prompt_dirty = false;
  int figure_kind = 0;
  std::string screenshot_request;  // main.cpp saves the next frame here
  int sweep_metric = focal::kEntropyNats;
  int gen_n = 24;
  float gen_sample_temp = 0.0f;
  int force_tab = -1;                // select this tab of the details panel next frame
  int b_kind = 0;                    // compare two settings (0) or two models (1)
  std::vector<std::string> dropped;  // paths dropped onto the window this frame
};

// Colours.
ImU32 col_run(int side);  // A blue, B vermillion (Okabe-Ito, as the figures)
ImU32 col_viridis(double t);
ImU32 col_diverging(double t);
ImVec4 col_run_v4(int side);
const char* side_name(int side);                      // "A", "B"
std::string run_title(const AppState& st, int side);  // "A: focal_t0.4 (exact)" etc.
std::string fmt(const char* f, double v);
void help_marker(const char* text);
// The figure presets of the export section and the script's `figure` command.
extern const char* const kFigureKinds[4];  // distribution, heatmap, grid, entropy
// Renders figure `kind` of the current state (selected layer, head and query, sink and log settings where the kind
// takes them) to path, PNG / SVG / PDF by its extension, written atomically. Throws focal::Error.
void write_app_figure(const AppState& st, const std::string& kind, const std::string& path);
// Heading text in the accent colour.
void section(const char* text);
// Temperature widgets for one side; returns true when the spec changed (already applied to the state).
bool temperature_controls(Ui& ui, int side);

void draw_controls(Ui& ui, const ImVec4& r);
void draw_prompt(Ui& ui, const ImVec4& r);
void draw_overview(Ui& ui, const ImVec4& r);
void draw_heatmap(Ui& ui, const ImVec4& r);
void draw_distribution(Ui& ui, const ImVec4& r);
void draw_bottom(Ui& ui, const ImVec4& r);  // the tabbed panel: metrics, sweep, output, generation, tau
void draw_metrics(Ui& ui);
void draw_sweep(Ui& ui);
void draw_output(Ui& ui);
void draw_generation(Ui& ui);
void draw_tau(Ui& ui);
void draw_corpus(Ui& ui);  // panel_corpus.cpp: a focal batch stats file
// Opens row `row` of the corpus's documents as the prompt, under its runs' settings (loading the batch's model first
// when another is loaded). Throws focal::Error when no corpus is open or the row does not exist.
void open_corpus_document(Ui& ui, size_t row);

// Begins a fixed panel window at r (x, y, w, h).
bool begin_panel(const char* title, const ImVec4& r, ImGuiWindowFlags extra = 0);

// Builds the RGBA pixels of the heatmap view into out (w x h texels, max-pooled so single peaks stay visible).
void build_heat_pixels(const AppState& st, const HeadRows& rows, const HeatView& v, int w, int h,
                       std::vector<uint8_t>& out);

}  // namespace focalscope
