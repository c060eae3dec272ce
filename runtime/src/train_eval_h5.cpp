// Training logs (format "focalscope-trainlog") and evaluation files ("focalscope-eval") over the HDF5 layer of
// h5_io.h, with the same conventions as captures (docs/capture-format.md).

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "focal/capture.h"
#include "focal/eval.h"
#include "focal/trainer.h"
#include "h5_io.h"

namespace focal {

using namespace h5;  // NOLINT(google-build-using-namespace): the HDF5 layer is this file's vocabulary

namespace {
// A training log records the tool and the model's config; it has no model path or weights checksum.
Provenance log_provenance(const TrainLog& log) {
  Provenance p;
  p.tool_version = log.tool_version;
  p.created_utc = log.created_utc;
  p.model_config_json = log.model_config_json;
  return p;
}
}  // namespace

void write_train_log(const TrainLog& log, const std::string& path) {
  H5Call h5;
  const size_t N = log.eval_step.size();
  const Where where{"cannot write training log '" + path + "'"};
  for (const auto* v : {&log.train_loss, &log.val_loss, &log.lr, &log.grad_norm, &log.tokens_per_s, &log.tau_clip_frac})
    if (v->size() != N) where.fail("every per-evaluation column must have one value per evaluation");
  if (log.tau_mean.size() != N * size_t(log.n_layers)) where.fail("tau_mean must be [evaluations, n_layers]");
  write_atomically(path, "training log", [&](hid_t root, Writer& w) {
    write_root_header(w, root, TrainLog::kFormatName, TrainLog::kFormatVersion, log_provenance(log), false);
    w.attr_string(root, "/", "run_name", log.run_name);
    w.attr_string(root, "/", "train_config_json", log.train_config_json);
    w.attr_i32(root, "/", "n_layers", log.n_layers);
    const hsize_t n = hsize_t(N);
    w.dataset_i32(root, "", "eval_step", {n}, log.eval_step.data(), "[evaluation]");
    w.dataset_f32(root, "", "train_loss", {n}, log.train_loss.data(), "[evaluation]");
    w.dataset_f32(root, "", "val_loss", {n}, log.val_loss.data(), "[evaluation]");
    w.dataset_f32(root, "", "lr", {n}, log.lr.data(), "[evaluation]");
    w.dataset_f32(root, "", "grad_norm", {n}, log.grad_norm.data(), "[evaluation]");
    w.dataset_f32(root, "", "tokens_per_s", {n}, log.tokens_per_s.data(), "[evaluation]");
    w.dataset_f32(root, "", "tau_mean", {n, hsize_t(log.n_layers)}, log.tau_mean.data(), "[evaluation, layer]");
    w.dataset_f32(root, "", "tau_clip_frac", {n}, log.tau_clip_frac.data(), "[evaluation]");
    w.dataset_f32(root, "", "step_loss", {hsize_t(log.step_loss.size())}, log.step_loss.data(), "[step]");
  });
}

TrainLog read_train_log(const std::string& path) {
  FileReader in(path, "training log", "training log '" + path + "'", TrainLog::kFormatName, TrainLog::kFormatVersion,
                CaptureFile::kFormatName, "it is an attention capture, not a training log");
  Reader& r = in.reader();
  TrainLog log;
  const Provenance p = read_provenance(r, in.root(), false);
  log.tool_version = p.tool_version;
  log.created_utc = p.created_utc;
  log.model_config_json = p.model_config_json;
  log.run_name = r.attr_string(in.root(), "/", "run_name");
  log.train_config_json = r.attr_string(in.root(), "/", "train_config_json");
  log.n_layers = r.attr_int_in(in.root(), "/", "n_layers", 0, 1 << 20);
  log.eval_step = r.read_i32(in.root(), "", "eval_step", 1).data;
  const hsize_t N = log.eval_step.size();
  auto col = [&](const char* name) {
    Array<float> a = r.read_f32(in.root(), "", name, 1);
    r.expect_dims(std::string("/") + name, a.dims, {N}, "[evaluation]");
    return std::move(a.data);
  };
  log.train_loss = col("train_loss");
  log.val_loss = col("val_loss");
  log.lr = col("lr");
  log.grad_norm = col("grad_norm");
  log.tokens_per_s = col("tokens_per_s");
  log.tau_clip_frac = col("tau_clip_frac");
  Array<float> tm = r.read_f32(in.root(), "", "tau_mean", 2);
  r.expect_dims("/tau_mean", tm.dims, {N, hsize_t(log.n_layers)}, "[evaluation, layer]");
  log.tau_mean = std::move(tm.data);
  log.step_loss = r.read_f32(in.root(), "", "step_loss", 1).data;
  return log;
}

void write_eval(const EvalFile& e, const std::string& path) {
  H5Call h5;
  const Where where{"cannot write evaluation file '" + path + "'"};
  const size_t K = e.task_kinds.size(), Ln = e.lengths.size(), L = size_t(e.n_layers);
  if (e.n_answers.size() != K * Ln || e.accuracy.size() != K * Ln || e.relevant_mass.size() != K * Ln * L ||
      e.entropy.size() != K * Ln * L)
    where.fail("task tables must be [kinds, lengths] and [kinds, lengths, layers]");
  write_atomically(path, "evaluation", [&](hid_t root, Writer& w) {
    write_root_header(w, root, EvalFile::kFormatName, EvalFile::kFormatVersion, e, true);
    w.attr_string(root, "/", "temp_spec_json", e.temp_spec_json);
    w.attr_i32(root, "/", "n_layers", e.n_layers);
    w.attr_string(root, "/", "x_axis", e.x_axis);
    const float scalars[2] = {e.val_loss, e.val_ppl};
    w.dataset_f32(root, "", "val_loss_ppl", {2}, scalars, "[val_loss_nats, val_ppl]");
    const int32_t vt = int32_t(std::min<int64_t>(e.val_tokens, std::numeric_limits<int32_t>::max()));
    w.dataset_i32(root, "", "val_tokens", {1}, &vt, "[1]");
    w.dataset_strings(root, "", "task_kinds", e.task_kinds, "[kind]");
    w.dataset_i32(root, "", "lengths", {hsize_t(Ln)}, e.lengths.data(), "[length]");
    w.dataset_i32(root, "", "n_answers", {hsize_t(K), hsize_t(Ln)}, e.n_answers.data(), "[kind, length]");
    w.dataset_f32(root, "", "accuracy", {hsize_t(K), hsize_t(Ln)}, e.accuracy.data(), "[kind, length]");
    w.dataset_f32(root, "", "relevant_mass", {hsize_t(K), hsize_t(Ln), hsize_t(L)}, e.relevant_mass.data(),
                  "[kind, length, layer]");
    w.dataset_f32(root, "", "entropy", {hsize_t(K), hsize_t(Ln), hsize_t(L)}, e.entropy.data(),
                  "[kind, length, layer]");
  });
}

EvalFile read_eval(const std::string& path) {
  FileReader in(path, "evaluation", "evaluation file '" + path + "'", EvalFile::kFormatName, EvalFile::kFormatVersion,
                CaptureFile::kFormatName, "it is an attention capture, not an evaluation");
  Reader& r = in.reader();
  EvalFile e;
  static_cast<Provenance&>(e) = read_provenance(r, in.root(), true);
  e.temp_spec_json = r.attr_string(in.root(), "/", "temp_spec_json");
  e.n_layers = r.attr_int_in(in.root(), "/", "n_layers", 0, 1 << 20);
  // Files from before the distractor sweep hold context lengths.
  e.x_axis = r.has_attr(in.root(), "x_axis") ? r.attr_string(in.root(), "/", "x_axis") : "length";
  if (e.x_axis != "length" && e.x_axis != "distractors")
    r.where().fail("attribute x_axis = '" + e.x_axis + "' is neither 'length' nor 'distractors'");
  Array<float> sc = r.read_f32(in.root(), "", "val_loss_ppl", 1);
  r.expect_dims("/val_loss_ppl", sc.dims, {2}, "[2]");
  e.val_loss = sc.data[0];
  e.val_ppl = sc.data[1];
  const Dims one{1};
  e.val_tokens = r.read_i32(in.root(), "", "val_tokens", 1, &one, "[1]").data.at(0);
  if (e.val_tokens < 0) r.where().fail("/val_tokens = " + std::to_string(e.val_tokens) + " is negative");
  e.task_kinds = r.read_string_dataset(in.root(), "", "task_kinds");
  e.lengths = r.read_i32(in.root(), "", "lengths", 1).data;
  for (int32_t v : e.lengths)
    if (v < 0) r.where().fail("/lengths holds " + std::to_string(v) + ", a negative " + e.x_axis);
  const hsize_t K = e.task_kinds.size(), Ln = e.lengths.size(), L = hsize_t(e.n_layers);
  Array<int32_t> na = r.read_i32(in.root(), "", "n_answers", 2);
  r.expect_dims("/n_answers", na.dims, {K, Ln}, "[kind, length]");
  e.n_answers = std::move(na.data);
  for (int32_t v : e.n_answers)
    if (v < 0) r.where().fail("/n_answers holds " + std::to_string(v) + ", a negative count");
  Array<float> acc = r.read_f32(in.root(), "", "accuracy", 2);
  r.expect_dims("/accuracy", acc.dims, {K, Ln}, "[kind, length]");
  e.accuracy = std::move(acc.data);
  Array<float> rm = r.read_f32(in.root(), "", "relevant_mass", 3);
  r.expect_dims("/relevant_mass", rm.dims, {K, Ln, L}, "[kind, length, layer]");
  e.relevant_mass = std::move(rm.data);
  Array<float> en = r.read_f32(in.root(), "", "entropy", 3);
  r.expect_dims("/entropy", en.dims, {K, Ln, L}, "[kind, length, layer]");
  e.entropy = std::move(en.data);
  return e;
}

}  // namespace focal
