// Corpus tab: a `focal batch` stats file opened in the app. Left, the layer x head matrix of corpus means (run B
// minus run A, or A alone); click a cell to pick a head. Middle, that head's histogram over the corpus for both
// runs. Right, the documents where that head's mean is highest and lowest; "open" loads the batch's model if
// needed and runs the document live under the two runs' settings (A and B).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "focal/error.h"
#include "ui.h"

namespace focalscope {

namespace {

// Applies a document the user asked to open once the batch's model is the loaded one.
void apply_pending(Ui& ui, CorpusView& cv) {
  AppState& st = ui.st;
  if (cv.pending_doc < 0 || st.busy()) return;
  if (!st.has_model() || st.loaded.path != cv.stats.provenance.model_path) return;  // still loading (or failed)
  const size_t row = (size_t)cv.pending_doc;
  cv.pending_doc = -1;
  try {
    const focal::Model& m = *st.slots[0].model;
    const std::string text = cv.document_text(row);
    std::vector<int32_t> ids = m.require_tokenizer().encode(text, m.config().add_bos);
    if ((int)ids.size() > cv.stats.stats.shape.max_tokens) ids.resize((size_t)cv.stats.stats.shape.max_tokens);
    const std::string where = "stats file '" + cv.path + "'";
    st.set_spec(0, focal::TempSpec::from_json(cv.stats.run_specs_json[(size_t)cv.run_a], where));
    if (cv.run_b >= 0) {
      st.set_compare(true);
      st.set_spec(1, focal::TempSpec::from_json(cv.stats.run_specs_json[(size_t)cv.run_b], where));
    }
    st.prompt = m.require_tokenizer().decode(ids);
    std::snprintf(ui.prompt_buf, sizeof ui.prompt_buf, "%s", st.prompt.c_str());
    st.set_tokens(std::move(ids));
    st.notify("document " + cv.stats.doc_id[row] + " (" + std::to_string(cv.stats.doc_n_tokens[row]) +
                  " tokens as the batch ran it)",
              false);
  } catch (const focal::Error& e) { st.notify(e.what(), true); }
}

void draw_matrix(Ui& ui, CorpusView& cv, ImVec2 size) {
  AppState& st = ui.st;
  const focal::batch::StatsShape& s = cv.stats.stats.shape;
  const int L = s.n_layers, H = s.n_heads;
  const std::vector<float> m = cv.matrix();
  float amax = 0, lo = INFINITY, hi = -INFINITY;
  for (float v : m)
    if (!std::isnan(v)) amax = std::max(amax, std::fabs(v)), lo = std::min(lo, v), hi = std::max(hi, v);
  const bool diff = cv.run_b >= 0;
  const float label_w = 22.0f, label_h = ImGui::GetTextLineHeight() + 2.0f;
  // Layers across, heads down: a 30-layer model fits a short, wide tab.
  const float cw = std::max(4.0f, (size.x - label_w) / L),
              ch = std::max(4.0f, std::min(cw * 1.5f, (size.y - label_h) / H));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const ImVec2 p0(o.x + label_w, o.y);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const float v = m[(size_t)l * H + h];
      ImU32 c = IM_COL32(70, 70, 76, 255);
      if (!std::isnan(v))
        c = diff ? col_diverging(amax > 0 ? v / amax : 0.0) : col_viridis(hi > lo ? (v - lo) / (hi - lo) : 0.5);
      const ImVec2 a(p0.x + l * cw, p0.y + h * ch), b(a.x + cw - 1, a.y + ch - 1);
      dl->AddRectFilled(a, b, c);
      if (l == st.sel_layer && h == st.sel_head)
        dl->AddRect(a, ImVec2(b.x + 1, b.y + 1), IM_COL32(255, 255, 255, 255), 0, 0, 2.0f);
    }
  for (int h = 0; h < H; ++h)
    if (ch >= ImGui::GetTextLineHeight() * 0.8f || h % 2 == 0)
      dl->AddText(ImVec2(o.x, p0.y + h * ch + (ch - ImGui::GetTextLineHeight()) / 2), IM_COL32(150, 150, 160, 255),
                  std::to_string(h).c_str());
  const int step = std::max(1, (int)std::ceil(22.0f / cw));
  for (int l = 0; l < L; l += step)
    dl->AddText(ImVec2(p0.x + l * cw, p0.y + H * ch + 1), IM_COL32(150, 150, 160, 255), std::to_string(l).c_str());
  ImGui::InvisibleButton("corpus_matrix", ImVec2(label_w + L * cw, H * ch + label_h));
  if (ImGui::IsItemHovered()) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int l = (int)((mp.x - p0.x) / cw), h = (int)((mp.y - p0.y) / ch);
    if (l >= 0 && l < L && h >= 0 && h < H) {
      const float v = m[(size_t)l * H + h];
      ImGui::SetTooltip("layer %d head %d: %s %.4f", l, h, diff ? "B - A" : "mean", v);
      if (ImGui::IsItemClicked()) st.select(l, h, -1);
    }
  }
}

void draw_histogram(Ui& ui, const CorpusView& cv, ImVec2 size) {
  const AppState& st = ui.st;
  const focal::batch::CorpusStats& cs = cv.stats.stats;
  const int B = cs.shape.n_bins;
  const std::vector<double>& e = cv.stats.hist_edges[(size_t)cv.metric];
  const int runs[2] = {cv.run_a, cv.run_b};
  std::vector<std::vector<double>> frac(2, std::vector<double>((size_t)B, 0.0));
  double top = 0;
  for (int k = 0; k < 2; ++k) {
    if (runs[k] < 0) continue;
    const size_t c = cs.cell(runs[k], st.sel_layer, st.sel_head, cv.metric);
    double n = 0;
    for (int b = 0; b < B; ++b) n += (double)cs.hist[c * B + b];
    for (int b = 0; b < B; ++b) {
      frac[(size_t)k][(size_t)b] = n > 0 ? (double)cs.hist[c * B + b] / n : 0.0;
      top = std::max(top, frac[(size_t)k][(size_t)b]);
    }
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("corpus_hist", size);
  const float axis_h = ImGui::GetTextLineHeight() + 2.0f;
  const ImVec2 p0(o.x + 4, o.y + 2), p1(o.x + size.x - 4, o.y + size.y - axis_h);
  dl->AddRectFilled(p0, p1, IM_COL32(24, 26, 32, 255));
  if (top <= 0) return;
  const float bw = (p1.x - p0.x) / B;
  for (int k = 0; k < 2; ++k) {
    if (runs[k] < 0) continue;
    const ImU32 c = col_run(k);
    for (int b = 0; b < B; ++b) {
      const float y = p1.y - (float)(frac[(size_t)k][(size_t)b] / top) * (p1.y - p0.y - 4);
      const float x = p0.x + b * bw;
      if (k == 0)
        dl->AddRectFilled(ImVec2(x, y), ImVec2(x + bw - 1, p1.y), (c & 0x00FFFFFF) | 0xB0000000);
      else
        dl->AddRect(ImVec2(x, y), ImVec2(x + bw, p1.y), c, 0, 0, 1.5f);
    }
  }
  for (int i = 0; i <= 4; ++i) {
    const int b = i * B / 4;
    dl->AddText(ImVec2(p0.x + b * bw - (i == 4 ? 30 : 0), p1.y + 1), IM_COL32(150, 150, 160, 255),
                fmt(e.back() >= 100 ? "%.0f" : "%.2f", e[(size_t)b]).c_str());
  }
}

void draw_documents(Ui& ui, CorpusView& cv) {
  AppState& st = ui.st;
  const int run = cv.run_b >= 0 ? cv.run_b : cv.run_a;
  const std::vector<size_t> ranked = cv.ranked_docs(run, st.sel_layer, st.sel_head);
  ImGui::TextDisabled("head %d.%d, %s mean per document (%s)", st.sel_layer, st.sel_head,
                      focal::row_metric_name(cv.metric), cv.stats.run_names[(size_t)run].c_str());
  const size_t n_show = std::min<size_t>(4, ranked.size() / 2 + ranked.size() % 2);
  if (ImGui::BeginTable("corpus_docs", 3, ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg)) {
    auto row = [&](size_t d, const char* tag) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::PushID((int)d);
      if (ImGui::SmallButton("open")) open_corpus_document(ui, d);
      ImGui::PopID();
      ImGui::TableNextColumn();
      ImGui::Text("%s %.3f", tag, cv.stats.doc_head_mean(d, run, st.sel_layer, st.sel_head, cv.metric));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(cv.stats.doc_id[d].c_str());
    };
    for (size_t i = 0; i < n_show; ++i) row(ranked[i], "high");
    for (size_t i = 0; i < n_show; ++i) row(ranked[ranked.size() - n_show + i], "low ");
    ImGui::EndTable();
  }
  if (cv.pending_doc >= 0) ImGui::TextDisabled("loading %s ...", cv.stats.provenance.model_path.c_str());
}

}  // namespace

void open_corpus_document(Ui& ui, size_t row) {
  AppState& st = ui.st;
  if (!st.corpus) throw focal::Error("no corpus statistics are open: open a stats file of focal batch first");
  CorpusView& cv = *st.corpus;
  if (row >= cv.stats.n_docs())
    throw focal::Error("the stats file has " + std::to_string(cv.stats.n_docs()) + " documents; there is no row " +
                       std::to_string(row));
  cv.pending_doc = (int64_t)row;
  if (!st.has_model() || st.loaded.path != cv.stats.provenance.model_path) st.open_path(cv.stats.provenance.model_path);
}

void draw_corpus(Ui& ui) {
  AppState& st = ui.st;
  if (!st.corpus) {
    ImGui::TextDisabled("open a stats file of `focal batch` (File > Open, drop it here, or focalscope STATS.h5)");
    return;
  }
  CorpusView& cv = *st.corpus;
  apply_pending(ui, cv);
  const focal::batch::StatsShape& s = cv.stats.stats.shape;
  if (st.sel_layer >= s.n_layers || st.sel_head >= s.n_heads) st.select(0, 0, -1);
  static const int kMetrics[] = {focal::kEntropyNats, focal::kEntropyNorm, focal::kEffSupport, focal::kMaxProb,
                                 focal::kTopkMass,    focal::kTailMass,    focal::kSinkMass};
  ImGui::SetNextItemWidth(140);
  if (ImGui::BeginCombo("##corpus_metric", focal::row_metric_name(cv.metric))) {
    for (int m : kMetrics)
      if (ImGui::Selectable(focal::row_metric_name(m), m == cv.metric)) cv.metric = m;
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  ImGui::TextColored(col_run_v4(0), "A: %s", cv.stats.run_names[(size_t)cv.run_a].c_str());
  if (cv.run_b >= 0) {
    ImGui::SameLine();
    ImGui::TextColored(col_run_v4(1), "B: %s", cv.stats.run_names[(size_t)cv.run_b].c_str());
  }
  ImGui::SameLine();
  ImGui::TextDisabled("%zu documents, %llu tokens, %d rank(s); %s", cv.stats.n_docs(),
                      (unsigned long long)cv.stats.stats.n_tokens, cv.stats.n_ranks, cv.path.c_str());
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  ImGui::BeginGroup();
  ImGui::TextDisabled("corpus mean %s per layer (across) x head (down)", cv.run_b >= 0 ? "B - A" : "A");
  draw_matrix(ui, cv, ImVec2(avail.x * 0.36f, avail.y - ImGui::GetTextLineHeightWithSpacing()));
  ImGui::EndGroup();
  ImGui::SameLine();
  ImGui::BeginGroup();
  ImGui::TextDisabled("head %d.%d: %s over the corpus (A filled, B outline)", st.sel_layer, st.sel_head,
                      focal::row_metric_name(cv.metric));
  draw_histogram(ui, cv, ImVec2(avail.x * 0.28f, avail.y - ImGui::GetTextLineHeightWithSpacing()));
  ImGui::EndGroup();
  ImGui::SameLine();
  ImGui::BeginGroup();
  draw_documents(ui, cv);
  ImGui::EndGroup();
}

}  // namespace focalscope
