// Conformance with Hugging Face transformers 4.47.1 (eager attention): logits and attention probabilities of
// random-initialised LlamaForCausalLM models, standard and with focal t, must match within 1e-5 relative (max abs
// difference over the tensor divided by the tensor's max magnitude). Fixtures come from tests/hf/make_fixtures.py,
// run by ctest before this test; FOCAL_HF_FIXTURES names their directory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <nlohmann/json.hpp>

#include "focal/capture.h"
#include "focal/error.h"
#include "focal/metrics.h"
#include "focal/model.h"
#include "safetensors.h"
#include "test_util.h"

namespace focal {
namespace {

constexpr double kRelTol = 1e-5;

std::string fixtures_dir() {
  const char* d = std::getenv("FOCAL_HF_FIXTURES");
  return d ? d : "";
}

std::vector<nlohmann::json> fixture_index() {
  std::ifstream f(fixtures_dir() + "/index.json");
  if (!f) return {};
  nlohmann::json j = nlohmann::json::parse(f);
  return std::vector<nlohmann::json>(j.begin(), j.end());
}

class HfConformance : public ::testing::TestWithParam<std::string> {};

void check_run(const Model& model, const SafetensorsFile& ref, const std::vector<int32_t>& ids, const TempSpec& spec,
               const std::string& logits_key, const std::string& attn_prefix, const std::vector<int>& attn_layers) {
  const ModelConfig& c = model.config();
  const int T = (int)ids.size();
  test::RecordingObserver obs(c.n_layers, c.n_heads, T);
  Session s(model, T);
  std::vector<float> logits;
  ASSERT_TRUE(s.forward(ids.data(), T, spec, RunOptions{}, &obs, &logits));
  const auto& lt = ref.tensors().at(logits_key);
  const std::vector<float> ref_logits = tensor_to_f32(lt, ref.path());
  ASSERT_EQ(ref_logits.size(), logits.size());
  const double e_logits = test::rel_max_err(logits.data(), ref_logits.data(), logits.size());
  EXPECT_LE(e_logits, kRelTol) << logits_key;
  double e_attn = 0.0;
  for (int l : attn_layers) {
    const std::string key = attn_prefix + std::to_string(l);
    const std::vector<float> ref_attn = tensor_to_f32(ref.tensors().at(key), ref.path());  // [H, T, T]
    ASSERT_EQ(ref_attn.size(), (size_t)c.n_heads * T * T);
    const float* mine = obs.probs.data() + obs.at(l, 0, 0, 0);
    const double e = test::rel_max_err(mine, ref_attn.data(), ref_attn.size());
    EXPECT_LE(e, kRelTol) << key;
    e_attn = std::max(e_attn, e);
  }
  std::printf("  %-9s T=%-5d max relative error: logits %.2e, attention %.2e (tolerance %.0e)\n", logits_key.c_str(), T,
              e_logits, e_attn, kRelTol);
}

TEST_P(HfConformance, LogitsAndAttentionMatchTransformers) {
  const std::string dir = fixtures_dir() + "/" + GetParam();
  auto model = Model::load(dir);
  SafetensorsFile ref(dir + "/reference.safetensors");
  const std::vector<float> ids_f = tensor_to_f32(ref.tensors().at("input_ids"), ref.path());
  std::vector<int32_t> ids(ids_f.begin(), ids_f.end());
  const float t = tensor_to_f32(ref.tensors().at("focal_temp"), ref.path())[0];
  std::vector<int> layers;
  for (auto& e : fixture_index())
    if (e["name"] == GetParam()) {
      for (auto& l : e["attn_layers"]) layers.push_back(l.get<int>());
    }
  ASSERT_FALSE(layers.empty());
  check_run(*model, ref, ids, TempSpec::standard(), "logits", "attn.", layers);
  check_run(*model, ref, ids, TempSpec::focal(t), "logits_t", "attn_t.", layers);
}

std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (auto& e : fixture_index()) names.push_back(e["name"].get<std::string>());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfConformance, ::testing::ValuesIn(fixture_names()),
                         [](const auto& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(HfConformance);

// Preview (re-tempering a capture's stored raw logits, what the app shows before propagating) equals propagation for
// the first changed layer of a Gemma 2 model: focal t divides the raw logit, then the soft-cap (50 -> here 5) applies,
// and keys outside a sliding window stay at exactly 0. Both go through ops::attention_row; tolerance 1e-6 absolute
// (the same fp32 function on the same inputs: the stored raw logits equal the propagated run's).
TEST(HfArchitectures, Gemma2PreviewOfChangedLayerEqualsPropagation) {
  const std::string dir = fixtures_dir() + "/gemma2";
  auto model = Model::load(dir);
  const ModelConfig& c = model->config();
  ASSERT_GT(c.arch.attn_softcap, 0.0f);
  ASSERT_GT(c.arch.sliding_window, 0);
  std::vector<int32_t> ids(60);
  for (int i = 0; i < (int)ids.size(); ++i) ids[i] = (i * 37 + 11) % c.vocab_size;
  const int T = (int)ids.size();
  for (int layer : {0, 1}) {  // layer 0 has the window, layer 1 not
    SCOPED_TRACE("layer " + std::to_string(layer));
    CaptureRequest req;
    req.layers = {layer};
    const TempSpec base = TempSpec::standard();
    TempSpec changed = base;
    changed.layer_temp[layer] = 0.3f;  // the first changed layer: its inputs are those of the base run
    const RunCapture a = capture_run(*model, ids, base, req, "a");
    const RunCapture b = capture_run(*model, ids, changed, req, "b");
    ASSERT_EQ(a.scores.size(), b.scores.size());
    for (size_t i = 0; i < a.scores.size(); ++i) ASSERT_EQ(a.scores[i], b.scores[i]) << "raw logits differ at " << i;
    double max_err = 0.0, moved = 0.0;
    int outside = 0;
    for (int h = 0; h < c.n_heads; ++h)
      for (int q = 0; q < T; ++q) {
        const std::ptrdiff_t off = find_stored_row(a, layer, h, q, T);
        ASSERT_GE(off, 0);
        std::vector<float> p(T, -1.0f), m(kNumRowMetrics);
        const float mult = b.row_scale[((size_t)layer * c.n_heads + h) * T + q];
        const int lo = window_first_key(c, layer, q + 1);
        attention_row(&a.scores[off], q + 1, mult, c.arch.attn_softcap, lo, p.data(), m.data());
        for (int j = 0; j <= q; ++j) {
          max_err = std::max(max_err, (double)std::fabs(p[j] - b.probs[off + j]));
          moved = std::max(moved, (double)std::fabs(a.probs[off + j] - b.probs[off + j]));
          if (j < lo) {
            ++outside;
            EXPECT_EQ(b.probs[off + j], 0.0f);
            EXPECT_EQ(p[j], 0.0f);
          }
        }
        // Metrics count only the visible keys: entropy normalised by ln(visible count).
        const float* mb = &b.metrics[(((size_t)layer * c.n_heads + h) * T + q) * kNumRowMetrics];
        if (q + 1 - lo > 1) { EXPECT_NEAR(mb[kEntropyNorm], mb[kEntropyNats] / std::log((double)(q + 1 - lo)), 1e-5); }
        EXPECT_NEAR(m[kEntropyNats], mb[kEntropyNats], 1e-5);
      }
    EXPECT_LE(max_err, 1e-6);
    EXPECT_GT(moved, 1e-2) << "the temperature change must move the rows (else the test proves nothing)";
    EXPECT_EQ(outside > 0, layer_window(c, layer) > 0);
  }
}

// The same models converted by scripts/hf_to_gguf.py (llama.cpp's architecture and tensor names: qwen2, gemma2,
// phi3, olmo2, gpt2) load and match transformers like the directories: logits and every attention row within 1e-5,
// standard and focal t.
class GgufConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufConformance, ConvertedModelMatchesTransformers) {
  const std::string dir = fixtures_dir() + "/" + GetParam();
  auto model = Model::load(dir + ".gguf");
  SafetensorsFile ref(dir + "/reference.safetensors");
  const std::vector<float> ids_f = tensor_to_f32(ref.tensors().at("input_ids"), ref.path());
  std::vector<int32_t> ids(ids_f.begin(), ids_f.end());
  const float t = tensor_to_f32(ref.tensors().at("focal_temp"), ref.path())[0];
  std::vector<int> layers((size_t)model->config().n_layers);
  std::iota(layers.begin(), layers.end(), 0);
  check_run(*model, ref, ids, TempSpec::standard(), "logits", "attn.", layers);
  check_run(*model, ref, ids, TempSpec::focal(t), "logits_t", "attn_t.", layers);
}

INSTANTIATE_TEST_SUITE_P(Architectures, GgufConformance,
                         ::testing::Values("llama_rope_linear", "llama_rope_yarn", "llama3_rope_mlp_bias", "qwen2",
                                           "gemma2", "phi3_longrope", "olmo2", "gpt2"),
                         [](const auto& info) { return info.param; });

// `focal info` / the app describe a model's architecture and attention features from the config (arch_summary).
TEST(HfArchitectures, SummaryNamesArchitectureAndAttentionFeatures) {
  auto line = [](const ModelConfig& c, const std::string& label) {
    for (const auto& [l, t] : arch_summary(c))
      if (l == label) return t;
    return std::string("(missing)");
  };
  auto gemma = Model::load(fixtures_dir() + "/gemma2");
  EXPECT_EQ(line(gemma->config(), "architecture"), "gemma2");
  EXPECT_EQ(line(gemma->config(), "softcap"), "attention 5, final 3");
  EXPECT_EQ(line(gemma->config(), "logit_scale"), "1/sqrt(24) (query_pre_attn_scalar)");
  EXPECT_EQ(line(gemma->config(), "window"), "24 keys, on every 2 layers from layer 0 (0, 2, ...)");
  auto mistral = Model::load(fixtures_dir() + "/mistral_window");
  EXPECT_EQ(line(mistral->config(), "window"), "24 keys, every layer");
  auto yarn = Model::load(fixtures_dir() + "/llama_rope_yarn");
  EXPECT_THAT(line(yarn->config(), "positions"), ::testing::HasSubstr("scaling yarn factor 4"));
  auto gpt2 = Model::load(fixtures_dir() + "/gpt2");
  EXPECT_EQ(line(gpt2->config(), "positions"), "learned absolute (128)");
  EXPECT_EQ(line(gpt2->config(), "norms"), "LayerNorm (with bias): pre-attention, pre-MLP");
}

// Past the trained context (issue 33). The fixtures llama_dynamic_3x (dynamic NTK, factor 2) and
// llama_default_past_ctx (default RoPE) have max_position_embeddings 32 and T = 96: their prefill is checked by
// HfConformance above within 1e-5. Here the KV-cache decode: transformers' greedy generate() from the first P ids,
// N steps past the context, each step's raw logits. Ours: one Session, the prompt prefilled, then one token a step
// (each step's rotary frequencies for its own length, as transformers recomputes them for max(position_ids) + 1).
// Same tokens, every step's logits within 1e-5 relative.
class HfPastContext : public ::testing::TestWithParam<std::string> {};

TEST_P(HfPastContext, GreedyGenerateMatchesTransformers) {
  const std::string dir = fixtures_dir() + "/" + GetParam();
  auto model = Model::load(dir);
  const ModelConfig& c = model->config();
  SafetensorsFile ref(dir + "/reference.safetensors");
  const std::vector<float> ids_f = tensor_to_f32(ref.tensors().at("input_ids"), ref.path());
  const int P = (int)tensor_to_f32(ref.tensors().at("gen_prompt_len"), ref.path())[0];
  const std::vector<float> ref_tokens = tensor_to_f32(ref.tensors().at("gen_tokens"), ref.path());
  const std::vector<float> ref_logits = tensor_to_f32(ref.tensors().at("gen_logits"), ref.path());
  const int N = (int)ref_tokens.size(), V = c.vocab_size;
  ASSERT_EQ(ref_logits.size(), (size_t)N * V);
  ASSERT_GT(P + N, c.max_positions) << "the generation must run past the trained context";
  EXPECT_THAT(context_length_warning(c, P + N), ::testing::HasSubstr("past the model's trained context of 32"));
  EXPECT_EQ(context_length_warning(c, c.max_positions), "");

  std::vector<int32_t> prompt(ids_f.begin(), ids_f.begin() + P);
  Session s(*model, P + N);
  std::vector<float> logits;
  ASSERT_TRUE(s.forward(prompt.data(), P, TempSpec::standard(), RunOptions{}, nullptr, &logits));
  double worst = 0.0;
  for (int step = 0; step < N; ++step) {
    const float* row = logits.data() + logits.size() - V;  // the last position's logits
    const double e = test::rel_max_err(row, ref_logits.data() + (size_t)step * V, V);
    EXPECT_LE(e, kRelTol) << "step " << step << " (position " << P + step << ")";
    worst = std::max(worst, e);
    const int32_t next = (int32_t)(std::max_element(row, row + V) - row);
    ASSERT_EQ(next, (int32_t)ref_tokens[step]) << "step " << step;
    ASSERT_TRUE(s.forward(&next, 1, TempSpec::standard(), RunOptions{}, nullptr, &logits));
  }
  std::printf("  generate P=%d N=%d (context %d): max relative error of the step logits %.2e (tolerance %.0e)\n", P, N,
              c.max_positions, worst, kRelTol);

  // Under dynamic NTK the rule matters: the cached keys keep the frequencies of the step that stored them, so the
  // last step's logits differ from one forward of the whole sequence (whose frequencies are those of P + N). Default
  // RoPE has one set of frequencies: the two agree.
  std::vector<int32_t> all(prompt);
  for (float t : ref_tokens) all.push_back((int32_t)t);
  all.pop_back();  // the last step's input is the last but one generated token
  Session whole(*model, (int)all.size());
  std::vector<float> full;
  ASSERT_TRUE(whole.forward(all.data(), (int)all.size(), TempSpec::standard(), RunOptions{}, nullptr, &full));
  const double diff = test::rel_max_err(full.data() + full.size() - V, ref_logits.data() + (size_t)(N - 1) * V, V);
  if (c.arch.rope.type == RopeType::kDynamic)
    EXPECT_GT(diff, 1e-3) << "dynamic NTK: decode and a whole-sequence forward should differ";
  else
    EXPECT_LE(diff, kRelTol);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfPastContext, ::testing::Values("llama_dynamic_3x", "llama_default_past_ctx"),
                         [](const auto& info) { return info.param; });

// Phi-3's longrope across original_max_position_embeddings (32): transformers' generate() drops the KV cache when
// the sequence first passes it and runs the whole sequence again with the long factors; focal::generate does the
// same, so greedy decoding from 20 prompt tokens gives transformers' 24 tokens (with the short-factor keys kept,
// they parted at the 9th token past the crossing in a QA run).
TEST(HfPastContext, Phi3LongropeGenerateRerunsPastTheOriginalContext) {
  const std::string dir = fixtures_dir() + "/phi3_longrope";
  auto model = Model::load(dir);
  SafetensorsFile ref(dir + "/reference.safetensors");
  const std::vector<float> ids_f = tensor_to_f32(ref.tensors().at("input_ids"), ref.path());
  const int P = (int)tensor_to_f32(ref.tensors().at("gen_prompt_len"), ref.path())[0];
  const std::vector<float> ref_tokens = tensor_to_f32(ref.tensors().at("gen_tokens"), ref.path());
  const int N = (int)ref_tokens.size();
  ASSERT_LT(P, 32);
  ASSERT_GT(P + N, 33) << "the generation must cross original_max_position_embeddings";
  const std::vector<int32_t> prompt(ids_f.begin(), ids_f.begin() + P);
  Session s(*model, P + N);
  SampleOptions greedy;
  greedy.stop_at_eos = false;
  const std::vector<int32_t> got = generate(s, prompt, N, TempSpec::standard(), greedy, RunOptions{}, nullptr);
  ASSERT_EQ(got.size(), (size_t)N);
  for (int i = 0; i < N; ++i)
    EXPECT_EQ(got[i], (int32_t)ref_tokens[i]) << "token " << i << " (position " << P + i << ")";
}

// GPT-2's positions are a learned table: past it, refused with the reason; a rope_scaling override refused by name.
TEST(HfPastContext, LearnedPositionsRefuse) {
  const std::string dir = fixtures_dir() + "/gpt2";
  auto gpt2 = Model::load(dir);
  const ModelConfig& c = gpt2->config();
  EXPECT_EQ(context_length_warning(c, c.max_positions), "");
  try {
    (void)context_length_warning(c, c.max_positions + 1);
    ADD_FAILURE() << "no error past GPT-2's position table";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("learned absolute positions, a table of 128 rows"));
  }
  CaptureRequest req;
  EXPECT_THROW(validate_capture_request(c, c.max_positions + 1, req, 1), Error);
  LoadOptions opt;
  opt.rope_scaling = "dynamic:2";
  try {
    (void)Model::load(dir, Device::kCpu, opt);
    ADD_FAILURE() << "a rope_scaling override on GPT-2 loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.field(), "rope_scaling");
    EXPECT_THAT(e.what(), ::testing::HasSubstr("rope_scaling override 'dynamic:2': gpt2 has learned absolute"));
  }
}

// The override on a rotary model acts as the same rope_scaling in config.json: default RoPE overridden with
// dynamic:2 gives the dynamic fixture's frequencies at every length.
TEST(HfPastContext, RopeOverrideEqualsConfig) {
  auto dyn = Model::load(fixtures_dir() + "/llama_dynamic_3x");
  ModelConfig c = dyn->config();
  c.arch.rope = RopeScaling{};
  apply_rope_override(c, "dynamic:2");
  for (int len : {10, 32, 33, 96, 1000}) {
    float a = 0.0f, b = 0.0f;
    EXPECT_EQ(rope_inv_freq(c, len, &a), rope_inv_freq(dyn->config(), len, &b)) << len;
  }
  for (const char* bad : {"dynamic", "dynamic:x", "dynamic:0.5", "ntk:2", "linear:-1"})
    EXPECT_THROW(apply_rope_override(c, bad), Error) << bad;
}

TEST(HfConformanceSetup, FixturesPresent) {
  // The conformance tier must not pass silently: ctest generates the fixtures first; if they are missing this fails.
  ASSERT_FALSE(fixtures_dir().empty()) << "FOCAL_HF_FIXTURES is not set";
  ASSERT_FALSE(fixture_names().empty()) << "no fixtures in " << fixtures_dir() << " (run tests/hf/make_fixtures.py)";
}

}  // namespace
}  // namespace focal
