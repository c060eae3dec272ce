// Per-head metrics for every layer and head: entropy, effective support, tail, sink and relevant mass of A and B
// and their difference, with KL / JS between A and B on the visible layer. Click a row to select the head.
#include <cmath>

#include "ui.h"

namespace focalscope {

void draw_metrics(Ui& ui) {
  AppState& st = ui.st;
  const focal::ModelConfig* c = st.config();
  if (!c || !st.slots[0].run) {
    ImGui::TextDisabled("no run yet");
    return;
  }
  const bool two = st.compare && st.slots[1].run;
  const bool rel = !st.file.relevant.empty();
  const LayerDivergence& dv = st.layer_divergence();
  ImGui::TextDisabled("means over query rows 1..T-1 of the propagated runs; KL / JS on the visible layer %d (%s)",
                      st.sel_layer, two ? "A vs B under the current temperatures" : "turn on B to compare");
  if (rel)
    ImGui::TextDisabled("relevant mass R over %d marked key(s); noise = 1 - R", (int)st.file.relevant.size());
  else if (!st.capture_only())
    ImGui::TextDisabled("right-click tokens in the token strip to mark relevant keys (relevant mass, noise)");
  struct Col {
    const char* name;
    int metric;
  };
  static const Col kCols[] = {{"H", focal::kEntropyNats}, {"exp H", focal::kEffSupport},
                              {"tail", focal::kTailMass}, {"sink", focal::kSinkMass},
                              {"max", focal::kMaxProb},   {"relevant", focal::kRelevantMass}};
  const int n_metric = rel ? 6 : 5;
  const int n_cols = 1 + n_metric * (two ? 3 : 1) + (two ? 2 : 0);
  if (ImGui::BeginTable("metrics", n_cols,
                        ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                            ImGuiTableFlags_SizingFixedFit,
                        ImVec2(0, ImGui::GetContentRegionAvail().y))) {
    ImGui::TableSetupScrollFreeze(1, 1);
    ImGui::TableSetupColumn("layer.head");
    for (int m = 0; m < n_metric; ++m) {
      ImGui::TableSetupColumn((std::string(kCols[m].name) + " A").c_str());
      if (two) {
        ImGui::TableSetupColumn((std::string(kCols[m].name) + " B").c_str());
        ImGui::TableSetupColumn((std::string("d") + kCols[m].name).c_str());
      }
    }
    if (two) {
      ImGui::TableSetupColumn("KL(A||B)");
      ImGui::TableSetupColumn("JS");
    }
    ImGui::TableHeadersRow();
    for (int l = 0; l < c->n_layers; ++l)
      for (int h = 0; h < c->n_heads; ++h) {
        ImGui::TableNextRow();
        ImGui::TableSetColumnIndex(0);
        char label[32];
        std::snprintf(label, sizeof label, "%d.%d", l, h);
        const bool sel = l == st.sel_layer && h == st.sel_head;
        if (ImGui::Selectable(label, sel, ImGuiSelectableFlags_SpanAllColumns)) st.select(l, h, st.sel_query);
        static int scrolled_to = -1;  // keep the selected head in view when it is chosen elsewhere
        if (sel && scrolled_to != l * 100000 + h) {
          ImGui::SetScrollHereY(0.5f);
          scrolled_to = l * 100000 + h;
        }
        int col = 1;
        for (int m = 0; m < n_metric; ++m) {
          const float a = st.head_metric(0, l, h, kCols[m].metric);
          ImGui::TableSetColumnIndex(col++);
          ImGui::TextColored(col_run_v4(0), "%.3f", a);
          if (two) {
            const float b = st.head_metric(1, l, h, kCols[m].metric);
            ImGui::TableSetColumnIndex(col++);
            ImGui::TextColored(col_run_v4(1), "%.3f", b);
            ImGui::TableSetColumnIndex(col++);
            const float d = b - a;
            ImGui::TextColored(d < 0 ? ImVec4(0.55f, 0.75f, 1.0f, 1.0f) : ImVec4(1.0f, 0.6f, 0.5f, 1.0f), "%+.3f", d);
          }
        }
        if (two) {
          const bool have = l == dv.layer && h < (int)dv.kl.size();
          ImGui::TableSetColumnIndex(col++);
          if (have)
            ImGui::Text("%.4f", dv.kl[h]);
          else
            ImGui::TextDisabled("-");
          ImGui::TableSetColumnIndex(col++);
          if (have)
            ImGui::Text("%.4f", dv.js[h]);
          else
            ImGui::TextDisabled("-");
        }
      }
    ImGui::EndTable();
  }
}

}  // namespace focalscope
