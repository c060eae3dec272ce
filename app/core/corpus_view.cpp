// The app's view of a batch stats file (corpus_view.h).
#include "corpus_view.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "app_state.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal_batch/corpus.h"

namespace focalscope {

namespace {

std::string shape_text(int n_layers, int n_heads) {
  return std::to_string(n_layers) + " layers x " + std::to_string(n_heads) + " heads (layers 0.." +
         std::to_string(n_layers - 1) + ", heads 0.." + std::to_string(n_heads - 1) + ")";
}

std::string list_text(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

}  // namespace

CorpusView CorpusView::load(const std::string& path) {
  CorpusView v;
  v.path = path;
  v.stats = focal::batch::read_stats(path, true);
  v.run_a = 0;
  v.run_b = v.stats.run_names.size() > 1 ? 1 : -1;
  v.metric = focal::kEntropyNats;
  return v;
}

void CorpusView::select(int l, int h) {
  if (l < 0 || l >= n_layers() || h < 0 || h >= n_heads())
    throw focal::Error("select " + std::to_string(l) + " " + std::to_string(h) + ": the stats file '" + path +
                       "' has " + shape_text(n_layers(), n_heads()));
  layer = l;
  head = h;
}

std::vector<float> CorpusView::matrix() const {
  const focal::batch::StatsShape& s = stats.stats.shape;
  std::vector<float> m((size_t)s.n_layers * s.n_heads, std::numeric_limits<float>::quiet_NaN());
  for (int l = 0; l < s.n_layers; ++l)
    for (int h = 0; h < s.n_heads; ++h) {
      const auto& a = stats.stats.moments[stats.stats.cell(run_a, l, h, metric)];
      if (a.n == 0) continue;
      double v = a.mean;
      if (run_b >= 0) {
        const auto& b = stats.stats.moments[stats.stats.cell(run_b, l, h, metric)];
        if (b.n == 0) continue;
        v = b.mean - a.mean;
      }
      m[(size_t)l * s.n_heads + h] = (float)v;
    }
  return m;
}

std::pair<int, int> CorpusView::hist_bins(int l, int h) const {
  const focal::batch::CorpusStats& cs = stats.stats;
  const int B = cs.shape.n_bins;
  int first = B, last = -1;
  for (int run : {run_a, run_b}) {
    if (run < 0) continue;
    const size_t c = cs.cell(run, l, h, metric);
    for (int b = 0; b < B; ++b)
      if (cs.hist[c * B + b] > 0) first = std::min(first, b), last = std::max(last, b);
  }
  if (last < 0) return {0, B - 1};
  return {std::max(0, first - 1), std::min(B - 1, last + 1)};
}

std::vector<size_t> CorpusView::ranked_docs(int run, int l, int h) const {
  std::vector<size_t> rows;
  for (size_t d = 0; d < stats.n_docs(); ++d)
    if (!std::isnan(stats.doc_head_mean(d, run, l, h, metric))) rows.push_back(d);
  std::stable_sort(rows.begin(), rows.end(), [&](size_t x, size_t y) {
    return stats.doc_head_mean(x, run, l, h, metric) > stats.doc_head_mean(y, run, l, h, metric);
  });
  return rows;
}

std::string CorpusView::document_text(size_t row) const {
  return focal::batch::read_document(stats.data_path, stats.doc_index.at(row)).text;
}

bool CorpusView::is_model(const std::string& model_path) const {
  const std::string& own = stats.provenance.model_path;
  if (model_path.empty() || own.empty()) return false;
  if (model_path == own) return true;
  std::error_code ea, eb;
  const auto a = std::filesystem::weakly_canonical(model_path, ea), b = std::filesystem::weakly_canonical(own, eb);
  return !ea && !eb && a == b;
}

bool is_corpus_path(const std::string& path) {
  try {
    (void)focal::batch::read_stats(path, false);
    return true;
  } catch (const std::exception&) { return false; }
}

void select_head(AppState& st, int layer, int head, int query, bool corpus_shown) {
  const std::string what = "select " + std::to_string(layer) + " " + std::to_string(head);
  const focal::ModelConfig* cfg = st.config();
  CorpusView* cv = st.corpus.get();
  const bool linked = cv && st.has_model() && cv->is_model(st.loaded.path);
  const bool to_corpus = cv && (corpus_shown || !cfg || linked);
  const bool to_model = cfg && (!to_corpus || linked);
  if (!to_corpus && !to_model) throw focal::Error(what + ": nothing is open: open a model, a capture or a stats file");
  if (to_corpus && (layer < 0 || layer >= cv->n_layers() || head < 0 || head >= cv->n_heads()))
    throw focal::Error(what + ": the stats file '" + cv->path + "' has " + shape_text(cv->n_layers(), cv->n_heads()));
  if (to_model) {
    if (layer < 0 || layer >= cfg->n_layers || head < 0 || head >= cfg->n_heads)
      throw focal::Error(what + ": the " + std::string(st.capture_only() ? "capture" : "model") + " has " +
                         shape_text(cfg->n_layers, cfg->n_heads));
    if (st.capture_only() && st.slots[0].run) {
      const focal::RunCapture& r = *st.slots[0].run;
      if (std::find(r.layers.begin(), r.layers.end(), layer) == r.layers.end() ||
          std::find(r.heads.begin(), r.heads.end(), head) == r.heads.end())
        throw focal::Error(what + ": the capture '" + st.loaded.path + "' stores layers " + list_text(r.layers) +
                           " and heads " + list_text(r.heads) +
                           " only (capture more with focal capture --layers/--heads)");
    }
    if (query < -1 || (query >= 0 && query >= st.n_tokens()))
      throw focal::Error(what + " " + std::to_string(query) + ": the query is a position 0.." +
                         std::to_string(st.n_tokens() - 1) + " (or -1: the last)");
  }
  if (to_corpus) cv->select(layer, head);
  if (to_model) st.select(layer, head, query);
}

}  // namespace focalscope
