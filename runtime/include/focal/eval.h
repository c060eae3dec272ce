// Evaluation of a model on held-out text and synthetic retrieval tasks (`focal eval`): validation loss and
// perplexity, retrieval accuracy by context length, and the attention mass on the relevant tokens per layer,
// through the runtime's metrics. Stored as HDF5 (format "focalscope-eval") for figures.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "focal/model.h"
#include "focal/provenance.h"
#include "focal/temp_spec.h"

namespace focal {

struct EvalFile : Provenance {
  static constexpr const char* kFormatName = "focalscope-eval";
  static constexpr int kFormatVersion = 1;
  std::string temp_spec_json;
  int n_layers = 0;
  float val_loss = 0.0f;                // mean next-token loss on the validation text (nats)
  float val_ppl = 0.0f;                 // exp(val_loss)
  int64_t val_tokens = 0;               // predicted tokens behind val_loss
  std::vector<std::string> task_kinds;  // [K] e.g. "kv", "mqar", "needle"
  std::string x_axis = "length";        // what `lengths` holds: "length" (tokens) or "distractors" (pairs)
  std::vector<int32_t> lengths;         // [Ln] target context lengths, or distractor counts (x_axis)
  std::vector<int32_t> n_answers;       // [K, Ln] answers evaluated
  std::vector<float> accuracy;          // [K, Ln] all answer tokens greedy-correct (teacher forced); NaN if none
  std::vector<float> relevant_mass;     // [K, Ln, n_layers] mean over heads and answers of R at the query row
  std::vector<float> entropy;           // [K, Ln, n_layers] mean entropy (nats) at the query row
};

struct EvalOptions {
  std::string data_dir;  // text_val.bin, tasks_eval.jsonl (scripts/data/build_data.py)
  // "eval": tasks_eval.jsonl by context length; "distract": tasks_distract.jsonl by number of distractor pairs
  std::string task_set = "eval";
  int val_seq_len = 0;  // validation windows; 0: 256, or the model's context when shorter
  int val_sequences = 32;
  int max_tasks = 0;  // per (kind, length or distractor count); 0 = all
};

// Throws Error naming the file when the data is missing or malformed. progress(done, total) after each item.
EvalFile evaluate(const Model& model, const TempSpec& spec, const EvalOptions& opt,
                  const std::function<void(int, int)>& progress = {});

void write_eval(const EvalFile& file, const std::string& path);  // temp name + rename
EvalFile read_eval(const std::string& path);

}  // namespace focal
