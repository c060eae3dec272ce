// `focal inspect` of the files that are not captures, sweeps or batch statistics: position-loss files (focal eval
// --positions), training logs (focal train, focal calibrate), evaluation files (focal eval -o) and temperature files
// (focal calibrate). Each prints what the file is, where it came from, and its numbers in a short table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "temp_options.h"
#include "focal/calibrate.h"
#include "focal/temp_spec.h"
#include "focal/eval.h"
#include "focal/provenance.h"
#include "focal/trainer.h"
#include "focal_batch/position_loss.h"
#include "print_provenance.h"

namespace focal::cli {

void print_computed(const Provenance& p) {
  if (!p.device.empty()) std::printf("computed on %s, precision %s\n", p.device.c_str(), p.precision.c_str());
  if (!p.tokenizer.empty()) std::printf("tokenizer %s\n", p.tokenizer.c_str());
  if (!p.warnings.empty()) std::printf("warnings: %s\n", p.warnings.c_str());
}

void print_provenance(const Provenance& p) {
  std::printf("model %s, tool %s, created %s\n", p.model_path.c_str(), p.tool_version.c_str(), p.created_utc.c_str());
  print_computed(p);
}

namespace {

// Token-weighted mean NLL of run r over the buckets that lie wholly in positions [lo, hi).
double mean_nll_between(const batch::PositionLossFile& f, size_t r, int lo, int hi, int64_t* tokens) {
  double sum = 0.0;
  int64_t n = 0;
  for (size_t d = 0; d < f.n_docs(); ++d)
    for (size_t b = 0; b < f.n_buckets(); ++b)
      if (f.bucket_start[b] >= lo && std::min(f.bucket_start[b] + f.bucket_tokens, f.max_tokens) <= hi) {
        sum += f.doc_nll_sum[(r * f.n_docs() + d) * f.n_buckets() + b];
        n += f.doc_count[d * f.n_buckets() + b];
      }
  *tokens = n;
  return n > 0 ? sum / (double)n : NAN;
}

}  // namespace

int inspect_position_loss(const std::string& path) {
  const batch::PositionLossFile f = batch::read_position_loss(path);
  std::printf("position-loss file %s: %zu documents, %zu settings, positions 0..%d in %zu buckets of %d\n",
              path.c_str(), f.n_docs(), f.n_runs(), f.max_tokens - 1, f.n_buckets(), f.bucket_tokens);
  print_provenance(f);
  if (f.bootstrap > 0)
    std::printf("max_position_embeddings %d; bands: %d bootstrap resamples of the documents at %.0f %%\n",
                f.trained_context, f.bootstrap, 100.0 * f.band_level);
  else
    std::printf("max_position_embeddings %d; no bands (--bootstrap 0)\n", f.trained_context);
  // The mean NLL (nats/token) within the config's context and past it: the question the file answers. The file keeps
  // sums per bucket, so a bucket that straddles the context counts in neither column (it was counted as within).
  const int ctx = f.trained_context;
  const bool past = ctx < f.max_tokens;
  int in_end = ctx, out_start = ctx;  // positions [1, in_end) and [out_start, max_tokens)
  for (size_t b = 0; b < f.n_buckets(); ++b) {
    const int s = f.bucket_start[b], e = std::min(s + f.bucket_tokens, f.max_tokens);
    if (s < ctx && e > ctx) {
      in_end = s;
      out_start = e;
    }
  }
  const bool none_within = std::min(in_end, f.max_tokens) <= 1;  // the first bucket already straddles the context
  const std::string in_head = none_within ? std::string("NLL within")
                                          : "NLL 1.." + std::to_string(std::min(in_end, f.max_tokens) - 1),
                    out_head = "NLL " + std::to_string(out_start) + ".." + std::to_string(f.max_tokens - 1);
  std::printf("\n%-28s %16s%s\n", "setting", in_head.c_str(),
              past ? (" " + std::string(16 - std::min<size_t>(16, out_head.size()), ' ') + out_head).c_str() : "");
  bool none_past = false;
  for (size_t r = 0; r < f.n_runs(); ++r) {
    int64_t n_in = 0, n_out = 0;
    const double in = mean_nll_between(f, r, 0, in_end, &n_in);
    if (none_within)
      std::printf("%-28s %16s", f.run_names[r].c_str(), "-");
    else
      std::printf("%-28s %16.4f", f.run_names[r].c_str(), in);
    if (past) {
      const double out = mean_nll_between(f, r, out_start, f.max_tokens, &n_out);
      if (n_out > 0) {
        std::printf(" %16.4f", out);
      } else {
        std::printf(" %16s", "no tokens");
        none_past = true;
      }
    }
    std::printf("\n");
    if (!f.run_warnings[r].empty() && f.run_warnings[r] != f.warnings)  // the file's own is printed above
      std::printf("  %s\n", f.run_warnings[r].c_str());
  }
  if (none_within)
    std::printf(
        "(the first bucket, positions 0..%d, straddles the trained context of %d, so no bucket lies within it:"
        " run focal eval --positions with --bucket %d or less for the loss within)\n",
        out_start - 1, ctx, std::max(1, ctx / 2));
  else if (in_end < ctx)
    std::printf("(the bucket at positions %d..%d straddles the trained context of %d: in neither column)\n", in_end,
                out_start - 1, ctx);
  if (none_past) std::printf("(no document runs past the trained context of %d tokens)\n", ctx);
  std::printf("(focal figure positions %s draws it by position)\n", path.c_str());
  return 0;
}

int inspect_train_log(const std::string& path) {
  const TrainLog log = read_train_log(path);
  const double t_per_tau = calib_log_t_per_tau(log);  // a calibration log's tau_mean is t sqrt(d_head)
  const bool calib = t_per_tau > 0.0;
  const size_t N = log.eval_step.size();
  std::printf("%s log %s: run %s, %zu evaluations, %zu steps, %d layers, tool %s, created %s\n",
              calib ? "calibration" : "training", path.c_str(), log.run_name.c_str(), N, log.step_loss.size(),
              log.n_layers, log.tool_version.c_str(), log.created_utc.c_str());
  // A run of tasks only (--task-frac 1) holds out tasks, not text: its validation loss is the tasks'.
  bool tasks_only = false;
  try {
    const nlohmann::json tc = nlohmann::json::parse(log.train_config_json);
    tasks_only = tc.is_object() && tc.value("task_frac", 0.0) >= 1.0;
  } catch (const nlohmann::json::exception&) {  // unreadable: the plain label
  }
  std::printf("\n%8s %12s %12s %10s %10s\n", "step", "train (mean)",
              calib        ? "held-out"
              : tasks_only ? "val (tasks)"
                           : "val loss",
              "lr", "|g|");
  auto cell = [](int width, const char* fmt, double v) {  // "-" where the log has no value (step 0's train loss)
    if (std::isnan(v)) return std::printf(" %*s", width, "-");
    char b[32];
    std::snprintf(b, sizeof b, fmt, v);
    return std::printf(" %*s", width, b);
  };
  for (size_t i = 0; i < N; ++i) {
    std::printf("%8d", log.eval_step[i]);
    cell(12, "%.4f", log.train_loss[i]);
    cell(12, "%.4f", log.val_loss[i]);
    cell(10, "%.2e", log.lr[i]);
    cell(10, "%.3g", log.grad_norm[i]);
    std::printf("\n");
  }
  if (N > 1)
    std::printf(
        "(train (mean): the training loss averaged since the previous evaluation; the step loss of the "
        "progress line is one step's)\n");
  if (N > 0 && log.n_layers > 0 && !std::isnan(log.tau_mean[(N - 1) * log.n_layers])) {
    // shown as t, as the log's temperature file holds it
    const double scale = calib ? t_per_tau : 1.0;
    std::printf("\n%s at the last evaluation, by layer:", calib ? "t, mean over heads," : "learned tau");
    for (int l = 0; l < log.n_layers; ++l) std::printf(" %.3f", log.tau_mean[(N - 1) * log.n_layers + l] * scale);
    std::printf("\n");
  }
  return 0;
}

int inspect_eval(const std::string& path) {
  const EvalFile e = read_eval(path);
  std::printf("evaluation %s: validation loss %.4f nats/token (perplexity %.2f) over %lld tokens, setting %s\n",
              path.c_str(), e.val_loss, e.val_ppl, (long long)e.val_tokens,
              TempSpec::brief_json(e.temp_spec_json).c_str());
  print_provenance(e);
  const size_t Ln = e.lengths.size();
  std::printf("\n%-8s %11s %6s %9s\n", "task", e.x_axis.c_str(), "n", "accuracy");
  for (size_t k = 0; k < e.task_kinds.size(); ++k)
    for (size_t li = 0; li < Ln; ++li) {
      std::printf("%-8s %11d %6d", e.task_kinds[k].c_str(), e.lengths[li], e.n_answers[k * Ln + li]);
      if (e.n_answers[k * Ln + li] > 0)
        std::printf(" %9.3f\n", e.accuracy[k * Ln + li]);
      else  // no task of this length ran (longer than the context): no accuracy, not a NaN one
        std::printf(" %9s   (no task fits the context)\n", "-");
    }
  return 0;
}

int inspect_temps(const std::string& path) {
  const TempFile f = read_temp_file(path);
  std::printf("temperature file %s: %s granularity, %d layers x %d heads, for %s (weights %016llx)\n", path.c_str(),
              calib_granularity_name(f.granularity), f.n_layers, f.n_heads, f.base_model.c_str(),
              (unsigned long long)f.base_checksum);
  std::printf(
      "calibrated on %s (%lld training, %lld held-out tokens): %d steps of %d x %d, lr %g, seed %llu, from t "
      "= %g; tool %s, created %s\n",
      f.data_path.c_str(), (long long)f.n_train_tokens, (long long)f.n_val_tokens, f.steps, f.batch, f.seq_len, f.lr,
      (unsigned long long)f.seed, f.init_temp, f.tool_version.c_str(), f.created_utc.c_str());
  std::printf("held-out loss %.5f -> %.5f nats/token\n", f.val_loss_init, f.val_loss);
  // One value per t the file holds: per head, per layer (its heads repeat it), or one for the model.
  std::vector<float> t;
  const bool per_head = f.granularity == CalibGranularity::kHead;
  const bool per_model = f.granularity == CalibGranularity::kModel;
  for (int l = 0; l < (per_model ? std::min(f.n_layers, 1) : f.n_layers); ++l)
    for (int h = 0; h < (per_head ? f.n_heads : std::min(f.n_heads, 1)); ++h)
      if ((size_t)l * f.n_heads + h < f.focal_temp.size()) t.push_back(f.focal_temp[(size_t)l * f.n_heads + h]);
  std::sort(t.begin(), t.end());
  if (!t.empty()) {
    const size_t n = t.size();  // the median of an even count is the mean of the middle two (it took the upper)
    const double median = n % 2 ? t[n / 2] : 0.5 * ((double)t[n / 2 - 1] + t[n / 2]);
    std::printf("t over the %s: min %.4g, median %.4g, max %.4g\n",
                per_head    ? "heads"
                : per_model ? "model"
                            : "layers",
                t.front(), median, t.back());
  }
  std::printf("\n");
  print_temp_table(f);
  std::printf("(apply with --temp calibrated:%s; focal figure temps %s draws it)\n", path.c_str(), path.c_str());
  return 0;
}

}  // namespace focal::cli
