// A metric against the focal temperature t: one model run per t on the worker (log-spaced t), the selected head,
// its layer's mean and the prompt loss, with the current t of A marked.
#include <algorithm>
#include <cmath>

#include "focal/error.h"
#include "overrides.h"
#include "ui.h"

namespace focalscope {

// One plot: lines against t on a log axis, round y ticks, t labels that never overlap, a dashed marker at t = 1
// (standard attention) and a solid one at A's t. name: where the labels drawn are recorded.
// one_label: the t = 1 marker's words ("standard", or "t = 1" when overrides stay fixed and t = 1 is not standard).
static void plot(Ui& ui, const char* id, const std::vector<float>& xs, const std::vector<std::vector<float>>& ys,
                 const std::vector<ImU32>& cols, float mark_x, ImVec2 size, const char* one_label) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton(id, size);
  const float axis_w = 44, axis_h = 18;
  const ImVec2 p0(o.x + axis_w, o.y + 4), p1(o.x + size.x - 8, o.y + size.y - axis_h);
  if (p1.x - p0.x < 20 || p1.y - p0.y < 20) return;
  dl->AddRectFilled(p0, p1, IM_COL32(24, 26, 32, 255));
  float lo = INFINITY, hi = -INFINITY;
  for (auto& y : ys)
    for (float v : y)
      if (std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
  if (!(hi > lo)) hi = lo + 1;
  const float pad = (hi - lo) * 0.06f;
  const focal::figures::Ticks yt =
      round_ticks(ui, std::string("sweep.") + id + ".y", lo - pad, hi + pad, std::max(2, (int)((p1.y - p0.y) / 28)));
  lo -= pad;
  hi += pad;
  const float lx0 = std::log(xs.front()), lx1 = std::log(xs.back());
  auto X = [&](float x) { return p0.x + (std::log(x) - lx0) / (lx1 - lx0) * (p1.x - p0.x); };
  auto Y = [&](float y) { return p1.y - (y - lo) / (hi - lo) * (p1.y - p0.y); };
  const ImU32 label_col = IM_COL32(150, 150, 160, 255);
  for (size_t g = 0; g < yt.values.size(); ++g) {
    const float y = Y((float)yt.values[g]);
    dl->AddLine(ImVec2(p0.x, y), ImVec2(p1.x, y), IM_COL32(60, 62, 70, 255));
    const ImVec2 ts = ImGui::CalcTextSize(yt.labels[g].c_str());
    dl->AddText(ImVec2(p0.x - ts.x - 4, y - ts.y / 2), label_col, yt.labels[g].c_str());
  }
  // t labels: 1 first (always), then the others in order of preference, skipping any that would touch a label
  // already placed (0.4 used to overlap 0.5).
  std::vector<std::pair<float, float>> placed;
  std::vector<std::string> shown, extents;  // extents: "x0:x1" in pixels, for the screenshot tests' overlap check
  for (float t : {1.0f, 0.1f, 0.2f, 0.5f, 2.0f, 0.3f, 0.4f, 0.7f, 1.5f}) {
    if (t < xs.front() * 0.999f || t > xs.back() * 1.001f) continue;
    const std::string s = fmt("%g", t);
    const float w = ImGui::CalcTextSize(s.c_str()).x, x = X(t) - w / 2;
    bool clash = false;
    for (auto [a, b] : placed) clash |= x < b + 6 && x + w > a - 6;
    if (clash) continue;
    placed.push_back({x, x + w});
    extents.push_back(fmt("%.1f", x) + ":" + fmt("%.1f", x + w));
    dl->AddLine(ImVec2(X(t), p1.y), ImVec2(X(t), p1.y + 3), label_col);
    dl->AddText(ImVec2(x, p1.y + 3), label_col, s.c_str());
    shown.push_back(s);
  }
  // Both lists in t order, each label beside its own extent (the extents stayed in drawing order).
  std::vector<size_t> order(shown.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return std::stof(shown[a]) < std::stof(shown[b]); });
  std::vector<std::string> shown_t, extents_t;
  for (size_t i : order) {
    shown_t.push_back(shown[i]);
    extents_t.push_back(extents[i]);
  }
  ui.labels[std::string("sweep.") + id + ".t"] = shown_t;
  ui.labels[std::string("sweep.") + id + ".t.extent"] = extents_t;
  // t = 1: standard attention, dashed.
  if (1.0f >= xs.front() && 1.0f <= xs.back()) {
    ui.labels[std::string("sweep.") + id + ".standard_marker"] = {fmt("%.1f", X(1.0f))};
    for (float y = p0.y; y < p1.y; y += 8)
      dl->AddLine(ImVec2(X(1.0f), y), ImVec2(X(1.0f), std::min(p1.y, y + 4)), IM_COL32(200, 200, 210, 200), 1.0f);
  }
  for (size_t s = 0; s < ys.size(); ++s)
    for (size_t i = 0; i + 1 < xs.size(); ++i)
      if (std::isfinite(ys[s][i]) && std::isfinite(ys[s][i + 1]))
        dl->AddLine(ImVec2(X(xs[i]), Y(ys[s][i])), ImVec2(X(xs[i + 1]), Y(ys[s][i + 1])), cols[s],
                    s == 0 ? 2.5f : 1.5f);
  if (mark_x > 0 && mark_x >= xs.front() && mark_x <= xs.back())
    dl->AddLine(ImVec2(X(mark_x), p0.y), ImVec2(X(mark_x), p1.y), IM_COL32(255, 255, 255, 160), 1.5f);
  if (1.0f >= xs.front() && 1.0f <= xs.back()) {
    // At the top of the plot or at its bottom, whichever the curves leave free over the label's width (its box hid
    // the curves past t = 1, which rise to the top there); over them, on the plot's background, when neither is.
    const ImVec2 ts = ImGui::CalcTextSize(one_label);
    const float x = std::min(X(1.0f) + 3, p1.x - ts.x - 1);
    float curve_top = INFINITY, curve_bottom = -INFINITY;  // screen y of the curves within the label's x span
    for (size_t s = 0; s < ys.size(); ++s)
      for (size_t i = 0; i + 1 < xs.size(); ++i) {
        const float xa = X(xs[i]), xb = X(xs[i + 1]);
        if (xb < x - 1 || xa > x + ts.x + 1 || !std::isfinite(ys[s][i]) || !std::isfinite(ys[s][i + 1])) continue;
        for (float y : {Y(ys[s][i]), Y(ys[s][i + 1])}) {
          curve_top = std::min(curve_top, y);
          curve_bottom = std::max(curve_bottom, y);
        }
      }
    const float top_y = p0.y + 2, bottom_y = p1.y - ts.y - 2;
    const bool top_free = curve_top > top_y + ts.y + 2, bottom_free = curve_bottom < bottom_y - 2;
    const float y = top_free || !bottom_free ? top_y : bottom_y;
    if (!top_free && !bottom_free)
      dl->AddRectFilled(ImVec2(x - 1, y - 1), ImVec2(x + ts.x + 1, y + 1 + ts.y), IM_COL32(22, 24, 30, 220));
    dl->AddText(ImVec2(x, y), IM_COL32(200, 200, 210, 220), one_label);
    ui.labels[std::string("sweep.") + id + ".one_label"] = {one_label};
  }
}

void draw_sweep(Ui& ui) {
  AppState& st = ui.st;
  ImGui::BeginDisabled(!st.has_model());  // a sweep runs the model (a capture opened alone cannot)
  if (ImGui::Button("Run sweep t = 0.1 .. 1.5")) st.run_sweep(0.1f, 1.5f, 15);
  ImGui::EndDisabled();
  ImGui::SameLine();
  static const int kMetrics[] = {focal::kEntropyNats, focal::kEntropyNorm, focal::kEffSupport,
                                 focal::kMaxProb,     focal::kTailMass,    focal::kSinkMass};
  ImGui::SetNextItemWidth(150);
  if (ImGui::BeginCombo("metric", focal::row_metric_name(ui.sweep_metric))) {
    for (int m : kMetrics)
      if (ImGui::Selectable(focal::row_metric_name(m), m == ui.sweep_metric)) ui.sweep_metric = m;
    ImGui::EndCombo();
  }
  const auto sw = st.sweep;
  if (!sw) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
    ImGui::TextWrapped("runs the model once per t on the current prompt (A's per-layer / per-head overrides kept)");
    if (st.capture_only())
      ImGui::TextWrapped("needs the model: %s", st.capture_model.available ? "Open its model (Update section)"
                                                                           : st.capture_model.why_not.c_str());
    ImGui::PopStyleColor();
    return;
  }
  const int S = (int)sw->temps.size(), L = sw->n_layers, H = sw->n_heads, M = focal::kNumRowMetrics;
  if (st.sel_layer >= L || st.sel_head >= H) return;
  std::vector<float> head(S), layer_mean(S), loss(sw->mean_nll);
  for (int s = 0; s < S; ++s) {
    head[s] = sw->head_metrics[(((size_t)s * L + st.sel_layer) * H + st.sel_head) * M + ui.sweep_metric];
    double acc = 0;
    for (int h = 0; h < H; ++h) acc += sw->head_metrics[(((size_t)s * L + st.sel_layer) * H + h) * M + ui.sweep_metric];
    layer_mean[s] = (float)(acc / H);
  }
  const focal::TempSpec& a = st.slots[0].spec;
  // A's fixed part changed since the sweep ran (an override): its curves are of another setting.
  const bool stale = sweep_key(a) != sw->base_key;
  std::pair<std::string, std::string> names{sw->base_label, a.label()};
  if (stale) {
    try {  // equal labels of other settings are told apart by their overrides
      names = labels_apart(focal::TempSpec::from_json(sw->base_spec_json, "sweep"), a);
    } catch (const focal::Error&) {}
  }
  const std::string stale_text =
      stale ? "swept t with the rest of A as " + names.first + "; A is now " + names.second + ": run the sweep again"
            : "";
  ui.labels["sweep.stale"] = {stale_text};
  if (stale) ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.3f, 1.0f), "%s", stale_text.c_str());
  // t = 1 is standard attention only without overrides
  const char* one_label = sw->base_key == sweep_key(focal::TempSpec::focal(1.0f)) ? "standard" : "t = 1";
  const float mark =
      a.mode == focal::AttnMode::kFocal ? a.focal_temp : (a.mode == focal::AttnMode::kStandard ? 1.0f : -1.0f);
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  // The sweep varies A's setting: the head's line and the loss take A's colour, the layer mean the first category
  // colour that is neither A's nor B's (category 2 was A's own green when A ran learned attention).
  const ImU32 head_col = col_run(0);
  ImU32 mean_col = col_run(2);
  for (int k = 2; k < 10 && (mean_col == col_run(0) || mean_col == col_run(1)); ++k) mean_col = col_run(k + 1);
  ui.labels["sweep.colours"] = {"head=" + col_hex(head_col), "layer_mean=" + col_hex(mean_col),
                                "loss=" + col_hex(head_col)};
  ImGui::BeginGroup();
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(head_col), "head %d.%d", st.sel_layer, st.sel_head);
  ImGui::SameLine();
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(mean_col), "layer %d mean", st.sel_layer);
  ImGui::SameLine();
  ImGui::TextDisabled("%s vs t (log axis); white line: A's t, dashed: t = 1", focal::row_metric_name(ui.sweep_metric));
  const float plot_h = avail.y - 26 - (stale ? ImGui::GetTextLineHeightWithSpacing() : 0.0f);
  plot(ui, "metric", sw->temps, {head, layer_mean}, {head_col, mean_col}, mark, ImVec2(avail.x * 0.6f, plot_h),
       one_label);
  ImGui::EndGroup();
  ImGui::SameLine();
  ImGui::BeginGroup();
  ImGui::TextDisabled("prompt loss (nats/token) vs t");
  plot(ui, "loss", sw->temps, {loss}, {head_col}, mark, ImVec2(avail.x * 0.38f, plot_h), one_label);
  ImGui::EndGroup();
}

}  // namespace focalscope
