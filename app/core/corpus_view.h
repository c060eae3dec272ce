// A `focal batch` stats file opened in the app (the Corpus tab): the corpus means per layer x head, one head's
// histograms, documents ranked by a head's per-document mean, and opening one of them as a live prompt. No window;
// unit-tested in app_core_test.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "focal_batch/stats_file.h"

namespace focalscope {

struct CorpusView {
  std::string path;
  focal::batch::StatsFile stats;
  int run_a = 0;  // the matrix shows run_b - run_a (run_a alone when run_b < 0)
  int run_b = -1;
  int metric = 0;  // focal::RowMetric
  // A document the user asked to open: applied once the batch's model is loaded (the panel polls it).
  int64_t pending_doc = -1;

  // Throws focal::Error naming the file.
  static CorpusView load(const std::string& path);
  // Corpus means [n_layers, n_heads] of `metric`: run_b - run_a, or run_a; NaN where a cell has no value.
  std::vector<float> matrix() const;
  // Row d of /docs ranked by head (layer, head)'s per-document mean of `metric` in `run`, highest first; documents
  // without a value are left out.
  std::vector<size_t> ranked_docs(int run, int layer, int head) const;
  // The text of row `row`'s document, read again from the corpus the file names (the batch ran its first
  // max_tokens tokens). Throws focal::Error when the corpus moved or shrank.
  std::string document_text(size_t row) const;
};

// Whether `path` is a focal batch stats file (root attribute format = focalscope-batch-stats).
bool is_corpus_path(const std::string& path);

}  // namespace focalscope
