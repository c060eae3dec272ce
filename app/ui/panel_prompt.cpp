// The prompt editor and the token strip: every token coloured by the attention it gets from the selected query
// (run A, B, or B - A as the heatmap shows); hover shows both probabilities and the raw score; click selects the
// query; right-click marks a key as relevant (relevant mass, noise and SNR in the metrics).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ui.h"

namespace focalscope {

namespace {
struct WrapCall {
  SoftWrap* wrap;
  float width;
  int* selection;  // [2]: the selection after the last reflow, bytes
};
// Runs every frame while the editor is active: reflows the buffer to the editor's width (prompt_wrap.h).
int wrap_callback(ImGuiInputTextCallbackData* d) {
  const WrapCall* w = static_cast<const WrapCall*>(d->UserData);
  const auto measure = [](const char* b, const char* e) { return ImGui::CalcTextSize(b, e).x; };
  if (w->wrap->reflow(d->Buf, (size_t)d->BufTextLen, w->width, measure)) d->BufDirty = true;
  w->selection[0] = std::min(d->SelectionStart, d->SelectionEnd);
  w->selection[1] = std::max(d->SelectionStart, d->SelectionEnd);
  return 0;
}
// Ctrl+C / Ctrl+X this frame: ImGui copies its buffer, soft breaks as newlines.
bool copy_keys_pressed() {
  return ImGui::GetIO().KeyCtrl &&
         (ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_C)) || ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_X)));
}
// Puts the selection on the clipboard as the prompt has it (soft breaks as spaces), from the buffer as it was
// before this frame's edit.
void fix_clipboard(const SoftWrap& before, const int* sel) {
  const size_t lo = (size_t)std::max(0, sel[0]), hi = (size_t)std::max(0, sel[1]);
  if (hi <= lo || hi > before.shadow.size() || before.soft.size() != before.shadow.size()) return;
  std::string s = before.shadow.substr(lo, hi - lo);
  for (size_t i = 0; i < s.size(); ++i)
    if (before.soft[lo + i]) s[i] = ' ';
  ImGui::SetClipboardText(s.c_str());
}
// The prompt in the edit buffer, soft breaks as spaces, written back into the buffer (same length).
std::string unwrapped(Ui& ui) {
  std::string t = ui.prompt_wrap.text(ui.prompt_buf, std::strlen(ui.prompt_buf));
  std::memcpy(ui.prompt_buf, t.data(), t.size());
  ui.prompt_wrap.reset(t);
  return t;
}
}  // namespace

void open_prompt_editor(Ui& ui) {
  if (ui.st.capture_only()) return;
  ui.prompt_editing = true;
  ui.prompt_wrap.reset(ui.prompt_buf);
}

static void prompt_editor(Ui& ui) {
  AppState& st = ui.st;
  if (!ui.prompt_dirty && std::strncmp(ui.prompt_buf, st.prompt.c_str(), sizeof ui.prompt_buf) != 0 &&
      !ImGui::IsAnyItemActive())
    std::snprintf(ui.prompt_buf, sizeof ui.prompt_buf, "%s", st.prompt.c_str());
  const float h = ImGui::GetTextLineHeight() * 2.6f;
  bool ctrl_enter = false;
  if (!ui.prompt_editing) {
    // Shown wrapped (ImGui's multiline input does not wrap); a click edits it.
    ImGui::BeginChild("prompt_view", ImVec2(-110, h), true);
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(ui.prompt_buf);
    ImGui::PopTextWrapPos();
    ImGui::EndChild();
    if (ImGui::IsItemClicked()) open_prompt_editor(ui);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("click to edit; Ctrl+Enter or Run runs it");
  } else {
    if (ImGui::IsWindowAppearing() || !ImGui::IsAnyItemActive()) ImGui::SetKeyboardFocusHere();
    // Wrapped at the text area's width: the box less its padding and a vertical scroll bar.
    const ImGuiStyle& style = ImGui::GetStyle();
    WrapCall call{&ui.prompt_wrap,
                  ImGui::GetContentRegionAvail().x - 110 - 2 * style.FramePadding.x - style.ScrollbarSize - 2,
                  ui.prompt_selection};
    // The state before this frame's edit, kept only in a frame that copies or cuts.
    const bool copying = copy_keys_pressed();
    const SoftWrap before = copying ? ui.prompt_wrap : SoftWrap{};
    const int sel_before[2] = {ui.prompt_selection[0], ui.prompt_selection[1]};
    ImGui::InputTextMultiline("##prompt", ui.prompt_buf, sizeof ui.prompt_buf, ImVec2(-110, h),
                              st.capture_only() ? ImGuiInputTextFlags_ReadOnly : ImGuiInputTextFlags_CallbackAlways,
                              wrap_callback, &call);
    if (copying && ImGui::IsItemActive()) fix_clipboard(before, sel_before);
    // A reflow alone edits the buffer too: "edited" means the prompt itself differs.
    if (ImGui::IsItemEdited())
      ui.prompt_dirty = ui.prompt_wrap.text(ui.prompt_buf, std::strlen(ui.prompt_buf)) != st.prompt;
    ui.labels["prompt.soft_breaks"] = {
        std::to_string(std::count(ui.prompt_wrap.soft.begin(), ui.prompt_wrap.soft.end(), true))};
    ui.labels["prompt.edited"] = {ui.prompt_dirty ? "yes" : "no"};
    ctrl_enter =
        ImGui::IsItemFocused() && ImGui::GetIO().KeyCtrl && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter));
    if (ImGui::IsItemDeactivated()) {
      ui.prompt_editing = false;
      unwrapped(ui);
    }
  }
  ImGui::SameLine();
  ImGui::BeginGroup();
  // With no model open there is nothing to run: the prompt is kept for the model opened next.
  const bool can_run = st.has_model();  // a capture opened alone holds fixed tokens: its model runs a new prompt
  ImGui::BeginDisabled(!can_run);
  if (ImGui::Button("Run", ImVec2(100, 0)) || ctrl_enter) {
    st.set_prompt(ui.prompt_editing ? unwrapped(ui) : std::string(ui.prompt_buf));
    ui.prompt_dirty = false;
    ui.prompt_editing = false;
  }
  ImGui::EndDisabled();
  if (!can_run && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("%s", st.capture_only() ? "this capture was opened without its model: Open its model (Update "
                                                "section) to run a new prompt"
                                              : "open a model first (left column); the prompt is kept and runs when "
                                                "it opens");
  if (can_run || st.capture_only())
    ImGui::TextDisabled("%d tokens", st.n_tokens());
  else
    ImGui::TextDisabled("no model");
  ui.labels["prompt.run"] = {can_run ? "enabled" : "disabled (no model)"};
  if (ui.prompt_dirty) ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "edited");
  ImGui::EndGroup();
  if (st.pending_truncation) {
    ImGui::TextColored(ImVec4(1.0f, 0.55f, 0.4f, 1.0f), "The prompt is longer than the model's context.");
    ImGui::SameLine();
    if (ImGui::SmallButton("Truncate")) st.truncate_prompt();
  }
}

void draw_prompt(Ui& ui, const ImVec4& r) {
  AppState& st = ui.st;
  if (begin_panel("Prompt and tokens", r)) {
    ui.record_rect("prompt");
    prompt_editor(ui);
    const std::string banner = st.posthoc_banner();  // a post-hoc t changes the loss of a model trained without it
    if (!banner.empty()) {
      ImGui::PushTextWrapPos(0.0f);  // wrapped at the panel's edge (at 1280 px it ran past it)
      ImGui::TextColored(ImVec4(1.0f, 0.78f, 0.35f, 1.0f), "%s", banner.c_str());
      ImGui::PopTextWrapPos();
      ui.labels["banner"] = {banner};
    }
    const HeadRows& rows = st.head_rows();
    const int T = st.n_tokens();
    const int q = st.query();
    // Row q of each side (nullptr: not shown, or of other tokens); past dense_rows_max_tokens computed from the
    // stored scores.
    const float* prow[2] = {nullptr, nullptr};
    for (int s = 0; s < 2 && rows.T == T; ++s) prow[s] = rows.row(s, q);
    const int side = st.view.show == ViewRun::kB && prow[1] ? 1 : 0;
    const bool diff = st.view.show == ViewRun::kDiff && prow[0] && prow[1];
    // no tokens: no query, layer or head to name (a stats file alone selects its head in the Corpus tab)
    const std::string gap = st.rows_gap();
    const std::string header =
        T > 0 && !gap.empty() ? "tokens (" + gap.substr(0, gap.find(';')) + ")"
        : T > 0 ? "attention from the selected query (outlined), layer " + std::to_string(st.sel_layer) + " head " +
                      std::to_string(st.sel_head) + ", " + (diff ? "B - A" : side_name(side))
                : (st.has_model() ? "no tokens yet: type a prompt and press Run"
                                  : "no model open: open one in the left column, then run a prompt");
    ImGui::TextDisabled("%s", header.c_str());
    ui.labels["tokens.header"] = {header};
    const int gen_from = st.file.has_generated() ? st.file.prompt_end() : T;  // first generated position
    if (gen_from < T) {  // a generation capture: the prompt ends where the crimson bar stands
      ImGui::SameLine();
      ImGui::TextColored(col_generated_v4(), "| generated from position %d (marked on top)", gen_from);
      ui.labels["tokens.generated_from"] = {std::to_string(gen_from)};
    }
    ImGui::BeginChild("tokens", ImVec2(0, 0), false);
    ui.record_rect("tokens");
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const float avail = ImGui::GetContentRegionAvail().x;
    float row_max = 0.0f;  // colour scale: the largest value in the query's row (excluding nothing)
    const float* P = prow[side];
    if (T > 0 && rows.T == T) {
      for (int k = 0; k <= q; ++k) {
        const float v = diff ? std::fabs(prow[1][k] - prow[0][k]) : (P ? P[k] : 0.0f);
        row_max = std::max(row_max, v);
      }
    }
    if (row_max <= 0.0f) row_max = 1.0f;
    // Wrapped layout of every token; only the rows in view get widgets (thousands of tokens stay cheap).
    const float lh = ImGui::GetTextLineHeight() + 4.0f, gap_y = 3.0f, gap_x = 2.0f;
    const float view_top = ImGui::GetScrollY(), view_h = ImGui::GetWindowHeight();
    float x = 0.0f, y = 0.0f;
    // Scroll to the selected query when it changes, and to a key when it is newly marked relevant.
    // The scroll is applied for a few frames: the first tries can be clamped by the previous frame's content height.
    if (avail != ui.strip_width || view_h != ui.strip_height || q != ui.strip_scrolled_to || T != ui.strip_tokens) {
      ui.strip_target = q;
      ui.strip_scroll_frames = 4;
    }
    for (int32_t k : st.file.relevant)
      if (!std::binary_search(ui.strip_marked.begin(), ui.strip_marked.end(), k)) {
        ui.strip_target = k;
        ui.strip_scroll_frames = 4;
      }
    ui.strip_marked = st.file.relevant;
    ui.strip_width = avail;
    ui.strip_height = view_h;
    ui.strip_scrolled_to = q;
    ui.strip_tokens = T;
    const int scroll_to = ui.strip_scroll_frames > 0 ? ui.strip_target : -1;
    float scroll_y = -1.0f;
    int first_shown = -1, last_shown = -1;
    for (int k = 0; k < T; ++k) {
      std::string text = st.file.pieces[k];
      if (text.find_first_not_of(' ') == std::string::npos) text = "\xE2\x90\xA3";  // ␣ for a space, as figures
      const ImVec2 sz = ImGui::CalcTextSize(text.c_str());
      const float w = sz.x + 6.0f;
      if (k > 0 && x + w > avail) {
        x = 0.0f;
        y += lh + gap_y;
      }
      const float tx = x;
      x += w + gap_x;
      if (k == scroll_to) scroll_y = y;
      if (y + lh < view_top || y > view_top + view_h) continue;               // widgets only for the rows in view
      if (y + 0.5f * lh >= view_top && y + 0.5f * lh <= view_top + view_h) {  // at least half visible
        if (first_shown < 0) first_shown = k;
        last_shown = k;
      }
      ImGui::SetCursorPos(ImVec2(tx, y));
      const ImVec2 p0 = ImGui::GetCursorScreenPos();
      ImGui::PushID(k);
      if (ImGui::InvisibleButton("tok", ImVec2(w, lh))) st.select(st.sel_layer, st.sel_head, k);
      if (ImGui::IsItemClicked(ImGuiMouseButton_Right)) st.toggle_relevant(k);
      const bool hovered = ImGui::IsItemHovered();
      const bool relevant = std::binary_search(st.file.relevant.begin(), st.file.relevant.end(), k);
      ImGui::PopID();
      const ImVec2 p1(p0.x + w, p0.y + lh);
      ImU32 bg = IM_COL32(45, 48, 56, 255);
      if (k <= q && rows.T == T && T > 0) {
        if (diff) {
          const float d = prow[1][k] - prow[0][k];
          bg = col_diverging(d / row_max);
        } else if (P) {
          bg = col_viridis(P[k] / row_max);
        }
      }
      dl->AddRectFilled(p0, p1, bg, 3.0f);
      const ImVec4 bgv = ImGui::ColorConvertU32ToFloat4(bg);
      const bool light_bg = 0.2126f * bgv.x + 0.7152f * bgv.y + 0.0722f * bgv.z > 0.45f;
      if (relevant) {  // a relevant key: an amber bar under the token, edged in dark so a yellow token shows it too
        dl->AddRectFilled(ImVec2(p0.x + 1, p1.y - 4.5f), ImVec2(p1.x - 1, p1.y), IM_COL32(20, 20, 24, 255), 1.0f);
        dl->AddRectFilled(ImVec2(p0.x + 2, p1.y - 3.5f), ImVec2(p1.x - 2, p1.y - 0.5f), IM_COL32(255, 170, 20, 255),
                          1.0f);
      }
      if (k >= gen_from) {  // a generated token: a crimson bar on top, and a post before the first one
        dl->AddRectFilled(ImVec2(p0.x + 1, p0.y), ImVec2(p1.x - 1, p0.y + 3.0f), col_generated(), 1.0f);
        if (k == gen_from)
          dl->AddRectFilled(ImVec2(p0.x - gap_x - 1.0f, p0.y - 2.0f), ImVec2(p0.x - 0.5f, p1.y + 2.0f),
                            col_generated());
      }
      if (k == q) {  // the selected query outlined: white, and on a light token (B - A's near-zero white) also a dark
                     // ring inside and the white one further out, on the panel's dark ground (every light token
                     // looked outlined, and the query like the others)
        dl->AddRect(ImVec2(p0.x - 1, p0.y - 1), ImVec2(p1.x + 1, p1.y + 1),
                    light_bg ? IM_COL32(20, 20, 24, 255) : IM_COL32(255, 255, 255, 255), 3.0f, 0, 2.0f);
        if (light_bg)
          dl->AddRect(ImVec2(p0.x - 3.5f, p0.y - 3.5f), ImVec2(p1.x + 3.5f, p1.y + 3.5f), IM_COL32(255, 255, 255, 255),
                      4.0f, 0, 1.5f);
      }
      const bool dark_text = light_bg;
      dl->AddText(ImVec2(p0.x + 3.0f, p0.y + 2.0f),
                  dark_text ? IM_COL32(10, 10, 10, 255) : IM_COL32(235, 235, 235, 255), text.c_str());
      if (hovered) {
        ImGui::BeginTooltip();
        ImGui::Text("key %d '%s'  <-  query %d '%s'", k, st.file.pieces[k].c_str(), q, st.file.pieces[q].c_str());
        if (k >= gen_from) ImGui::TextColored(col_generated_v4(), "generated (step %d after the prompt)", k - gen_from);
        for (int s = 0; s < 2; ++s)
          if (prow[s] && k <= q)
            ImGui::TextColored(col_run_v4(s), "p %s = %.4f%s", side_name(s), prow[s][k],
                               pending_suffix(rows, s).c_str());
        if (const float raw = st.raw_score(q, k); !std::isnan(raw)) ImGui::Text("raw score q.k/sqrt(d) = %.3f", raw);
        ImGui::TextDisabled("click: make this token the query");
        ImGui::TextDisabled(relevant ? "right-click: unmark as relevant key" : "right-click: mark as a relevant key");
        ImGui::EndTooltip();
      }
    }
    ImGui::SetCursorPos(ImVec2(0, y + lh));
    ImGui::Dummy(ImVec2(1, gap_y));
    if (scroll_y >= 0.0f) ImGui::SetScrollY(std::max(0.0f, scroll_y - 0.5f * (view_h - lh)));
    if (ui.strip_scroll_frames > 0) --ui.strip_scroll_frames;
    ui.labels["tokens.shown"] = {std::to_string(first_shown), std::to_string(last_shown)};
    ImGui::EndChild();
  }
  ImGui::End();
}

}  // namespace focalscope
