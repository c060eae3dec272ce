// Shared UI helpers: textures, colours, the temperature widgets both sides use, the heatmap pixel builder and the
// bottom tab bar.
#include <GL/gl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "focal_figures/colormap.h"
#include "focal_figures/figures.h"
#include "focal/atomic_file.h"
#include "focal/metrics.h"
#include "focal/error.h"
#include "overrides.h"
#include "ui.h"

namespace focalscope {

const char* const kFigureKinds[5] = {"distribution", "heatmap", "grid", "entropy", "temps"};

void write_app_figure(const Ui& ui, const std::string& kind, const std::string& path) {
  const AppState& st = ui.st;
  if (std::find(std::begin(kFigureKinds), std::end(kFigureKinds), kind) == std::end(kFigureKinds)) {
    std::string kinds;  // the app's own (the figure module's list named sweep, corpus ... that need other files)
    for (const char* k : kFigureKinds) kinds += std::string(kinds.empty() ? "" : ", ") + k;
    throw focal::Error("figure: the app makes " + kinds + " figures of its session, not '" + kind + "' (focal figure " +
                       kind + " draws it from the files)");
  }
  if (kind == "temps") {  // a temperature file and a standard run, not the capture's selected head
    write_temps_figure(st, path);
    return;
  }
  const focal::CaptureFile cf = st.capture_file();
  focal::figures::FigureOptions o;  // each kind gets only the options it takes (figures reject the others)
  if (kind == "distribution" || kind == "heatmap") {
    o.layer = st.sel_layer;
    o.head = st.sel_head;
  }
  if (kind == "distribution") {
    o.query = st.query();
    o.overlay = true;
    o.key_window = ui.dist_window;  // the keys the panel shows (its "last keys" window)
  }
  // The heatmap of the run the view shows (it drew A whatever the view); B - A, which no figure draws, as A and B
  // side by side. The capture's runs by side: capture_file() leaves out a side without a run (then B's run came
  // first and a figure "of A" drew B) and renames B's on a name clash.
  if (kind == "heatmap") {
    std::string name_of[2];
    size_t i = 0;
    for (int side = 0; side < 2 && i < cf.runs.size(); ++side)
      if ((side == 0 || st.compare) && st.slots[side].run) name_of[side] = cf.runs[i++].name;
    const bool a = st.view.show != ViewRun::kB, b = st.view.show != ViewRun::kA;
    for (int side = 0; side < 2; ++side)
      if ((side == 0 ? a : b) && name_of[side].empty())
        throw focal::Error(std::string("figure heatmap: ") + side_name(side) +
                           " has no run to draw yet (press Propagate, or view the other side)");
    o.runs.clear();
    if (a) o.runs.push_back(name_of[0]);
    if (b) o.runs.push_back(name_of[1]);
  }
  if (kind == "distribution" || kind == "heatmap" || kind == "grid") o.no_sink = st.view.hide_sink;
  if (kind == "heatmap" || kind == "grid") {  // the view's colour choice; auto: the figure's rule on what it draws
    o.log_scale = st.view.heat_color == HeatColor::kLog;
    o.linear_scale = st.view.heat_color == HeatColor::kLinear;
  }
  focal::figures::Source src;
  src.capture = &cf;
  src.label = "app";
  focal::require_not_model_file(path, cf.model_path, "figure file");  // not over the model the app runs
  focal::write_file_atomically(path,
                               focal::figures::render_figure(kind, {src}, o, focal::figures::format_from_path(path)));
}

void Texture::upload(const std::vector<uint8_t>& rgba, int tw, int th) {
  if (!id) glGenTextures(1, &id);
  glBindTexture(GL_TEXTURE_2D, id);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
  glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
  glPixelStorei(GL_UNPACK_ALIGNMENT, 1);
  if (tw != w || th != h) {
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA, tw, th, 0, GL_RGBA, GL_UNSIGNED_BYTE, rgba.data());
    w = tw;
    h = th;
  } else {
    glTexSubImage2D(GL_TEXTURE_2D, 0, 0, 0, tw, th, GL_RGBA, GL_UNSIGNED_BYTE, rgba.data());
  }
}

void Texture::release() {
  if (id) glDeleteTextures(1, &id);
  id = 0;
  w = h = 0;
}

// A slider's format for a temperature-like value: three decimals, and below 0.01 the value itself in three significant
// digits as the specs spell it ("1e-6": t = 1e-6, the smallest a spec takes, read 0.000), as literal text (no '%':
// ImGui shows it and leaves the value unrounded). The returned text lives until the next call.
static const char* temp_format(float v, bool with_t) {
  if (!(std::fabs(v) < 0.01f) || v == 0.0f) return with_t ? "t %.3f" : "%.3f";
  static std::string text;
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  text = (with_t ? "t " : "") + focal::tidy_exponent(b);
  return text.c_str();
}

static ImU32 to_u32(focal::figures::Rgb8 c, int a = 255) { return IM_COL32(c.r, c.g, c.b, a); }
// The colours of runs A and B now: the figures' colour of each run's name (set_run_colours).
static ImU32 g_run_colour[2] = {to_u32(focal::figures::category8(0)), to_u32(focal::figures::category8(1))};
void set_run_colours(const std::string& name_a, const std::string& name_b) {
  const std::vector<focal::figures::Rgb8> c = focal::figures::run_colors8({name_a, name_b});
  g_run_colour[0] = to_u32(c[0]);
  g_run_colour[1] = to_u32(c[1]);
}
// A side's colour is its run's kind: the setting whose numbers the tables, the Output tab and the overview show —
// the run's own while a changed setting is not propagated (a capture's stored run, opened without its model, kept
// its numbers and took the new setting's colour: the stored focal run's columns read as standard's blue).
std::string run_colour_label(const AppState& st, int side) {
  const Slot& slot = st.slots[side];
  return slot.run && !st.readouts_current(side) ? slot.run_spec.label() : slot.spec.label();
}
void set_run_colours(const AppState& st) { set_run_colours(run_colour_label(st, 0), run_colour_label(st, 1)); }
ImU32 col_run(int side) { return side >= 0 && side < 2 ? g_run_colour[side] : to_u32(focal::figures::category8(side)); }
std::string col_hex(ImU32 c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02X%02X%02X", (unsigned)(c & 255), (unsigned)(c >> 8 & 255),
                (unsigned)(c >> 16 & 255));
  return buf;
}
ImVec4 col_run_v4(int side) { return ImGui::ColorConvertU32ToFloat4(col_run(side)); }
ImU32 col_generated() { return IM_COL32(240, 64, 128, 255); }
ImVec4 col_generated_v4() { return ImGui::ColorConvertU32ToFloat4(col_generated()); }
ImU32 col_viridis(double t) { return to_u32(focal::figures::viridis8(t)); }
ImU32 col_diverging(double t) { return to_u32(focal::figures::diverging8(t)); }
const char* side_name(int side) { return side == 0 ? "A" : "B"; }

const char* const kPanelNames[7] = {"window", "heatmap", "overview", "distribution", "tokens", "details", "controls"};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string pending_suffix(const HeadRows& rows, int side) {
  return rows.pending[side] && !rows.label[side].empty() ? " (of " + rows.label[side] + ", computing the new setting)"
                                                         : "";
}

std::string run_title(const AppState& st, int side) {
  const Slot& s = st.slots[side];
  std::string t = std::string(side_name(side)) + ": ";
  // With no model or capture open the spec is a default that runs nothing ("B: standard" stood beside a corpus
  // whose B was focal_t0.4).
  if (!st.config()) return t + "no model";
  if (side == 1 && s.model) t += st.model_b_path.substr(st.model_b_path.find_last_of('/') + 1) + ", ";
  // A stored run of another model (a two-models capture opened alone) names it as well.
  if (side == 1 && !s.model && s.run && !s.run->model_path.empty())
    t += s.run->model_path.substr(s.run->model_path.find_last_of('/') + 1) + ", ";
  t += s.spec.label();
  return t;
}

void help_marker(const char* text) {
  ImGui::SameLine();
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 28.0f);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

void section(const char* text) {
  ImGui::Spacing();
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.55f, 0.78f, 1.0f, 1.0f));
  ImGui::TextUnformatted(text);
  ImGui::PopStyleColor();
  ImGui::Separator();
}

bool begin_panel(const char* title, const ImVec4& r, ImGuiWindowFlags extra) {
  ImGui::SetNextWindowPos(ImVec2(r.x, r.y), ImGuiCond_Always);
  ImGui::SetNextWindowSize(ImVec2(std::max(r.z, 40.0f), std::max(r.w, 30.0f)), ImGuiCond_Always);
  return ImGui::Begin(title, nullptr,
                      ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoCollapse |
                          ImGuiWindowFlags_NoBringToFrontOnFocus | ImGuiWindowFlags_NoSavedSettings | extra);
}

void Ui::record_rect(const std::string& name) {
  const ImVec2 p = ImGui::GetWindowPos(), s = ImGui::GetWindowSize();
  rects[name] = ImVec4(p.x, p.y, s.x, s.y);
}

bool temperature_controls(Ui& ui, int side) {
  AppState& st = ui.st;
  const focal::ModelConfig* cfg = side == 1 && st.slots[1].model ? &st.slots[1].model->config() : st.config();
  if (!cfg) return false;
  focal::TempSpec spec = st.slots[side].spec;
  bool changed = false;
  ImGui::PushID(side);
  static const char* kModes[] = {"standard", "focal", "learned", "ssmax"};
  int mode = (int)spec.mode;
  ImGui::SetNextItemWidth(-70);
  if (ImGui::Combo("mode", &mode, kModes, 4)) {
    if (mode == (int)focal::AttnMode::kLearned && !cfg->focal.has_tau) {
      st.notify("mode learned: this model has no learned temperature (tau_proj); use focal", true);
    } else {
      spec.mode = (focal::AttnMode)mode;
      changed = true;
    }
  }
  {  // What the temperature acts on: the architecture's logit scale, then its soft-cap (after the temperature).
    const focal::ArchConfig& a = cfg->arch;
    char scale_txt[48];
    if (a.query_pre_attn_scalar > 0.0f)
      std::snprintf(scale_txt, sizeof scale_txt, "q.k / sqrt(%g)", a.query_pre_attn_scalar);
    else
      std::snprintf(scale_txt, sizeof scale_txt, "q.k / sqrt(%d)", cfg->d_head);
    if (a.attn_softcap > 0.0f)
      ImGui::TextDisabled("logit %s, then soft-cap %g tanh(x / %g)", scale_txt, a.attn_softcap, a.attn_softcap);
    else
      ImGui::TextDisabled("logit %s, no soft-cap", scale_txt);
    help_marker(
        "The temperature divides the model's own attention logit (q.k times its scale); a soft-capped model "
        "(Gemma 2) applies the cap after the temperature, so t below 1 saturates toward the cap.");
  }
  if (spec.mode == focal::AttnMode::kFocal || spec.mode == focal::AttnMode::kStandard) {
    float t = spec.mode == focal::AttnMode::kStandard ? 1.0f : spec.focal_temp;
    ImGui::SetNextItemWidth(-70);
    ui.labels[std::string("controls.t.") + side_name(side)] = {std::string(temp_format(t, false)).find('%') == 0
                                                                   ? fmt(temp_format(t, false), t)
                                                                   : std::string(temp_format(t, false))};
    if (ImGui::SliderFloat("t", &t, 0.05f, 2.0f, temp_format(t, false), ImGuiSliderFlags_Logarithmic)) {
      spec.mode = focal::AttnMode::kFocal;
      spec.focal_temp = t;
      changed = true;
    }
    if (ImGui::Button("1.0 standard")) {
      spec.mode = focal::AttnMode::kStandard;
      spec.focal_temp = 1.0f;
      changed = true;
    }
    ImGui::SameLine();
    if (ImGui::Button("0.4 paper")) {
      spec.mode = focal::AttnMode::kFocal;
      spec.focal_temp = 0.4f;
      changed = true;
    }
    ImGui::SameLine();
    if (ImGui::Button("0.2")) {
      spec.mode = focal::AttnMode::kFocal;
      spec.focal_temp = 0.2f;
      changed = true;
    }
  } else if (spec.mode == focal::AttnMode::kLearned) {
    ImGui::SetNextItemWidth(-70);
    if (ImGui::SliderFloat("tau x", &spec.tau_scale, 0.1f, 4.0f, temp_format(spec.tau_scale, false),
                           ImGuiSliderFlags_Logarithmic))
      changed = true;
    help_marker("Multiplier on the learned tau of every layer: tau_used = clip(mean(X w_tau) + b) x this.");
  } else if (spec.mode == focal::AttnMode::kSsmax) {
    ImGui::SetNextItemWidth(-70);
    if (ImGui::SliderFloat("s", &spec.ssmax_s, 0.05f, 2.0f, temp_format(spec.ssmax_s, false),
                           ImGuiSliderFlags_Logarithmic))
      changed = true;
    help_marker("Scalable softmax: logits x s x ln(n), n the keys visible to the query.");
  }
  // Overrides for the selected layer and head.
  const int L = st.sel_layer, H = st.sel_head;
  auto lt = spec.layer_temp.find(L);
  bool has_l = lt != spec.layer_temp.end();
  char label[64];
  std::snprintf(label, sizeof label, "layer %d", L);
  if (ImGui::Checkbox(label, &has_l)) {
    if (has_l) {
      spec.layer_temp[L] = spec.mode == focal::AttnMode::kFocal ? spec.focal_temp : 1.0f;
      // A head-granularity file's t of the layer would win over the layer's slider (it moved nothing).
      if (!spec.temp_file.empty())
        for (int h = 0; h < cfg->n_heads; ++h) spec.head_temp.erase({L, h});
    } else {
      spec.layer_temp.erase(L);
    }
    changed = true;
  }
  if (has_l) {
    ImGui::SameLine();
    ImGui::SetNextItemWidth(-70);
    if (ImGui::SliderFloat("##lt", &spec.layer_temp[L], 0.05f, 2.0f, temp_format(spec.layer_temp[L], true),
                           ImGuiSliderFlags_Logarithmic))
      changed = true;
  }
  auto ht = spec.head_temp.find({L, H});
  bool has_h = ht != spec.head_temp.end();
  std::snprintf(label, sizeof label, "head %d.%d", L, H);
  if (ImGui::Checkbox(label, &has_h)) {
    if (has_h)
      spec.head_temp[{L, H}] =
          has_l ? spec.layer_temp[L] : (spec.mode == focal::AttnMode::kFocal ? spec.focal_temp : 1.0f);
    else
      spec.head_temp.erase({L, H});
    changed = true;
  }
  if (has_h) {
    ImGui::SameLine();
    ImGui::SetNextItemWidth(-70);
    if (ImGui::SliderFloat("##ht", &spec.head_temp[{L, H}], 0.05f, 2.0f, temp_format(spec.head_temp[{L, H}], true),
                           ImGuiSliderFlags_Logarithmic))
      changed = true;
  }
  // Overrides for a set of layers (or of heads in them) at once: e.g. layers 0-5,9 (heads empty), or layers * and
  // heads 2,4.
  if (ImGui::TreeNode("overrides for a set")) {
    ImGui::SetNextItemWidth(90);
    ImGui::InputTextWithHint("##set_l", "layers 0-5,9", ui.set_layers_buf[side], sizeof ui.set_layers_buf[side]);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(80);
    ImGui::InputTextWithHint("##set_h", "heads (all)", ui.set_heads_buf[side], sizeof ui.set_heads_buf[side]);
    ImGui::SetNextItemWidth(90);
    ImGui::SliderFloat("##set_t", &ui.set_t[side], 0.05f, 2.0f, temp_format(ui.set_t[side], true),
                       ImGuiSliderFlags_Logarithmic);
    ImGui::SameLine();
    const bool apply = ImGui::SmallButton("apply");
    ImGui::SameLine();
    const bool clear = ImGui::SmallButton("clear");
    if (apply || clear) {
      try {
        const std::vector<int> ls = parse_index_set(ui.set_layers_buf[side], cfg->n_layers, "layers");
        const std::vector<int> hs = parse_index_set(ui.set_heads_buf[side], cfg->n_heads, "heads");
        spec = with_overrides(spec, ls, hs, clear ? 0.0f : ui.set_t[side]);
        changed = true;
      } catch (const focal::Error& e) { st.notify(e.what(), true); }
    }
    ImGui::TreePop();
  }
  const size_t n_over = spec.layer_temp.size() + spec.head_temp.size();
  if (n_over) {
    if (ImGui::SmallButton("reset overrides")) {
      spec.layer_temp.clear();
      spec.head_temp.clear();
      // A temperature file's t are its overrides: without them the setting is no longer the file's (it kept the
      // label "calibrated:FILE" over the mode's plain setting).
      spec.temp_file.clear();
      spec.base_checksum = 0;
      spec.file_overridden = false;
      changed = true;
    }
    ImGui::SameLine();
    ImGui::TextDisabled("%zu override%s", n_over, n_over == 1 ? "" : "s");
  }
  ImGui::PopID();
  if (changed && !spec.temp_file.empty()) spec.file_overridden = true;  // labelled "calibrated:STEM+overrides"
  if (changed) st.set_spec(side, spec);
  return changed;
}

void draw_bottom(Ui& ui, const ImVec4& r) {
  if (begin_panel("Details", r)) {
    ui.record_rect("details");
    if (ui.st.corpus.get() != ui.corpus_seen) {  // a stats file just opened: show it
      ui.corpus_seen = ui.st.corpus.get();
      if (ui.corpus_seen) ui.force_tab = 5;
    }
    if (ImGui::BeginTabBar("details_tabs")) {
      if (ImGui::BeginTabItem("Metrics", nullptr, ui.force_tab == 0 ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui.details_tab = 0;
        draw_metrics(ui);
        ImGui::EndTabItem();
      }
      if (ImGui::BeginTabItem("Output", nullptr, ui.force_tab == 1 ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui.details_tab = 1;
        draw_output(ui);
        ImGui::EndTabItem();
      }
      if (ImGui::BeginTabItem("Sweep", nullptr, ui.force_tab == 2 ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui.details_tab = 2;
        draw_sweep(ui);
        ImGui::EndTabItem();
      }
      if (ImGui::BeginTabItem("Generation", nullptr, ui.force_tab == 3 ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui.details_tab = 3;
        draw_generation(ui);
        ImGui::EndTabItem();
      }
      if (ImGui::BeginTabItem("Learned tau", nullptr, ui.force_tab == 4 ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui.details_tab = 4;
        draw_tau(ui);
        ImGui::EndTabItem();
      }
      if (ImGui::BeginTabItem("Corpus", nullptr, ui.force_tab == 5 ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui.details_tab = 5;
        draw_corpus(ui);
        ImGui::EndTabItem();
      }
      if (ImGui::BeginTabItem("Temps", nullptr, ui.force_tab == 6 ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui.details_tab = 6;
        draw_temps(ui);
        ImGui::EndTabItem();
      }
      ImGui::EndTabBar();
    }
    ui.force_tab = -1;
  }
  ImGui::End();
}

}  // namespace focalscope
