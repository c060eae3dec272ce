// The trainer's optimisation step (see step.h).
#include "train/step.h"

#include <omp.h>

#include <cmath>

#include "focal/error.h"
#include "model_internal.h"

namespace focal {

TrainStepper::TrainStepper(const Model& model, int n_threads) : model_(model), n_threads_(n_threads) {
  // The backward and AdamW read and write the weights on the host: training stays on the CPU backend.
  if (model.device() != Device::kCpu)
    throw Error("device", "device " + std::string(device_name(model.device())) +
                              ": training runs on the CPU only; load the model on the cpu device");
  for (const ParamRef& p : model.weights().params)
    if (!p.data)
      throw Error("weights", "tensor '" + p.name +
                                 "' is held in its stored format: training needs fp32 weights (load with weights "
                                 "mode fp32)");
  for (int t = 0; t < n_threads_; ++t) tgrads_.push_back(make_grads(model_));
  grads_ = make_grads(model_);
  for (const ParamRef& p : model_.weights().params) {
    m.emplace_back(p.size, 0.0f);
    v.emplace_back(p.size, 0.0f);
  }
}

StepResult TrainStepper::step(const std::vector<std::vector<int32_t>>& batch, const TempSpec& spec, int step, double lr,
                              const AdamWParams& hp, const std::vector<std::vector<uint8_t>>* masks) {
  const auto& params = model_.weights().params;
  StepResult r;
  double n_total = 0.0;
  for (size_t b = 0; b < batch.size(); ++b) {
    if (!masks) {
      n_total += (double)batch[b].size() - 1;
      continue;
    }
    if ((*masks)[b].size() != batch[b].size()) throw Error("training: a row mask does not match its sequence");
    for (size_t t = 0; t + 1 < batch[b].size(); ++t) n_total += (*masks)[b][t] ? 1.0 : 0.0;
  }
  if (n_total <= 0) throw Error("training: the batch has no row whose loss counts");
  // Sequences in parallel, one private gradient buffer per thread; the static schedule and the ordered reductions
  // below keep a run bitwise deterministic for a given thread count.
  std::vector<double> seq_loss(batch.size(), 0.0);
  for (Grads& g : tgrads_) g.zero();
#pragma omp parallel for schedule(static) num_threads(n_threads_)
  for (int b = 0; b < (int)batch.size(); ++b)
    seq_loss[b] = loss_and_grad(model_, batch[b].data(), (int)batch[b].size(), spec, n_total,
                                tgrads_[omp_get_thread_num()], masks ? (*masks)[b].data() : nullptr);
  for (double l : seq_loss) r.loss += l;
  r.loss /= n_total;
  if (!std::isfinite(r.loss)) return r;

  // Squared gradient norm from per-thread partial sums added in thread order (an OpenMP reduction would combine
  // them in arrival order and break bitwise determinism).
  std::vector<double> sq_part(n_threads_, 0.0);
  for (size_t p = 0; p < params.size(); ++p) {
    float* g = grads_.g[p].data();
    const int64_t n = (int64_t)params[p].size;
#pragma omp parallel num_threads(n_threads_)
    {
      double part = 0.0;
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        float acc = 0.0f;
        for (int t = 0; t < n_threads_; ++t) acc += tgrads_[t].g[p][i];
        g[i] = acc;
        part += (double)acc * acc;
      }
      sq_part[omp_get_thread_num()] += part;
    }
  }
  double sq = 0.0;
  for (double s : sq_part) sq += s;
  r.grad_norm = std::sqrt(sq);
  const double clip = r.grad_norm > hp.grad_clip ? hp.grad_clip / r.grad_norm : 1.0;
  // AdamW (decoupled weight decay on matrices only), bias-corrected moments.
  const double bc1 = 1.0 - std::pow((double)hp.beta1, step + 1), bc2 = 1.0 - std::pow((double)hp.beta2, step + 1);
  for (size_t p = 0; p < params.size(); ++p) {
    float* w = params[p].data;
    float* mp = m[p].data();
    float* vp = v[p].data();
    const float* g = grads_.g[p].data();
    const float wd = params[p].decay ? hp.weight_decay : 0.0f;
    const double lr_p = params[p].name.find(".tau_proj.") != std::string::npos ? lr * hp.tau_lr_mult : lr;
    const int64_t n = (int64_t)params[p].size;
#pragma omp parallel for schedule(static) num_threads(n_threads_)
    for (int64_t i = 0; i < n; ++i) {
      const float gi = (float)(g[i] * clip);
      mp[i] = hp.beta1 * mp[i] + (1.0f - hp.beta1) * gi;
      vp[i] = hp.beta2 * vp[i] + (1.0f - hp.beta2) * gi * gi;
      const double upd = (mp[i] / bc1) / (std::sqrt(vp[i] / bc2) + hp.eps);
      w[i] = (float)(w[i] - lr_p * (upd + wd * w[i]));
    }
  }
  r.updated = true;
  return r;
}

}  // namespace focal
