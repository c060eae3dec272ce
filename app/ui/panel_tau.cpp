// Learned temperature: tau per layer (mean over positions, with the clip bounds) and tau per position of the
// selected layer, for models trained with a learned tau.
#include <algorithm>
#include <cmath>

#include "overrides.h"
#include "ui.h"

namespace focalscope {

void draw_tau(Ui& ui) {
  AppState& st = ui.st;
  const focal::ModelConfig* c = st.config();
  const auto run = st.slots[0].run;
  if (!c || !run) {
    ImGui::TextDisabled("no run yet");
    return;
  }
  const focal::TempSpec& spec = st.slots[0].run_spec;
  const focal::TauProj* proj = spec.tau_proj.get();  // a temperature file's projections, else the model's own
  if (!c->focal.has_tau && !proj) {
    ImGui::TextDisabled(
        "this model has no learned temperature; open assets/models/focal-learned, or set A to a tau-proj "
        "temperature file (focal calibrate --granularity tau-proj)");
    return;
  }
  if (run->tau.empty()) {
    ImGui::TextDisabled("run A is not in learned mode: set A's mode to learned to see tau");
    return;
  }
  const int L = c->n_layers, T = st.n_tokens();
  const float tau_min = proj ? proj->tau_min : c->focal.tau_min, tau_max = proj ? proj->tau_max : c->focal.tau_max;
  ImGui::Text("tau = clip(mean(X w_tau) + b, %.2f, %.2f) x %.2f, mode %s%s", tau_min, tau_max, spec.tau_scale,
              focal::tau_mode_name(proj ? proj->tau_mode : c->focal.tau_mode),
              proj ? " (projections of the temperature file)" : "");
  // The run's values: when A's setting changed since (a preview, or no model to run it), say whose they are.
  if (!st.readouts_current(0)) {
    const auto names = labels_apart(spec, st.slots[0].spec);  // apart where the labels are equal
    const std::string stale =
        "A: run " + names.first + " (A is now " + names.second + "; the run " + st.readout_gap(0) + ")";
    ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "%s", stale.c_str());
    ui.labels["tau.run"] = {stale};
  }
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  // Per layer: bars of the mean tau, clip bounds dashed. A calibrated projection's bounds are wide (0.05 to 20
  // sqrt(d_head)): the axis then follows the tau values and shows a bound only where it falls inside.
  float tau_seen = 0.0f;
  for (float v : run->tau) tau_seen = std::max(tau_seen, v);
  const float lo = 0.0f, hi = proj ? tau_seen * 1.15f : tau_max * std::max(1.0f, spec.tau_scale) * 1.1f;
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const float w1 = avail.x * 0.35f, hgt = avail.y - 8;
  // Each plot's title above it (drawn inside, the per-position line ran through it at the clip bound).
  const float title_h = ImGui::GetTextLineHeight() + 2;
  const ImVec2 a0(o.x + 40, o.y + 4 + title_h), a1(o.x + w1, o.y + hgt - 16);
  dl->AddText(ImVec2(a0.x, o.y + 2), IM_COL32(170, 170, 180, 255), "mean tau over positions, by layer");
  dl->AddRectFilled(a0, a1, IM_COL32(24, 26, 32, 255));
  auto Y = [&](float v) { return a1.y - (v - lo) / (hi - lo) * (a1.y - a0.y); };
  // Round ticks of tau on the left of each plot (both share the axis).
  const focal::figures::Ticks yt = round_ticks(ui, "tau_y", lo, hi, 4);
  auto draw_y_ticks = [&](float x_right, float y_top, float y_bottom) {
    for (size_t k = 0; k < yt.values.size(); ++k) {
      const float y = y_bottom - (float)((yt.values[k] - lo) / (hi - lo)) * (y_bottom - y_top);
      if (y < y_top - 1 || y > y_bottom + 1) continue;
      const ImVec2 ts = ImGui::CalcTextSize(yt.labels[k].c_str());
      dl->AddText(ImVec2(x_right - ts.x - 4, y - ts.y * 0.5f), IM_COL32(150, 150, 160, 255), yt.labels[k].c_str());
      dl->AddLine(ImVec2(x_right, y), ImVec2(x_right + 3, y), IM_COL32(150, 150, 160, 255), 1.0f);
    }
  };
  draw_y_ticks(a0.x, a0.y, a1.y);
  const float bw = (a1.x - a0.x) / L;
  for (int l = 0; l < L; ++l) {
    double acc = 0;
    for (int i = 0; i < T; ++i) acc += run->tau[(size_t)l * T + i];
    const float m = (float)(acc / std::max(1, T));
    const ImU32 col = l == st.sel_layer ? col_run(0) : IM_COL32(110, 130, 160, 255);
    if (std::isfinite(m)) {
      dl->AddRectFilled(ImVec2(a0.x + l * bw + 2, Y(m)), ImVec2(a0.x + (l + 1) * bw - 2, a1.y), col);
    } else if (bw > 12) {  // every head of the layer ran at an override's t: no tau (NaN in the run)
      const char* text = bw > 60 ? "override" : "-";
      dl->AddText(ImVec2(a0.x + l * bw + 4, a1.y - ImGui::GetTextLineHeight() - 2), IM_COL32(150, 150, 160, 255), text);
    }
    if (bw > 20)
      dl->AddText(ImVec2(a0.x + l * bw + 4, a1.y + 1), IM_COL32(150, 150, 160, 255), ("L" + std::to_string(l)).c_str());
  }
  // The clip bounds over the bars, each labelled above its line; one too close to 0 to read is left out.
  for (float b : {tau_min * spec.tau_scale, tau_max * spec.tau_scale}) {
    if (b > hi || b - lo < 0.08f * (hi - lo)) continue;
    dl->AddLine(ImVec2(a0.x, Y(b)), ImVec2(a1.x, Y(b)), IM_COL32(230, 160, 60, 220), 1.5f);
    const std::string bl = "clip " + fmt("%.2f", b);
    const ImVec2 ts = ImGui::CalcTextSize(bl.c_str());
    const ImVec2 tp(a1.x - ts.x - 4, Y(b) - ts.y - 1);
    dl->AddRectFilled(ImVec2(tp.x - 2, tp.y), ImVec2(tp.x + ts.x + 2, tp.y + ts.y), IM_COL32(24, 26, 32, 220));
    dl->AddText(tp, IM_COL32(230, 160, 60, 255), bl.c_str());
  }
  // Per position of the selected layer, under the same clip bounds.
  const ImVec2 b0(o.x + w1 + 40, o.y + 4 + title_h), b1(o.x + avail.x - 8, o.y + hgt - 16);
  dl->AddRectFilled(b0, b1, IM_COL32(24, 26, 32, 255));
  auto Y2 = [&](float v) { return b1.y - (v - lo) / (hi - lo) * (b1.y - b0.y); };
  draw_y_ticks(b0.x, b0.y, b1.y);
  for (float b : {tau_min * spec.tau_scale, tau_max * spec.tau_scale})
    if (b <= hi && b - lo >= 0.08f * (hi - lo))
      dl->AddLine(ImVec2(b0.x, Y2(b)), ImVec2(b1.x, Y2(b)), IM_COL32(230, 160, 60, 140), 1.0f);
  for (int i = 0; i + 1 < T; ++i) {
    const float x0 = b0.x + (b1.x - b0.x) * i / std::max(1, T - 1),
                x1 = b0.x + (b1.x - b0.x) * (i + 1) / std::max(1, T - 1);
    dl->AddLine(ImVec2(x0, Y2(run->tau[(size_t)st.sel_layer * T + i])),
                ImVec2(x1, Y2(run->tau[(size_t)st.sel_layer * T + i + 1])), col_run(0), 1.5f);
  }
  const bool layer_overridden = T > 0 && !std::isfinite(run->tau[(size_t)st.sel_layer * T]);
  const std::string title = "layer " + std::to_string(st.sel_layer) + ": tau per position" +
                            (layer_overridden ? " (none: an override sets every head's t)" : "");
  dl->AddText(ImVec2(b0.x, o.y + 2), IM_COL32(170, 170, 180, 255), title.c_str());
  ImGui::Dummy(avail);
}

}  // namespace focalscope
