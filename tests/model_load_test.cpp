// Loading model directories: every bad input (path, config.json, safetensors, shards, tokenizer) fails with a
// focal::Error that names the file, tensor or field at fault; valid sharded / F16 / BF16 models load and agree with
// the F32 original. Also the config round trip, TempSpec validation and capture-request validation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <immintrin.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "focal/capture.h"
#include "focal/config.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal/model_writer.h"
#include "focal/temp_spec.h"
#include "focal_kernels/shared_math.h"
#include "model_internal.h"
#include "safetensors.h"
#include "test_util.h"

namespace focal {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using json = nlohmann::json;

// Runs `fn` and returns the focal::Error message; fails the test if nothing (or something else) is thrown.
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) { return e.what(); } catch (const std::exception& e) {
    ADD_FAILURE() << "expected focal::Error, got std::exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected focal::Error, nothing was thrown";
  return "";
}

std::string load_error(const std::string& dir) {
  return error_of([&] { Model::load(dir); });
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), (std::streamsize)bytes.size());
  ASSERT_TRUE(f.good()) << path;
}

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A safetensors file assembled by hand: 8-byte little-endian header length, header text, data bytes.
std::string raw_safetensors(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(&out[0], &n, 8);
  return out + header + data;
}

// A small GQA model (2 layers, 4 query heads over 2 kv heads, untied lm_head so every tensor kind is present).
ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 64;
  c.hidden = 32;
  c.intermediate = 48;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_head = 8;
  c.max_positions = 64;
  c.bos_id = 1;
  c.eos_id = 2;
  c.tied_embeddings = false;
  return c;
}

ModelConfig learned_config(bool tau_bias) {
  ModelConfig c = small_config();
  c.focal.mode = AttnMode::kLearned;
  c.focal.has_tau = true;
  c.focal.tau_bias = tau_bias;
  c.focal.tau_min = 1.5f;
  c.focal.tau_max = 3.0f;
  c.focal.tau_mode = TauMode::kPerToken;
  return c;
}

std::vector<NamedTensor>::iterator find_tensor(std::vector<NamedTensor>& ts, const std::string& name) {
  return std::find_if(ts.begin(), ts.end(), [&](const NamedTensor& t) { return t.name == name; });
}

const std::vector<int32_t> kIds = {1, 5, 9, 17, 33, 40, 41, 63, 7, 12};

std::vector<float> logits_of(const Model& m) {
  Session s(m, (int)kIds.size());
  std::vector<float> logits;  // [T, vocab]
  s.forward(kIds.data(), (int)kIds.size(), TempSpec::standard(), RunOptions{}, nullptr, &logits);
  return logits;
}

class ModelLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test::make_temp_dir("model_load");
    ASSERT_FALSE(root_.empty());
  }
  void TearDown() override {
    if (!root_.empty() && !std::getenv("FOCAL_KEEP_TEST_DIRS")) std::system(("rm -rf '" + root_ + "'").c_str());
  }
  // Writes config + tensors into root_/name and returns the directory.
  std::string make_model(const std::string& name, const ModelConfig& c, const std::vector<NamedTensor>& ts,
                         const std::string& dtype = "F32") {
    std::string dir = root_ + "/" + name;
    write_model_dir(dir, c, ts, dtype, "");
    return dir;
  }
  std::string make_model(const std::string& name) {
    return make_model(name, small_config(), random_model_tensors(small_config(), 7));
  }
  // Writes config.json text into a fresh directory that also holds valid weights.
  std::string model_with_config_text(const std::string& name, const std::string& text) {
    std::string dir = make_model(name);
    write_bytes(dir + "/config.json", text);
    return dir;
  }
  json base_config_json() { return json::parse(config_to_json(small_config())); }

  std::string root_;
};

// ---- directory and config.json ----

TEST_F(ModelLoadTest, ValidModelLoads) {
  const std::string dir = make_model("ok");
  auto m = Model::load(dir + "/");  // a trailing slash is accepted
  EXPECT_EQ(m->path(), dir);
  EXPECT_EQ(m->recorded_path(), dir) << "one spelling in the files' provenance";  // dir is absolute and normal
  EXPECT_EQ(m->config().n_layers, 2);
  EXPECT_EQ(m->config().n_kv_heads, 2);
  EXPECT_FALSE(m->config().qk_norm);
  const ModelConfig c = small_config();
  const size_t per_layer = 2 * (size_t)c.hidden + 2 * (size_t)c.hidden * c.n_heads * c.d_head +
                           2 * (size_t)c.hidden * c.n_kv_heads * c.d_head + 3 * (size_t)c.hidden * c.intermediate;
  EXPECT_EQ(m->n_params(), 2 * (size_t)c.vocab_size * c.hidden + c.hidden + c.n_layers * per_layer);
  EXPECT_NE(m->weights_checksum(), 0u);
  // The checksum is of the file bytes: another seed gives another checksum, the same bytes the same one.
  auto m2 = Model::load(make_model("ok2", small_config(), random_model_tensors(small_config(), 8)));
  EXPECT_NE(m2->weights_checksum(), m->weights_checksum());
  EXPECT_EQ(Model::load(dir)->weights_checksum(), m->weights_checksum());
}

TEST_F(ModelLoadTest, MissingDirectory) {
  const std::string dir = root_ + "/does_not_exist";
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir), HasSubstr("does not exist")));
}

TEST_F(ModelLoadTest, PathIsAFile) {
  const std::string path = root_ + "/a_file";
  write_bytes(path, "hello");
  EXPECT_THAT(load_error(path), AllOf(HasSubstr(path), HasSubstr("not a directory")));
}

TEST_F(ModelLoadTest, MissingConfigJson) {
  const std::string dir = make_model("nocfg");
  ASSERT_EQ(std::remove((dir + "/config.json").c_str()), 0);
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir), HasSubstr("config.json")));
}

TEST_F(ModelLoadTest, MalformedConfigJson) {
  const std::string dir = model_with_config_text("badjson", "{\"vocab_size\": 64, ");
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir + "/config.json"), HasSubstr("malformed JSON")));
  const std::string dir2 = model_with_config_text("notobj", "[1, 2, 3]");
  EXPECT_THAT(load_error(dir2), HasSubstr(dir2 + "/config.json"));
}

TEST_F(ModelLoadTest, MissingRequiredField) {
  for (const char* field :
       {"num_hidden_layers", "vocab_size", "hidden_size", "num_attention_heads", "intermediate_size"}) {
    json j = base_config_json();
    j.erase(field);
    const std::string dir = model_with_config_text(std::string("missing_") + field, j.dump());
    EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir + "/config.json"), HasSubstr(field), HasSubstr("missing")));
  }
}

TEST_F(ModelLoadTest, InvalidFieldValues) {
  json j = base_config_json();
  j["num_hidden_layers"] = "two";
  EXPECT_THAT(error_of([&] { parse_config(j.dump(), "cfg.json"); }),
              AllOf(HasSubstr("cfg.json"), HasSubstr("num_hidden_layers"), HasSubstr("integer")));
  j = base_config_json();
  j["hidden_size"] = 0;
  EXPECT_THAT(error_of([&] { parse_config(j.dump(), "cfg.json"); }),
              AllOf(HasSubstr("cfg.json"), HasSubstr("hidden_size")));
  j = base_config_json();
  j["rope_theta"] = -1.0;
  EXPECT_THAT(error_of([&] { parse_config(j.dump(), "cfg.json"); }), HasSubstr("rope_theta"));
  j = base_config_json();
  j["focal"] = {{"mode", "learned"}, {"tau_min", 3.0}, {"tau_max", 1.0}};
  EXPECT_THAT(error_of([&] { parse_config(j.dump(), "cfg.json"); }), AllOf(HasSubstr("focal"), HasSubstr("tau_min")));
  j = base_config_json();
  j["focal"] = {{"mode", "sharp"}};
  EXPECT_THAT(error_of([&] { parse_config(j.dump(), "cfg.json"); }), AllOf(HasSubstr("focal"), HasSubstr("sharp")));
}

TEST_F(ModelLoadTest, UnsupportedArchitecture) {
  json j = base_config_json();
  j["architectures"] = {"BloomForCausalLM"};
  j["model_type"] = "bloom";
  const std::string dir = model_with_config_text("bloom", j.dump());
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir + "/config.json"), HasSubstr("BloomForCausalLM"),
                                     HasSubstr("unsupported architecture"), HasSubstr("GPT2LMHeadModel")));
  // No architectures list: model_type decides.
  j.erase("architectures");
  EXPECT_THAT(error_of([&] { parse_config(j.dump(), "c.json"); }), HasSubstr("bloom"));
  j["model_type"] = "mistral";
  EXPECT_NO_THROW(parse_config(j.dump(), "c.json"));
}

// GPTQ / AWQ checkpoints (quantization_config) and pickle-only directories are named as such, with what to use
// instead (they read "tensor q_proj.weight is missing" and "neither model.safetensors nor ... is present").
TEST_F(ModelLoadTest, QuantizedAndPickleCheckpointsAreNamed) {
  json j = base_config_json();
  j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
  EXPECT_THAT(error_of([&] { parse_config(j.dump(), "cfg.json"); }),
              AllOf(HasSubstr("cfg.json: quantization_config.quant_method 'gptq' is not read"),
                    HasSubstr("unquantized checkpoint")));
  const std::string dir = make_model("pickle");
  ASSERT_EQ(std::remove((dir + "/model.safetensors").c_str()), 0);
  write_bytes(dir + "/pytorch_model.bin", "PK");
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr("pytorch_model.bin"), HasSubstr("safe_serialization=True")));
}

// A tied config whose file also stores lm_head.weight: the same copy loads quietly; a copy that differs is a warning
// (the embedding is the head; transformers would load lm_head into both).
TEST_F(ModelLoadTest, ATiedConfigWithADifferentStoredHeadWarns) {
  ModelConfig c = small_config();
  c.tied_embeddings = true;
  std::vector<NamedTensor> ts = random_model_tensors(c, 7);
  const NamedTensor* emb = nullptr;
  for (const NamedTensor& t : ts)
    if (t.name == "model.embed_tokens.weight") emb = &t;
  ASSERT_NE(emb, nullptr);
  NamedTensor head = *emb;
  head.name = "lm_head.weight";
  ts.push_back(head);
  auto same = Model::load(make_model("tied_same", c, ts), Device::kCpu);
  for (const std::string& w : same->config().warnings) EXPECT_EQ(w.find("lm_head"), std::string::npos) << w;
  ts.back().data[0] += 1.0f;
  auto differs = Model::load(make_model("tied_differs", c, ts), Device::kCpu);
  bool warned = false;
  for (const std::string& w : differs->config().warnings)
    warned |= w.find("stored lm_head.weight differs") != std::string::npos;
  EXPECT_TRUE(warned);
}

// Issue 13: inconsistent architecture fields are refused with an error naming the field.
TEST_F(ModelLoadTest, ArchitectureFieldsAreCheckedByName) {
  auto err = [&](const std::function<void(json&)>& edit) {
    json j = base_config_json();
    edit(j);
    return error_of([&] { parse_config(j.dump(), "c.json"); });
  };
  EXPECT_THAT(err([](json& j) {
                j["architectures"] = {"MistralForCausalLM"};
                j["max_position_embeddings"] = 128;
                j["sliding_window"] = 4096;
              }),
              AllOf(HasSubstr("c.json"), HasSubstr("\"sliding_window\""), HasSubstr("larger than the context")));
  {
    // Phi-3-mini-128k / Phi-3.5-mini ship sliding_window 262144 over a 131072 context: a window that masks
    // nothing, loaded as none (their real configs must open).
    json j = base_config_json();
    j["architectures"] = {"Phi3ForCausalLM"};
    j["max_position_embeddings"] = 128;
    j["sliding_window"] = 256;
    const ModelConfig c = parse_config(j.dump(), "c.json");
    EXPECT_EQ(c.arch.sliding_window, 0);
    j["sliding_window"] = 64;  // inside the context: applied
    EXPECT_EQ(parse_config(j.dump(), "c.json").arch.sliding_window, 64);
  }
  EXPECT_THAT(err([](json& j) {
                j["architectures"] = {"Gemma2ForCausalLM"};
                j["attn_logit_softcapping"] = 0.0;
              }),
              AllOf(HasSubstr("\"attn_logit_softcapping\""), HasSubstr("must be > 0")));
  EXPECT_THAT(err([](json& j) {
                j["architectures"] = {"Gemma2ForCausalLM"};
                j["final_logit_softcapping"] = -3.0;
              }),
              HasSubstr("\"final_logit_softcapping\""));
  EXPECT_THAT(err([](json& j) {
                j["architectures"] = {"Phi3ForCausalLM"};
                j["original_max_position_embeddings"] = 64;
                j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", {1.0, 1.0}}, {"long_factor", {1.0, 1.0}}};
              }),
              AllOf(HasSubstr("\"rope_scaling.short_factor\""), HasSubstr("head_dim / 2")));
  EXPECT_THAT(err([](json& j) {
                j["rope_scaling"] = {{"rope_type", "ntk-parts"}, {"factor", 2.0}};
              }),
              AllOf(HasSubstr("\"rope_scaling.rope_type\""), HasSubstr("default, linear, dynamic, yarn, longrope"),
                    HasSubstr("llama3")));
  EXPECT_THAT(err([](json& j) {
                j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
              }),
              HasSubstr("\"rope_scaling.original_max_position_embeddings\""));
  // A valid one parses: Mistral with a window inside the context applies it to every layer.
  json ok = base_config_json();
  ok["architectures"] = {"MistralForCausalLM"};
  ok["sliding_window"] = 16;
  const ModelConfig c = parse_config(ok.dump(), "c.json");
  EXPECT_EQ(layer_window(c, 0), 16);
  EXPECT_EQ(layer_window(c, 1), 16);
}

TEST_F(ModelLoadTest, HeadsNotDivisibleByKvHeads) {
  json j = base_config_json();
  j["num_key_value_heads"] = 3;
  const std::string dir = model_with_config_text("gqa", j.dump());
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir + "/config.json"), HasSubstr("num_attention_heads"),
                                     HasSubstr("num_key_value_heads")));
}

TEST_F(ModelLoadTest, ConfigFocalObjectRoundTrips) {
  for (bool learned : {false, true}) {
    ModelConfig c = small_config();
    if (learned) {
      c = learned_config(true);
    } else {
      c.focal.mode = AttnMode::kFocal;
      c.focal.focal_temp = 0.4f;
    }
    c.rope_theta = 500000.0f;
    c.rms_eps = 1e-5f;
    const ModelConfig r = parse_config(config_to_json(c), "rt.json");
    EXPECT_EQ(r.vocab_size, c.vocab_size);
    EXPECT_EQ(r.hidden, c.hidden);
    EXPECT_EQ(r.intermediate, c.intermediate);
    EXPECT_EQ(r.n_layers, c.n_layers);
    EXPECT_EQ(r.n_heads, c.n_heads);
    EXPECT_EQ(r.n_kv_heads, c.n_kv_heads);
    EXPECT_EQ(r.d_head, c.d_head);
    EXPECT_EQ(r.max_positions, c.max_positions);
    EXPECT_EQ(r.rope_theta, c.rope_theta);
    EXPECT_EQ(r.rms_eps, c.rms_eps);
    EXPECT_EQ(r.tied_embeddings, c.tied_embeddings);
    EXPECT_EQ(r.bos_id, c.bos_id);
    EXPECT_EQ(r.eos_id, c.eos_id);
    EXPECT_EQ(r.focal.mode, c.focal.mode);
    EXPECT_EQ(r.focal.focal_temp, c.focal.focal_temp);
    EXPECT_EQ(r.focal.has_tau, c.focal.has_tau);
    EXPECT_EQ(r.focal.tau_bias, c.focal.tau_bias);
    EXPECT_EQ(r.focal.tau_min, c.focal.tau_min);
    EXPECT_EQ(r.focal.tau_max, c.focal.tau_max);
    EXPECT_EQ(r.focal.tau_mode, c.focal.tau_mode);
    // And the text is a fixed point.
    EXPECT_EQ(config_to_json(r), config_to_json(c));
  }
  // A hand-written "focal" object with every learned field.
  json j = base_config_json();
  j["focal"] = {{"mode", "learned"}, {"tau_min", 2.5}, {"tau_max", 5.0}, {"tau_mode", "sequence_mean"}};
  const ModelConfig r = parse_config(j.dump(), "hand.json");
  EXPECT_EQ(r.focal.mode, AttnMode::kLearned);
  EXPECT_TRUE(r.focal.has_tau);
  EXPECT_FALSE(r.focal.tau_bias);
  EXPECT_EQ(r.focal.tau_min, 2.5f);
  EXPECT_EQ(r.focal.tau_max, 5.0f);
  EXPECT_EQ(r.focal.tau_mode, TauMode::kSequenceMean);
  j["focal"]["tau_mode"] = "sideways";
  EXPECT_THAT(error_of([&] { parse_config(j.dump(), "hand.json"); }),
              AllOf(HasSubstr("tau_mode"), HasSubstr("sideways")));
}

// ---- tensors ----

TEST_F(ModelLoadTest, MissingTensorIsNamed) {
  auto ts = random_model_tensors(small_config(), 7);
  ts.erase(find_tensor(ts, "model.layers.1.mlp.up_proj.weight"));
  const std::string dir = make_model("missing_tensor", small_config(), ts);
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir), HasSubstr("'model.layers.1.mlp.up_proj.weight' is missing")));
}

TEST_F(ModelLoadTest, ExtraTensorIsNamed) {
  auto ts = random_model_tensors(small_config(), 7);
  ts.push_back({"model.layers.0.self_attn.extra.weight", {2, 2}, {1, 2, 3, 4}});
  const std::string dir = make_model("extra_tensor", small_config(), ts);
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir + "/model.safetensors"),
                                     HasSubstr("unexpected tensor 'model.layers.0.self_attn.extra.weight'")));
  // A tensor of a layer beyond num_hidden_layers is extra too.
  ModelConfig three = small_config();
  three.n_layers = 3;
  const std::string dir3 = make_model("extra_layer", small_config(), random_model_tensors(three, 7));
  EXPECT_THAT(load_error(dir3), HasSubstr("'model.layers.2."));
}

TEST_F(ModelLoadTest, RotaryInvFreqBufferIsIgnored) {
  auto ts = random_model_tensors(small_config(), 7);
  ts.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", {4}, {1, 0.1f, 0.01f, 0.001f}});
  EXPECT_NO_THROW(Model::load(make_model("inv_freq", small_config(), ts)));
}

TEST_F(ModelLoadTest, MisnamedTensorNamesBothNames) {
  auto ts = random_model_tensors(small_config(), 7);
  find_tensor(ts, "model.layers.0.self_attn.q_proj.weight")->name = "model.layers.0.self_attn.query_proj.weight";
  const std::string dir = make_model("misnamed", small_config(), ts);
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr("'model.layers.0.self_attn.q_proj.weight' is missing"),
                                     HasSubstr("model.layers.0.self_attn.query_proj.weight")));
}

TEST_F(ModelLoadTest, WrongShapeNamesTensorAndBothShapes) {
  auto ts = random_model_tensors(small_config(), 7);
  // k_proj is [n_kv_heads*d_head, hidden] = [16, 32]; store it transposed.
  find_tensor(ts, "model.layers.1.self_attn.k_proj.weight")->shape = {32, 16};
  const std::string dir = make_model("shape", small_config(), ts);
  EXPECT_THAT(load_error(dir),
              AllOf(HasSubstr(dir + "/model.safetensors"), HasSubstr("'model.layers.1.self_attn.k_proj.weight'"),
                    HasSubstr("[32, 16]"), HasSubstr("[16, 32]")));
}

TEST_F(ModelLoadTest, UnsupportedDtypeIsNamed) {
  const std::string dir = make_model("i64");
  // Rewrite model.safetensors by hand: every tensor F32 except up_proj of layer 0, stored as I64.
  const auto ts = random_model_tensors(small_config(), 7);
  json h = json::object();
  std::string data;
  for (const auto& t : ts) {
    const bool as_i64 = t.name == "model.layers.0.mlp.up_proj.weight";
    const size_t b = data.size();
    for (float v : t.data) {
      if (as_i64) {
        const int64_t iv = (int64_t)std::lround(v * 100);
        data.append(reinterpret_cast<const char*>(&iv), 8);
      } else {
        data.append(reinterpret_cast<const char*>(&v), 4);
      }
    }
    h[t.name] = {{"dtype", as_i64 ? "I64" : "F32"}, {"shape", t.shape}, {"data_offsets", {b, data.size()}}};
  }
  write_bytes(dir + "/model.safetensors", raw_safetensors(h.dump(), data));
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir + "/model.safetensors"),
                                     HasSubstr("'model.layers.0.mlp.up_proj.weight'"), HasSubstr("I64")));
}

// ---- malformed safetensors ----

TEST_F(ModelLoadTest, HeaderLengthBeyondFile) {
  const std::string dir = make_model("hlen");
  const std::string path = dir + "/model.safetensors";
  std::string bytes = read_bytes(path);
  const uint64_t huge = (uint64_t)bytes.size() + 1000;
  std::memcpy(&bytes[0], &huge, 8);
  write_bytes(path, bytes);
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(path), HasSubstr("header length")));
  // An absurd length (would overflow 8 + hlen) is caught the same way.
  const uint64_t absurd = ~uint64_t(0) - 4;
  std::memcpy(&bytes[0], &absurd, 8);
  write_bytes(path, bytes);
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(path), HasSubstr("header length")));
}

TEST_F(ModelLoadTest, TruncatedDataArea) {
  const std::string dir = make_model("trunc");
  const std::string path = dir + "/model.safetensors";
  const std::string bytes = read_bytes(path);
  write_bytes(path, bytes.substr(0, bytes.size() - 4));
  // Data is laid out in the order random_model_tensors returns; lm_head.weight is last, so it sticks out.
  EXPECT_THAT(load_error(dir),
              AllOf(HasSubstr(path), HasSubstr("'lm_head.weight'"), HasSubstr("data_offsets"), HasSubstr("outside")));
}

TEST_F(ModelLoadTest, OverlappingDataRanges) {
  const std::string dir = make_model("overlap");
  const std::string path = dir + "/model.safetensors";
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})";
  write_bytes(path, raw_safetensors(header, std::string(24, '\0')));
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(path), HasSubstr("overlap")));
}

TEST_F(ModelLoadTest, OtherHeaderDefects) {
  const std::string path = root_ + "/x.safetensors";
  auto open_error = [&](const std::string& header, size_t n_data) {
    write_bytes(path, raw_safetensors(header, std::string(n_data, '\0')));
    return error_of([&] { SafetensorsFile f(path); });
  };
  EXPECT_THAT(open_error("{not json", 0), AllOf(HasSubstr(path), HasSubstr("malformed JSON")));
  EXPECT_THAT(open_error(R"({"a":{"dtype":"F32","shape":[4]}})", 16), AllOf(HasSubstr(path), HasSubstr("'a'")));
  EXPECT_THAT(open_error(R"({"a":{"dtype":"Q4","shape":[4],"data_offsets":[0,16]}})", 16),
              AllOf(HasSubstr("'a'"), HasSubstr("Q4")));
  // Byte range does not match shape x dtype.
  EXPECT_THAT(open_error(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16),
              AllOf(HasSubstr("'a'"), HasSubstr("12 bytes expected")));
  EXPECT_THAT(open_error(R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", 16), HasSubstr("'a'"));
  // A valid hand-written file with __metadata__ opens.
  write_bytes(path, raw_safetensors(
                        R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})",
                        std::string(16, '\0')));
  SafetensorsFile f(path);
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.tensors().at("a").shape, (std::vector<int64_t>{2, 2}));
}

TEST_F(ModelLoadTest, FileShorterThanEightBytes) {
  const std::string dir = make_model("tiny");
  const std::string path = dir + "/model.safetensors";
  write_bytes(path, "abc");
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(path), HasSubstr("truncated")));
  write_bytes(path, "");
  EXPECT_THAT(load_error(dir), HasSubstr(path));
}

TEST_F(ModelLoadTest, NoWeightFiles) {
  const std::string dir = make_model("noweights");
  ASSERT_EQ(std::remove((dir + "/model.safetensors").c_str()), 0);
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir), HasSubstr("model.safetensors")));
}

// ---- shards ----

class ShardedTest : public ModelLoadTest {
 protected:
  // Writes `ts` split in two shards plus model.safetensors.index.json; returns the directory.
  std::string make_sharded(const std::string& name, const std::vector<NamedTensor>& ts) {
    std::string dir = root_ + "/" + name;
    EXPECT_EQ(mkdir(dir.c_str(), 0755), 0);
    write_bytes(dir + "/config.json", config_to_json(small_config()));
    std::vector<NamedTensor> a(ts.begin(), ts.begin() + ts.size() / 2), b(ts.begin() + ts.size() / 2, ts.end());
    write_safetensors(dir + "/model-00001-of-00002.safetensors", a, "F32");
    write_safetensors(dir + "/model-00002-of-00002.safetensors", b, "F32");
    json idx;
    idx["metadata"] = {{"total_size", 0}};
    for (auto& t : a) idx["weight_map"][t.name] = "model-00001-of-00002.safetensors";
    for (auto& t : b) idx["weight_map"][t.name] = "model-00002-of-00002.safetensors";
    write_bytes(dir + "/model.safetensors.index.json", idx.dump(2));
    return dir;
  }
};

TEST_F(ShardedTest, ShardedLoadEqualsUnsharded) {
  const auto ts = random_model_tensors(small_config(), 7);
  auto single = Model::load(make_model("single", small_config(), ts));
  auto sharded = Model::load(make_sharded("sharded", ts));
  EXPECT_EQ(sharded->n_params(), single->n_params());
  const std::vector<float> a = logits_of(*single), b = logits_of(*sharded);
  ASSERT_EQ(a.size(), kIds.size() * 64);
  ASSERT_EQ(a.size(), b.size());
  // Bit for bit on any CPU: the same weights through the same forward, with the same shapes and threads.
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "logit " << i;
}

TEST_F(ShardedTest, IndexNamingMissingShard) {
  const std::string dir = make_sharded("missing_shard", random_model_tensors(small_config(), 7));
  ASSERT_EQ(std::remove((dir + "/model-00002-of-00002.safetensors").c_str()), 0);
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir + "/model.safetensors.index.json"),
                                     HasSubstr("model-00002-of-00002.safetensors"), HasSubstr("missing")));
}

TEST_F(ShardedTest, MalformedIndex) {
  const std::string dir = make_sharded("bad_index", random_model_tensors(small_config(), 7));
  const std::string idx = dir + "/model.safetensors.index.json";
  write_bytes(idx, "{\"weight_map\": ");
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(idx), HasSubstr("malformed JSON")));
  write_bytes(idx, "{\"metadata\": {}}");
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(idx), HasSubstr("weight_map")));
  write_bytes(idx, R"({"weight_map": {"model.norm.weight": "../elsewhere.safetensors"}})");
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(idx), HasSubstr("../elsewhere.safetensors")));
}

TEST_F(ShardedTest, TensorInTwoShards) {
  auto ts = random_model_tensors(small_config(), 7);
  const std::string dir = make_sharded("dup", ts);
  // Put model.norm.weight into the first shard as well (the index still lists both shards).
  std::vector<NamedTensor> a(ts.begin(), ts.begin() + ts.size() / 2);
  a.push_back(*find_tensor(ts, "model.norm.weight"));
  write_safetensors(dir + "/model-00001-of-00002.safetensors", a, "F32");
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr("'model.norm.weight'"), HasSubstr("model-00001-of-00002.safetensors"),
                                     HasSubstr("model-00002-of-00002.safetensors")));
}

TEST_F(ShardedTest, IndexPlacingTensorsElsewhereWarns) {
  const auto ts = random_model_tensors(small_config(), 7);
  const std::string dir = make_sharded("misplaced", ts);
  const auto as_written = Model::load(dir);  // (held: a loop over a temporary model's warnings read freed memory)
  for (const std::string& w : as_written->config().warnings)
    EXPECT_EQ(w.find("does not hold"), std::string::npos) << w;  // the index as written: no warning
  const std::string idx_path = dir + "/model.safetensors.index.json";
  json idx = json::parse(read_bytes(idx_path));
  ASSERT_EQ(idx["weight_map"]["model.norm.weight"], "model-00002-of-00002.safetensors");
  idx["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors";   // held by shard 2
  idx["weight_map"]["model.extra.weight"] = "model-00001-of-00002.safetensors";  // held by none
  write_bytes(idx_path, idx.dump(2));
  auto m = Model::load(dir);  // each tensor still comes from the shard that holds it
  const std::vector<float> a = logits_of(*m), b = logits_of(*Model::load(make_model("whole", small_config(), ts)));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "logit " << i;  // same weights, same forward
  std::string warning;
  for (const std::string& w : m->config().warnings)
    if (w.find("does not hold") != std::string::npos) warning = w;
  EXPECT_THAT(warning, AllOf(HasSubstr(idx_path), HasSubstr("places 2 tensors"), HasSubstr("one revision")));
}

// ---- half-precision weights ----

// Independent reference roundings: the compiler's _Float16 conversion (IEEE round to nearest even) and, for bfloat16,
// a choice between the two neighbouring bfloat16 values by exact distance.
#ifdef __FLT16_MANT_DIG__
float round_f16(float v) { return (float)(_Float16)v; }
float widen_f16(uint16_t h) {
  _Float16 x;
  std::memcpy(&x, &h, 2);
  return (float)x;
}
#else  // a compiler without _Float16 on this target (clang 14 on x86, as clang-tidy runs): the CPU's F16C instead
__attribute__((target("f16c"))) float round_f16(float v) { return _cvtsh_ss(_cvtss_sh(v, 0)); }
__attribute__((target("f16c"))) float widen_f16(uint16_t h) { return _cvtsh_ss(h); }
#endif
float round_bf16(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  const uint32_t lo_bits = u & 0xffff0000u, hi_bits = lo_bits + 0x10000u;
  float lo, hi;
  std::memcpy(&lo, &lo_bits, 4);
  std::memcpy(&hi, &hi_bits, 4);
  const double dlo = std::fabs((double)v - lo), dhi = std::fabs((double)hi - v);
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return ((lo_bits >> 16) & 1) ? hi : lo;
}

std::vector<float> download(const Model& m, const float* p, size_t n) {
  std::vector<float> out(n);
  m.backend().download(out.data(), p, n);
  return out;
}
std::vector<float> download(const Model& m, const Weight& w, size_t n) {
  std::vector<float> out(n);
  m.backend().download_weight(out.data(), w, n);
  return out;
}

TEST_F(ModelLoadTest, HalfPrecisionWeightsLoadRounded) {
  const ModelConfig c = small_config();
  const auto ts = random_model_tensors(c, 7);
  auto f32 = Model::load(make_model("f32", c, ts, "F32"));
  const std::vector<float> ref = logits_of(*f32);
  for (const std::string dtype : {"F16", "BF16"}) {
    SCOPED_TRACE(dtype);
    auto m = Model::load(make_model("half_" + dtype, c, ts, dtype));
    float (*round)(float) = dtype == "F16" ? round_f16 : round_bf16;
    // Weights in memory are exactly the fp32 originals rounded to the file's dtype.
    auto check = [&](const std::string& name, const auto& p) {  // a Weight (matrices) or a const float* (vectors)
      const NamedTensor& t = *find_tensor(const_cast<std::vector<NamedTensor>&>(ts), name);
      const std::vector<float> got = download(*m, p, t.data.size());
      size_t n_changed = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i], round(t.data[i])) << name << "[" << i << "] original " << t.data[i];
        n_changed += got[i] != t.data[i];
      }
      EXPECT_GT(n_changed, got.size() / 2) << name << ": values should actually have been rounded";
    };
    const Model::Weights& w = m->weights();
    check("model.embed_tokens.weight", w.embed);
    check("lm_head.weight", w.lm_head);
    check("model.norm.weight", w.final_norm);
    check("model.layers.1.self_attn.q_proj.weight", w.layers[1].wq);
    check("model.layers.0.self_attn.v_proj.weight", w.layers[0].wv);
    check("model.layers.1.mlp.down_proj.weight", w.layers[1].w_down);
    check("model.layers.0.input_layernorm.weight", w.layers[0].attn_norm);

    // Logits stay close to the F32 model. Each weight carries a relative rounding error of at most 2^-12 (F16) or
    // 2^-9 (BF16), random in sign; through 2 layers these add up to a small multiple of that in the logits.
    // Measured with this seed: 1.3e-3 (F16) and 1.4e-2 (BF16) of max |logit|, about the 8x ratio of the two
    // roundings. The bounds leave ~3.5x headroom and stay far below what a wrong conversion (bytes read as the
    // wrong type, swapped halves: O(1) errors) would give.
    const std::vector<float> got = logits_of(*m);
    ASSERT_EQ(got.size(), ref.size());
    const double err = test::rel_max_err(got.data(), ref.data(), ref.size());
    EXPECT_LT(err, dtype == "F16" ? 5e-3 : 5e-2) << "relative max logit error";
    EXPECT_GT(err, 0.0) << "rounded weights should change the logits a little";
  }
}

TEST(HalfConversion, SpecialValues) {
  EXPECT_EQ(math::half_bits_to_float(0x3c00), 1.0f);
  EXPECT_EQ(math::half_bits_to_float(0xc000), -2.0f);
  EXPECT_EQ(math::half_bits_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(math::half_bits_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(math::half_bits_to_float(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_TRUE(std::isinf(math::half_bits_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(math::half_bits_to_float(0x7e00)));
  EXPECT_TRUE(std::signbit(math::half_bits_to_float(0x8000)));
  EXPECT_EQ(math::bf16_bits_to_float(0x3f80), 1.0f);
  EXPECT_EQ(math::bf16_bits_to_float(0xc040), -3.0f);
  // Every fp16 bit pattern agrees with the compiler's conversion.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = (uint16_t)b;
    const float want = widen_f16(h), got = math::half_bits_to_float(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << b;
    } else {
      ASSERT_EQ(got, want) << std::hex << b;
    }
  }
}

// ---- learned temperature weights ----

TEST_F(ModelLoadTest, LearnedConfigWithoutTauWeights) {
  const std::string dir = make_model("learned_no_tau", learned_config(false), random_model_tensors(small_config(), 7));
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir + "/config.json"), HasSubstr("learned"), HasSubstr("tau_proj")));
}

TEST_F(ModelLoadTest, TauWeightsWithoutLearnedMode) {
  const std::string dir = make_model("tau_no_learned", small_config(), random_model_tensors(learned_config(false), 7));
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir + "/config.json"), HasSubstr("tau_proj"), HasSubstr("learned")));
}

TEST_F(ModelLoadTest, TauWeightsWithBiasWithoutLearnedMode) {
  // The realistic case (focal init --attn learned writes a tau bias): config.json lost its "focal" object. The
  // message should say what to add to config.json, not only that a bias tensor is unexpected.
  const std::string dir =
      make_model("tau_bias_no_learned", small_config(), random_model_tensors(learned_config(true), 7));
  EXPECT_THAT(load_error(dir), AllOf(HasSubstr(dir + "/config.json"), HasSubstr("tau_proj"), HasSubstr("learned")));
}

TEST_F(ModelLoadTest, LearnedModelLoads) {
  for (bool bias : {false, true}) {
    const ModelConfig c = learned_config(bias);
    auto m = Model::load(make_model(bias ? "learned_b" : "learned", c, random_model_tensors(c, 7)));
    EXPECT_EQ(m->config().focal.mode, AttnMode::kLearned);
    EXPECT_TRUE(m->weights().layers[1].tau_w);
    if (bias) { EXPECT_FLOAT_EQ(*m->weights().layers[1].tau_b, 0.5f * (c.focal.tau_min + c.focal.tau_max)); }
    TempSpec s = TempSpec::native(m->config());
    EXPECT_EQ(s.mode, AttnMode::kLearned);
    EXPECT_NO_THROW(s.validate(m->config()));
  }
  // Learned mode with tau_bias declared but the bias tensor absent.
  ModelConfig c = learned_config(true);
  const std::string dir = make_model("learned_no_bias", c, random_model_tensors(learned_config(false), 7));
  EXPECT_THAT(load_error(dir), HasSubstr("'model.layers.0.self_attn.tau_proj.bias' is missing"));
}

TEST_F(ModelLoadTest, QkNormDetectedFromWeights) {
  ModelConfig c = small_config();
  c.qk_norm = true;
  auto ts = random_model_tensors(c, 7);
  auto m = Model::load(make_model("qknorm", small_config(), ts));
  EXPECT_TRUE(m->config().qk_norm);
  // Only one layer has them: the other layer's are missing.
  ts.erase(find_tensor(ts, "model.layers.1.self_attn.k_norm.weight"));
  EXPECT_THAT(load_error(make_model("qknorm_partial", small_config(), ts)),
              HasSubstr("'model.layers.1.self_attn.k_norm.weight' is missing"));
}

// ---- tokenizer ----

TEST_F(ModelLoadTest, MissingTokenizer) {
  const std::string dir = make_model("notok");
  auto m = Model::load(dir);
  EXPECT_EQ(m->tokenizer(), nullptr);
  EXPECT_THAT(error_of([&] { m->require_tokenizer(); }), AllOf(HasSubstr(dir), HasSubstr("tokenizer.model")));
}

TEST_F(ModelLoadTest, CorruptTokenizer) {
  const std::string dir = make_model("badtok");
  write_bytes(dir + "/tokenizer.model", "this is not a sentencepiece model protobuf \x01\x02\x03");
  EXPECT_THAT(load_error(dir), HasSubstr(dir + "/tokenizer.model"));
  EXPECT_THAT(error_of([&] { Tokenizer::load(root_ + "/nope.model"); }), HasSubstr(root_ + "/nope.model"));
}

// A real sentencepiece model trained into `dir` with the spm_train tool (~0.1 s); empty on failure. Byte fallback
// reserves 256 pieces, so the vocabulary must exceed 256 + the corpus characters.
std::string train_tokenizer(const std::string& dir) {
  const std::string text = dir + "/corpus.txt";
  {
    std::ofstream f(text);
    for (int i = 0; i < 60; ++i)
      f << "The quick brown fox " << i << " jumps over the lazy dog while attention heads focus on tokens.\n"
        << "Temperature scaling sharpens the softmax; entropy falls as the focal temperature drops.\n";
  }
  const std::string cmd = "spm_train --input='" + text + "' --model_prefix='" + dir +
                          "/tok' --vocab_size=384 --model_type=bpe --byte_fallback=true --character_coverage=1.0 "
                          "--bos_id=1 --eos_id=2 --unk_id=0 --pad_id=-1 --minloglevel=2 > '" +
                          dir + "/spm.log' 2>&1";
  if (std::system(cmd.c_str()) != 0) return std::string();
  return dir + "/tok.model";
}

TEST_F(ModelLoadTest, TokenizerLoadsAndMustFitVocabulary) {
  const std::string tok = train_tokenizer(root_);
  ASSERT_FALSE(tok.empty()) << "spm_train failed";
  ModelConfig c = small_config();
  c.vocab_size = 384;
  auto ts = random_model_tensors(c, 3);
  const std::string dir = root_ + "/withtok";
  write_model_dir(dir, c, ts, "F32", tok);
  auto m = Model::load(dir);
  ASSERT_NE(m->tokenizer(), nullptr);
  EXPECT_EQ(m->tokenizer()->vocab_size(), 384);
  EXPECT_EQ(m->tokenizer()->bos_id(), 1);
  EXPECT_EQ(&m->require_tokenizer(), m->tokenizer());
  const auto ids = m->tokenizer()->encode("the quick brown fox", true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(m->tokenizer()->decode(std::vector<int32_t>(ids.begin() + 1, ids.end())), "the quick brown fox");
  {  // the model's control and unknown pieces written in the text are those tokens, the text between them encoded
     // on its own (as transformers' Llama tokenizers split special tokens out); they were encoded as < / s >
    const Tokenizer& t = *m->tokenizer();
    std::vector<int32_t> want = t.encode("the fox", false);
    want.push_back(2);
    const std::vector<int32_t> jumps = t.encode("jumps", false);
    want.insert(want.end(), jumps.begin(), jumps.end());
    EXPECT_EQ(t.encode("the fox</s>jumps", false), want);
    EXPECT_EQ(t.encode("<s>", false), std::vector<int32_t>{1});
    EXPECT_EQ(t.encode("<unk>", true), (std::vector<int32_t>{1, 0}));
    // the bundled models' tokenizer against transformers 4.47.1 (LlamaTokenizer and LlamaTokenizerFast agree):
    // "<s> bos text </s>" -> [1, 1, 274, 391, 3297, 2], "a</s>b" -> [1, 260, 2, 274]
    const std::unique_ptr<Tokenizer> bundled =
        Tokenizer::load(std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4/tokenizer.model");
    EXPECT_EQ(bundled->encode("<s> bos text </s>", true), (std::vector<int32_t>{1, 1, 274, 391, 3297, 2}));
    EXPECT_EQ(bundled->encode("a</s>b", true), (std::vector<int32_t>{1, 260, 2, 274}));
  }

  // Tokens tokenizer_config.json adds past tokenizer.model's pieces (Phi-3's chat tokens): decoded as their text,
  // shown as their piece (one of them made the whole decode empty, its piece "<?>"); add_bos_token false there is
  // taken (config.json's was read alone).
  {
    ModelConfig c2 = c;
    c2.vocab_size = 388;
    const std::string dir3 = root_ + "/withtok_added";
    write_model_dir(dir3, c2, random_model_tensors(c2, 3), "F32", tok);
    write_bytes(dir3 + "/tokenizer_config.json",
                R"({"tokenizer_class": "LlamaTokenizer", "add_bos_token": false, "added_tokens_decoder": {)"
                R"("1": {"content": "<s>", "special": true}, "386": {"content": "<|end|>", "special": true}}})");
    auto m3 = Model::load(dir3);
    const Tokenizer& t3 = m3->require_tokenizer();
    EXPECT_FALSE(m3->config().add_bos);
    const std::vector<int32_t> fox = t3.encode("the quick brown fox", false);
    std::vector<int32_t> with_end = fox;
    with_end.push_back(386);
    EXPECT_EQ(t3.decode(with_end), "the quick brown fox<|end|>");
    std::vector<int32_t> end_first = {386};
    end_first.insert(end_first.end(), fox.begin(), fox.end());
    EXPECT_EQ(t3.decode(end_first), "<|end|> the quick brown fox");  // the word-start space kept after it
    EXPECT_EQ(t3.piece(386), "<|end|>");
    EXPECT_EQ(t3.decode({1, fox[0]}), t3.decode({fox[0]})) << "tokenizer.model's own <s> decodes as before";
  }

  // The same tokenizer next to a model with a smaller vocabulary is refused, naming both sides.
  const std::string dir2 = root_ + "/tok_too_big";
  write_model_dir(dir2, small_config(), random_model_tensors(small_config(), 3), "F32", tok);
  EXPECT_THAT(load_error(dir2), AllOf(HasSubstr(dir2 + "/tokenizer.model"), HasSubstr("vocab_size")));
}

// ---- TempSpec ----

TEST(TempSpecTest, ValidateRejectsBadTemperatures) {
  const ModelConfig c = small_config();
  for (float t : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(t);
    EXPECT_THAT(error_of([&] { TempSpec::focal(t).validate(c); }), HasSubstr("focal_temp = "));
    TempSpec s;
    s.layer_temp[1] = t;
    EXPECT_THAT(error_of([&] { s.validate(c); }), HasSubstr("layer_temp[1] = "));
    TempSpec h;
    h.head_temp[{0, 3}] = t;
    EXPECT_THAT(error_of([&] { h.validate(c); }), HasSubstr("head_temp[0:3] = "));
    TempSpec ss;
    ss.mode = AttnMode::kSsmax;
    ss.ssmax_s = t;
    EXPECT_THAT(error_of([&] { ss.validate(c); }), HasSubstr("ssmax_s = "));
  }
  EXPECT_NO_THROW(TempSpec::focal(0.4f).validate(c));
  EXPECT_NO_THROW(TempSpec::standard().validate(c));
}

TEST(TempSpecTest, ValidateRejectsOutOfRangeLayersAndHeads) {
  const ModelConfig c = small_config();
  for (int l : {-1, 2, 99}) {
    TempSpec s;
    s.layer_temp[l] = 0.5f;
    EXPECT_THAT(error_of([&] { s.validate(c); }), AllOf(HasSubstr("layer_temp[" + std::to_string(l) + "]"),
                                                        HasSubstr("out of range"), Not(HasSubstr("--"))));
    TempSpec h;
    h.head_temp[{l, 0}] = 0.5f;
    EXPECT_THAT(error_of([&] { h.validate(c); }),
                AllOf(HasSubstr("head_temp[" + std::to_string(l) + ":0]"), HasSubstr("layer")));
  }
  for (int hd : {-1, 4}) {
    TempSpec h;
    h.head_temp[{1, hd}] = 0.5f;
    EXPECT_THAT(error_of([&] { h.validate(c); }),
                AllOf(HasSubstr("head_temp[1:" + std::to_string(hd) + "]"), HasSubstr("head " + std::to_string(hd))));
  }
  TempSpec ok;
  ok.layer_temp[1] = 0.5f;
  ok.head_temp[{1, 3}] = 0.3f;
  EXPECT_NO_THROW(ok.validate(c));
}

TEST(TempSpecTest, LearnedNeedsLearnedModel) {
  TempSpec s;
  s.mode = AttnMode::kLearned;
  EXPECT_THAT(error_of([&] { s.validate(small_config()); }),
              AllOf(HasSubstr("mode = learned"), HasSubstr("learned"), Not(HasSubstr("--"))));
  EXPECT_NO_THROW(s.validate(learned_config(false)));
  s.tau_scale = 0.0f;
  EXPECT_THAT(error_of([&] { s.validate(learned_config(false)); }), HasSubstr("tau_scale = 0"));
}

TEST(TempSpecTest, JsonRoundTrip) {
  TempSpec s;
  s.mode = AttnMode::kFocal;
  s.focal_temp = 0.4f;
  s.layer_temp[0] = 0.7f;
  s.layer_temp[3] = 0.25f;
  s.head_temp[{1, 2}] = 0.3f;
  s.head_temp[{0, 0}] = 1.5f;
  s.tau_scale = 0.8f;
  s.ssmax_s = 1.25f;
  const TempSpec r = TempSpec::from_json(s.to_json(), "spec");
  EXPECT_EQ(r.mode, s.mode);
  EXPECT_EQ(r.focal_temp, s.focal_temp);
  EXPECT_EQ(r.layer_temp, s.layer_temp);
  EXPECT_EQ(r.head_temp, s.head_temp);
  // the JSON records what applied: another mode's number (tau_scale, ssmax_s under focal) never scaled a logit
  EXPECT_EQ(r.tau_scale, 1.0f);
  EXPECT_EQ(r.ssmax_s, 1.0f);
  EXPECT_EQ(r.to_json(), s.to_json());
  for (AttnMode m : {AttnMode::kStandard, AttnMode::kLearned, AttnMode::kSsmax}) {
    TempSpec t = s;  // t = 0.4, tau_scale 0.8, ssmax_s 1.25 set; each mode keeps its own
    t.mode = m;
    const TempSpec u = TempSpec::from_json(t.to_json(), "spec");
    EXPECT_EQ(u.mode, m);
    EXPECT_EQ(u.focal_temp, 1.0f);
    EXPECT_EQ(u.tau_scale, m == AttnMode::kLearned ? 0.8f : 1.0f);
    EXPECT_EQ(u.ssmax_s, m == AttnMode::kSsmax ? 1.25f : 1.0f);
    EXPECT_EQ(u.layer_temp, s.layer_temp);
  }
  EXPECT_THAT(error_of([&] { TempSpec::from_json("{\"focal_temp\": 1", "runs/focal_t0.4"); }),
              HasSubstr("runs/focal_t0.4"));
  EXPECT_THAT(error_of([&] { TempSpec::from_json("{\"focal_temp\": 1}", "runs/x"); }), HasSubstr("runs/x"));
  EXPECT_THAT(error_of([&] { TempSpec::from_json("{\"mode\": \"weird\"}", "runs/y"); }),
              AllOf(HasSubstr("runs/y"), HasSubstr("weird")));
}

TEST(TempSpecTest, Labels) {
  EXPECT_EQ(TempSpec::standard().label(), "standard");
  EXPECT_EQ(TempSpec::focal(0.4f).label(), "focal_t0.4");
  EXPECT_EQ(TempSpec::focal(1.0f).label(), "focal_t1");
  TempSpec l;
  l.mode = AttnMode::kLearned;
  EXPECT_EQ(l.label(), "learned");
  l.tau_scale = 0.8f;
  EXPECT_EQ(l.label(), "learned_x0.8");
  TempSpec s;
  s.mode = AttnMode::kSsmax;
  EXPECT_EQ(s.label(), "ssmax_s1");
  TempSpec o = TempSpec::focal(0.4f);
  o.layer_temp[0] = 0.5f;
  EXPECT_EQ(o.label(), "focal_t0.4+overrides");
  TempSpec oh;
  oh.head_temp[{0, 1}] = 0.5f;
  EXPECT_EQ(oh.label(), "standard+overrides");
}

TEST(TempSpecTest, NativeFollowsConfig) {
  ModelConfig c = small_config();
  EXPECT_EQ(TempSpec::native(c).mode, AttnMode::kStandard);
  c.focal.mode = AttnMode::kFocal;
  c.focal.focal_temp = 0.3f;
  EXPECT_EQ(TempSpec::native(c).mode, AttnMode::kFocal);
  EXPECT_EQ(TempSpec::native(c).focal_temp, 0.3f);
}

// ---- capture requests ----

TEST(CaptureRequestTest, Validation) {
  const ModelConfig c = small_config();  // 2 layers, 4 heads, context 64
  CaptureRequest r;
  EXPECT_NO_THROW(validate_capture_request(c, 10, r, 2));
  EXPECT_THAT(error_of([&] { validate_capture_request(c, 0, r, 1); }), HasSubstr("empty"));
  // Past the context a rotary model runs (warned by the callers); learned absolute positions have no row for it.
  EXPECT_NO_THROW(validate_capture_request(c, 65, r, 1));
  ModelConfig learned = c;
  learned.arch.position = PositionKind::kLearned;
  EXPECT_THAT(error_of([&] { validate_capture_request(learned, 65, r, 1); }),
              AllOf(HasSubstr("65"), HasSubstr("64"), HasSubstr("max_position_embeddings")));
  EXPECT_NO_THROW(validate_capture_request(learned, 64, r, 1));

  auto with = [&](auto edit) {
    CaptureRequest q;
    edit(q);
    return error_of([&] { validate_capture_request(c, 10, q, 1); });
  };
  EXPECT_THAT(with([](CaptureRequest& q) {
                q.layers = {0, 2};
              }),
              AllOf(HasSubstr("layers lists layer 2"), Not(HasSubstr("--"))));
  EXPECT_THAT(with([](CaptureRequest& q) { q.layers = {-1}; }), HasSubstr("layers lists layer -1"));
  EXPECT_THAT(with([](CaptureRequest& q) { q.layers = {1, 1}; }), AllOf(HasSubstr("layers"), HasSubstr("twice")));
  EXPECT_THAT(with([](CaptureRequest& q) { q.heads = {4}; }),
              AllOf(HasSubstr("heads lists head 4"), HasSubstr("0..3")));
  EXPECT_THAT(with([](CaptureRequest& q) {
                q.heads = {3, 0, 3};
              }),
              AllOf(HasSubstr("heads lists head 3 twice"), HasSubstr("twice")));
  EXPECT_THAT(with([](CaptureRequest& q) { q.queries = {10}; }),
              AllOf(HasSubstr("queries lists query position 10"), HasSubstr("0..9")));
  EXPECT_THAT(with([](CaptureRequest& q) { q.queries = {5, 5}; }), AllOf(HasSubstr("queries"), HasSubstr("twice")));
  EXPECT_THAT(with([](CaptureRequest& q) { q.run.relevant = {10}; }), HasSubstr("relevant position 10 ≥ T = 10"));
  // R sums p over a set of keys: a key listed twice counted twice (R up to 2, noise below 0).
  EXPECT_THAT(with([](CaptureRequest& q) {
                q.run.relevant = {2, 5, 2};
              }),
              HasSubstr("relevant lists key position 2 twice"));
  EXPECT_THAT(with([](CaptureRequest& q) { q.topk_tokens = 0; }), HasSubstr("topk_tokens = 0"));

  // Over budget: the error's field is budget_bytes (a front end names its own control: --budget, budget=), the
  // message what to narrow, in no front end's words.
  const std::string msg = with([](CaptureRequest& q) { q.budget_bytes = 1024; });
  EXPECT_THAT(msg, AllOf(HasSubstr("over the memory budget of 1.0 KiB"), HasSubstr("layers, heads or queries"),
                         HasSubstr("store metrics only"), Not(HasSubstr("--")), Not(HasSubstr("budget_bytes"))));
  try {
    CaptureRequest q;
    q.budget_bytes = 1024;
    validate_capture_request(c, 10, q, 1);
    ADD_FAILURE() << "over the budget";
  } catch (const Error& e) { EXPECT_EQ(e.field(), "budget_bytes"); }
  // Each error names its field, so a front end can point at its own control for it.
  try {
    validate_capture_request(
        c, 10,
        [] {
          CaptureRequest q;
          q.run.relevant = {99};
          return q;
        }(),
        1);
    ADD_FAILURE() << "relevant position 99 of 10 tokens should be refused";
  } catch (const Error& e) { EXPECT_EQ(e.field(), "relevant"); }
  // The budget covers all runs: a request that fits once does not fit many times.
  CaptureRequest q;
  q.budget_bytes = estimate_capture_bytes(c, 10, q);
  EXPECT_NO_THROW(validate_capture_request(c, 10, q, 1));
  EXPECT_THAT(error_of([&] { validate_capture_request(c, 10, q, 2); }), HasSubstr("over the memory budget"));
}

TEST(CaptureRequestTest, EstimateShrinksWithSelection) {
  const ModelConfig c = small_config();
  CaptureRequest all, narrow, metrics_only;
  narrow.layers = {1};
  narrow.heads = {0};
  narrow.queries = {9};
  metrics_only.store_probs = metrics_only.store_scores = false;
  const size_t a = estimate_capture_bytes(c, 32, all), n = estimate_capture_bytes(c, 32, narrow),
               m = estimate_capture_bytes(c, 32, metrics_only);
  EXPECT_LT(n, a);
  EXPECT_LT(m, n);
  // probs + scores of every row: 2 x L x H x T x T floats at least.
  EXPECT_GE(a, 2u * 2 * 4 * 32 * 32 * sizeof(float));
}

}  // namespace
}  // namespace focal
