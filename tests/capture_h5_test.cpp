// Tests of the HDF5 capture and sweep files: fp32 and fp16 round trips, byte-identical rewrites, atomic writes, and
// the errors a user sees for unwritable paths and foreign files. Set FOCAL_CAPTURE_SAMPLE=path to keep a sample
// capture (for examples/read_capture.py).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "focal/capture.h"
#include "focal/error.h"
#include "h5_io.h"

// LeakSanitizer, where the build has it, leaves out what libhdf5 allocated: it keeps some memory of a failed read of
// a damaged file (and the readers deliberately leak after a failed variable-length read, h5_io.h), which is not
// what these tests are about; the project's own leaks are still reported.
extern "C" const char* __lsan_default_suppressions() {  // NOLINT(bugprone-reserved-identifier)
  return "leak:libhdf5\n";
}

namespace focal {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the test temp dir, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::path(testing::TempDir()) / "capture_h5_XXXXXX").string();
    if (!mkdtemp(&tmpl[0])) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> leftover_temporaries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
  return out;
}

// Every row metric of one attention row p[0..n) (n visible keys).
void row_metrics(const float* p, int n, int topk_k, const std::vector<int32_t>& relevant, float* m) {
  double h = 0, max_p = 0, tail = 0;
  for (int j = 0; j < n; ++j) {
    if (p[j] > 0) h -= p[j] * std::log(double(p[j]));
    max_p = std::max(max_p, double(p[j]));
    if (p[j] < 1.0 / n) tail += p[j];
  }
  std::vector<float> sorted(p, p + n);
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  double topk = 0;
  for (int j = 0; j < std::min(n, topk_k); ++j) topk += sorted[j];
  double rel = 0;
  bool any = false;
  for (int32_t j : relevant)
    if (j < n) rel += p[j], any = true;
  m[kEntropyNats] = float(h);
  m[kEntropyNorm] = n > 1 ? float(h / std::log(double(n))) : 0.0f;
  m[kEffSupport] = float(std::exp(h));
  m[kMaxProb] = float(max_p);
  m[kTopkMass] = float(topk);
  m[kTailMass] = float(tail);
  m[kSinkMass] = p[0];
  m[kRelevantMass] = any ? float(rel) : std::nanf("");
}

struct Shape {
  int n_layers = 2, n_heads = 4, n_tokens = 12, d_head = 8;
};

// Raw scores of every (layer, head, query, key) of a fake model: [L, H, T, T], 0 beyond the query.
std::vector<float> fake_scores(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  const int T = s.n_tokens;
  std::vector<float> raw(size_t(s.n_layers) * s.n_heads * T * T, 0.0f);
  for (int l = 0; l < s.n_layers; ++l)
    for (int h = 0; h < s.n_heads; ++h)
      for (int q = 0; q < T; ++q)
        for (int k = 0; k <= q; ++k)
          raw[((size_t(l) * s.n_heads + h) * T + q) * T + k] = normal(rng) + (k == 0 ? 2.0f : 0.0f);  // a sink
  return raw;
}

// A run consistent with the raw scores: probs = causal softmax(raw * multiplier), metrics of every row, row_scale,
// optional learned tau (then multiplier = sqrt(d_head) / tau per layer and row).
RunCapture fake_run(const Shape& s, const std::string& name, const std::vector<float>& raw, float focal_temp,
                    bool learned, std::vector<int> layers, std::vector<int> heads, std::vector<int> queries,
                    bool store_scores, const std::vector<int32_t>& relevant, uint32_t seed) {
  const int L = s.n_layers, H = s.n_heads, T = s.n_tokens, M = kNumRowMetrics, k = 3;
  RunCapture run;
  run.name = name;
  run.temp_spec_json = learned ? R"({"mode":"learned","tau_scale":1})"
                               : R"({"mode":"focal","focal_temp":)" + std::to_string(focal_temp) + "}";
  run.topk_mass_k = 2;
  run.layers = std::move(layers);
  run.heads = std::move(heads);
  run.queries = std::move(queries);
  run.metrics.assign(size_t(L) * H * T * M, 0.0f);
  run.row_scale.assign(size_t(L) * H * T, 0.0f);
  if (learned) {
    run.tau.resize(size_t(L) * T);
    for (int l = 0; l < L; ++l)
      for (int q = 0; q < T; ++q) run.tau[size_t(l) * T + q] = 2.0f + 0.1f * float(l + q % 5);
  }
  std::vector<float> all_probs(size_t(L) * H * T * T, 0.0f);  // [L, H, T, T]
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h)
      for (int q = 0; q < T; ++q) {
        const size_t row = (size_t(l) * H + h) * T + q;
        const float mult = learned ? std::sqrt(float(s.d_head)) / run.tau[size_t(l) * T + q] : 1.0f / focal_temp;
        run.row_scale[row] = mult;
        const float* r = &raw[row * T];
        float* p = &all_probs[row * T];
        float mx = -1e30f;
        for (int j = 0; j <= q; ++j) mx = std::max(mx, r[j] * mult);
        double sum = 0;
        for (int j = 0; j <= q; ++j) sum += (p[j] = std::exp(r[j] * mult - mx));
        for (int j = 0; j <= q; ++j) p[j] = float(p[j] / sum);
        row_metrics(p, q + 1, run.topk_mass_k, relevant, &run.metrics[row * M]);
      }
  for (int l : run.layers)
    for (int h : run.heads)
      for (int q : run.queries) {
        const size_t row = (size_t(l) * H + h) * T + q;
        run.probs.insert(run.probs.end(), &all_probs[row * T], &all_probs[row * T] + T);
        if (store_scores) run.scores.insert(run.scores.end(), &raw[row * T], &raw[row * T] + T);
      }
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, 999);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int t = 0; t < T; ++t) {
    float left = 1.0f;
    for (int j = 0; j < k; ++j) {
      run.topk_ids.push_back(id(rng));
      run.topk_probs.push_back(left *= 0.5f * u(rng));
    }
    run.token_nll.push_back(t + 1 < T ? 5.0f * u(rng) : std::nanf(""));
  }
  return run;
}

// KL and JS of two runs with the same selection.
Comparison fake_comparison(const RunCapture& a, const RunCapture& b, int T) {
  Comparison c;
  c.run_a = a.name;
  c.run_b = b.name;
  c.layers = a.layers;
  c.heads = a.heads;
  c.queries = a.queries;
  for (size_t row = 0; row * T < a.probs.size(); ++row) {
    const float* p = &a.probs[row * T];
    const float* q = &b.probs[row * T];
    double kl = 0, js = 0;
    for (int j = 0; j < T; ++j) {
      const double m = 0.5 * (p[j] + q[j]);
      if (p[j] > 0) kl += p[j] * std::log(p[j] / double(q[j])), js += 0.5 * p[j] * std::log(p[j] / m);
      if (q[j] > 0) js += 0.5 * q[j] * std::log(q[j] / m);
    }
    c.kl.push_back(float(kl));
    c.js.push_back(float(js));
  }
  return c;
}

std::vector<int> iota(int n) {
  std::vector<int> v(size_t(n), 0);
  for (int i = 0; i < n; ++i) v[size_t(i)] = i;
  return v;
}

// Three runs (standard and focal over every row with scores, learned on a few rows with tau and no scores), one
// comparison, no relevant keys, fixed created_utc.
CaptureFile fake_capture(const Shape& s = Shape()) {
  CaptureFile f;
  f.model_path = "/models/tiny-focal";
  f.model_config_json = R"({"hidden_size": 32, "num_hidden_layers": 2, "focal": {"mode": "learned"}})";
  f.weights_checksum = 0xcbf29ce484222325ull;
  f.tool_version = "0.1.0";
  f.created_utc = "2024-05-06T07:08:09Z";
  f.device = "cuda";
  f.precision = "fast";
  f.tokenizer = "tokenizer.json (sentencepiece-style BPE)";
  f.n_layers = s.n_layers;
  f.n_heads = s.n_heads;
  f.d_head = s.d_head;
  const std::vector<std::string> words = {"<s>", " The", " café", " ",  "\u00e9t\u00e9", "\n", " \u5927",
                                          "-",   "ok",   "",      " x", "\\x00"};
  for (int t = 0; t < s.n_tokens; ++t) {
    f.token_ids.push_back(t == 0 ? 1 : 100 + 7 * t);
    f.pieces.push_back(words[size_t(t) % words.size()]);
  }
  const std::vector<float> raw = fake_scores(s, 7);
  const std::vector<int> all_l = iota(s.n_layers), all_h = iota(s.n_heads), all_q = iota(s.n_tokens);
  f.runs.push_back(fake_run(s, "standard", raw, 1.0f, false, all_l, all_h, all_q, true, f.relevant, 1));
  f.runs.push_back(fake_run(s, "focal_t0.5", raw, 0.5f, false, all_l, all_h, all_q, true, f.relevant, 2));
  if (s.n_layers > 1 && s.n_heads > 3 && s.n_tokens > 11)
    f.runs.push_back(fake_run(s, "learned", raw, 1.0f, true, {1}, {1, 3}, {2, 5, 11}, false, f.relevant, 3));
  f.comparisons.push_back(fake_comparison(f.runs[0], f.runs[1], s.n_tokens));
  return f;
}

// Bitwise equality (NaN included).
void expect_same(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  if (!a.empty()) { EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << what; }
}

void expect_same_capture(const CaptureFile& a, const CaptureFile& b, bool fp16_probs) {
  EXPECT_EQ(a.model_path, b.model_path);
  EXPECT_EQ(a.model_config_json, b.model_config_json);
  EXPECT_EQ(a.weights_checksum, b.weights_checksum);
  EXPECT_EQ(a.tool_version, b.tool_version);
  EXPECT_EQ(a.created_utc, b.created_utc);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.precision, b.precision);
  EXPECT_EQ(a.tokenizer, b.tokenizer);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.d_head, b.d_head);
  EXPECT_EQ(a.token_ids, b.token_ids);
  EXPECT_EQ(a.pieces, b.pieces);
  EXPECT_EQ(a.relevant, b.relevant);
  EXPECT_EQ(a.n_prompt_tokens, b.n_prompt_tokens);
  ASSERT_EQ(a.runs.size(), b.runs.size());
  for (size_t i = 0; i < a.runs.size(); ++i) {
    const RunCapture &x = a.runs[i], &y = b.runs[i];
    SCOPED_TRACE("run " + x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.temp_spec_json, y.temp_spec_json);
    EXPECT_EQ(x.topk_mass_k, y.topk_mass_k);
    EXPECT_EQ(x.layers, y.layers);
    EXPECT_EQ(x.heads, y.heads);
    EXPECT_EQ(x.queries, y.queries);
    if (fp16_probs) {
      ASSERT_EQ(x.probs.size(), y.probs.size());
      for (size_t j = 0; j < x.probs.size(); ++j)  // half: 11-bit significand; 6e-8 is the smallest subnormal
        ASSERT_NEAR(x.probs[j], y.probs[j], 1e-3 * std::fabs(x.probs[j]) + 6e-8) << "probs[" << j << "]";
    } else {
      expect_same(x.probs, y.probs, "probs");
    }
    expect_same(x.scores, y.scores, "scores");
    expect_same(x.metrics, y.metrics, "metrics");
    expect_same(x.row_scale, y.row_scale, "row_scale");
    expect_same(x.tau, y.tau, "tau");
    EXPECT_EQ(x.topk_ids, y.topk_ids);
    EXPECT_EQ(x.topk_pieces, y.topk_pieces);
    expect_same(x.topk_probs, y.topk_probs, "topk_probs");
    expect_same(x.token_nll, y.token_nll, "token_nll");
  }
  ASSERT_EQ(a.comparisons.size(), b.comparisons.size());
  for (size_t i = 0; i < a.comparisons.size(); ++i) {
    const Comparison &x = a.comparisons[i], &y = b.comparisons[i];
    EXPECT_EQ(x.run_a, y.run_a);
    EXPECT_EQ(x.run_b, y.run_b);
    EXPECT_EQ(x.layers, y.layers);
    EXPECT_EQ(x.heads, y.heads);
    EXPECT_EQ(x.queries, y.queries);
    expect_same(x.kl, y.kl, "kl");
    expect_same(x.js, y.js, "js");
  }
}

// what() of the Error that fn throws; fails the test if it throws nothing or something else.
template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) { return e.what(); } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-focal exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

TEST(CaptureH5, RoundTripFp32) {
  TempDir dir;
  const CaptureFile f = fake_capture();
  ASSERT_TRUE(f.relevant.empty());
  ASSERT_FALSE(f.runs[2].tau.empty());
  ASSERT_TRUE(f.runs[2].scores.empty());
  const std::string path = dir.file("cap.h5");
  write_capture(f, path);
  expect_same_capture(f, read_capture(path), false);
  if (const char* keep = std::getenv("FOCAL_CAPTURE_SAMPLE")) write_capture(f, keep);
}

// A generation capture past a learned position table's end (GPT-2) re-runs the first max_positions tokens and says
// so; a rotary model's runs them all (hand values).
TEST(GenerationCapture, ALearnedPositionTableEndsTheTokensCaptured) {
  ModelConfig c;
  c.max_positions = 128;
  c.arch.position = PositionKind::kLearned;
  std::string note;
  EXPECT_EQ(generation_capture_tokens(c, 128, &note), 128u);
  EXPECT_EQ(note, "");
  EXPECT_EQ(generation_capture_tokens(c, 129, &note), 128u);
  EXPECT_NE(note.find("the first 128 of the 129 tokens"), std::string::npos) << note;
  c.arch.position = PositionKind::kRope;
  EXPECT_EQ(generation_capture_tokens(c, 300, &note), 300u);
  EXPECT_EQ(note, "");
}

// A run of another model (the app's two-models export) keeps that model's path and checksum; the other runs have none.
TEST(CaptureH5, ARunOfAnotherModelKeepsItsModel) {
  TempDir dir;
  CaptureFile f = fake_capture();
  f.runs[1].model_path = "/models/standard";
  f.runs[1].weights_checksum = 0x0123456789abcdefULL;
  const std::string path = dir.file("two.h5");
  write_capture(f, path);
  const CaptureFile r = read_capture(path);
  EXPECT_EQ(r.runs[0].model_path, "");
  EXPECT_EQ(r.runs[0].weights_checksum, 0u);
  EXPECT_EQ(r.runs[1].model_path, "/models/standard");
  EXPECT_EQ(r.runs[1].weights_checksum, 0x0123456789abcdefULL);
}

// A file written before device and precision were recorded (no such attributes) reads them as empty.
TEST(CaptureH5, ProvenanceWithoutDeviceAndPrecisionReadsEmpty) {
  TempDir dir;
  CaptureFile f = fake_capture();
  f.device.clear();
  f.precision.clear();
  f.tokenizer.clear();
  const std::string path = dir.file("old.h5");
  write_capture(f, path);
  const CaptureFile r = read_capture(path);
  EXPECT_EQ(r.device, "");
  EXPECT_EQ(r.precision, "");
  EXPECT_EQ(r.tokenizer, "");
  EXPECT_EQ(r.model_path, f.model_path);
}

// The text of the next-token top-k (topk_pieces) round-trips, unicode and empty strings included; a run without it
// (a model without a tokenizer, a file written before it was stored) has no dataset and reads empty; a count that
// is not one per top-k id is refused before anything is written.
TEST(CaptureH5, TopkPiecesRoundTripAndAreOptional) {
  TempDir dir;
  CaptureFile f = fake_capture();
  const std::vector<std::string> words = {" the", "\u00e9t\u00e9", "", "\n", " \u5927", "<s>"};
  RunCapture& r0 = f.runs[0];
  ASSERT_FALSE(r0.topk_ids.empty());
  for (size_t i = 0; i < r0.topk_ids.size(); ++i) r0.topk_pieces.push_back(words[i % words.size()]);
  ASSERT_TRUE(f.runs[1].topk_pieces.empty());
  const std::string path = dir.file("pieces.h5");
  write_capture(f, path);
  const CaptureFile g = read_capture(path);
  expect_same_capture(f, g, false);
  EXPECT_EQ(g.runs[0].topk_pieces.size(), g.runs[0].topk_ids.size());
  EXPECT_TRUE(g.runs[1].topk_pieces.empty());
  f.runs[0].topk_pieces.pop_back();
  const std::string bad = dir.file("bad.h5");
  const std::string err = error_of([&] { write_capture(f, bad); });
  EXPECT_NE(err.find("topk_pieces"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(bad));
}

// A generation capture records where the prompt ends (root attribute n_prompt_tokens); a capture of a prompt alone,
// like every file written before the attribute existed, has none and reads as all prompt.
TEST(CaptureH5, PromptBoundaryRoundTripsAndIsAbsentFromPromptCaptures) {
  TempDir dir;
  CaptureFile f = fake_capture();
  const int T = f.n_tokens();
  ASSERT_GE(T, 4);
  f.n_prompt_tokens = 3;
  const std::string gen = dir.file("gen.h5");
  write_capture(f, gen);
  const CaptureFile g = read_capture(gen);
  expect_same_capture(f, g, false);
  EXPECT_EQ(g.n_prompt_tokens, 3);
  EXPECT_EQ(g.prompt_end(), 3);
  EXPECT_TRUE(g.has_generated());
  {
    h5::H5Call call;
    h5::FileId file(H5Fopen(gen.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    ASSERT_GE(file.get(), 0);
    EXPECT_GT(H5Aexists(file.get(), "n_prompt_tokens"), 0);
  }

  const std::string plain = dir.file("plain.h5");
  write_capture(fake_capture(), plain);  // n_prompt_tokens 0: not written
  {
    h5::H5Call call;
    h5::FileId file(H5Fopen(plain.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    ASSERT_GE(file.get(), 0);
    EXPECT_EQ(H5Aexists(file.get(), "n_prompt_tokens"), 0);
  }
  const CaptureFile p = read_capture(plain);
  EXPECT_EQ(p.n_prompt_tokens, 0);
  EXPECT_EQ(p.prompt_end(), T);
  EXPECT_FALSE(p.has_generated());

  // n_prompt_tokens == T (nothing generated, e.g. generation stopped at once) is kept but marks nothing.
  f.n_prompt_tokens = T;
  write_capture(f, gen);
  EXPECT_EQ(read_capture(gen).n_prompt_tokens, T);
  EXPECT_FALSE(read_capture(gen).has_generated());

  // Out of range: refused before writing (the existing file stays) and, forged into a file, when reading.
  f.n_prompt_tokens = T + 1;
  std::string msg = error_of([&] { write_capture(f, gen); });
  EXPECT_NE(msg.find("n_prompt_tokens = " + std::to_string(T + 1)), std::string::npos) << msg;
  EXPECT_EQ(read_capture(gen).n_prompt_tokens, T);
  for (int forged : {0, -2, T + 1}) {
    {
      h5::H5Call call;
      h5::FileId file(H5Fopen(gen.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
      ASSERT_GE(file.get(), 0);
      const int32_t v = forged;
      h5::AttrId a(H5Aopen(file.get(), "n_prompt_tokens", H5P_DEFAULT));
      ASSERT_GE(a.get(), 0);
      ASSERT_GE(H5Awrite(a.get(), H5T_NATIVE_INT32, &v), 0);
      // Forged as another tool would write it, without the checksum over the root's attributes (which would refuse
      // the edit first): the reader's own check of the value is what is tested.
      for (const char* name : {h5::kAttrsCrcAttr, h5::kAttrsCrcNamesAttr}) {
        if (H5Aexists(file.get(), name) <= 0) continue;
        ASSERT_GE(H5Adelete(file.get(), name), 0);
      }
    }
    msg = error_of([&] { read_capture(gen); });
    EXPECT_NE(msg.find(gen), std::string::npos) << msg;
    EXPECT_NE(msg.find("n_prompt_tokens"), std::string::npos) << msg;
  }
}

// The parallel chunk writer (h5_chunks.cpp) against HDF5's own filter pipeline as the oracle: one file holds each
// dataset twice, once through H5Dwrite (the library shuffles and deflates) and once through write_chunks_deflated.
// Every stored chunk must be the same bytes with the same filter mask, and both must read back to the input exactly.
// Shapes with edge chunks along different axes, 4- and 2-byte elements, data that compresses and data that does not.
TEST(CaptureH5, ParallelChunkWriterStoresWhatTheFilterPipelineStores) {
  TempDir dir;
  const std::string path = dir.file("chunks.h5");
  struct Case {
    h5::Dims dims, chunk;
    hid_t type;
    bool compressible;
  };
  const std::vector<Case> cases = {{{3, 2, 70, 37}, {1, 1, 64, 37}, H5T_STD_U32LE, true},
                                   {{2, 5, 9, 4}, {1, 2, 9, 4}, H5T_STD_U32LE, false},
                                   {{4, 130}, {3, 64}, H5T_STD_U16LE, true},
                                   {{1000}, {1000}, H5T_STD_U16LE, false}};
  std::mt19937 rng(7);
  h5::H5Call call;
  h5::FileId file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  ASSERT_GE(file.get(), 0);
  const h5::Where where{"test"};
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    SCOPED_TRACE(ci);
    const size_t n = h5::n_elements(c.dims), es = H5Tget_size(c.type);
    std::vector<unsigned char> data(n * es);
    for (size_t i = 0; i < n; ++i) {  // compressible: small integers; else random bytes
      const uint32_t v = c.compressible ? uint32_t(rng() % 5) : uint32_t(rng());
      std::memcpy(&data[i * es], &v, es);
    }
    h5::SpaceId space(H5Screate_simple(int(c.dims.size()), c.dims.data(), nullptr));
    h5::PlistId dcpl(H5Pcreate(H5P_DATASET_CREATE));
    ASSERT_GE(H5Pset_chunk(dcpl.get(), int(c.chunk.size()), c.chunk.data()), 0);
    ASSERT_GE(H5Pset_shuffle(dcpl.get()), 0);
    ASSERT_GE(H5Pset_deflate(dcpl.get(), 4), 0);
    const std::string lib_name = "lib" + std::to_string(ci), par_name = "par" + std::to_string(ci);
    h5::DatasetId lib(
        H5Dcreate2(file.get(), lib_name.c_str(), c.type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
    h5::DatasetId par(
        H5Dcreate2(file.get(), par_name.c_str(), c.type, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT));
    ASSERT_GE(H5Dwrite(lib.get(), c.type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()), 0);
    h5::write_chunks_deflated(
        par.get(), par_name, where, c.dims, c.chunk, es,
        [&](size_t first, size_t count, unsigned char* dst) { std::memcpy(dst, &data[first * es], count * es); }, 4);

    size_t n_chunks = 1;  // every chunk of the grid, row-major
    for (size_t d = 0; d < c.dims.size(); ++d) n_chunks *= size_t((c.dims[d] + c.chunk[d] - 1) / c.chunk[d]);
    for (size_t k = 0; k < n_chunks; ++k) {
      h5::Dims offset(c.dims.size());
      for (size_t d = c.dims.size(), rem = k; d-- > 0;) {
        const size_t nd = size_t((c.dims[d] + c.chunk[d] - 1) / c.chunk[d]);
        offset[d] = hsize_t(rem % nd) * c.chunk[d];
        rem /= nd;
      }
      unsigned mask_lib = 0, mask_par = 0;
      hsize_t size_lib = 0, size_par = 0;
      ASSERT_GE(H5Dget_chunk_storage_size(lib.get(), offset.data(), &size_lib), 0);
      ASSERT_GE(H5Dget_chunk_storage_size(par.get(), offset.data(), &size_par), 0);
      ASSERT_GT(size_lib, 0u) << "chunk " << k;
      ASSERT_EQ(size_lib, size_par) << "chunk " << k;
      std::vector<unsigned char> a(size_lib), b(size_par);
      ASSERT_GE(H5Dread_chunk(lib.get(), H5P_DEFAULT, offset.data(), &mask_lib, a.data()), 0);
      ASSERT_GE(H5Dread_chunk(par.get(), H5P_DEFAULT, offset.data(), &mask_par, b.data()), 0);
      EXPECT_EQ(mask_lib, mask_par);
      EXPECT_TRUE(a == b) << "chunk " << k << " differs";
      if (c.compressible) { EXPECT_LT(size_lib, h5::n_elements(c.chunk) * es / 2) << "chunk " << k; }
    }
    std::vector<unsigned char> back(n * es, 0xAB);
    ASSERT_GE(H5Dread(par.get(), c.type, H5S_ALL, H5S_ALL, H5P_DEFAULT, back.data()), 0);
    EXPECT_TRUE(back == data);
  }
}

TEST(CaptureH5, RoundTripFp16) {
  TempDir dir;
  const CaptureFile f = fake_capture(Shape{2, 4, 96, 8});
  write_capture(f, dir.file("fp32.h5"), false);
  write_capture(f, dir.file("fp16.h5"), true);
  expect_same_capture(f, read_capture(dir.file("fp16.h5")), true);
  EXPECT_LT(fs::file_size(dir.file("fp16.h5")), fs::file_size(dir.file("fp32.h5")));
}

// The float16 value nearest to x (ties to the even significand), from a table of every finite half.
float reference_half(float x) {
  static const std::vector<double> table = [] {
    std::vector<double> t;
    for (int e = 0; e < 31; ++e)
      for (int m = 0; m < 1024; ++m) t.push_back(e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
    t.push_back(65536.0);  // where inf would sit if the exponent went on (bit pattern 0x7c00)
    return t;              // ascending; index = bit pattern
  }();
  const double a = std::fabs(double(x));
  size_t hi = size_t(std::lower_bound(table.begin(), table.end(), a) - table.begin());
  if (hi == table.size()) return std::copysign(INFINITY, x);
  size_t best = hi;
  if (hi > 0) {
    const double dl = a - table[hi - 1], dh = table[hi] - a;
    if (dl < dh || (dl == dh && (hi - 1) % 2 == 0)) best = hi - 1;
  }
  if (best == table.size() - 1) return std::copysign(INFINITY, x);
  return float(std::copysign(table[best], double(x)));
}

TEST(CaptureH5, Fp16RoundsToNearestEven) {
  TempDir dir;
  Shape s{1, 1, 64, 8};
  CaptureFile f = fake_capture(s);
  f.runs.resize(1);
  f.comparisons.clear();
  std::vector<float>& p = f.runs[0].probs;  // [1, 1, 64, 64]: overwrite with awkward values
  const std::vector<float> edges = {
      0.0f,         1.0f,           0.99999f,  0.0019530231f,      std::nextafter(0.001953125f, 0.0f),
      0.000976562f, 6.1035156e-05f, 6.09e-05f, 5.96e-8f,           2.98e-8f,
      2.99e-8f,     1e-9f,          3.0e-5f,   0.5f + 1.0f / 4096, 0.5f + 3.0f / 4096,
      1.0f / 3,     65504.0f,       65519.0f,  65520.0f,           -0.25f,
      -1e-6f};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> log10u(-9.0f, 0.0f);
  for (size_t i = 0; i < p.size(); ++i) p[i] = i < edges.size() ? edges[i] : std::pow(10.0f, log10u(rng));
  write_capture(f, dir.file("half.h5"), true);
  const std::vector<float> back = read_capture(dir.file("half.h5")).runs[0].probs;
  ASSERT_EQ(back.size(), p.size());
  for (size_t i = 0; i < p.size(); ++i) ASSERT_EQ(back[i], reference_half(p[i])) << "probs[" << i << "] = " << p[i];
}

TEST(CaptureH5, EmptyTokensRunsAndSelections) {
  TempDir dir;
  CaptureFile f;
  f.created_utc = "2024-01-01T00:00:00Z";
  f.n_layers = 2;
  f.n_heads = 3;
  f.d_head = 4;
  RunCapture run;
  run.name = "standard";
  f.runs.push_back(run);  // no tokens: every dataset has a zero-size dim
  write_capture(f, dir.file("empty.h5"), true);
  expect_same_capture(f, read_capture(dir.file("empty.h5")), true);

  // Tokens without pieces (a model without a tokenizer), a run with an empty query selection and no top-k.
  CaptureFile g = fake_capture();
  g.pieces.clear();
  g.runs[0].queries.clear();
  g.runs[0].probs.clear();
  g.runs[0].scores.clear();
  g.runs[0].topk_ids.clear();
  g.runs[0].topk_probs.clear();
  g.comparisons.clear();
  write_capture(g, dir.file("partial.h5"));
  expect_same_capture(g, read_capture(dir.file("partial.h5")), false);
}

TEST(CaptureH5, RewriteIsByteIdentical) {
  TempDir dir;
  const CaptureFile f = fake_capture();
  SweepFile s;
  s.created_utc = "2024-01-01T00:00:00Z";
  s.focal_temps = {0.5f, 1.0f};
  s.mean_nll = {3.0f, 2.5f};
  write_capture(f, dir.file("a.h5"), true);
  write_sweep(s, dir.file("s1.h5"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // any stored timestamp would now differ
  write_capture(f, dir.file("b.h5"), true);
  write_sweep(s, dir.file("s2.h5"));
  const std::string a = read_bytes(dir.file("a.h5")), b = read_bytes(dir.file("b.h5"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "two writes of the same capture differ";
  EXPECT_EQ(0, std::system(("cmp -s '" + dir.file("a.h5") + "' '" + dir.file("b.h5") + "'").c_str()));
  EXPECT_TRUE(read_bytes(dir.file("s1.h5")) == read_bytes(dir.file("s2.h5")));
}

TEST(CaptureH5, EmptyCreatedUtcIsFilledWithTheTime) {
  TempDir dir;
  CaptureFile f = fake_capture();
  f.created_utc.clear();
  write_capture(f, dir.file("now.h5"));
  const std::string t = read_capture(dir.file("now.h5")).created_utc;
  ASSERT_EQ(t.size(), 20u) << t;  // 2024-05-06T07:08:09Z
  EXPECT_EQ(t[4], '-');
  EXPECT_EQ(t[10], 'T');
  EXPECT_EQ(t.back(), 'Z');
}

TEST(CaptureH5, UnwritablePathThrowsAndLeavesNothing) {
  const CaptureFile f = fake_capture();
  for (const std::string path : {"/proc/nonexistent/x.h5", "/nonexistent-focalscope-dir/sub/x.h5"}) {
    const std::string msg = error_of([&] { write_capture(f, path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
    EXPECT_FALSE(fs::exists(path));
  }
  if (geteuid() != 0) {  // root writes anywhere, so the permission case only means something for a normal user
    TempDir dir;
    fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
    const std::string path = dir.file("x.h5");
    const std::string msg = error_of([&] { write_capture(f, path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find("permission denied"), std::string::npos) << msg;
    fs::permissions(dir.path(), fs::perms::owner_all);
    EXPECT_TRUE(fs::is_empty(dir.path()));
  }
}

TEST(CaptureH5, FailedRenameRemovesTheTemporary) {
  TempDir dir;
  const std::string path = dir.file("occupied");
  fs::create_directory(path);
  std::ofstream(path + "/keep") << "x";  // a non-empty directory: the final rename must fail
  const std::string msg = error_of([&] { write_capture(fake_capture(), path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_TRUE(leftover_temporaries(dir.path()).empty());
  EXPECT_TRUE(fs::is_directory(path));
}

TEST(CaptureH5, InvalidCaptureKeepsTheExistingFile) {
  TempDir dir;
  const std::string path = dir.file("cap.h5");
  const CaptureFile good = fake_capture();
  write_capture(good, path);
  const std::string before = read_bytes(path);

  CaptureFile bad = good;
  bad.runs[1].probs.pop_back();
  std::string msg = error_of([&] { write_capture(bad, path); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("focal_t0.5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("probs"), std::string::npos) << msg;

  bad = good;
  bad.runs[0].queries[3] = 99;
  msg = error_of([&] { write_capture(bad, path); });
  EXPECT_NE(msg.find("queries[3] = 99"), std::string::npos) << msg;

  bad = good;
  bad.runs[1].name = "standard";
  msg = error_of([&] { write_capture(bad, path); });
  EXPECT_NE(msg.find("two runs"), std::string::npos) << msg;

  bad = good;
  bad.runs[1].name = "a/b";
  msg = error_of([&] { write_capture(bad, path); });
  EXPECT_NE(msg.find("'a/b'"), std::string::npos) << msg;

  EXPECT_TRUE(read_bytes(path) == before);
  EXPECT_TRUE(leftover_temporaries(dir.path()).empty());
}

// Every dataset of `path` carries crc32 and every object with attributes attrs_crc32 and attrs_crc32_names
// (h5_io.h); returns the objects that lack one.
std::string missing_checksums(const std::string& path) {
  const h5::H5Call lock;
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) return "cannot open " + path;
  std::string missing;
  auto check = [&](hid_t obj, const std::string& name) {
    bool has_attrs = false;
    hsize_t idx = 0;
    H5Aiterate2(
        obj, H5_INDEX_NAME, H5_ITER_INC, &idx,
        [](hid_t o, const char* name, const H5A_info_t*, void* data) -> herr_t {
          (void)o, (void)name;
          *static_cast<bool*>(data) = true;
          return 0;
        },
        &has_attrs);
    if (has_attrs && H5Aexists(obj, h5::kAttrsCrcAttr) <= 0) missing += " " + name + "@attrs_crc32";
    if (has_attrs && H5Aexists(obj, h5::kAttrsCrcNamesAttr) <= 0) missing += " " + name + "@attrs_crc32_names";
    if (H5Iget_type(obj) == H5I_DATASET && H5Aexists(obj, h5::kCrcAttr) <= 0) missing += " " + name + "@crc32";
  };
  const hid_t root = H5Oopen(file, "/", H5P_DEFAULT);
  check(root, "/");
  struct Ctx {
    decltype(check)* fn;
  } ctx{&check};
  H5Ovisit(
      root, H5_INDEX_NAME, H5_ITER_INC,
      [](hid_t o, const char* name, const H5O_info_t*, void* data) -> herr_t {
        if (std::strcmp(name, ".") == 0) return 0;
        const hid_t obj = H5Oopen(o, name, H5P_DEFAULT);
        (*static_cast<Ctx*>(data)->fn)(obj, std::string("/") + name);
        H5Oclose(obj);
        return 0;
      },
      &ctx);
  H5Oclose(root);
  H5Fclose(file);
  return missing;
}

TEST(CaptureH5, EveryDatasetAndTextAttributeIsChecksummed) {
  TempDir dir;
  write_capture(fake_capture(), dir.file("c.h5"), true);
  EXPECT_EQ(missing_checksums(dir.file("c.h5")), "");
  SweepFile s;
  s.focal_temps = {0.5f, 1.0f};
  s.mean_nll = {3.0f, 2.5f};
  write_sweep(s, dir.file("s.h5"));
  EXPECT_EQ(missing_checksums(dir.file("s.h5")), "");
}

// Damage that keeps every stored byte of a checksummed attribute: its type (a byte-order bit: d_head 32 read as
// 536870912), a checksum attribute removed with its list left, a link leading to another object (a run's probs at
// its scores). Each is refused as damage; the copy is opened under a new name so the damaged-file check runs.
TEST(CaptureH5, DamageThatKeepsTheCheckedBytesIsRefused) {
  TempDir dir;
  write_capture(fake_capture(), dir.file("c.h5"));
  int n = 0;
  auto refused = [&](const std::function<void(hid_t file)>& spoil) {
    const std::string path = dir.file("spoiled" + std::to_string(n++) + ".h5");
    fs::copy_file(dir.file("c.h5"), path);
    {
      const h5::H5Call call;
      h5::FileId file(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
      EXPECT_GE(file.get(), 0);
      spoil(file.get());
    }
    return error_of([&] { read_capture(path); });
  };
  std::string msg = refused([](hid_t file) {
    int32_t v = 0;
    h5::AttrId a(H5Aopen(file, "d_head", H5P_DEFAULT));
    H5Aread(a.get(), H5T_STD_I32LE, &v);  // the stored little-endian bytes
    a.reset();
    H5Adelete(file, "d_head");
    h5::SpaceId s(H5Screate(H5S_SCALAR));
    h5::AttrId be(H5Acreate2(file, "d_head", H5T_STD_I32BE, s.get(), H5P_DEFAULT, H5P_DEFAULT));
    H5Awrite(be.get(), H5T_STD_I32BE, &v);  // the same bytes, now read big-endian
  });
  EXPECT_NE(msg.find("'d_head' has a stored type focalscope does not write"), std::string::npos) << msg;
  msg = refused([](hid_t file) { H5Adelete(file, h5::kAttrsCrcAttr); });
  EXPECT_NE(msg.find("attrs_crc32_names lists them but attrs_crc32 is missing"), std::string::npos) << msg;
  msg = refused([](hid_t file) {
    H5Ldelete(file, "runs/standard/probs", H5P_DEFAULT);
    H5Lcreate_hard(file, "runs/standard/scores", file, "runs/standard/probs", H5P_DEFAULT, H5P_DEFAULT);
  });
  EXPECT_NE(msg.find("damaged"), std::string::npos) << msg;
}

// Single-bit flips anywhere in a capture (fp16 and fp32 probabilities): each one is refused with an error naming
// the file, or changes nothing the reader returns (a flip in padding or free space). The oracle: the capture read
// back and written again gives the bytes of the original (writes are byte-identical). Without the content
// checksums 5.8 % of flips changed what was read silently. FOCAL_BITFLIP_TRIALS sets the flips per file (200).
TEST(CaptureH5, EveryBitFlipIsRefusedOrHarmless) {
  TempDir dir;
  int trials = 200;
  if (const char* v = std::getenv("FOCAL_BITFLIP_TRIALS")) trials = std::atoi(v);
  std::mt19937_64 rng(12345);
  for (const bool fp16 : {true, false}) {
    SCOPED_TRACE(fp16 ? "fp16 probabilities" : "fp32 probabilities");
    const std::string orig = dir.file("orig.h5");
    write_capture(fake_capture(), orig, fp16);
    const std::string bytes = read_bytes(orig);
    write_capture(read_capture(orig), dir.file("clean.h5"), fp16);
    ASSERT_TRUE(read_bytes(dir.file("clean.h5")) == bytes) << "a rewrite differs from the original: no oracle";
    int refused = 0, harmless = 0;
    std::string silent;  // byte.bit of each flip read back as other data without an error
    for (int i = 0; i < trials; ++i) {
      const size_t bit = size_t(rng() % (bytes.size() * 8));
      std::string flipped = bytes;
      flipped[bit / 8] = char(flipped[bit / 8] ^ (1 << (bit % 8)));
      // Its own name: the damaged-file check caches its verdict by path.
      const std::string path = dir.file("flip" + std::to_string(fp16) + "_" + std::to_string(i) + ".h5");
      std::ofstream(path, std::ios::binary) << flipped;
      try {
        const CaptureFile got = read_capture(path);
        write_capture(got, dir.file("again.h5"), fp16);
        if (read_bytes(dir.file("again.h5")) == bytes)
          ++harmless;
        else
          silent += " " + std::to_string(bit / 8) + "." + std::to_string(bit % 8);
      } catch (const Error& e) {
        ++refused;
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      }
      fs::remove(path);
    }
    std::printf("%zu bytes, %d flips: %d refused, %d harmless\n", bytes.size(), trials, refused, harmless);
    EXPECT_EQ(silent, "") << "flips (byte.bit) that changed what the reader returns without an error";
    EXPECT_GT(refused, trials / 4);  // most bytes are data or checksummed metadata
  }
}

TEST(CaptureH5, ReadErrorsNameTheFile) {
  TempDir dir;
  const std::string missing = dir.file("missing.h5");
  std::string msg = error_of([&] { read_capture(missing); });
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;
  EXPECT_NE(msg.find("no such file"), std::string::npos) << msg;

  const std::string text = dir.file("notes.txt");
  std::ofstream(text) << "not an hdf5 file\n";
  msg = error_of([&] { read_capture(text); });
  EXPECT_NE(msg.find(text), std::string::npos) << msg;
  EXPECT_NE(msg.find("not an HDF5 file"), std::string::npos) << msg;
  msg = error_of([&] { read_sweep(text); });
  EXPECT_NE(msg.find(text), std::string::npos) << msg;

  msg = error_of([&] { read_capture(dir.path().string()); });
  EXPECT_NE(msg.find("directory"), std::string::npos) << msg;

  // Valid HDF5, wrong kind, both ways round.
  SweepFile s;
  s.focal_temps = {1.0f};
  s.mean_nll = {2.0f};
  const std::string sweep = dir.file("sweep.h5");
  write_sweep(s, sweep);
  msg = error_of([&] { read_capture(sweep); });
  EXPECT_NE(msg.find(sweep), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a focalscope capture"), std::string::npos) << msg;
  EXPECT_NE(msg.find("focalscope-sweep"), std::string::npos) << msg;

  const std::string cap = dir.file("cap.h5");
  write_capture(fake_capture(), cap);
  msg = error_of([&] { read_sweep(cap); });
  EXPECT_NE(msg.find(cap), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a focalscope sweep"), std::string::npos) << msg;

  // A truncated capture is HDF5-looking at best; whatever fails, the message names the file.
  const std::string bytes = read_bytes(cap);
  const std::string cut = dir.file("cut.h5");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  msg = error_of([&] { read_capture(cut); });
  EXPECT_NE(msg.find(cut), std::string::npos) << msg;
}

TEST(CaptureH5, SweepRoundTrip) {
  TempDir dir;
  SweepFile s;
  s.model_path = "/models/tiny";
  s.model_config_json = "{}";
  s.tool_version = "0.1.0";
  s.created_utc = "2024-02-03T04:05:06Z";
  s.weights_checksum = 0xffffffffffffffffull;
  s.base_spec_json = R"({"mode":"focal","focal_temp":1})";
  s.n_layers = 3;
  s.n_heads = 2;
  s.token_ids = {1, 5, 9, 2};
  s.focal_temps = {0.25f, 0.5f, 1.0f, 2.0f};
  for (size_t i = 0; i < s.focal_temps.size() * 3 * 2 * kNumRowMetrics; ++i) s.head_metrics.push_back(0.01f * i);
  s.head_metrics[5] = std::nanf("");
  s.mean_nll = {4.0f, 3.5f, 3.25f, 3.5f};
  write_sweep(s, dir.file("sweep.h5"));
  const SweepFile r = read_sweep(dir.file("sweep.h5"));
  EXPECT_EQ(r.model_path, s.model_path);
  EXPECT_EQ(r.model_config_json, s.model_config_json);
  EXPECT_EQ(r.tool_version, s.tool_version);
  EXPECT_EQ(r.created_utc, s.created_utc);
  EXPECT_EQ(r.weights_checksum, s.weights_checksum);
  EXPECT_EQ(r.base_spec_json, s.base_spec_json);
  EXPECT_EQ(r.n_layers, s.n_layers);
  EXPECT_EQ(r.n_heads, s.n_heads);
  EXPECT_EQ(r.token_ids, s.token_ids);
  expect_same(r.focal_temps, s.focal_temps, "focal_temps");
  expect_same(r.head_metrics, s.head_metrics, "head_metrics");
  expect_same(r.mean_nll, s.mean_nll, "mean_nll");

  SweepFile bad = s;
  bad.mean_nll.pop_back();
  const std::string msg = error_of([&] { write_sweep(bad, dir.file("bad.h5")); });
  EXPECT_NE(msg.find("mean_nll"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(dir.file("bad.h5")));
}

TEST(CaptureH5, FinalNameAppearsOnlyWhenWritten) {
  TempDir dir;
  const std::string path = dir.file("cap.h5");
  EXPECT_FALSE(fs::exists(path));
  write_capture(fake_capture(), path);
  EXPECT_TRUE(fs::exists(path));
  EXPECT_TRUE(leftover_temporaries(dir.path()).empty());
  write_capture(fake_capture(), path, true);  // replacing an existing file goes through a temporary too
  EXPECT_TRUE(leftover_temporaries(dir.path()).empty());
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(CaptureH5, LargeAttributesAndUnicodeNames) {
  TempDir dir;
  CaptureFile f = fake_capture();
  f.model_config_json = std::string(200000, 'x');  // beyond HDF5's 64 KiB compact attribute limit
  f.runs[1].name = "focal_t0.5 \u00e9";
  f.comparisons[0].run_b = f.runs[1].name;
  f.relevant = {0, 3};
  write_capture(f, dir.file("big.h5"));
  expect_same_capture(f, read_capture(dir.file("big.h5")), false);
}

TEST(CaptureH5, FindRun) {
  const CaptureFile f = fake_capture();
  ASSERT_NE(f.find_run("learned"), nullptr);
  EXPECT_EQ(f.find_run("learned")->name, "learned");
  EXPECT_EQ(f.find_run("focal_t0.5"), &f.runs[1]);
  EXPECT_EQ(f.find_run("missing"), nullptr);
}

TEST(CaptureH5, ConcurrentCallsAreSerialized) {
  TempDir dir;
  const CaptureFile f = fake_capture();
  std::vector<std::thread> threads;
  threads.reserve(4);
  std::vector<int> ok(4, 0);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      const std::string path = dir.file("t" + std::to_string(i) + ".h5");
      for (int rep = 0; rep < 3; ++rep) {
        write_capture(f, path, i % 2 == 1);
        if (read_capture(path).runs.size() != f.runs.size()) return;
      }
      ok[size_t(i)] = 1;
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok, std::vector<int>(4, 1));
}

// Issue 20: the reader's memory budget. The capture's datasets in memory: its tokens, rows, metrics and the rest. A
// budget just below what the file's datasets need is refused naming a dataset and the number; the exact total reads.
TEST(CaptureH5, ReadBudgetIsCheckedBeforeAllocating) {
  TempDir dir;
  const CaptureFile f = fake_capture();
  const std::string path = dir.file("cap.h5");
  write_capture(f, path);
  // Bytes the reader allocates for numeric datasets (4 bytes an element) and strings (pointer + std::string each).
  uint64_t need =
      4 * (f.token_ids.size() + f.relevant.size()) + f.pieces.size() * (sizeof(char*) + sizeof(std::string));
  for (const RunCapture& r : f.runs)
    need +=
        4 * (r.layers.size() + r.heads.size() + r.queries.size() + r.probs.size() + r.scores.size() + r.metrics.size() +
             r.row_scale.size() + r.tau.size() + r.topk_ids.size() + r.topk_probs.size() + r.token_nll.size());
  for (const Comparison& c : f.comparisons)
    need += 4 * (c.layers.size() + c.heads.size() + c.queries.size() + c.kl.size() + c.js.size());
  expect_same_capture(f, read_capture(path, need), false);
  const std::string msg = error_of([&] { read_capture(path, need - 1); });
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("read budget"), std::string::npos) << msg;
  // The last dataset read is the last comparison's js, one byte short.
  ASSERT_FALSE(f.comparisons.empty());
  const std::string js = "/js of shape [" + std::to_string(f.comparisons.back().layers.size()) + ", " +
                         std::to_string(f.comparisons.back().heads.size()) + ", " +
                         std::to_string(f.comparisons.back().queries.size()) + "] needs " +
                         std::to_string(4 * f.comparisons.back().js.size()) + " bytes";
  EXPECT_NE(msg.find(js), std::string::npos) << msg;
}

}  // namespace
// The derived numbers of focal/capture.h on a hand-made run: head means skip row 0 (one visible key) and NaN rows,
// prompt loss averages positions 0..T-2, and stored rows are found by model index.
TEST(DerivedNumbers, HeadMeansPromptLossAndStoredRows) {
  const int L = 2, H = 3, T = 4;
  RunCapture run;
  run.metrics.assign((size_t)L * H * T * kNumRowMetrics, 0.0f);
  auto at = [&](int l, int h, int i, int m) -> float& {
    return run.metrics[(((size_t)l * H + h) * T + i) * kNumRowMetrics + m];
  };
  at(1, 2, 0, kMaxProb) = 100.0f;  // row 0: left out
  at(1, 2, 1, kMaxProb) = 0.5f;
  at(1, 2, 2, kMaxProb) = NAN;  // skipped
  at(1, 2, 3, kMaxProb) = 0.25f;
  EXPECT_DOUBLE_EQ(head_metric_mean(run, H, T, 1, 2, kMaxProb), 0.375);
  for (int i = 1; i < T; ++i) at(0, 1, i, kSinkMass) = NAN;
  EXPECT_TRUE(std::isnan(head_metric_mean(run, H, T, 0, 1, kSinkMass)));
  at(0, 0, 0, kEntropyNats) = 2.0f;  // a one-token prompt: row 0 is all there is
  EXPECT_DOUBLE_EQ(head_metric_mean(run, H, 1, 0, 0, kEntropyNats), 2.0);

  run.token_nll = {1.0f, 2.0f, 4.5f, NAN};  // the last position predicts nothing
  EXPECT_DOUBLE_EQ(prompt_loss(run), 2.5);
  run.token_nll = {NAN};
  EXPECT_TRUE(std::isnan(prompt_loss(run)));

  // A generation of 2 tokens after a 3-token prompt (T = 5): the prompt's loss is that of its tokens 1 and 2
  // (positions 0, 1), the generated tokens' that of tokens 3 and 4 (positions 2, 3).
  run.token_nll = {1.0f, 2.0f, 4.5f, 0.5f, NAN};
  EXPECT_DOUBLE_EQ(prompt_loss(run, 3), 1.5);
  EXPECT_DOUBLE_EQ(generated_loss(run, 3), 2.5);
  EXPECT_DOUBLE_EQ(prompt_loss(run), 2.0);     // all four predictions
  EXPECT_DOUBLE_EQ(prompt_loss(run, 5), 2.0);  // n_prompt = T: all prompt
  EXPECT_TRUE(std::isnan(generated_loss(run, 5)));
  EXPECT_TRUE(std::isnan(generated_loss(run, 0)));
  EXPECT_DOUBLE_EQ(generated_loss(run, 1), 2.0);  // a one-token prompt predicts nothing of itself
  EXPECT_TRUE(std::isnan(prompt_loss(run, 1)));

  run.layers = {1, 3};
  run.heads = {0, 2};
  run.queries = {5, 7, 9};
  const int n_tokens = 10;
  EXPECT_EQ(stored_row_offset(run, 1, 1, 2, n_tokens), (size_t)(((1 * 2 + 1) * 3 + 2) * n_tokens));
  EXPECT_EQ(find_stored_row(run, 3, 2, 9, n_tokens), (std::ptrdiff_t)stored_row_offset(run, 1, 1, 2, n_tokens));
  EXPECT_EQ(find_stored_row(run, 1, 0, 5, n_tokens), 0);
  EXPECT_EQ(find_stored_row(run, 2, 0, 5, n_tokens), -1);  // layer 2 not stored
  EXPECT_EQ(find_stored_row(run, 1, 1, 5, n_tokens), -1);  // head 1 not stored
  EXPECT_EQ(find_stored_row(run, 1, 0, 6, n_tokens), -1);  // query 6 not stored
}

}  // namespace focal
