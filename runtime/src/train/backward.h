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

// The learned temperature's chain rule for one layer (tape and calibration share it): from dscale [n_heads, T]
// (d loss / d logit multiplier, the multiplier sqrt(d_head) / (tau_i * tau_scale) shared by the heads) through the
// clip of tau_pre [T] to [tau_min, tau_max] and the mean of `mode` to ds [T] = d loss / d(X_j . w_tau); returns
// d loss / d b. tau [T] is the clipped tau times tau_scale, as the tape holds it.
double tau_backward(const float* dscale, const float* tau, const float* tau_pre, int T, int n_heads, int d_head,
                    float tau_min, float tau_max, float tau_scale, TauMode mode, std::vector<double>& ds);

// Loss only (same definition), no gradients.
double loss_only(const Model& model, const int32_t* ids, int T, const TempSpec& spec, ForwardObserver* obs = nullptr);

}  // namespace focal
