// The paper's Fig. 1, live: the selected query's attention over its context, run A and run B overlaid (A filled,
// B as a line), with their entropies.
#include <algorithm>
#include <cmath>

#include "ui.h"

namespace focalscope {

void draw_distribution(Ui& ui, const ImVec4& r) {
  AppState& st = ui.st;
  if (begin_panel("Distribution of the selected query", r)) {
    ui.record_rect("distribution");
    const HeadRows& rows = st.head_rows();
    const int T = rows.T, q = st.query();
    if (T == 0 || (rows.p[0].empty() && rows.p[1].empty())) {
      ImGui::TextDisabled("no run yet");
      ImGui::End();
      return;
    }
    ImGui::Text("query %d '%s'", q, st.file.pieces[q].c_str());
    for (int s = 0; s < 2; ++s) {
      if (rows.p[s].empty()) continue;
      const float* m = &rows.metrics[s][(size_t)q * focal::kNumRowMetrics];
      ImGui::SameLine();
      // With the sink hidden, H and max are of the renormalised keys 1..q; the sink mass is the whole row's.
      ImGui::TextColored(col_run_v4(s), "  %s: H %.2f nats, max %.2f, sink %.2f%s", side_name(s),
                         m[focal::kEntropyNats], m[focal::kMaxProb], m[focal::kSinkMass],
                         st.view.hide_sink ? " (hidden)" : "");
    }
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float axis_w = 38.0f, axis_h = 18.0f;
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const ImVec2 p0(o.x + axis_w, o.y + 4), p1(o.x + avail.x - 4, o.y + avail.y - axis_h);
    if (p1.x - p0.x < 20 || p1.y - p0.y < 20) {
      ImGui::End();
      return;
    }
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddRectFilled(p0, p1, IM_COL32(24, 26, 32, 255));
    const int n = q + 1;
    float pmax = 0.0f;
    for (int s = 0; s < 2; ++s)
      if (!rows.p[s].empty())
        for (int k = 0; k < n; ++k) pmax = std::max(pmax, rows.p[s][(size_t)q * T + k]);
    pmax = pmax > 0 ? std::min(1.0f, pmax * 1.08f) : 1.0f;
    const float W = p1.x - p0.x, Hh = p1.y - p0.y;
    for (int g = 0; g <= 4; ++g) {  // grid and y labels
      const float y = p1.y - Hh * g / 4.0f;
      dl->AddLine(ImVec2(p0.x, y), ImVec2(p1.x, y), IM_COL32(60, 62, 70, 255));
      dl->AddText(ImVec2(o.x, y - 7), IM_COL32(150, 150, 160, 255), fmt("%.2f", pmax * g / 4.0).c_str());
    }
    // Bars, aggregated by max when there are more keys than pixels.
    const int cols = std::max(1, std::min(n, (int)W));
    for (int s = 0; s < 2; ++s) {
      if (rows.p[s].empty()) continue;
      const float* p = &rows.p[s][(size_t)q * T];
      ImVec2 prev;
      for (int c = 0; c < cols; ++c) {
        const int ka = (int)((long)c * n / cols), kb = std::max(ka + 1, (int)((long)(c + 1) * n / cols));
        float v = 0.0f;
        for (int k = ka; k < kb; ++k) v = std::max(v, p[k]);
        const float x0 = p0.x + W * c / cols, x1 = p0.x + W * (c + 1) / cols;
        const float y = p1.y - Hh * v / pmax;
        if (s == 0) {
          dl->AddRectFilled(ImVec2(x0 + (cols < W / 3 ? 1.0f : 0.0f), y),
                            ImVec2(std::max(x0 + 1, x1 - (cols < W / 3 ? 1.0f : 0.0f)), p1.y),
                            (col_run(0) & 0x00FFFFFF) | 0xD0000000);
        } else {
          const ImVec2 a(x0, y), b(x1, y);
          if (c > 0) dl->AddLine(prev, a, col_run(1), 2.0f);
          dl->AddLine(a, b, col_run(1), 2.0f);
          prev = b;
        }
      }
    }
    // x labels: positions, or the tokens when they fit.
    const float per = W / n;
    for (int k = 0; k < n; ++k) {
      const bool fits = per > 34.0f;
      if (!fits && k % std::max(1, (int)std::ceil(60.0f / per)) != 0) continue;
      const std::string s = fits ? st.file.pieces[k].substr(0, 6) : std::to_string(k);
      dl->AddText(ImVec2(p0.x + per * k + 1, p1.y + 2), IM_COL32(150, 150, 160, 255), s.c_str());
    }
    ImGui::SetCursorScreenPos(p0);
    ImGui::InvisibleButton("dist", ImVec2(W, Hh));
    if (ImGui::IsItemHovered()) {
      const int k = std::clamp((int)((ImGui::GetIO().MousePos.x - p0.x) / W * n), 0, n - 1);
      ImGui::BeginTooltip();
      ImGui::Text("key %d '%s'", k, st.file.pieces[k].c_str());
      for (int s = 0; s < 2; ++s)
        if (!rows.p[s].empty())
          ImGui::TextColored(col_run_v4(s), "p %s = %.5f", side_name(s), rows.p[s][(size_t)q * T + k]);
      ImGui::EndTooltip();
    }
  }
  ImGui::End();
}

}  // namespace focalscope
