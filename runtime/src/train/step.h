// One optimisation step of the trainer, shared by focal::train and bench/train_bench.cpp (runtime-internal):
// sequences in parallel through loss_and_grad into per-thread gradient buffers, an ordered reduction, global-norm
// clipping and AdamW with bias correction. Deterministic for a given thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "focal/model.h"
#include "train/backward.h"

namespace focal {

struct AdamWParams {
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float weight_decay = 0.05f;  // decoupled, on ParamRef::decay tensors only
  float grad_clip = 1.0f;      // global L2 norm
  float tau_lr_mult = 1.0f;    // tau_proj.* parameters step with lr * tau_lr_mult
};

struct StepResult {
  double loss = 0.0;       // mean next-token loss over the batch's predicted tokens (nats)
  double grad_norm = 0.0;  // before clipping
  bool updated = false;    // false when the loss was not finite (weights untouched)
};

class TrainStepper {
 public:
  TrainStepper(const Model& model, int n_threads);  // AdamW moments start at zero

  // step: 0-based index (bias correction); lr: learning rate of this step. masks (optional): per sequence, the
  // rows whose next-token loss counts (loss_and_grad's row_mask); the loss is the mean over those rows.
  StepResult step(const std::vector<std::vector<int32_t>>& batch, const TempSpec& spec, int step, double lr,
                  const AdamWParams& hp, const std::vector<std::vector<uint8_t>>* masks = nullptr);

  std::vector<std::vector<float>> m, v;  // AdamW first / second moments [param][size]

 private:
  const Model& model_;
  int n_threads_;
  std::vector<Grads> tgrads_;  // per thread
  Grads grads_;                // reduced
};

}  // namespace focal
