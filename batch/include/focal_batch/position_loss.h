// Next-token loss by position over long documents (`focal eval MODEL --positions`, issue 33): each document of a
// corpus under several settings (a temperature spec, optionally with a rope_scaling override), one forward per
// document and setting, NLL of every predicted token put into fixed-width position buckets; per-document rows, the
// token-weighted mean over documents and a bootstrap band over documents; one HDF5 file (docs/cli.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "focal/model.h"
#include "focal/provenance.h"
#include "focal/temp_spec.h"
#include "focal_batch/corpus.h"

namespace focal::batch {

// One setting: `name` is its spelling on the command line, SPEC[@ROPE] (e.g. "focal:0.4", "standard@dynamic:2").
struct PositionRun {
  std::string name;
  std::string spec_text;     // TempSpec grammar (focal/temp_spec.h), "native" included
  std::string rope_scaling;  // apply_rope_override's TYPE:FACTOR, empty: the model's own
};

// Parses "standard,focal:0.4,ssmax,native,standard@dynamic:2": comma-separated runs, each SPEC[@ROPE]. Throws Error
// (field "runs") naming the bad item. Specs are checked against `cfg` (native needs it), overrides by
// apply_rope_override on a copy of it (GPT-2 refuses them, naming the override).
std::vector<PositionRun> parse_position_runs(const std::string& text, const ModelConfig& cfg);

struct PositionLossOptions {
  int max_tokens = 0;                 // a document's first max_tokens tokens (shorter documents: all of theirs)
  int bucket_tokens = 0;              // bucket width in positions; 0: max_tokens / 32 (at least 1)
  int64_t limit_docs = 0;             // 0: every document
  OnError on_error = OnError::kFail;  // --on-error: a malformed or non-UTF-8 document stops the run, or is skipped
  int bootstrap = 1000;               // resamples of the documents for the band; 0: no band (lo = hi = mean)
  uint64_t seed = 1;                  // of the bootstrap's generator
  double band_level = 0.95;
};

// The file `focal eval --positions` writes and `focal figure positions` draws. Position p of a document is the
// position of the predicted token (1..T-1): its NLL is -log softmax(logits of row p-1)[token p], in nats.
struct PositionLossFile : Provenance {
  static constexpr const char* kFormatName = "focalscope-position-loss";
  static constexpr int kFormatVersion = 1;
  int max_tokens = 0, bucket_tokens = 0;
  int trained_context = 0;  // the model's max_position_embeddings
  double band_level = 0.95;
  int bootstrap = 0;
  std::vector<std::string> run_names;     // [R]
  std::vector<std::string> run_warnings;  // [R] what each run went on despite ("" when nothing)
  std::vector<int32_t> bucket_start;      // [B] first position of each bucket (bucket b: [start, start + width))
  std::vector<std::string> doc_ids;       // [D]
  std::vector<int32_t> doc_tokens;        // [D] tokens each document ran with
  std::vector<int32_t> doc_count;         // [D, B] predicted tokens of the document in each bucket
  std::vector<double> doc_nll_sum;        // [R, D, B] summed NLL (nats) of those tokens (in the file: fp32)
  std::vector<float> mean_nll;            // [R, B] sum over documents / count over documents; NaN where count 0
  std::vector<float> band_lo, band_hi;    // [R, B] bootstrap percentiles over documents at band_level
  // Attention entropy by query position, per layer: bucket b of a document holds its query rows q (0..T-1) with
  // q in the bucket; the mean is over those rows and every head.
  int n_layers = 0, n_heads = 0;
  std::vector<int32_t> doc_rows;        // [D, B] query rows of the document in each bucket
  std::vector<double> doc_entropy_sum;  // [R, D, L, B] summed entropy_nats over heads and rows (file: fp32)
  std::vector<float> mean_entropy;      // [R, L, B] sum over documents / (n_heads x rows); NaN where no row

  size_t n_runs() const { return run_names.size(); }
  size_t n_docs() const { return doc_ids.size(); }
  size_t n_buckets() const { return bucket_start.size(); }
};

// Loads each distinct rope override once through `load` (given the override, "" for the model's own). progress(done,
// total) counts document-runs; cancelled() is polled between layers. Throws Error for an empty corpus, a bad run or a
// run past the memory budget (the estimate in the message, before allocating).
using ModelLoader = std::function<std::unique_ptr<Model>(const std::string& rope_scaling)>;
PositionLossFile run_position_loss(const ModelLoader& load, const std::string& corpus_path,
                                   const std::string& runs_text, const PositionLossOptions& opt, size_t budget_bytes,
                                   const std::function<void(int64_t, int64_t)>& progress,
                                   const std::function<bool()>& cancelled);

// Token-weighted mean of each run's buckets and its bootstrap band (fills mean_nll, band_lo, band_hi), and the
// per-layer mean entropy (mean_entropy).
void summarize_position_loss(PositionLossFile& f);
// Bytes a forward of T tokens needs for the loss (KV cache, activations, a logits block).
size_t estimate_position_loss_bytes(const ModelConfig& c, int T);

void write_position_loss(const PositionLossFile& f, const std::string& path);
PositionLossFile read_position_loss(const std::string& path);

}  // namespace focal::batch
