// The app's view of a batch stats file (corpus_view.h).
#include "corpus_view.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "focal/model.h"
#include "focal_batch/corpus.h"

namespace focalscope {

CorpusView CorpusView::load(const std::string& path) {
  CorpusView v;
  v.path = path;
  v.stats = focal::batch::read_stats(path, true);
  v.run_a = 0;
  v.run_b = v.stats.run_names.size() > 1 ? 1 : -1;
  v.metric = focal::kEntropyNats;
  return v;
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

std::vector<size_t> CorpusView::ranked_docs(int run, int layer, int head) const {
  std::vector<size_t> rows;
  for (size_t d = 0; d < stats.n_docs(); ++d)
    if (!std::isnan(stats.doc_head_mean(d, run, layer, head, metric))) rows.push_back(d);
  std::stable_sort(rows.begin(), rows.end(), [&](size_t x, size_t y) {
    return stats.doc_head_mean(x, run, layer, head, metric) > stats.doc_head_mean(y, run, layer, head, metric);
  });
  return rows;
}

std::string CorpusView::document_text(size_t row) const {
  return focal::batch::read_document(stats.data_path, stats.doc_index.at(row)).text;
}

bool is_corpus_path(const std::string& path) {
  try {
    (void)focal::batch::read_stats(path, false);
    return true;
  } catch (const std::exception&) { return false; }
}

}  // namespace focalscope
