// The head heatmap: queries down, keys across, for the selected layer and head. A texture rebuilt only when the
// rows, the view or the options change, max-pooled to the panel's pixels (level of detail for long prompts);
// wheel zooms around the cursor, drag pans, double-click resets; hover shows query, key, probabilities, raw score.
#include <iterator>
#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstring>

#include "focal/metrics.h"
#include "ui.h"

namespace focalscope {

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ull; }
static uint64_t dbits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

void draw_heatmap(Ui& ui, const ImVec4& r) {
  AppState& st = ui.st;
  if (begin_panel("Head heatmap", r, ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse)) {
    ui.record_rect("heatmap.panel");  // the panel a `screenshot heatmap` takes
    const HeadRows& rows = st.head_rows();
    const int T = rows.T;
    // Options row.
    int show = (int)st.view.show;
    bool changed = ImGui::RadioButton("A", &show, 0);
    ImGui::SameLine();
    if (st.compare) {
      changed |= ImGui::RadioButton("B", &show, 1);
      ImGui::SameLine();
      changed |= ImGui::RadioButton("B - A", &show, 2);
      ImGui::SameLine();
    }
    if (!st.compare && show != 0) {
      show = 0;
      changed = true;
    }
    if (changed) {
      st.view.show = (ViewRun)show;
      st.state_version++;
    }
    {  // colour: auto (the figures' rule) / linear / log
      int c = (int)st.view.heat_color;
      const char* names[std::size(kHeatColors)];
      for (size_t k = 0; k < std::size(kHeatColors); ++k) names[k] = heat_color_name(kHeatColors[k]);
      ImGui::SetNextItemWidth(ImGui::CalcTextSize("linear").x + ImGui::GetFrameHeight() +
                              2 * ImGui::GetStyle().FramePadding.x);
      if (ImGui::Combo("##colour", &c, names, (int)std::size(kHeatColors))) {
        st.view.heat_color = kHeatColors[c];
        st.state_version++;
      }
      help_marker(
          "Colour of p. auto: log10 p when most rows shown peak below a tenth of the largest p (a diffuse head), "
          "else linear; the legend says which. A figure export takes the same choice (auto: the same rule over the "
          "figure's whole matrix).");
    }
    {  // on the same line when it and its (?) fit, else under it (a narrow panel cut it at its edge)
      const ImGuiStyle& sty = ImGui::GetStyle();
      const float need = ImGui::GetFrameHeight() + sty.ItemInnerSpacing.x + ImGui::CalcTextSize("hide sink (?)").x +
                         2 * sty.ItemSpacing.x;
      const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
      if (right - ImGui::GetItemRectMax().x >= need) ImGui::SameLine();
    }
    if (ImGui::Checkbox("hide sink", &st.view.hide_sink)) st.state_version++;
    help_marker("Drop key 0 (the first-token attention sink) and renormalise each row over the other keys.");
    // on the same line when it fits, else under it (at 1280 x 720 the button was cut to "re")
    const float reset_w = ImGui::CalcTextSize("reset view").x + 2 * ImGui::GetStyle().FramePadding.x;
    const float right_edge = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    if (right_edge - ImGui::GetItemRectMax().x >= reset_w + ImGui::GetStyle().ItemSpacing.x) ImGui::SameLine();
    if (ImGui::SmallButton("reset view")) ui.heat_view = HeatView{};
    const int side = show == 1 ? 1 : 0;
    if (st.config())
      ImGui::TextDisabled("layer %d head %d, %s", st.sel_layer, st.sel_head,
                          show == 2 ? "B - A" : run_title(st, side).c_str());
    else  // nothing open: no layer or head to name (a stats file alone selects in the Corpus tab)
      ImGui::TextDisabled("no model or capture open");
    if (const focal::ModelConfig* cfg = st.config(); cfg && focal::layer_window(*cfg, st.sel_layer) > 0) {
      // A legend swatch for the keys a sliding window hides (shaded apart from the causal mask).
      ImGui::SameLine();
      const ImVec2 sw = ImGui::GetCursorScreenPos();
      ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(sw.x, sw.y + 3), ImVec2(sw.x + 12, sw.y + 13),
                                                IM_COL32(62, 48, 78, 255));
      ImGui::SetCursorScreenPos(ImVec2(sw.x + 16, sw.y));
      ImGui::TextDisabled("outside the sliding window (%d keys)", focal::layer_window(*cfg, st.sel_layer));
    }
    if (rows.preview[side] || (show == 2 && (rows.preview[0] || rows.preview[1]))) {
      ImGui::SameLine();
      ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "preview: re-tempered stored scores");
    }
    // Long prompts: the rows of the new setting are computed on the view worker; until then the old ones, named.
    std::string pending_note;
    for (int s = 0; s < 2; ++s) {
      if (!rows.pending[s] || (show != 2 && s != side)) continue;
      pending_note += std::string(pending_note.empty() ? "" : "; ") + side_name(s) + ": computing rows" +
                      (rows.label[s].empty() ? "" : ", showing " + rows.label[s]);
    }
    ui.labels["heatmap.pending"] = {pending_note};
    if (!pending_note.empty()) {
      ImGui::SameLine();
      ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "%s", pending_note.c_str());
    }

    if (const std::string gap = st.rows_gap(); !gap.empty()) {  // a metrics-only capture: no matrix to draw
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "%s", gap.c_str());
      ImGui::PopTextWrapPos();
      ui.labels["heatmap.gap"] = {gap};
      ImGui::End();
      return;
    }
    // The image area: square, as large as fits, with room for axis labels.
    ImVec2 avail = ImGui::GetContentRegionAvail();
    const float legend_h = 2 * ImGui::GetTextLineHeightWithSpacing() + 8.0f;  // the colour bar and its numbers
    const float side_px = std::max(16.0f, std::min(avail.x, avail.y - legend_h));
    const ImVec2 p0 = ImGui::GetCursorScreenPos();
    ui.rects["heatmap"] = ImVec4(p0.x, p0.y, side_px, side_px);

    HeatView& v = ui.heat_view;
    if (v.T != T || v.k1 <= v.k0) v = HeatView{0, (double)T, 0, (double)T, T};
    ImGui::InvisibleButton("heat", ImVec2(side_px, side_px));
    const bool hovered = ImGui::IsItemHovered();
    ImGuiIO& io = ImGui::GetIO();
    if (T > 0 && hovered) {
      const double mx = (io.MousePos.x - p0.x) / side_px, my = (io.MousePos.y - p0.y) / side_px;
      if (io.MouseWheel != 0.0f) {  // zoom around the cursor
        const double f = io.MouseWheel > 0 ? 0.8 : 1.25;
        const double ck = v.k0 + mx * (v.k1 - v.k0), cq = v.q0 + my * (v.q1 - v.q0);
        double span = std::clamp((v.k1 - v.k0) * f, std::min(8.0, (double)T), (double)T);
        v.k0 = ck - mx * span;
        v.q0 = cq - my * span;
        v.k1 = v.k0 + span;
        v.q1 = v.q0 + span;
      }
      if (ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {
        const double s = (v.k1 - v.k0) / side_px;
        v.k0 -= io.MouseDelta.x * s;
        v.k1 -= io.MouseDelta.x * s;
        v.q0 -= io.MouseDelta.y * s;
        v.q1 -= io.MouseDelta.y * s;
      }
      if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) v = HeatView{0, (double)T, 0, (double)T, T};
      const double span = v.k1 - v.k0;  // keep the view inside the matrix
      v.k0 = std::clamp(v.k0, 0.0, std::max(0.0, T - span));
      v.q0 = std::clamp(v.q0, 0.0, std::max(0.0, T - span));
      v.k1 = v.k0 + span;
      v.q1 = v.q0 + span;
    }
    // Rebuild the texture when something it shows changed.
    const int tex_px = std::max(1, std::min({(int)side_px, 2048, std::max(1, (int)std::ceil(v.k1 - v.k0))}));
    uint64_t key = mix(mix(mix(mix(rows.version, dbits(v.k0)), dbits(v.q0)), dbits(v.k1)), (uint64_t)tex_px);
    key = mix(mix(mix(key, (uint64_t)st.view.show), (uint64_t)st.view.heat_color), (uint64_t)T);
    if (key != ui.heat_key && T > 0) {
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<uint8_t> px;
      ui.heat_vmax = build_heat_pixels(st, rows, v, tex_px, tex_px, px, nullptr, &ui.heat_log);
      ui.heat_tex.upload(px, tex_px, tex_px);
      ui.heat_key = key;
      ui.heat_build_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 p1(p0.x + side_px, p0.y + side_px);
    if (T > 0 && ui.heat_vmax < 0.0f) {  // B - A at this zoom needs cells that are not there (build_heat_pixels)
      const char* why = rows.diff_pending ? "B - A: computing its cells on the view worker..."
                                          : "B - A at this length: zoom in to fewer than 8 keys per pixel";
      ui.labels["heatmap.diff"] = {why};
      ImGui::GetWindowDrawList()->AddText(ImVec2(p0.x + 8, p0.y + 8), IM_COL32(255, 204, 77, 255), why);
    } else if (T > 0 && ui.heat_tex.id && (rows.shown(0) || rows.shown(1))) {
      // ImGui carries an OpenGL texture name in its pointer-typed ImTextureID.
      dl->AddImage((ImTextureID)(intptr_t)ui.heat_tex.id, p0, p1);  // NOLINT(performance-no-int-to-ptr)
      // The selected query row.
      const int q = st.query();
      const double yq = (q + 0.5 - v.q0) / (v.q1 - v.q0);
      if (yq >= 0 && yq <= 1)
        dl->AddLine(ImVec2(p0.x, p0.y + (float)yq * side_px), ImVec2(p1.x, p0.y + (float)yq * side_px),
                    IM_COL32(255, 255, 255, 110), 1.0f);
      // A generation capture: the first generated position P as a row edge (queries from P on) and a column edge
      // (keys from P on), each to the diagonal, clipped to the view.
      if (st.file.has_generated() && st.file.n_tokens() == T) {
        const double g = st.file.prompt_end();
        const float xg = p0.x + (float)((g - v.k0) / (v.k1 - v.k0)) * side_px;
        const float yg = p0.y + (float)((g - v.q0) / (v.q1 - v.q0)) * side_px;
        dl->PushClipRect(p0, p1, true);
        dl->AddLine(ImVec2(p0.x, yg), ImVec2(std::min(xg, p1.x), yg), col_generated(), 1.5f);
        dl->AddLine(ImVec2(xg, std::max(yg, p0.y)), ImVec2(xg, p1.y), col_generated(), 1.5f);
        dl->PopClipRect();
        ui.labels["heatmap.generated_from"] = {std::to_string(st.file.prompt_end())};
      }
    } else {
      dl->AddRectFilled(p0, p1, IM_COL32(30, 32, 38, 255));
      const char* msg =
          st.busy()
              ? "running the model..."
              : (T == 0 ? (st.has_model() ? "type a prompt and press Run" : "open a model or a capture (left column)")
                        : "no rows stored for this head");
      // centred, wrapped to the box (a small box cut "type a prompt" at its left edge); a box too small for it
      // stays empty (a word a line ran past it), the line above it saying the same
      const float wrap = std::max(side_px - 12.0f, 20.0f);
      const ImVec2 ts = ImGui::GetFont()->CalcTextSizeA(ImGui::GetFontSize(), FLT_MAX, wrap, msg);
      if (ts.y <= side_px - 8.0f && side_px >= 90.0f)
        dl->AddText(ImGui::GetFont(), ImGui::GetFontSize(),
                    ImVec2(p0.x + std::max(6.0f, (side_px - ts.x) / 2), p0.y + (side_px - ts.y) / 2),
                    IM_COL32(200, 200, 200, 255), msg, nullptr, wrap);
    }
    dl->AddRect(p0, p1, IM_COL32(90, 95, 110, 255));
    if (T > 0 && hovered && !ImGui::IsMouseDragging(ImGuiMouseButton_Left)) {
      const int k = (int)std::floor(v.k0 + (io.MousePos.x - p0.x) / side_px * (v.k1 - v.k0));
      const int q = (int)std::floor(v.q0 + (io.MousePos.y - p0.y) / side_px * (v.q1 - v.q0));
      if (k >= 0 && k < T && q >= 0 && q < T) {
        if (ImGui::IsMouseReleased(ImGuiMouseButton_Left) && io.MouseDragMaxDistanceSqr[0] < 9.0f)
          st.select(st.sel_layer, st.sel_head, q);
        ImGui::BeginTooltip();
        const int gen_from = st.file.prompt_end();
        ImGui::Text("query %d '%s'%s", q, st.file.pieces[q].c_str(), q >= gen_from ? " (generated)" : "");
        ImGui::Text("key   %d '%s'%s", k, st.file.pieces[k].c_str(), k >= gen_from ? " (generated)" : "");
        const focal::ModelConfig* cfg = st.config();
        const int lo = cfg ? focal::window_first_key(*cfg, st.sel_layer, q + 1) : 0;
        if (k > q) {
          ImGui::TextDisabled("masked (the key comes after the query)");
        } else if (k < lo) {
          ImGui::TextDisabled("outside the sliding window (%d keys): probability 0", cfg->arch.sliding_window);
        } else {
          for (int s = 0; s < 2; ++s)
            if (rows.shown(s))
              ImGui::TextColored(col_run_v4(s), "p %s = %.5f%s", side_name(s), rows.at(s, q, k),
                                 pending_suffix(rows, s).c_str());
          if (const float raw = st.raw_score(q, k); !std::isnan(raw)) ImGui::Text("raw score = %.4f", raw);
        }
        ImGui::EndTooltip();
      }
    }
    // Colour bar with numbered round ticks: p on [0, max in view], log10 p on [1e-4, 1], or B - A on
    // [-max |B - A|, +max |B - A|] (the B - A bar had no numbers).
    ImGui::SetCursorScreenPos(ImVec2(p0.x, p1.y + 4.0f));
    const float lw = std::min(side_px * 0.55f, 260.0f);
    const ImVec2 l0 = ImGui::GetCursorScreenPos();
    const ScaleKind kind = show == 2 ? ScaleKind::kDiverging : (ui.heat_log ? ScaleKind::kLog10 : ScaleKind::kLinear);
    const double lo = kind == ScaleKind::kLog10 ? -4.0 : 0.0, hi = kind == ScaleKind::kLog10 ? 0.0 : ui.heat_vmax;
    const float used = ui.heat_vmax < 0.0f || T == 0  // nothing drawn: no scale
                           ? 0.0f
                           : draw_colorbar_h(ui, "heatmap.colorbar", dl, ImVec2(l0.x, l0.y + 2), lw, 9, lo, hi, kind);
    if (used > 0.0f) {  // a scale and a view only when rows are drawn (an empty session read "keys 0..-1")
      ImGui::SetCursorScreenPos(ImVec2(l0.x + lw + 12, l0.y));
      const bool automatic = st.view.heat_color == HeatColor::kAuto;
      const char* legend = show == 2     ? "B - A (blue: B lower)"
                           : ui.heat_log ? (automatic ? "p (log, auto)" : "p (log)")
                                         : (automatic ? "p (linear, auto)" : "p");
      ImGui::TextDisabled("%s", legend);
      ui.labels["heatmap.legend"] = {legend};  // the screenshot sidecar's record of the scale shown
      ImGui::SetCursorScreenPos(ImVec2(l0.x + lw + 12, l0.y + ImGui::GetTextLineHeight()));
      ImGui::TextDisabled("keys %d..%d, queries %d..%d%s", (int)v.k0, (int)std::ceil(v.k1) - 1, (int)v.q0,
                          (int)std::ceil(v.q1) - 1, tex_px < (int)(v.k1 - v.k0) ? " (max-pooled)" : "");
    }
    ImGui::SetCursorScreenPos(ImVec2(l0.x, l0.y + std::max(used + 2, 2 * ImGui::GetTextLineHeight())));
  }
  ImGui::End();
}

}  // namespace focalscope
