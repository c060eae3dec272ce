// Layer x head overview: one cell per head coloured by a per-head metric (mean over query rows 1..T-1) of run A,
// or the difference B - A; click a cell to drill down into that head.
#include <algorithm>
#include <cmath>

#include "ui.h"

namespace focalscope {

void draw_overview(Ui& ui, const ImVec4& r) {
  AppState& st = ui.st;
  if (begin_panel("Layers x heads", r)) {
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
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float label_w = 34.0f, label_h = ImGui::GetTextLineHeight() + 2.0f;
    const float caption_h = ImGui::GetTextLineHeightWithSpacing() + 14.0f;
    // Cells fill the panel: square when both fit, else as tall as the rows allow and up to 4x as wide (a
    // 30-layer model in a short panel keeps readable columns).
    const float fit_w = (avail.x - label_w) / H, fit_h = (avail.y - label_h - caption_h) / L;
    const float cell_h = std::max(3.0f, std::min(fit_w, fit_h));
    const float cell_w = std::max(cell_h, std::min(fit_w, 4.0f * cell_h));
    const float cell = std::min(cell_w, cell_h);  // for the label and value thresholds
    ImVec2 p0 = ImGui::GetCursorScreenPos();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int h = 0; h < H; ++h)
      if (cell_w > 14 || h % 4 == 0)
        dl->AddText(ImVec2(p0.x + label_w + h * cell_w + cell_w * 0.3f, p0.y), IM_COL32(160, 160, 170, 255),
                    std::to_string(h).c_str());
    p0.y += label_h;
    for (int l = 0; l < L; ++l) {
      if (cell_h > 12 || l % 4 == 0)
        dl->AddText(ImVec2(p0.x, p0.y + l * cell_h + cell_h * 0.5f - 7), IM_COL32(160, 160, 170, 255),
                    ("L" + std::to_string(l)).c_str());
      for (int h = 0; h < H; ++h) {
        const float v = val[(size_t)l * H + h];
        const ImVec2 a(p0.x + label_w + h * cell_w, p0.y + l * cell_h), b(a.x + cell_w - 1, a.y + cell_h - 1);
        ImU32 col = IM_COL32(40, 40, 46, 255);
        double t = 0.0;
        if (!std::isnan(v)) {
          if (diff)
            col = col_diverging(amax > 0 ? v / amax : 0.0);
          else {
            t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
            col = col_viridis(t);
          }
        }
        dl->AddRectFilled(a, b, col);
        if (l == st.sel_layer && h == st.sel_head) dl->AddRect(a, b, IM_COL32(255, 255, 255, 255), 0, 0, 2.0f);
        if (cell > 40 && !std::isnan(v)) {
          const std::string s = fmt(std::fabs(v) < 10 ? "%.2f" : "%.0f", v);
          const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
          dl->AddText(ImVec2(a.x + (cell_w - ts.x) / 2, a.y + (cell_h - ts.y) / 2),
                      (!diff && t > 0.6) ? IM_COL32(10, 10, 10, 255) : IM_COL32(240, 240, 240, 255), s.c_str());
        }
        ImGui::SetCursorScreenPos(a);
        ImGui::PushID(l * 10000 + h);
        if (ImGui::InvisibleButton("cell", ImVec2(cell_w - 1, cell_h - 1))) st.select(l, h, st.sel_query);
        if (ImGui::IsItemHovered()) {
          ImGui::BeginTooltip();
          ImGui::Text("layer %d head %d", l, h);
          for (int s = 0; s < (st.slots[1].run && st.compare ? 2 : 1); ++s)
            ImGui::TextColored(col_run_v4(s), "%s %s = %.4f", side_name(s), head_metric_name(m),
                               st.head_metric(s, l, h, m));
          ImGui::EndTooltip();
        }
        ImGui::PopID();
      }
    }
    ImGui::SetCursorScreenPos(ImVec2(p0.x, p0.y + L * cell_h + 4));
    if (!std::isnan(lo))
      ImGui::TextDisabled(diff ? "B - A, |max| %.3g" : "%.3g .. %.3g (propagated runs)", diff ? amax : lo, hi);
  }
  ImGui::End();
}

}  // namespace focalscope
