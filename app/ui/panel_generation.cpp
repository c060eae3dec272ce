// Generation timeline: generate tokens on the worker (greedy or sampled, under A's temperature) and watch the
// attention of each new token for the selected head as it arrives: one row per generated token, keys across.
#include <algorithm>
#include <cmath>

#include "focal_figures/colormap.h"
#include "ui.h"

namespace focalscope {

namespace {
bool steps_done(const std::shared_ptr<GenStream>& g) {
  std::lock_guard<std::mutex> lk(g->mu);
  return !g->ids.empty();
}
}  // namespace

void draw_generation(Ui& ui) {
  AppState& st = ui.st;
  ImGui::SetNextItemWidth(120);
  ImGui::SliderInt("tokens", &ui.gen_n, 1, 256);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(120);
  ImGui::SliderFloat("sampling temp", &ui.gen_sample_temp, 0.0f, 1.5f, ui.gen_sample_temp == 0.0f ? "greedy" : "%.2f");
  ImGui::SameLine();
  // Generating runs the model on the prompt: without either (a capture opened alone) the button is greyed.
  const bool can_generate = st.has_model() && st.n_tokens() > 0;
  ImGui::BeginDisabled(!can_generate);
  if (ImGui::Button("Generate")) {
    st.generate(ui.gen_n, ui.gen_sample_temp);
    ui.gen_rows_shown = (size_t)-1;
  }
  ImGui::EndDisabled();
  if (!can_generate && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("%s", st.has_model() ? "type a prompt first" : "generating needs the model: open it (Controls)");
  ui.labels["generation.generate"] = {can_generate ? "enabled" : "disabled"};
  auto g = st.gen;
  if (!g && !can_generate)  // said on the tab, as the Sweep tab does, not only in the button's tooltip
    ImGui::TextDisabled("%s", st.has_model()      ? "needs a prompt: type one and press Run"
                              : st.capture_only() ? "needs the model: Open its model (Update section)"
                                                  : "needs a model: open one (left column)");
  if (!g) {
    ImGui::TextDisabled("generates from the prompt under A's temperature; shows layer %d's attention per new token",
                        st.sel_layer);
    return;
  }
  std::vector<std::vector<float>> rows;
  std::string text;
  bool running;
  int layer, n_heads, plen;
  {
    std::lock_guard<std::mutex> lk(g->mu);
    rows = g->rows;
    text = g->text;
    running = g->running;
    layer = g->layer;
    n_heads = g->n_heads;
    plen = g->prompt_len;
  }
  const std::string gap = running ? std::string() : st.generation_gap();
  ui.labels["generation.stale"] = {gap};
  if (!running && steps_done(g) && gap.empty()) {
    ImGui::SameLine();
    if (ImGui::Button("Capture prompt + generated")) st.capture_generation();
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip(
          "Run A and B over exactly the prompt and the generated tokens; the token strip, the heatmap "
          "and the Output tab mark where generation begins, and export writes a generation capture");
  }
  if (!gap.empty()) ImGui::TextColored(ImVec4(1.0f, 0.75f, 0.3f, 1.0f), "%s", gap.c_str());  // a stale generation
  ImGui::TextWrapped("%s%s", text.c_str(), running ? " ..." : "");
  const int head = std::min(st.sel_head, n_heads - 1);
  const int steps = (int)rows.size();
  if (steps == 0) return;
  const int width = plen + steps;  // keys of the last row
  if (ui.gen_rows_shown != (size_t)steps * 1000 + head) {
    std::vector<uint8_t> px((size_t)width * steps * 4, 0);
    for (int s = 0; s < steps; ++s) {
      const int n = plen + s + 1;
      const std::vector<float>& r = rows[s];
      if (r.size() < (size_t)n_heads * n) continue;
      const float* p = r.data() + (size_t)head * n;
      float mx = 0;
      for (int k = 0; k < n; ++k) mx = std::max(mx, p[k]);
      for (int k = 0; k < width; ++k) {
        uint8_t* o = &px[((size_t)s * width + k) * 4];
        if (k >= n) {
          o[0] = o[1] = o[2] = 28;
        } else {
          const auto c = focal::figures::viridis8(mx > 0 ? p[k] / mx : 0);
          o[0] = c.r;
          o[1] = c.g;
          o[2] = c.b;
        }
        o[3] = 255;
      }
    }
    ui.gen_tex.upload(px, width, steps);
    ui.gen_rows_shown = (size_t)steps * 1000 + head;
  }
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  ImGui::TextDisabled("layer %d head %d: row = generated token, column = position (prompt: 0..%d); p / row max", layer,
                      head, plen - 1);
  const float h = std::max(20.0f, avail.y - 2 * ImGui::GetTextLineHeightWithSpacing());
  // ImGui carries an OpenGL texture name in its pointer-typed ImTextureID.
  ImGui::Image((ImTextureID)(intptr_t)ui.gen_tex.id, ImVec2(avail.x, h));  // NOLINT(performance-no-int-to-ptr)
  {  // where the prompt ends: keys from plen on were generated
    const ImVec2 mn = ImGui::GetItemRectMin();
    const float xg = mn.x + avail.x * (float)plen / (float)width;
    ImGui::GetWindowDrawList()->AddLine(ImVec2(xg, mn.y), ImVec2(xg, mn.y + h), col_generated(), 1.5f);
  }
  if (ImGui::IsItemHovered()) {
    const ImVec2 mn = ImGui::GetItemRectMin();
    const int k = (int)((ImGui::GetIO().MousePos.x - mn.x) / avail.x * width);
    const int s = (int)((ImGui::GetIO().MousePos.y - mn.y) / h * steps);
    if (s >= 0 && s < steps && k >= 0 && k <= plen + s) {
      std::string kp;
      {
        std::lock_guard<std::mutex> lk(g->mu);
        kp = k < plen ? st.file.pieces[k] : (k - plen < (int)g->pieces.size() ? g->pieces[k - plen] : "?");
      }
      const float* p = rows[s].data() + (size_t)head * (plen + s + 1);
      ImGui::SetTooltip("step %d attends to position %d '%s': p = %.4f", s, k, kp.c_str(), p[k]);
    }
  }
}

}  // namespace focalscope
