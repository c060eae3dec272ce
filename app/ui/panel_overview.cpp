// Layer x head overview: one cell per head coloured by a per-head metric (mean over query rows 1..T-1, or the
// induction score) of run A, or the difference B - A, with a numbered colour bar; hover shows the values, click a
// cell to drill down into that head. Many layers (30 x 9) are laid out across when that gives larger cells.
#include <algorithm>
#include <cmath>

#include "ui.h"

namespace focalscope {

void draw_overview(Ui& ui, const ImVec4& r) {
  AppState& st = ui.st;
  if (begin_panel("Layers x heads", r, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse)) {
    ui.record_rect("overview");
    const focal::ModelConfig* c = st.config();
    static const int kMetrics[] = {focal::kEntropyNats, focal::kEntropyNorm,  focal::kEffSupport,
                                   focal::kMaxProb,     focal::kTopkMass,     focal::kTailMass,
                                   focal::kSinkMass,    focal::kRelevantMass, kInductionScore};
    const char* cur = head_metric_name(st.view.overview_metric);
    ImGui::SetNextItemWidth(150);
    if (ImGui::BeginCombo("##metric", cur)) {
      for (int m : kMetrics)
        if (ImGui::Selectable(head_metric_name(m), m == st.view.overview_metric)) st.view.overview_metric = m;
      ImGui::EndCombo();
    }
    ImGui::SameLine();
    if (st.compare)
      ImGui::Checkbox("B - A", &st.view.overview_diff);
    else
      st.view.overview_diff = false;
    if (!c || !st.slots[0].run) {
      ImGui::TextDisabled("no run yet");
      ImGui::End();
      return;
    }
    const int L = c->n_layers, H = c->n_heads, m = st.view.overview_metric;
    const bool diff = st.view.overview_diff && st.slots[1].run;
    // The grid holds the runs' numbers: a side whose setting changed since (preview) shows its run's, named.
    std::string stale;
    for (int s = 0; s < (diff ? 2 : 1); ++s)
      if (!st.readouts_current(s))
        stale += std::string(stale.empty() ? "" : ", ") + side_name(s) + ": run " + st.slots[s].run_spec.label();
    if (!stale.empty()) {
      ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "%s (not propagated)", stale.c_str());
      ui.labels["overview.run"] = {stale + " (not propagated)"};
    }
    std::vector<float> val((size_t)L * H);
    float lo = INFINITY, hi = -INFINITY;
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        float v = st.head_metric(0, l, h, m);
        if (diff) v = st.head_metric(1, l, h, m) - v;
        val[(size_t)l * H + h] = v;
        if (!std::isnan(v)) {
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
      }
    const float amax = std::max(std::fabs(lo), std::fabs(hi));
    std::string gap = st.head_metric_gap(0, m);
    if (gap.empty() && diff) gap = st.head_metric_gap(1, m);
    if (!gap.empty()) {  // no head has the metric: say why instead of an empty grid
      ImGui::TextDisabled("%s: n/a — %s", head_metric_name(m), gap.c_str());
      ui.labels["overview.unavailable"] = {std::string(head_metric_name(m)) + ": n/a — " + gap};
    }
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float lh = ImGui::GetTextLineHeight();
    const float label_w = ImGui::CalcTextSize("L00").x + 6.0f, label_h = lh + 2.0f;
    const float bar_h = 9.0f + 3.0f + lh + 4.0f;  // the colour bar and its numbers
    // Layers down and heads across, or (when it gives larger cells, e.g. 30 x 9 in a wide panel) layers across.
    const float room_w = avail.x - label_w - 4.0f, room_h = avail.y - label_h - bar_h;
    auto cell_of = [&](int rows, int cols) { return std::min(room_w / cols, room_h / rows); };
    const bool across = L > H && cell_of(H, L) > cell_of(L, H);
    const int rows = across ? H : L, cols = across ? L : H;
    // Cells fill the panel: square when both fit, else up to 3x as wide as tall (at least 16 px wide when the width
    // allows, so that 32 x 32 heads in a short panel stay columns one can aim at).
    const float fit_w = room_w / cols, fit_h = room_h / rows;
    const float cell_h = std::max(3.0f, std::min(fit_w, fit_h));
    const float cell_w = std::max(cell_h, std::min(fit_w, std::max(3.0f * cell_h, 16.0f)));
    // A 1 px gap separates cells of 6 px or more; smaller ones touch, so the grid reads as one heatmap.
    const float gap_w = cell_w >= 6.0f ? 1.0f : 0.0f, gap_h = cell_h >= 6.0f ? 1.0f : 0.0f;
    ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImU32 label_col = IM_COL32(160, 160, 170, 255);
    const char* col_prefix = across ? "L" : "";
    const char* row_prefix = across ? "H" : "L";
    const float col_label_w =  // the widest column label, so that "10" .. "31" do not run together
        ImGui::CalcTextSize((std::string(col_prefix) + std::to_string(std::max(cols - 1, 0))).c_str()).x + 6.0f;
    const int col_step = std::max(1, (int)std::ceil(col_label_w / cell_w));
    for (int k = 0; k < cols; k += col_step)
      dl->AddText(ImVec2(p0.x + label_w + k * cell_w + 1, p0.y), label_col, (col_prefix + std::to_string(k)).c_str());
    p0.y += label_h;
    const int row_step = std::max(1, (int)std::ceil(lh / cell_h));
    for (int k = 0; k < rows; k += row_step)
      dl->AddText(ImVec2(p0.x, p0.y + k * cell_h + cell_h * 0.5f - lh * 0.5f), label_col,
                  (row_prefix + std::to_string(k)).c_str());
    for (int rr = 0; rr < rows; ++rr)
      for (int cc = 0; cc < cols; ++cc) {
        const int l = across ? cc : rr, h = across ? rr : cc;
        const float v = val[(size_t)l * H + h];
        const ImVec2 a(p0.x + label_w + cc * cell_w, p0.y + rr * cell_h), b(a.x + cell_w - gap_w, a.y + cell_h - gap_h);
        ImU32 col = IM_COL32(40, 40, 46, 255);
        double t = 0.0;
        if (!std::isnan(v)) {
          if (diff) {
            col = col_diverging(amax > 0 ? v / amax : 0.0);
          } else {
            t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
            col = col_viridis(t);
          }
        }
        dl->AddRectFilled(a, b, col);
        if (l == st.sel_layer && h == st.sel_head) dl->AddRect(a, b, IM_COL32(255, 255, 255, 255), 0, 0, 2.0f);
        const std::string s = std::isnan(v) ? std::string() : fmt(std::fabs(v) < 10 ? "%.2f" : "%.0f", v);
        const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
        // The value in its cell whenever it fits (a wide, short cell kept none: the test was 40 px both ways).
        if (!s.empty() && ts.x + 6.0f <= cell_w - gap_w && ts.y + 2.0f <= cell_h - gap_h) {
          dl->AddText(ImVec2(a.x + (cell_w - ts.x) / 2, a.y + (cell_h - ts.y) / 2),
                      (!diff && t > 0.6) ? IM_COL32(10, 10, 10, 255) : IM_COL32(240, 240, 240, 255), s.c_str());
        }
        ImGui::SetCursorScreenPos(a);
        ImGui::PushID(l * 10000 + h);
        if (ImGui::InvisibleButton("cell", ImVec2(cell_w - 1, cell_h - 1))) st.select(l, h, st.sel_query);
        if (ImGui::IsItemHovered()) {
          ImGui::BeginTooltip();
          ImGui::Text("layer %d head %d", l, h);
          for (int s = 0; s < (st.slots[1].run && st.compare ? 2 : 1); ++s)  // the run's own setting when previewing
            ImGui::TextColored(col_run_v4(s), "%s %s = %.4f%s", side_name(s), head_metric_name(m),
                               st.head_metric(s, l, h, m),
                               st.readouts_current(s) ? "" : (" (run " + st.slots[s].run_spec.label() + ")").c_str());
          if (diff) ImGui::Text("B - A = %+.4f", v);
          ImGui::EndTooltip();
        }
        ImGui::PopID();
      }
    // Numbered colour bar under the cells.
    if (!std::isnan(lo) && std::isfinite(lo)) {
      const ImVec2 b0(p0.x + label_w, p0.y + rows * cell_h + 4);
      const float bw = std::min(cols * cell_w, 320.0f);
      draw_colorbar_h(ui, "overview.colorbar", dl, b0, bw, 9, diff ? 0.0 : lo, diff ? amax : hi,
                      diff ? ScaleKind::kDiverging : ScaleKind::kLinear);
      dl->AddText(ImVec2(b0.x + bw + 10, b0.y - 2), label_col, diff ? "B - A" : head_metric_name(m));
    }
  }
  ImGui::End();
}

}  // namespace focalscope
