// The whole forward against an independent naive double-precision LLaMA written here (reference for logits,
// attention and tau under every temperature mode), plus temperature semantics, the causal mask and KV-cache
// generation. Models are random, written by random_model_tensors and loaded through Model::load.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>

#include "focal/error.h"
#include "focal/model.h"
#include "focal/model_writer.h"
#include "model_internal.h"
#include "naive_llama.h"
#include "temp_spec_cases.h"
#include "test_util.h"

namespace focal {
namespace {

using test::naive_forward;
using test::NaiveOut;
using test::Vec;

ModelConfig small_config(AttnMode mode, TauMode tau_mode = TauMode::kPrefixMean, bool qk_norm = false) {
  ModelConfig c;
  c.vocab_size = 61;
  c.hidden = 48;
  c.intermediate = 80;
  c.n_layers = 3;
  c.n_heads = 6;
  c.n_kv_heads = 2;
  c.d_head = 8;
  c.max_positions = 256;
  c.rope_theta = 10000.0f;
  c.rms_eps = 1e-5f;
  c.tied_embeddings = mode != AttnMode::kFocal;  // exercise both
  c.qk_norm = qk_norm;
  c.bos_id = 1;
  c.eos_id = 2;
  c.focal.mode = mode;
  if (mode == AttnMode::kFocal) c.focal.focal_temp = 0.4f;
  if (mode == AttnMode::kLearned) {
    c.focal.has_tau = true;
    c.focal.tau_bias = true;
    // Bounds chosen so that some rows clip and some do not with the random init (checked below).
    c.focal.tau_min = 2.2f;
    c.focal.tau_max = 2.9f;
    c.focal.tau_mode = tau_mode;
  }
  return c;
}

struct TestModel {
  std::string dir;
  std::unique_ptr<Model> model;
  std::map<std::string, NamedTensor> w;
};

TestModel make_model(const ModelConfig& c, uint64_t seed = 7) {
  TestModel t;
  t.dir = test::make_temp_dir("fwd");
  auto tensors = random_model_tensors(c, seed);
  write_model_dir(t.dir, c, tensors, "F32", "");
  for (auto& nt : tensors) t.w[nt.name] = nt;
  t.model = Model::load(t.dir);
  return t;
}

std::vector<int32_t> random_ids(int n, int vocab, unsigned seed) {
  std::vector<int32_t> ids(n);
  unsigned s = seed;
  for (int i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    ids[i] = (int32_t)((s >> 8) % vocab);
  }
  ids[0] = 1;
  return ids;
}

double rel_err(const std::vector<float>& a, const Vec& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num = std::max(num, std::fabs(a[i] - ref[i]));
    den = std::max(den, std::fabs(ref[i]));
  }
  return num / den;
}

struct RunResult {
  std::vector<float> logits;
  std::unique_ptr<test::RecordingObserver> obs;
};

RunResult run(const Model& m, const std::vector<int32_t>& ids, const TempSpec& spec) {
  const ModelConfig& c = m.config();
  RunResult r;
  r.obs = std::make_unique<test::RecordingObserver>(c.n_layers, c.n_heads, (int)ids.size());
  Session s(m, (int)ids.size());
  EXPECT_TRUE(s.forward(ids.data(), (int)ids.size(), spec, RunOptions{}, r.obs.get(), &r.logits));
  return r;
}

// fp32 forward vs double reference. Tolerance 2e-4 relative to the tensor's max magnitude: fp32 accumulation over
// hidden 48 and 3 layers, with RoPE angles rounded to fp32 as Hugging Face does (the reference uses exact angles).
constexpr double kFwdTol = 2e-4;

void expect_matches_naive(TestModel& tm, const TempSpec& spec, int T) {
  const ModelConfig& c = tm.model->config();
  const auto ids = random_ids(T, c.vocab_size, 11);
  RunResult r = run(*tm.model, ids, spec);
  NaiveOut ref = naive_forward(c, tm.w, ids, spec);
  EXPECT_LE(rel_err(r.logits, ref.logits), kFwdTol) << spec.label();
  for (int l = 0; l < c.n_layers; ++l) {
    std::vector<float> mine(r.obs->probs.begin() + r.obs->at(l, 0, 0, 0),
                            r.obs->probs.begin() + r.obs->at(l + 1, 0, 0, 0));
    EXPECT_LE(rel_err(mine, ref.attn[l]), kFwdTol) << spec.label() << " layer " << l;
    if (spec.mode == AttnMode::kLearned) {
      for (int i = 0; i < T; ++i) EXPECT_NEAR(r.obs->tau[(size_t)l * T + i], ref.tau[l][i], 1e-4) << "tau l" << l;
    }
  }
}

TEST(Forward, StandardMatchesNaive) {
  auto tm = make_model(small_config(AttnMode::kStandard));
  expect_matches_naive(tm, TempSpec::standard(), 45);
}

// More rows than one MLP pass (kForwardMlpRows = 1024): the MLP runs in two passes of rows, and the logits of
// every row still match the double-precision reference (kFwdTol), the rows past the first pass included.
TEST(Forward, MlpInRowPassesMatchesNaive) {
  ModelConfig c = small_config(AttnMode::kFocal);
  c.max_positions = 2048;
  auto tm = make_model(c);
  const int T = kForwardMlpRows + 100;
  const auto ids = random_ids(T, c.vocab_size, 5);
  Session s(*tm.model, T);
  RunOptions opt;
  opt.all_logits = true;
  std::vector<float> logits;
  ASSERT_TRUE(s.forward(ids.data(), T, TempSpec::native(c), opt, nullptr, &logits));
  NaiveOut ref = naive_forward(c, tm.w, ids, TempSpec::native(c));
  ASSERT_EQ(logits.size(), ref.logits.size());
  EXPECT_LE(rel_err(logits, ref.logits), kFwdTol);
  const size_t tail = (size_t)kForwardMlpRows * c.vocab_size;  // the second pass's rows alone
  EXPECT_LE(rel_err(std::vector<float>(logits.begin() + tail, logits.end()),
                    Vec(ref.logits.begin() + tail, ref.logits.end())),
            kFwdTol);
}

TEST(Forward, FocalAndOverridesMatchNaive) {
  auto tm = make_model(small_config(AttnMode::kFocal));
  expect_matches_naive(tm, TempSpec::native(tm.model->config()), 40);
  TempSpec s = TempSpec::focal(0.3f);
  s.layer_temp[1] = 0.7f;
  s.head_temp[{2, 5}] = 0.05f;
  expect_matches_naive(tm, s, 40);
}

TEST(Forward, SsmaxMatchesNaive) {
  auto tm = make_model(small_config(AttnMode::kStandard));
  TempSpec s;
  s.mode = AttnMode::kSsmax;
  s.ssmax_s = 0.6f;
  expect_matches_naive(tm, s, 37);
}

TEST(Forward, QkNormMatchesNaive) {
  auto tm = make_model(small_config(AttnMode::kStandard, TauMode::kPrefixMean, true));
  ASSERT_TRUE(tm.model->config().qk_norm);
  expect_matches_naive(tm, TempSpec::focal(0.5f), 33);
}

class LearnedTau : public ::testing::TestWithParam<TauMode> {};

TEST_P(LearnedTau, MatchesNaiveIncludingClip) {
  auto tm = make_model(small_config(AttnMode::kLearned, GetParam()));
  const ModelConfig& c = tm.model->config();
  TempSpec s = TempSpec::native(c);
  ASSERT_EQ(s.mode, AttnMode::kLearned);
  expect_matches_naive(tm, s, 50);
  s.tau_scale = 0.5f;
  expect_matches_naive(tm, s, 50);
  // tau stays within the clip bounds (times tau_scale) whatever X.w_tau is.
  RunResult r = run(*tm.model, random_ids(50, c.vocab_size, 3), TempSpec::native(c));
  for (float t : r.obs->tau) {
    EXPECT_GE(t, c.focal.tau_min - 1e-6f);
    EXPECT_LE(t, c.focal.tau_max + 1e-6f);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, LearnedTau,
                         ::testing::Values(TauMode::kSequenceMean, TauMode::kPrefixMean, TauMode::kPerToken),
                         [](const auto& info) { return std::string(tau_mode_name(info.param)); });

TEST(Forward, LearnedTauClipsAtBothBounds) {
  // With a huge bias tau saturates at tau_max; with a hugely negative one at tau_min.
  ModelConfig c = small_config(AttnMode::kLearned, TauMode::kPerToken);
  for (float bias : {1000.0f, -1000.0f}) {
    TestModel tm;
    tm.dir = test::make_temp_dir("clip");
    auto tensors = random_model_tensors(c, 5);
    for (auto& t : tensors)
      if (t.name.find("tau_proj.bias") != std::string::npos) t.data[0] = bias;
    write_model_dir(tm.dir, c, tensors, "F32", "");
    auto m = Model::load(tm.dir);
    RunResult r = run(*m, random_ids(20, c.vocab_size, 9), TempSpec::native(c));
    for (float t : r.obs->tau) EXPECT_FLOAT_EQ(t, bias > 0 ? c.focal.tau_max : c.focal.tau_min);
  }
}

TEST(Forward, TempOneEqualsStandard) {
  auto tm = make_model(small_config(AttnMode::kStandard));
  const auto ids = random_ids(30, tm.model->config().vocab_size, 5);
  RunResult a = run(*tm.model, ids, TempSpec::standard());
  RunResult b = run(*tm.model, ids, TempSpec::focal(1.0f));
  // Bit-identical on any CPU: the same code on the same shapes and threads, and the row multiplier is exactly 1.
  EXPECT_EQ(a.logits, b.logits);
  EXPECT_EQ(a.obs->probs, b.obs->probs);
}

TEST(Forward, PerHeadOverrideChangesOnlyThatHeadInItsLayer) {
  auto tm = make_model(small_config(AttnMode::kStandard));
  const ModelConfig& c = tm.model->config();
  const auto ids = random_ids(30, c.vocab_size, 5);
  TempSpec s = TempSpec::standard();
  s.head_temp[{1, 3}] = 0.3f;
  RunResult a = run(*tm.model, ids, TempSpec::standard());
  RunResult b = run(*tm.model, ids, s);
  const int T = (int)ids.size();
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_heads; ++h) {
      bool same = true;
      for (int i = 0; i < T; ++i)
        for (int j = 0; j <= i; ++j) same &= a.obs->probs[a.obs->at(l, h, i, j)] == b.obs->probs[b.obs->at(l, h, i, j)];
      if (l < 1 || (l == 1 && h != 3)) { EXPECT_TRUE(same) << "layer " << l << " head " << h << " changed"; }
      if (l == 1 && h == 3) { EXPECT_FALSE(same) << "the overridden head did not change"; }
    }
  // The overridden head is sharper: lower mean entropy.
  double ha = 0, hb = 0;
  for (int i = 1; i < T; ++i) {
    ha += a.obs->metric(1, 3, i, kEntropyNats);
    hb += b.obs->metric(1, 3, i, kEntropyNats);
  }
  EXPECT_LT(hb, ha);
}

TEST(Forward, LowTemperatureIsFinite) {
  auto tm = make_model(small_config(AttnMode::kStandard));
  const auto ids = random_ids(64, tm.model->config().vocab_size, 8);
  RunResult r = run(*tm.model, ids, TempSpec::focal(0.01f));
  for (float v : r.logits) ASSERT_TRUE(std::isfinite(v));
  for (float v : r.obs->probs) ASSERT_TRUE(std::isfinite(v));
  for (float v : r.obs->metrics) ASSERT_FALSE(std::isinf(v));
}

TEST(Forward, CausalMaskFutureTokensDoNotChangeEarlierRows) {
  auto tm = make_model(small_config(AttnMode::kFocal));
  const ModelConfig& c = tm.model->config();
  auto ids = random_ids(40, c.vocab_size, 21);
  RunResult a = run(*tm.model, ids, TempSpec::focal(0.4f));
  for (int i = 25; i < 40; ++i) ids[i] = (ids[i] + 7) % c.vocab_size;
  RunResult b = run(*tm.model, ids, TempSpec::focal(0.4f));
  const int V = c.vocab_size;
  // Bit for bit on any CPU: both runs have the same shapes and threads, a GEMM's output row is summed from its own
  // input row alone, and masked keys get probability exactly 0.
  for (int i = 0; i < 25 * V; ++i) ASSERT_EQ(a.logits[i], b.logits[i]) << "row " << i / V;
  bool later_differs = false;
  for (size_t i = 25 * V; i < a.logits.size(); ++i) later_differs |= a.logits[i] != b.logits[i];
  EXPECT_TRUE(later_differs);
}

// KV-cache decoding reproduces the prefill logits: 1e-5 relative (different GEMM shapes reorder fp32 sums).
class KvCache : public ::testing::TestWithParam<int> {};

TEST_P(KvCache, StepwiseEqualsPrefill) {
  const AttnMode mode = GetParam() == 0 ? AttnMode::kFocal : AttnMode::kLearned;
  auto tm = make_model(small_config(mode, TauMode::kPrefixMean, GetParam() == 2));
  const ModelConfig& c = tm.model->config();
  const auto ids = random_ids(70, c.vocab_size, 4);
  const TempSpec spec = TempSpec::native(c);
  RunResult full = run(*tm.model, ids, spec);
  Session s(*tm.model, 70);
  std::vector<float> lg;
  const int V = c.vocab_size;
  ASSERT_TRUE(s.forward(ids.data(), 33, spec, RunOptions{}, nullptr, &lg));  // prefill 33, then one by one
  std::vector<float> got(lg);
  for (int i = 33; i < 70; ++i) {
    ASSERT_TRUE(s.forward(&ids[i], 1, spec, RunOptions{}, nullptr, &lg));
    got.insert(got.end(), lg.begin(), lg.end());
  }
  ASSERT_EQ(got.size(), (size_t)70 * V);
  // 1e-5 of the largest |logit| (the scale of the fp32 rounding; a logit near 0 has no relative error of its own).
  double scale = 0.0;
  for (float v : full.logits) scale = std::max(scale, (double)std::fabs(v));
  test::expect_allclose(got, full.logits, 0.0, 1e-5 * scale, "stepwise logits against the prefill's");
  EXPECT_EQ(s.n_past(), 70);
}

INSTANTIATE_TEST_SUITE_P(Modes, KvCache, ::testing::Values(0, 1, 2));

TEST(Forward, GenerateGreedyIsDeterministicAndMatchesArgmax) {
  auto tm = make_model(small_config(AttnMode::kFocal));
  const ModelConfig& c = tm.model->config();
  const auto prompt = random_ids(12, c.vocab_size, 2);
  SampleOptions so;
  so.stop_at_eos = false;
  Session s1(*tm.model, 40), s2(*tm.model, 40);
  auto g1 = generate(s1, prompt, 10, TempSpec::native(c), so, RunOptions{}, nullptr);
  auto g2 = generate(s2, prompt, 10, TempSpec::native(c), so, RunOptions{}, nullptr);
  ASSERT_EQ(g1.size(), 10u);
  EXPECT_EQ(g1, g2);
  // Each greedy token is the argmax of a full prefill over prompt + tokens so far.
  std::vector<int32_t> seq = prompt;
  for (int32_t tok : g1) {
    RunResult r = run(*tm.model, seq, TempSpec::native(c));
    const float* last = r.logits.data() + (seq.size() - 1) * c.vocab_size;
    EXPECT_EQ(tok, std::max_element(last, last + c.vocab_size) - last);
    seq.push_back(tok);
  }
  // Generation ends at any end token: config.json's eos_token_id list, replaced by generation_config.json's (it
  // stopped at the list's first id only, and never read generation_config.json).
  auto stops_after = [&](const std::string& config_eos, const std::string& gen_config) {
    const std::string dir = test::make_temp_dir("fwd_eos");
    for (const char* f : {"model.safetensors"}) std::filesystem::copy_file(tm.dir + "/" + f, dir + "/" + f);
    std::ifstream in(tm.dir + "/config.json");
    std::string cj((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    cj = std::regex_replace(cj, std::regex("\"eos_token_id\": *[0-9]+"), "\"eos_token_id\": " + config_eos);
    EXPECT_NE(cj.find("\"eos_token_id\": " + config_eos), std::string::npos) << cj;
    std::ofstream(dir + "/config.json") << cj;
    if (!gen_config.empty()) std::ofstream(dir + "/generation_config.json") << gen_config;
    std::unique_ptr<Model> m = Model::load(dir);
    SampleOptions greedy;
    Session se(*m, 40);
    return generate(se, prompt, 10, TempSpec::native(c), greedy, RunOptions{}, nullptr).size();
  };
  // k: the first generated token after the first that is new (a repeat would stop earlier); never: an id not generated.
  size_t k = 1;
  while (k < g1.size() && std::find(g1.begin(), g1.begin() + k, g1[k]) != g1.begin() + k) ++k;
  ASSERT_LT(k, g1.size());
  int never_id = c.vocab_size - 1;
  while (std::find(g1.begin(), g1.end(), never_id) != g1.end()) --never_id;
  const std::string stop = std::to_string(g1[k]), never = std::to_string(never_id);
  EXPECT_EQ(stops_after("[" + never + ", " + stop + "]", ""), k + 1) << "the list's second id";
  EXPECT_EQ(stops_after(never, "{\"eos_token_id\": [" + never + ", " + stop + "]}"), k + 1)
      << "generation_config.json's list";
  EXPECT_EQ(stops_after(stop, "{\"eos_token_id\": " + never + "}"), 10u) << "generation_config.json replaces it";
  so.sample_temp = 1.0f;
  so.seed = 3;
  Session s3(*tm.model, 40), s4(*tm.model, 40);
  EXPECT_EQ(generate(s3, prompt, 8, TempSpec::native(c), so, RunOptions{}, nullptr),
            generate(s4, prompt, 8, TempSpec::native(c), so, RunOptions{}, nullptr));
}

// forward_until in steps of one layer against one forward of the same prefill (the reference): the same layers in
// the same order on the same shapes, so the logits, rows and learned tau agree to 1e-6 of their scale (compared with
// a tolerance all the same, as any two calls). Each layer reaches the observer once, in the call that ran it; then
// the session decodes on as after a forward. A paused session refuses forward, other ids and a layer that ran.
class StepwiseLayers : public ::testing::TestWithParam<int> {};

TEST_P(StepwiseLayers, EqualOneForward) {
  const AttnMode mode = GetParam() == 0 ? AttnMode::kFocal : AttnMode::kLearned;
  auto tm = make_model(small_config(mode, TauMode::kPrefixMean));
  const ModelConfig& c = tm.model->config();
  const int T = 21;
  const auto ids = random_ids(T + 1, c.vocab_size, 5);
  const TempSpec spec = TempSpec::native(c);
  RunResult full = run(*tm.model, std::vector<int32_t>(ids.begin(), ids.begin() + T), spec);
  test::RecordingObserver obs(c.n_layers, c.n_heads, T);
  Session s(*tm.model, T + 1);
  std::vector<float> lg;
  for (int l = 0; l < c.n_layers; ++l) {
    ASSERT_TRUE(s.forward_until(ids.data(), T, spec, RunOptions{}, &obs, l, &lg));
    if (l + 1 < c.n_layers) {
      EXPECT_EQ(s.n_past(), 0) << "paused after layer " << l;
      EXPECT_TRUE(lg.empty()) << "no logits before the last layer";
    }
  }
  EXPECT_EQ(s.n_past(), T);
  double scale = 0.0;
  for (float v : full.logits) scale = std::max(scale, (double)std::fabs(v));
  test::expect_allclose(lg, full.logits, 0.0, 1e-6 * scale, "stepwise-layer logits against one forward's");
  test::expect_allclose(obs.probs, full.obs->probs, 0.0, 1e-6, "stepwise-layer rows against one forward's");
  if (mode == AttnMode::kLearned) test::expect_allclose(obs.tau, full.obs->tau, 0.0, 1e-6, "tau");
  // decode continues from the stepped prefill as from a forward's
  Session one(*tm.model, T + 1);
  std::vector<float> lg1;
  ASSERT_TRUE(one.forward(ids.data(), T, spec, RunOptions{}, nullptr, &lg1));
  ASSERT_TRUE(one.forward(&ids[T], 1, spec, RunOptions{}, nullptr, &lg1));
  ASSERT_TRUE(s.forward(&ids[T], 1, spec, RunOptions{}, nullptr, &lg));
  test::expect_allclose(lg, lg1, 0.0, 1e-6 * scale, "the next token after a stepped prefill");

  Session p(*tm.model, T);
  ASSERT_TRUE(p.forward_until(ids.data(), T, spec, RunOptions{}, nullptr, 0, nullptr));
  EXPECT_THROW(p.forward(ids.data(), T, spec, RunOptions{}, nullptr, nullptr), Error);
  EXPECT_THROW(p.forward_until(ids.data() + 1, T, spec, RunOptions{}, nullptr, 1, nullptr), Error);
  EXPECT_THROW(p.forward_until(ids.data(), T, spec, RunOptions{}, nullptr, 0, nullptr), Error);
  EXPECT_THROW(p.forward_until(ids.data(), T, spec, RunOptions{}, nullptr, c.n_layers, nullptr), Error);
  p.reset();
  EXPECT_TRUE(p.forward(ids.data(), T, spec, RunOptions{}, nullptr, nullptr));
}

INSTANTIATE_TEST_SUITE_P(Modes, StepwiseLayers, ::testing::Values(0, 1));

// A prefill-only session (one layer's KV cache, reused by each layer) against an ordinary one (the reference): the
// same kernels on the same shapes, so logits and rows agree to 1e-6 of their scale; after a reset it prefills again
// alike; a decode step on it throws instead of reading another layer's keys.
TEST(Forward, PrefillOnlySessionEqualsAFullCache) {
  auto tm = make_model(small_config(AttnMode::kLearned, TauMode::kPrefixMean));
  const ModelConfig& c = tm.model->config();
  const int T = 19;
  const auto ids = random_ids(T, c.vocab_size, 8);
  const TempSpec spec = TempSpec::native(c);
  RunResult full = run(*tm.model, ids, spec);
  double scale = 0.0;
  for (float v : full.logits) scale = std::max(scale, (double)std::fabs(v));
  Session s(*tm.model, T, /*prefill_only=*/true);
  for (int pass = 0; pass < 2; ++pass) {
    test::RecordingObserver obs(c.n_layers, c.n_heads, T);
    std::vector<float> lg;
    ASSERT_TRUE(s.forward(ids.data(), T, spec, RunOptions{}, &obs, &lg));
    test::expect_allclose(lg, full.logits, 0.0, 1e-6 * scale, "prefill-only logits against a full cache's");
    test::expect_allclose(obs.probs, full.obs->probs, 0.0, 1e-6, "prefill-only rows against a full cache's");
    EXPECT_THROW(s.forward(ids.data(), 1, spec, RunOptions{}, nullptr, nullptr), Error)
        << "decode on one layer's cache";
    s.reset();
  }
}

class Cancelling : public ForwardObserver {
 public:
  void on_layer(const LayerRecord& r) override { last = r.layer; }
  bool cancelled() const override { return last >= 1; }
  int last = -1;
};

TEST(Forward, ObserverCancelsBetweenLayers) {
  auto tm = make_model(small_config(AttnMode::kStandard));
  const auto ids = random_ids(20, tm.model->config().vocab_size, 1);
  Session s(*tm.model, 20);
  Cancelling obs;
  std::vector<float> lg;
  EXPECT_FALSE(s.forward(ids.data(), 20, TempSpec::standard(), RunOptions{}, &obs, &lg));
  EXPECT_EQ(obs.last, 1);
  EXPECT_EQ(s.n_past(), 0);
}

TEST(Forward, RejectsBadTokensAndOverflow) {
  auto tm = make_model(small_config(AttnMode::kStandard));
  Session s(*tm.model, 8);
  std::vector<int32_t> bad = {1, 9999};
  EXPECT_THROW(s.forward(bad.data(), 2, TempSpec::standard(), RunOptions{}, nullptr, nullptr), Error);
  std::vector<int32_t> many(9, 1);
  EXPECT_THROW(s.forward(many.data(), 9, TempSpec::standard(), RunOptions{}, nullptr, nullptr), Error);
  EXPECT_THROW(s.forward(many.data(), 0, TempSpec::standard(), RunOptions{}, nullptr, nullptr), Error);
}

// The one temperature-spec grammar against the shared table (tests/data/temp_specs.tsv): each valid spec parses,
// validates and prints as its canonical spelling, which parses back to the same spec; each invalid one throws one
// Error with the phrase. Model: learned tau (native = learned), 2 layers, 2 heads.
TEST(TempSpecGrammar, SharedTableParsesValidatesAndRoundTrips) {
  ModelConfig cfg;
  cfg.n_layers = 2;
  cfg.n_heads = 2;
  cfg.focal.mode = AttnMode::kLearned;
  cfg.focal.has_tau = true;
  for (const test::SpecCase& c : test::temp_spec_cases(FOCAL_SOURCE_DIR)) {
    SCOPED_TRACE("spec '" + c.spec + "'");
    try {
      const TempSpec s = TempSpec::parse(c.spec, "--x", &cfg);
      s.validate(cfg);
      if (!c.error.empty()) {
        ADD_FAILURE() << "accepted as " << s.text() << "; expected an error with '" << c.error << "'";
        continue;
      }
      EXPECT_EQ(s.text(), c.canonical);
      EXPECT_EQ(TempSpec::parse(s.text(), "--x", &cfg).to_json(), s.to_json());
    } catch (const Error& e) {
      EXPECT_FALSE(c.error.empty()) << "rejected: " << e.what();
      EXPECT_NE(std::string(e.what()).find(c.error), std::string::npos) << e.what();
    }
  }
}

TEST(TempSpecGrammar, ErrorsNameTheirPlaceAndTellSyntaxFromValues) {
  try {
    TempSpec::parse("native", "--runs");  // no model to take the native setting from
    ADD_FAILURE() << "native parsed without a model";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--runs: ", 0), 0u) << e.what();
    EXPECT_EQ(e.field(), "spec");
  }
  try {
    TempSpec::parse("focal:-0.4", "--temp");  // well formed, not a temperature
    ADD_FAILURE() << "t = -0.4 parsed";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("--temp: ", 0), 0u) << e.what();
    EXPECT_EQ(e.field(), "");
  }
  // text() spells every float so that it reads back exactly (0.1f is not 0.1)
  for (float t : {0.1f, 0.4f, 1.0f / 3.0f, 1e-3f, 123.456f}) {
    TempSpec s = TempSpec::focal(t);
    s.head_temp[{1, 0}] = t * 2.0f;
    const TempSpec back = TempSpec::parse(s.text(), "t");
    EXPECT_EQ(back.focal_temp, t) << s.text();
    EXPECT_EQ((back.head_temp.at({1, 0})), t * 2.0f) << s.text();
  }
}

}  // namespace
}  // namespace focal
