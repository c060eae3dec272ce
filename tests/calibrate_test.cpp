// Calibration of attention temperatures with frozen weights (focal calibrate). The gradient with respect to every
// log t, at model, layer and head granularity, against central differences (h = 1e-5) of the independent naive
// double-precision model (tests/naive_llama.h) in which head (l, h) runs at t by scaling its q_proj rows by 1/t
// (RoPE is linear, so every logit of the head is scaled by 1/t): tolerance 1e-5 + 1e-3 relative (fp32 accumulation
// on the analytic side). Planted recovery: data sampled from a tiny model at known per-head temperatures, then
// calibrated from t = 1, recovers them within 10 % (4.4 % at most when written). The temperature file, applied through calibrated:PATH, gives
// the held-out loss the calibrator reported (1e-5 relative); resume, divergence, other models and bad data.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "focal/calibrate.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal/model_writer.h"
#include "focal/trainer.h"
#include "naive_llama.h"
#include "test_util.h"
#include "train/calib_grad.h"

namespace focal {
namespace {

ModelConfig tiny(bool tied) {
  ModelConfig c;
  c.vocab_size = 23;
  c.hidden = 16;
  c.intermediate = 24;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_head = 4;
  c.max_positions = 128;
  c.rms_eps = 1e-5f;
  c.tied_embeddings = tied;
  c.bos_id = 1;
  return c;
}

std::unique_ptr<Model> make_model(const ModelConfig& c, uint64_t seed, const std::string& tag,
                                  const std::string& dtype = "F32", WeightsMode mode = WeightsMode::kFp32) {
  const std::string dir = test::make_temp_dir(tag);
  write_model_dir(dir, c, random_model_tensors(c, seed), dtype, "");
  LoadOptions o;
  o.weights = mode;
  return Model::load(dir, Device::kCpu, o);
}

std::vector<int32_t> random_ids(int T, int V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> u(0, V - 1);
  std::vector<int32_t> ids(T);
  for (int32_t& i : ids) i = u(rng);
  return ids;
}

struct GradCase {
  CalibGranularity g;
  bool tied;
};

class CalibGrad : public ::testing::TestWithParam<GradCase> {};

TEST_P(CalibGrad, MatchesDoubleCentralDifferences) {
  const GradCase gc = GetParam();
  const ModelConfig c = tiny(gc.tied);
  const std::string dir = test::make_temp_dir("calibgrad");
  const std::vector<NamedTensor> tensors = random_model_tensors(c, 7);
  write_model_dir(dir, c, tensors, "F32", "");
  auto model = Model::load(dir);
  TempParams p = TempParams::uniform(gc.g, c, 1.0);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> nd(0.0, 0.4);
  for (double& x : p.theta) x = nd(rng);
  const std::vector<int32_t> ids = random_ids(13, c.vocab_size, 5);
  const int T = (int)ids.size();
  std::vector<double> grad(p.theta.size(), 0.0);
  const double loss = calib_loss_and_grad(*model, ids.data(), T, p, 1.0, grad);

  std::map<std::string, test::DoubleTensor> w64;
  for (const NamedTensor& t : tensors) w64[t.name].data.assign(t.data.begin(), t.data.end());
  // The double model at log temperatures `theta`: q_proj rows of head (l, h) scaled by exp(-theta).
  auto loss64 = [&](const std::vector<double>& theta) {
    std::map<std::string, test::DoubleTensor> w = w64;
    for (int l = 0; l < c.n_layers; ++l) {
      std::vector<double>& q = w["model.layers." + std::to_string(l) + ".self_attn.q_proj.weight"].data;
      for (int h = 0; h < c.n_heads; ++h) {
        TempParams at = p;
        at.theta = theta;
        const double s = std::exp(-theta[at.index(l, h)]);
        for (size_t i = (size_t)h * c.d_head * c.hidden; i < (size_t)(h + 1) * c.d_head * c.hidden; ++i) q[i] *= s;
      }
    }
    return test::naive_loss(test::naive_forward(c, w, ids, TempSpec::standard()).logits, ids, c.vocab_size);
  };
  EXPECT_NEAR(loss, loss64(p.theta), 1e-5 * loss);
  for (size_t i = 0; i < p.theta.size(); ++i) {
    std::vector<double> th = p.theta;
    const double h = 1e-5;
    th[i] = p.theta[i] + h;
    const double lp = loss64(th);
    th[i] = p.theta[i] - h;
    const double lm = loss64(th);
    const double fd = (lp - lm) / (2 * h);
    EXPECT_NEAR(grad[i], fd, 1e-5 + 1e-3 * std::fabs(fd)) << calib_granularity_name(gc.g) << " parameter " << i;
  }
  // Not a vacuous check: some temperature moves the loss.
  double gmax = 0.0;
  for (double g : grad) gmax = std::max(gmax, std::fabs(g));
  EXPECT_GT(gmax, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Granularities, CalibGrad,
    ::testing::Values(GradCase{CalibGranularity::kModel, true}, GradCase{CalibGranularity::kLayer, false},
                      GradCase{CalibGranularity::kHead, true}, GradCase{CalibGranularity::kHead, false}),
    [](const auto& info) {
      return std::string(calib_granularity_name(info.param.g)) + (info.param.tied ? "_tied" : "_untied");
    });

// The learned tau's projections on top of frozen weights (granularity tau-proj): the gradient with respect to every
// u and c (w_tau = sqrt(d) u, b = sqrt(d) c) against central differences (h = 1e-5) of the naive double model in which
// the same projections are the model's own tau_proj weights (mode learned, prefix mean, the same clip). Random u, c
// so that tau varies by row. Tolerance 1e-5 + 1e-3 relative, as above.
TEST(CalibGrad, TauProjMatchesDoubleCentralDifferences) {
  const ModelConfig c = tiny(false);
  const std::string dir = test::make_temp_dir("calibgradtau");
  const std::vector<NamedTensor> tensors = random_model_tensors(c, 11);
  write_model_dir(dir, c, tensors, "F32", "");
  auto model = Model::load(dir);
  TempParams p = TempParams::uniform(CalibGranularity::kTauProj, c, 1.0);
  std::mt19937_64 rng(5);
  std::normal_distribution<double> nd(0.0, 0.3);
  for (int l = 0; l < c.n_layers; ++l) {
    for (int i = 0; i < c.hidden; ++i) p.theta[(size_t)l * (c.hidden + 1) + i] = nd(rng);
    p.theta[(size_t)l * (c.hidden + 1) + c.hidden] = 0.9 + 0.3 * l;
  }
  const std::vector<int32_t> ids = random_ids(13, c.vocab_size, 6);
  const int T = (int)ids.size();
  std::vector<double> grad(p.theta.size(), 0.0), t_sum(c.n_layers, 0.0);
  const double loss = calib_loss_and_grad(*model, ids.data(), T, p, 1.0, grad, &t_sum);

  ModelConfig c64 = c;  // the naive model with the projections as its own weights
  const double sqrt_d = std::sqrt((double)c.d_head);
  c64.focal.mode = AttnMode::kLearned;
  c64.focal.has_tau = true;
  c64.focal.tau_bias = true;
  c64.focal.tau_mode = TauMode::kPrefixMean;
  c64.focal.tau_min = (float)(TempParams::kTauProjTMin * sqrt_d);
  c64.focal.tau_max = (float)(TempParams::kTauProjTMax * sqrt_d);
  std::map<std::string, test::DoubleTensor> w64;
  for (const NamedTensor& t : tensors) w64[t.name].data.assign(t.data.begin(), t.data.end());
  TempSpec learned;
  learned.mode = AttnMode::kLearned;
  std::vector<double> tau_row_min(c.n_layers, 1e30), tau_row_max(c.n_layers, 0.0);
  auto loss64 = [&](const std::vector<double>& theta, bool note_tau) {
    std::map<std::string, test::DoubleTensor> w = w64;
    for (int l = 0; l < c.n_layers; ++l) {
      const std::string pre = "model.layers." + std::to_string(l) + ".self_attn.tau_proj.";
      const double* u = theta.data() + (size_t)l * (c.hidden + 1);
      w[pre + "weight"].data.assign(c.hidden, 0.0);
      for (int i = 0; i < c.hidden; ++i) w[pre + "weight"].data[i] = sqrt_d * u[i];
      w[pre + "bias"].data.assign(1, sqrt_d * u[c.hidden]);
    }
    const test::NaiveOut out = test::naive_forward(c64, w, ids, learned);
    if (note_tau)
      for (int l = 0; l < c.n_layers; ++l)
        for (double t : out.tau[l]) {
          tau_row_min[l] = std::min(tau_row_min[l], t / sqrt_d);
          tau_row_max[l] = std::max(tau_row_max[l], t / sqrt_d);
        }
    return test::naive_loss(out.logits, ids, c.vocab_size);
  };
  EXPECT_NEAR(loss, loss64(p.theta, true), 1e-5 * loss);
  for (size_t i = 0; i < p.theta.size(); ++i) {
    std::vector<double> th = p.theta;
    const double h = 1e-5;
    th[i] = p.theta[i] + h;
    const double lp = loss64(th, false);
    th[i] = p.theta[i] - h;
    const double lm = loss64(th, false);
    const double fd = (lp - lm) / (2 * h);
    EXPECT_NEAR(grad[i], fd, 1e-5 + 1e-3 * std::fabs(fd)) << "parameter " << i;
  }
  double gmax = 0.0;
  for (double g : grad) gmax = std::max(gmax, std::fabs(g));
  EXPECT_GT(gmax, 1e-3);
  for (int l = 0; l < c.n_layers; ++l) {
    std::printf("layer %d: t per row %.3f..%.3f\n", l, tau_row_min[l], tau_row_max[l]);
    EXPECT_GT(tau_row_max[l] - tau_row_min[l], 0.05) << "tau must vary by row for the test to mean something";
    // The reported per-layer sum of t over the rows agrees with the double model's rows.
    EXPECT_GE(t_sum[l] / T, tau_row_min[l] - 1e-4);
    EXPECT_LE(t_sum[l] / T, tau_row_max[l] + 1e-4);
  }
}

// A spec carrying tau projections runs exactly as the model whose weights hold them: the same logits (1e-5 relative
// to the largest) and tau per row (1e-5), prefill and decode after it.
TEST(CalibTauProj, SpecProjectionsRunAsModelWeights) {
  ModelConfig c = tiny(false);
  const std::vector<NamedTensor> tensors = random_model_tensors(c, 13);
  const std::string plain_dir = test::make_temp_dir("tauplain");
  write_model_dir(plain_dir, c, tensors, "F32", "");
  auto plain = Model::load(plain_dir);
  TempParams p = TempParams::uniform(CalibGranularity::kTauProj, c, 0.8);
  std::mt19937_64 rng(9);
  std::normal_distribution<double> nd(0.0, 0.2);
  for (double& x : p.theta) x += nd(rng);
  const TempSpec with_proj = p.spec();
  ASSERT_NO_THROW(with_proj.validate(c));
  const TauProj& tp = *with_proj.tau_proj;
  ModelConfig ct = c;
  ct.focal.mode = AttnMode::kLearned;
  ct.focal.has_tau = true;
  ct.focal.tau_bias = true;
  ct.focal.tau_mode = tp.tau_mode;
  ct.focal.tau_min = tp.tau_min;
  ct.focal.tau_max = tp.tau_max;
  std::vector<NamedTensor> tt = tensors;
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".self_attn.tau_proj.";
    tt.push_back({pre + "weight",
                  {1, (int64_t)c.hidden},
                  std::vector<float>(tp.weight.begin() + (ptrdiff_t)l * c.hidden,
                                     tp.weight.begin() + (ptrdiff_t)(l + 1) * c.hidden)});
    tt.push_back({pre + "bias", {1}, {tp.bias[l]}});
  }
  const std::string tau_dir = test::make_temp_dir("tauweights");
  write_model_dir(tau_dir, ct, tt, "F32", "");
  auto own = Model::load(tau_dir);
  TempSpec learned;
  learned.mode = AttnMode::kLearned;
  struct TauRec : ForwardObserver {
    std::vector<float> tau;
    void on_layer(const LayerRecord& r) override {
      if (r.tau) tau.insert(tau.end(), r.tau, r.tau + r.n_tokens);
    }
  };
  const std::vector<int32_t> ids = random_ids(20, c.vocab_size, 2);
  Session sa(*plain, 24), sb(*own, 24);
  TauRec ra, rb;
  std::vector<float> la, lb;
  sa.forward(ids.data(), 20, with_proj, RunOptions{}, &ra, &la);
  sb.forward(ids.data(), 20, learned, RunOptions{}, &rb, &lb);
  const int32_t next = 5;
  std::vector<float> da, db;
  sa.forward(&next, 1, with_proj, RunOptions{}, &ra, &da);
  sb.forward(&next, 1, learned, RunOptions{}, &rb, &db);
  la.insert(la.end(), da.begin(), da.end());
  lb.insert(lb.end(), db.begin(), db.end());
  ASSERT_EQ(la.size(), lb.size());
  float scale = 0.0f;
  for (float v : lb) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < la.size(); ++i) ASSERT_NEAR(la[i], lb[i], 1e-5f * scale) << i;
  ASSERT_EQ(ra.tau.size(), rb.tau.size());
  float tmin = 1e30f, tmax = 0.0f;
  for (size_t i = 0; i < ra.tau.size(); ++i) {
    EXPECT_NEAR(ra.tau[i], rb.tau[i], 1e-5f * rb.tau[i]) << i;
    tmin = std::min(tmin, rb.tau[i]);
    tmax = std::max(tmax, rb.tau[i]);
  }
  EXPECT_GT(tmax - tmin, 0.05f);  // the rows' tau differ: the projection is in use
  // The spec's JSON (a capture's provenance) carries the projections: the round trip runs the same.
  const TempSpec back = TempSpec::from_json(with_proj.to_json(), "test");
  ASSERT_TRUE(back.tau_proj);
  EXPECT_EQ(back.tau_proj->weight, tp.weight);
  EXPECT_EQ(back.tau_proj->bias, tp.bias);
  EXPECT_EQ(back.first_changed_layer(with_proj, c), c.n_layers);
  // Another model's shape is refused, naming what differs.
  ModelConfig wider = c;
  wider.hidden = 32;
  try {
    with_proj.validate(wider);
    FAIL() << "projections of another hidden size were accepted";
  } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find("hidden size 16"), std::string::npos) << e.what(); }
}

TEST(CalibGrad, BiasesAndQkNormAgainstFp32Differences) {
  // Qwen2-style q/k/v/o biases and per-head QK-norm (the naive model has neither): the gradient against central
  // differences (h = 1e-2) of the runtime's own fp32 loss, 2e-3 + 3 % (fp32 rounding amplified by the quotient).
  ModelConfig c = tiny(false);
  c.attention_bias = true;
  c.qk_norm = true;
  std::vector<NamedTensor> tensors = random_model_tensors(c, 9, /*training_init=*/true, 0.3f);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 0.3f);
  for (NamedTensor& t : tensors)
    if (t.name.find("_proj.bias") != std::string::npos)
      for (float& x : t.data) x = nd(rng);
  const std::string dir = test::make_temp_dir("calibbias");
  write_model_dir(dir, c, tensors, "F32", "");
  auto model = Model::load(dir);
  ASSERT_TRUE(model->config().qk_norm);
  TempParams p = TempParams::uniform(CalibGranularity::kHead, c, 0.7);
  const std::vector<int32_t> ids = random_ids(12, c.vocab_size, 8);
  std::vector<double> grad(p.theta.size(), 0.0);
  calib_loss_and_grad(*model, ids.data(), (int)ids.size(), p, 1.0, grad);
  for (size_t i = 0; i < p.theta.size(); ++i) {
    TempParams q = p;
    const double h = 1e-2;
    q.theta[i] += h;
    const double lp = calib_val_loss(*model, {ids}, q.spec()) * (double)(ids.size() - 1);
    q.theta[i] -= 2 * h;
    const double lm = calib_val_loss(*model, {ids}, q.spec()) * (double)(ids.size() - 1);
    const double fd = (lp - lm) / (2 * h);
    EXPECT_NEAR(grad[i], fd, 2e-3 + 0.03 * std::fabs(fd)) << "parameter " << i;
  }
}

// A tiny model directory whose config.json gets `extra` (rope_scaling, model_type, sliding_window): write_model_dir
// writes none of them.
std::unique_ptr<Model> model_with_config(const ModelConfig& c, uint64_t seed, const nlohmann::json& extra,
                                         const std::string& tag) {
  const std::string dir = test::make_temp_dir(tag);
  write_model_dir(dir, c, random_model_tensors(c, seed), "F32", "");
  nlohmann::json j = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
  for (const auto& [k, v] : extra.items()) j[k] = v;
  std::ofstream(dir + "/config.json") << j.dump();
  return Model::load(dir);
}

TEST(CalibGrad, RopeScalingAndWindowAgainstFp32Differences) {
  // Llama 3-style RoPE scaling (yarn with its attention factor on cos and sin; linear) and a Mistral window as wide
  // as the call (the naive model has neither): the gradient against central differences (h = 1e-2) of the
  // runtime's own fp32 loss, 2e-3 + 3 %.
  const ModelConfig c = tiny(true);
  const nlohmann::json cases[] = {
      {{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32}}}},
      {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}},
      {{"model_type", "mistral"}, {"architectures", {"MistralForCausalLM"}}, {"sliding_window", 12}}};
  for (const nlohmann::json& extra : cases) {
    auto model = model_with_config(c, 12, extra, "calibrope");
    const ModelConfig& mc = model->config();
    ASSERT_TRUE(mc.arch.rope.type != RopeType::kDefault || mc.arch.sliding_window == 12) << extra.dump();
    TempParams p = TempParams::uniform(CalibGranularity::kHead, mc, 0.8);
    const std::vector<int32_t> ids = random_ids(12, c.vocab_size, 3);
    std::vector<double> grad(p.theta.size(), 0.0);
    calib_loss_and_grad(*model, ids.data(), (int)ids.size(), p, 1.0, grad);
    for (size_t i = 0; i < p.theta.size(); ++i) {
      TempParams q = p;
      const double h = 1e-2;
      q.theta[i] += h;
      const double lp = calib_val_loss(*model, {ids}, q.spec()) * (double)(ids.size() - 1);
      q.theta[i] -= 2 * h;
      const double lm = calib_val_loss(*model, {ids}, q.spec()) * (double)(ids.size() - 1);
      const double fd = (lp - lm) / (2 * h);
      EXPECT_NEAR(grad[i], fd, 2e-3 + 0.03 * std::fabs(fd)) << extra.dump() << " parameter " << i;
    }
  }
  // A window narrower than the call is refused, naming it.
  auto narrow = model_with_config(
      c, 12, {{"model_type", "mistral"}, {"architectures", {"MistralForCausalLM"}}, {"sliding_window", 6}}, "calibwin");
  TempParams p = TempParams::uniform(CalibGranularity::kHead, narrow->config(), 1.0);
  std::vector<double> grad(p.theta.size(), 0.0);
  const std::vector<int32_t> ids = random_ids(12, c.vocab_size, 3);
  try {
    calib_loss_and_grad(*narrow, ids.data(), (int)ids.size(), p, 1.0, grad);
    FAIL() << "a window narrower than the call was taken";
  } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find("sliding_window 6"), std::string::npos) << e.what(); }
}

TEST(CalibGrad, StoredWeightsGiveTheFp32Gradient) {
  // bf16 weights held as stored (native) are widened one matrix at a time in the backward; the same bf16 values
  // widened at load (fp32 mode) are the oracle. The forwards differ in kernels only: 1e-4 relative + 1e-6.
  const ModelConfig c = tiny(true);
  const std::string dir = test::make_temp_dir("calibbf16");
  write_model_dir(dir, c, random_model_tensors(c, 4), "BF16", "");
  LoadOptions native, fp32;
  native.weights = WeightsMode::kNative;
  fp32.weights = WeightsMode::kFp32;
  auto mn = Model::load(dir, Device::kCpu, native);
  auto mf = Model::load(dir, Device::kCpu, fp32);
  TempParams p = TempParams::uniform(CalibGranularity::kHead, c, 0.8);
  const std::vector<int32_t> ids = random_ids(16, c.vocab_size, 2);
  std::vector<double> gn(p.theta.size(), 0.0), gf(p.theta.size(), 0.0);
  calib_loss_and_grad(*mn, ids.data(), (int)ids.size(), p, 1.0, gn);
  calib_loss_and_grad(*mf, ids.data(), (int)ids.size(), p, 1.0, gf);
  test::expect_allclose(gn, gf, 1e-4, 1e-6, "stored-weight gradient");
}

// Windows of `T` tokens sampled from `model` under `spec` (sample temperature 1, whole vocabulary).
std::vector<int32_t> sample_tokens(const Model& model, const TempSpec& spec, int n_seq, int T, uint64_t seed) {
  std::vector<int32_t> out;
  for (int s = 0; s < n_seq; ++s) {
    Session sess(model, T);
    SampleOptions so;
    so.sample_temp = 1.0f;
    so.seed = seed + (uint64_t)s;
    so.stop_at_eos = false;
    const std::vector<int32_t> prompt = {(int32_t)(s % model.config().vocab_size)};
    const std::vector<int32_t> gen = generate(sess, prompt, T - 1, spec, so, RunOptions{}, nullptr);
    out.insert(out.end(), prompt.begin(), prompt.end());
    out.insert(out.end(), gen.begin(), gen.end());
  }
  return out;
}

ModelConfig planted_config() {
  ModelConfig c = tiny(true);
  c.vocab_size = 32;
  c.hidden = 32;
  c.intermediate = 48;
  c.d_head = 8;
  return c;
}

TEST(CalibPlanted, RecoversPlantedHeadTemperatures) {
  // q_proj and k_proj at 1.4 times the default scale: attention logits of standard deviation about 2, so every head's
  // t shapes its rows and the loss.
  const ModelConfig c = planted_config();
  std::vector<NamedTensor> tensors = random_model_tensors(c, 21);
  for (NamedTensor& t : tensors)
    if (t.name.find("q_proj") != std::string::npos || t.name.find("k_proj") != std::string::npos)
      for (float& x : t.data) x *= 1.4f;
  const std::string mdir = test::make_temp_dir("planted");
  write_model_dir(mdir, c, tensors, "F32", "");
  auto model = Model::load(mdir);
  TempParams planted = TempParams::uniform(CalibGranularity::kHead, c, 1.0);
  planted.theta[planted.index(0, 1)] = std::log(0.5);
  planted.theta[planted.index(1, 2)] = std::log(0.5);
  planted.theta[planted.index(1, 0)] = std::log(1.5);
  const int T = 64;
  // One thread: at T = 64 on a model this small, threads only add fork-join waits (4x slower on a loaded machine).
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<int32_t> tokens = sample_tokens(*model, planted.spec(), 640, T, 100);
  const std::string dir = test::make_temp_dir("plantedrun");
  CalibConfig cfg;
  cfg.out_path = dir + "/temps.json";
  cfg.data_path = "sampled";
  cfg.granularity = CalibGranularity::kHead;
  cfg.steps = 400;
  cfg.batch = 24;
  cfg.seq_len = T;
  cfg.lr = 0.05;
  cfg.eval_every = 100;
  const TempFile f = calibrate(*model, tokens, cfg);
  omp_set_num_threads(threads);
  const std::vector<float> want = planted.head_temps();
  for (size_t i = 0; i < want.size(); ++i) {
    std::printf("head %zu:%zu planted t %.3f, calibrated %.3f\n", i / c.n_heads, i % c.n_heads, want[i],
                f.focal_temp[i]);
    EXPECT_NEAR(f.focal_temp[i], want[i], 0.1 * want[i]) << "head " << i / c.n_heads << ":" << i % c.n_heads;
  }
  EXPECT_LT(f.val_loss, f.val_loss_init);
}

CalibConfig small_run(const std::string& out) {
  CalibConfig cfg;
  cfg.out_path = out;
  cfg.data_path = "random";
  cfg.granularity = CalibGranularity::kLayer;
  cfg.steps = 6;
  cfg.batch = 2;
  cfg.seq_len = 16;
  cfg.lr = 0.1;
  cfg.eval_every = 3;
  cfg.val_windows = 2;
  return cfg;
}

TEST(CalibFile, AppliedFileGivesTheReportedLoss) {
  const ModelConfig c = tiny(true);
  auto model = make_model(c, 3, "applied");
  const std::vector<int32_t> tokens = random_ids(16 * 10, c.vocab_size, 9);
  const std::string dir = test::make_temp_dir("appliedrun");
  for (CalibGranularity g :
       {CalibGranularity::kModel, CalibGranularity::kLayer, CalibGranularity::kHead, CalibGranularity::kTauProj}) {
    CalibConfig cfg = small_run(dir + "/t_" + calib_granularity_name(g) + ".json");
    cfg.granularity = g;
    const TempFile f = calibrate(*model, tokens, cfg);
    const TempSpec spec = TempSpec::parse("calibrated:" + cfg.out_path, "--temp", &model->config());
    const CalibWindows w = split_calib_windows(tokens, cfg.seq_len, cfg.val_frac, "tokens");
    std::vector<std::vector<int32_t>> val;
    for (size_t i = 0; i < std::min(w.val.size(), (size_t)cfg.val_windows); ++i)
      val.push_back(w.val[w.val.size() * i / std::min(w.val.size(), (size_t)cfg.val_windows)]);
    const double applied = calib_val_loss(*model, val, spec);
    EXPECT_NEAR(applied, f.val_loss, 1e-5 * f.val_loss) << calib_granularity_name(g);
    const TempFile back = read_temp_file(cfg.out_path);
    EXPECT_EQ(back.focal_temp, f.focal_temp);
    if (g == CalibGranularity::kModel || g == CalibGranularity::kLayer) {
      // One t per model or per layer: a file edited to hold another for one head is refused (it ran the group's
      // first t, while inspect reported the edited one).
      TempFile edited = back;
      edited.focal_temp[(size_t)1 * c.n_heads + 1] *= 1.5f;
      const std::string path = dir + "/edited_" + calib_granularity_name(g) + ".json";
      write_temp_file(edited, path);
      try {
        (void)read_temp_file(path);
        ADD_FAILURE() << "an edited " << calib_granularity_name(g) << " file was read";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("focal_temp[1][1] = "), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("set granularity to head"), std::string::npos) << e.what();
      }
    }
    EXPECT_EQ(back.base_checksum, model->weights_checksum());
    EXPECT_EQ(back.granularity, g);
    if (g == CalibGranularity::kHead) {
      // A layer's t given after a head-granularity file sets that layer's heads (the file's per-head t won over it:
      // "+0=0.5" changed nothing), a head given before it in the list stays; the label says the file was changed.
      const TempSpec over = TempSpec::parse("calibrated:" + cfg.out_path + "+0:1=0.3+0=0.5", "--temp", &c);
      const TempSpec half = TempSpec::focal(0.5f), third = TempSpec::focal(0.3f);
      for (int h = 0; h < c.n_heads; ++h) {
        EXPECT_EQ(over.row_multiplier(c, 0, h, 5, 0.0f), (h == 1 ? third : half).row_multiplier(c, 0, h, 5, 0.0f));
        EXPECT_EQ(over.row_multiplier(c, 1, h, 5, 0.0f), spec.row_multiplier(c, 1, h, 5, 0.0f));
      }
      EXPECT_NE(over.row_multiplier(c, 0, 0, 5, 0.0f), spec.row_multiplier(c, 0, 0, 5, 0.0f));
      EXPECT_EQ(over.label(), "calibrated:t_head+overrides");
      EXPECT_EQ(TempSpec::from_json(over.to_json(), "test").label(), "calibrated:t_head+overrides");
      // The file's t read back from a capture's JSON are the same floats (7 digits read some back as a neighbour:
      // the app took a capture's own calibrated setting for another one and refused to export it).
      const TempSpec back = TempSpec::from_json(spec.to_json(), "test");
      EXPECT_EQ(back.head_temp, spec.head_temp);
      EXPECT_EQ(back.first_changed_layer(spec, c), c.n_layers);
      TempSpec odd = TempSpec::focal(0.4f);  // floats that need 8 and 9 digits
      for (int k = 0; k < 64; ++k) odd.head_temp[{k / 8, k % 8}] = std::nextafter(1.0f + 0.01371f * (float)k, 2.0f);
      EXPECT_EQ(TempSpec::from_json(odd.to_json(), "test").head_temp, odd.head_temp);
      EXPECT_NE(odd.to_json().find("\"focal_temp\":0.4,"), std::string::npos) << "0.4 stays 0.4";
      EXPECT_EQ(spec.label(), "calibrated:t_head");
      // A field of the wrong type is named (the JSON library's words came alone: "cannot use at() with array").
      const std::string text = [&] {
        std::ifstream in(cfg.out_path);
        return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      }();
      const std::pair<const char*, const char*> edits[] = {
          {"shape", "[1000000, 1000000]"}, {"losses", "null"}, {"base_checksum", "5"}};
      for (const auto& [field, value] : edits) {
        nlohmann::json j = nlohmann::json::parse(text);
        j[field] = nlohmann::json::parse(value);
        const std::string path = dir + "/bad_" + field + ".json";
        std::ofstream(path) << j.dump();
        try {
          (void)read_temp_file(path);
          ADD_FAILURE() << field << " = " << value << " was read";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find(std::string("field \"") + field), std::string::npos) << e.what();
          EXPECT_EQ(std::string(e.what()).find("[json.exception"), std::string::npos) << e.what();
        }
      }
    }
    if (g == CalibGranularity::kTauProj) {
      ASSERT_TRUE(back.tau_proj && f.tau_proj);
      EXPECT_EQ(back.tau_proj->weight, f.tau_proj->weight);
      EXPECT_EQ(back.tau_proj->bias, f.tau_proj->bias);
      EXPECT_EQ(spec.mode, AttnMode::kLearned);
      EXPECT_EQ(spec.label(), std::string("calibrated:t_") + calib_granularity_name(g));  // the file's stem
      // The file's t is each layer's mean tau / sqrt(d_head) over the held-out rows of that run.
      std::vector<double> layer_t;
      calib_val_loss(*model, val, spec, &layer_t);
      for (int l = 0; l < c.n_layers; ++l) EXPECT_NEAR(f.focal_temp[(size_t)l * c.n_heads], layer_t[l], 1e-6);
      EXPECT_NE(f.tau_proj->weight, std::vector<float>(f.tau_proj->weight.size(), 0.0f));  // it moved
    }
    // The training log is one the trainer's reader takes: one row per evaluation (the start, steps 3 and 6).
    const TrainLog log = read_train_log(dir + "/t_" + calib_granularity_name(g) + ".log.h5");
    EXPECT_EQ(log.eval_step, (std::vector<int32_t>{0, 3, 6}));
    EXPECT_EQ(log.val_loss[0], (float)f.val_loss_init);
    EXPECT_EQ(log.val_loss[2], (float)f.val_loss);
    EXPECT_EQ(log.step_loss.size(), 6u);
  }
}

TEST(CalibFile, ResumeGivesTheSameTemperatures) {
  const ModelConfig c = tiny(false);
  auto model = make_model(c, 5, "resume");
  const std::vector<int32_t> tokens = random_ids(16 * 10, c.vocab_size, 4);
  const std::string dir = test::make_temp_dir("resumerun");
  CalibConfig straight = small_run(dir + "/straight.json");
  straight.granularity = CalibGranularity::kHead;
  const TempFile a = calibrate(*model, tokens, straight);
  // Killed after the checkpoint of step 3: the progress callback stops the run.
  CalibConfig cut = straight;
  cut.out_path = dir + "/cut.json";
  struct Stop {};
  try {
    calibrate(*model, tokens, cut, [](const CalibProgress& p) {
      if (p.step == 4) throw Stop{};
    });
    FAIL() << "the run was not cut";
  } catch (const Stop&) {}
  EXPECT_FALSE(std::ifstream(cut.out_path).good());
  cut.resume = true;
  // Another option on resume is refused, naming it.
  CalibConfig other = cut;
  other.lr = 0.2;
  other.steps = 12;
  try {
    calibrate(*model, tokens, other);
    FAIL() << "a resume with other options was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lr 0.1 (run) vs 0.2 (now)"), std::string::npos) << e.what();
  }
  // The run's log gone: the resume says what to do (it named the file alone).
  const std::string log_path = calib_log_path(cut.out_path);
  std::rename(log_path.c_str(), (log_path + ".away").c_str());
  try {
    calibrate(*model, tokens, cut);
    FAIL() << "a resume without its log was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "resume");
    EXPECT_NE(std::string(e.what()).find("put it back, or remove '" + cut.out_path + ".ckpt.json'"), std::string::npos)
        << e.what();
  }
  std::rename((log_path + ".away").c_str(), log_path.c_str());
  const TempFile b = calibrate(*model, tokens, cut);
  EXPECT_EQ(a.focal_temp, b.focal_temp);  // bitwise
  EXPECT_EQ(a.val_loss, b.val_loss);
  // The completed run removed its checkpoint: the same configuration runs again from the start.
  EXPECT_FALSE(std::ifstream(cut.out_path + ".ckpt.json").good());
  // tau-proj: the projections and Adam's moments come back from the checkpoint the same way.
  CalibConfig tau_straight = small_run(dir + "/tau_straight.json");
  tau_straight.granularity = CalibGranularity::kTauProj;
  const TempFile ta = calibrate(*model, tokens, tau_straight);
  CalibConfig tau_cut = tau_straight;
  tau_cut.out_path = dir + "/tau_cut.json";
  try {
    calibrate(*model, tokens, tau_cut, [](const CalibProgress& p) {
      if (p.step == 4) throw Stop{};
    });
    FAIL() << "the tau-proj run was not cut";
  } catch (const Stop&) {}
  tau_cut.resume = true;
  const TempFile tb = calibrate(*model, tokens, tau_cut);
  ASSERT_TRUE(ta.tau_proj && tb.tau_proj);
  EXPECT_EQ(ta.tau_proj->weight, tb.tau_proj->weight);
  EXPECT_EQ(ta.tau_proj->bias, tb.tau_proj->bias);
  EXPECT_EQ(ta.val_loss, tb.val_loss);
}

// Two calibrations on one -o shared its checkpoint and log, and one's result was lost: while one runs (here its lock
// taken by hand) another is refused, naming the lock, and writes nothing.
TEST(CalibBadInput, ASecondCalibrationOnTheSameOutputIsRefused) {
  const ModelConfig c = tiny(false);
  auto model = make_model(c, 5, "locked");
  const std::vector<int32_t> tokens = random_ids(16 * 10, c.vocab_size, 4);
  const std::string dir = test::make_temp_dir("lockedrun");
  const CalibConfig cfg = small_run(dir + "/t.json");
  const int fd = ::open((cfg.out_path + ".lock").c_str(), O_RDWR | O_CREAT, 0666);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  try {
    calibrate(*model, tokens, cfg);
    ADD_FAILURE() << "a second calibration on the same -o was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "out_path");
    EXPECT_NE(std::string(e.what()).find("another focal calibrate is writing there now"), std::string::npos)
        << e.what();
  }
  ::close(fd);
  EXPECT_FALSE(std::ifstream(cfg.out_path + ".ckpt.json").good());
  calibrate(*model, tokens, cfg);  // once the other is done
  EXPECT_TRUE(std::ifstream(cfg.out_path).good());
  EXPECT_FALSE(std::ifstream(cfg.out_path + ".lock").good());
}

TEST(CalibBadInput, DivergenceKeepsTheLastGoodCheckpoint) {
  const ModelConfig c = tiny(true);
  auto model = make_model(c, 6, "diverge");
  const std::vector<int32_t> tokens = random_ids(16 * 10, c.vocab_size, 1);
  const std::string dir = test::make_temp_dir("divergerun");
  CalibConfig cfg = small_run(dir + "/t.json");
  cfg.granularity = CalibGranularity::kModel;
  cfg.eval_every = 1;
  cfg.lr = 10.0;  // Adam moves log t by about lr per step: t leaves the range a run takes, [1e-6, 1e6], at step 2
  try {
    calibrate(*model, tokens, cfg);
    FAIL() << "no divergence";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("calibration diverged"), std::string::npos) << m;
    EXPECT_NE(m.find("last good checkpoint '" + cfg.out_path + ".ckpt.json' is kept"), std::string::npos) << m;
    // The step as the progress line counts it (from 1) and the learning rate that step ran at (the cosine schedule
    // by hand: lr (0.1 + 0.45 (1 + cos(pi (K - 1) / steps)))); it named the next step's.
    int k = 0;
    double lr_shown = 0;
    ASSERT_EQ(std::sscanf(m.c_str() + m.find(" at step "), " at step %d (learning rate %lf", &k, &lr_shown), 2) << m;
    const double want = cfg.lr * (0.1 + 0.45 * (1.0 + std::cos(M_PI * (k - 1) / cfg.steps)));
    EXPECT_NEAR(lr_shown, want, 1e-4 * want) << m;
  }
  EXPECT_FALSE(std::ifstream(cfg.out_path).good());  // no temperature file
  std::ifstream ck(cfg.out_path + ".ckpt.json");
  ASSERT_TRUE(ck.good());
  const nlohmann::json j = nlohmann::json::parse(ck);
  EXPECT_GE(j.at("step").get<int>(), 1);
  for (double lt : j.at("theta").get<std::vector<double>>()) EXPECT_TRUE(std::isfinite((float)std::exp(lt)));
}

TEST(CalibBadInput, TooShortDataNamesWhatIsNeeded) {
  try {
    split_calib_windows(std::vector<int32_t>(20, 1), 16, 0.1, "data file 'x.txt'");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "data");
    EXPECT_NE(std::string(e.what()).find("'x.txt' holds 20 tokens; calibration needs at least 2 x seq_len = 32"),
              std::string::npos)
        << e.what();
  }
  const std::string dir = test::make_temp_dir("emptydata");
  std::ofstream(dir + "/empty.txt") << "\n  \n";
  auto model = make_model(tiny(true), 1, "emptymodel");
  try {
    load_calib_tokens(*model, dir + "/empty.txt");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("empty.txt' is empty"), std::string::npos) << e.what();
  }
  try {
    load_calib_tokens(*model, dir + "/missing.txt");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.txt' cannot be opened"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_calib_granularity("block", "--granularity"), Error);
}

TEST(CalibBadInput, OtherArchitecturesAreRefusedNamingWhatIsMissing) {
  ModelConfig c = tiny(true);
  EXPECT_TRUE(calibration_gaps(c, 64).empty());
  c.arch.rope.type = RopeType::kLinear;  // RoPE scaling is covered
  c.arch.sliding_window = 8;             // a window only as wide as the calibration windows at least
  EXPECT_TRUE(calibration_gaps(c, 8).empty());
  const std::vector<std::string> gaps = calibration_gaps(c, 16);
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_NE(gaps[0].find("sliding window (sliding_window 8) narrower than the windows of 16 tokens"), std::string::npos)
      << gaps[0];
  ModelConfig g = tiny(true);
  g.arch.norm_plus_one = true;
  g.arch.attn_softcap = 50.0f;
  g.arch.post_attn_norm = true;
  EXPECT_EQ(calibration_gaps(g, 64).size(), 3u);
}

TEST(CalibBadInput, AFileForAnotherModelIsRefused) {
  const ModelConfig c = tiny(true);
  auto model = make_model(c, 3, "ownmodel");
  const std::vector<int32_t> tokens = random_ids(16 * 10, c.vocab_size, 9);
  const std::string dir = test::make_temp_dir("otherrun");
  CalibConfig cfg = small_run(dir + "/t.json");
  calibrate(*model, tokens, cfg);
  // Another shape: refused when the spec is parsed, naming the field.
  ModelConfig wide = c;
  wide.n_heads = 8;
  wide.n_kv_heads = 4;
  wide.d_head = 2;
  try {
    TempSpec::parse("calibrated:" + cfg.out_path, "--temp", &wide);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "temp_file");
    EXPECT_NE(std::string(e.what()).find("n_heads 4 (file) vs 8 (this model)"), std::string::npos) << e.what();
  }
  // The same shape, other weights: refused by the forward, naming the checksums.
  auto other = make_model(c, 4, "othermodel");
  const TempSpec spec = TempSpec::parse("calibrated:" + cfg.out_path, "--temp", &other->config());
  Session s(*other, 4);
  std::vector<float> logits;
  try {
    s.forward(tokens.data(), 4, spec, RunOptions{}, nullptr, &logits);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("was calibrated for other weights"), std::string::npos) << e.what();
  }
  // Its own model runs it; the spec's JSON keeps the tie.
  Session own(*model, 4);
  EXPECT_NO_THROW(own.forward(tokens.data(), 4, spec, RunOptions{}, nullptr, &logits));
  EXPECT_EQ(TempSpec::from_json(spec.to_json(), "json").base_checksum, spec.base_checksum);
  // Not a temperature file.
  std::ofstream(dir + "/bad.json") << "{\"format\": \"something\"}";
  EXPECT_THROW(TempSpec::parse("calibrated:" + dir + "/bad.json", "--temp", &c), Error);
}

}  // namespace
}  // namespace focal
