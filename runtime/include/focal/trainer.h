// Training small LLaMA models with standard, focal (constant t) or learned-temperature attention on the CPU:
// data from scripts/data/build_data.py (docs/data.md), AdamW with warm-up + cosine decay, checkpoints that are
// Hugging Face model directories the runtime loads, an HDF5 training log. Deterministic for a seed and thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "focal/config.h"

namespace focal {

struct TrainConfig {
  std::string data_dir;  // tokenizer.model, text_{train,val}.bin, tasks_train.jsonl
  std::string out_dir;   // checkpoint directory (config.json, model.safetensors, tokenizer.model, ...)
  bool resume = false;   // continue from the checkpoint in out_dir
  ModelConfig model;     // architecture and attention (model.focal); vocab from the tokenizer
  uint64_t seed = 1;
  int steps = 1000;
  int batch = 8;                        // sequences per step
  int seq_len = 256;                    // tokens per sequence
  float task_frac = 0.25f;              // fraction of sequences that are synthetic retrieval tasks
  std::vector<std::string> task_kinds;  // kinds of tasks_train.jsonl to train on ("kv", "mqar", "needle"); empty: all
  bool task_loss_answers = false;       // task sequences: loss on the answer tokens only (text windows: every token)
  float lr = 3e-3f;                     // peak learning rate
  int warmup_steps = 100;               // linear warm-up, then cosine decay to min_lr_frac * lr at `steps`
  float min_lr_frac = 0.1f;
  float beta1 = 0.9f, beta2 = 0.95f, adam_eps = 1e-8f;
  float weight_decay = 0.05f;  // AdamW, on projection and embedding matrices (not norms or biases)
  float tau_lr_mult = 1.0f;    // learning rate of the learned-temperature projection (tau_proj) = lr * this
  float init_std = 0.02f;      // normal init of the matrices (residual outputs / sqrt(2 n_layers)); tau_proj 0.02
  // A model directory whose weights start the run (a curriculum stage): every tensor of the new model that it holds
  // under the same name is copied (shapes must match), the others keep the random init. Empty: random init only.
  std::string init_from;
  float grad_clip = 1.0f;          // global gradient-norm clip
  int eval_every = 100;            // validation loss, log row and checkpoint every N steps (and at the end)
  int eval_sequences = 16;         // validation windows of seq_len of text; with task_frac 1 held-out tasks instead
  std::string save_dtype = "F32";  // checkpoint weights (F32 for exact resume)
};

struct TrainProgress {
  int step = 0, steps = 0;
  double train_loss = 0.0;    // mean over the step's predicted tokens (nats)
  double val_loss = -1.0;     // set at evaluation steps
  bool val_on_tasks = false;  // val_loss is over held-out tasks (task-only runs), not text
  double lr = 0.0, grad_norm = 0.0;
  double tokens_per_s = 0.0, eta_s = 0.0;
  std::vector<float> tau_mean;  // per layer mean tau at the last evaluation (learned models)
  double tau_clip_frac = 0.0;   // fraction of clipped tau values at the last evaluation
};

// The training log (out_dir/train_log.h5, format "focalscope-trainlog", docs/capture-format.md): one row per
// evaluation plus the training loss of every step.
struct TrainLog {
  static constexpr const char* kFormatName = "focalscope-trainlog";
  static constexpr int kFormatVersion = 1;
  std::string run_name;           // e.g. "focal_t0.4" (the checkpoint directory's name)
  std::string train_config_json;  // every TrainConfig field
  std::string model_config_json;  // config.json of the checkpoint
  std::string tool_version, created_utc;
  int n_layers = 0;
  std::vector<int32_t> eval_step;    // [N] step at each evaluation
  std::vector<float> train_loss;     // [N] mean training loss since the previous evaluation (nats)
  std::vector<float> val_loss;       // [N] validation loss (nats; task_frac 1: on held-out tasks' counted rows)
  std::vector<float> lr;             // [N]
  std::vector<float> grad_norm;      // [N] before clipping, at the evaluation step
  std::vector<float> tokens_per_s;   // [N] mean since the previous evaluation
  std::vector<float> tau_mean;       // [N, n_layers] mean learned tau per layer on the validation data (NaN if none)
  std::vector<float> tau_clip_frac;  // [N] fraction of tau values at a clip bound (NaN if none)
  std::vector<float> step_loss;      // [steps done] training loss of every step
};
void write_train_log(const TrainLog& log, const std::string& path);  // temp name + rename
TrainLog read_train_log(const std::string& path);

// Learning rate at `step` (0-based): linear warm-up to lr over warmup_steps, cosine to min_lr_frac*lr at steps.
double lr_at(const TrainConfig& cfg, int step);

// Trains (or resumes) and writes checkpoints and out_dir/train_log.h5. progress() is called after every step.
// stop_requested() (Ctrl-C in the CLI) is asked after every step: when it says true, the step just done is saved as
// a checkpoint (one --resume continues exactly) and train returns early. Returns the step the checkpoint in out_dir
// holds: cfg.steps when the run finished. out_dir is locked for the run (OUT.lock): a second trainer there is
// refused. Throws Error on bad data, bad configuration, or a non-finite loss (the last good checkpoint is kept).
int train(const TrainConfig& cfg, const std::function<void(const TrainProgress&)>& progress = {},
          const std::function<bool()>& stop_requested = {});

}  // namespace focal
