// The stats.h5 file of `focal batch` (format in docs/batch.md): its reader, for the figures, the app and tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "focal/provenance.h"
#include "focal_batch/stats.h"

namespace focal::batch {

constexpr const char* kStatsFormat = "focalscope-batch-stats";
constexpr int kStatsVersion = 1;
constexpr int kDocIdBytes = 64;  // /docs/id is a fixed-length string of this many bytes (longer ids are cut)

// Attention rows kept by --keep-rows: a uniform sample (bottom-k of a hash of document, window, layer, head, row).
struct KeptRow {
  uint64_t priority = 0;
  int64_t doc = 0;
  int32_t window = 0, layer = 0, head = 0, row = 0;
  std::vector<float> probs;  // [n_runs, max_tokens], keys beyond row are 0
};

struct StatsFile {
  Provenance provenance;
  std::string data_path;  // the corpus as given to --data
  bool window = false;    // --long window
  int n_ranks = 1;
  std::vector<std::string> run_names, run_specs_json;  // [R]
  std::vector<std::string> metric_names;               // [M]
  CorpusStats stats;
  std::vector<int32_t> pos_edges;               // [P + 1]
  std::vector<std::vector<double>> hist_edges;  // [M][n_bins + 1]
  // Per-document rows, in corpus order ([D] each; head_means [D, R, L, H, M], NaN where a document had no row).
  std::vector<int64_t> doc_index;
  std::vector<std::string> doc_id;
  std::vector<int32_t> doc_n_tokens, doc_n_tokens_total, doc_n_windows;
  std::vector<float> doc_head_means;
  std::vector<KeptRow> kept_rows;
  size_t n_docs() const { return doc_index.size(); }
  // Mean of run r's metric m over all layers and heads of document d (NaN-skipping).
  float doc_mean(size_t d, int run, int metric) const;
  float doc_head_mean(size_t d, int run, int layer, int head, int metric) const;
};

// Reads and checks a stats file; throws Error naming the file and item at fault. with_docs: also the per-document
// datasets (virtual datasets over rank shards after an MPI run: the shard files must sit where they were written,
// relative to the stats file) and the kept rows.
StatsFile read_stats(const std::string& path, bool with_docs = true);

}  // namespace focal::batch
