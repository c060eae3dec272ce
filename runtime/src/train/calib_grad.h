// The temperature parameters of a calibration and the gradient of the next-token loss with respect to them, every
// model weight frozen (runtime-internal; calibrate.cpp and the tests).
#pragma once

#include <cstdint>
#include <vector>

#include "focal/calibrate.h"
#include "focal/model.h"

namespace focal {

// log t per model (1 value), per layer [n_layers] or per head [n_layers, n_heads].
struct TempParams {
  CalibGranularity granularity = CalibGranularity::kHead;
  int n_layers = 0, n_heads = 0;
  std::vector<double> log_temp;

  static TempParams uniform(CalibGranularity g, const ModelConfig& cfg, double focal_temp);
  int index(int layer, int head) const;   // the parameter that covers (layer, head)
  std::vector<float> head_temps() const;  // [n_layers, n_heads] t = exp(log_temp) as the forward uses it (fp32)
  // The run setting: focal:t (model), an override per layer (layer) or per head (head); the same as
  // temp_file_spec() of a file holding head_temps().
  TempSpec spec() const;
};

// Runs the forward of ids[T] (a fresh session) under params.spec() and adds d(loss)/d(log_temp) into grad
// ([params.log_temp.size()], double), loss = sum over rows 0..T-2 of the next-token cross entropy / n_total.
// Activation gradients only: no weight gradient is formed; a matrix held in a stored format (16-bit, quantized) is
// widened into one scratch matrix at a time while the backward passes it. Returns the unscaled summed loss.
double calib_loss_and_grad(const Model& model, const int32_t* ids, int T, const TempParams& params, double n_total,
                           std::vector<double>& grad);

}  // namespace focal
