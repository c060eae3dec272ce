// Training and evaluation data written by scripts/data/build_data.py (format: docs/data.md), runtime-internal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace focal {

class Tokenizer;

struct TaskAnswer {
  int answer_pos = 0;             // index in ids of the first answer token
  int answer_len = 0;             // answer tokens ids[answer_pos .. answer_pos + answer_len - 1]
  std::vector<int32_t> relevant;  // positions of the matching tokens in the context
};

struct Task {
  std::string kind;          // "kv", "mqar", "needle"
  int length = 0;            // target length
  int distractors = -1;      // distractor pairs of a distractor-sweep task (tasks_distract.jsonl); -1 elsewhere
  std::vector<int32_t> ids;  // starts with BOS
  std::vector<TaskAnswer> answers;
};

struct TrainData {
  int vocab_size = 0;
  std::vector<int32_t> text_train, text_val;  // token streams
  std::vector<Task> tasks_train;              // only tasks that fit seq_len
  std::vector<Task> tasks_val;                // tasks_eval.jsonl's tasks that fit seq_len (held out; may be empty)
};

// Reads int32 little-endian tokens; throws Error naming the file.
std::vector<int32_t> read_tokens(const std::string& path, int vocab_size);

// Throws Error when data_dir's tokenizer.model (what its .bin and .jsonl token ids mean) is not the model's
// tokenizer (compared piece by piece): its ids would be read as other tokens. No check when either is absent.
void check_data_tokenizer(const std::string& data_dir, const Tokenizer* model_tokenizer, const std::string& model_name);
// Reads a tasks .jsonl; throws Error naming the file and line.
std::vector<Task> read_tasks(const std::string& path, int vocab_size);

// Loads data_dir (tokenizer.model for the vocabulary, text_*.bin, tasks_train.jsonl when with_tasks, and
// tasks_eval.jsonl into tasks_val where it exists and with_val_tasks), keeping tasks no longer than seq_len. Throws
// Error with the command that makes the data when something is missing. kinds: the task kinds to keep (empty: all).
TrainData load_train_data(const std::string& data_dir, int seq_len, bool with_tasks,
                          const std::vector<std::string>& kinds = {}, bool with_val_tasks = false);

}  // namespace focal
