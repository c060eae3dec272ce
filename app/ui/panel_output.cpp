// What the model predicts: the top next tokens after the selected query position under A and B, and the prompt's
// mean next-token loss under each (over the prompt only; a generation capture's generated tokens on their own line).
// These come from a side's run: when its setting has changed since (a preview, e.g. a capture without its model),
// they are shown under the run's own setting, and the current setting's loss reads n/a with the reason.
#include <cmath>

#include "ui.h"

namespace focalscope {

namespace {

// The text of next-token candidate k after position q: stored with the run, else the open model's tokenizer; empty
// when neither has it.
std::string candidate_text(const AppState& st, int side, const focal::RunCapture& r, size_t i) {
  if (r.topk_pieces.size() == r.topk_ids.size()) return r.topk_pieces[i];
  const focal::Model* m = st.slots[side].model ? st.slots[side].model.get() : st.slots[0].model.get();
  const focal::Tokenizer* tok = m ? m->tokenizer() : nullptr;
  return tok ? tok->display(r.topk_ids[i]) : std::string();
}

void draw_side(Ui& ui, int s, int q) {
  AppState& st = ui.st;
  const int T = st.n_tokens();
  const focal::RunCapture& r = *st.slots[s].run;
  const char* ab = s == 0 ? "a" : "b";
  ImGui::TextColored(col_run_v4(s), "%s", run_title(st, s).c_str());
  const bool current = st.readouts_current(s);
  const std::string run_label = st.slots[s].run_spec.label();
  if (!current) {  // never the run's numbers under the new label
    const std::string gap = st.readout_gap(s);
    ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "prompt loss n/a — %s", gap.c_str());
    ui.labels[std::string("output.prompt_loss.") + ab] = {"n/a — " + gap};
    ImGui::TextDisabled("run %s (%s):", run_label.c_str(), st.capture_only() ? "stored" : "last propagated");
    ui.labels[std::string("output.run.") + ab] = {run_label};
  }
  ImGui::Text("prompt loss %.3f nats/token (perplexity %.3g)", st.prompt_loss(s), std::exp(st.prompt_loss(s)));
  ui.labels[std::string(current ? "output.prompt_loss." : "output.run_prompt_loss.") + ab] = {
      fmt("%.3f", st.prompt_loss(s))};
  if (st.file.has_generated()) {  // the generated tokens' own line: not part of the prompt's loss
    const int P = st.file.prompt_end();
    ImGui::TextColored(col_generated_v4(), "generated loss %.3f nats/token (tokens %d..%d)", st.generated_loss(s), P,
                       T - 1);
    ui.labels[std::string(current ? "output.generated_loss." : "output.run_generated_loss.") + ab] = {
        fmt("%.3f", st.generated_loss(s))};
  }
  if (q + 1 < T && (int)r.token_nll.size() == T)
    ImGui::TextDisabled("actual next '%s': -ln p = %.3f", st.file.pieces[q + 1].c_str(), r.token_nll[q]);
  const int K = T ? (int)(r.topk_ids.size() / T) : 0;
  std::vector<std::string> shown;
  bool ids_only = false;
  ImGui::PushStyleColor(ImGuiCol_PlotHistogram, col_run(s));  // the run's colour, as every other panel (not ImGui blue)
  for (int k = 0; k < K && k < 8; ++k) {
    const size_t i = (size_t)q * K + k;
    const float p = r.topk_probs[i];
    std::string piece = candidate_text(st, s, r, i);
    if (piece.empty() && r.topk_pieces.size() != r.topk_ids.size()) {
      ids_only = true;
      piece = "id " + std::to_string(r.topk_ids[i]);
      shown.push_back(piece);
    } else {
      shown.push_back("'" + piece + "'");
    }
    ImGui::ProgressBar(p, ImVec2(120, 0), fmt("%.3f", p).c_str());
    ImGui::SameLine();
    ImGui::TextUnformatted(shown.back().c_str());
  }
  ImGui::PopStyleColor();
  ui.labels[std::string("output.next.") + ab] = shown;
  if (ids_only)
    ImGui::TextDisabled(
        "token ids: this capture stores no token text (written before it did) and its model is not "
        "open");
}

}  // namespace

void draw_output(Ui& ui) {
  AppState& st = ui.st;
  const int T = st.n_tokens(), q = st.query();
  if (T == 0 || !st.slots[0].run) {
    ImGui::TextDisabled("no run yet");
    return;
  }
  ImGui::Text("next token after position %d '%s'", q, st.file.pieces[q].c_str());
  const int sides = st.compare && st.slots[1].run ? 2 : 1;
  if (ImGui::BeginTable("out", sides, ImGuiTableFlags_BordersInnerV)) {
    for (int s = 0; s < sides; ++s) {
      ImGui::TableNextColumn();
      draw_side(ui, s, q);
    }
    ImGui::EndTable();
  }
}

}  // namespace focalscope
