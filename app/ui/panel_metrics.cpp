// Per-head metrics for every layer and head: entropy, effective support, tail, sink, max, induction score and
// relevant mass of A and B and their difference, with KL / JS between A and B on the visible layer. Click a column
// header to rank the heads by it; click a row to select the head.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "overrides.h"
#include "ui.h"

namespace focalscope {

namespace {

// A number, or "n/a" where it is not a number, with the reason on hover: the metric was not computed for this run
// (metric_gap), or no row of the head has a value (an induction score needs a token seen before).
void value_cell(float v, const ImVec4& col, const char* f, int metric, int layer, int head, const std::string& gap) {
  if (!std::isnan(v)) {
    ImGui::TextColored(col, f, v);
    return;
  }
  ImGui::TextDisabled("n/a");
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("%d.%d: %s", layer, head,
                      !gap.empty()                     ? gap.c_str()
                      : metric == kInductionScore      ? "no row's token occurred earlier in the sequence"
                      : metric == focal::kRelevantMass ? "no relevant key marked"
                                                       : "no row has a value");
}

}  // namespace

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
  // A short pane (1280 x 720: the table kept two rows) keeps the table's rows: the hint goes behind a (?).
  const bool short_pane = ImGui::GetContentRegionAvail().y < 160.0f;
  ImGui::TextDisabled("means over query rows 1..T-1 of the propagated runs; KL / JS on the visible layer %d (%s)",
                      st.sel_layer,
                      !two         ? "turn on B to compare"
                      : dv.pending ? "A vs B, the same runs: computing"
                                   : "A vs B, the same runs");
  if (rel)
    ImGui::TextDisabled("relevant mass R over %d marked key(s); noise = 1 - R", (int)st.file.relevant.size());
  else if (!st.capture_only() && short_pane)
    help_marker("right-click tokens in the token strip to mark relevant keys (relevant mass, noise)");
  else if (!st.capture_only())
    ImGui::TextDisabled("right-click tokens in the token strip to mark relevant keys (relevant mass, noise)");
  // The table holds the runs' numbers: a side whose setting changed since shows its run's, named.
  std::vector<std::string> notes;
  for (int s = 0; s < (two ? 2 : 1); ++s) {
    if (st.readouts_current(s)) continue;
    const auto names = labels_apart(st.slots[s].run_spec, st.slots[s].spec);  // apart where the labels are equal
    const std::string note =
        std::string(side_name(s)) + " columns: run " + names.first + "; " + names.second +
        (st.rows_gap().empty()
             ? " is previewed on the visible head only (the table " + st.readout_gap(s) + ")"
             : " is not shown anywhere (metrics only, no rows to preview: it " + st.readout_gap(s) + ")");
    ImGui::TextColored(ImVec4(1.0f, 0.8f, 0.3f, 1.0f), "%s", note.c_str());
    notes.push_back(note);
  }
  const std::string induction_gap = st.head_metric_gap(0, kInductionScore);
  if (!induction_gap.empty()) {
    ImGui::TextDisabled("induction: n/a — %s", induction_gap.c_str());
    notes.push_back("induction: n/a — " + induction_gap);
  }
  ui.labels["metrics.notes"] = notes;
  struct Col {
    const char* name;
    int metric;
  };
  static const Col kCols[] = {{"H", focal::kEntropyNats},        {"exp H", focal::kEffSupport},
                              {"tail", focal::kTailMass},        {"sink", focal::kSinkMass},
                              {"max", focal::kMaxProb},          {"induction", kInductionScore},
                              {"relevant", focal::kRelevantMass}};
  const int n_metric = rel ? 7 : 6;
  const int n_cols = 1 + n_metric * (two ? 3 : 1) + (two ? 2 : 0);
  if (ImGui::BeginTable("metrics", n_cols,
                        // ScrollX: at 1280 px the columns keep their widths and scroll instead of collapsing
                        ImGuiTableFlags_ScrollX | ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg |
                            ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_Sortable |
                            ImGuiTableFlags_SortTristate,
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
    // Row order: layer.head, or ranked by the sorted column (NaN last either way).
    std::vector<int> order((size_t)c->n_layers * c->n_heads);
    std::iota(order.begin(), order.end(), 0);
    const ImGuiTableSortSpecs* sort = ImGui::TableGetSortSpecs();
    if (sort && sort->SpecsCount > 0 && sort->Specs[0].ColumnIndex > 0) {
      const int ci = sort->Specs[0].ColumnIndex - 1;
      const bool desc = sort->Specs[0].SortDirection == ImGuiSortDirection_Descending;
      auto value = [&](int i) -> float {
        const int l = i / c->n_heads, h = i % c->n_heads;
        if (ci >= n_metric * (two ? 3 : 1)) {  // KL or JS of the visible layer
          if (l != dv.layer || h >= (int)dv.kl.size()) return NAN;
          return ci == n_metric * 3 ? dv.kl[h] : dv.js[h];
        }
        const int m = ci / (two ? 3 : 1), part = ci % (two ? 3 : 1);
        const float a = st.head_metric(0, l, h, kCols[m].metric);
        if (part == 0) return a;
        const float b = st.head_metric(1, l, h, kCols[m].metric);
        return part == 1 ? b : b - a;
      };
      std::vector<float> v(order.size());
      for (int i : order) v[i] = value(i);
      std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
        if (std::isnan(v[x]) || std::isnan(v[y])) return !std::isnan(v[x]) && std::isnan(v[y]);
        return desc ? v[x] > v[y] : v[x] < v[y];
      });
    }
    std::vector<std::string> gaps[2];  // [n_metric] why a metric is n/a for every head of a side, or ""
    for (int s = 0; s < 2; ++s)
      for (int m = 0; m < n_metric; ++m) gaps[s].push_back(s == 0 || two ? st.head_metric_gap(s, kCols[m].metric) : "");
    for (int i : order) {
      const int l = i / c->n_heads, h = i % c->n_heads;
      ImGui::TableNextRow();
      ImGui::TableSetColumnIndex(0);
      char label[32];
      std::snprintf(label, sizeof label, "%d.%d", l, h);
      const bool sel = l == st.sel_layer && h == st.sel_head;
      // A dark highlight with a light frame: ImGui's blue hid A's blue numbers on the selected row, and a mid grey
      // left the blue ones barely legible.
      ImGui::PushStyleColor(ImGuiCol_Header, IM_COL32(44, 46, 58, 255));
      ImGui::PushStyleColor(ImGuiCol_HeaderHovered, IM_COL32(52, 54, 66, 255));
      ImGui::PushStyleColor(ImGuiCol_HeaderActive, IM_COL32(58, 60, 74, 255));
      if (ImGui::Selectable(label, sel, ImGuiSelectableFlags_SpanAllColumns)) st.select(l, h, st.sel_query);
      ImGui::PopStyleColor(3);
      if (sel)
        ImGui::GetWindowDrawList()->AddRect(ImGui::GetItemRectMin(), ImGui::GetItemRectMax(),
                                            IM_COL32(200, 200, 210, 255));
      static int scrolled_to = -1;  // keep the selected head in view when it is chosen elsewhere
      if (sel && scrolled_to != l * 100000 + h) {
        ImGui::SetScrollHereY(0.5f);
        scrolled_to = l * 100000 + h;
      }
      int col = 1;
      for (int m = 0; m < n_metric; ++m) {
        const float a = st.head_metric(0, l, h, kCols[m].metric);
        ImGui::TableSetColumnIndex(col++);
        value_cell(a, col_run_v4(0), "%.3f", kCols[m].metric, l, h, gaps[0][m]);
        if (two) {
          const float b = st.head_metric(1, l, h, kCols[m].metric);
          ImGui::TableSetColumnIndex(col++);
          value_cell(b, col_run_v4(1), "%.3f", kCols[m].metric, l, h, gaps[1][m]);
          ImGui::TableSetColumnIndex(col++);
          const float d = b - a;
          value_cell(d, d < 0 ? ImVec4(0.55f, 0.75f, 1.0f, 1.0f) : ImVec4(1.0f, 0.6f, 0.5f, 1.0f), "%+.3f",
                     kCols[m].metric, l, h, gaps[0][m].empty() ? gaps[1][m] : gaps[0][m]);
        }
      }
      if (two) {
        // A head the runs do not hold (long prompts keep the viewed head's rows only): "-"; computing: "...".
        const bool have = l == dv.layer && h < (int)dv.kl.size() && !std::isnan(dv.kl[h]);
        const char* none = l == dv.layer && dv.pending ? "..." : "-";
        ImGui::TableSetColumnIndex(col++);
        if (have)
          ImGui::Text("%.4f", dv.kl[h]);
        else
          ImGui::TextDisabled("%s", none);
        if (l == dv.layer) ui.labels["metrics.kl"].push_back(have ? fmt("%.4f", dv.kl[h]) : std::string(none));
        ImGui::TableSetColumnIndex(col++);
        if (have)
          ImGui::Text("%.4f", dv.js[h]);
        else
          ImGui::TextDisabled("%s", none);
      }
    }
    ImGui::EndTable();
  }
}

}  // namespace focalscope
