// Calibrating a pretrained model's attention temperatures with every weight frozen: log t per model, layer or head
// learned by gradient descent (Adam) on next-token loss, and the temperature file that holds the result with its
// provenance. Any run takes the file through the spec grammar's `calibrated:PATH` (focal/temp_spec.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "focal/config.h"
#include "focal/temp_spec.h"

namespace focal {

class Model;

// What one temperature parameter covers: the whole model, one layer (all its heads) or one head; or kTauProj: the
// paper's learned temperature (Eq. 6) per layer, a projection w_tau [hidden] and bias b giving each query row its own
// tau = clip(mean_{j<=i} X_j . w_tau + b, tau_min, tau_max) from the layer's normalised input X, on top of the frozen
// weights (run as mode learned with the file's projections).
enum class CalibGranularity { kModel, kLayer, kHead, kTauProj };
const char* calib_granularity_name(CalibGranularity g);  // "model", "layer", "head", "tau-proj"
// Throws Error (field "granularity") naming `where` and listing the choices.
CalibGranularity parse_calib_granularity(const std::string& s, const std::string& where);

// The temperature file (JSON, format "focalscope-temps", docs/cli.md#calibrate): the t of every head and where it
// came from. A file is tied to one model: the shape fields and the weights checksum must match it.
struct TempFile {
  static constexpr const char* kFormatName = "focalscope-temps";
  static constexpr int kFormatVersion = 1;
  CalibGranularity granularity = CalibGranularity::kHead;
  int n_layers = 0, n_heads = 0, n_kv_heads = 0, d_head = 0, hidden = 0, vocab_size = 0;
  std::vector<float> focal_temp;  // [n_layers, n_heads] t of every head (equal within a layer / the model when the
                                  // granularity is coarser); tau-proj: each layer's mean of tau / sqrt(d_head) over
                                  // the held-out tokens (a summary for figures; runs use the projections)
  std::shared_ptr<const TauProj> tau_proj;  // tau-proj only: the learned projections (prefix_mean)
  // provenance
  std::string base_model;      // the model's path as given
  uint64_t base_checksum = 0;  // Model::weights_checksum() of the calibrated model
  std::string data_path;       // the calibration text
  uint64_t data_checksum = 0;  // FNV-1a 64 of the data's token ids
  int64_t n_train_tokens = 0, n_val_tokens = 0;
  int steps = 0, seq_len = 0, batch = 0;
  double lr = 0.0;
  uint64_t seed = 0;
  double init_temp = 1.0;      // every t at step 0
  double val_loss_init = 0.0;  // held-out loss at the initial temperatures (nats/token)
  double val_loss = 0.0;       // held-out loss at these temperatures (nats/token), as the calibrator computed it
  double train_loss = 0.0;     // mean training loss of the last step
  std::string tool_version, created_utc;
};
void write_temp_file(const TempFile& f, const std::string& path);  // temp name + rename
// Throws Error naming the file and the field at fault (missing, wrong format, t not a finite number > 0).
TempFile read_temp_file(const std::string& path);
// The setting the file stands for: model granularity is focal:t; layer and head granularity are overrides of
// every layer / head. base_checksum and temp_file are set so the forward can refuse another model's weights.
TempSpec temp_file_spec(const TempFile& f, const std::string& path);
// Throws Error (field "temp_file") naming the file and the first shape field that differs from cfg.
void check_temp_file_shape(const TempFile& f, const ModelConfig& cfg, const std::string& path);
// Throws Error (field "temp_file") when spec comes from a temperature file made for other weights than model's.
void check_spec_weights(const TempSpec& spec, const Model& model);

// Why a model cannot be calibrated on windows of seq_len tokens: one entry per missing piece ("logit soft-caps",
// ...); empty if it can. RoPE scaling is covered; a sliding window only when no window is narrower than seq_len.
std::vector<std::string> calibration_gaps(const ModelConfig& cfg, int seq_len);

struct CalibConfig {
  std::string data_path;  // provenance only (the tokens are given)
  std::string out_path;   // the temperature file; the checkpoint is OUT.ckpt.json, the log `log_path`
  std::string log_path;   // training-log HDF5 (focal/trainer.h TrainLog); empty: OUT without .json + .log.h5
  bool resume = false;    // continue from OUT.ckpt.json
  CalibGranularity granularity = CalibGranularity::kHead;
  int steps = 200;
  int batch = 4;          // training windows per step
  int seq_len = 256;      // tokens per window
  double lr = 0.05;       // Adam on log t (tau-proj: on b / sqrt(d_head), and on w_tau / sqrt(d_head) at lr /
                          // hidden); cosine decay to 10 % at `steps`
  double val_frac = 0.1;  // share of the windows held out (at least one)
  int val_windows = 8;    // held-out windows evaluated (evenly spaced among the held-out ones)
  int eval_every = 50;    // held-out loss, log row and checkpoint every N steps (and at the end)
  double init_temp = 1.0;
  uint64_t seed = 1;
};

struct CalibProgress {
  int step = 0, steps = 0;
  double train_loss = 0.0;
  double val_loss = -1.0;  // set at evaluation steps
  double grad_norm = 0.0;
  double lr = 0.0;
  double tokens_per_s = 0.0, eta_s = 0.0;
  double temp_min = 0.0, temp_max = 0.0;  // range of the current t over heads
};

// The token windows calibration uses: tokens split into non-overlapping windows of seq_len; the last
// max(1, val_frac * windows) are held out. Throws Error (field "data") naming `what` when there are fewer than two
// windows.
struct CalibWindows {
  std::vector<std::vector<int32_t>> train, val;
};
CalibWindows split_calib_windows(const std::vector<int32_t>& tokens, int seq_len, double val_frac,
                                 const std::string& what);

// Reads a UTF-8 text file (or .jsonl with a "text" field per line) and tokenizes it with the model's tokenizer.
// Throws Error (field "data") naming the file when it is missing, unreadable or empty.
std::vector<int32_t> load_calib_tokens(const Model& model, const std::string& path);

// Held-out loss (nats/token, mean over every predicted token of the windows) under spec. layer_t (optional, learned
// mode): each layer's mean of tau / sqrt(d_head) over the windows' rows [n_layers].
double calib_val_loss(const Model& model, const std::vector<std::vector<int32_t>>& windows, const TempSpec& spec,
                      std::vector<double>* layer_t = nullptr);

struct TrainLog;
// A training log focal calibrate wrote (train_config_json "kind": "calibration") holds tau_mean = t sqrt(d_head), the
// learned temperature's unit: the factor from it to t, 1 / sqrt(d_head); 0 for a log of focal train, or one whose
// model config is unreadable. Figures and focal inspect show such a log's t.
double calib_log_t_per_tau(const TrainLog& log);

// The training log's path when CalibConfig::log_path is empty: OUT without .json, + .log.h5.
std::string calib_log_path(const std::string& out_path);

// The options alone, before a model is loaded: every count and rate in range, and the checkpoint OUT.ckpt.json there
// with --resume (absent: nothing to continue) and absent without it (a run would throw it away). Throws Error whose
// field is the CalibConfig member ("val_frac", "resume", ...). calibrate() checks the same first.
void check_calib_options(const CalibConfig& cfg);

// Calibrates; writes cfg.out_path (the temperature file), OUT.ckpt.json at every evaluation and the log. Returns
// the file written. Throws Error on bad options, on a model it cannot calibrate (calibration_gaps) and on a
// non-finite loss (the last good checkpoint is kept and named).
TempFile calibrate(const Model& model, const std::vector<int32_t>& tokens, const CalibConfig& cfg,
                   const std::function<void(const CalibProgress&)>& progress = {});

}  // namespace focal
