// What the panels share: the app state, textures, layout rectangles (for screenshots' checks), fonts and helpers.
// One panel per file (panel_*.cpp), each a draw_* function called once per frame by main.cpp.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "app_state.h"
#include "heat_pixels.h"
#include "focal_figures/ticks.h"
#include "prompt_wrap.h"

namespace focalscope {

// An RGBA texture owned by the UI thread.
struct Texture {
  unsigned id = 0;
  int w = 0, h = 0;
  void upload(const std::vector<uint8_t>& rgba, int w, int h);  // creates or resizes
  void release();
};

// The heatmap's view of the [T, T] matrix: keys [k0, k1) by queries [q0, q1), in matrix units.
struct Ui {
  AppState& st;
  explicit Ui(AppState& s) : st(s) {}

  ImFont* font = nullptr;
  ImFont* font_small = nullptr;
  ImFont* font_mono = nullptr;
  // Characters merged into the atlas beyond its base ranges, by font file: [c, c] pairs ending in 0 (fonts.cpp).
  std::map<std::string, std::vector<ImWchar>> glyph_ranges;
  std::set<unsigned> glyphs_tried;  // looked up once each, found or not
  size_t shown_text_sig = 0;        // of the text last scanned for missing characters

  // Layout: panel rectangles of this frame by name (x, y, w, h in window pixels).
  std::map<std::string, ImVec4> rects;
  // Axis and colour-bar labels drawn this frame by name (e.g. "heatmap.colorbar"), for the screenshot sidecar.
  std::map<std::string, std::vector<std::string>> labels;
  void record_rect(const std::string& name);  // the current window's content region

  // Heatmap state.
  Texture heat_tex;
  HeatView heat_view;
  uint64_t heat_key = 0;   // what the texture shows (rows version + view + options)
  float heat_vmax = 1.0f;  // the texture's colour scale: p (or |B - A|) at the top of the scale
  bool heat_log = false;   // and whether it colours p by log10 p (ViewOptions::heat_color resolved)
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
  std::string screenshot_panel;    // ... cropped to this panel's rectangle (rects), or the whole window if empty
  int png_panel = 0;               // the export section's choice: window or one panel
  int sweep_metric = focal::kEntropyNats;
  int gen_n = 24;
  int dist_window = 0;              // distribution panel: the last N keys up to the query (0: all)
  char set_layers_buf[2][64] = {};  // temperature overrides for a set: layers, heads and t of each side
  char set_heads_buf[2][64] = {};
  float set_t[2] = {0.4f, 0.4f};
  float overview_frac = 0.0f;  // share of the right column's height for the overview (0: by the layer count)
  float details_h = 0.0f;      // the details pane's height in px (0: by the window; its splitter sets it)
  int details_tab = -1;        // the details tab shown last frame (0 metrics .. 5 corpus, 6 temps)
  // The stats file the details panel last saw (a new one brings the Corpus tab forward).
  const CorpusView* corpus_seen = nullptr;
  int strip_scrolled_to = -1;         // token strip: the query it last scrolled to
  float strip_width = 0.0f;           // token strip: its width when it last laid out the tokens
  float strip_height = 0.0f;          // token strip: its height then (a banner above it can shrink it)
  int strip_tokens = 0;               // token strip: the token count it last laid out
  int strip_target = -1;              // token strip: the token it scrolls to (the query, or a newly marked key)
  int strip_scroll_frames = 0;        // frames left to apply that scroll
  std::vector<int32_t> strip_marked;  // token strip: the marked keys it last saw (scrolls to a newly marked one)
  bool prompt_editing = false;        // the prompt shows wrapped until clicked, then edits (wrapped too)
  SoftWrap prompt_wrap;               // the editor's soft line breaks
  int prompt_selection[2] = {0, 0};   // the editor's selection after its last reflow (bytes)
  float gen_sample_temp = 0.0f;
  int force_tab = -1;                // select this tab of the details panel next frame
  int b_kind = 0;                    // compare two settings (0) or two models (1)
  std::vector<std::string> dropped;  // paths dropped onto the window this frame
};

// Colours.
// The colour of run A (side 0) or B (1): one colour per run everywhere, by the kind of attention it runs, the
// figures' rule (standard blue, focal vermillion, learned bluish green; focal_figures/colormap.h run_colors8). The
// panels draw with the pair set last: main.cpp sets the main panels' specs each frame, the Corpus tab its stats
// file's runs while it draws. Sides 2.. are plain Okabe-Ito colours.
ImU32 col_run(int side);
void set_run_colours(const std::string& name_a, const std::string& name_b);
void set_run_colours(const AppState& st);  // by run_colour_label of A and B
// The setting a side's colour follows: its run's while the run is not of the current setting, else the current one.
std::string run_colour_label(const AppState& st, int side);
std::string col_hex(ImU32 c);  // "#RRGGBB"
ImU32 col_viridis(double t);
ImU32 col_diverging(double t);
ImVec4 col_run_v4(int side);
// The prompt / generation boundary of a generation capture (crimson, as the figures' boundary line).
ImU32 col_generated();
ImVec4 col_generated_v4();
const char* side_name(int side);  // "A", "B"
// " (of LABEL, computing the new setting)" while a side's rows are those of an earlier setting, else "".
std::string pending_suffix(const HeadRows& rows, int side);
std::string run_title(const AppState& st, int side);  // "A: focal_t0.4 (exact)" etc.
std::string fmt(const char* f, double v);
void help_marker(const char* text);
// What the PNG export can save: "window", or a panel rectangle of Ui::rects (heatmap, overview, distribution,
// tokens, details, controls).
extern const char* const kPanelNames[7];
// The figure presets of the export section and the script's `figure` command.
extern const char* const kFigureKinds[5];  // distribution, heatmap, grid, entropy, temps
// Renders figure `kind` of the current state (selected layer, head and query, the heatmap's run A / B (B - A: both
// side by side), the distribution's key window, sink and colour settings where the kind takes them) to path, PNG /
// SVG / PDF by its extension, written atomically. Throws focal::Error naming the kinds it makes for another kind.
void write_app_figure(const Ui& ui, const std::string& kind, const std::string& path);
// The temps figure (focal_figures/temps.h, as `focal figure temps FILE [CAPTURE]`) of the temperature file A (else
// B) runs, with each head's t against its entropy when the other side is a propagated standard run of the same model.
// Throws focal::Error when neither side runs a temperature file, or the file cannot be read.
void write_temps_figure(const AppState& st, const std::string& path);
// Heading text in the accent colour.
// fonts.cpp: the atlas at start-up, and before a frame the characters of the shown text it lacks (true if it was
// rebuilt; texture_exists: the OpenGL backend's font texture is made, so it is made again).
void build_fonts(Ui& ui);
bool add_glyphs_for_shown_text(Ui& ui, bool texture_exists);
// The characters of the prompt and the tokens that the atlas cannot draw (ImGui shows "?"), for the screenshot sidecar.
std::vector<unsigned> glyphs_missing(const Ui& ui);
void section(const char* text);
// Temperature widgets for one side; returns true when the spec changed (already applied to the state).
bool temperature_controls(Ui& ui, int side);

void draw_controls(Ui& ui, const ImVec4& r);
void draw_prompt(Ui& ui, const ImVec4& r);
// Opens the prompt's wrapping editor (a click on the prompt, or the script's edit-prompt); not for a capture.
void open_prompt_editor(Ui& ui);
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
void draw_temps(Ui& ui);   // panel_temps.cpp: the temperature file of focal calibrate that A or B runs
// Opens row `row` of the corpus's documents as the prompt, under its runs' settings (loading the batch's model first
// when another is loaded). Throws focal::Error when no corpus is open or the row does not exist.
void open_corpus_document(Ui& ui, size_t row);
// Opens the model the corpus's batch ran (its provenance model_path), unless it is the loaded one; with no prompt
// (a stats file opened alone) it then runs the selected head's highest document. Throws focal::Error when no corpus
// is open or that model is not on disk.
void open_corpus_model(Ui& ui);

// Begins a fixed panel window at r (x, y, w, h).
bool begin_panel(const char* title, const ImVec4& r, ImGuiWindowFlags extra = 0);

// Round (1-2-5) ticks over [lo, hi], at most about max_ticks (axes.cpp); their labels are recorded under name.
focal::figures::Ticks round_ticks(Ui& ui, const std::string& name, double lo, double hi, int max_ticks);
enum class ScaleKind { kLinear, kLog10, kDiverging };
// A horizontal colour bar at pos (w x h px) with numbered round ticks under it: viridis over [lo, hi], log10 over
// exponents [lo, hi] (labels 1e-4 .. 1), or diverging over [-hi, hi]. Records the labels shown under name; returns
// the height used.
float draw_colorbar_h(Ui& ui, const std::string& name, ImDrawList* dl, ImVec2 pos, float w, float h, double lo,
                      double hi, ScaleKind kind);

}  // namespace focalscope
