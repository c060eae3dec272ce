// End-to-end tests of the `focal` binary: every command's help, init -> info, capture with a comparison, sweep,
// generate with capture and inspect of each file, and the error paths (exit code, one message on stderr, no output
// file or temporary left behind). The model and its sentencepiece tokenizer are made once per binary.
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "focal/capture.h"
#include "focal/tokenizer.h"
#include "focal_kernels/shared_math.h"
#include "temp_spec_cases.h"
#include "test_util.h"

#ifndef FOCAL_CLI_PATH
#error "FOCAL_CLI_PATH must name the built focal binary"
#endif

namespace focal {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

struct CliResult {
  int rc = -1;
  std::string out, err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

bool exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}

// Writes `text` to `path`; returns the path.
std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    closedir(d);
  }
  return names;
}

// Progress lines end in '\r' or are redrawn with it; keep only the lines a person would read as messages.
std::vector<std::string> message_lines(const std::string& err) {
  std::vector<std::string> lines;
  std::stringstream ss(err);
  std::string line;
  while (std::getline(ss, line)) {
    const size_t cr = line.rfind('\r');
    if (cr != std::string::npos) line = line.substr(cr + 1);
    if (line.find("elapsed, ETA") != std::string::npos) continue;
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    lines.push_back(line);
  }
  return lines;
}

// The rows of a "t loss_nats entropy sink_mass tail_mass" table as printed by sweep and inspect.
struct SweepRow {
  double t, loss, entropy, sink, tail;
};
std::vector<SweepRow> parse_sweep_table(const std::string& text) {
  std::vector<SweepRow> rows;
  std::stringstream ss(text);
  std::string line;
  bool in_table = false;
  while (std::getline(ss, line)) {
    if (line.find("loss_nats") != std::string::npos) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    SweepRow r{};
    char extra;
    if (std::sscanf(line.c_str(), "%lf %lf %lf %lf %lf %c", &r.t, &r.loss, &r.entropy, &r.sink, &r.tail, &extra) == 5)
      rows.push_back(r);
    else
      in_table = false;
  }
  return rows;
}

const char* kPrompt = "The quick brown fox jumps over the lazy dog";
// More tokens than the 16-position context of the short model.
const char* kLongPrompt = "The quick brown fox jumps over the lazy dog while attention heads focus on tokens";

class CliTest : public ::testing::Test {
 protected:
  // One temporary directory, tokenizer and model for the whole binary.
  static void SetUpTestSuite() {
    root_ = new std::string(test::make_temp_dir("cli"));
    ASSERT_FALSE(root_->empty());
    const std::string corpus = *root_ + "/corpus.txt";
    {
      std::ofstream f(corpus);
      for (int i = 0; i < 60; ++i)
        f << "The quick brown fox " << i << " jumps over the lazy dog while attention heads focus on tokens.\n"
          << "Temperature scaling sharpens the softmax; entropy falls as the focal temperature drops.\n";
    }
    // Byte fallback reserves 256 pieces, so the vocabulary must exceed 256 + the corpus characters.
    const std::string cmd = "spm_train --input=" + quote(corpus) + " --model_prefix=" + quote(*root_ + "/tok") +
                            " --vocab_size=384 --model_type=bpe --byte_fallback=true --character_coverage=1.0"
                            " --bos_id=1 --eos_id=2 --unk_id=0 --pad_id=-1 --minloglevel=2 > " +
                            quote(*root_ + "/spm.log") + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "spm_train failed: " << slurp(*root_ + "/spm.log");
    tok_ = new std::string(*root_ + "/tok.model");
    model_ = new std::string(*root_ + "/model");
    short_model_ = new std::string(*root_ + "/short");
    CliResult r = run({"init", *model_, "--tokenizer", *tok_, "--hidden", "64", "--layers", "2", "--heads", "4",
                       "--kv-heads", "2", "--intermediate", "128"});
    ASSERT_EQ(r.rc, 0) << r.err;
    r = run({"init", *short_model_, "--tokenizer", *tok_, "--hidden", "32", "--layers", "1", "--heads", "2",
             "--kv-heads", "1", "--intermediate", "64", "--context", "16"});
    ASSERT_EQ(r.rc, 0) << r.err;
  }
  static void TearDownTestSuite() {
    if (root_ && !root_->empty() && !std::getenv("FOCAL_KEEP_TEST_DIRS"))
      std::system(("rm -rf " + quote(*root_)).c_str());
  }

  // Runs focal with `args`, stdout and stderr captured through files.
  static CliResult run(const std::vector<std::string>& args) {
    static int n = 0;
    const std::string base = *root_ + "/run" + std::to_string(n++);
    std::string cmd = quote(FOCAL_CLI_PATH);
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " > " + quote(base + ".out") + " 2> " + quote(base + ".err") + " < /dev/null";
    const int st = std::system(cmd.c_str());
    CliResult r;
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    r.out = slurp(base + ".out");
    r.err = slurp(base + ".err");
    std::remove((base + ".out").c_str());
    std::remove((base + ".err").c_str());
    return r;
  }

  // A fresh empty directory for one test's outputs.
  static std::string out_dir(const std::string& tag) {
    std::string d = *root_ + "/" + tag;
    EXPECT_EQ(mkdir(d.c_str(), 0755), 0) << d;
    return d;
  }

  // An error case: exit code `rc`, stdout empty, exactly one message line on stderr containing every `needles`,
  // and `dir` (where -o pointed) left empty: no output, no temporary, no probe file.
  static constexpr int kUsageOrValue = -1;  // expect_failure's rc: 2 (malformed) or 1 (a value the model refuses)
  static void expect_failure(const std::vector<std::string>& args, int rc, const std::vector<std::string>& needles,
                             const std::string& dir) {
    std::string shown;
    for (auto& a : args) shown += " " + a;
    SCOPED_TRACE("focal" + shown);
    const CliResult r = run(args);
    if (rc == kUsageOrValue)
      EXPECT_TRUE(r.rc == 1 || r.rc == 2) << "rc " << r.rc << ", stderr: " << r.err;
    else
      EXPECT_EQ(r.rc, rc) << "stderr: " << r.err;
    EXPECT_EQ(r.out, "");
    // The one informational line of a CUDA build's default auto falling back ("device: auto -> cpu (...)") may
    // precede the error; the error itself is one line.
    std::vector<std::string> lines = message_lines(r.err);
    if (!lines.empty() && lines[0].rfind("device: auto -> cpu (", 0) == 0) lines.erase(lines.begin());
    ASSERT_EQ(lines.size(), 1u) << "stderr: " << r.err;
    EXPECT_THAT(lines[0], HasSubstr("focal"));
    for (const auto& n : needles) EXPECT_THAT(lines[0], HasSubstr(n));
    if (!dir.empty()) { EXPECT_THAT(list_dir(dir), ::testing::IsEmpty()) << "files left behind in " << dir; }
  }

  static int prompt_tokens(const std::string& text) {
    auto tok = Tokenizer::load(*tok_);
    return (int)tok->encode(text, true).size();
  }

  static std::string* root_;
  static std::string* tok_;
  static std::string* model_;
  static std::string* short_model_;
};

std::string* CliTest::root_ = nullptr;
std::string* CliTest::tok_ = nullptr;
std::string* CliTest::model_ = nullptr;
std::string* CliTest::short_model_ = nullptr;

// ---- help ----

TEST_F(CliTest, MainHelp) {
  for (const char* flag : {"--help", "-h", "help"}) {
    const CliResult r = run({flag});
    EXPECT_EQ(r.rc, 0) << flag;
    EXPECT_THAT(r.out, HasSubstr("usage: focal COMMAND"));
    for (const char* cmd : {"info", "capture", "sweep", "generate", "inspect", "init"})
      EXPECT_THAT(r.out, HasSubstr(std::string("  ") + cmd + " ")) << cmd;
  }
  // No command at all: the usage, but a usage exit code.
  const CliResult none = run({});
  EXPECT_EQ(none.rc, 2);
  EXPECT_THAT(none.out, HasSubstr("usage: focal COMMAND"));
  const CliResult v = run({"--version"});
  EXPECT_EQ(v.rc, 0);
  EXPECT_THAT(v.out, HasSubstr("focal 0."));
}

TEST_F(CliTest, EveryCommandHasHelp) {
  for (const char* cmd : {"info", "capture", "sweep", "generate", "inspect", "init"}) {
    SCOPED_TRACE(cmd);
    const CliResult r = run({cmd, "--help"});
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr(std::string("usage: focal ") + cmd));
    EXPECT_EQ(r.err, "");
  }
  // The temperature options are documented where they apply.
  for (const char* cmd : {"capture", "sweep", "generate"})
    EXPECT_THAT(run({cmd, "--help"}).out, HasSubstr("--temp SPEC"));
}

// ---- init and info ----

TEST_F(CliTest, InitThenInfo) {
  const std::string dir = *root_ + "/init_info";
  CliResult r = run({"init", dir, "--tokenizer", *tok_, "--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads",
                     "2", "--intermediate", "128"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(exists(dir + "/config.json"));
  EXPECT_TRUE(exists(dir + "/model.safetensors"));
  EXPECT_TRUE(exists(dir + "/tokenizer.model"));
  r = run({"info", dir});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("layers +2\n"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("hidden +64\n"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("intermediate +128\n"));
  EXPECT_THAT(r.out, HasSubstr("4 query, 2 key/value"));
  EXPECT_THAT(r.out, HasSubstr("head_dim 16"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("vocab +384\n"));
  // One line per fact: biases and RoPE theta in the summary, the norms' epsilon by its own name ("bias no" below
  // "biases q/k/v" contradicted it; GPT-2 showed a rope_theta it does not have and its LayerNorm eps as rms_eps).
  EXPECT_THAT(r.out, ::testing::ContainsRegex("biases +none\n"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("norm_eps +1e-06\n"));  // focal init writes rms_norm_eps 1e-6
  EXPECT_THAT(r.out, Not(::testing::ContainsRegex("\nbias +|rope_theta|rms_eps")));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("tokenizer +tokenizer.model \\(sentencepiece\\), 384 pieces\n"));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("attention +standard"));

  // Same seed, same bytes: the checksum printed by info is reproducible.
  const std::string dir2 = *root_ + "/init_info2";
  ASSERT_EQ(run({"init", dir2, "--tokenizer", *tok_, "--hidden", "64", "--layers", "2", "--heads", "4", "--kv-heads",
                 "2", "--intermediate", "128"})
                .rc,
            0);
  auto checksum = [](const std::string& out) { return out.substr(out.find("fnv1a64:")); };
  EXPECT_EQ(checksum(run({"info", dir2}).out), checksum(r.out));
}

TEST_F(CliTest, InitFocalAndLearnedModels) {
  const std::string focal_dir = *root_ + "/init_focal";
  ASSERT_EQ(run({"init", focal_dir, "--tokenizer", *tok_, "--hidden", "32", "--layers", "1", "--heads", "2",
                 "--kv-heads", "1", "--intermediate", "64", "--attn", "focal", "--temp", "0.3"})
                .rc,
            0);
  EXPECT_THAT(run({"info", focal_dir}).out, HasSubstr("focal (focal_temp 0.3)"));

  const std::string learned = *root_ + "/init_learned";
  CliResult r = run({"init", learned, "--tokenizer", *tok_, "--hidden", "32", "--layers", "2", "--heads", "2",
                     "--kv-heads", "1", "--intermediate", "64", "--attn", "learned", "--tau-mode", "per_token"});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = run({"info", learned});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("learned"), HasSubstr("per_token"), HasSubstr("with bias")));
  // The learned model captures natively (tau recorded) and against standard attention.
  const std::string d = out_dir("learned_capture");
  r = run({"capture", learned, "--prompt", kPrompt, "--compare", "standard", "-o", d + "/l.h5"});
  ASSERT_EQ(r.rc, 0) << r.err;
  r = run({"inspect", d + "/l.h5"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("run learned"), HasSubstr("run standard"), HasSubstr(" tau\n"),
                           HasSubstr("compare learned vs standard")));
  const CaptureFile f = read_capture(d + "/l.h5");
  ASSERT_NE(f.find_run("learned"), nullptr);
  EXPECT_EQ(f.find_run("learned")->tau.size(), (size_t)2 * f.n_tokens());
  EXPECT_TRUE(f.find_run("standard")->tau.empty());

  // Overrides replace tau where they apply: layer 1 (every head) records NaN, not a tau no head used, and inspect's
  // per-head tau column says "override" for those heads and for head 0:1; head 0:0 ran at tau.
  r = run({"capture", learned, "--prompt", kPrompt, "--temp", "learned+1=0.5+0:1=0.25", "-o", d + "/o.h5"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const CaptureFile fo = read_capture(d + "/o.h5");
  const RunCapture& ro = fo.runs.at(0);
  const int T = fo.n_tokens();
  ASSERT_EQ(ro.tau.size(), (size_t)2 * T);
  for (int i = 0; i < T; ++i) {
    EXPECT_TRUE(std::isfinite(ro.tau[i])) << "layer 0 row " << i;
    EXPECT_TRUE(std::isnan(ro.tau[(size_t)T + i])) << "layer 1 row " << i;
  }
  r = run({"inspect", d + "/o.h5"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::istringstream lines(r.out);
  std::map<std::string, std::string> tau_of;  // "L H" -> the last column
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ls(line);
    std::vector<std::string> w;
    for (std::string x; ls >> x;) w.push_back(x);
    if (w.size() >= 8 && std::isdigit((unsigned char)w[0][0]) && std::isdigit((unsigned char)w[1][0]))
      tau_of[w[0] + " " + w[1]] = w.back();
  }
  ASSERT_EQ(tau_of.size(), 4u) << r.out;
  EXPECT_NE(tau_of["0 0"], "override") << r.out;
  EXPECT_GT(std::stod(tau_of["0 0"]), 0.0) << r.out;
  for (const char* lh : {"0 1", "1 0", "1 1"}) EXPECT_EQ(tau_of[lh], "override") << lh << "\n" << r.out;
}

// ---- capture, sweep, generate, inspect ----

TEST_F(CliTest, CaptureWithCompareThenInspect) {
  const std::string d = out_dir("capture");
  const std::string out = d + "/out.h5";
  CliResult r = run({"capture", *model_, "--prompt", kPrompt, "--temp", "0.4", "--compare", "standard", "--layers", "1",
                     "--heads", "0,1", "-o", out});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("wrote " + out), HasSubstr("focal_t0.4 standard")));
  ASSERT_TRUE(exists(out));
  EXPECT_EQ(list_dir(d), std::vector<std::string>{"out.h5"}) << "temporaries left behind";
  // stderr is a file here, not a terminal: whole lines, no \r updates, and every phase reports, compare and write
  // included (a long capture used to go silent there).
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  EXPECT_THAT(r.err,
              AllOf(HasSubstr("capture focal_t0.4: layer 2/2  done in"), HasSubstr("capture standard: layer 2/2"),
                    HasSubstr("compare focal_t0.4 vs standard: layer 1/1  done in"),
                    HasSubstr("write " + out + ": part 3/3  done in")));

  r = run({"inspect", out});
  ASSERT_EQ(r.rc, 0) << r.err;
  const int T = prompt_tokens(kPrompt);
  EXPECT_THAT(r.out, AllOf(HasSubstr(std::to_string(T) + " tokens, 2 layers x 4 heads"), HasSubstr("run focal_t0.4"),
                           HasSubstr("run standard"), HasSubstr("compare focal_t0.4 vs standard"),
                           HasSubstr("1 layers x 2 heads x " + std::to_string(T) + " queries")));
  // --run limits the tables to one run.
  r = run({"inspect", out, "--run", "standard"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("run standard"), Not(HasSubstr("run focal_t0.4"))));

  // The file holds what was asked for.
  const CaptureFile f = read_capture(out);
  ASSERT_EQ(f.n_tokens(), T);
  ASSERT_EQ(f.runs.size(), 2u);
  const RunCapture* a = f.find_run("focal_t0.4");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->layers, std::vector<int>{1});
  EXPECT_EQ(a->heads, (std::vector<int>{0, 1}));
  EXPECT_EQ(a->probs.size(), (size_t)2 * T * T);
  ASSERT_EQ(f.comparisons.size(), 1u);
  EXPECT_EQ(f.comparisons[0].kl.size(), (size_t)2 * T);
  // inspect's compare line: the mean over queries 1..T-1 of both heads, as its tables (hand mean of the file's
  // rows; printed to 4 decimals). Query 0 (KL = 0) was averaged in.
  {
    double kl = 0, js = 0;
    for (int h = 0; h < 2; ++h)
      for (int q = 1; q < T; ++q) {
        kl += f.comparisons[0].kl[(size_t)h * T + q];
        js += f.comparisons[0].js[(size_t)h * T + q];
      }
    const size_t at = r.out.find("compare focal_t0.4 vs standard: mean KL ");
    ASSERT_NE(at, std::string::npos) << r.out;
    double kl_shown = NAN, js_shown = NAN;
    size_t rows = 0;
    ASSERT_EQ(
        std::sscanf(r.out.c_str() + at, "compare focal_t0.4 vs standard: mean KL %lf nats, mean JS %lf nats over %zu",
                    &kl_shown, &js_shown, &rows),
        3)
        << r.out;
    EXPECT_EQ(rows, (size_t)2 * (T - 1));
    EXPECT_NEAR(kl_shown, kl / (2 * (T - 1)), 6e-5);
    EXPECT_NEAR(js_shown, js / (2 * (T - 1)), 6e-5);
    // ... naming the rows it averaged (it said "queries 1..T-1, as the table" of any selection)
    EXPECT_THAT(r.out,
                HasSubstr(" rows (layers 1 \xC3\x97 heads 0-1 \xC3\x97 queries 1-" + std::to_string(T - 1) + ")"));
  }
  {  // a comparison of query 0 alone has no row to average (it printed mean KL 0.0000 over the heads' query 0)
    const std::string q0 = d + "/q0.h5";
    ASSERT_EQ(run({"capture", *model_, "--prompt", kPrompt, "--compare", "standard", "--queries", "0", "-o", q0}).rc,
              0);
    const CliResult i0 = run({"inspect", q0});
    ASSERT_EQ(i0.rc, 0) << i0.err;
    EXPECT_THAT(i0.out, HasSubstr("no compared row past query 0"));
    EXPECT_THAT(i0.out, Not(HasSubstr("mean KL")));
  }

  // --fp16 stores fp16 probabilities, but KL / JS still come from the fp32 rows: the same values as above
  // (reference: the fp32 capture's comparison; 1e-6 relative: the same fp32 rows), and the stored rows are the
  // fp32 ones rounded to fp16.
  const std::string out16 = d + "/out16.h5";
  r = run({"capture", *model_, "--prompt", kPrompt, "--temp", "0.4", "--compare", "standard", "--layers", "1",
           "--heads", "0,1", "--fp16", "-o", out16});
  ASSERT_EQ(r.rc, 0) << r.err;
  const CaptureFile f16 = read_capture(out16);
  ASSERT_EQ(f16.comparisons.size(), 1u);
  ASSERT_EQ(f16.comparisons[0].kl.size(), f.comparisons[0].kl.size());
  for (size_t i = 0; i < f.comparisons[0].kl.size(); ++i) {
    ASSERT_TRUE(std::isfinite(f16.comparisons[0].kl[i])) << i;
    EXPECT_NEAR(f16.comparisons[0].kl[i], f.comparisons[0].kl[i], 1e-6 * std::fabs(f.comparisons[0].kl[i]) + 1e-9);
  }
  const RunCapture* a16 = f16.find_run("focal_t0.4");
  ASSERT_NE(a16, nullptr);
  ASSERT_EQ(a16->probs.size(), a->probs.size());
  for (size_t i = 0; i < a->probs.size(); ++i) ASSERT_EQ(a16->probs[i], math::round_to_half(a->probs[i])) << i;

  // --store metrics --compare: no T^2 data in the file, but the same KL / JS per row as the stored-rows capture
  // above (its comparison is the reference; 1e-6 relative: the same fp32 rows, compared a layer at a time as the
  // two runs go in lockstep).
  const std::string outm = d + "/outm.h5";
  r = run({"capture", *model_, "--prompt", kPrompt, "--temp", "0.4", "--compare", "standard", "--layers", "1",
           "--heads", "0,1", "--store", "metrics", "-o", outm});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("capture focal_t0.4 and standard in lockstep (a layer of each in turn): step 4/4"));
  const CaptureFile fm = read_capture(outm);
  ASSERT_EQ(fm.runs.size(), 2u);
  for (const RunCapture& run : fm.runs) {
    EXPECT_TRUE(run.probs.empty()) << run.name;
    EXPECT_TRUE(run.scores.empty()) << run.name;
  }
  ASSERT_EQ(fm.comparisons.size(), 1u);
  EXPECT_EQ(fm.comparisons[0].run_a, "focal_t0.4");
  EXPECT_EQ(fm.comparisons[0].run_b, "standard");
  ASSERT_EQ(fm.comparisons[0].kl.size(), f.comparisons[0].kl.size());
  for (size_t i = 0; i < f.comparisons[0].kl.size(); ++i) {
    EXPECT_NEAR(fm.comparisons[0].kl[i], f.comparisons[0].kl[i], 1e-6 * std::fabs(f.comparisons[0].kl[i]) + 1e-9) << i;
    EXPECT_NEAR(fm.comparisons[0].js[i], f.comparisons[0].js[i], 1e-6 * std::fabs(f.comparisons[0].js[i]) + 1e-9) << i;
  }
  r = run({"inspect", outm});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("compare focal_t0.4 vs standard"));
}

// --rope-scaling replaces config.json's rope_scaling: info shows it, a capture under it has the per-token loss of
// the library's run with the same override (the reference: LoadOptions::rope_scaling, itself checked against
// transformers; 1e-6 relative) and another than the model's own, and records it in its warnings; a malformed value
// fails naming the option, writing nothing.
TEST_F(CliTest, RopeScalingOverride) {
  const std::string d = out_dir("rope");
  CliResult r = run({"info", *model_, "--rope-scaling", "linear:2"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("scaling linear factor 2"));
  EXPECT_THAT(r.err, HasSubstr("rope_scaling linear:2 replaces the model's own"));
  for (const char* rope : {"linear:2", ""}) {
    std::vector<std::string> args = {"capture", *model_,   "--prompt", kPrompt, "--temp",
                                     "0.4",     "--store", "metrics",  "-o",    d + "/cap" + rope + ".h5"};
    if (*rope) args.insert(args.end() - 2, {"--rope-scaling", rope});
    r = run(args);
    ASSERT_EQ(r.rc, 0) << r.err;
  }
  const CaptureFile lin = read_capture(d + "/caplinear:2.h5"), own = read_capture(d + "/cap.h5");
  EXPECT_THAT(lin.warnings, HasSubstr("rope_scaling linear:2 replaces the model's own"));
  EXPECT_EQ(own.warnings, "");
  r = run({"inspect", d + "/caplinear:2.h5"});  // the summary says what the run went on despite
  EXPECT_THAT(r.out, HasSubstr("warnings: rope_scaling linear:2 replaces the model's own"));
  EXPECT_THAT(run({"inspect", d + "/cap.h5"}).out, Not(HasSubstr("warnings:")));
  LoadOptions lo;
  lo.rope_scaling = "linear:2";
  auto m = Model::load(*model_, Device::kCpu, lo);
  CaptureRequest q;
  q.store_probs = q.store_scores = false;
  const RunCapture ref = capture_run(*m, lin.token_ids, TempSpec::focal(0.4f), q, "ref");
  ASSERT_EQ(lin.runs.size(), 1u);
  const std::vector<float>& got = lin.runs[0].token_nll;
  ASSERT_EQ(got.size(), ref.token_nll.size());
  double moved = 0.0;
  for (size_t i = 0; i + 1 < got.size(); ++i) {
    EXPECT_NEAR(got[i], ref.token_nll[i], 1e-6 * std::fabs(ref.token_nll[i]) + 1e-9) << i;
    moved = std::max(moved, (double)std::fabs(got[i] - own.runs[0].token_nll[i]));
  }
  EXPECT_GT(moved, 1e-4) << "linear:2 halves every rotary angle: the loss moves";
  const std::string bad = out_dir("rope_bad");
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--rope-scaling", "sideways:2", "-o", bad + "/bad.h5"}, 2,
                 {"--rope-scaling", "sideways:2"}, bad);
}

TEST_F(CliTest, SweepEntropyRisesWithTemperature) {
  const std::string d = out_dir("sweep");
  const std::string out = d + "/sweep.h5";
  CliResult r = run({"sweep", *model_, "--prompt", kPrompt, "--temps", "0.4:1.0:0.2", "-o", out});
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_TRUE(exists(out));
  EXPECT_EQ(list_dir(d), std::vector<std::string>{"sweep.h5"});
  const std::vector<SweepRow> rows = parse_sweep_table(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  const double want_t[] = {0.4, 0.6, 0.8, 1.0};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_NEAR(rows[i].t, want_t[i], 1e-6);
    EXPECT_GT(rows[i].entropy, 0.0);
    if (i) { EXPECT_GT(rows[i].entropy, rows[i - 1].entropy) << "mean entropy must rise with t (row " << i << ")"; }
  }

  r = run({"inspect", out});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr("sweep " + out), HasSubstr("4 temperatures, 2 layers x 4 heads")));
  // The provenance and the setting whose focal_temp was swept; --run names a run of a capture only.
  EXPECT_THAT(r.out, AllOf(HasSubstr("model " + *model_), HasSubstr("computed on cpu, precision exact"),
                           HasSubstr("tokenizer tokenizer.model (sentencepiece)\n"),
                           HasSubstr("swept setting {\"focal_temp\":")));
  expect_failure({"inspect", out, "--run", "x"}, 2, {"--run picks a run of a capture", "focalscope-sweep"}, "");
  const std::vector<SweepRow> again = parse_sweep_table(r.out);
  ASSERT_EQ(again.size(), rows.size()) << r.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_NEAR(again[i].entropy, rows[i].entropy, 1e-4);
    EXPECT_NEAR(again[i].loss, rows[i].loss, 1e-4);
  }
  const SweepFile sf = read_sweep(out);
  EXPECT_EQ(sf.focal_temps.size(), 4u);
  EXPECT_EQ((int)sf.token_ids.size(), prompt_tokens(kPrompt));

  // With relevant keys, the file records them and the table adds R and 1 - R: the mean over heads of the stored
  // relevant_mass (the table had no such column, and the file did not say which keys R was over).
  r = run({"sweep", *model_, "--prompt", kPrompt, "--temps", "0.4,1", "--relevant", "2,3", "-o", d + "/rel.h5"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const SweepFile rel = read_sweep(d + "/rel.h5");
  EXPECT_EQ(rel.relevant, (std::vector<int32_t>{2, 3}));
  r = run({"inspect", d + "/rel.h5"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("relevant keys: 2 3"));
  {
    std::stringstream ss(r.out);
    std::string line;
    size_t s = 0;
    while (std::getline(ss, line)) {
      double t, loss, ent, sink, tail, rm, noise;
      if (std::sscanf(line.c_str(), "%lf %lf %lf %lf %lf %lf %lf", &t, &loss, &ent, &sink, &tail, &rm, &noise) != 7)
        continue;
      ASSERT_LT(s, rel.focal_temps.size());
      const size_t per = (size_t)rel.n_layers * rel.n_heads;
      double want = 0;
      for (size_t i = 0; i < per; ++i) want += rel.head_metrics[(s * per + i) * kNumRowMetrics + kRelevantMass];
      EXPECT_NEAR(rm, want / per, 1e-4) << line;  // printed to 4 decimals
      EXPECT_NEAR(noise, 1.0 - rm, 1e-4) << line;
      ++s;
    }
    EXPECT_EQ(s, rel.focal_temps.size()) << r.out;
  }
  EXPECT_TRUE(read_sweep(out).relevant.empty());

  // A legend label with a comma in it: "\\," (it could not hold one); an empty label is refused, not dropped.
  r = run({"figure", "sweep", out, "--labels", "seed 1\\, lr 3e-4", "-o", d + "/sweep.svg"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(slurp(d + "/sweep.svg"), HasSubstr(">seed 1, lr 3e-4<"));
  expect_failure({"figure", "sweep", out, "--labels", "a,", "-o", d + "/empty.svg"}, 2,
                 {"--labels: label 2 of 'a,' is empty", "\\, for a comma"}, "");
  std::remove((d + "/sweep.svg").c_str());

  // --ids runs the ids as given: the prompt's own ids give the prompt's table (the same forward; 1e-4: printed).
  {
    std::ofstream ids(d + "/ids.txt");
    for (int32_t id : sf.token_ids) ids << id << " ";
  }
  r = run({"sweep", *model_, "--ids", d + "/ids.txt", "--temps", "0.4:1.0:0.2"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::vector<SweepRow> by_ids = parse_sweep_table(r.out);
  ASSERT_EQ(by_ids.size(), rows.size()) << r.out;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_NEAR(by_ids[i].entropy, rows[i].entropy, 1e-4);
    EXPECT_NEAR(by_ids[i].loss, rows[i].loss, 1e-4);
  }
  expect_failure({"sweep", *model_, "--ids", d + "/ids.txt", "--prompt", "x", "--temps", "0.5"}, 2,
                 {"--ids FILE or as a prompt"}, "");

  // Without -o the table is printed and nothing is written.
  r = run({"sweep", *model_, "--prompt", kPrompt, "--temps", "0.5,1"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(parse_sweep_table(r.out).size(), 2u);
  EXPECT_THAT(r.out, Not(HasSubstr("wrote")));
}

TEST_F(CliTest, GenerateAndCapture) {
  CliResult r = run({"generate", *model_, "--prompt", "The quick brown", "-n", "5"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("The quick brown", 0), 0u) << r.out;
  // Greedy generation is deterministic.
  EXPECT_EQ(run({"generate", *model_, "--prompt", "The quick brown", "-n", "5"}).out, r.out);

  const std::string d = out_dir("generate");
  const std::string g = d + "/g.h5";
  r = run({"generate", *model_, "--prompt", "The quick brown", "-n", "5", "--temp", "0.5", "--capture", g});
  ASSERT_EQ(r.rc, 0) << r.err;
  ASSERT_TRUE(exists(g));
  EXPECT_EQ(list_dir(d), std::vector<std::string>{"g.h5"});
  int n_prompt = -1, n_gen = -1;
  // The "wrote" line goes to stderr: stdout is the generated text alone (it ran into a redirected text).
  EXPECT_EQ(r.out.find("wrote "), std::string::npos) << r.out;
  const size_t w = r.err.find("wrote " + g + ": ");
  ASSERT_NE(w, std::string::npos) << r.err;
  ASSERT_EQ(std::sscanf(r.err.c_str() + w + g.size() + 8, "%d prompt + %d generated", &n_prompt, &n_gen), 2) << r.err;
  EXPECT_EQ(n_prompt, prompt_tokens("The quick brown"));
  EXPECT_GE(n_gen, 1);
  EXPECT_LE(n_gen, 5);

  r = run({"inspect", g});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(HasSubstr(std::to_string(n_prompt + n_gen) + " tokens"), HasSubstr("run focal_t0.5")));
  EXPECT_EQ(read_capture(g).n_tokens(), n_prompt + n_gen);
}

// The losses a capture's inspect prints for one run: "prompt loss X" and "generated loss Y" (NaN when absent).
struct InspectLosses {
  double prompt = NAN, generated = NAN;
};
InspectLosses inspect_losses(const std::string& out, const std::string& run) {
  InspectLosses l;
  const size_t at = out.find("\nrun " + run + " ");
  if (at == std::string::npos) return l;
  std::stringstream ss(out.substr(at + 1));
  std::string line;
  std::getline(ss, line);  // the run's own line
  while (std::getline(ss, line) && line.rfind("  ", 0) == 0) {
    std::sscanf(line.c_str(), "  prompt loss %lf", &l.prompt);
    std::sscanf(line.c_str(), "  generated loss %lf", &l.generated);
  }
  return l;
}

// Mean of token_nll over positions [lo, hi): the oracle of the printed losses.
double mean_of(const std::vector<float>& v, int lo, int hi) {
  double s = 0;
  for (int i = lo; i < hi; ++i) s += v[i];
  return s / (hi - lo);
}

// generate --capture --compare: the file records where the prompt ends, holds the second setting over exactly the
// generated tokens with its per-row KL / JS, and is what `capture --ids` of those tokens under both settings gives
// (the oracle: the same runs and comparison, value for value). inspect marks the boundary and reports the prompt's
// loss over prompt tokens only, the generated tokens' on their own line (oracle: the stored token_nll by hand).
TEST_F(CliTest, GenerateCompareMarksThePromptAndMatchesCaptureOfTheIds) {
  const std::string d = out_dir("generate_compare");
  const std::string g = d + "/g.h5";
  const char* prompt = "The quick brown fox";
  CliResult r = run({"generate", *model_, "--prompt", prompt, "-n", "6", "--temp", "0.5", "--compare", "standard",
                     "--layers", "1", "--heads", "0,2", "--capture", g});
  ASSERT_EQ(r.rc, 0) << r.err;
  const int P = prompt_tokens(prompt);
  EXPECT_THAT(r.err, HasSubstr("wrote " + g + ": " + std::to_string(P) + " prompt + "));  // stdout: the text alone
  EXPECT_THAT(r.err, HasSubstr("runs: focal_t0.5 standard"));
  EXPECT_THAT(r.err, HasSubstr("compare focal_t0.5 vs standard: layer 1/1  done in"));
  const CaptureFile f = read_capture(g);
  const int T = f.n_tokens();
  ASSERT_GT(T, P) << "nothing generated";
  EXPECT_EQ(f.n_prompt_tokens, P);
  ASSERT_EQ(f.runs.size(), 2u);
  EXPECT_EQ(f.runs[1].name, "standard");
  ASSERT_EQ(f.comparisons.size(), 1u);
  EXPECT_EQ(f.comparisons[0].kl.size(), (size_t)2 * T);  // 1 layer x 2 heads x every row

  // The oracle: capture --ids of the same token ids, under the same two settings.
  const std::string ids_txt = d + "/ids.txt";
  {
    std::ofstream o(ids_txt);
    for (int i = 0; i < T; ++i) o << f.token_ids[i] << (i % 3 == 2 ? ",\n" : " ");  // spaces, commas, newlines
  }
  const std::string c = d + "/c.h5";
  r = run({"capture", *model_, "--ids", ids_txt, "--temp", "0.5", "--compare", "standard", "--layers", "1", "--heads",
           "0,2", "-o", c});
  ASSERT_EQ(r.rc, 0) << r.err;
  const CaptureFile o = read_capture(c);
  EXPECT_EQ(o.token_ids, f.token_ids);
  EXPECT_EQ(o.pieces, f.pieces);
  EXPECT_EQ(o.n_prompt_tokens, 0) << "capture --ids does not know where a prompt ended";
  ASSERT_EQ(o.runs.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    SCOPED_TRACE(f.runs[k].name);
    EXPECT_EQ(o.runs[k].name, f.runs[k].name);
    EXPECT_EQ(o.runs[k].probs, f.runs[k].probs);
    ASSERT_EQ(o.runs[k].metrics.size(), f.runs[k].metrics.size());
    for (size_t i = 0; i < f.runs[k].metrics.size(); ++i) {  // relevant_mass is NaN: no relevant keys
      const float x = o.runs[k].metrics[i], y = f.runs[k].metrics[i];
      ASSERT_TRUE(x == y || (std::isnan(x) && std::isnan(y))) << i << ": " << x << " vs " << y;
    }
    ASSERT_EQ(o.runs[k].token_nll.size(), f.runs[k].token_nll.size());
    for (int i = 0; i + 1 < T; ++i) EXPECT_EQ(o.runs[k].token_nll[i], f.runs[k].token_nll[i]) << i;
  }
  ASSERT_EQ(o.comparisons.size(), 1u);
  EXPECT_EQ(o.comparisons[0].kl, f.comparisons[0].kl);
  EXPECT_EQ(o.comparisons[0].js, f.comparisons[0].js);

  r = run({"inspect", g});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(std::to_string(T) + " tokens (" + std::to_string(P) + " prompt + " +
                               std::to_string(T - P) + " generated)"));
  EXPECT_THAT(r.out, HasSubstr("[" + f.pieces[P - 1] + "] || [" + f.pieces[P] + "]"));
  for (const RunCapture& run_ : f.runs) {
    SCOPED_TRACE(run_.name);
    const InspectLosses l = inspect_losses(r.out, run_.name);
    EXPECT_NEAR(l.prompt, mean_of(run_.token_nll, 0, P - 1), 5.1e-5);  // printed with 4 decimals
    EXPECT_NEAR(l.generated, mean_of(run_.token_nll, P - 1, T - 1), 5.1e-5);
  }
  // The generated tokens are greedy picks of focal_t0.5: far more likely under it than the prompt's tokens.
  EXPECT_LT(inspect_losses(r.out, "focal_t0.5").generated, inspect_losses(r.out, "focal_t0.5").prompt);

  // Without the boundary (capture --ids) the whole sequence is prompt: one loss over every prediction.
  r = run({"inspect", c});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_THAT(r.out, AllOf(Not(HasSubstr("generated")), Not(HasSubstr("||"))));
  const InspectLosses all = inspect_losses(r.out, "standard");
  EXPECT_NEAR(all.prompt, mean_of(o.runs[1].token_nll, 0, T - 1), 5.1e-5);
  EXPECT_TRUE(std::isnan(all.generated));
}

// capture --ids: bad files are one error naming the option, the file and the offending item; nothing is written.
TEST_F(CliTest, CaptureIdsRefusesBadFilesClearly) {
  const std::string d = out_dir("ids_errors");
  const std::string o = d + "/x.h5";
  const std::string files = *root_ + "/ids_files";
  ASSERT_EQ(mkdir(files.c_str(), 0755), 0);
  auto file = [&](const std::string& name, const std::string& text) {
    std::string p = files + "/" + name;
    std::ofstream(p) << text;
    return p;
  };
  const std::string good = file("good.txt", "1 5 9\n");
  expect_failure({"capture", *model_, "--ids", good, "--prompt", kPrompt, "-o", o}, 2, {"--ids", "--prompt"}, d);
  expect_failure({"capture", *model_, "--ids", good, "--prompt-file", good, "-o", o}, 2, {"--ids"}, d);
  expect_failure({"capture", *model_, "--ids", files + "/none.txt", "-o", o}, 1, {"--ids", files + "/none.txt"}, d);
  const std::string word = file("word.txt", "1 5 x9 3");
  expect_failure({"capture", *model_, "--ids", word, "-o", o}, 1, {"--ids", word, "item 2", "'x9'"}, d);
  const std::string frac = file("frac.txt", "1,2.5");
  expect_failure({"capture", *model_, "--ids", frac, "-o", o}, 1, {frac, "item 1", "'2.5'"}, d);
  const std::string empty = file("empty.txt", " \n, \n");
  expect_failure({"capture", *model_, "--ids", empty, "-o", o}, 1, {empty, "no token ids"}, d);
  // The model's vocabulary is 384 (tok.model): ids 0..383.
  const std::string big = file("big.txt", "1 2 383 384 5");
  expect_failure({"capture", *model_, "--ids", big, "-o", o}, 1, {big, "position 3", "id 384", "0..383"}, d);
  const std::string neg = file("neg.txt", "-1 2");
  expect_failure({"capture", *model_, "--ids", neg, "-o", o}, 1, {neg, "position 0", "id -1"}, d);
  std::string long_ids;
  for (int i = 0; i < 17; ++i) long_ids += "7 ";
  const std::string too_long = file("long.txt", long_ids);
  const CliResult past = run({"capture", *short_model_, "--ids", too_long, "--store", "metrics", "-o", o});
  EXPECT_EQ(past.rc, 0) << past.err;  // past the trained context: runs, warned (issue 33)
  EXPECT_NE(past.err.find("17 tokens run past the model's trained context of 16"), std::string::npos) << past.err;
  std::remove(o.c_str());
  // generate --compare records a second run in the capture, so it needs one; a bad spec fails before generating.
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "2", "--compare", "standard"}, 2,
                 {"--compare", "--capture"}, d);
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "2", "--compare", "sideways", "--capture", o}, 2,
                 {"--compare"}, d);
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "2", "--compare", "focal:0", "--capture", o}, 1,
                 {"--compare"}, d);
  // A good file runs, the ids exactly as given (no BOS added).
  const CliResult r = run({"capture", *model_, "--ids", good, "--store", "metrics", "-o", o});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(read_capture(o).token_ids, (std::vector<int32_t>{1, 5, 9}));
}

// ---- errors ----

TEST_F(CliTest, UsageErrorsExitTwo) {
  const std::string d = out_dir("usage_errors");
  const std::string o = d + "/x.h5";
  expect_failure({"bogus", *model_}, 2, {"unknown command 'bogus'"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--bogus", "-o", o}, 2, {"--bogus"}, d);
  expect_failure({"sweep", *model_, "--prompt", kPrompt, "--temps", "1", "--bogus", "1"}, 2, {"--bogus"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt}, 2, {"-o"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--temp", "abc", "-o", o}, 2, {"--temp", "abc"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--layers", "1-x", "-o", o}, 2, {"--layers"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--compare", "sideways", "-o", o}, 2, {"--compare"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--compare", "learned:0.8", "--compare", "ssmax", "-o", o},
                 2, {"option --compare is given twice ('learned:0.8', then 'ssmax')"}, d);
  expect_failure({"capture", *model_, *model_, "--prompt", kPrompt, "-o", o}, 2, {"MODEL"}, d);
  expect_failure({"capture", *model_, "-o", o}, 2, {"--prompt"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--budget", "lots", "-o", o}, 2, {"--budget"}, d);
  expect_failure({"sweep", *model_, "--prompt", kPrompt, "-o", o}, 2, {"--temps"}, d);
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "0"}, 2, {"-n"}, d);
  // integers past their type are refused, not wrapped (-n 4294967298 generated 2 tokens, --seed -1 ran as 2^64 - 1)
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "4294967298"}, 2,
                 {"--n-new: 4294967298 is out of range (at most 2147483647)"}, d);
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "99999999999999999999"}, 2, {"is out of range"}, d);
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "2", "--sample-temp", "1", "--seed", "-1"}, 2,
                 {"--seed: '-1' is not an integer >= 0"}, d);
  expect_failure(
      {"generate", *model_, "--prompt", kPrompt, "-n", "2", "--sample-temp", "1", "--seed", "18446744073709551616"}, 2,
      {"--seed: 18446744073709551616 is out of range"}, d);
  // a capture option without the capture (it was ignored without a word)
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "2", "--queries", "1"}, 2,
                 {"--queries describes the capture: it needs --capture FILE"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "-o", o, "--temp"}, 2, {"--temp", "needs a value"}, d);
  // a prompt file that is not UTF-8 (Latin-1) ran as replacement pieces or raw bytes, without a word
  const std::string latin1 = out_dir("latin1_prompt") + "/latin1.txt";
  std::ofstream(latin1) << "caf\xe9 au lait";
  expect_failure({"capture", *model_, "--prompt-file", latin1, "-o", o}, 1,
                 {"--prompt-file '" + latin1 + "' is not UTF-8 text: byte 0xe9 at offset 3", "iconv"}, d);
  // an unknown figure kind is a usage error naming the kinds (it exited 1, as a damaged file does)
  expect_failure({"figure", "bars", *model_, "-o", d + "/f.png"}, 2, {"unknown figure kind 'bars'", "heatmap"}, d);
}

// Values a command would have taken without effect, or crashed on (the QA pass of 2026-12-06): each is one clear
// error before anything runs, and nothing is written.
TEST_F(CliTest, OptionsWithoutEffectAndImpossibleSizesAreRefused) {
  const std::string d = out_dir("refused_values");
  const std::string o = d + "/x.h5";
  // sweep varies focal attention's t: another mode is refused (it was ignored, and the file said focal)
  expect_failure({"sweep", *model_, "--prompt", kPrompt, "--temps", "0.3,1", "--mode", "standard", "-o", o}, 2,
                 {"sweep runs focal attention", "standard"}, d);
  // overrides on every layer (the test model has 2) leave t nothing to change (each t gave the same numbers)
  expect_failure({"sweep", *model_, "--prompt", kPrompt, "--temps", "0.3,1", "--layer-temp", "0=0.5,1=0.5", "-o", o}, 1,
                 {"gives every layer or head its own t", "would change nothing"}, d);
  // a mode's own option with another mode (it was recorded in the run's spec, without effect)
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--tau-scale", "0.5", "-o", o}, 2,
                 {"--tau-scale applies to learned attention only", "focal"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--ssmax-s", "2", "-o", o}, 2,
                 {"--ssmax-s applies to ssmax attention only"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--name", "", "-o", o}, 2, {"--name is empty"}, d);
  // a name that spells another setting would label a t = 0.3 run as t = 0.4 in every figure and table
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--temp", "0.3", "--name", "focal_t0.4", "-o", o}, 1,
                 {"--name focal_t0.4 names the setting focal_t0.4, and the run is focal_t0.3"}, d);
  // ... and so do "native" (the model's own setting) and a compared run's "_b" form
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--temp", "0.3", "--name", "native", "-o", o}, 1,
                 {"--name native names the setting ", ", and the run is focal_t0.3"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--temp", "0.3", "--name", "standard_b", "-o", o}, 1,
                 {"--name standard_b names the setting standard, and the run is focal_t0.3"}, d);
  // sampling values that are not numbers of the range (nan sampled garbage, a negative top-k meant "all")
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "2", "--sample-temp", "nan"}, 2, {"--sample-temp"},
                 d);
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "2", "--top-k", "-2"}, 2, {"--top-k"}, d);
  // sampling options under greedy decoding would be ignored without a word
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "2", "--top-k", "5"}, 2,
                 {"--top-k 5 shapes sampling", "--sample-temp above 0"}, d);
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "2", "--seed", "7", "--sample-temp", "0"}, 2,
                 {"--seed 7 shapes sampling"}, d);
  // -n past what memory holds: the KV cache's size in the message, exit 1 (it was "internal error: std::bad_alloc",
  // exit 3); the one warning line before it says the positions run past the trained context
  const CliResult r = run({"generate", *model_, "--prompt", kPrompt, "-n", "2000000000"});
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("-n 2000000000"));
  EXPECT_THAT(r.err, HasSubstr("needs a KV cache of"));
  EXPECT_THAT(r.err, Not(HasSubstr("internal error")));
  // a directory given as an input file is named as one ("the prompt is empty", "data file ... is empty")
  const std::string adir = out_dir("input_dir");
  expect_failure({"capture", *model_, "--prompt-file", adir, "-o", o}, 1, {"--prompt-file", "is a directory"}, d);
  expect_failure({"capture", *model_, "--ids", adir, "-o", o}, 1, {"--ids", "is a directory"}, d);
  expect_failure({"calibrate", *model_, "--data", adir, "-o", d + "/t.json"}, 1, {"data file", "is a directory"}, d);
  // init (and export) into a directory that holds files: refused, the files as they were (init replaced a trained
  // model's weights and left its tokenizer of another vocabulary); --force writes over them
  const std::string holds = out_dir("init_holds") + "/m";
  ASSERT_EQ(run({"init", holds, "--vocab", "64", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
                 "--intermediate", "64"})
                .rc,
            0);
  const std::string weights = slurp(holds + "/model.safetensors");
  expect_failure({"init", holds, "--vocab", "64", "--hidden", "32", "--layers", "1", "--heads", "2", "--seed", "7"}, 1,
                 {"is not empty (it holds a model: config.json)", "--force"}, "");
  EXPECT_EQ(slurp(holds + "/model.safetensors"), weights);
  expect_failure({"export", holds, holds}, 1, {"DST_DIR", "is not empty"}, "");
  ASSERT_EQ(run({"init", holds, "--vocab", "64", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
                 "--intermediate", "64", "--seed", "7", "--force"})
                .rc,
            0);
  EXPECT_NE(slurp(holds + "/model.safetensors"), weights);
  // --mode standard records t = 1, as --temp standard does (it kept the native 0.4)
  ASSERT_EQ(run({"capture", *model_, "--prompt", kPrompt, "--mode", "standard", "--store", "metrics", "-o", o}).rc, 0);
  EXPECT_EQ(TempSpec::from_json(read_capture(o).runs[0].temp_spec_json, o).text(), "standard");
  EXPECT_THAT(read_capture(o).runs[0].temp_spec_json, HasSubstr("\"focal_temp\":1.0"));
  // inspect: an unknown --run is an error naming the runs there; a metrics-only capture says it stores no rows
  const CliResult i = run({"inspect", o});
  ASSERT_EQ(i.rc, 0) << i.err;
  EXPECT_THAT(i.out, HasSubstr("stored rows: none (metrics only)"));
  expect_failure({"inspect", o, "--run", "nope"}, 1, {"--run", "no run named 'nope'", "its runs: standard"}, "");
  std::remove(o.c_str());
  // demo: --out naming a file is refused before the model runs; a bad prompt leaves no directory behind
  const std::string file = d + "/a_file";
  std::ofstream(file) << "x";
  expect_failure({"demo", "--model", *model_, "--out", file}, 1, {"--out", "is a file, not a directory"}, "");
  expect_failure({"demo", "--model", *model_, "--out", d + "/gallery", "--prompt", ""}, 1, {"--prompt is empty"}, "");
  EXPECT_FALSE(exists(d + "/gallery"));
  std::remove(file.c_str());
}

TEST_F(CliTest, BadTemperaturesExitOne) {
  const std::string d = out_dir("temp_errors");
  const std::string o = d + "/x.h5";
  for (const char* t : {"0", "nan", "-1", "inf"})
    expect_failure({"capture", *model_, "--prompt", kPrompt, "--temp", t, "-o", o}, 1, {"--temp"}, d);
  expect_failure({"sweep", *model_, "--prompt", kPrompt, "--temps", "0:1:0.5", "-o", o}, 1, {"--temps"}, d);
  // A range that is well-formed but empty, backwards or too long is an error in the value too (exit 1), naming it.
  expect_failure({"sweep", *model_, "--prompt", kPrompt, "--temps", "1:0.1:0.1", "-o", o}, 1, {"--temps", "FROM"}, d);
  expect_failure({"sweep", *model_, "--prompt", kPrompt, "--temps", "0.1:1:0", "-o", o}, 1, {"--temps", "STEP"}, d);
  expect_failure({"sweep", *model_, "--prompt", kPrompt, "--temps", "nan:1:0.1", "-o", o}, 1, {"--temps", "finite"}, d);
  expect_failure({"sweep", *model_, "--prompt", kPrompt, "--temps", "0.1:1:1e-7", "-o", o}, 1, {"--temps", "9000001"},
                 d);
  expect_failure({"sweep", *model_, "--prompt", kPrompt, "--temps", "0.1:1", "-o", o}, 2, {"--temps", "FROM:TO:STEP"},
                 d);
  expect_failure({"sweep", *model_, "--prompt", kPrompt, "--temps", "0.5,nan", "-o", o}, 1, {"--temps"}, d);
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "2", "--temp", "0", "--capture", o}, 1, {"--temp"},
                 d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--layer-temp", "5=0.5", "-o", o}, 1, {"--layer-temp"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--head-temp", "0:9=0.5", "-o", o}, 1, {"--head-temp"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--mode", "learned", "-o", o}, 1,
                 {"--mode: ", "mode = learned"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--compare", "learned", "-o", o}, 1, {"learned"}, d);
}

// --compare walks the shared table of the one spec grammar (tests/data/temp_specs.tsv; --temp and batch --runs
// parse through the same function) on a learned-tau model of 2 layers and 2 heads: a valid spec becomes the capture's
// second run, stored as that spec; an invalid one is one error naming --compare, exit 2 or 1, and no file.
TEST_F(CliTest, CompareTakesTheSharedSpecTable) {
  const std::string learned = *root_ + "/spec_learned";
  CliResult r = run({"init", learned, "--tokenizer", *tok_, "--hidden", "32", "--layers", "2", "--heads", "2",
                     "--kv-heads", "1", "--intermediate", "64", "--attn", "learned"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string d = out_dir("spec_table");
  int i = 0;
  for (const test::SpecCase& c : test::temp_spec_cases(FOCAL_SOURCE_DIR)) {
    SCOPED_TRACE("spec '" + c.spec + "'");
    const std::string o = d + "/s" + std::to_string(i++) + ".h5";
    const std::vector<std::string> args = {"capture", learned,     "--prompt", "the cat",  "--temp",
                                           "0.123",   "--compare", c.spec,     "--layers", "0",
                                           "--store", "metrics",   "-o",       o};
    if (!c.error.empty()) {
      expect_failure(args, kUsageOrValue, {"--compare", c.error}, d);
      continue;
    }
    r = run(args);
    ASSERT_EQ(r.rc, 0) << r.err;
    const CaptureFile f = read_capture(o);
    ASSERT_EQ(f.runs.size(), 2u);
    EXPECT_EQ(TempSpec::from_json(f.runs[0].temp_spec_json, o).text(), "focal:0.123");
    EXPECT_EQ(TempSpec::from_json(f.runs[1].temp_spec_json, o).text(), c.canonical);
    std::remove(o.c_str());
  }
  // --temp takes the same grammar (a bare number stays focal attention at t)
  const std::string o = d + "/t.h5";
  r = run({"capture", learned, "--prompt", "the cat", "--temp", "learned:0.8+1:0=0.5", "--layers", "0", "--store",
           "metrics", "-o", o});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(TempSpec::from_json(read_capture(o).runs[0].temp_spec_json, o).text(), "learned:0.8+1:0=0.5");
}

TEST_F(CliTest, BadSelectionsExitOne) {
  const std::string d = out_dir("selection_errors");
  const std::string o = d + "/x.h5";
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--layers", "99", "-o", o}, 1, {"--layers", "99"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--heads", "99", "-o", o}, 1, {"--heads", "99"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--queries", "0,99", "-o", o}, 1, {"--queries"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--heads", "1,1", "-o", o}, 1, {"--heads", "twice"}, d);
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--budget", "1K", "-o", o}, 1, {"--budget"}, d);
}

TEST_F(CliTest, GenerateValidatesCaptureSelectionBeforeGenerating) {
  // Like capture ("over budget fails before running"), a bad --capture selection should fail before generation
  // runs, with nothing printed on stdout.
  const std::string d = out_dir("generate_selection_errors");
  const std::string o = d + "/x.h5";
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "2", "--layers", "7", "--capture", o}, 1,
                 {"--layers"}, d);
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "2", "--budget", "1K", "--capture", o}, 1,
                 {"--budget"}, d);
}

TEST_F(CliTest, BadPromptsExitOne) {
  const std::string d = out_dir("prompt_errors");
  const std::string o = d + "/x.h5";
  expect_failure({"capture", *model_, "--prompt", "", "-o", o}, 1, {"empty"}, d);
  expect_failure({"sweep", *model_, "--prompt", "", "--temps", "1", "-o", o}, 1, {"empty"}, d);
  expect_failure({"capture", *model_, "--prompt-file", d + "/no_such_prompt.txt", "-o", o}, 1,
                 {d + "/no_such_prompt.txt"}, d);
}

// Past the trained context (issue 33) a rotary model runs: one warning line on stderr naming the length and the
// context, exit 0, and the capture's provenance keeps the sentence. (GPT-2's refusal: hf_conformance, HfPastContext.)
TEST_F(CliTest, PromptsPastTheContextRunWithAWarning) {
  const std::string d = out_dir("past_context");
  const std::string o = d + "/x.h5";
  const int n_long = prompt_tokens(kLongPrompt);
  ASSERT_GT(n_long, 16);
  const std::string warning = std::to_string(n_long) + " tokens run past the model's trained context of 16";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"capture", *short_model_, "--prompt", kLongPrompt, "-o", o},
        {"sweep", *short_model_, "--prompt", kLongPrompt, "--temps", "1", "-o", o},
        {"generate", *short_model_, "--prompt", kLongPrompt, "-n", "2", "--capture", o}}) {
    std::remove(o.c_str());
    const CliResult r = run(args);
    EXPECT_EQ(r.rc, 0) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("warning: " + warning), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_EQ(r.err.find("warning: ", r.err.find("warning: ") + 1), std::string::npos) << "warned twice: " << r.err;
  }
  const CliResult r = run({"capture", *short_model_, "--prompt", kLongPrompt, "--store", "metrics", "-o", o});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(read_capture(o).warnings.find(warning), std::string::npos) << read_capture(o).warnings;
}

TEST_F(CliTest, BadPathsExitOne) {
  const std::string d = out_dir("path_errors");
  const std::string o = d + "/x.h5";
  expect_failure({"capture", *model_, "--prompt", kPrompt, "-o", "/nonexistent/dir/x.h5"}, 1, {"/nonexistent/dir/x.h5"},
                 "");
  EXPECT_FALSE(exists("/nonexistent/dir"));
  expect_failure({"sweep", *model_, "--prompt", kPrompt, "--temps", "1", "-o", "/nonexistent/dir/s.h5"}, 1,
                 {"/nonexistent/dir/s.h5"}, "");
  expect_failure({"generate", *model_, "--prompt", kPrompt, "-n", "2", "--capture", "/nonexistent/dir/g.h5"}, 1,
                 {"/nonexistent/dir/g.h5"}, "");
  const std::string missing = *root_ + "/no_such_model";
  expect_failure({"capture", missing, "--prompt", kPrompt, "-o", o}, 1, {missing}, d);
  expect_failure({"info", missing}, 1, {missing}, d);
  const std::string text = *root_ + "/notes.txt";
  {
    std::ofstream f(text);
    f << "not a capture\n";
  }
  expect_failure({"inspect", text}, 1, {text}, d);
  expect_failure({"inspect", *root_ + "/missing.h5"}, 1, {*root_ + "/missing.h5"}, d);
  // A model directory without tokenizer.model cannot take a text prompt.
  const std::string notok = *root_ + "/notok";
  ASSERT_EQ(run({"init", notok, "--vocab", "64", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
                 "--intermediate", "64"})
                .rc,
            0);
  expect_failure({"capture", notok, "--prompt", kPrompt, "-o", o}, 1, {"tokenizer.model"}, d);
  // generate has no token-id input: its message does not offer one
  expect_failure({"generate", notok, "--prompt", kPrompt, "-n", "2"}, 1, {"has no tokenizer", "generate needs one"}, d);
}

// An output at one of the command's inputs is refused and the input left as it was: -o at a file of the model
// directory, the --prompt-file, a figure's capture, the --data corpus, a temperature file; two outputs at one path.
// (Each wrote over the input and exited 0.)
TEST_F(CliTest, AnOutputOverAnInputIsRefused) {
  const std::string d = out_dir("over_inputs");
  const std::string model = d + "/m";
  ASSERT_EQ(run({"init", model, "--vocab", "64", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
                 "--intermediate", "64"})
                .rc,
            0);
  const std::string weights = slurp(model + "/model.safetensors");
  expect_failure({"capture", model, "--ids", write_file(d + "/ids.txt", "1 2 3"), "-o", model + "/model.safetensors"},
                 1, {"-o '" + model + "/model.safetensors' is a file of '" + model + "'", "give another path"}, "");
  EXPECT_EQ(slurp(model + "/model.safetensors"), weights);
  const std::string prompt = write_file(d + "/p.txt", "the prompt");
  expect_failure({"capture", *model_, "--prompt-file", prompt, "-o", prompt}, 1, {"is the --prompt-file file"}, "");
  expect_failure({"generate", *model_, "--prompt-file", prompt, "-n", "1", "--capture", prompt}, 1,
                 {"--capture '" + prompt + "' is the --prompt-file file"}, "");
  EXPECT_EQ(slurp(prompt), "the prompt");
  const std::string cap = d + "/cap.h5";
  ASSERT_EQ(run({"capture", *model_, "--prompt", kPrompt, "-o", cap}).rc, 0);
  const std::string held = slurp(cap);
  expect_failure({"figure", "heatmap", cap, "-o", cap}, 1, {"is the input '" + cap + "'"}, "");
  expect_failure({"capture", *model_, "--prompt", kPrompt, "--temp", "calibrated:" + cap, "-o", cap}, 1,
                 {"is the --temp file"}, "");
  EXPECT_EQ(slurp(cap), held);
  const std::string corpus = write_file(d + "/c.txt", "one doc\n\nanother\n");
  expect_failure({"batch", *model_, "--data", corpus, "--max-tokens", "16", "-o", corpus}, 1, {"is the --data file"},
                 "");
  EXPECT_EQ(slurp(corpus), "one doc\n\nanother\n");
  expect_failure({"calibrate", *model_, "--data", corpus, "-o", d + "/t.json", "--log", d + "/t.json"}, 1,
                 {"--log '" + d + "/t.json' is also -o's file"}, "");
  EXPECT_FALSE(exists(d + "/t.json"));
  // The same new file spelled two ways ("t2.json", "./t2.json": the first compared relative, the second absolute),
  // and --log at -o's checkpoint, which the run overwrites and then removes.
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(chdir(d.c_str()), 0);
  expect_failure({"calibrate", *model_, "--data", corpus, "-o", "t2.json", "--log", "./t2.json"}, 1,
                 {"--log './t2.json' is also -o's file"}, "");
  expect_failure({"calibrate", *model_, "--data", corpus, "-o", "t2.json", "--log", "t2.json.ckpt.json"}, 1,
                 {"--log 't2.json.ckpt.json' is -o's checkpoint file"}, "");
  ASSERT_EQ(chdir(cwd), 0);
  EXPECT_FALSE(exists(d + "/t2.json"));
  // Writing over an earlier output is what -o is for.
  EXPECT_EQ(run({"capture", *model_, "--prompt", kPrompt, "-o", cap}).rc, 0);
}

TEST_F(CliTest, BudgetMessageShowsTheBudget) {
  // `--budget 1K` is 1 KiB; the message must not claim the budget is 1 MiB (and that 1 MiB does not fit in 1 MiB).
  const std::string d = out_dir("budget_message");
  const CliResult r = run({"capture", *model_, "--prompt", kPrompt, "--budget", "1K", "-o", d + "/x.h5"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_THAT(r.err, HasSubstr("--budget"));
  EXPECT_THAT(r.err, Not(HasSubstr("budget (--budget) is 1 MiB"))) << r.err;
}

// ---- --device ----

TEST_F(CliTest, DeviceOptionChoosesFallsBackAndFailsClearly) {
  // A malformed value is a usage error naming the option and the accepted values.
  expect_failure({"info", *model_, "--device", "gpu"}, 2, {"--device", "'gpu'", "auto, cpu or cuda"}, "");
  // Explicit cpu: no note, the model runs on the CPU.
  CliResult r = run({"info", *model_, "--device", "cpu"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_THAT(r.out, HasSubstr("device       cpu"));
  std::string why;
  const bool gpu = resolve_device(Device::kAuto, &why) == Device::kCuda;
  r = run({"info", *model_, "--device", "auto"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::vector<std::string> note = message_lines(r.err);
  ASSERT_EQ(note.size(), 1u) << "auto says where it runs in one line: " << r.err;
  if (!gpu) {
    // No usable device (this machine): auto falls back to the CPU and says why; cuda is one clear error.
    EXPECT_THAT(note[0], HasSubstr("device: auto -> cpu ("));
    EXPECT_THAT(r.out, HasSubstr("device       cpu"));
    // The default is auto too and stays quiet (the fallback note used to print on every command); -v says it once.
    r = run({"info", *model_});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "");
    r = run({"info", *model_, "-v"});
    ASSERT_EQ(r.rc, 0) << r.err;
    ASSERT_EQ(message_lines(r.err).size(), 1u) << r.err;
    EXPECT_THAT(r.err, HasSubstr("device: auto -> cpu ("));
    expect_failure({"info", *model_, "--device", "cuda"}, 1,
                   {"--device cuda", cuda_built() ? "no usable CUDA device (cudaGetDeviceCount" : "FOCAL_CUDA=OFF"},
                   "");
    expect_failure({"generate", *model_, "--prompt", "the", "-n", "2", "--device", "cuda"}, 1, {"--device cuda"}, "");
  } else {
    EXPECT_THAT(note[0], HasSubstr("device: auto -> cuda ("));
    EXPECT_THAT(r.out, HasSubstr("device       cuda"));
    r = run({"info", *model_, "--device", "cuda"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("device       cuda"));
  }
  // Every command that loads a model documents --device.
  for (const char* cmd : {"info", "capture", "sweep", "generate", "eval", "demo"})
    EXPECT_THAT(run({cmd, "--help"}).out, HasSubstr("--device D")) << cmd;
}

}  // namespace
}  // namespace focal
