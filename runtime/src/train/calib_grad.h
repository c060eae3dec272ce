// The temperature parameters of a calibration and the gradient of the next-token loss with respect to them, every
// model weight frozen (runtime-internal; calibrate.cpp and the tests).
#pragma once

#include <cstdint>
#include <vector>

#include "focal/calibrate.h"
#include "focal/model.h"

namespace focal {

// The parameters Adam moves. log t per model (1 value), per layer [n_layers] or per head [n_layers, n_heads]; or,
// for kTauProj, per layer [u (hidden values), c] in units of t: the forward's tau = sqrt(d_head) clip(mean X.u + c,
// kTauProjTMin, kTauProjTMax), i.e. w_tau = sqrt(d_head) u and b = sqrt(d_head) c; u starts at 0 and c at the
// initial t, so step 0 is focal:t.
struct TempParams {
  static constexpr double kTauProjTMin = 0.05, kTauProjTMax = 20.0;  // clip of tau / sqrt(d_head)
  CalibGranularity granularity = CalibGranularity::kHead;
  int n_layers = 0, n_heads = 0, hidden = 0, d_head = 0;
  std::vector<double> theta;

  static TempParams uniform(CalibGranularity g, const ModelConfig& cfg, double focal_temp);
  int index(int layer, int head) const;   // the log t that covers (layer, head); not for kTauProj
  std::vector<float> head_temps() const;  // [n_layers, n_heads] t = exp(theta) as the forward uses it (fp32);
                                          // kTauProj: t at X.u = 0, i.e. c of each layer
  double lr_mult(size_t p) const;         // Adam's learning-rate multiplier of theta[p]: 1, or 1 / hidden for u
  // The run setting: focal:t (model), an override per layer (layer) or per head (head), the same as
  // temp_file_spec() of a file holding head_temps(); learned with these projections (kTauProj).
  TempSpec spec() const;
  std::shared_ptr<const TauProj> tau_proj() const;  // kTauProj's projections in the forward's units
};

// Runs the forward of ids[T] (a fresh session) under params.spec() and adds d(loss)/d(theta) into grad
// ([params.theta.size()], double), loss = sum over rows 0..T-2 of the next-token cross entropy / n_total.
// Activation gradients only: no weight gradient is formed; a matrix held in a stored format (16-bit, quantized) is
// widened into one scratch matrix at a time while the backward passes it. Returns the unscaled summed loss.
// layer_t_sum (optional, kTauProj): adds each layer's sum over the T rows of tau / sqrt(d_head) [n_layers].
double calib_loss_and_grad(const Model& model, const int32_t* ids, int T, const TempParams& params, double n_total,
                           std::vector<double>& grad, std::vector<double>* layer_t_sum = nullptr);

}  // namespace focal
