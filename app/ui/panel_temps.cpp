// Temps tab: the temperature file of `focal calibrate` that A or B runs (`calibrated:PATH`, focal/calibrate.h). Its t
// per layer x head as a matrix (colour on log2 t, diverging about t = 1: blue sharper, red flatter) with a colour bar
// numbered in t, its provenance and the calibrator's held-out loss before and after; beside it each head's t against
// its mean entropy under standard attention, only when the other side runs standard attention on the same model and
// tokens. Click a cell or a dot to select that head; Figure writes `focal figure temps` from the same numbers.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "focal/atomic_file.h"
#include "focal/calibrate.h"
#include "focal/error.h"
#include "focal_figures/temps.h"
#include "overrides.h"
#include "ui.h"

namespace focalscope {

namespace fig = focal::figures;

namespace {

const ImU32 kLabelColour = IM_COL32(150, 150, 160, 255);

// The temperature file a setting names, read again only when the path or the file's modification time changes.
struct TempFileCache {
  std::string path;
  std::filesystem::file_time_type mtime{};
  focal::TempFile file;
  std::string error;  // why it could not be read; empty when `file` holds it
};

const TempFileCache& cached_temp_file(const std::string& path) {
  static TempFileCache cache;
  std::error_code ec;
  const auto mtime = std::filesystem::last_write_time(path, ec);
  if (path == cache.path && mtime == cache.mtime) return cache;
  cache = TempFileCache{path, mtime, {}, ""};
  try {
    cache.file = focal::read_temp_file(path);
  } catch (const focal::Error& e) { cache.error = e.what(); }
  return cache;
}

// The side whose setting is a temperature file: A's, else B's while B is shown; -1 when neither.
int calibrated_side(const AppState& st) {
  if (!st.slots[0].spec.temp_file.empty()) return 0;
  if (st.compare && !st.slots[1].spec.temp_file.empty()) return 1;
  return -1;
}

bool is_standard(const focal::TempSpec& s) {
  return s.mode == focal::AttnMode::kStandard && s.layer_temp.empty() && s.head_temp.empty() && s.temp_file.empty();
}

// The other side when its run is standard attention on the file's model over the session's tokens, propagated under
// its current setting (its entropies are then standard attention's); else -1, with what to set in *why_not.
int standard_side(const AppState& st, int cal, const focal::TempFile& f, std::string* why_not) {
  const int s = 1 - cal;
  const std::string name = side_name(s), spec = st.slots[s].spec.label();
  const std::string to_see = " to see t against each head's entropy under standard attention";
  if (s == 1 && !st.compare)
    *why_not = "turn on B and set it to standard" + to_see;
  else if (s == 1 && st.slots[1].model)
    *why_not = "B runs another model: compare two settings of this model, B standard," + to_see;
  else if (!is_standard(st.slots[s].spec))
    *why_not = "set " + name + " to standard" + to_see + " (" + name + " is " + spec + ")";
  else if (st.file.weights_checksum != f.base_checksum)
    *why_not = "the open model's weights are not the ones the file was calibrated for (" + f.base_model + ")";
  else if (!st.slots[s].run || !is_standard(st.slots[s].run_spec) || !st.readouts_current(s))
    *why_not = name + " is standard, but its run " + (st.slots[s].run ? st.readout_gap(s) : "is not there yet");
  else
    return s;
  return -1;
}

// Round t values for a log axis over [lo, hi]: the densest set of mantissas per decade that gives at most max_ticks
// (a narrow range gets 0.9, 1, 1.1; a wide one 0.1, 1, 10); the two ends when not even two round values fall inside.
std::vector<double> log_t_ticks(double lo, double hi, int max_ticks) {
  static const std::vector<std::vector<double>> kMantissas = {
      {1},
      {1, 2, 5},
      {1, 1.5, 2, 3, 5, 7},
      {1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9},
      {1, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2, 2.2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 9.5}};
  std::vector<double> best;
  for (const std::vector<double>& set : kMantissas) {
    std::vector<double> v;
    for (int e = (int)std::floor(std::log10(lo)); e <= (int)std::ceil(std::log10(hi)); ++e)
      for (double m : set) {
        const double t = m * std::pow(10.0, e);
        if (t >= lo * (1 - 1e-9) && t <= hi * (1 + 1e-9)) v.push_back(t);
      }
    if ((int)v.size() > max_ticks) break;
    best = v;
  }
  if (best.size() < 2) best = {lo, 1.0, hi};
  return best;
}

// Where t lies on the log2 scale [-amax, amax], as a fraction 0..1.
double log_t_frac(double t, double amax) { return std::clamp((std::log2(t) / amax + 1.0) / 2.0, 0.0, 1.0); }
ImU32 t_colour(double t, double amax) { return col_diverging(2.0 * log_t_frac(t, amax) - 1.0); }

// A horizontal colour bar over log2 t in [-amax, amax], numbered in t at round values; returns the height used.
float draw_t_colorbar(Ui& ui, ImDrawList* dl, ImVec2 pos, float w, double amax) {
  const float h = 10.0f;
  for (int i = 0; i < (int)w; ++i)
    dl->AddRectFilled(ImVec2(pos.x + i, pos.y), ImVec2(pos.x + i + 1, pos.y + h),
                      col_diverging(2.0 * i / std::max(1.0f, w - 1) - 1.0));
  dl->AddRect(pos, ImVec2(pos.x + w, pos.y + h), IM_COL32(120, 125, 140, 255));
  std::vector<std::string> shown;
  float last_right = -1e9f;
  for (double t : log_t_ticks(std::exp2(-amax), std::exp2(amax), std::max(2, (int)(w / 40)))) {
    const float x = pos.x + (float)log_t_frac(t, amax) * w;
    const std::string s = fig::format_sig(t, 2);
    const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
    const float lx = std::clamp(x - ts.x / 2, pos.x, pos.x + w - ts.x);
    dl->AddLine(ImVec2(x, pos.y + h), ImVec2(x, pos.y + h + 3), IM_COL32(170, 170, 180, 255));
    if (lx < last_right + 6) continue;
    dl->AddText(ImVec2(lx, pos.y + h + 3), IM_COL32(185, 185, 195, 255), s.c_str());
    last_right = lx + ts.x;
    shown.push_back(s);
  }
  ui.labels["temps.colorbar"] = shown;
  return h + 3 + ImGui::GetTextLineHeight();
}

// Grey text that wraps at the tab's right edge instead of running past it (after SameLine it continues there).
void disabled_wrapped(const std::string& text) {
  ImGui::PushTextWrapPos(0.0f);
  ImGui::TextDisabled("%s", text.c_str());
  ImGui::PopTextWrapPos();
}

// A dot's colour by its layer's place in the model (0 first, 1 last): the bright part of viridis, legible on the
// dark plot.
ImU32 layer_colour(double frac) { return col_viridis(0.3 + 0.7 * frac); }

void select_head(AppState& st, int l, int h) {
  const focal::ModelConfig* c = st.config();
  if (c && l < c->n_layers && h < c->n_heads) st.select(l, h, st.sel_query);
}

// The t matrix, layers across and heads down (30 x 9 fits a short, wide tab), within width w and height h; returns
// the width used. entropy: [L, H] under standard attention (side std_side), or empty.
float draw_matrix(Ui& ui, const focal::TempFile& f, double amax, const std::vector<float>& entropy, int std_side,
                  float w, float h) {
  AppState& st = ui.st;
  const int L = f.n_layers, H = f.n_heads;
  const float line = ImGui::GetTextLineHeight();
  const float label_w = ImGui::CalcTextSize("00").x + 6, label_h = line + 2,
              bar_block = line + 24;  // the gap, bar, numbers and spacing under the cells
  const float cw = std::clamp((w - label_w) / L, 4.0f, 88.0f);
  const float ch = std::clamp((h - label_h - bar_block) / H, 4.0f, std::max(cw, 28.0f));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos(), p0(o.x + label_w, o.y);
  ui.rects["temps.matrix"] = ImVec4(p0.x, p0.y, L * cw, H * ch);
  ImGui::PushFont(ui.font_small ? ui.font_small : ImGui::GetFont());
  const bool values = cw >= ImGui::CalcTextSize("0.00").x + 4 && ch >= ImGui::GetTextLineHeight() + 2;
  std::vector<std::string> printed;  // the values written in the cells, for the screenshot sidecar
  for (int l = 0; l < L; ++l)
    for (int hd = 0; hd < H; ++hd) {
      const double t = f.focal_temp[(size_t)l * H + hd];
      const ImVec2 a(p0.x + l * cw, p0.y + hd * ch), b(a.x + cw - (cw >= 6 ? 1 : 0), a.y + ch - (ch >= 6 ? 1 : 0));
      dl->AddRectFilled(a, b, t_colour(t, amax));
      if (values) {  // dark text on the pale middle of the scale, white on its saturated ends
        // Two decimals, as the cell width allows for ("0.00"): 2 significant digits printed t = 1.04 as "1", which
        // reads as exactly standard.
        const std::string s = fmt("%.2f", t);
        const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
        const bool pale = std::fabs(2.0 * log_t_frac(t, amax) - 1.0) < 0.55;
        dl->AddText(ImVec2(a.x + (b.x - a.x - ts.x) / 2, a.y + (b.y - a.y - ts.y) / 2),
                    pale ? IM_COL32(20, 20, 20, 255) : IM_COL32(250, 250, 250, 255), s.c_str());
        printed.push_back(s);
      }
      if (l == st.sel_layer && hd == st.sel_head) {  // white around, black within: seen on pale cells too
        dl->AddRect(ImVec2(a.x - 1, a.y - 1), ImVec2(b.x + 1, b.y + 1), IM_COL32(255, 255, 255, 255), 0, 0, 2.0f);
        dl->AddRect(ImVec2(a.x + 1, a.y + 1), ImVec2(b.x - 1, b.y - 1), IM_COL32(0, 0, 0, 255), 0, 0, 1.5f);
      }
    }
  ImGui::PopFont();
  ui.labels["temps.cells"] = printed;
  const int head_step = std::max(1, (int)std::ceil(line / ch));
  for (int hd = 0; hd < H; hd += head_step)
    dl->AddText(ImVec2(o.x, p0.y + hd * ch + (ch - line) / 2), kLabelColour, std::to_string(hd).c_str());
  const int layer_step = std::max(1, (int)std::ceil((ImGui::CalcTextSize("00").x + 6) / cw));
  for (int l = 0; l < L; l += layer_step) {  // centred under its column, as the head numbers beside their rows
    const std::string s = std::to_string(l);
    dl->AddText(ImVec2(p0.x + l * cw + (cw - ImGui::CalcTextSize(s.c_str()).x) / 2, p0.y + H * ch + 1), kLabelColour,
                s.c_str());
  }
  ImGui::InvisibleButton("temps_matrix", ImVec2(label_w + L * cw, H * ch + label_h));
  if (ImGui::IsItemHovered()) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int l = (int)std::floor((mp.x - p0.x) / cw), hd = (int)std::floor((mp.y - p0.y) / ch);
    if (l >= 0 && l < L && hd >= 0 && hd < H) {
      const float t = f.focal_temp[(size_t)l * H + hd];
      if (entropy.empty())
        ImGui::SetTooltip("layer %d head %d: t = %.4f", l, hd, t);
      else
        ImGui::SetTooltip("layer %d head %d: t = %.4f\nmean entropy under standard attention (%s): %.3f nats", l, hd, t,
                          side_name(std_side), entropy[(size_t)l * H + hd]);
      if (ImGui::IsItemClicked()) select_head(st, l, hd);
    }
  }
  const ImVec2 bp(p0.x, ImGui::GetCursorScreenPos().y + 4);
  const float bar_w = std::clamp(L * cw, 160.0f, 300.0f);
  const float used = draw_t_colorbar(ui, dl, bp, bar_w, amax);
  const char* bar_title = "t, log scale (blue sharper, red flatter)";
  dl->AddText(ImVec2(bp.x + bar_w + 8, bp.y - 3), kLabelColour, bar_title);
  ImGui::Dummy(ImVec2(bar_w, used + 4));
  return std::max(label_w + L * cw, label_w + bar_w + 8 + ImGui::CalcTextSize(bar_title).x);
}

// Each head's t (log axis, as the colour bar) against its mean entropy under standard attention, a dot per head
// coloured by layer (viridis, as the figure), a dashed line at t = 1; hover names the head, a click selects it.
void draw_scatter(Ui& ui, const focal::TempFile& f, double amax, const std::vector<float>& entropy, ImVec2 size) {
  AppState& st = ui.st;
  const int L = f.n_layers, H = f.n_heads;
  double e0 = INFINITY, e1 = -INFINITY;
  for (float e : entropy)
    if (!std::isnan(e)) e0 = std::min(e0, (double)e), e1 = std::max(e1, (double)e);
  if (!(e0 <= e1)) {
    ImGui::TextDisabled("no head has an entropy in the standard run");
    return;
  }
  const double pad = std::max(0.05, 0.04 * (e1 - e0));
  e0 = std::max(0.0, e0 - pad), e1 += pad;
  const float line = ImGui::GetTextLineHeight();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("temps_scatter", size);
  const bool hovered = ImGui::IsItemHovered();
  const float left = ImGui::CalcTextSize("0.00").x + line + 10;
  const ImVec2 p0(o.x + left, o.y + line + 4), p1(o.x + size.x - 10, o.y + size.y - 2 * line - 8);
  if (p1.x - p0.x < 40 || p1.y - p0.y < 30) return;
  ui.rects["temps.scatter"] = ImVec4(p0.x, p0.y, p1.x - p0.x, p1.y - p0.y);
  dl->AddRectFilled(p0, p1, IM_COL32(24, 26, 32, 255));
  auto X = [&](double e) { return p0.x + (float)((e - e0) / (e1 - e0)) * (p1.x - p0.x); };
  const double amax_y = amax * 1.1;  // a margin, so that the dots at the extreme t are not cut by the frame
  auto Y = [&](double t) { return p1.y - (float)log_t_frac(t, amax_y) * (p1.y - p0.y); };
  // y: t at the colour bar's round values, with grid lines; t = 1 dashed.
  for (double t :
       log_t_ticks(std::exp2(-amax_y), std::exp2(amax_y), std::max(2, (int)((p1.y - p0.y) / (line * 1.6f))))) {
    const std::string s = fig::format_sig(t, 2);
    dl->AddLine(ImVec2(p0.x, Y(t)), ImVec2(p1.x, Y(t)), IM_COL32(48, 50, 58, 255));
    dl->AddText(ImVec2(p0.x - 4 - ImGui::CalcTextSize(s.c_str()).x, Y(t) - line / 2), kLabelColour, s.c_str());
  }
  for (float x = p0.x; x < p1.x; x += 8)
    dl->AddLine(ImVec2(x, Y(1.0)), ImVec2(std::min(x + 4, p1.x), Y(1.0)), IM_COL32(190, 190, 200, 200));
  dl->AddText(ImVec2(o.x, (p0.y + p1.y) / 2 - line / 2), kLabelColour, "t");
  // x: round ticks of the entropy in nats.
  const fig::Ticks xt = round_ticks(ui, "temps.scatter.x", e0, e1, std::max(3, (int)((p1.x - p0.x) / 70)));
  for (size_t i = 0; i < xt.values.size(); ++i) {
    const float x = X(xt.values[i]);
    if (x < p0.x - 0.5f || x > p1.x + 0.5f) continue;
    const float tw = ImGui::CalcTextSize(xt.labels[i].c_str()).x;
    dl->AddLine(ImVec2(x, p1.y), ImVec2(x, p1.y + 3), IM_COL32(170, 170, 180, 255));
    dl->AddText(ImVec2(std::clamp(x - tw / 2, p0.x, p1.x - tw), p1.y + 3), kLabelColour, xt.labels[i].c_str());
  }
  const char* x_title = "mean entropy under standard attention (nats)";
  dl->AddText(ImVec2((p0.x + p1.x - ImGui::CalcTextSize(x_title).x) / 2, p1.y + line + 6), kLabelColour, x_title);
  // The legend of the dot colours: layer 0 .. L-1 on a strip at the top right.
  const std::string last = std::to_string(L - 1);
  const float strip_w = 60, lw = ImGui::CalcTextSize(("layer 0" + last).c_str()).x + strip_w + 12;
  const ImVec2 lg(p1.x - lw, o.y);
  dl->AddText(lg, kLabelColour, "layer 0");
  const float sx = lg.x + ImGui::CalcTextSize("layer 0").x + 4;
  for (int i = 0; i < (int)strip_w; ++i)
    dl->AddRectFilled(ImVec2(sx + i, lg.y + 4), ImVec2(sx + i + 1, lg.y + line - 3), layer_colour(i / strip_w));
  dl->AddText(ImVec2(sx + strip_w + 4, lg.y), kLabelColour, last.c_str());
  const float radius = L * H > 100 ? 2.5f : L * H > 24 ? 3.5f : 4.5f;  // smaller dots where there are many
  int near = -1, shown = 0;
  float near_d2 = 64.0f;  // within 8 px of the mouse
  const ImVec2 mp = ImGui::GetIO().MousePos;
  for (int i = 0; i < L * H; ++i) {
    if (std::isnan(entropy[(size_t)i])) continue;
    const ImVec2 c(X(entropy[(size_t)i]), Y(f.focal_temp[(size_t)i]));
    const int l = i / H;
    dl->AddCircleFilled(c, radius, layer_colour(L > 1 ? (double)l / (L - 1) : 0.5));
    if (l == st.sel_layer && i % H == st.sel_head) dl->AddCircle(c, 6.0f, IM_COL32(255, 255, 255, 255), 0, 1.5f);
    const float d2 = (c.x - mp.x) * (c.x - mp.x) + (c.y - mp.y) * (c.y - mp.y);
    if (hovered && d2 < near_d2) near = i, near_d2 = d2;
    ++shown;
  }
  ui.labels["temps.scatter.points"] = {std::to_string(shown)};
  if (near >= 0) {
    ImGui::SetTooltip("layer %d head %d: t = %.4f, mean entropy %.3f nats", near / H, near % H,
                      f.focal_temp[(size_t)near], entropy[(size_t)near]);
    if (ImGui::IsItemClicked()) select_head(st, near / H, near % H);
  }
}

// The row that names a temperature file for A or B (the spec grammar's calibrated:PATH), and the figure button.
void file_row(Ui& ui, int cal) {
  AppState& st = ui.st;
  static char path_buf[1024] = "";
  ImGui::SetNextItemWidth(std::min(320.0f, ImGui::GetContentRegionAvail().x * 0.3f));
  ImGui::InputTextWithHint("##temps_path", "temperature file (focal calibrate -o)", path_buf, sizeof path_buf);
  for (int s = 0; s < 2; ++s) {
    ImGui::SameLine();
    if (ImGui::SmallButton(s == 0 ? "Set A" : "Set B") && path_buf[0]) {
      const focal::ModelConfig* c = s == 1 && st.slots[1].model ? &st.slots[1].model->config() : st.config();
      try {
        const focal::TempSpec spec = parse_spec_command(std::string("calibrated:") + path_buf, c, "Temps tab");
        if (s == 1) st.set_compare(true);
        st.set_spec(s, spec);
      } catch (const focal::Error& e) { st.notify(e.what(), true); }
    }
  }
  if (cal < 0) return;
  ImGui::SameLine();
  if (ImGui::SmallButton("Figure")) {
    try {
      write_temps_figure(st, ui.figure_buf);
      st.notify(std::string("wrote figure ") + ui.figure_buf, false);
    } catch (const focal::Error& e) { st.notify(e.what(), true); }
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("writes what `focal figure temps FILE [CAPTURE]` draws to %s\n(the export section's figure path)",
                      ui.figure_buf);
}

}  // namespace

void write_temps_figure(const AppState& st, const std::string& path) {
  const int cal = calibrated_side(st);
  if (cal < 0) throw focal::Error("the temps figure draws the temperature file A or B runs: set A to calibrated:FILE");
  const std::string& temps = st.slots[cal].spec.temp_file;
  const focal::TempFile f = focal::read_temp_file(temps);
  std::string why_not;
  const int s = standard_side(st, cal, f, &why_not);
  focal::CaptureFile cap;  // the standard run alone, as `focal figure temps FILE CAPTURE` reads it from a capture
  fig::FigureOptions opt;
  if (s >= 0) {
    cap = st.file;
    cap.runs = {*st.slots[s].run};
    cap.comparisons.clear();
    opt.runs = {cap.runs[0].name};
  }
  focal::require_not_model_file(path, st.file.model_path, "figure file");  // not over the model the app runs
  focal::write_file_atomically(path, fig::render_temps(f, std::filesystem::path(temps).stem().string(),
                                                       s >= 0 ? &cap : nullptr, opt, fig::format_from_path(path)));
}

void draw_temps(Ui& ui) {
  AppState& st = ui.st;
  const int cal = calibrated_side(st);
  file_row(ui, cal);
  if (cal < 0) {
    const char* how =
        "no temperature file in A or B: make one with `focal calibrate MODEL --data FILE -o t.json`, then set A to "
        "calibrated:t.json (Set A above, or the script's spec calibrated:t.json)";
    ImGui::TextDisabled("%s", how);
    ui.labels["temps.none"] = {how};
    return;
  }
  const std::string& path = st.slots[cal].spec.temp_file;
  const TempFileCache& tc = cached_temp_file(path);
  if (!tc.error.empty()) {
    ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "%s", tc.error.c_str());
    return;
  }
  const focal::TempFile& f = tc.file;
  const int L = f.n_layers, H = f.n_heads;
  if (L <= 0 || H <= 0 || f.focal_temp.size() != (size_t)L * H) {
    ImGui::TextColored(ImVec4(1.0f, 0.45f, 0.4f, 1.0f), "%s holds no layer x head temperatures", path.c_str());
    return;
  }
  const std::string name = std::filesystem::path(path).filename().string();
  ui.labels["temps.side"] = {side_name(cal)};
  ui.labels["temps.shape"] = {std::to_string(L), std::to_string(H)};
  ImGui::TextColored(col_run_v4(cal), "%s runs %s%s", side_name(cal), name.c_str(),
                     st.slots[cal].spec.file_overridden ? " with overrides (the cells show the file's own t)" : "");
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", path.c_str());
  ImGui::SameLine();
  const std::string data = std::filesystem::path(f.data_path).filename().string();
  char prov[512];
  std::snprintf(prov, sizeof prov,
                "granularity %s, %d steps of %d x %d tokens from t = %s on %s (%lld tokens); %d layers x %d heads",
                focal::calib_granularity_name(f.granularity), f.steps, f.batch, f.seq_len,
                fig::format_sig(f.init_temp, 3).c_str(), data.empty() ? "?" : data.c_str(), (long long)f.n_train_tokens,
                L, H);
  ui.labels["temps.provenance"] = {prov};
  disabled_wrapped(prov);
  if (f.val_loss_init > 0 && f.val_loss > 0) {
    const std::string before = fmt("%.3f", f.val_loss_init), after = fmt("%.3f", f.val_loss);
    ui.labels["temps.loss"] = {before, after};
    const std::string from = f.init_temp == 1.0 ? "standard" : "t = " + fig::format_sig(f.init_temp, 3);
    // a change under 0.0005 in two significant digits ("-0.000" read as no change, or as a sign error)
    const double d = f.val_loss - f.val_loss_init;
    const std::string change = std::fabs(d) >= 0.0005 || d == 0.0 ? fmt("%+.3f", d) : fmt("%+.2g", d);
    ImGui::Text("held-out loss: %s before (%s) \xE2\x86\x92 %s after, %s nats/token", before.c_str(), from.c_str(),
                after.c_str(), change.c_str());
    ImGui::SameLine();
    disabled_wrapped("the calibrator's numbers, on its own " + std::to_string(f.n_val_tokens) + " held-out tokens of " +
                     (data.empty() ? "its data" : data) + " (not this prompt)");
  } else {
    ImGui::TextDisabled("held-out loss: not recorded in the file");
  }
  double amax = 0.05;  // the colour scale: +-max |log2 t|, never narrower than t = 0.97 .. 1.04
  for (float t : f.focal_temp) amax = std::max(amax, std::fabs(std::log2((double)t)));
  std::string why_not;
  const int s = standard_side(st, cal, f, &why_not);
  std::vector<float> entropy;  // [L, H] mean entropy under standard attention (side s)
  if (s >= 0)
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) entropy.push_back(st.head_metric(s, l, h, focal::kEntropyNats));
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  // What is left of a short pane (1280 x 720: ~80 px under the file's lines) drew 4 px rows and no scatter: the
  // matrix and the scatter keep 14 px a head (up to 320 px in all), and the tab scrolls.
  const float line = ImGui::GetTextLineHeight(),
              min_body = std::min(320.0f, std::max(160.0f, 14.0f * (float)H + 2.0f * line + 26.0f));
  const float body_h = std::max(min_body, avail.y - ImGui::GetTextLineHeightWithSpacing());
  ImGui::BeginGroup();
  ImGui::TextDisabled("t per layer (across) x head (down); click a cell to select the head");
  const float used_w = draw_matrix(ui, f, amax, entropy, s, avail.x * 0.55f, body_h);
  ImGui::Dummy(ImVec2(used_w, 0.0f));  // the group spans the colour bar's caption (drawn, not laid out): the scatter
  ImGui::EndGroup();                   // beside it started under the caption's end
  ImGui::SameLine(0, 24);
  ImGui::BeginGroup();
  const float right_w = std::max(120.0f, avail.x - used_w - 40);
  if (s >= 0) {
    ui.labels["temps.entropy"] = {side_name(s), st.slots[s].run_spec.label()};
    ImGui::TextDisabled("t against entropy under standard attention (%s, this prompt)", side_name(s));
    draw_scatter(ui, f, amax, entropy, ImVec2(right_w, body_h));
  } else {
    ui.labels["temps.entropy_gap"] = {why_not};
    ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + right_w);
    ImGui::TextDisabled("%s", why_not.c_str());
    ImGui::PopTextWrapPos();
    const int other = 1 - cal;
    const bool settable =
        !(other == 1 && st.slots[1].model) && (!is_standard(st.slots[other].spec) || (other == 1 && !st.compare));
    if (settable && ImGui::SmallButton(other == 0 ? "Set A to standard" : "Set B to standard")) {
      if (other == 1) st.set_compare(true);
      st.set_spec(other, focal::TempSpec::standard());
    }
  }
  ImGui::EndGroup();
}

}  // namespace focalscope
