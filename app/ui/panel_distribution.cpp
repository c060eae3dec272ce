// The paper's Fig. 1, live: the selected query's attention over its context, runs A and B side by side (split bars
// when the keys are wide enough, else B's bars behind A's, both translucent), with their entropies. A key window
// (the last N keys up to the query) for long prompts; round ticks; the top keys named at their bars.
#include <algorithm>
#include <cmath>

#include "ui.h"

namespace focalscope {

namespace {

// Token text for a label: leading spaces dropped (a space-only piece is ␣, as figures draw it), at most 12 bytes.
std::string short_piece(const std::string& piece) {
  std::string s = piece;
  const size_t b = s.find_first_not_of(' ');
  s = b == std::string::npos ? "\xE2\x90\xA3" : s.substr(b);
  if (s.size() <= 12) return s;
  size_t n = 11;  // cut at a character's start (a CJK piece cut inside a character drew "?")
  while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "~";
}

}  // namespace

void draw_distribution(Ui& ui, const ImVec4& r) {
  AppState& st = ui.st;
  if (begin_panel("Distribution of the selected query", r)) {
    ui.record_rect("distribution");
    const HeadRows& rows = st.head_rows();
    const int T = rows.T, q = st.query();
    if (T == 0 || (!rows.shown(0) && !rows.shown(1))) {
      const std::string gap = st.rows_gap();
      if (!gap.empty()) {
        ImGui::PushTextWrapPos(0.0f);
        ImGui::TextDisabled("%s", gap.c_str());
        ImGui::PopTextWrapPos();
        ui.labels["distribution.gap"] = {gap};
      } else {
        ImGui::TextDisabled(rows.pending[0] || rows.pending[1] ? "computing the rows..." : "no run yet");
      }
      ImGui::End();
      return;
    }
    // Row q of each side (nullptr: not shown); past dense_rows_max_tokens computed here from the stored scores.
    const float* prow[2] = {rows.row(0, q), rows.row(1, q)};
    ImGui::Text("query %d '%s'", q, short_piece(st.file.pieces[q]).c_str());
    if (st.view.hide_sink && q == 0) {  // its one key is the sink: nothing is left to renormalise (it read "H nan")
      const char* why = "query 0 sees only the first token, which hide sink hides: choose a later query";
      ImGui::SameLine();
      ImGui::TextDisabled("%s", why);
      ui.labels["distribution.header"] = {why};
      ImGui::End();
      return;
    }
    for (int s = 0; s < 2; ++s) {
      if (!rows.shown(s)) continue;
      const float* m = &rows.metrics[s][(size_t)q * focal::kNumRowMetrics];
      ImGui::SameLine();
      // With the sink hidden, H and max are of the renormalised keys 1..q; the sink mass is the whole row's.
      // A setting not yet propagated: these are the stored scores re-tempered (preview), not a run of it
      const std::string state = rows.pending[s]           ? " (" + rows.label[s] + "; computing the new setting)"
                                : !st.readouts_current(s) ? std::string(" (preview)")
                                                          : std::string();
      ImGui::TextColored(col_run_v4(s), "  %s: H %.2f nats, max %.2f, sink %.2f%s%s", side_name(s),
                         m[focal::kEntropyNats], m[focal::kMaxProb], m[focal::kSinkMass],
                         st.view.hide_sink ? " (hidden)" : "", state.c_str());
    }
    ui.labels["distribution.header"] = {
        fmt("sink %.2f",
            rows.metrics[0].empty() ? NAN : rows.metrics[0][(size_t)q * focal::kNumRowMetrics + focal::kSinkMass])};
    // Key window: the last N keys up to the query (0: all).
    ImGui::SetNextItemWidth(120);
    ImGui::InputInt("last keys (0: all)", &ui.dist_window, 16, 128);
    ui.dist_window = std::max(0, ui.dist_window);
    const int k1 = q, k0 = ui.dist_window > 0 ? std::max(0, q - ui.dist_window + 1) : 0;
    const int n = k1 - k0 + 1;

    const ImVec2 avail = ImGui::GetContentRegionAvail();
    const float axis_w = 40.0f, axis_h = 18.0f;
    const ImVec2 o = ImGui::GetCursorScreenPos();
    const ImVec2 p0(o.x + axis_w, o.y + 6), p1(o.x + avail.x - 6, o.y + avail.y - axis_h);
    if (p1.x - p0.x < 20 || p1.y - p0.y < 20) {  // say so: the panel showed its header over nothing
      ImGui::TextDisabled("no room for the chart: drag the splitter under the layers x heads grid up");
      ImGui::End();
      return;
    }
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddRectFilled(p0, p1, IM_COL32(24, 26, 32, 255));
    float pmax = 0.0f;
    for (int s = 0; s < 2; ++s)
      if (prow[s])
        for (int k = k0; k <= k1; ++k) pmax = std::max(pmax, prow[s][k]);
    // Round ticks; the top of the axis is the first tick at or above the largest p (room for the labels).
    const focal::figures::Ticks yt =
        round_ticks(ui, "distribution.y", 0.0, pmax > 0 ? std::min(1.0, pmax * 1.15) : 1.0, 5);
    const float ytop = (float)std::max(yt.values.empty() ? 1.0 : yt.values.back(), pmax * 1.15);
    const float W = p1.x - p0.x, Hh = p1.y - p0.y;
    auto Y = [&](float v) { return p1.y - Hh * v / ytop; };
    for (size_t g = 0; g < yt.values.size(); ++g) {
      const float y = Y((float)yt.values[g]);
      dl->AddLine(ImVec2(p0.x, y), ImVec2(p1.x, y), IM_COL32(60, 62, 70, 255));
      const ImVec2 ts = ImGui::CalcTextSize(yt.labels[g].c_str());
      dl->AddText(ImVec2(p0.x - ts.x - 4, y - ts.y / 2), IM_COL32(150, 150, 160, 255), yt.labels[g].c_str());
    }
    // Bars, aggregated by max when there are more keys than pixels. Wide keys: A left, B right. Narrow keys: B
    // behind A, both translucent, so that neither hides the other.
    const int cols = std::max(1, std::min(n, (int)W));
    const float per_col = W / cols;
    // Long prompts: say what a bar is (the top-right corner; the top keys are named at their bars).
    std::string pool_note;
    ImVec4 pool_box(0, 0, 0, 0);  // where the note sits: the top-key labels keep out of it
    if (n > cols) {
      pool_note = fmt("%.0f keys per bar (their max)", std::ceil((double)n / cols));
      const ImVec2 ts = ImGui::CalcTextSize(pool_note.c_str());
      dl->AddText(ImVec2(p1.x - ts.x - 4, p0.y + 2), IM_COL32(150, 150, 160, 255), pool_note.c_str());
      pool_box = ImVec4(p1.x - ts.x - 4, p0.y + 2, p1.x - 4, p0.y + 2 + ts.y);
    }
    ui.labels["distribution.pool"] = {pool_note};
    const bool split = per_col >= 4.0f && prow[0] && prow[1];
    for (int s = 1; s >= 0; --s) {
      if (!prow[s]) continue;
      const float* p = prow[s];
      for (int c = 0; c < cols; ++c) {
        const int ka = k0 + (int)((long)c * n / cols), kb = std::max(ka + 1, k0 + (int)((long)(c + 1) * n / cols));
        float v = 0.0f;
        for (int k = ka; k < kb; ++k) v = std::max(v, p[k]);
        if (!(v > 0)) continue;
        float x0 = p0.x + W * c / cols, x1 = p0.x + W * (c + 1) / cols;
        if (per_col >= 3.0f) x0 += 0.5f, x1 -= 0.5f;
        if (split) (s == 0 ? x1 : x0) = 0.5f * (x0 + x1);
        x1 = std::max(x1, x0 + 1.0f);
        const ImU32 alpha = split ? 0xE0000000 : (s == 0 ? 0xB0000000 : 0xA0000000);
        dl->AddRectFilled(ImVec2(x0, Y(v)), ImVec2(x1, p1.y), (col_run(s) & 0x00FFFFFF) | alpha);
      }
    }
    // A generation capture: a line before the first generated key (keys from there on were generated).
    if (const int g = st.file.prompt_end(); st.file.has_generated() && g > k0 && g <= k1) {
      const float xg = p0.x + W * (float)(g - k0) / n;
      dl->AddLine(ImVec2(xg, p0.y), ImVec2(xg, p1.y), col_generated(), 1.5f);
      dl->AddText(ImVec2(xg + 3, p0.y + 1), col_generated(), "generated");
    }
    // The top keys (by the larger of A and B) named above their bars, without overlapping.
    std::vector<std::pair<float, int>> top;
    for (int k = k0; k <= k1; ++k) {
      float v = 0.0f;
      for (int s = 0; s < 2; ++s)
        if (prow[s]) v = std::max(v, prow[s][k]);
      top.push_back({-v, k});
    }
    std::partial_sort(top.begin(), top.begin() + std::min<size_t>(5, top.size()), top.end());
    // Each label on its bar: centred, else ending or starting at the bar, where it crosses no label already drawn
    // (labels at other heights do not clash: two nearby top keys, or A's and B's, are both named).
    std::vector<ImVec4> placed;  // x0, y0, x1, y1
    if (!pool_note.empty()) placed.push_back(pool_box);
    std::vector<std::string> top_labels;
    const float key_w = W / n;
    for (size_t t = 0; t < top.size() && t < 5 && top_labels.size() < 3; ++t) {
      const int k = top[t].second;
      const float v = -top[t].first;
      if (!(v > 0.05f * pmax)) break;
      const std::string s = short_piece(st.file.pieces[k]) + " (" + std::to_string(k) + ")";
      const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
      const float xc = p0.x + W * ((k - k0) + 0.5f) / n;
      // on its bar, else a line higher, else a line lower beside it (two models' top keys side by side at the same
      // height near the top: A's was dropped)
      bool done = false;
      for (float lift : {0.0f, ts.y + 1.0f, -(ts.y + 1.0f), -2.0f * (ts.y + 1.0f)}) {
        const float y = std::min(std::max(p0.y, Y(v) - ts.y - 1 - lift), p1.y - ts.y);
        for (float shift : {-ts.x / 2, -ts.x + key_w / 2, -key_w / 2}) {
          const float x = std::clamp(xc + shift, p0.x, p1.x - ts.x);
          bool clash = false;
          for (const ImVec4& o : placed) clash |= x < o.z + 4 && x + ts.x > o.x - 4 && y < o.w && y + ts.y > o.y;
          if (clash) continue;
          placed.push_back(ImVec4(x, y, x + ts.x, y + ts.y));
          dl->AddText(ImVec2(x, y), IM_COL32(230, 230, 235, 255), s.c_str());
          top_labels.push_back(s);
          done = true;
          break;
        }
        if (done) break;
      }
    }
    ui.labels["distribution.top"] = top_labels;
    // x labels: every token when they fit, else key positions at round steps.
    const float per = W / n;
    std::vector<std::string> xl;
    float widest = 0;
    for (int k = k0; k <= k1; ++k)
      widest = std::max(widest, ImGui::CalcTextSize(short_piece(st.file.pieces[k]).c_str()).x);
    if (per >= widest + 4) {
      for (int k = k0; k <= k1; ++k) {
        const std::string s = short_piece(st.file.pieces[k]);
        const float tw = ImGui::CalcTextSize(s.c_str()).x;
        dl->AddText(ImVec2(p0.x + per * (k - k0 + 0.5f) - tw / 2, p1.y + 2),
                    k == q ? IM_COL32(255, 255, 255, 255) : IM_COL32(150, 150, 160, 255), s.c_str());
        xl.push_back(s);
      }
    } else {
      const int max_ticks = std::max(2, (int)(W / (ImGui::CalcTextSize("00000").x + 12)));
      const focal::figures::Ticks xt = focal::figures::nice_ticks(k0, k1, max_ticks, false);
      for (size_t i = 0; i < xt.values.size(); ++i) {
        const float x = p0.x + per * ((float)xt.values[i] - k0 + 0.5f);
        const float tw = ImGui::CalcTextSize(xt.labels[i].c_str()).x;
        dl->AddLine(ImVec2(x, p1.y), ImVec2(x, p1.y + 3), IM_COL32(150, 150, 160, 255));
        // Kept inside the panel: the last tick's label ends at the plot's right edge rather than being cut.
        dl->AddText(ImVec2(std::min(x - tw / 2, p1.x + 4 - tw), p1.y + 3), IM_COL32(150, 150, 160, 255),
                    xt.labels[i].c_str());
        xl.push_back(xt.labels[i]);
      }
    }
    ui.labels["distribution.x"] = xl;
    ImGui::SetCursorScreenPos(p0);
    ImGui::InvisibleButton("dist", ImVec2(W, Hh));
    if (ImGui::IsItemHovered()) {
      const int k = k0 + std::clamp((int)((ImGui::GetIO().MousePos.x - p0.x) / W * n), 0, n - 1);
      ImGui::BeginTooltip();
      ImGui::Text("key %d '%s'", k, st.file.pieces[k].c_str());
      for (int s = 0; s < 2; ++s)
        if (prow[s])
          ImGui::TextColored(col_run_v4(s), "p %s = %.5f%s", side_name(s), prow[s][k], pending_suffix(rows, s).c_str());
      ImGui::EndTooltip();
    }
  }
  ImGui::End();
}

}  // namespace focalscope
