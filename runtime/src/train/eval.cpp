// `focal eval`: validation loss / perplexity, and retrieval accuracy with the attention mass on the relevant tokens
// at each answer's query row, by task kind and context length.
#include <algorithm>
#include <cmath>
#include <map>

#include "focal/error.h"
#include "focal/device.h"
#include "focal/eval.h"
#include "focal/metrics.h"
#include "train/backward.h"
#include "train/data.h"

namespace focal {

namespace {

// Relevant mass and entropy at the query rows of a task's answers, for every layer and head, from the attention
// rows as the forward produces them (nothing T^2 is kept).
class AnswerObserver : public ForwardObserver {
 public:
  AnswerObserver(const Task& t, int n_layers, int n_heads) : task_(t), L_(n_layers), H_(n_heads) {
    const size_t n = t.answers.size() * (size_t)n_layers * n_heads;
    rel_.assign(n, NAN);
    ent_.assign(n, NAN);
    for (size_t a = 0; a < t.answers.size(); ++a) row_to_answer_[t.answers[a].answer_pos - 1] = (int)a;
  }
  bool wants_rows(int, int) const override { return true; }
  void on_rows(int layer, int head, int row0, int n_rows, int stride, const float* probs, const float*) override {
    for (int r = 0; r < n_rows; ++r) {
      auto it = row_to_answer_.find(row0 + r);
      if (it == row_to_answer_.end()) continue;
      const TaskAnswer& ans = task_.answers[it->second];
      const float* p = probs + (size_t)r * stride;
      const int n = row0 + r + 1;
      float m[kNumRowMetrics];
      row_metrics(p, n, 5, ans.relevant.data(), (int)ans.relevant.size(), m);
      const size_t k = ((size_t)it->second * L_ + layer) * H_ + head;
      rel_[k] = m[kRelevantMass];
      ent_[k] = m[kEntropyNats];
    }
  }
  const Task& task_;
  int L_, H_;
  std::map<int, int> row_to_answer_;
  std::vector<float> rel_, ent_;  // [answers, layers, heads]
};

}  // namespace

EvalFile evaluate(const Model& model, const TempSpec& spec, const EvalOptions& opt,
                  const std::function<void(int, int)>& progress) {
  const ModelConfig& c = model.config();
  spec.validate(c);
  EvalFile e;
  e.model_path = model.recorded_path();
  e.model_config_json = c.source_json;
  e.temp_spec_json = spec.to_json();
  e.tool_version = version();
  e.weights_checksum = model.weights_checksum();
  e.device = device_name(model.device());  // where and how it ran, as the other files record (a fast table read
  e.precision = precision_name(model.precision());  // as an exact one)
  e.n_layers = c.n_layers;

  check_data_tokenizer(opt.data_dir, model.tokenizer(), model.recorded_path());
  if (opt.val_sequences < 1)
    throw Error("val_sequences", "--val-sequences " + std::to_string(opt.val_sequences) +
                                     ": give at least 1 validation window (a loss over 0 tokens would read 0)");
  // A window given is refused past the context (it was shrunk to it without a word); the default fits any context.
  if (opt.val_seq_len != 0 && (opt.val_seq_len < 2 || opt.val_seq_len > c.max_positions))
    throw Error("val_seq_len", "--val-seq-len " + std::to_string(opt.val_seq_len) + " is outside 2.." +
                                   std::to_string(c.max_positions) + " (the model's context)");
  const std::vector<int32_t> val = read_tokens(opt.data_dir + "/text_val.bin", c.vocab_size);
  const int T = opt.val_seq_len > 0 ? opt.val_seq_len : std::min(256, c.max_positions);
  if ((int)val.size() <= T + 1) throw Error("'" + opt.data_dir + "/text_val.bin' is shorter than one window");
  if (opt.task_set != "eval" && opt.task_set != "distract")
    throw Error("task_set", "task set '" + opt.task_set +
                                "' is unknown: use eval (by context length) or distract "
                                "(by number of distractor pairs)");
  const bool by_distract = opt.task_set == "distract";
  e.x_axis = by_distract ? "distractors" : "length";
  const std::string task_path = opt.data_dir + "/tasks_" + opt.task_set + ".jsonl";
  std::vector<Task> tasks = read_tasks(task_path, c.vocab_size);
  if (by_distract) {
    for (Task& t : tasks) {
      if (t.distractors < 0)
        throw Error("'" + task_path +
                    "' holds a task without a distractor count (rebuild the data with "
                    "scripts/data/build_data.py)");
      t.length = t.distractors;  // the x axis of this task set
    }
  }

  // kinds and lengths in first-seen / ascending order
  for (const Task& t : tasks) {
    if (std::find(e.task_kinds.begin(), e.task_kinds.end(), t.kind) == e.task_kinds.end())
      e.task_kinds.push_back(t.kind);
    if (std::find(e.lengths.begin(), e.lengths.end(), t.length) == e.lengths.end()) e.lengths.push_back(t.length);
  }
  std::sort(e.lengths.begin(), e.lengths.end());
  const size_t K = e.task_kinds.size(), Ln = e.lengths.size(), L = c.n_layers;
  std::map<std::pair<size_t, size_t>, int> used;
  std::vector<const Task*> todo;
  for (const Task& t : tasks) {
    const size_t k = std::find(e.task_kinds.begin(), e.task_kinds.end(), t.kind) - e.task_kinds.begin();
    const size_t li = std::find(e.lengths.begin(), e.lengths.end(), t.length) - e.lengths.begin();
    if ((int)t.ids.size() > c.max_positions) continue;  // beyond the model's context: reported as NaN
    if (opt.max_tasks > 0 && used[{k, li}] >= opt.max_tasks) continue;
    ++used[{k, li}];
    todo.push_back(&t);
  }
  const int total = opt.val_sequences + (int)todo.size();
  int done = 0;

  double loss = 0.0;
  const size_t span = val.size() - T - 1;
  for (int i = 0; i < opt.val_sequences; ++i) {
    loss += loss_only(model, val.data() + span * i / std::max(1, opt.val_sequences), T, spec);
    if (progress) progress(++done, total);
  }
  e.val_tokens = (int64_t)opt.val_sequences * (T - 1);
  e.val_loss = (float)(loss / std::max<int64_t>(1, e.val_tokens));
  e.val_ppl = std::exp(e.val_loss);

  std::vector<double> correct(K * Ln, 0.0), rel(K * Ln * L, 0.0), ent(K * Ln * L, 0.0);
  std::vector<int> n_rel(K * Ln * L, 0);
  e.n_answers.assign(K * Ln, 0);
  for (const Task* t : todo) {
    const size_t k = std::find(e.task_kinds.begin(), e.task_kinds.end(), t->kind) - e.task_kinds.begin();
    const size_t li = std::find(e.lengths.begin(), e.lengths.end(), t->length) - e.lengths.begin();
    AnswerObserver obs(*t, c.n_layers, c.n_heads);
    Session s(model, (int)t->ids.size());
    std::vector<float> logits;
    s.forward(t->ids.data(), (int)t->ids.size(), spec, RunOptions{}, &obs, &logits);
    const int V = c.vocab_size;
    for (size_t a = 0; a < t->answers.size(); ++a) {
      const TaskAnswer& ans = t->answers[a];
      bool ok = true;
      for (int i = 0; i < ans.answer_len && ok; ++i) {
        const float* row = logits.data() + (size_t)(ans.answer_pos - 1 + i) * V;
        ok = (std::max_element(row, row + V) - row) == t->ids[ans.answer_pos + i];
      }
      correct[k * Ln + li] += ok ? 1.0 : 0.0;
      ++e.n_answers[k * Ln + li];
      for (size_t l = 0; l < L; ++l)
        for (int h = 0; h < c.n_heads; ++h) {
          const size_t src = (a * L + l) * c.n_heads + h, dst = (k * Ln + li) * L + l;
          if (std::isnan(obs.rel_[src])) continue;
          rel[dst] += obs.rel_[src];
          ent[dst] += obs.ent_[src];
          ++n_rel[dst];
        }
    }
    if (progress) progress(++done, total);
  }
  e.accuracy.resize(K * Ln);
  for (size_t i = 0; i < K * Ln; ++i) e.accuracy[i] = e.n_answers[i] ? (float)(correct[i] / e.n_answers[i]) : NAN;
  e.relevant_mass.resize(K * Ln * L);
  e.entropy.resize(K * Ln * L);
  for (size_t i = 0; i < K * Ln * L; ++i) {
    e.relevant_mass[i] = n_rel[i] ? (float)(rel[i] / n_rel[i]) : NAN;
    e.entropy[i] = n_rel[i] ? (float)(ent[i] / n_rel[i]) : NAN;
  }
  return e;
}

}  // namespace focal
