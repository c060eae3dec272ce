// Axis and colour-bar helpers for the panels: round (1-2-5) ticks from the figures module, and horizontal colour
// bars with numbered ticks. Every label drawn is recorded per name for the screenshot sidecar, so the tests read
// what a panel printed on its axes.
#include <algorithm>
#include <cmath>

#include "ui.h"

namespace focalscope {

namespace fig = focal::figures;

fig::Ticks round_ticks(Ui& ui, const std::string& name, double lo, double hi, int max_ticks) {
  fig::Ticks t = fig::nice_ticks(lo, hi, max_ticks, false);
  ui.labels[name] = t.labels;
  return t;
}

float draw_colorbar_h(Ui& ui, const std::string& name, ImDrawList* dl, ImVec2 pos, float w, float h, double lo,
                      double hi, ScaleKind kind) {
  if (w < 8) return 0.0f;
  const double a = kind == ScaleKind::kDiverging ? -hi : lo;
  if (!(hi > a)) {  // every cell holds one value (a layer of zero sink mass, B = A): one colour, that value named
    const ImU32 c = kind == ScaleKind::kDiverging ? col_diverging(0.0) : col_viridis(0.5);
    dl->AddRectFilled(pos, ImVec2(pos.x + w, pos.y + h), c);
    dl->AddRect(pos, ImVec2(pos.x + w, pos.y + h), IM_COL32(120, 125, 140, 255));
    const double v = kind == ScaleKind::kDiverging ? 0.0 : kind == ScaleKind::kLog10 ? std::pow(10.0, lo) : lo;
    const std::string label = (v == 0.0 ? std::string("0") : fmt("%.3g", v)) + " in every cell";
    const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
    const float x = pos.x + w / 2;
    dl->AddLine(ImVec2(x, pos.y + h), ImVec2(x, pos.y + h + 3), IM_COL32(170, 170, 180, 255));
    dl->AddText(ImVec2(std::max(pos.x, x - ts.x / 2), pos.y + h + 3), IM_COL32(185, 185, 195, 255), label.c_str());
    ui.labels[name] = {label};
    return h + 3 + ImGui::GetTextLineHeight();
  }
  for (int i = 0; i < (int)w; ++i) {
    const double f = i / std::max(1.0, (double)w - 1.0);
    const ImU32 c = kind == ScaleKind::kDiverging ? col_diverging(2.0 * f - 1.0) : col_viridis(f);
    dl->AddRectFilled(ImVec2(pos.x + i, pos.y), ImVec2(pos.x + i + 1, pos.y + h), c);
  }
  dl->AddRect(pos, ImVec2(pos.x + w, pos.y + h), IM_COL32(120, 125, 140, 255));
  fig::Ticks t = kind == ScaleKind::kLog10 ? fig::log10_ticks(lo, hi, 6) : fig::nice_ticks(a, hi, 5, false);
  if (kind == ScaleKind::kLog10)  // 10⁻⁴ is not in the UI font: 1e-4
    for (size_t i = 0; i < t.labels.size(); ++i) t.labels[i] = t.values[i] == 0 ? "1" : fmt("1e%.0f", t.values[i]);
  // The minus sign of the figures (U+2212) may be missing from the UI font: ASCII here.
  for (std::string& s : t.labels)
    if (s.rfind("\xE2\x88\x92", 0) == 0) s = "-" + s.substr(3);
  std::vector<std::string> shown;
  float last_right = -1e9f;
  for (size_t i = 0; i < t.values.size(); ++i) {
    const float x = pos.x + (float)((t.values[i] - a) / (hi - a)) * w;
    if (x < pos.x - 0.5f || x > pos.x + w + 0.5f) continue;
    const ImVec2 ts = ImGui::CalcTextSize(t.labels[i].c_str());
    const float lx = std::clamp(x - ts.x / 2, pos.x, pos.x + w - ts.x);  // the end labels stay within the bar
    dl->AddLine(ImVec2(x, pos.y + h), ImVec2(x, pos.y + h + 3), IM_COL32(170, 170, 180, 255));
    if (lx < last_right + 6) continue;  // never overlap
    dl->AddText(ImVec2(lx, pos.y + h + 3), IM_COL32(185, 185, 195, 255), t.labels[i].c_str());
    last_right = lx + ts.x;
    shown.push_back(t.labels[i]);
  }
  ui.labels[name] = shown;
  return h + 3 + ImGui::GetTextLineHeight();
}

}  // namespace focalscope
