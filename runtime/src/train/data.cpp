// Readers of the training data files (docs/data.md).
#include "train/data.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "focal/error.h"
#include "focal/tokenizer.h"

namespace focal {

namespace {
const char* kMakeData = " (make it with scripts/data/build_data.py)";

bool exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}
}  // namespace

void check_data_tokenizer(const std::string& data_dir, const Tokenizer* model_tok, const std::string& model_name) {
  const std::string path = data_dir + "/tokenizer.model";
  if (!model_tok || !exists(path)) return;
  const auto data_tok = Tokenizer::load(path);
  std::string differs;
  if (data_tok->vocab_size() != model_tok->vocab_size()) {
    differs = "a vocabulary of " + std::to_string(data_tok->vocab_size()) + " tokens against the model's " +
              std::to_string(model_tok->vocab_size());
  } else {
    for (int id = 0; id < data_tok->vocab_size() && differs.empty(); ++id)
      if (data_tok->piece(id) != model_tok->piece(id))
        differs = "token " + std::to_string(id) + " is '" + data_tok->display(id) + "' there and '" +
                  model_tok->display(id) + "' in the model";
  }
  if (!differs.empty())
    throw Error("data_dir", "the data in '" + data_dir + "' was tokenized with its own '" + path +
                                "', which is not the tokenizer of " + model_name + " (" + differs +
                                "): its token ids would be read as other tokens. Use data built with the model's "
                                "tokenizer (a --quick build of scripts/data/build_data.py trains another one)");
}

std::vector<int32_t> read_tokens(const std::string& path, int vocab_size) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw Error("cannot read '" + path + "'" + kMakeData);
  const std::streamsize bytes = f.tellg();
  if (bytes % 4 != 0) throw Error("'" + path + "' is not a whole number of int32 tokens (truncated?)");
  std::vector<int32_t> ids((size_t)bytes / 4);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(ids.data()), bytes);
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw Error("'" + path + "': token " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                  " is outside the tokenizer's vocabulary (" + std::to_string(vocab_size) + ")");
  return ids;
}

std::vector<Task> read_tasks(const std::string& path, int vocab_size) {
  std::ifstream f(path);
  if (!f) throw Error("cannot read '" + path + "'" + kMakeData);
  std::vector<Task> tasks;
  std::string line;
  int lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    if (line.empty()) continue;
    const std::string where = "'" + path + "' line " + std::to_string(lineno);
    try {
      nlohmann::json j = nlohmann::json::parse(line);
      Task t;
      t.kind = j.at("kind").get<std::string>();
      t.length = j.value("length", 0);
      t.distractors = j.value("distractors", -1);
      t.ids = j.at("ids").get<std::vector<int32_t>>();
      for (auto& a : j.at("answers")) {
        TaskAnswer ans;
        ans.answer_pos = a.at("answer_pos").get<int>();
        ans.answer_len = a.at("answer_len").get<int>();
        ans.relevant = a.at("relevant").get<std::vector<int32_t>>();
        if (ans.answer_pos < 1 || ans.answer_len < 1 || ans.answer_pos + ans.answer_len > (int)t.ids.size())
          throw Error(where + ": answer span lies outside the sequence");
        for (int32_t r : ans.relevant)
          if (r < 0 || r >= ans.answer_pos)
            throw Error(where + ": relevant position " + std::to_string(r) +
                        " is not in the context before the answer");
        t.answers.push_back(std::move(ans));
      }
      for (int32_t id : t.ids)
        if (id < 0 || id >= vocab_size) throw Error(where + ": token id " + std::to_string(id) + " out of vocabulary");
      tasks.push_back(std::move(t));
    } catch (const Error&) { throw; } catch (const std::exception& e) {
      throw Error(where + ": malformed task (" + e.what() + ")");
    }
  }
  return tasks;
}

TrainData load_train_data(const std::string& dir, int seq_len, bool with_tasks, const std::vector<std::string>& kinds,
                          bool with_val_tasks) {
  if (!exists(dir)) throw Error("data_dir", "data_dir '" + dir + "' does not exist" + kMakeData);
  TrainData d;
  auto tok = Tokenizer::load(dir + "/tokenizer.model");
  d.vocab_size = tok->vocab_size();
  d.text_train = read_tokens(dir + "/text_train.bin", d.vocab_size);
  d.text_val = read_tokens(dir + "/text_val.bin", d.vocab_size);
  for (const auto& [name, ids] : {std::pair<const char*, const std::vector<int32_t>*>{"text_train.bin", &d.text_train},
                                  {"text_val.bin", &d.text_val}})
    if ((int)ids->size() <= seq_len + 1)  // named: the other file may hold millions
      throw Error("data_dir", "data_dir '" + dir + "': " + name + " holds " + std::to_string(ids->size()) +
                                  " tokens, fewer than one sequence of seq_len = " + std::to_string(seq_len) +
                                  " (lower --seq-len, or build more data)");
  if (with_tasks) {
    auto keep = [&](const Task& t) {
      return (int)t.ids.size() <= seq_len &&
             (kinds.empty() || std::find(kinds.begin(), kinds.end(), t.kind) != kinds.end());
    };
    for (Task& t : read_tasks(dir + "/tasks_train.jsonl", d.vocab_size))
      if (keep(t)) d.tasks_train.push_back(std::move(t));
    if (with_val_tasks && exists(dir + "/tasks_eval.jsonl"))
      for (Task& t : read_tasks(dir + "/tasks_eval.jsonl", d.vocab_size))
        if (keep(t)) d.tasks_val.push_back(std::move(t));
    if (d.tasks_train.empty())
      throw Error("data_dir", "data_dir: no task in '" + dir + "/tasks_train.jsonl' fits seq_len = " +
                                  std::to_string(seq_len) + (kinds.empty() ? "" : " of the chosen task kinds") +
                                  " (set the task fraction to 0, --task-frac 0, to train on text only)");
  }
  return d;
}

}  // namespace focal
