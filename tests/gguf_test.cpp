// GGUF loading without external references: dequantisation of hand-made blocks (values worked out by hand from the
// block layouts), the RoPE row un-permute, a tiny llama GGUF written by tests/gguf_writer.h loading and running,
// every bad input failing with one clear Error, and the byte-level BPE tokenizer on a hand-made vocabulary.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <climits>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "focal/capture.h"
#include "focal/error.h"
#include "focal/model.h"
#include "gguf.h"
#include "gguf_model.h"
#include "gguf_writer.h"
#include "test_util.h"
#include "tokenizer_internal.h"

namespace focal {
namespace {

using test::GgufBuilder;
using test::tiny_llama_gguf;
using test::write_file;
using ::testing::HasSubstr;

void put_f16(std::vector<uint8_t>* b, uint16_t h) {
  b->push_back((uint8_t)(h & 0xFF));
  b->push_back((uint8_t)(h >> 8));
}

// ---- dequantisation of hand-made blocks ----

TEST(GgufDequant, Q4_0) {
  std::vector<uint8_t> b;
  put_f16(&b, 0x3800);  // d = 0.5
  for (int j = 0; j < 16; ++j) b.push_back((uint8_t)(j | ((15 - j) << 4)));
  float y[32];
  ggml_dequantize(kGgmlQ4_0, b.data(), y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 0.5f) << j;
  }
}

TEST(GgufDequant, Q4_1) {
  std::vector<uint8_t> b;
  put_f16(&b, 0x3400);  // d = 0.25
  put_f16(&b, 0xBC00);  // m = -1
  for (int j = 0; j < 16; ++j) b.push_back((uint8_t)(j | ((15 - j) << 4)));
  float y[32];
  ggml_dequantize(kGgmlQ4_1, b.data(), y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.25f - 1.0f) << j;
    EXPECT_EQ(y[j + 16], (15 - j) * 0.25f - 1.0f) << j;
  }
}

TEST(GgufDequant, Q5_0AndQ5_1HighBits) {
  // qh bit j is the 5th bit of element j (j < 16 from the low nibbles, j >= 16 from the high nibbles).
  const uint32_t qh = 0xA5A50F0Fu;
  for (bool with_min : {false, true}) {
    std::vector<uint8_t> b;
    put_f16(&b, 0x3C00);                // d = 1
    if (with_min) put_f16(&b, 0x4000);  // m = 2
    for (int k = 0; k < 4; ++k) b.push_back((uint8_t)(qh >> (8 * k)));
    for (int j = 0; j < 16; ++j) b.push_back((uint8_t)((j & 0xF) | ((15 - j) << 4)));
    float y[32];
    ggml_dequantize(with_min ? kGgmlQ5_1 : kGgmlQ5_0, b.data(), y, 32);
    for (int j = 0; j < 16; ++j) {
      const int q0 = j | (int)(((qh >> j) & 1) << 4), q1 = (15 - j) | (int)(((qh >> (j + 16)) & 1) << 4);
      EXPECT_EQ(y[j], with_min ? q0 + 2.0f : q0 - 16.0f) << j;
      EXPECT_EQ(y[j + 16], with_min ? q1 + 2.0f : q1 - 16.0f) << j;
    }
  }
}

TEST(GgufDequant, Q8_0) {
  std::vector<uint8_t> b;
  put_f16(&b, 0x4000);  // d = 2
  for (int j = 0; j < 32; ++j) b.push_back((uint8_t)(int8_t)(j - 16));
  float y[32];
  ggml_dequantize(kGgmlQ8_0, b.data(), y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], 2.0f * (j - 16)) << j;
}

TEST(GgufDequant, Q6_KConstantBlock) {
  // All 6-bit quants 33 (low nibble 1, high bits 2), all scales 3, d = 0.5: every value 0.5 * 3 * (33 - 32) = 1.5.
  std::vector<uint8_t> b(210, 0);
  for (int i = 0; i < 128; ++i) b[i] = 0x11;
  for (int i = 128; i < 192; ++i) b[i] = 0xAA;  // 2 in every 2-bit field
  for (int i = 192; i < 208; ++i) b[i] = 3;
  b[208] = 0x00;
  b[209] = 0x38;  // 0.5
  std::vector<float> y(256);
  ggml_dequantize(kGgmlQ6_K, b.data(), y.data(), 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], 1.5f) << i;
}

TEST(GgufDequant, Q4_KFirstSubBlocks) {
  // Sub-block 0: scale 2, min 1; sub-block 1: scale 3, min 0 (6-bit fields j < 4 in bytes j and j + 4).
  // d = 1, dmin = 0.5; quants: low nibbles 5 (sub-block 0), high nibbles 7 (sub-block 1).
  std::vector<uint8_t> b(144, 0);
  b[0] = 0x00;
  b[1] = 0x3C;  // d = 1
  b[2] = 0x00;
  b[3] = 0x38;  // dmin = 0.5
  b[4 + 0] = 2;
  b[4 + 4] = 1;
  b[4 + 1] = 3;
  b[4 + 5] = 0;
  for (int l = 0; l < 32; ++l) b[16 + l] = 0x75;
  std::vector<float> y(256);
  ggml_dequantize(kGgmlQ4_K, b.data(), y.data(), 256);
  for (int l = 0; l < 32; ++l) {
    EXPECT_EQ(y[l], 1.0f * 2 * 5 - 0.5f * 1) << l;
    EXPECT_EQ(y[32 + l], 1.0f * 3 * 7) << l;
  }
  for (int l = 64; l < 256; ++l) EXPECT_EQ(y[l], 0.0f) << l;  // zero scales and mins elsewhere
}

TEST(GgufDequant, TypeTable) {
  EXPECT_EQ(ggml_type_name(3), "Q4_1 (type 3)");
  EXPECT_EQ(ggml_type_name(17), "IQ2_XS (type 17)");
  EXPECT_EQ(ggml_type_name(999), "unknown type 999");
  for (uint32_t t : {0u, 1u, 2u, 3u, 6u, 7u, 8u, 10u, 11u, 12u, 13u, 14u, 30u})
    EXPECT_TRUE(ggml_type_supported(t)) << t;
  for (uint32_t t : {4u, 5u, 9u, 15u, 16u, 17u, 20u, 23u, 24u, 29u, 34u, 99u})
    EXPECT_FALSE(ggml_type_supported(t)) << t;
}

TEST(GgufRope, UnpermuteRows) {
  // One head of d_head 4, one column: GGUF rows [a0, b0, a1, b1] hold HF rows [a0, a1, b0, b1].
  float w[8] = {10, 20, 11, 21, /*head 1*/ 30, 40, 31, 41};
  unpermute_rope_rows(w, 2, 4, 1);
  const float want[8] = {10, 11, 20, 21, 30, 31, 40, 41};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(w[i], want[i]) << i;
}

// ---- a tiny llama GGUF ----

class GgufFileTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test::make_temp_dir("gguf"); }
  void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }
  std::string write(const std::string& name, const std::string& bytes) {
    std::string p = dir_ + "/" + name;
    write_file(p, bytes);
    return p;
  }
  std::string load_error(const std::string& path) {
    try {
      Model::load(path);
    } catch (const Error& e) { return e.what(); }
    return "(no error)";
  }
  std::string dir_;
};

TEST_F(GgufFileTest, TinyModelLoadsAndRuns) {
  const std::string p = write("tiny.gguf", tiny_llama_gguf().bytes());
  auto m = Model::load(p);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.n_heads, 2);
  EXPECT_EQ(c.n_kv_heads, 1);
  EXPECT_EQ(c.d_head, 32);
  EXPECT_EQ(c.intermediate, 96);
  EXPECT_EQ(c.vocab_size, 300);
  EXPECT_EQ(c.max_positions, 1024);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.bos_id, 259);
  EXPECT_FALSE(c.add_bos);  // gpt2 vocabularies default to no BOS, as llama.cpp does
  EXPECT_NE(m->weights_checksum(), 0u);
  ASSERT_NE(m->tokenizer(), nullptr);
  EXPECT_EQ(m->tokenizer()->vocab_size(), 300);
  Session s(*m, 16);
  std::vector<float> logits;
  const std::vector<int32_t> ids = m->tokenizer()->encode("the the", false);
  ASSERT_TRUE(s.forward(ids.data(), (int)ids.size(), TempSpec{}, RunOptions{}, nullptr, &logits));
  ASSERT_EQ(logits.size(), ids.size() * 300);
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST_F(GgufFileTest, CaptureTopkAndNllFromLogitBlocks) {
  // A capture takes the logits 256 rows at a time (ForwardObserver::on_logits); T = 600 spans three blocks. The
  // reference: all logits of one forward, softmax and NLL in double.
  auto m = Model::load(write("tiny.gguf", tiny_llama_gguf().bytes()));
  const int T = 600, V = m->config().vocab_size, K = 5;
  std::vector<int32_t> ids(T);
  for (int i = 0; i < T; ++i) ids[i] = (int32_t)((i * 37 + 11) % V);
  CaptureRequest req;
  req.store_probs = req.store_scores = false;
  req.topk_tokens = K;
  const RunCapture run = capture_run(*m, ids, TempSpec{}, req, "standard");
  Session s(*m, T);
  std::vector<float> lg;
  ASSERT_TRUE(s.forward(ids.data(), T, TempSpec{}, RunOptions{}, nullptr, &lg));
  for (int i = 0; i < T; ++i) {
    const float* r = lg.data() + (size_t)i * V;
    double mx = r[0], z = 0.0;
    for (int j = 0; j < V; ++j) mx = std::max(mx, (double)r[j]);
    for (int j = 0; j < V; ++j) z += std::exp((double)r[j] - mx);
    const int top = (int)(std::max_element(r, r + V) - r);
    ASSERT_EQ(run.topk_ids[(size_t)i * K], top) << i;
    ASSERT_NEAR(run.topk_probs[(size_t)i * K], std::exp(r[top] - mx) / z, 1e-5) << i;
    if (i + 1 < T) { ASSERT_NEAR(run.token_nll[i], std::log(z) + mx - r[ids[i + 1]], 1e-4) << i; }
  }
  EXPECT_TRUE(std::isnan(run.token_nll[T - 1]));
}

TEST_F(GgufFileTest, DetectedByMagicWithoutExtension) {
  const std::string p = write("model.bin", tiny_llama_gguf().bytes());
  EXPECT_TRUE(is_gguf_path(p));
  EXPECT_EQ(Model::load(p)->config().n_layers, 2);
}

TEST_F(GgufFileTest, Version2Loads) {
  GgufBuilder b = tiny_llama_gguf();
  b.version = 2;
  EXPECT_EQ(Model::load(write("v2.gguf", b.bytes()))->config().n_layers, 2);
}

TEST_F(GgufFileTest, WrongMagic) {
  std::string bytes = tiny_llama_gguf().bytes();
  bytes[3] = 'X';
  const std::string p = write("bad.gguf", bytes);
  EXPECT_EQ(load_error(p), "'" + p + "' is not a GGUF file: it starts with 'GGUX', a GGUF file starts with 'GGUF'");
}

TEST_F(GgufFileTest, UnsupportedVersion) {
  for (uint32_t v : {1u, 4u}) {
    GgufBuilder b = tiny_llama_gguf();
    b.version = v;
    const std::string p = write("v.gguf", b.bytes());
    EXPECT_EQ(load_error(p), "'" + p + "': GGUF version " + std::to_string(v) +
                                 " is not supported (focalscope reads versions 2 and 3; re-convert the model with a "
                                 "current llama.cpp)");
  }
}

TEST_F(GgufFileTest, TruncatedAnywhere) {
  const std::string full = tiny_llama_gguf().bytes();
  // Cut inside the header, the metadata, the tensor infos and the data area: every cut is one clear Error.
  for (size_t cut : {(size_t)2, (size_t)10, (size_t)30, (size_t)200, (size_t)3000, full.size() / 2, full.size() - 1}) {
    const std::string p = write("cut.gguf", full.substr(0, cut));
    const std::string e = load_error(p);
    EXPECT_TRUE(e.find("is truncated") != std::string::npos || e.find("is not a GGUF file") != std::string::npos)
        << "cut " << cut << ": " << e;
    EXPECT_THAT(e, HasSubstr(p)) << cut;
  }
  const std::string p = write("cut.gguf", full.substr(0, 10));
  EXPECT_EQ(load_error(p), "'" + p +
                               "' is truncated: reading the tensor count at byte 8 needs 8 bytes but the file "
                               "has 10 (re-download or re-convert the file)");
  const std::string last = write("last.gguf", full.substr(0, full.size() - 1));
  EXPECT_THAT(load_error(last), HasSubstr("lies past the end of the data area"));
}

TEST_F(GgufFileTest, TensorDataPastTheEnd) {
  GgufBuilder b = tiny_llama_gguf();
  const std::string p = write("past.gguf", b.bytes({1 << 20}));
  EXPECT_THAT(load_error(p), HasSubstr("': tensor 'token_embd.weight' data [1048576, 1125376) lies past the end of the "
                                       "data area ("));
  EXPECT_THAT(load_error(p), HasSubstr("the file is truncated"));
}

TEST_F(GgufFileTest, TensorsSharingBytesRefused) {
  // Tensor 1 stored at tensor 0's offset: each would read (and a panel relayout rewrite) the other's bytes.
  GgufBuilder b = tiny_llama_gguf();
  const std::string p = write("overlap.gguf", b.bytes({-1, 0}));
  EXPECT_THAT(load_error(p), HasSubstr("' share data bytes from offset 0 — the file is corrupt"));
  EXPECT_THAT(load_error(p), HasSubstr("'" + p + "': tensors '"));
  EXPECT_EQ(Model::load(write("whole.gguf", b.bytes()))->config().n_layers, 2);  // the same file, offsets intact
}

TEST_F(GgufFileTest, UnknownAndUnsupportedTypes) {
  for (uint32_t type : {99u, 17u}) {
    GgufBuilder b = tiny_llama_gguf(test::TinyLlamaDims{}, "", "output_norm.weight");
    b.tensor("output_norm.weight", {64}, type, std::vector<uint8_t>(256, 0));
    const std::string p = write("type.gguf", b.bytes());
    EXPECT_EQ(load_error(p), "'" + p + "': tensor 'output_norm.weight' has type " + ggml_type_name(type) +
                                 ", which focalscope does not load (supported: " + ggml_supported_types() +
                                 ") — re-quantise the model to one of those");
  }
}

TEST_F(GgufFileTest, InconsistentMetadata) {
  {  // a required key missing
    const std::string p = write("a.gguf", tiny_llama_gguf(test::TinyLlamaDims{}, "llama.block_count").bytes());
    EXPECT_EQ(load_error(p), "'" + p +
                                 "': metadata key 'llama.block_count' is missing — the file is not a complete "
                                 "llama GGUF");
  }
  {  // head count that does not divide the width
    test::TinyLlamaDims d;
    GgufBuilder b = tiny_llama_gguf(d, "llama.attention.head_count");
    b.u32("llama.attention.head_count", 3);
    const std::string p = write("b.gguf", b.bytes());
    EXPECT_EQ(load_error(p), "'" + p +
                                 "': llama.embedding_length (64) is not a multiple of "
                                 "llama.attention.head_count (3) and llama.attention.key_length is missing");
  }
  {  // vocab_size disagreeing with the embedding
    GgufBuilder b = tiny_llama_gguf();
    b.u32("llama.vocab_size", 512);
    const std::string p = write("c.gguf", b.bytes());
    EXPECT_EQ(load_error(p), "'" + p +
                                 "': llama.vocab_size (512) disagrees with token_embd.weight's 300 rows — "
                                 "inconsistent metadata");
  }
  {  // a token list shorter than the embedding (ids past it decoded as "", prompts as unknown tokens)
    test::TinyLlamaDims d;
    d.n_tokens = 280;
    const std::string p = write("e.gguf", tiny_llama_gguf(d).bytes());
    EXPECT_EQ(load_error(p).rfind("'" + p +
                                      "': tokenizer.ggml.tokens has 280 entries but token_embd.weight has 300 "
                                      "rows — inconsistent metadata",
                                  0),
              0u)
        << load_error(p);
  }
  {  // a tensor whose shape disagrees with the metadata
    GgufBuilder b = tiny_llama_gguf(test::TinyLlamaDims{}, "", "blk.1.ffn_up.weight");
    b.tensor_f32("blk.1.ffn_up.weight", {64, 32}, std::vector<float>(64 * 32, 0.0f));
    const std::string p = write("d.gguf", b.bytes());
    EXPECT_EQ(load_error(p), "'" + p +
                                 "': tensor 'model.layers.1.mlp.up_proj.weight' has shape [32, 64], expected "
                                 "[96, 64] = [llama.feed_forward_length, llama.embedding_length] from '" +
                                 p + "' (GGUF metadata)");
  }
  {  // a key twice
    GgufBuilder b = tiny_llama_gguf();
    b.u32("llama.block_count", 2);
    const std::string p = write("e.gguf", b.bytes());
    EXPECT_EQ(load_error(p), "'" + p + "': metadata key 'llama.block_count' appears twice");
  }
  {  // an architecture focalscope does not run
    GgufBuilder b;
    b.str("general.architecture", "bloom");
    const std::string p = write("f.gguf", b.bytes());
    EXPECT_EQ(load_error(p), "'" + p +
                                 "': architecture 'bloom' is not supported (focalscope loads the GGUF architectures "
                                 "llama, qwen2, gemma2, phi3, olmo2 and gpt2)");
  }
  {  // alignment that is no power of two
    GgufBuilder b = tiny_llama_gguf();
    b.u32("general.alignment", 24);
    const std::string p = write("g.gguf", b.bytes());
    EXPECT_EQ(load_error(p), "'" + p + "': general.alignment must be a power of two up to 2^20, got 24");
  }
  {  // RoPE over part of the head
    GgufBuilder b = tiny_llama_gguf();
    b.u32("llama.rope.dimension_count", 16);
    const std::string p = write("i.gguf", b.bytes());
    EXPECT_EQ(load_error(p), "'" + p +
                                 "': llama.rope.dimension_count (16) differs from the head dimension 32 "
                                 "(partial RoPE is not supported)");
  }
  {  // a tokenizer model focalscope does not know
    GgufBuilder b = tiny_llama_gguf(test::TinyLlamaDims{}, "tokenizer.ggml.model");
    b.str("tokenizer.ggml.model", "bert");
    const std::string p = write("j.gguf", b.bytes());
    EXPECT_EQ(load_error(p), "'" + p +
                                 "': tokenizer.ggml.model 'bert' is not supported (focalscope reads 'llama' "
                                 "sentencepiece and 'gpt2' byte-level BPE vocabularies)");
  }
}

TEST_F(GgufFileTest, NoTokenizerStillLoads) {
  // A model without tokenizer metadata: token ids only.
  GgufBuilder full = tiny_llama_gguf(test::TinyLlamaDims{}, "tokenizer.ggml.model");
  const std::string p = write("notok.gguf", full.bytes());
  auto m = Model::load(p);
  EXPECT_EQ(m->tokenizer(), nullptr);
  try {
    m->require_tokenizer();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "model '" + p +
                                         "' stores no tokenizer (no tokenizer.ggml.* metadata) — pass "
                                         "token ids instead of text");
  }
}

TEST(GgufParse, ArrayCountBeyondFile) {
  GgufBuilder b;
  b.str("general.architecture", "llama");
  std::string bytes = b.bytes();
  // Claim 2^40 metadata entries in a file of a few dozen bytes.
  const uint64_t huge = 1ULL << 40;
  std::memcpy(&bytes[16], &huge, 8);
  try {
    GgufFile f(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "mem.gguf");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()),
                HasSubstr("more than a " + std::to_string(bytes.size()) + "-byte file can hold"));
  }
}

// ---- byte-level BPE on a hand-made vocabulary ----

std::unique_ptr<Tokenizer> tiny_bpe() {
  GgufBuilder b = tiny_llama_gguf();
  const std::string bytes = b.bytes();
  GgufFile f(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "tiny");
  return gguf_tokenizer(f);
}

TEST(BpeTokenizer, MergesByRank) {
  auto t = tiny_bpe();
  // "the the" -> "the" | " the"; "the": t h e -> (h e) -> [t, he]; " the": Ġ t h e -> (Ġ t) -> (h e) -> (Ġt he).
  const std::vector<int32_t> ids = t->encode("the the", false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(t->piece(ids[0]), "t");
  EXPECT_EQ(t->piece(ids[1]), "he");
  EXPECT_EQ(t->piece(ids[2]), "\xC4\xA0the");
  EXPECT_EQ(t->decode(ids), "the the");
  EXPECT_EQ(t->display(ids[2]), " the");
}

// The merge order against a naive oracle: every round merges all occurrences of the lowest-ranked adjacent pair,
// left to right (the rule as tokenizers states it). Merge tables grown like a trained one (each merge joins two
// existing tokens), words of up to 1500 letters over three letters so that hundreds of merges apply per word.
std::vector<std::string> naive_bpe(std::vector<std::string> sym, const std::map<std::string, int>& ranks) {
  while (sym.size() > 1) {
    int best = INT_MAX;
    std::string pair;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      auto it = ranks.find(sym[i] + " " + sym[i + 1]);
      if (it != ranks.end() && it->second < best) {
        best = it->second;
        pair = it->first;
      }
    }
    if (best == INT_MAX) break;
    std::vector<std::string> next;
    for (size_t i = 0; i < sym.size(); ++i) {
      if (i + 1 < sym.size() && sym[i] + " " + sym[i + 1] == pair) {
        next.push_back(sym[i] + sym[i + 1]);
        ++i;
      } else {
        next.push_back(sym[i]);
      }
    }
    sym.swap(next);
  }
  return sym;
}

TEST(BpeTokenizer, MergeOrderMatchesTheRoundByRoundRuleOnLongWords) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    std::mt19937 rng(seed);
    BpeVocab v;
    v.tokens = {"a", "b", "c"};
    std::map<std::string, int> ranks;
    std::set<std::string> have(v.tokens.begin(), v.tokens.end());
    while (v.merges.size() < 300) {
      const std::string& x = v.tokens[rng() % v.tokens.size()];
      const std::string& y = v.tokens[rng() % v.tokens.size()];
      if (x.size() + y.size() > 12 || have.count(x + y)) continue;
      ranks[x + " " + y] = (int)v.merges.size();
      v.merges.push_back(x + " " + y);
      have.insert(x + y);
      v.tokens.push_back(x + y);
    }
    auto tok = make_bpe_tokenizer(v, "test");
    for (int w = 0; w < 40; ++w) {
      const size_t n = 1 + rng() % (w < 30 ? 60 : 1500);
      std::string word;
      std::vector<std::string> sym;
      for (size_t i = 0; i < n; ++i) {
        word += (char)('a' + rng() % 3);
        sym.push_back(word.substr(i, 1));
      }
      std::vector<std::string> got;
      for (int32_t id : tok->encode(word, false)) got.push_back(tok->piece(id));
      ASSERT_EQ(got, naive_bpe(sym, ranks)) << "seed " << seed << ", word " << word;
    }
  }
}

// tokenizer.json's model.fuse_unk: a run of pieces outside the vocabulary within a word is one <unk> (tokenizers'
// rule; it was one each). Bytes 0x04 0x06 form one word of the GPT-2 pattern, neither in this vocabulary.
TEST(BpeTokenizer, FuseUnkJoinsARunOfUnknownPieces) {
  BpeVocab v;
  v.tokens = {"a", "b", "<unk>"};
  v.unk_id = 2;
  const std::string text =
      "a\x04\x06"
      "b";
  EXPECT_EQ(make_bpe_tokenizer(v, "test")->encode(text, false), (std::vector<int32_t>{0, 2, 2, 1}));
  v.fuse_unk = true;
  EXPECT_EQ(make_bpe_tokenizer(v, "test")->encode(text, false), (std::vector<int32_t>{0, 2, 1}));
}

TEST(BpeTokenizer, BytesSpecialTokensAndDisplay) {
  auto t = tiny_bpe();
  const std::string text = "<|im_start|>a\n\xC3\xA9 \xF0\x9F\x98\x80";  // a, newline, é, space, emoji
  const std::vector<int32_t> ids = t->encode(text, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 259);                // the control token, matched whole
  EXPECT_EQ(t->decode(ids), text);       // byte-level round trip
  EXPECT_EQ(t->display(ids[2]), "\\n");  // the newline piece "Ċ"
  EXPECT_EQ(t->piece(ids[2]), "\xC4\x8A");
  EXPECT_EQ(t->display(ids[3]), "\\xC3");        // half of é alone is no text
  EXPECT_EQ(t->encode("x", true).front(), 259);  // add_bos puts the BOS id first
  // A backslash reads "\\": the two characters backslash-n apart from a newline's "\n".
  const std::vector<int32_t> bs = t->encode("\\n", false);
  ASSERT_EQ(bs.size(), 2u);
  EXPECT_EQ(t->display(bs[0]) + t->display(bs[1]), "\\\\n");
  EXPECT_EQ(display_piece("<0x5C>"), "\\\\");
  EXPECT_EQ(display_piece("a\\b"), "a\\\\b");
  // A sentencepiece piece's control characters are escaped as the byte-level ones (inspect printed a raw carriage
  // return), and so are the C1 controls and the line / paragraph separators a terminal breaks its line at.
  EXPECT_EQ(display_piece("\xE2\x96\x81"
                          "a\rb\tc"),
            " a\\rb\\tc");
  EXPECT_EQ(display_piece("\x0B\x7F"), "\\x0B\\x7F");
  EXPECT_EQ(display_piece("x\xC2\x85"
                          "y"),
            "x\\u0085y");
  EXPECT_EQ(display_text("\xE2\x80\xA8\xE2\x80\xA9\xC3\xA9"), "\\u2028\\u2029\xC3\xA9");  // é stays
}

TEST(BpeTokenizer, PreTokenizerSplits) {
  auto t = tiny_bpe();
  // No merges apply to these, so each id is one byte; the split points show in the absence of cross-word merges:
  // "  the": whitespace run of 2 followed by a word -> " " | " the" -> Ġ, Ġthe.
  const std::vector<int32_t> ids = t->encode("  the", false);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(t->piece(ids[1]), "\xC4\xA0the");
  // "\nthe": a newline is no ' ' prefix -> Ċ | t he.
  const std::vector<int32_t> ids2 = t->encode("\nthe", false);
  ASSERT_EQ(ids2.size(), 3u);
  EXPECT_EQ(t->piece(ids2[1]), "t");
}

// llama.cpp's names of Llama 3.x's and Qwen2's pre-tokenizers open (they were refused, so no Llama 3 or Qwen2 GGUF
// did) and the text round-trips; their patterns are the tokenizer.json engine's, checked against the `tokenizers`
// library in hf_tokenizer_test. The other names llama.cpp's converter writes for these patterns ("gpt-2" for GPT-2,
// "dbrx" for OLMo 2's cl100k, "deepseek-r1-qwen" for the Qwen2.5 distills; refused before) tokenize as their
// pattern's first name. An unknown name is still refused, naming the ones known.
TEST(BpeTokenizer, LlamaBpeAndQwen2PreTokenizersOpen) {
  auto with_pre = [](const std::string& pre) {
    GgufBuilder b = tiny_llama_gguf(test::TinyLlamaDims{}, "tokenizer.ggml.pre");
    b.str("tokenizer.ggml.pre", pre);
    const std::string bytes = b.bytes();
    GgufFile f(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "tiny-" + pre);
    return gguf_tokenizer(f);
  };
  const std::string text = "the  the\n\n2024 \xC3\xA9t\xC3\xA9";
  for (const char* pre : {"llama-bpe", "qwen2"}) {
    SCOPED_TRACE(pre);
    auto t = with_pre(pre);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->decode(t->encode(text, false)), text);
  }
  const std::string mixed = "it's 12345 cats,\n  dogs' \xC3\xA9t\xC3\xA9 the the";
  for (const auto& [alias, name] : std::vector<std::pair<std::string, std::string>>{{"gpt-2", "gpt2"},
                                                                                    {"phi-2", "gpt2"},
                                                                                    {"olmo", "gpt2"},
                                                                                    {"llama-v3", "llama-bpe"},
                                                                                    {"dbrx", "llama-bpe"},
                                                                                    {"smaug-bpe", "llama-bpe"},
                                                                                    {"deepseek-r1-qwen", "qwen2"}}) {
    SCOPED_TRACE(alias);
    auto a = with_pre(alias), b = with_pre(name);
    EXPECT_EQ(a->encode(mixed, false), b->encode(mixed, false));
    EXPECT_EQ(a->decode(a->encode(mixed, false)), mixed);
  }
  try {
    (void)with_pre("falcon3");
    ADD_FAILURE() << "an unknown pre-tokenizer was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("tokenizer.ggml.pre 'falcon3' is not supported"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("llama-bpe / llama3 / llama-v3, dbrx / smaug-bpe, qwen2"));
  }
}

}  // namespace
}  // namespace focal
