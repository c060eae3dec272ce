// What the model predicts: the top next tokens after the selected query position under A and B, and the prompt's
// mean next-token loss under each (over the prompt only; a generation capture's generated tokens on their own line).
#include <cmath>

#include "ui.h"

namespace focalscope {

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
      const focal::RunCapture& r = *st.slots[s].run;
      ImGui::TextColored(col_run_v4(s), "%s", run_title(st, s).c_str());
      ImGui::Text("prompt loss %.3f nats/token (ppl %.1f)", st.prompt_loss(s), std::exp(st.prompt_loss(s)));
      if (st.file.has_generated()) {  // the generated tokens' own line: not part of the prompt's loss
        const int P = st.file.prompt_end();
        ImGui::TextColored(col_generated_v4(), "generated loss %.3f nats/token (tokens %d..%d)", st.generated_loss(s),
                           P, T - 1);
        ui.labels[s == 0 ? "output.generated_loss.a" : "output.generated_loss.b"] = {fmt("%.3f", st.generated_loss(s))};
      }
      ui.labels[s == 0 ? "output.prompt_loss.a" : "output.prompt_loss.b"] = {fmt("%.3f", st.prompt_loss(s))};
      if (q + 1 < T && (int)r.token_nll.size() == T)
        ImGui::TextDisabled("actual next '%s': -ln p = %.3f", st.file.pieces[q + 1].c_str(), r.token_nll[q]);
      const int K = T ? (int)(r.topk_ids.size() / T) : 0;
      const focal::Model* m = st.slots[s].model ? st.slots[s].model.get() : st.slots[0].model.get();
      const focal::Tokenizer* tok = m ? m->tokenizer() : nullptr;
      for (int k = 0; k < K && k < 8; ++k) {
        const int32_t id = r.topk_ids[(size_t)q * K + k];
        const float p = r.topk_probs[(size_t)q * K + k];
        const std::string piece = tok ? tok->display(id) : std::to_string(id);
        ImGui::ProgressBar(p, ImVec2(120, 0), fmt("%.3f", p).c_str());
        ImGui::SameLine();
        ImGui::Text("'%s'", piece.c_str());
      }
      if (!(st.slots[s].spec.first_changed_layer(st.slots[s].run_spec, *st.config()) >= st.config()->n_layers))
        ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "(from the last propagated run)");
    }
    ImGui::EndTable();
  }
}

}  // namespace focalscope
