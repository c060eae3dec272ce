// Corpus tab: a `focal batch` stats file opened in the app. Left, the layer x head matrix of corpus means (run B
// minus run A, or A alone) with its colour bar; click a cell to pick a head (in the stats file's shape). Middle, that
// head's histogram over the corpus for both runs, its axis over the bins that hold data. Right, the documents where
// that head's mean is highest and lowest; "open" loads the batch's model if needed and runs the document live under
// the two runs' settings (A and B). Runs keep the figures' colour of their names here as in every other panel.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "focal/error.h"
#include "ui.h"

namespace focalscope {

namespace fig = focal::figures;

namespace {

// Whether the loaded model is the batch's own (then the model panels and the tab show one head).
bool model_is_batch(const AppState& st, const CorpusView& cv) {
  const focal::ModelConfig* c = st.config();
  return st.has_model() && c && c->n_layers == cv.n_layers() && c->n_heads == cv.n_heads() &&
         cv.is_model(st.loaded.path);
}

// Applies a document the user asked to open once the batch's model is the loaded one.
void apply_pending(Ui& ui, CorpusView& cv) {
  AppState& st = ui.st;
  if (cv.pending_doc < 0 || st.busy()) return;
  if (!st.has_model() || !cv.is_model(st.loaded.path)) return;  // still loading (or failed)
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

// Black text on light cells, white on dark ones.
ImU32 text_on(ImU32 c) {
  const double l = 0.2126 * (c & 255) + 0.7152 * (c >> 8 & 255) + 0.0722 * (c >> 16 & 255);
  return l > 140 ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255);
}

void draw_matrix(Ui& ui, CorpusView& cv, ImVec2 size) {
  AppState& st = ui.st;
  const int L = cv.n_layers(), H = cv.n_heads();
  const std::vector<float> m = cv.matrix();  // [L, H]
  float amax = 0, lo = INFINITY, hi = -INFINITY;
  for (float v : m)
    if (!std::isnan(v)) amax = std::max(amax, std::fabs(v)), lo = std::min(lo, v), hi = std::max(hi, v);
  const bool diff = cv.run_b >= 0;
  const bool any = lo <= hi;
  const float line = ImGui::GetTextLineHeight();
  const float bar_h = 10.0f, bar_block = bar_h + 3 + line + 4;  // the colour bar and its tick labels
  const float label_w = 22.0f, label_h = line + 2.0f;
  // Layers across, heads down: a 30-layer model fits a short, wide tab.
  const float cw = std::max(4.0f, (size.x - label_w) / L),
              ch = std::max(4.0f, std::min(cw * 1.5f, (size.y - label_h - bar_block) / H));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const ImVec2 p0(o.x + label_w, o.y);
  ui.rects["corpus.matrix"] = ImVec4(p0.x, p0.y, L * cw, H * ch);
  const char* cell_fmt = amax >= 10 ? "%.1f" : amax >= 1 ? "%.2f" : "%.3f";
  const bool values = cw >= ImGui::CalcTextSize("-0.000").x + 4 && ch >= line + 2;  // room to print each value
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const float v = m[(size_t)l * H + h];
      ImU32 c = IM_COL32(70, 70, 76, 255);
      if (!std::isnan(v))
        c = diff ? col_diverging(amax > 0 ? v / amax : 0.0) : col_viridis(hi > lo ? (v - lo) / (hi - lo) : 0.5);
      const ImVec2 a(p0.x + l * cw, p0.y + h * ch), b(a.x + cw - 1, a.y + ch - 1);
      dl->AddRectFilled(a, b, c);
      if (values && !std::isnan(v)) {
        const std::string s = fmt(cell_fmt, v);
        const ImVec2 ts = ImGui::CalcTextSize(s.c_str());
        dl->AddText(ImVec2(a.x + (cw - 1 - ts.x) / 2, a.y + (ch - 1 - ts.y) / 2), text_on(c), s.c_str());
      }
      if (l == cv.layer && h == cv.head)
        dl->AddRect(a, ImVec2(b.x + 1, b.y + 1), IM_COL32(255, 255, 255, 255), 0, 0, 2.0f);
    }
  for (int h = 0; h < H; ++h)
    if (ch >= line * 0.8f || h % 2 == 0)
      dl->AddText(ImVec2(o.x, p0.y + h * ch + (ch - line) / 2), IM_COL32(150, 150, 160, 255),
                  std::to_string(h).c_str());
  const int step = std::max(1, (int)std::ceil(22.0f / cw));
  for (int l = 0; l < L; l += step)
    dl->AddText(ImVec2(p0.x + l * cw, p0.y + H * ch + 1), IM_COL32(150, 150, 160, 255), std::to_string(l).c_str());
  ImGui::InvisibleButton("corpus_matrix", ImVec2(label_w + L * cw, H * ch + label_h));
  if (ImGui::IsItemHovered()) {
    const ImVec2 mp = ImGui::GetIO().MousePos;
    const int l = (int)std::floor((mp.x - p0.x) / cw), h = (int)std::floor((mp.y - p0.y) / ch);
    if (l >= 0 && l < L && h >= 0 && h < H) {
      const focal::batch::CorpusStats& cs = cv.stats.stats;
      const auto& ma = cs.moments[cs.cell(cv.run_a, l, h, cv.metric)];
      const float v = m[(size_t)l * H + h];
      if (std::isnan(v))
        ImGui::SetTooltip("head %d.%d: no rows in the corpus", l, h);
      else if (diff)
        ImGui::SetTooltip("head %d.%d: B - A = %+.4f\nA %.4f, B %.4f (corpus means of %s)", l, h, v, ma.mean,
                          cs.moments[cs.cell(cv.run_b, l, h, cv.metric)].mean, focal::row_metric_name(cv.metric));
      else
        ImGui::SetTooltip("head %d.%d: corpus mean %.4f (%s, %.0f rows)", l, h, v, focal::row_metric_name(cv.metric),
                          ma.n);
      if (ImGui::IsItemClicked()) {
        cv.select(l, h);
        if (model_is_batch(st, cv)) st.select(l, h, -1);
      }
    }
  }
  // The colour bar: what a cell's colour means.
  const ImVec2 bp(p0.x, ImGui::GetCursorScreenPos().y + 2);
  const float bw = std::min(L * cw, 260.0f);
  if (any) {
    const float used = diff ? draw_colorbar_h(ui, "corpus.colorbar", dl, bp, bw, bar_h, -amax, amax > 0 ? amax : 1.0,
                                              ScaleKind::kDiverging)
                            : draw_colorbar_h(ui, "corpus.colorbar", dl, bp, bw, bar_h, lo, hi > lo ? hi : lo + 1.0,
                                              ScaleKind::kLinear);
    dl->AddText(ImVec2(bp.x + bw + 8, bp.y - 2), IM_COL32(150, 150, 160, 255),
                diff ? "B - A" : focal::row_metric_name(cv.metric));
    ImGui::Dummy(ImVec2(bw, used + 4));
  } else {
    ImGui::TextDisabled("no cell has a value");
  }
}

// Where value v lies along bins [b0, b1] of edges e (linear within a bin, so log-spaced bins read right too).
float bin_pos(const std::vector<double>& e, int b0, int b1, double v) {
  int b = b0;
  while (b < b1 && v >= e[(size_t)b + 1]) ++b;
  const double w = e[(size_t)b + 1] - e[(size_t)b];
  return (float)(b - b0) + (float)(w > 0 ? std::clamp((v - e[(size_t)b]) / w, 0.0, 1.0) : 0.0);
}

void draw_histogram(Ui& ui, const CorpusView& cv, ImVec2 size) {
  const focal::batch::CorpusStats& cs = cv.stats.stats;
  const int B = cs.shape.n_bins;
  const std::vector<double>& e = cv.stats.hist_edges[(size_t)cv.metric];  // [B + 1]
  const auto [b0, b1] = cv.hist_bins(cv.layer, cv.head);
  const int nb = b1 - b0 + 1;
  const int runs[2] = {cv.run_a, cv.run_b};
  std::vector<std::vector<double>> frac(2, std::vector<double>((size_t)B, 0.0));  // [2][B] share of the rows
  double top = 0;
  for (int k = 0; k < 2; ++k) {
    if (runs[k] < 0) continue;
    const size_t c = cs.cell(runs[k], cv.layer, cv.head, cv.metric);
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
  const bool hovered = ImGui::IsItemHovered();
  const float line = ImGui::GetTextLineHeight();
  const float axis_h = line + 6.0f;
  const ImVec2 p0(o.x + 4, o.y + line + 2), p1(o.x + size.x - 8, o.y + size.y - axis_h);
  dl->AddRectFilled(p0, p1, IM_COL32(24, 26, 32, 255));
  if (top <= 0 || p1.x - p0.x < 20 || p1.y - p0.y < 10) return;
  // y: the share of the head's rows in a bin, 0 at the bottom, the largest share at the top.
  const std::string top_label = "share of rows, top " + fmt(top >= 0.1 ? "%.2f" : "%.3f", top);
  dl->AddText(ImVec2(p0.x, o.y), IM_COL32(150, 150, 160, 255), top_label.c_str());
  ui.labels["corpus.hist_y"] = {top_label};
  const float bw = (p1.x - p0.x) / nb;
  for (int k = 0; k < 2; ++k) {
    if (runs[k] < 0) continue;
    const ImU32 c = col_run(k);
    for (int b = b0; b <= b1; ++b) {
      const float y = p1.y - (float)(frac[(size_t)k][(size_t)b] / top) * (p1.y - p0.y - 4);
      const float x = p0.x + (b - b0) * bw;
      if (k == 0)
        dl->AddRectFilled(ImVec2(x, y), ImVec2(x + std::max(1.0f, bw - 1), p1.y), (c & 0x00FFFFFF) | 0xB0000000);
      else
        dl->AddRect(ImVec2(x, y), ImVec2(x + bw, p1.y), c, 0, 0, 1.5f);
    }
  }
  // x: round ticks over the shown bins' range (log-spaced edges, eff_support, get 1-2-5 ticks per decade).
  const double lo = e[(size_t)b0], hi = e[(size_t)b1 + 1];
  const bool log_bins = B > 2 && e[0] > 0 && (e[2] - e[1]) > 1.5 * (e[1] - e[0]);
  std::vector<double> tv;
  if (log_bins) {
    for (double dec = std::pow(10.0, std::floor(std::log10(lo))); dec <= hi; dec *= 10)
      for (double f : {1.0, 2.0, 5.0})
        if (f * dec >= lo && f * dec <= hi) tv.push_back(f * dec);
    while (tv.size() > 6) {  // thin to at most 6, keeping every other
      std::vector<double> t2;
      for (size_t i = 0; i < tv.size(); i += 2) t2.push_back(tv[i]);
      tv = t2;
    }
  } else {
    tv = fig::nice_ticks(lo, hi, 5, false).values;
  }
  std::vector<std::string> shown;
  float last_right = -1e9f;
  for (double v : tv) {
    if (v < lo || v > hi) continue;
    const float x = p0.x + bin_pos(e, b0, b1, v) * bw;
    const std::string s = log_bins || std::fabs(v) >= 100 ? fmt("%.0f", v) : fig::format_number(v, (hi - lo) / 10);
    const std::string ascii = s.rfind("\xE2\x88\x92", 0) == 0 ? "-" + s.substr(3) : s;
    const ImVec2 ts = ImGui::CalcTextSize(ascii.c_str());
    const float lx = std::clamp(x - ts.x / 2, p0.x, p1.x - ts.x);
    dl->AddLine(ImVec2(x, p1.y), ImVec2(x, p1.y + 3), IM_COL32(170, 170, 180, 255));
    if (lx < last_right + 6) continue;
    dl->AddText(ImVec2(lx, p1.y + 3), IM_COL32(150, 150, 160, 255), ascii.c_str());
    last_right = lx + ts.x;
    shown.push_back(ascii);
  }
  ui.labels["corpus.hist_x"] = shown;
  if (hovered) {
    const float mx = ImGui::GetIO().MousePos.x;
    const int b = b0 + (int)std::floor((mx - p0.x) / bw);
    if (b >= b0 && b <= b1) {
      if (runs[1] >= 0)
        ImGui::SetTooltip("%s in [%.4g, %.4g): A %.4f, B %.4f of the rows", focal::row_metric_name(cv.metric),
                          e[(size_t)b], e[(size_t)b + 1], frac[0][(size_t)b], frac[1][(size_t)b]);
      else
        ImGui::SetTooltip("%s in [%.4g, %.4g): %.4f of the rows", focal::row_metric_name(cv.metric), e[(size_t)b],
                          e[(size_t)b + 1], frac[0][(size_t)b]);
    }
  }
}

void draw_documents(Ui& ui, CorpusView& cv) {
  const int run = cv.run_b >= 0 ? cv.run_b : cv.run_a;
  const std::vector<size_t> ranked = cv.ranked_docs(run, cv.layer, cv.head);
  ImGui::TextDisabled("head %d.%d, %s mean per document (%s)", cv.layer, cv.head, focal::row_metric_name(cv.metric),
                      cv.stats.run_names[(size_t)run].c_str());
  // Up to 4 highest and 4 lowest, each document once (with 3 documents the middle one was listed as both).
  const size_t n_high = std::min<size_t>(4, ranked.size() / 2 + ranked.size() % 2);
  const size_t n_low = std::min<size_t>(4, ranked.size() - n_high);
  std::vector<std::string> shown;  // the screenshot sidecar's record: "high|low doc_id"
  if (ImGui::BeginTable("corpus_docs", 3, ImGuiTableFlags_SizingStretchProp | ImGuiTableFlags_RowBg)) {
    auto row = [&](size_t d, const char* tag) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::PushID((int)d);
      if (ImGui::SmallButton("open")) {
        try {
          open_corpus_document(ui, d);
        } catch (const focal::Error& e) { ui.st.notify(e.what(), true); }
      }
      ImGui::PopID();
      ImGui::TableNextColumn();
      ImGui::Text("%s %.3f", tag, cv.stats.doc_head_mean(d, run, cv.layer, cv.head, cv.metric));
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(cv.stats.doc_id[d].c_str());
      shown.push_back(std::string(tag[0] == 'h' ? "high " : "low ") + cv.stats.doc_id[d]);
    };
    for (size_t i = 0; i < n_high; ++i) row(ranked[i], "high");
    for (size_t i = 0; i < n_low; ++i) row(ranked[ranked.size() - n_low + i], "low ");
    ImGui::EndTable();
  }
  ui.labels["corpus.docs"] = shown;
  if (cv.pending_doc >= 0) ImGui::TextDisabled("loading %s ...", cv.stats.provenance.model_path.c_str());
}

// The batch's model: loaded (the panels above run it), or a button that opens it.
void draw_model_line(Ui& ui, const CorpusView& cv) {
  const AppState& st = ui.st;
  const std::string& mp = cv.stats.provenance.model_path;
  if (st.has_model() && cv.is_model(st.loaded.path)) {
    ImGui::TextDisabled("model %s: loaded, the panels above run it", mp.c_str());
    return;
  }
  std::error_code ec;
  if (mp.empty() || !std::filesystem::exists(mp, ec)) {
    ImGui::TextDisabled("model %s: not on disk, so documents cannot be run live", mp.empty() ? "(none)" : mp.c_str());
    return;
  }
  ImGui::TextDisabled("model %s", mp.c_str());
  ImGui::SameLine();
  if (ImGui::SmallButton("Open the batch's model")) {
    try {
      open_corpus_model(ui);
    } catch (const focal::Error& e) { ui.st.notify(e.what(), true); }
  }
}

}  // namespace

void open_corpus_model(Ui& ui) {
  AppState& st = ui.st;
  if (!st.corpus) throw focal::Error("no corpus statistics are open: open a stats file of focal batch first");
  const std::string& mp = st.corpus->stats.provenance.model_path;
  std::error_code ec;
  if (mp.empty() || !std::filesystem::exists(mp, ec))
    throw focal::Error("the stats file '" + st.corpus->path + "' names the model '" + mp +
                       "', which is not on disk: put it back there, or open another copy with open");
  if (st.has_model() && st.corpus->is_model(st.loaded.path)) return;
  CorpusView& cv = *st.corpus;
  if (st.prompt.empty() && cv.pending_doc < 0) {  // nothing to run yet: the selected head's highest document
    const std::vector<size_t> ranked = cv.ranked_docs(cv.run_b >= 0 ? cv.run_b : cv.run_a, cv.layer, cv.head);
    if (!ranked.empty()) cv.pending_doc = (int64_t)ranked[0];
  }
  st.open_path(mp);
}

void open_corpus_document(Ui& ui, size_t row) {
  AppState& st = ui.st;
  if (!st.corpus) throw focal::Error("no corpus statistics are open: open a stats file of focal batch first");
  CorpusView& cv = *st.corpus;
  if (row >= cv.stats.n_docs())
    throw focal::Error("the stats file has " + std::to_string(cv.stats.n_docs()) + " documents; there is no row " +
                       std::to_string(row));
  cv.pending_doc = (int64_t)row;
  open_corpus_model(ui);
}

void draw_corpus(Ui& ui) {
  AppState& st = ui.st;
  if (!st.corpus) {
    ImGui::TextDisabled("open a stats file of `focal batch` (File > Open, drop it here, or focalscope STATS.h5)");
    return;
  }
  CorpusView& cv = *st.corpus;
  apply_pending(ui, cv);
  // With the batch's model loaded, the tab and the model panels show one head: the model opens on the tab's head,
  // and a head picked in the model panels shows here.
  const bool linked = model_is_batch(st, cv);
  if (linked && !cv.linked)
    st.select(cv.layer, cv.head, -1);
  else if (linked)
    cv.select(st.sel_layer, st.sel_head);
  cv.linked = linked;
  ui.labels["corpus.selected"] = {std::to_string(cv.layer) + "." + std::to_string(cv.head)};
  // The tab's runs, coloured by their names as the figures and the other panels colour theirs.
  const std::string name_a = cv.stats.run_names[(size_t)cv.run_a];
  const std::string name_b = cv.run_b >= 0 ? cv.stats.run_names[(size_t)cv.run_b] : std::string();
  set_run_colours(name_a, name_b);
  ui.labels["corpus.run_colours"] = {name_a + "=" + col_hex(col_run(0))};
  if (cv.run_b >= 0) ui.labels["corpus.run_colours"].push_back(name_b + "=" + col_hex(col_run(1)));
  static const int kMetrics[] = {focal::kEntropyNats, focal::kEntropyNorm, focal::kEffSupport, focal::kMaxProb,
                                 focal::kTopkMass,    focal::kTailMass,    focal::kSinkMass};
  ImGui::SetNextItemWidth(140);
  if (ImGui::BeginCombo("##corpus_metric", focal::row_metric_name(cv.metric))) {
    for (int m : kMetrics)
      if (ImGui::Selectable(focal::row_metric_name(m), m == cv.metric)) cv.metric = m;
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  ImGui::TextColored(col_run_v4(0), "A: %s", name_a.c_str());
  if (cv.run_b >= 0) {
    ImGui::SameLine();
    ImGui::TextColored(col_run_v4(1), "B: %s", name_b.c_str());
  }
  ImGui::SameLine();
  ImGui::TextDisabled("%zu documents, %llu tokens, %d rank(s), %d layers x %d heads; %s", cv.stats.n_docs(),
                      (unsigned long long)cv.stats.stats.n_tokens, cv.stats.n_ranks, cv.n_layers(), cv.n_heads(),
                      cv.path.c_str());
  if (cv.stats.run_names.size() > 2) {  // the tab compares two runs: the others are named, not hidden
    std::string others;
    for (size_t k = 0; k < cv.stats.run_names.size(); ++k)
      if ((int)k != cv.run_a && (int)k != cv.run_b) others += (others.empty() ? "" : ", ") + cv.stats.run_names[k];
    const std::string note = "also in the file, not shown: " + others + " (the tab shows its first two runs)";
    ImGui::TextDisabled("%s", note.c_str());
    ui.labels["corpus.runs_not_shown"] = {note};
  }
  draw_model_line(ui, cv);
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  // A short pane (1280 x 720) drew 7 px rows: the matrix keeps 12 px a head (up to 320 px in all) and the tab
  // scrolls, as the Temps tab.
  const float line = ImGui::GetTextLineHeight(),
              min_body = std::min(320.0f, std::max(120.0f, 12.0f * (float)cv.n_heads() + 2.0f * line + 30.0f));
  const float body_h = std::max(min_body, avail.y - ImGui::GetTextLineHeightWithSpacing());
  ImGui::BeginGroup();
  ImGui::TextDisabled("corpus mean %s per layer (across) x head (down)", cv.run_b >= 0 ? "B - A" : "A");
  draw_matrix(ui, cv, ImVec2(avail.x * 0.36f, body_h));
  ImGui::EndGroup();
  ImGui::SameLine();
  ImGui::BeginGroup();
  ImGui::TextDisabled("head %d.%d: %s over the corpus (%s)", cv.layer, cv.head, focal::row_metric_name(cv.metric),
                      cv.run_b >= 0 ? "A filled, B outline" : "A");
  draw_histogram(ui, cv, ImVec2(avail.x * 0.30f, body_h));
  ImGui::EndGroup();
  ImGui::SameLine();
  ImGui::BeginGroup();
  draw_documents(ui, cv);
  ImGui::EndGroup();
  set_run_colours(st);  // the other panels' runs again
}

}  // namespace focalscope
