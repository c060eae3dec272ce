// GGUF against independent references (fixtures by tests/gguf/make_fixtures.py, FOCAL_GGUF_FIXTURES):
//  - Quant*: dequantisation of every supported type equals gguf.quants.dequantize (PyPI gguf) on the same bytes;
//  - Converted*: assets/models/standard converted to GGUF (F32, F16, Q8_0, Q4_0) gives the logits of the safetensors
//    model, and its llama vocabulary (sentencepiece built from GGUF) tokenizes like the original tokenizer.model;
//  - SmolLM2*: the real SmolLM2-135M GGUF tokenizes like a `tokenizers` BPE built from its vocabulary and merges,
//    its logits match transformers' LlamaForCausalLM on the same dequantised weights, and greedy generation answers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "focal/calibrate.h"
#include "focal/model.h"
#include "gguf.h"
#include "test_util.h"

namespace focal {
namespace {

using json = nlohmann::json;

std::string fixtures() {
  const char* d = std::getenv("FOCAL_GGUF_FIXTURES");
  if (!d) throw std::runtime_error("FOCAL_GGUF_FIXTURES is not set (ctest runs tests/gguf/make_fixtures.py first)");
  return d;
}

std::vector<char> read_bytes(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read fixture " + p);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

json read_json(const std::string& p) {
  const std::vector<char> b = read_bytes(p);
  return json::parse(b.begin(), b.end());
}

TEST(QuantReference, EveryTypeMatchesGgufPackage) {
  const std::string d = fixtures() + "/quant/";
  const json idx = read_json(d + "index.json");
  ASSERT_EQ(idx.size(), 12u);
  for (const json& e : idx) {
    const std::string name = e["type"];
    const int n = e["n"];
    const std::vector<char> raw = read_bytes(d + name + ".bin");
    const std::vector<char> refb = read_bytes(d + name + ".f32");
    ASSERT_EQ(refb.size(), (size_t)n * 4) << name;
    ASSERT_EQ(raw.size(), (size_t)n / ggml_block_elems(e["id"]) * ggml_block_bytes(e["id"])) << name;
    std::vector<float> ref(n), got(n);
    std::memcpy(ref.data(), refb.data(), refb.size());
    ggml_dequantize(e["id"], reinterpret_cast<const uint8_t*>(raw.data()), got.data(), n);
    // Same fp32 products up to the order of the scale multiplications: 2 ulp of each value.
    for (int i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], ref[i], 2.5e-7 * std::fabs(ref[i]) + 1e-12) << name << " element " << i;
  }
}

std::vector<float> logits_of(const Model& m, const std::vector<int32_t>& ids) {
  Session s(m, (int)ids.size());
  std::vector<float> lg;
  s.forward(ids.data(), (int)ids.size(), TempSpec{}, RunOptions{}, nullptr, &lg);
  return lg;
}

TEST(ConvertedReference, LogitsMatchSafetensorsModel) {
  const std::string src = std::string(FOCAL_SOURCE_DIR) + "/assets/models/standard";
  auto ref_model = Model::load(src);
  std::vector<int32_t> ids;
  ids.reserve(48);
  for (int i = 0; i < 48; ++i) ids.push_back((int32_t)((i * 977 + 13) % ref_model->config().vocab_size));
  const std::vector<float> ref = logits_of(*ref_model, ids);
  // Against transformers on the same dequantised weights (gguf.quants): fp32 sums in another order only, 1e-5 of
  // the largest logit. Against the safetensors original, the quantisation error itself: F32 holds the bf16 weights
  // exactly; bf16 values are exact in fp16 except below fp16's normal range; Q8_0's per-weight error is at most
  // max|block|/254 (~0.4%), Q4_0's max|block|/16 (~6%), compounding over 4 layers (measured 0.01 and 0.2).
  const std::pair<const char*, double> cases[] = {{"F32", 1e-5}, {"F16", 1e-3}, {"Q8_0", 3e-2}, {"Q4_0", 4e-1}};
  for (auto [type, tol] : cases) {
    const std::string path = fixtures() + "/std-" + type + ".gguf";
    auto m = Model::load(path);
    EXPECT_EQ(m->config().n_layers, ref_model->config().n_layers);
    EXPECT_EQ(m->config().d_head, ref_model->config().d_head);
    EXPECT_EQ(m->config().rope_theta, ref_model->config().rope_theta);
    const std::vector<float> got = logits_of(*m, ids);
    ASSERT_EQ(got.size(), ref.size());
    const std::vector<char> hb = read_bytes(path + ".logits.f32");
    ASSERT_EQ(hb.size(), ref.size() * 4);
    std::vector<float> hf(ref.size());
    std::memcpy(hf.data(), hb.data(), hb.size());
    const double err_hf = test::rel_max_err(got.data(), hf.data(), hf.size());
    const double err = test::rel_max_err(got.data(), ref.data(), ref.size());
    std::printf(
        "[ info ] std-%s.gguf: max |logit diff| / max |logit| = %.3g vs transformers on the dequantised "
        "weights, %.3g vs the safetensors model (tolerance %.3g)\n",
        type, err_hf, err, tol);
    EXPECT_LT(err_hf, 1e-5) << type;
    EXPECT_LT(err, tol) << type;
  }
}

TEST(ConvertedReference, LlamaVocabularyTokenizesLikeTokenizerModel) {
  const std::string src = std::string(FOCAL_SOURCE_DIR) + "/assets/models/standard";
  auto ref_model = Model::load(src);
  auto m = Model::load(fixtures() + "/std-F32.gguf");
  ASSERT_NE(m->tokenizer(), nullptr);
  EXPECT_EQ(m->tokenizer()->vocab_size(), ref_model->tokenizer()->vocab_size());
  EXPECT_EQ(m->tokenizer()->bos_id(), ref_model->tokenizer()->bos_id());
  EXPECT_EQ(m->tokenizer()->eos_id(), ref_model->tokenizer()->eos_id());
  // Single-spaced text without newlines: GGUF stores no normaliser (the bundled model's nmt_nfkc turns "\n" into a
  // space and folds NFKC forms; llama.cpp does neither), so those are out of scope here.
  for (const char* s : {"In the beginning God created the heaven and the earth.", "Sherlock Holmes took his pipe",
                        "Call me Ishmael. Some years ago", "numbers 1234 and 56", "caf\xC3\xA9 na\xC3\xAFve",
                        "\xE2\x9D\xA4 emoji \xF0\x9F\x98\x80"}) {
    EXPECT_EQ(m->tokenizer()->encode(s, true), ref_model->tokenizer()->encode(s, true)) << s;
    EXPECT_EQ(m->tokenizer()->decode(m->tokenizer()->encode(s, false)), s);
  }
}

// ---- SmolLM2-135M (fixtures in smollm/) ----

std::unique_ptr<Model> smollm() {
  const char* p = std::getenv("FOCAL_SMOLLM2_GGUF");
  if (!p) throw std::runtime_error("FOCAL_SMOLLM2_GGUF is not set (ctest runs scripts/fetch-smollm2.sh first)");
  return Model::load(p);
}

TEST(SmolLM2Reference, TokenizationMatchesTokenizers) {
  auto m = smollm();
  const json cases = read_json(fixtures() + "/smollm/tokenize.json")["cases"];
  ASSERT_GE(cases.size(), 20u);
  for (const json& c : cases) {
    const std::string text = c["text"];
    const std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(m->tokenizer()->encode(text, false), want) << "text: " << text;
    EXPECT_EQ(m->tokenizer()->decode(want), text);
  }
}

// focal calibrate's data is tokenized as one text, as capture and Python tokenize it: it was cut into ~2 kB pieces
// after a "\n\n", which SmolLM2's byte-level BPE spells as one token at a piece's end and as two inside the text
// (before a word): the held-out loss was of a token stream no other command sees.
TEST(SmolLM2Reference, CalibrationDataIsTokenizedAsOneText) {
  auto m = smollm();
  std::string text;
  for (int p = 0; p < 24; ++p) {
    for (int w = 0; w < 40; ++w) text += w ? " word" + std::to_string((p * 7 + w) % 13) : "Paragraph";
    text += ".\n\n";
  }
  const std::string path = test::make_temp_dir("calib_tokens") + "/data.txt";
  std::ofstream(path) << text;
  const std::vector<int32_t> want = m->tokenizer()->encode(text, m->config().add_bos);
  EXPECT_EQ(focal::load_calib_tokens(*m, path), want) << "tokens: " << want.size();
}

TEST(SmolLM2Reference, LogitsMatchTransformers) {
  auto m = smollm();
  const json r = read_json(fixtures() + "/smollm/reference.json");
  const std::vector<int32_t> ids = r["logits_ids"].get<std::vector<int32_t>>();
  EXPECT_EQ(m->tokenizer()->encode(r["logits_prompt"].get<std::string>(), false), ids);
  const std::vector<char> b = read_bytes(fixtures() + "/smollm/logits.f32");
  std::vector<float> ref(b.size() / 4);
  std::memcpy(ref.data(), b.data(), b.size());
  const std::vector<float> got = logits_of(*m, ids);
  ASSERT_EQ(got.size(), ref.size());
  // Same fp32 weights; 30 layers of differently ordered fp32 sums (OpenBLAS vs torch) stay within 1e-4 of the
  // largest logit (measured ~1e-5).
  const double err = test::rel_max_err(got.data(), ref.data(), ref.size());
  std::printf("[ info ] SmolLM2 logits: max |diff| / max |logit| = %.3g\n", err);
  EXPECT_LT(err, 1e-4);
  // The answer the prompt sets up: " Rome" is the top next token of the last row in both.
  const int V = r["vocab"];
  const float* last = got.data() + (ids.size() - 1) * V;
  const int top = (int)(std::max_element(last, last + V) - last);
  EXPECT_EQ(m->tokenizer()->display(top), " Rome");
}

TEST(SmolLM2Reference, GreedyGenerationAnswers) {
  auto m = smollm();
  const json r = read_json(fixtures() + "/smollm/reference.json");
  const std::vector<int32_t> prompt = m->tokenizer()->encode(r["greedy_prompt"].get<std::string>(), false);
  EXPECT_EQ(prompt, r["greedy_prompt_ids"].get<std::vector<int32_t>>());
  Session s(*m, 64);
  SampleOptions so;
  so.stop_at_eos = false;
  RunOptions ro;
  ro.all_logits = false;
  std::vector<int32_t> out = generate(s, prompt, (int)r["greedy_ids"].size(), TempSpec{}, so, ro, nullptr);
  EXPECT_EQ(out, r["greedy_ids"].get<std::vector<int32_t>>());
  const std::string text = m->tokenizer()->decode(out);
  std::printf("[ info ] SmolLM2 greedy: %s\n", text.c_str());
  EXPECT_THAT(text, ::testing::HasSubstr("Paris"));
}

}  // namespace
}  // namespace focal
