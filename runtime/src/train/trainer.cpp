// The training loop: batches of text windows and synthetic retrieval tasks, loss and gradients through the
// runtime's forward (train/backward.cpp), global-norm clipping, AdamW with warm-up + cosine decay, evaluation,
// checkpoints (HF model directories swapped in atomically) and the HDF5 training log.
#include "focal/trainer.h"

#include <omp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "focal/atomic_file.h"
#include "focal/error.h"
#include "focal/log.h"
#include "focal/model_writer.h"
#include "focal/temp_spec.h"
#include "fnv1a.h"
#include "h5_io.h"
#include "model_internal.h"
#include "safetensors.h"
#include "train/backward.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/step.h"

namespace focal {

using json = nlohmann::json;

double lr_at(const TrainConfig& cfg, int step) {
  if (step < cfg.warmup_steps) return cfg.lr * (step + 1) / (double)cfg.warmup_steps;
  const double span = std::max(1, cfg.steps - cfg.warmup_steps);
  const double prog = std::min(1.0, (step - cfg.warmup_steps) / span);
  const double floor = cfg.min_lr_frac * cfg.lr;
  return floor + (cfg.lr - floor) * 0.5 * (1.0 + std::cos(M_PI * prog));
}

namespace {

// Training updates the parameters in place: every matrix is held as writable fp32, whatever the file stores.
LoadOptions fp32_weights() {
  LoadOptions o;
  o.weights = WeightsMode::kFp32;
  return o;
}

// What the run trains and validates on: FNV-1a 64 over the token streams and the tasks' ids and answers, as hex (a
// --resume over edited data went on under the old run's record).
std::string tokens_checksum(const TrainData& d) {
  uint64_t h = kFnv1aOffset;
  auto add = [&](const void* p, size_t n) { h = fnv1a_fold(h, p, n); };
  auto add_ids = [&](const std::vector<int32_t>& v) {
    const uint64_t n = v.size();
    add(&n, sizeof n);
    add(v.data(), v.size() * sizeof(int32_t));
  };
  add_ids(d.text_train);
  add_ids(d.text_val);
  for (const std::vector<Task>* tasks : {&d.tasks_train, &d.tasks_val})
    for (const Task& t : *tasks) {
      add(t.kind.data(), t.kind.size());
      add_ids(t.ids);
      for (const TaskAnswer& a : t.answers) {
        add(&a.answer_pos, sizeof a.answer_pos);
        add(&a.answer_len, sizeof a.answer_len);
        add_ids(a.relevant);
      }
    }
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", (unsigned long long)h);
  return b;
}

std::string train_config_json(const TrainConfig& c, const std::string& data_checksum) {
  json j;
  j["data_dir"] = c.data_dir;
  j["data_checksum"] = data_checksum;
  j["seed"] = c.seed;
  j["steps"] = c.steps;
  j["batch"] = c.batch;
  j["seq_len"] = c.seq_len;
  j["task_frac"] = c.task_frac;
  j["task_kinds"] = c.task_kinds;
  j["task_loss"] = c.task_loss_answers ? "answers" : "all";
  j["lr"] = c.lr;
  j["warmup_steps"] = c.warmup_steps;
  j["min_lr_frac"] = c.min_lr_frac;
  j["beta1"] = c.beta1;
  j["beta2"] = c.beta2;
  j["adam_eps"] = c.adam_eps;
  j["weight_decay"] = c.weight_decay;
  j["grad_clip"] = c.grad_clip;
  j["tau_lr_mult"] = c.tau_lr_mult;
  j["init_std"] = c.init_std;
  j["init_from"] = c.init_from;
  j["eval_every"] = c.eval_every;
  j["eval_sequences"] = c.eval_sequences;
  j["threads"] = omp_get_max_threads();
  return j.dump();
}

// --resume continues a run exactly only under the options it started with: the ones that shape the trajectory
// (train_config, as trainer_state.json saved it) and the model (its config.json). Returns "name run-value (run) vs
// given-value (now)" for each that differs, comma-separated; empty when they agree.
std::string resume_differences(const json& saved, const TrainConfig& tc, const ModelConfig& run,
                               const std::string& data_checksum) {
  std::vector<std::string> diffs;
  const json now = json::parse(train_config_json(tc, data_checksum));
  // TrainConfig's rates are float: shown as the float they are (0.003, not its double 0.003000000026077032).
  auto shown = [](const json& v) { return v.is_number_float() ? shortest_decimal((float)v.get<double>()) : v.dump(); };
  bool data_options = false;  // the options that choose which tokens are used (their checksum follows them)
  for (const char* k : {"seed", "steps", "batch", "seq_len", "task_frac", "task_kinds", "task_loss", "lr",
                        "warmup_steps", "min_lr_frac", "beta1", "beta2", "adam_eps", "weight_decay", "grad_clip",
                        "tau_lr_mult", "eval_every", "eval_sequences"})
    if (saved.contains(k) && saved.at(k) != now.at(k)) {
      diffs.push_back(std::string(k) + " " + shown(saved.at(k)) + " (run) vs " + shown(now.at(k)) + " (now)");
      data_options = data_options || std::string(k) == "seq_len" || std::string(k) == "task_frac" ||
                     std::string(k) == "task_kinds";
    }
  // The data's tokens (data_dir's spelling may change; what it holds may not), when no option above explains it (the
  // checksum is over the tasks that --task-kinds and --seq-len keep: a changed option read as changed data).
  if (!data_options && saved.contains("data_checksum") && saved.at("data_checksum") != now.at("data_checksum"))
    diffs.insert(diffs.begin(), "the data in data_dir (its tokens' checksum " +
                                    saved.at("data_checksum").get<std::string>() + " (run) vs " + data_checksum +
                                    " (now))");
  const ModelConfig& m = tc.model;
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  auto cmp = [&](const char* name, double was, double is) {
    if (std::fabs(was - is) > 1e-6 * std::max(std::fabs(was), std::fabs(is)))
      diffs.push_back(std::string(name) + " " + num(was) + " (run) vs " + num(is) + " (now)");
  };
  cmp("hidden", run.hidden, m.hidden);
  cmp("layers", run.n_layers, m.n_layers);
  cmp("heads", run.n_heads, m.n_heads);
  cmp("kv_heads", run.n_kv_heads, m.n_kv_heads);
  cmp("intermediate", run.intermediate, m.intermediate);
  cmp("context", run.max_positions, m.max_positions);
  cmp("rope_theta", run.rope_theta, m.rope_theta);
  cmp("attention_bias", run.attention_bias, m.attention_bias);
  cmp("qk_norm", run.qk_norm, m.qk_norm);
  if (run.focal.mode != m.focal.mode) {
    diffs.push_back(std::string("attn ") + attn_mode_name(run.focal.mode) + " (run) vs " +
                    attn_mode_name(m.focal.mode) + " (now)");
  } else if (m.focal.mode == AttnMode::kFocal) {
    cmp("temp", run.focal.focal_temp, m.focal.focal_temp);
  } else if (m.focal.mode == AttnMode::kLearned) {
    cmp("tau_min", run.focal.tau_min, m.focal.tau_min);
    cmp("tau_max", run.focal.tau_max, m.focal.tau_max);
    if (run.focal.tau_mode != m.focal.tau_mode)
      diffs.push_back(std::string("tau_mode ") + tau_mode_name(run.focal.tau_mode) + " (run) vs " +
                      tau_mode_name(m.focal.tau_mode) + " (now)");
  }
  std::string out;
  for (const std::string& d : diffs) out += (out.empty() ? "" : ", ") + d;
  return out;
}

// --init-from: overwrites each tensor of `tensors` that `dir`/model.safetensors holds under the same name with
// its (fp32) values. A same-named tensor of another shape, or no shared tensor at all, is an error naming both.
void copy_init_tensors(const std::string& dir, std::vector<NamedTensor>& tensors) {
  const std::string path = dir + "/model.safetensors";
  if (!path_exists(path))
    throw Error("init_from", "init_from: '" + path + "' does not exist; give a model directory written by focal train");
  SafetensorsFile src(path);
  int copied = 0;
  for (NamedTensor& t : tensors) {
    auto it = src.tensors().find(t.name);
    if (it == src.tensors().end()) continue;
    if (it->second.shape != t.shape)
      throw Error("init_from", "init_from: '" + t.name + "' is " + shape_str(it->second.shape) + " in '" + path +
                                   "' but " + shape_str(t.shape) + " in the model to train; match --hidden, " +
                                   "--heads, --kv-heads, --intermediate and the data's vocabulary");
    t.data = tensor_to_f32(it->second, path);
    ++copied;
  }
  if (copied == 0)
    throw Error("init_from", "init_from: '" + path + "' holds none of the tensors of the model to train");
  // The source's tensors the new model has no place for (a learned model's tau_proj under --attn standard): named,
  // not dropped without a word.
  std::vector<std::string> unused;
  for (const auto& kv : src.tensors())
    if (std::none_of(tensors.begin(), tensors.end(), [&](const NamedTensor& t) { return t.name == kv.first; }))
      unused.push_back(kv.first);
  std::printf("init: %d of %zu tensors from %s, the rest random", copied, tensors.size(), path.c_str());
  if (!unused.empty()) {
    std::printf("; not used, this model has no such tensor: %s", unused[0].c_str());
    for (size_t i = 1; i < std::min<size_t>(unused.size(), 4); ++i) std::printf(", %s", unused[i].c_str());
    if (unused.size() > 4) std::printf(" and %zu more", unused.size() - 4);
  }
  std::printf("\n");
}

void validate(const TrainConfig& c) {
  // field: the TrainConfig member; msg names it with its value.
  auto need = [](bool ok, const char* field, const std::string& msg) {
    if (!ok) throw Error(field, msg);
  };
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  need(c.steps > 0, "steps", "steps = " + num(c.steps) + " must be positive");
  need(c.batch > 0, "batch", "batch = " + num(c.batch) + " must be positive");
  need(c.seq_len >= 8, "seq_len", "seq_len = " + num(c.seq_len) + " must be at least 8");
  need(c.seq_len <= c.model.max_positions, "seq_len",
       "seq_len = " + num(c.seq_len) + " exceeds the model's context, max_positions = " + num(c.model.max_positions));
  need(c.task_frac >= 0 && c.task_frac <= 1, "task_frac", "task_frac = " + num(c.task_frac) + " must be in [0, 1]");
  need(c.lr > 0 && std::isfinite(c.lr), "lr", "lr = " + num(c.lr) + " must be a positive number");
  need(c.warmup_steps >= 0, "warmup_steps", "warmup_steps = " + num(c.warmup_steps) + " must be >= 0");
  need(c.min_lr_frac >= 0 && c.min_lr_frac <= 1, "min_lr_frac",
       "min_lr_frac = " + num(c.min_lr_frac) + " must be in [0, 1]");
  need(c.init_std > 0 && std::isfinite(c.init_std), "init_std",
       "init_std = " + num(c.init_std) + " must be a positive number");
  need(c.tau_lr_mult >= 0 && std::isfinite(c.tau_lr_mult), "tau_lr_mult",
       "tau_lr_mult = " + num(c.tau_lr_mult) + " must be a number >= 0");
  need(c.grad_clip > 0, "grad_clip", "grad_clip = " + num(c.grad_clip) + " must be positive");
  need(c.weight_decay >= 0 && std::isfinite(c.weight_decay), "weight_decay",
       "weight_decay = " + num(c.weight_decay) + " must be a number >= 0");
  // The model's own temperature: past this range the step refused it inside its parallel region (an abort).
  need(c.model.focal.mode != AttnMode::kFocal ||
           (c.model.focal.focal_temp >= kMinTemp && c.model.focal.focal_temp <= kMaxTemp),
       "model.focal_temp", "focal_temp = " + num(c.model.focal.focal_temp) + " " + kTempRangeText);
  need(c.eval_every > 0, "eval_every", "eval_every = " + num(c.eval_every) + " must be positive");
  need(c.eval_sequences > 0, "eval_sequences", "eval_sequences = " + num(c.eval_sequences) + " must be positive");
  need(!c.out_dir.empty(), "out_dir", "out_dir is empty: give the checkpoint directory");
  // Before any work: the checkpoint swap renames OUT aside and deletes it (as root, --out /dev/null removed the
  // device and left a directory in its place), and OUT.tmp / .old / .init are the trainer's to delete.
  require_directory_or_absent(c.out_dir, "out_dir");
  // A directory of other files (the data itself, a project folder) is not the trainer's: the checkpoint swap would
  // replace it, deleting them (--out DATA_DIR deleted the data).
  std::error_code ec;
  if (!c.resume && std::filesystem::is_directory(c.out_dir, ec) && !path_exists(c.out_dir + "/trainer_state.json")) {
    std::filesystem::directory_iterator it(c.out_dir, ec);
    if (!ec && it != std::filesystem::directory_iterator())
      throw Error("out_dir", "out_dir '" + c.out_dir + "' is a directory of other files ('" +
                                 it->path().filename().string() +
                                 "', ...) and no checkpoint: training would replace it with its checkpoint; give a "
                                 "new or empty directory");
  }
  for (const char* suffix : {".tmp", ".old", ".init"})
    require_directory_or_absent(c.out_dir + suffix, "out_dir's working name");
  // Missing directories are created; a file among them fails now, naming --out (it failed at the first write,
  // naming the working name OUT.init).
  for (std::filesystem::path up = std::filesystem::path(c.out_dir).parent_path(); !up.empty(); up = up.parent_path()) {
    struct stat st {};
    if (::stat(up.c_str(), &st) != 0) {
      if (up == up.parent_path()) break;
      continue;
    }
    if (!S_ISDIR(st.st_mode))
      throw Error("out_dir", "out_dir '" + c.out_dir + "': '" + up.string() +
                                 "' is a file, not a directory: give a directory whose parents are directories");
    break;
  }
}

// One validation: its loss, and for learned tau the per-layer mean tau and the fraction at a clip bound.
struct EvalResult {
  double val_loss = 0.0;
  std::vector<float> tau_mean;  // [n_layers]
  double clip_frac = NAN;
};

// Tau statistics over the validation sequences it observes.
class TauObserver : public ForwardObserver {
 public:
  TauObserver(int n_layers, float lo, float hi) : sum_(n_layers, 0.0), n_(n_layers, 0), lo_(lo), hi_(hi) {}
  void on_layer(const LayerRecord& r) override {
    if (!r.tau) return;
    for (int i = 0; i < r.n_tokens; ++i) {
      sum_[r.layer] += r.tau[i];
      ++n_[r.layer];
      clipped_ += (r.tau_raw[i] <= lo_ || r.tau_raw[i] >= hi_) ? 1 : 0;
      ++total_;
    }
  }
  // Into r: the mean tau per layer (NaN for a layer without any) and the clipped fraction.
  void summarise(EvalResult* r) const {
    for (size_t l = 0; l < sum_.size(); ++l) r->tau_mean[l] = n_[l] ? (float)(sum_[l] / n_[l]) : NAN;
    r->clip_frac = total_ ? (double)clipped_ / total_ : NAN;
  }
  std::vector<double> sum_;
  std::vector<long> n_;
  long clipped_ = 0, total_ = 0;
  float lo_, hi_;
};

}  // namespace

namespace {

// The rows of task t that predict an answer token ([ids.size()], 1 where the row counts).
std::vector<uint8_t> answer_rows(const Task& t) {
  std::vector<uint8_t> rows(t.ids.size(), 0);
  for (const TaskAnswer& a : t.answers)
    for (int i = 0; i < a.answer_len; ++i) rows[a.answer_pos - 1 + i] = 1;
  return rows;
}

// The sequences of step `step`: a pure function of (seed, step), so a resumed run sees the same batches.
// masks (with task_loss_answers): per sequence, the rows whose loss counts; the rows that predict an answer token
// in a task, every row of a text window.
std::vector<std::vector<int32_t>> sample_batch(const TrainConfig& tc, const TrainData& d, int step,
                                               std::vector<std::vector<uint8_t>>* masks) {
  std::mt19937_64 rng(tc.seed * 0x9E3779B97F4A7C15ULL + (uint64_t)step * 0xBF58476D1CE4E5B9ULL + 1);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  std::vector<std::vector<int32_t>> batch(tc.batch);
  if (masks) masks->assign(tc.batch, {});
  for (size_t b = 0; b < batch.size(); ++b) {
    std::vector<int32_t>& seq = batch[b];
    if (!d.tasks_train.empty() && u01(rng) < tc.task_frac) {
      std::uniform_int_distribution<size_t> pick(0, d.tasks_train.size() - 1);
      const Task& t = d.tasks_train[pick(rng)];
      seq = t.ids;
      if (masks) (*masks)[b] = answer_rows(t);
    } else {
      std::uniform_int_distribution<size_t> off(0, d.text_train.size() - tc.seq_len - 1);
      const size_t o = off(rng);
      seq.assign(d.text_train.begin() + o, d.text_train.begin() + o + tc.seq_len);
      if (masks) (*masks)[b].assign(seq.size(), 1);
    }
  }
  return batch;
}

// Whether validation runs on held-out tasks (run_eval_tasks) rather than on text.
bool validates_on_tasks(const TrainConfig& tc, const TrainData& d) {
  return tc.task_frac >= 1.0 && !d.tasks_val.empty();
}

// Validation of a model that trains on tasks only (task_frac 1): the loss over the rows that training counts (the
// answer rows with task_loss_answers, else every row) of eval_sequences held-out tasks, evenly spaced through
// tasks_eval.jsonl, and tau on those tasks; the validation text is nothing such a model has learned to predict.
EvalResult run_eval_tasks(const Model& model, const TrainConfig& tc, const TrainData& d, const TempSpec& spec) {
  const ModelConfig& c = model.config();
  EvalResult r;
  const size_t n = std::min(d.tasks_val.size(), (size_t)std::max(1, tc.eval_sequences));
  const bool learned = spec.mode == AttnMode::kLearned;
  TauObserver obs(c.n_layers, c.focal.tau_min, c.focal.tau_max);
  double loss = 0.0;
  int64_t rows = 0;
  for (size_t i = 0; i < n; ++i) {
    const Task& t = d.tasks_val[d.tasks_val.size() * i / n];
    const int T = (int)t.ids.size(), V = c.vocab_size;
    const std::vector<uint8_t> counts = tc.task_loss_answers ? answer_rows(t) : std::vector<uint8_t>(T, 1);
    Session s(model, T);
    std::vector<float> logits;  // [T, V]
    s.forward(t.ids.data(), T, spec, RunOptions{}, learned ? &obs : nullptr, &logits);
    for (int row = 0; row + 1 < T; ++row) {
      if (!counts[row]) continue;
      const float* lg = logits.data() + (size_t)row * V;
      const double mx = *std::max_element(lg, lg + V);
      double z = 0.0;
      for (int v = 0; v < V; ++v) z += std::exp((double)lg[v] - mx);
      loss += mx + std::log(z) - lg[t.ids[row + 1]];
      ++rows;
    }
  }
  r.val_loss = loss / (double)std::max<int64_t>(1, rows);
  r.tau_mean.assign(c.n_layers, NAN);
  if (learned) obs.summarise(&r);
  return r;
}

EvalResult run_eval(const Model& model, const TrainConfig& tc, const TrainData& d, const TempSpec& spec) {
  if (validates_on_tasks(tc, d)) return run_eval_tasks(model, tc, d, spec);
  const ModelConfig& c = model.config();
  EvalResult r;
  // Fixed, evenly spaced validation windows.
  const int n = tc.eval_sequences;
  const size_t span = d.text_val.size() - tc.seq_len - 1;
  // Learned tau over the same windows as the loss (it was measured on the first window alone).
  const bool learned = spec.mode == AttnMode::kLearned;
  TauObserver obs(c.n_layers, c.focal.tau_min, c.focal.tau_max);
  double loss = 0.0;
  for (int i = 0; i < n; ++i) {
    const size_t o = span * i / std::max(1, n);
    loss += loss_only(model, d.text_val.data() + o, tc.seq_len, spec, learned ? &obs : nullptr);
  }
  r.val_loss = loss / ((double)n * (tc.seq_len - 1));
  r.tau_mean.assign(c.n_layers, NAN);
  if (learned) obs.summarise(&r);
  return r;
}

void load_moments(const std::string& dir, const Model& model, TrainStepper& a) {
  a.m.clear();
  a.v.clear();
  SafetensorsFile f(dir + "/optimizer.safetensors");
  for (const ParamRef& p : model.weights().params) {
    auto m = f.tensors().find("m." + p.name), v = f.tensors().find("v." + p.name);
    if (m == f.tensors().end() || v == f.tensors().end())
      throw Error("'" + dir + "/optimizer.safetensors' lacks the moments of '" + p.name + "'");
    a.m.push_back(tensor_to_f32(m->second, f.path()));
    a.v.push_back(tensor_to_f32(v->second, f.path()));
    if (a.m.back().size() != p.size || a.v.back().size() != p.size)
      throw Error("'" + dir + "/optimizer.safetensors': moments of '" + p.name + "' have the wrong size");
  }
}

}  // namespace

int train(const TrainConfig& cfg_in, const std::function<void(const TrainProgress&)>& progress,
          const std::function<bool()>& stop_requested) {
  TrainConfig tc = cfg_in;
  // OUT/ names OUT: the working names are OUT.tmp, OUT.old (OUT/.tmp, inside OUT, cannot be swapped with OUT).
  while (tc.out_dir.size() > 1 && tc.out_dir.back() == '/') tc.out_dir.pop_back();
  validate(tc);
  const OutDirLock lock(tc.out_dir);
  if (const std::string note = recover_interrupted_swap(tc.out_dir); !note.empty()) log_warning(note);
  const TrainData data = load_train_data(tc.data_dir, tc.seq_len, tc.task_frac > 0, tc.task_kinds,
                                         /*with_val_tasks=*/tc.task_frac >= 1.0f);
  const std::string tok_path = tc.data_dir + "/tokenizer.model";
  const std::string data_sum = tokens_checksum(data);
  if (tc.task_frac >= 1.0f && data.tasks_val.empty())  // the help promises held-out tasks: say why it is text
    log_warning("no held-out task of '" + tc.data_dir + "/tasks_eval.jsonl' fits --seq-len " +
                std::to_string(tc.seq_len) + ": the validation loss is on text windows (val), not on tasks");

  std::unique_ptr<Model> model;
  int step0 = 0;
  TrainLog log;
  if (tc.resume) {
    if (!path_exists(tc.out_dir + "/trainer_state.json"))
      throw Error("resume", "resume: '" + tc.out_dir + "' holds no checkpoint (trainer_state.json is missing)");
    model = Model::load(tc.out_dir, Device::kCpu, fp32_weights());
    if (model->config().vocab_size != data.vocab_size)
      throw Error("resume",
                  "resume: the checkpoint's vocabulary differs from the tokenizer in data_dir '" + tc.data_dir + "'");
    const TrainerState state = read_trainer_state(tc.out_dir);
    step0 = state.step;
    const json saved = json::parse(state.train_config_json);
    const std::string diffs = resume_differences(saved, tc, model->config(), data_sum);
    if (!diffs.empty())
      throw Error("resume", "resume: the options differ from the run in '" + tc.out_dir + "': " + diffs +
                                "; resume with the command that started it (its options are in '" + tc.out_dir +
                                "/trainer_state.json' and config.json), or train into another directory");
    // Steps are the same for any thread count; their sums are not, in the last bits (the gradient reduction).
    if (saved.contains("threads") && saved.at("threads").is_number_integer() &&
        saved.at("threads").get<int>() != omp_get_max_threads()) {
      auto threads = [](int n) { return std::to_string(n) + (n == 1 ? " thread" : " threads"); };
      log_warning("resume: the run's steps so far ran on " + threads(saved.at("threads").get<int>()) +
                  " and these run on " + threads(omp_get_max_threads()) +
                  " (OMP_NUM_THREADS): the result will differ in the last bits from an uninterrupted run's");
    }
    log = read_train_log(tc.out_dir + "/train_log.h5");
    // Rows past the checkpoint's step (a log saved with a later state than trainer_state.json's) are dropped: the
    // steps after it run again and write them.
    while (!log.eval_step.empty() && log.eval_step.back() > step0) {
      log.eval_step.pop_back();
      log.train_loss.pop_back();
      log.val_loss.pop_back();
      log.lr.pop_back();
      log.grad_norm.pop_back();
      log.tokens_per_s.pop_back();
      log.tau_clip_frac.pop_back();
      log.tau_mean.resize(log.eval_step.size() * (size_t)log.n_layers);
    }
    if (step0 >= tc.steps)
      throw Error("resume", "resume: the checkpoint is already at step " + std::to_string(step0) +
                                " (steps = " + std::to_string(tc.steps) + ")");
  } else {
    ModelConfig mc = tc.model;
    mc.vocab_size = data.vocab_size;
    mc.bos_id = 1;
    mc.eos_id = 2;
    mc.focal.has_tau = mc.focal.mode == AttnMode::kLearned;
    if (path_exists(tc.out_dir + "/trainer_state.json"))
      throw Error("out_dir", "out_dir '" + tc.out_dir +
                                 "' already holds a checkpoint; resume it or choose another "
                                 "directory");
    const std::string init = tc.out_dir + ".init";
    std::vector<NamedTensor> tensors = random_model_tensors(mc, tc.seed, /*training_init=*/true, tc.init_std);
    if (!tc.init_from.empty()) copy_init_tensors(tc.init_from, tensors);
    try {
      write_model_dir(init, mc, tensors, "F32", tok_path);
      model = Model::load(init, Device::kCpu, fp32_weights());
    } catch (const Error&) {  // a full disk: the half-written start goes too (it was left as an empty directory)
      std::error_code ec;
      std::filesystem::remove_all(init, ec);
      throw;
    }
    remove_own_tree(init);
    log.n_layers = mc.n_layers;
  }
  const ModelConfig& mc = model->config();
  const TempSpec spec = TempSpec::native(mc);
  {
    std::string name = tc.out_dir;
    while (name.size() > 1 && name.back() == '/') name.pop_back();
    log.run_name = name.substr(name.rfind('/') + 1);
  }
  log.train_config_json = train_config_json(tc, data_sum);
  log.model_config_json = config_to_json(mc);
  log.tool_version = version();
  log.n_layers = mc.n_layers;
  log.step_loss.resize(step0);

  TrainStepper stepper(*model, omp_get_max_threads());
  if (tc.resume) load_moments(tc.out_dir, *model, stepper);
  AdamWParams hp;
  hp.beta1 = tc.beta1;
  hp.beta2 = tc.beta2;
  hp.eps = tc.adam_eps;
  hp.weight_decay = tc.weight_decay;
  hp.grad_clip = tc.grad_clip;
  hp.tau_lr_mult = tc.tau_lr_mult;

  auto t_start = std::chrono::steady_clock::now();
  auto t_last_eval = t_start;
  double tokens_since = 0.0;
  TrainProgress pr;
  pr.steps = tc.steps;
  // Steps are counted from 1, as the progress lines count them; a checkpoint is named only when one was written.
  auto diverged = [&](const std::string& what, int step, double lr) {
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.3g", lr);
    std::error_code ec;
    const bool kept = std::filesystem::is_directory(tc.out_dir, ec);
    return "training diverged: " + what + " at step " + std::to_string(step + 1) + " (learning rate " + rate + "); " +
           (kept ? "the last good checkpoint in '" + tc.out_dir + "' is kept" : "no checkpoint was written yet") +
           " — lower --lr or raise --warmup";
  };
  // The checkpoint of the step just done (0-based `step`).
  auto checkpoint = [&](int step, double lr) {
    // Weights can overflow while the loss still looks finite: a checkpoint with non-finite weights would replace
    // the last good one with a model that refuses to load, so it is not written.
    for (const ParamRef& p : model->weights().params)
      for (size_t i = 0; i < p.size; ++i)
        if (!std::isfinite(p.data[i])) throw Error(diverged("weight '" + p.name + "' is not finite", step, lr));
    save_checkpoint(tc.out_dir, *model, mc, stepper.m, stepper.v, tc.save_dtype, step + 1,
                    train_config_json(tc, data_sum), log, tok_path);
  };
  for (int step = step0; step < tc.steps; ++step) {
    std::vector<std::vector<uint8_t>> masks;
    const auto batch = sample_batch(tc, data, step, tc.task_loss_answers ? &masks : nullptr);
    double n_total = 0.0;
    for (const auto& s : batch) n_total += (double)s.size() - 1;
    const double lr = lr_at(tc, step);
    const StepResult sr = stepper.step(batch, spec, step, lr, hp, tc.task_loss_answers ? &masks : nullptr);
    const double loss = sr.loss, gnorm = sr.grad_norm;
    if (!sr.updated) throw Error(diverged("the loss is " + std::to_string(loss), step, lr));
    log.step_loss.push_back((float)loss);
    tokens_since += n_total + batch.size();

    const auto now = std::chrono::steady_clock::now();
    const double el = std::chrono::duration<double>(now - t_start).count();
    pr.step = step + 1;
    pr.train_loss = loss;
    pr.lr = lr;
    pr.grad_norm = gnorm;
    pr.tokens_per_s = tokens_since / std::max(1e-9, std::chrono::duration<double>(now - t_last_eval).count());
    pr.eta_s = el / (step + 1 - step0) * (tc.steps - step - 1);
    pr.val_loss = -1.0;
    if ((step + 1) % tc.eval_every == 0 || step + 1 == tc.steps) {
      const EvalResult ev = run_eval(*model, tc, data, spec);
      pr.val_loss = ev.val_loss;
      pr.val_on_tasks = validates_on_tasks(tc, data);
      pr.tau_mean = ev.tau_mean;
      pr.tau_clip_frac = ev.clip_frac;
      // The mean of the step losses since the last evaluation, from the log (a run resumed from a checkpoint that a
      // stop saved between evaluations has run only the later ones of them here).
      const int since = log.eval_step.empty() ? 0 : log.eval_step.back();
      double interval_loss = 0.0;
      for (int k = since; k <= step; ++k) interval_loss += log.step_loss[(size_t)k];
      log.eval_step.push_back(step + 1);
      log.train_loss.push_back((float)(interval_loss / (step + 1 - since)));
      log.val_loss.push_back((float)ev.val_loss);
      log.lr.push_back((float)lr);
      log.grad_norm.push_back((float)gnorm);
      log.tokens_per_s.push_back((float)pr.tokens_per_s);
      log.tau_mean.insert(log.tau_mean.end(), ev.tau_mean.begin(), ev.tau_mean.end());
      log.tau_clip_frac.push_back((float)ev.clip_frac);
      checkpoint(step, lr);
      tokens_since = 0.0;
      t_last_eval = std::chrono::steady_clock::now();
      if (progress) progress(pr);
      if (stop_requested && stop_requested()) return step + 1;
      continue;
    }
    if (progress) progress(pr);
    if (stop_requested && stop_requested() && step + 1 < tc.steps) {
      checkpoint(step, lr);  // as it is (no evaluation row): --resume goes on from the next step exactly
      return step + 1;
    }
  }
  return tc.steps;
}

}  // namespace focal
