// A `focal batch` stats file opened in the app (the Corpus tab): the corpus means per layer x head, one head's
// histograms, documents ranked by a head's per-document mean, and opening one of them as a live prompt. Its head
// selection is in the stats file's shape, whatever model is loaded. No window; unit-tested in app_core_test.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "focal_batch/stats_file.h"

namespace focalscope {

class AppState;

struct CorpusView {
  std::string path;
  focal::batch::StatsFile stats;
  int run_a = 0;  // the matrix shows run_b - run_a (run_a alone when run_b < 0)
  int run_b = -1;
  int metric = 0;           // focal::RowMetric
  int layer = 0, head = 0;  // the selected head, in [n_layers, n_heads] of the stats file
  bool linked = false;      // last frame the loaded model was the batch's (the panel keeps one selection for both)
  // A document the user asked to open: applied once the batch's model is loaded (the panel polls it).
  int64_t pending_doc = -1;

  // Throws focal::Error naming the file.
  static CorpusView load(const std::string& path);
  int n_layers() const { return stats.stats.shape.n_layers; }
  int n_heads() const { return stats.stats.shape.n_heads; }
  // Selects head (layer, head); throws focal::Error naming the stats file and its shape when it is outside it.
  void select(int layer, int head);
  // Corpus means [n_layers, n_heads] of `metric`: run_b - run_a, or run_a; NaN where a cell has no value.
  std::vector<float> matrix() const;
  // The histogram bins [first, last] (inclusive) the panel shows for head (layer, head)'s `metric`: from the first
  // to the last bin that holds a count in run_a or run_b, widened by one empty bin each side where there is one,
  // so the axis spans the data, not the metric's whole range. {0, n_bins - 1} when no bin holds a count.
  std::pair<int, int> hist_bins(int layer, int head) const;
  // Row d of /docs ranked by head (layer, head)'s per-document mean of `metric` in `run`, highest first; documents
  // without a value are left out.
  std::vector<size_t> ranked_docs(int run, int layer, int head) const;
  // The text of row `row`'s document, read again from the corpus the file names (the batch ran its first
  // max_tokens tokens). Throws focal::Error when the corpus moved or shrank.
  std::string document_text(size_t row) const;
  // Whether model_path names the model the batch ran (provenance model_path; the same file or directory after
  // resolving relative paths and links).
  bool is_model(const std::string& model_path) const;
};

// Whether `path` is a focal batch stats file (root attribute format = focalscope-batch-stats).
bool is_corpus_path(const std::string& path);

// The script's `select LAYER HEAD [QUERY]`: selects the head in every view it is meant for and fails where it
// cannot. The Corpus tab's selection takes it when a stats file is open and (corpus_shown, or no model or capture
// is loaded, or the loaded model is the stats file's); the model's (or capture's) selection takes it otherwise, and
// also when the loaded model is the stats file's, so both show one head. Throws focal::Error naming the shape of
// the view it does not fit (the stats file's, the model's, a capture's stored layers and heads, the query range)
// and changes nothing then.
void select_head(AppState& st, int layer, int head, int query, bool corpus_shown);

}  // namespace focalscope
