// Byte-level BPE tokenizer.json of HF model directories (GPT-2, Llama 3, Qwen2, OLMo 2, SmolLM2 shapes): our encode
// must equal the `tokenizers` library's on every test string (exact ids), encode with the directory's BOS rule must
// equal transformers 4.47.1's AutoTokenizer, and decode must equal tokenizers' decode. Fixtures come from
// tests/hf/make_tokenizer_fixtures.py, run by ctest before this test; FOCAL_HF_TOKENIZER_FIXTURES names their
// directory. Malformed tokenizer.json files are refused with an error naming the file and field.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "focal/config.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal/model_writer.h"
#include "focal/tokenizer.h"
#include "test_util.h"
#include "tokenizer_internal.h"

namespace focal {
namespace {

using json = nlohmann::json;

std::string fixtures_dir() {
  const char* d = std::getenv("FOCAL_HF_TOKENIZER_FIXTURES");
  return d ? d : "";
}

json read_json(const std::string& p) {
  std::ifstream f(p);
  EXPECT_TRUE(f.good()) << p;
  return f ? json::parse(f) : json();
}

void write_text(const std::string& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
}

class HfTokenizer : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTokenizer, EncodeDecodeMatchTokenizers) {
  ASSERT_FALSE(fixtures_dir().empty()) << "FOCAL_HF_TOKENIZER_FIXTURES is not set";
  const std::string dir = fixtures_dir() + "/" + GetParam();
  const json exp = read_json(dir + "/expected.json");
  const HfJsonTokenizer h = load_hf_json_tokenizer(dir);
  ASSERT_NE(h.tok, nullptr);
  EXPECT_EQ(h.tok->vocab_size(), exp["vocab_size"].get<int>());
  EXPECT_EQ(h.add_bos, exp["add_bos"].get<bool>());
  EXPECT_EQ(h.tok->eos_id(), exp["eos_id"].get<int>());
  EXPECT_EQ(h.tok->bos_id(), exp["bos_id"].get<int>());
  if (h.add_bos) { EXPECT_EQ(h.tok->bos_id(), exp["cases"][0]["hf_ids"][0].get<int>()); }
  int n = 0;
  for (const json& c : exp["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(h.tok->encode(text, false), c["ids"].get<std::vector<int32_t>>()) << GetParam() << " text: " << text;
    EXPECT_EQ(h.tok->encode(text, h.add_bos), c["hf_ids"].get<std::vector<int32_t>>())
        << GetParam() << " (with special tokens) text: " << text;
    EXPECT_EQ(h.tok->decode(c["ids"].get<std::vector<int32_t>>()), c["decoded"].get<std::string>())
        << GetParam() << " text: " << text;
    ++n;
  }
  EXPECT_GE(n, 30);
  // Sentencepiece-style shapes: id sequences with <0xNN> runs that are not UTF-8, as tokenizers' ByteFallback
  // decodes them (one U+FFFD a byte; they were left as raw bytes).
  if (exp.contains("decode_cases")) {
    int bad_runs = 0;
    for (const json& c : exp["decode_cases"]) {
      const std::string want = c["decoded"];
      EXPECT_EQ(h.tok->decode(c["ids"].get<std::vector<int32_t>>()), want) << GetParam() << " ids " << c["ids"];
      bad_runs += want.find("\xEF\xBF\xBD") != std::string::npos;
    }
    EXPECT_GE(bad_runs, 20);
  }
}

// bytes_of_display undoes display_text on any bytes (random strings of control bytes, backslashes, the letters of
// the escapes, C1 and U+2028 characters, UTF-8 cut short) and display_piece on sentencepiece byte pieces.
TEST(DisplayText, BytesOfDisplayRoundTrips) {
  const std::string atoms[] = {
      "\n",   "\t",       "\r",   "\\",    "\\n", "x",    "\x01",         "\x7f", "\xc2\x85",          "\xe2\x80\xa8",
      "\xe4", "\xe4\xb8", "\xff", "u0085", "\\u", "\\x4", "\xe4\xb8\xad", " ",    std::string(1, '\0')};
  uint64_t seed = 7;
  for (int n = 0; n < 2000; ++n) {
    std::string s;
    for (int k = 0; k < 12; ++k) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      s += atoms[(seed >> 33) % (sizeof atoms / sizeof atoms[0])];
    }
    EXPECT_EQ(bytes_of_display(display_text(s)), s) << display_text(s);
  }
  EXPECT_EQ(bytes_of_display(display_piece("<0x0A>")), "\n");
  EXPECT_EQ(bytes_of_display(display_piece("<0xE4>")), "\xe4");
  EXPECT_EQ(bytes_of_display(display_piece("\u2581the")), " the");
}

// NFC (Qwen2's normalizer; libutf8proc) equals tokenizers' NFC on every code point with a canonical decomposition
// (Python's unicodedata where the two libraries' Unicode versions differ: at most a few).
// Generated text as UTF-8, hand-computed: a byte-level token that ends inside a character waits (utf8_whole_end);
// what never completes is one U+FFFD per broken sequence, as Python's decode(errors="replace") writes it (the CLI
// printed the raw bytes E3 81 at the end of a generation).
TEST(Utf8Text, WholeCharactersAndReplacement) {
  const std::string o = "\xE3\x81\x8A";  // お
  EXPECT_EQ(focal::utf8_whole_end("ab" + o), 5u);
  EXPECT_EQ(focal::utf8_whole_end("ab\xE3\x81"), 2u);
  EXPECT_EQ(focal::utf8_whole_end("ab\xF0"), 2u);
  EXPECT_EQ(focal::utf8_whole_end(""), 0u);
  const std::string rep = "\xEF\xBF\xBD";
  EXPECT_EQ(focal::utf8_replaced(o + "\xE3\x81"), o + rep);              // cut short at the end: one U+FFFD
  EXPECT_EQ(focal::utf8_replaced("comp\xE3ile"), "comp" + rep + "ile");  // a lead byte alone in the middle
  EXPECT_EQ(focal::utf8_replaced("a\x80\x80"
                                 "b"),
            "a" + rep + rep + "b");                               // two stray continuation bytes
  EXPECT_EQ(focal::utf8_replaced("caf\xC3\xA9"), "caf\xC3\xA9");  // well formed: unchanged
  try {
    focal::require_utf8_text("ok\nline \xE9t\xE9", "prompt file 'p.txt'");
    ADD_FAILURE() << "Latin-1 accepted";
  } catch (const focal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("prompt file 'p.txt' is not UTF-8 text: byte 0xe9 at offset 8 (line 2)"),
              std::string::npos)
        << e.what();
  }
}

TEST(HfTokenizerNfc, MatchesTokenizersNormalizer) {
  ASSERT_FALSE(fixtures_dir().empty()) << "FOCAL_HF_TOKENIZER_FIXTURES is not set";
  const json exp = read_json(fixtures_dir() + "/nfc.json");
  int bad = 0, n = 0, differ = 0;
  for (const json& c : exp["cases"]) {
    differ += c["versions_differ"].get<bool>();
    const std::string got = nfc(c["text"].get<std::string>()), want = c["nfc"];
    if (got != want && bad++ < 10) ADD_FAILURE() << "NFC of '" << c["text"].get<std::string>() << "'";
    ++n;
  }
  EXPECT_EQ(bad, 0) << "of " << n;
  EXPECT_GT(n, 2000);
  EXPECT_LE(differ, 4);
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc("bad \xff utf-8 e\xcc\x81"), "bad \xff utf-8 e\xcc\x81");  // invalid UTF-8: unchanged
  // U+11A7 after L V or an LV syllable stays (libutf8proc 2.8 on its own drops it: JuliaStrings/utf8proc#317).
  EXPECT_EQ(nfc("\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa7 e\xcc\x81"), "\xea\xb0\x80\xe1\x86\xa7 \xc3\xa9");
  EXPECT_EQ(nfc("\xea\xb0\x80\xe1\x86\xa7\xe1\x86\xa8"), "\xea\xb0\x80\xe1\x86\xa7\xe1\x86\xa8");
  EXPECT_EQ(nfc("\xe1\x86\xa7\xe1\x86\xa7"), "\xe1\x86\xa7\xe1\x86\xa7");
}

INSTANTIATE_TEST_SUITE_P(Shapes, HfTokenizer,
                         ::testing::Values("gpt2", "llama3", "llama3_cls", "qwen2", "olmo2", "smollm", "roberta",
                                           "spm_legacy", "spm_first", "spm_gemma", "spm_split"));

// The HF directory loader picks tokenizer.json and takes the BOS rule from it.
TEST(HfTokenizerModel, LoadedWithTheModel) {
  ASSERT_FALSE(fixtures_dir().empty()) << "FOCAL_HF_TOKENIZER_FIXTURES is not set";
  const std::string dir = fixtures_dir() + "/llama3_model";
  const json exp = read_json(dir + "/expected.json");
  const auto m = Model::load(dir);
  ASSERT_NE(m->tokenizer(), nullptr);
  EXPECT_TRUE(m->config().add_bos);
  for (const json& c : exp["cases"])
    EXPECT_EQ(m->tokenizer()->encode(c["text"], m->config().add_bos), c["hf_ids"].get<std::vector<int32_t>>())
        << c["text"];
}

// `focal export` of a model whose tokenizer is tokenizer.json: the copy tokenizes as the original (it had no
// tokenizer: only tokenizer.model was copied), and exporting over the source itself is refused.
TEST(HfTokenizerModel, ExportKeepsTheTokenizerFiles) {
  ASSERT_FALSE(fixtures_dir().empty()) << "FOCAL_HF_TOKENIZER_FIXTURES is not set";
  const std::string dir = fixtures_dir() + "/llama3_model", out = test::make_temp_dir("hftok_export") + "/m";
  export_model(dir, out, "BF16");
  const auto a = Model::load(dir), b = Model::load(out);
  ASSERT_NE(b->tokenizer(), nullptr);
  const json exp = read_json(dir + "/expected.json");
  for (const json& c : exp["cases"])
    EXPECT_EQ(b->tokenizer()->encode(c["text"], b->config().add_bos),
              a->tokenizer()->encode(c["text"], a->config().add_bos))
        << c["text"];
  try {
    export_model(out, out, "BF16");
    ADD_FAILURE() << "exported over itself";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is SRC_MODEL itself"), std::string::npos) << e.what();
  }
}

// A directory with tokenizer.model and tokenizer.json reads tokenizer.json, as AutoTokenizer does (the spm_legacy
// fixture with the bundled tokenizer.model beside it gives transformers' ids, tokenizer.model alone does not: its
// chat tokens past the vocabulary are text to it); one whose tokenizer.json focalscope does not read keeps its
// tokenizer.model and says so.
TEST(HfTokenizerModel, SentencepieceDirectoryReadsTokenizerJson) {
  ASSERT_FALSE(fixtures_dir().empty()) << "FOCAL_HF_TOKENIZER_FIXTURES is not set";
  const std::string src = std::string(FOCAL_SOURCE_DIR) + "/assets/models/standard/tokenizer.model";
  const std::string dir = test::make_temp_dir("hftok_spm");
  ASSERT_FALSE(dir.empty());
  auto copy = [](const std::string& from, const std::string& to) {
    std::ifstream in(from, std::ios::binary);
    std::ofstream(to, std::ios::binary) << in.rdbuf();
  };
  copy(src, dir + "/tokenizer.model");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    copy(fixtures_dir() + "/spm_legacy/" + f, dir + "/" + f);
  const json exp = read_json(fixtures_dir() + "/spm_legacy/expected.json");
  ModelConfig cfg;
  cfg.vocab_size = 1 << 20;
  const auto tok = load_hf_dir_tokenizer(dir, &cfg);
  ASSERT_NE(tok, nullptr);
  EXPECT_TRUE(cfg.add_bos);
  EXPECT_TRUE(cfg.warnings.empty());
  EXPECT_EQ(tok->source, "tokenizer.json (sentencepiece-style BPE)");  // focal info and the files say which
  int chat = 0;
  for (const json& c : exp["cases"]) {
    EXPECT_EQ(tok->encode(c["text"], true), c["hf_ids"].get<std::vector<int32_t>>()) << c["text"];
    chat += c["text"].get<std::string>().find("<|user|>") != std::string::npos;
  }
  EXPECT_GE(chat, 2);

  write_text(dir + "/tokenizer.json",
             R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}, "pre_tokenizer": {"type": "Metaspace"}})");
  ModelConfig cfg2;
  cfg2.vocab_size = 1 << 20;
  const auto tok2 = load_hf_dir_tokenizer(dir, &cfg2);
  ASSERT_NE(tok2, nullptr);
  const auto ref = Tokenizer::load(src);
  EXPECT_EQ(tok2->vocab_size(), ref->vocab_size());
  EXPECT_EQ(tok2->encode("Hello world", true), ref->encode("Hello world", true));
  EXPECT_EQ(tok2->source, "tokenizer.model (sentencepiece)");
  ASSERT_EQ(cfg2.warnings.size(), 1u);
  EXPECT_NE(cfg2.warnings[0].find("model.type"), std::string::npos) << cfg2.warnings[0];
  EXPECT_NE(cfg2.warnings[0].find("tokenizer.model is used instead"), std::string::npos) << cfg2.warnings[0];
}

// A sentencepiece tokenizer.model with tokenizer_config.json's added tokens (Phi-3's layout without tokenizer.json):
// the chat tokens written in a prompt are those tokens, with their rstrip / lstrip, as transformers' LlamaTokenizer
// (slow: the same sentencepiece model and normaliser) encodes them; they were encoded as text.
TEST(HfTokenizerModel, SentencepieceModelMatchesAddedTokens) {
  ASSERT_FALSE(fixtures_dir().empty()) << "FOCAL_HF_TOKENIZER_FIXTURES is not set";
  const std::string dir = fixtures_dir() + "/spm_model_only";
  ModelConfig cfg;
  cfg.vocab_size = 1 << 20;
  cfg.bos_id = 1;
  const auto tok = load_hf_dir_tokenizer(dir, &cfg);
  ASSERT_NE(tok, nullptr);
  int n = 0, chat = 0;
  const json slow = read_json(dir + "/slow.json");
  for (const json& c : slow["cases"]) {
    EXPECT_EQ(tok->encode(c["text"], cfg.add_bos), c["ids"].get<std::vector<int32_t>>()) << c["text"];
    chat += c["text"].get<std::string>().find("<|user|>") != std::string::npos;
    ++n;
  }
  EXPECT_GE(n, 400);
  EXPECT_GE(chat, 2);
}

// A sentencepiece-style tokenizer.json's decoder: Strip(" ", N, 0) drops the first N spaces, a Metaspace decoder
// that prepends drops one; hand-computed from tokenizers' decoders on a four-piece vocabulary.
TEST(HfTokenizerModel, SentencepieceStyleDecoderStrip) {
  const std::string dir = test::make_temp_dir("hftok_strip");
  ASSERT_FALSE(dir.empty());
  const json base = {
      {"model",
       {{"type", "BPE"},
        {"vocab", {{"<unk>", 0}, {"\u2581", 1}, {"a", 2}, {"\u2581a", 3}}},
        {"merges", json::array({json::array({"\u2581", "a"})})},
        {"unk_token", "<unk>"}}},
      {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}}}};
  auto decode_with = [&](const json& decoder, const std::vector<int32_t>& ids) {
    json j = base;
    j["decoder"] = decoder;
    write_text(dir + "/tokenizer.json", j.dump());
    const HfJsonTokenizer h = load_hf_json_tokenizer(dir);
    EXPECT_EQ(h.tok->encode(" a a", false), (std::vector<int32_t>{3, 3}));
    return h.tok->decode(ids);
  };
  const json replace = {{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}};
  auto strip = [&](int n) {
    return json{
        {"type", "Sequence"},
        {"decoders",
         json::array({replace, {{"type", "Fuse"}}, {{"type", "Strip"}, {"content", " "}, {"start", n}, {"stop", 0}}})}};
  };
  EXPECT_EQ(decode_with(strip(1), {1, 3, 3}), " a a");
  EXPECT_EQ(decode_with(strip(2), {1, 3, 3}), "a a");
  EXPECT_EQ(decode_with(json{{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}}, {3, 3}),
            "a a");
  EXPECT_EQ(decode_with(json{{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "never"}}, {3, 3}),
            " a a");
  json j = base;
  j["decoder"] = 5;
  write_text(dir + "/tokenizer.json", j.dump());
  EXPECT_THROW((void)load_hf_json_tokenizer(dir), Error);
}

// Malformed tokenizer.json: one error naming tokenizer.json and the field.
TEST(HfTokenizerBadInput, RefusedNamingFileAndField) {
  const std::string dir = test::make_temp_dir("hftok_bad");
  ASSERT_FALSE(dir.empty());
  const json good = {
      {"model",
       {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}, {"<s>", 3}}}, {"merges", json::array({"a b"})}}},
      {"added_tokens", json::array({{{"id", 3}, {"content", "<s>"}, {"special", true}}})},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}};
  write_text(dir + "/tokenizer.json", good.dump());
  EXPECT_EQ(load_hf_json_tokenizer(dir).tok->encode("abab<s>", false), (std::vector<int32_t>{2, 2, 3}));

  struct Case {
    const char* what;
    json doc;
    const char* field;
  };
  auto edit = [&](auto f) {
    json j = good;
    f(j);
    return j;
  };
  const Case cases[] = {
      {"no vocab", edit([](json& j) { j["model"].erase("vocab"); }), "model.vocab"},
      {"merge of unknown piece", edit([](json& j) { j["model"]["merges"].push_back("a zz"); }), "model.merges[1]"},
      {"merge result unknown", edit([](json& j) {
         j["model"]["merges"].push_back(json::array({"b", "a"}));
       }),
       "model.merges[1]"},
      {"merge not a pair", edit([](json& j) { j["model"]["merges"] = json::array({"a b c"}); }), "model.merges[0]"},
      {"unknown regex", edit([](json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", json::array({{{"type", "Split"},
                                                               {"pattern", {{"Regex", "\\w+|\\s+"}}},
                                                               {"behavior", "Isolated"},
                                                               {"invert", false}},
                                                              {{"type", "ByteLevel"}, {"use_regex", false}}})}};
       }),
       "pre_tokenizer.pretokenizers[0].pattern.Regex"},
      {"unknown pre-tokenizer", edit([](json& j) {
         j["pre_tokenizer"] = {{"type", "Whitespace"}};
       }),
       "pre_tokenizer"},
      {"sentencepiece-style, unknown normalizer step", edit([](json& j) {
         j.erase("pre_tokenizer");
         j["normalizer"] = {
             {"type", "Sequence"},
             {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", "\u2581"}}, {{"type", "Lowercase"}}})}};
       }),
       "normalizer.normalizers[1]"},
      {"sentencepiece-style, spaces kept", edit([](json& j) {
         j.erase("pre_tokenizer");
         j["normalizer"] = {{"type", "Prepend"}, {"prepend", "\u2581"}};
       }),
       "normalizer"},
      {"Metaspace replacement", edit([](json& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}};
       }),
       "pre_tokenizer.replacement"},
      {"Metaspace scheme", edit([](json& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}, {"prepend_scheme", "sometimes"}};
       }),
       "pre_tokenizer.prepend_scheme"},
      {"byte_fallback in byte-level", edit([](json& j) { j["model"]["byte_fallback"] = true; }), "model.byte_fallback"},
      {"unigram", edit([](json& j) { j["model"]["type"] = "Unigram"; }), "model.type"},
      {"duplicate id", edit([](json& j) { j["model"]["vocab"]["c"] = 1; }), "model.vocab"},
      {"huge id", edit([](json& j) { j["model"]["vocab"]["c"] = 1LL << 40; }), "model.vocab"},
      {"added id clash", edit([](json& j) {
         j["added_tokens"].push_back({{"id", 0}, {"content", "<x>"}, {"special", true}});
       }),
       "added_tokens[1]"},
      {"normalizer", edit([](json& j) {
         j["normalizer"] = {{"type", "Lowercase"}};
       }),
       "normalizer"},
      {"template token not an object", edit([](json& j) {
         j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", json::array({{{"SpecialToken", 5}}})}};
       }),
       "unexpected JSON type"},
  };
  for (const Case& c : cases) {
    write_text(dir + "/tokenizer.json", c.doc.dump());
    try {
      (void)load_hf_json_tokenizer(dir);
      ADD_FAILURE() << c.what << ": accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("tokenizer.json"), std::string::npos) << c.what << ": " << msg;
      EXPECT_NE(msg.find(c.field), std::string::npos) << c.what << ": " << msg;
    }
  }
  write_text(dir + "/tokenizer.json", "{\"model\": ");
  EXPECT_THROW((void)load_hf_json_tokenizer(dir), Error);
  write_text(dir + "/tokenizer.json", good.dump());
  write_text(dir + "/tokenizer_config.json", R"({"bos_token": "<nope>"})");
  try {
    (void)load_hf_json_tokenizer(dir);
    ADD_FAILURE() << "unknown bos_token accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer_config.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bos_token"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace focal
