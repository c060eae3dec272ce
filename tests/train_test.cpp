// Gradient checks of the training path. Per op: the backward in double precision against central finite
// differences of a naive double-precision forward written here (tolerance 1e-6 relative + 1e-8). Whole model, for
// every attention mode: the analytic fp32 gradient of the runtime (forward tape + backward) against central
// finite differences in double precision of the independent naive double model (tests/naive_llama.h) on the same
// weights (tolerance 1e-3 relative + 1e-5 absolute: fp32 accumulation in the analytic side), and, as a second
// view, against differences of the runtime's own fp32 loss (3 % + 2e-3: fp32 rounding amplified by the quotient).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "focal/model.h"
#include "focal/model_writer.h"
#include "focal_kernels/backward.h"
#include "focal_kernels/shared_math.h"
#include "model_internal.h"
#include "naive_llama.h"
#include "test_util.h"
#include "train/backward.h"

namespace focal {
namespace {

using Vec = std::vector<double>;

Vec rand_vec(size_t n, std::mt19937_64& rng, double sd = 1.0) {
  std::normal_distribution<double> nd(0.0, sd);
  Vec v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// Checks d(sum(upstream * f(x)))/dx against `analytic` by central differences in double.
void expect_grad(const std::function<double(const Vec&)>& loss, Vec x, const Vec& analytic, const char* what,
                 double rel = 1e-6, double abs_tol = 1e-8) {
  const double h = 1e-6;
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double lp = loss(x);
    x[i] = x0 - h;
    const double lm = loss(x);
    x[i] = x0;
    const double fd = (lp - lm) / (2 * h);
    ASSERT_NEAR(analytic[i], fd, abs_tol + rel * std::max(1.0, std::fabs(fd)) * 10) << what << " index " << i;
  }
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

TEST(OpGrad, RmsNorm) {
  std::mt19937_64 rng(1);
  const int rows = 3, n = 7;
  const double eps = 1e-5;
  Vec x = rand_vec(rows * n, rng), w = rand_vec(n, rng), up = rand_vec(rows * n, rng);
  auto fwd = [&](const Vec& xx, const Vec& ww) {
    Vec y(rows * n);
    for (int r = 0; r < rows; ++r) {
      double ss = 0;
      for (int i = 0; i < n; ++i) ss += xx[r * n + i] * xx[r * n + i];
      const double f = 1.0 / std::sqrt(ss / n + eps);
      for (int i = 0; i < n; ++i) y[r * n + i] = ww[i] * xx[r * n + i] * f;
    }
    return y;
  };
  Vec dx(rows * n), dw(n, 0.0);
  ops::rmsnorm_backward<double>(x.data(), w.data(), up.data(), dx.data(), dw.data(), rows, n, eps);
  expect_grad([&](const Vec& xx) { return dot(up, fwd(xx, w)); }, x, dx, "rmsnorm dx");
  expect_grad([&](const Vec& ww) { return dot(up, fwd(x, ww)); }, w, dw, "rmsnorm dw");
}

TEST(OpGrad, Rope) {
  std::mt19937_64 rng(2);
  const int T = 5, nh = 2, d = 8, pos0 = 3;
  const float theta = 10000.0f;
  Vec x = rand_vec(T * nh * d, rng), up = rand_vec(T * nh * d, rng);
  auto fwd = [&](const Vec& xx) {  // same fp32 angles as the op
    Vec y = xx;
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < nh; ++h)
        for (int i = 0; i < d / 2; ++i) {
          const float ang = math::rope_angle(pos0 + t, math::rope_inv_freq(theta, i, d));
          const double c = cosf(ang), s = sinf(ang);
          const double a = xx[(t * nh + h) * d + i], b = xx[(t * nh + h) * d + i + d / 2];
          y[(t * nh + h) * d + i] = a * c - b * s;
          y[(t * nh + h) * d + i + d / 2] = b * c + a * s;
        }
    return y;
  };
  Vec dx = up;
  ops::rope_backward<double>(dx.data(), T, nh, d, pos0, theta);
  expect_grad([&](const Vec& xx) { return dot(up, fwd(xx)); }, x, dx, "rope");
}

TEST(OpGrad, SwiGlu) {
  std::mt19937_64 rng(3);
  const int n = 11;
  Vec g = rand_vec(n, rng, 3.0), u = rand_vec(n, rng), up = rand_vec(n, rng);
  auto fwd = [&](const Vec& gg, const Vec& uu) {
    Vec y(n);
    for (int i = 0; i < n; ++i) y[i] = gg[i] / (1 + std::exp(-gg[i])) * uu[i];
    return y;
  };
  Vec dg(n), du(n);
  ops::swiglu_backward<double>(g.data(), u.data(), up.data(), dg.data(), du.data(), n);
  expect_grad([&](const Vec& gg) { return dot(up, fwd(gg, u)); }, g, dg, "swiglu dgate");
  expect_grad([&](const Vec& uu) { return dot(up, fwd(g, uu)); }, u, du, "swiglu dup");
}

// T = 70: the kernel works in blocks of 64 query rows, each against the keys up to its last row; the second block is
// partial and its products stop at key 69.
class OpGradAttention : public ::testing::TestWithParam<int> {};

TEST_P(OpGradAttention, WithRowScaleAndGqa) {
  std::mt19937_64 rng(4);
  const int T = GetParam(), nh = 4, nkv = 2, d = 4, group = nh / nkv;
  Vec q = rand_vec(T * nh * d, rng), k = rand_vec(T * nkv * d, rng), v = rand_vec(T * nkv * d, rng);
  Vec scale = rand_vec(nh * T, rng);
  for (auto& s : scale) s = 0.5 + std::fabs(s);
  Vec up = rand_vec(T * nh * d, rng);
  struct Out {
    Vec att, probs, raw;
  };
  auto fwd = [&](const Vec& qq, const Vec& kk, const Vec& vv, const Vec& sc) {
    Out o{Vec(T * nh * d, 0.0), Vec(nh * T * T, 0.0), Vec(nh * T * T, 0.0)};
    for (int h = 0; h < nh; ++h) {
      const int g = h / group;
      for (int i = 0; i < T; ++i) {
        Vec lg(i + 1);
        double mx = -1e300;
        for (int j = 0; j <= i; ++j) {
          double s = 0;
          for (int e = 0; e < d; ++e) s += qq[(i * nh + h) * d + e] * kk[(j * nkv + g) * d + e];
          o.raw[(h * T + i) * T + j] = s / std::sqrt((double)d);
          lg[j] = o.raw[(h * T + i) * T + j] * sc[h * T + i];
          mx = std::max(mx, lg[j]);
        }
        double z = 0;
        for (int j = 0; j <= i; ++j) z += std::exp(lg[j] - mx);
        for (int j = 0; j <= i; ++j) {
          const double p = std::exp(lg[j] - mx) / z;
          o.probs[(h * T + i) * T + j] = p;
          for (int e = 0; e < d; ++e) o.att[(i * nh + h) * d + e] += p * vv[(j * nkv + g) * d + e];
        }
      }
    }
    return o;
  };
  Out o = fwd(q, k, v, scale);
  Vec dq(q.size()), dk(k.size()), dv(v.size()), dscale(scale.size());
  ops::attention_backward<double>(q.data(), k.data(), v.data(), o.probs.data(), o.raw.data(), scale.data(), up.data(),
                                  dq.data(), dk.data(), dv.data(), dscale.data(), T, nh, nkv, d);
  expect_grad([&](const Vec& x) { return dot(up, fwd(x, k, v, scale).att); }, q, dq, "attention dq");
  expect_grad([&](const Vec& x) { return dot(up, fwd(q, x, v, scale).att); }, k, dk, "attention dk");
  expect_grad([&](const Vec& x) { return dot(up, fwd(q, k, x, scale).att); }, v, dv, "attention dv");
  expect_grad([&](const Vec& x) { return dot(up, fwd(q, k, v, x).att); }, scale, dscale, "attention dscale");
}

INSTANTIATE_TEST_SUITE_P(Lengths, OpGradAttention, ::testing::Values(6, 70),
                         [](const auto& info) { return "T" + std::to_string(info.param); });

TEST(OpGrad, CrossEntropy) {
  std::mt19937_64 rng(5);
  const int T = 4, V = 6;
  Vec lg = rand_vec(T * V, rng, 2.0);
  std::vector<int32_t> ids = {1, 3, 0, 5};
  Vec dl(T * V);
  const double n_total = 7.0;
  ops::cross_entropy<double>(lg.data(), ids.data(), T, V, n_total, dl.data());
  auto loss = [&](const Vec& x) {
    Vec tmp(T * V);
    return ops::cross_entropy<double>(x.data(), ids.data(), T, V, n_total, tmp.data()) / n_total;
  };
  expect_grad(loss, lg, dl, "cross entropy");
  // hand-computed: uniform logits give ln V per predicted row
  Vec flat(T * V, 0.0), tmp(T * V);
  EXPECT_NEAR(ops::cross_entropy<double>(flat.data(), ids.data(), T, V, 1.0, tmp.data()), (T - 1) * std::log((double)V),
              1e-12);
}

// ---- whole model (fp32) ----
ModelConfig tiny_config(AttnMode mode, TauMode tau_mode, bool qk_norm, bool tied) {
  ModelConfig c;
  c.vocab_size = 23;
  c.hidden = 16;
  c.intermediate = 24;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_head = 4;
  c.max_positions = 64;
  c.rms_eps = 1e-5f;
  c.tied_embeddings = tied;
  c.qk_norm = qk_norm;
  c.bos_id = 1;
  c.focal.mode = mode;
  if (mode == AttnMode::kFocal) c.focal.focal_temp = 0.4f;
  if (mode == AttnMode::kLearned) {
    c.focal.has_tau = true;
    c.focal.tau_bias = true;
    c.focal.tau_min = 0.5f;  // wide bounds: the random init stays inside, so gradients flow
    c.focal.tau_max = 8.0f;
    c.focal.tau_mode = tau_mode;
  }
  return c;
}

// Indices of the k entries of g with the largest magnitude (where a finite-difference check is most telling).
std::vector<size_t> largest_entries(const std::vector<float>& g, size_t k) {
  std::vector<size_t> idx(g.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  k = std::min(k, idx.size());
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](size_t a, size_t b) { return std::fabs(g[a]) > std::fabs(g[b]); });
  idx.resize(k);
  return idx;
}

struct GradCase {
  const char* name;
  AttnMode mode;
  TauMode tau_mode;
  bool qk_norm, tied;
};

void PrintTo(const GradCase& c, std::ostream* os) { *os << c.name; }

class ModelGrad : public ::testing::TestWithParam<GradCase> {};

// The fp32 check of MatchesFiniteDifferences: the gradient of the mean loss on a fixed 12-token sequence against
// central differences of loss_only (h = 1e-2 relative, tolerance 2e-3 + 3 %) at the 3 largest-|gradient| entries
// of every tensor. Returns the name of the tensor of each checked entry.
std::vector<std::string> expect_fp32_finite_differences(const Model& model, const TempSpec& spec) {
  const std::vector<int32_t> ids = {1, 5, 9, 2, 17, 5, 9, 11, 3, 22, 5, 9};
  const int T = (int)ids.size();
  Grads g = make_grads(model);
  const double n_total = T - 1;
  loss_and_grad(model, ids.data(), T, spec, n_total, g);
  const auto& params = model.weights().params;
  std::vector<std::string> checked;
  for (size_t p = 0; p < params.size(); ++p) {
    for (size_t i : largest_entries(g.g[p], 3)) {
      float* w = params[p].data + i;
      const float w0 = *w;
      const float h = 1e-2f * std::max(0.1f, std::fabs(w0));
      *w = w0 + h;
      const double lp = loss_only(model, ids.data(), T, spec) / n_total;
      *w = w0 - h;
      const double lm = loss_only(model, ids.data(), T, spec) / n_total;
      *w = w0;
      const double fd = (lp - lm) / (2.0 * h);
      EXPECT_NEAR(g.g[p][i], fd, 2e-3 + 0.03 * std::fabs(fd)) << params[p].name << "[" << i << "]";
      checked.push_back(params[p].name);
    }
  }
  return checked;
}

TEST_P(ModelGrad, MatchesFiniteDifferences) {
  const GradCase gc = GetParam();
  const ModelConfig c = tiny_config(gc.mode, gc.tau_mode, gc.qk_norm, gc.tied);
  const std::string dir = test::make_temp_dir("grad");
  write_model_dir(dir, c, random_model_tensors(c, 3), "F32", "");
  auto model = Model::load(dir);
  EXPECT_GT(expect_fp32_finite_differences(*model, TempSpec::native(c)).size(), 20u);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ModelGrad,
    ::testing::Values(GradCase{"standard_tied", AttnMode::kStandard, TauMode::kPrefixMean, false, true},
                      GradCase{"focal_untied", AttnMode::kFocal, TauMode::kPrefixMean, false, false},
                      GradCase{"focal_qknorm", AttnMode::kFocal, TauMode::kPrefixMean, true, true},
                      GradCase{"learned_prefix", AttnMode::kLearned, TauMode::kPrefixMean, false, true},
                      GradCase{"learned_per_token", AttnMode::kLearned, TauMode::kPerToken, false, true},
                      GradCase{"learned_sequence", AttnMode::kLearned, TauMode::kSequenceMean, false, true}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_P(ModelGrad, MatchesDoublePrecisionFiniteDifferences) {
  const GradCase gc = GetParam();
  const ModelConfig c = tiny_config(gc.mode, gc.tau_mode, gc.qk_norm, gc.tied);
  const std::string dir = test::make_temp_dir("grad64");
  const std::vector<NamedTensor> tensors = random_model_tensors(c, 3);
  write_model_dir(dir, c, tensors, "F32", "");
  auto model = Model::load(dir);
  const TempSpec spec = TempSpec::native(c);
  const std::vector<int32_t> ids = {1, 5, 9, 2, 17, 5, 9, 11, 3, 22, 5, 9};
  const int T = (int)ids.size();
  Grads g = make_grads(*model);
  loss_and_grad(*model, ids.data(), T, spec, 1.0, g);  // gradient of the summed loss
  std::map<std::string, test::DoubleTensor> w64;
  for (const NamedTensor& t : tensors) w64[t.name].data.assign(t.data.begin(), t.data.end());
  auto loss64 = [&] { return test::naive_loss(test::naive_forward(c, w64, ids, spec).logits, ids, c.vocab_size); };
  const auto& params = model->weights().params;
  int checked = 0;
  for (size_t p = 0; p < params.size(); ++p) {
    const std::vector<size_t> idx = largest_entries(g.g[p], 3);
    for (size_t r = 0; r < idx.size(); ++r) {
      double& w = w64.at(params[p].name).data[idx[r]];
      const double w0 = w, h = 1e-5;
      w = w0 + h;
      const double lp = loss64();
      w = w0 - h;
      const double lm = loss64();
      w = w0;
      const double fd = (lp - lm) / (2 * h);
      EXPECT_NEAR(g.g[p][idx[r]], fd, 1e-5 + 1e-3 * std::fabs(fd)) << params[p].name << "[" << idx[r] << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
}

TEST(ModelGrad, AttentionBiasesMatchFiniteDifferences) {
  // q/k/v/o biases (attention_bias, the trainer's --attn-bias): the training init adds them (zero); here they are
  // set to random values, and every tensor's 3 largest-gradient entries are checked against central differences
  // of the fp32 loss (the tolerance of MatchesFiniteDifferences: 2e-3 + 3 %).
  ModelConfig c = tiny_config(AttnMode::kFocal, TauMode::kPrefixMean, false, true);
  c.attention_bias = true;
  std::vector<NamedTensor> tensors = random_model_tensors(c, 3, /*training_init=*/true, 0.3f);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.3f);
  int biases = 0;
  for (NamedTensor& t : tensors)
    if (t.name.find("_proj.bias") != std::string::npos && t.name.find("tau_proj") == std::string::npos) {
      for (float& x : t.data) x = nd(rng);
      ++biases;
    }
  ASSERT_EQ(biases, 4 * c.n_layers);
  const std::string dir = test::make_temp_dir("gradbias");
  write_model_dir(dir, c, tensors, "F32", "");
  auto model = Model::load(dir);
  int checked_bias = 0;
  for (const std::string& name : expect_fp32_finite_differences(*model, TempSpec::native(model->config())))
    if (name.find("_proj.bias") != std::string::npos) ++checked_bias;
  EXPECT_GE(checked_bias, 3 * 4 * c.n_layers - 4);  // o_proj.bias [hidden] and the others: 3 entries each
}

TEST(ModelGrad, RowMaskCountsOnlyTheMaskedRows) {
  // The trainer's answer-only loss: with a row mask, the loss and its gradient are those of the kept rows' next-token
  // cross entropy alone. Oracle: the naive double-precision forward, loss summed over the kept rows, central
  // differences (h = 1e-5) on the 3 largest-gradient entries of every tensor; tolerance 1e-5 + 1e-3 relative.
  const ModelConfig c = tiny_config(AttnMode::kLearned, TauMode::kPrefixMean, false, true);
  const std::string dir = test::make_temp_dir("gradmask");
  const std::vector<NamedTensor> tensors = random_model_tensors(c, 5);
  write_model_dir(dir, c, tensors, "F32", "");
  auto model = Model::load(dir);
  const TempSpec spec = TempSpec::native(c);
  const std::vector<int32_t> ids = {1, 5, 9, 2, 17, 5, 9, 11, 3, 22, 5, 9};
  const int T = (int)ids.size(), V = c.vocab_size;
  std::vector<uint8_t> mask(T, 0);
  for (int t : {3, 7, 8}) mask[t] = 1;
  Grads g = make_grads(*model);
  const double loss = loss_and_grad(*model, ids.data(), T, spec, 1.0, g, mask.data());
  std::map<std::string, test::DoubleTensor> w64;
  for (const NamedTensor& t : tensors) w64[t.name].data.assign(t.data.begin(), t.data.end());
  auto loss64 = [&] {
    const test::Vec z = test::naive_forward(c, w64, ids, spec).logits;
    double l = 0.0;
    for (int t = 0; t + 1 < T; ++t) {
      if (!mask[t]) continue;
      const double* r = z.data() + (size_t)t * V;
      const double m = *std::max_element(r, r + V);
      double sum = 0.0;
      for (int v = 0; v < V; ++v) sum += std::exp(r[v] - m);
      l += m + std::log(sum) - r[ids[t + 1]];
    }
    return l;
  };
  EXPECT_NEAR(loss, loss64(), 1e-5 * loss64());
  const auto& params = model->weights().params;
  int checked = 0;
  for (size_t p = 0; p < params.size(); ++p) {
    for (size_t i : largest_entries(g.g[p], 3)) {
      double& w = w64.at(params[p].name).data[i];
      const double w0 = w, h = 1e-5;
      w = w0 + h;
      const double lp = loss64();
      w = w0 - h;
      const double lm = loss64();
      w = w0;
      const double fd = (lp - lm) / (2 * h);
      EXPECT_NEAR(g.g[p][i], fd, 1e-5 + 1e-3 * std::fabs(fd)) << params[p].name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 20);
  // Every row kept: the same loss as without a mask (float cross entropy against the double re-sum: 1e-5).
  std::fill(mask.begin(), mask.end(), 1);
  Grads g_all = make_grads(*model), g_none = make_grads(*model);
  const double l_all = loss_and_grad(*model, ids.data(), T, spec, 1.0, g_all, mask.data());
  const double l_none = loss_and_grad(*model, ids.data(), T, spec, 1.0, g_none);
  EXPECT_NEAR(l_all, l_none, 1e-5 * l_none);
  // The gradients: the masked head packs the kept rows (T - 1 here) where the unmasked one runs all T, so its GEMMs
  // have other shapes and sum in another order on some OpenBLAS kernels (bit-equal under SkylakeX; under Haswell and
  // Zen up to 4e-7 of the tensor's largest gradient). fp32 sums in another order: rtol 1e-5, plus atol 5e-6 of the
  // tensor's largest |gradient| for entries near 0 (sums that cancel).
  for (size_t p = 0; p < params.size(); ++p) {
    double scale = 0.0;
    for (float v : g_none.g[p]) scale = std::max(scale, (double)std::fabs(v));
    test::expect_allclose(g_all.g[p], g_none.g[p], 1e-5, 5e-6 * scale, "gradient of " + params[p].name);
  }
}

TEST(ModelGrad, ClippedTauGetsNoGradient) {
  // tau_min = tau_max: tau is clipped everywhere, so w_tau and its bias receive exactly zero gradient.
  ModelConfig c = tiny_config(AttnMode::kLearned, TauMode::kPerToken, false, true);
  c.focal.tau_min = c.focal.tau_max = 1.5f;
  const std::string dir = test::make_temp_dir("clipgrad");
  write_model_dir(dir, c, random_model_tensors(c, 4), "F32", "");
  auto model = Model::load(dir);
  std::vector<int32_t> ids = {1, 4, 8, 15, 16, 23 % 23, 42 % 23};
  Grads g = make_grads(*model);
  loss_and_grad(*model, ids.data(), (int)ids.size(), TempSpec::native(c), 6.0, g);
  const auto& params = model->weights().params;
  bool saw_tau = false;
  for (size_t p = 0; p < params.size(); ++p)
    if (params[p].name.find("tau_proj") != std::string::npos) {
      saw_tau = true;
      for (float v : g.g[p]) EXPECT_EQ(v, 0.0f) << params[p].name;
    }
  EXPECT_TRUE(saw_tau);
}

}  // namespace
}  // namespace focal
