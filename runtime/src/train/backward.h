// Gradients of the next-token loss through the runtime's own forward (recorded on a Tape), runtime-internal.
#pragma once

#include <cstdint>
#include <vector>

#include "focal/model.h"
#include "model_internal.h"

namespace focal {

// Gradient buffers matching Model::Weights::params one to one (host memory, CPU backend).
struct Grads {
  std::vector<std::vector<float>> g;  // [n_params][size]
  void zero();
};
Grads make_grads(const Model& model);

// Runs the forward on ids[T] (a fresh session) under `spec`, adds d(loss)/d(param) into `grads` where loss is the
// sum over rows 0..T-2 of the next-token cross entropy divided by n_total. Returns the unscaled summed loss.
// row_mask[T] (optional): only rows with a non-zero entry count (their loss and gradient; n_total counts them).
// Supports standard, focal and learned modes (no per-layer/head overrides).
double loss_and_grad(const Model& model, const int32_t* ids, int T, const TempSpec& spec, double n_total, Grads& grads,
                     const uint8_t* row_mask = nullptr);

// Loss only (same definition), no gradients.
double loss_only(const Model& model, const int32_t* ids, int T, const TempSpec& spec);

}  // namespace focal
