// Loss by position (`focal eval --positions`, batch/position_loss.h): the per-document bucket sums against a naive
// computation from every logits row of one forward, the means, the bootstrap band's limits, the file round trip,
// the refusals, and the command end to end with its figure.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "focal/capture.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal/model_writer.h"
#include "focal_batch/position_loss.h"
#include "test_util.h"

namespace focal {
namespace {

// A random LLaMA with a trained context of 24 positions and the bundled sentencepiece tokenizer.
std::string tiny_model_dir() {
  static const std::string dir = [] {
    std::string d = test::make_temp_dir("posloss_model");
    ModelConfig c;
    c.vocab_size = 4096;
    c.hidden = 32;
    c.intermediate = 64;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.d_head = 8;
    c.max_positions = 24;
    c.bos_id = 1;
    c.eos_id = 2;
    write_model_dir(d, c, random_model_tensors(c, 7), "F32",
                    std::string(FOCAL_SOURCE_DIR) + "/assets/models/tokenizer.model");
    return d;
  }();
  return dir;
}

std::string write_corpus(const std::string& dir, const std::vector<std::string>& docs) {
  std::string path = dir + "/corpus.txt";
  std::ofstream f(path);
  for (const std::string& d : docs) f << d << "\n\n";
  return path;
}

const std::vector<std::string> kDocs = {
    "The river ran past the old mill and under the stone bridge, where the children waited every evening for the "
    "boats to come back from the lake with their nets full of silver fish and their sails folded.",
    "In the morning the market opened early: bread, apples, honey and wool were laid out on long tables while the "
    "bells of the church rang seven times and the baker shouted his prices over the noise.",
    "A short one about cats.",
    "Numbers one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty twenty-one twenty-two twenty-three twenty-four twenty-five."};

batch::ModelLoader loader(const std::string& dir) {
  return [dir](const std::string& rope) {
    LoadOptions o;
    o.rope_scaling = rope;
    return Model::load(dir, Device::kCpu, o);
  };
}

// The oracle: one forward with every logits row at once, NLL of token p = log(sum_v exp(l_v)) - l_target in double
// without any max shift (the logits of this model are small), summed per bucket.
std::vector<double> naive_bucket_sums(const Model& m, const std::string& spec_text, const std::vector<int32_t>& ids,
                                      int bucket, int n_buckets) {
  const int T = (int)ids.size(), V = m.config().vocab_size;
  Session s(m, T);
  std::vector<float> logits;
  EXPECT_TRUE(
      s.forward(ids.data(), T, TempSpec::parse(spec_text, "test", &m.config()), RunOptions{}, nullptr, &logits));
  std::vector<double> sums((size_t)n_buckets, 0.0);
  for (int p = 1; p < T; ++p) {
    const float* row = logits.data() + (size_t)(p - 1) * V;
    double z = 0.0;
    for (int v = 0; v < V; ++v) z += std::exp((double)row[v]);
    sums[(size_t)(p / bucket)] += std::log(z) - (double)row[ids[(size_t)p]];
  }
  return sums;
}

TEST(PositionLoss, BucketSumsMatchANaiveComputationPastTheContext) {
  const std::string dir = test::make_temp_dir("posloss");
  const std::string corpus = write_corpus(dir, kDocs);
  batch::PositionLossOptions o;
  o.max_tokens = 40;  // past the trained context of 24
  o.bucket_tokens = 8;
  o.bootstrap = 200;
  const std::string runs = "standard,focal:0.4,ssmax,standard@dynamic:2";
  batch::PositionLossFile f = batch::run_position_loss(loader(tiny_model_dir()), corpus, runs, o, 0, nullptr, nullptr);
  ASSERT_EQ(f.n_runs(), 4u);
  ASSERT_EQ(f.n_docs(), kDocs.size());
  ASSERT_EQ(f.n_buckets(), 5u);  // positions 0..39 in buckets of 8
  EXPECT_EQ(f.trained_context, 24);
  EXPECT_THAT(f.warnings, ::testing::HasSubstr("40 tokens run past the model's trained context of 24"));
  EXPECT_THAT(f.run_warnings[3], ::testing::HasSubstr("rope_scaling dynamic:2 replaces the model's own"));
  EXPECT_THAT(f.run_warnings[3], ::testing::HasSubstr("dynamic NTK recomputes the rotary frequencies for 40"));

  auto base = loader(tiny_model_dir())("");
  auto dyn = loader(tiny_model_dir())("dynamic:2");
  const size_t R = 4, D = kDocs.size(), B = 5;
  bool some_past = false;
  for (size_t d = 0; d < D; ++d) {
    std::vector<int32_t> ids = base->require_tokenizer().encode(kDocs[d], true);
    if ((int)ids.size() > o.max_tokens) ids.resize((size_t)o.max_tokens);
    ASSERT_EQ(f.doc_tokens[d], (int32_t)ids.size());
    some_past = some_past || (int)ids.size() > 24;
    for (size_t b = 0; b < B; ++b) {  // counts: positions 1..T-1 in [8b, 8b + 8)
      int n = 0;
      for (int p = 1; p < (int)ids.size(); ++p) n += p / 8 == (int)b;
      EXPECT_EQ(f.doc_count[d * B + b], n) << d << " " << b;
    }
    const char* specs[] = {"standard", "focal:0.4", "ssmax", "standard"};
    for (size_t r = 0; r < R; ++r) {
      const std::vector<double> want = naive_bucket_sums(r == 3 ? *dyn : *base, specs[r], ids, 8, (int)B);
      for (size_t b = 0; b < B; ++b)  // the same fp32 logits rows; only the summation differs: 1e-9 relative
        EXPECT_NEAR(f.doc_nll_sum[(r * D + d) * B + b], want[b], 1e-9 * std::max(1.0, std::fabs(want[b])))
            << "run " << r << " doc " << d << " bucket " << b;
    }
  }
  ASSERT_TRUE(some_past) << "a document must reach past the trained context";
  // Per-layer entropy by query position: the capture's row metrics (capture_run, no rows stored) summed over heads and
  // the bucket's rows, the same fp32 values summed in the same order: 1e-9 relative.
  ASSERT_EQ(f.n_layers, 2);
  const size_t L = 2;
  for (size_t d = 0; d < D; ++d) {
    std::vector<int32_t> ids = base->require_tokenizer().encode(kDocs[d], true);
    if ((int)ids.size() > o.max_tokens) ids.resize((size_t)o.max_tokens);
    const int T = (int)ids.size();
    CaptureRequest req;
    req.store_probs = req.store_scores = false;
    const RunCapture cap = capture_run(*base, ids, TempSpec::parse("focal:0.4", "test", &base->config()), req, "x");
    for (size_t l = 0; l < L; ++l)
      for (size_t b = 0; b < B; ++b) {
        double want = 0.0;
        for (int h = 0; h < 4; ++h)
          for (int q = 0; q < T; ++q)
            if ((size_t)(q / 8) == b)
              want += cap.metrics[(((size_t)l * 4 + h) * T + q) * kNumRowMetrics + kEntropyNats];
        const double got = f.doc_entropy_sum[((1 * D + d) * L + l) * B + b];  // run 1: focal:0.4
        EXPECT_NEAR(got, want, 1e-9 * std::max(1.0, std::fabs(want)))
            << "doc " << d << " layer " << l << " bucket " << b;
      }
  }
  // The dynamic run differs from standard only past the context (frequencies recomputed for 40 positions change
  // every position of a document longer than 24): bucket 0 of a short document agrees exactly.
  EXPECT_EQ(f.doc_nll_sum[(0 * D + 2) * B + 0], f.doc_nll_sum[(3 * D + 2) * B + 0]);

  for (size_t r = 0; r < R; ++r)
    for (size_t b = 0; b < B; ++b) {  // mean = token-weighted over documents; the band brackets it
      double s = 0, n = 0;
      for (size_t d = 0; d < D; ++d) s += f.doc_nll_sum[(r * D + d) * B + b], n += f.doc_count[d * B + b];
      if (n == 0) {
        EXPECT_TRUE(std::isnan(f.mean_nll[r * B + b]));
        continue;
      }
      EXPECT_NEAR(f.mean_nll[r * B + b], s / n, 1e-5 * s / n);
      EXPECT_LE(f.band_lo[r * B + b], f.band_hi[r * B + b]);
    }

  // Round trip through the file (sums stored as fp32: 1e-6 relative).
  const std::string path = dir + "/loss.h5";
  batch::write_position_loss(f, path);
  const batch::PositionLossFile g = batch::read_position_loss(path);
  EXPECT_EQ(g.run_names, f.run_names);
  EXPECT_EQ(g.run_warnings, f.run_warnings);
  EXPECT_EQ(g.doc_count, f.doc_count);
  EXPECT_EQ(g.mean_nll.size(), f.mean_nll.size());
  EXPECT_EQ(g.warnings, f.warnings);
  EXPECT_EQ(g.doc_rows, f.doc_rows);
  ASSERT_EQ(g.mean_entropy.size(), R * L * B);
  for (size_t i = 0; i < f.mean_entropy.size(); ++i) EXPECT_FLOAT_EQ(g.mean_entropy[i], f.mean_entropy[i]);
  for (size_t i = 0; i < f.doc_nll_sum.size(); ++i)
    EXPECT_NEAR(g.doc_nll_sum[i], f.doc_nll_sum[i], 1e-6 * std::max(1.0, f.doc_nll_sum[i]));
}

// The band is over documents: one document (or identical ones) leaves nothing to resample, so it collapses onto the
// mean; distinct documents give a band of positive width.
TEST(PositionLoss, BootstrapBandOverDocuments) {
  batch::PositionLossFile f;
  f.run_names = {"a"};
  f.bucket_start = {0};
  f.doc_ids = {"x", "y", "z"};
  f.doc_count = {10, 10, 10};
  f.doc_nll_sum = {20.0, 20.0, 20.0};
  f.bootstrap = 500;
  batch::summarize_position_loss(f);
  EXPECT_FLOAT_EQ(f.mean_nll[0], 2.0f);
  EXPECT_FLOAT_EQ(f.band_lo[0], 2.0f);
  EXPECT_FLOAT_EQ(f.band_hi[0], 2.0f);
  f.doc_nll_sum = {10.0, 20.0, 30.0};
  batch::summarize_position_loss(f);
  EXPECT_FLOAT_EQ(f.mean_nll[0], 2.0f);
  EXPECT_LT(f.band_lo[0], 1.9f);
  EXPECT_GT(f.band_hi[0], 2.1f);
  EXPECT_GE(f.band_lo[0], 1.0f);  // a resample's mean lies between the smallest and largest document's
  EXPECT_LE(f.band_hi[0], 3.0f);
}

TEST(PositionLoss, RefusesBadRunsAndOverBudget) {
  const std::string dir = test::make_temp_dir("posloss_bad");
  const std::string corpus = write_corpus(dir, kDocs);
  batch::PositionLossOptions o;
  o.max_tokens = 40;
  try {
    (void)batch::run_position_loss(loader(tiny_model_dir()), corpus, "standard,focal:0.4", o, 1024, nullptr, nullptr);
    ADD_FAILURE() << "ran over the budget";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("--max-tokens 40 needs an estimated"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("over the memory budget"));
  }
  // ... and an empty override, and one setting spelled twice (each ran, the model loaded once per spelling)
  for (const char* bad : {"standard,", "focal:-1", "standard@ntk:2", "standard,standard", "standard@", "focal:0.4,0.4",
                          "standard@dynamic:2,standard@dynamic:2.0"})
    EXPECT_THROW((void)batch::run_position_loss(loader(tiny_model_dir()), corpus, bad, o, 0, nullptr, nullptr), Error)
        << bad;
  ModelConfig gpt2;  // learned absolute positions: a rope override is refused, naming it
  gpt2.arch.name = "gpt2";
  gpt2.arch.position = PositionKind::kLearned;
  gpt2.n_layers = 2;
  gpt2.n_heads = 2;
  gpt2.max_positions = 128;
  try {
    (void)batch::parse_position_runs("standard@dynamic:2", gpt2);
    ADD_FAILURE() << "GPT-2 took a rope_scaling override";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("runs: item 'standard@dynamic:2': rope_scaling override 'dynamic:2': "
                                               "gpt2 has learned absolute positions"));
  }
}

struct CliResult {
  int code;
  std::string out;
};
CliResult run_cli(const std::string& args) {
  const std::string cmd = std::string(FOCAL_CLI_PATH) + " " + args + " 2>&1";
  CliResult r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  r.code = WEXITSTATUS(pclose(p));
  return r;
}

bool exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}

TEST(PositionLossCli, EvalPositionsAndItsFigure) {
  const std::string dir = test::make_temp_dir("posloss_cli");
  const std::string corpus = write_corpus(dir, kDocs), out = dir + "/loss.h5";
  CliResult r = run_cli("eval " + tiny_model_dir() + " --positions --data " + corpus +
                        " --max-tokens 40 --bucket 8 --runs standard,focal:0.4,ssmax,native,standard@dynamic:2 -o " +
                        out + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("warning: 40 tokens run past the model's trained context of 24"));
  const batch::PositionLossFile f = batch::read_position_loss(out);
  EXPECT_EQ(f.n_runs(), 5u);
  // "native" is named with the setting it resolved to (the figure's legend said "native" alone); the tiny model's
  // own setting is standard attention
  EXPECT_EQ(f.run_names[3], "native (standard)");
  // inspect: each setting's mean NLL within the context and past it (it refused the file)
  r = run_cli("inspect " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("position-loss file " + out + ": 4 documents, 5 settings"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("native (standard)"));
  // Buckets of 8 against a context of 24: none straddles it; the columns name their positions.
  EXPECT_THAT(r.out, ::testing::HasSubstr("NLL 1..23"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("NLL 24..39"));
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("straddles")));
  r = run_cli("figure positions " + out + " -o " + dir + "/pos.svg");
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream svg(dir + "/pos.svg");
  const std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, ::testing::HasSubstr("max_position_embeddings 24"));
  // Per-layer attention entropy by position of one run: a line per layer, coloured by layer, the context marked.
  r = run_cli("figure positions " + out + " --metric entropy --runs ssmax -o " + dir + "/ent.svg");
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream esvg(dir + "/ent.svg");
  const std::string etext((std::istreambuf_iterator<char>(esvg)), std::istreambuf_iterator<char>());
  EXPECT_THAT(etext, ::testing::HasSubstr(">ssmax, 4 documents<"));
  // the run as --runs spelled it selects it too
  r = run_cli("figure positions " + out + " --metric entropy --runs native -o " + dir + "/ent_native.svg");
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream nsvg(dir + "/ent_native.svg");
  const std::string ntext((std::istreambuf_iterator<char>(nsvg)), std::istreambuf_iterator<char>());
  EXPECT_THAT(ntext, ::testing::HasSubstr(">native (standard), 4 documents<"));
  // ... and by the name every other file gives the setting ("focal_t0.4" for the run spelled "focal:0.4").
  r = run_cli("figure positions " + out + " --metric entropy --runs focal_t0.4 -o " + dir + "/ent_label.svg");
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream lsvg(dir + "/ent_label.svg");
  EXPECT_THAT(std::string((std::istreambuf_iterator<char>(lsvg)), std::istreambuf_iterator<char>()),
              ::testing::HasSubstr(">focal:0.4, 4 documents<"));
  EXPECT_THAT(etext, ::testing::HasSubstr("max_position_embeddings 24"));
  EXPECT_THAT(etext, ::testing::HasSubstr(">layer 1<"));  // a legend of its 2 layers (a colour bar past 8)
  r = run_cli("figure positions " + out + " --metric entropy --runs standard,ssmax -o " + dir + "/ent2.svg");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("metric entropy draws one run's layers"));
  r = run_cli("figure positions " + out + " --metric sink_mass -o " + dir + "/ent3.svg");
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("use nll (the default: next-token loss) or entropy"));
  // Over the budget: one error with the estimate, exit 1, no file.
  const std::string out2 = dir + "/over.h5";
  r = run_cli("eval " + tiny_model_dir() + " --positions --data " + corpus + " --max-tokens 4000 --budget 3M -o " +
              out2);  // the weights (under 1 MB) fit; a forward of 4000 tokens (a logits block alone 8 MB) does not
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.out, ::testing::HasSubstr("needs an estimated"));
  EXPECT_FALSE(exists(out2));
  r = run_cli("eval --positions --help");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, ::testing::HasSubstr("SPEC[@ROPE]"));
  // Buckets of 7 against the context of 24: positions 21..27 straddle it and count in neither column.
  const std::string out3 = dir + "/straddle.h5";
  r = run_cli("eval " + tiny_model_dir() + " --positions --data " + corpus + " --max-tokens 30 --bucket 7 --runs " +
              "standard -o " + out3 + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  r = run_cli("inspect " + out3);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("NLL 1..20"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("NLL 28..29"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("the bucket at positions 21..27 straddles the trained context of 24"));
  // The file's warning says what ran: one run under dynamic NTK is not "its rotary positions extrapolate" (the
  // model's own RoPE sentence); runs that differ get the past-context fact alone, each its own in run_warnings.
  const std::string out_dyn = dir + "/dynamic.h5", out_mix = dir + "/mixed.h5";
  r = run_cli("eval " + tiny_model_dir() + " --positions --data " + corpus + " --max-tokens 30 --runs " +
              "standard@dynamic:2 -o " + out_dyn + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  const batch::PositionLossFile dyn = batch::read_position_loss(out_dyn);
  EXPECT_THAT(dyn.warnings, ::testing::HasSubstr("dynamic NTK"));
  EXPECT_THAT(dyn.warnings, ::testing::Not(::testing::HasSubstr("extrapolate")));
  EXPECT_EQ(dyn.warnings, dyn.run_warnings.at(0));
  r = run_cli("eval " + tiny_model_dir() + " --positions --data " + corpus + " --max-tokens 30 --runs " +
              "standard,standard@dynamic:2 -o " + out_mix + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  const batch::PositionLossFile mix = batch::read_position_loss(out_mix);
  EXPECT_THAT(mix.warnings, ::testing::HasSubstr("each setting's warning says how it computed its rotary positions"));
  EXPECT_THAT(mix.run_warnings.at(0), ::testing::HasSubstr("extrapolate"));
  EXPECT_THAT(mix.run_warnings.at(1), ::testing::HasSubstr("dynamic NTK"));
  // Buckets of 30 against the context of 24: the first already straddles it, so no bucket lies within ("NLL 1..-1"
  // read nan): "-", and how to get the loss within.
  const std::string out5 = dir + "/first_straddles.h5";
  r = run_cli("eval " + tiny_model_dir() + " --positions --data " + corpus + " --max-tokens 60 --bucket 30 --runs " +
              "standard -o " + out5 + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  r = run_cli("inspect " + out5);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("1..-1")));
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("nan")));
  EXPECT_THAT(r.out, ::testing::HasSubstr("NLL within"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("the first bucket, positions 0..29, straddles the trained context of 24"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("--bucket 12 or less"));
  // Documents shorter than the context: no "past the trained context" warning however large --max-tokens is (it
  // warned of positions 24..39 that no token reached); it says no document reaches past it, and inspect has no
  // tokens past it rather than nan.
  const std::string sdir = dir + "/short";
  std::filesystem::create_directories(sdir);
  const std::string short_corpus = write_corpus(sdir, {"The lamp was lit.", "A river ran by the town."});
  const std::string out4 = dir + "/short.h5";
  r = run_cli("eval " + tiny_model_dir() + " --positions --data " + short_corpus + " --max-tokens 40 --runs " +
              "standard,standard@dynamic:2 -o " + out4 + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("run past")));
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("recomputes")));
  const batch::PositionLossFile sf = batch::read_position_loss(out4);
  const int longest = *std::max_element(sf.doc_tokens.begin(), sf.doc_tokens.end());
  ASSERT_LT(longest, 24);
  EXPECT_THAT(r.out, ::testing::HasSubstr("no document reaches past the model's trained context of 24 tokens (the "
                                          "longest runs " +
                                          std::to_string(longest) + " of --max-tokens 40)"));
  EXPECT_EQ(sf.run_warnings[0], "");
  EXPECT_EQ(sf.run_warnings[1], "rope_scaling dynamic:2 replaces the model's own");
  r = run_cli("inspect " + out4);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("no tokens"));
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("nan")));
  // A document that is not UTF-8 stops the run, its message offering --on-error skip, which eval takes (the hint
  // named an option only batch had); skipped, the other documents run. --bucket 1: the summary's first bucket is
  // the first with tokens, position 1 (it printed "positions 1..0" and nan for position 0, which predicts nothing).
  const std::string bdir = dir + "/latin1";
  std::filesystem::create_directories(bdir);
  const std::string bad_corpus = write_corpus(bdir, {"The lamp was lit by the river.", "caf\xE9 au lait and bread."});
  r = run_cli("eval " + tiny_model_dir() + " --positions --data " + bad_corpus +
              " --max-tokens 20 --runs standard -o " + dir + "/x.h5 --quiet");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("is not UTF-8 text"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("--on-error skip"));
  EXPECT_FALSE(exists(dir + "/x.h5"));
  r = run_cli("eval " + tiny_model_dir() + " --positions --data " + bad_corpus +
              " --max-tokens 20 --runs standard --on-error skip --bucket 1 -o " + dir + "/skip.h5 --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(batch::read_position_loss(dir + "/skip.h5").n_docs(), 1u);
  EXPECT_THAT(r.out, ::testing::HasSubstr("first bucket with tokens (positions 1..1)"));
  EXPECT_THAT(r.out, ::testing::Not(::testing::HasSubstr("nan")));
  // Options that would be silently replaced are refused naming them; a bad run is named once.
  // ... exit 1 as values out of range (--level 0 and --bootstrap -1 exited 2, as if malformed)
  for (const char* bad : {"--bucket 0", "--limit 0", "--level 0", "--bootstrap -1"}) {
    r = run_cli("eval " + tiny_model_dir() + " --positions --data " + corpus + " --max-tokens 40 " + bad + " -o " +
                dir + "/x.h5");
    EXPECT_EQ(r.code, 1) << bad << ": " << r.out;
    EXPECT_THAT(r.out, ::testing::HasSubstr(std::string(bad).substr(0, std::string(bad).find(' '))));
    EXPECT_FALSE(exists(dir + "/x.h5"));
  }
  r = run_cli("eval " + tiny_model_dir() + " --positions --data " + corpus +
              " --max-tokens 40 --runs standard,focal:0 -o " + dir + "/x.h5");
  EXPECT_NE(r.code, 0);
  size_t n_runs_flag = 0;
  for (size_t at = r.out.find("--runs"); at != std::string::npos; at = r.out.find("--runs", at + 1)) ++n_runs_flag;
  EXPECT_EQ(n_runs_flag, 1u) << r.out;
  EXPECT_THAT(r.out, ::testing::HasSubstr("focal:0"));
}

}  // namespace
}  // namespace focal
