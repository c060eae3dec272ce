// Picking what a figure shows out of captures and sweeps: runs by name, stored layers / heads / queries, attention
// rows (from stored probabilities, or re-tempered from raw scores), metric means. Every miss is an Error naming
// the option and listing the valid choices.
#pragma once

#include <string>
#include <vector>

#include "focal_figures/figures.h"

namespace focal::figures {

// One run of one capture file; label is the run's name, prefixed with the file's label when several files hold
// runs of the same name.
struct RunRef {
  const CaptureFile* file = nullptr;
  const RunCapture* run = nullptr;
  std::string label;      // the run's name, or FILE:RUN where two files hold a run of that name
  std::string qualified;  // FILE:RUN always (--runs takes it whether or not the name is shared)
};

// Every run of the capture sources, in file and capture order. Throws if a source is a sweep or no run exists.
std::vector<RunRef> capture_runs(const std::vector<Source>& sources, const std::string& kind);
// The runs named in `names` (a run's label or, when unambiguous, its bare name), or the first `default_count` runs
// when names is empty. Throws if a name is unknown, a run repeats or more than `max_count` are asked for.
std::vector<RunRef> select_runs(const std::vector<RunRef>& all, const std::vector<std::string>& names,
                                size_t default_count, size_t max_count, const std::string& kind);

// The sweep sources. Throws if a source is a capture or there is none.
std::vector<const SweepFile*> sweep_sources(const std::vector<Source>& sources);

// Index of `value` in a run's stored `list` (layers, heads or queries); throws naming `option` and the stored values.
int stored_index(const std::vector<int>& list, int value, const std::string& option, const std::string& what,
                 const RunRef& run);
// --layers / --heads: the listed indices, each checked against n (an Error naming `what`s and the valid range,
// "in <source>" where source is e.g. "the model" or "the sweep"), sorted and each once; 0..n-1 when want is empty.
std::vector<int> pick_indices(const std::vector<int>& want, int n, const std::string& what, const std::string& source);
// "0-3,5,7" for error messages.
std::string index_list_text(const std::vector<int>& v);
// A selection named in a title: "head 6" for one index, "heads 0,2" / "heads 0-3" for several (noun is singular).
std::string indices_text(const std::string& noun, const std::vector<int>& v);

// Probabilities of stored row (layer index a, head index b, query index c) over keys 0..query: the stored probs,
// or softmax(scores * row_scale) when only raw scores were stored. Throws if the run stores neither.
std::vector<double> attention_row(const RunRef& r, int a, int b, int c);
// Throws unless the run stores probabilities or scores, saying which figure needs them.
void require_rows(const RunRef& r, const std::string& kind);
// The row with key 0 removed and the rest renormalised to sum 1 (keys 1..query); empty when only key 0 is visible.
std::vector<double> drop_sink(const std::vector<double>& p);

// Row metric by name ("entropy_nats", ...); allow_loss admits "loss" (returned as -1). Throws listing the names.
int parse_metric(const std::string& name, bool allow_loss);
// Axis title for a metric, e.g. "Entropy (nats)"; topk_k fills in "Top-5 mass" ("Top-k mass" when <= 0).
std::string metric_title(int metric, int topk_k = 5);

// A metric's name in running text, e.g. "attention entropy", "prompt loss" (metric -1).
std::string metric_noun(int metric);

// Mean of a metric over heads and rows 1..T-1 (row 0 sees one key), NaN entries skipped: [n_layers].
std::vector<double> layer_means(const RunRef& r, int metric);
// Mean over rows 1..T-1 per layer and head: [n_layers * n_heads].
std::vector<double> head_means(const RunRef& r, int metric);
// Throws if every value is NaN (e.g. relevant_mass of a capture made without --relevant).
void require_values(const std::vector<double>& v, int metric, const std::string& where);

}  // namespace focal::figures
