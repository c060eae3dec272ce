// focal_batch: the mergeable statistics against naive double-precision sums, the corpus reader, the statistics of a
// batch against metrics recorded straight from the forward, and the `focal batch` command end to end: resume after
// SIGKILL, malformed JSONL lines, an empty corpus, long documents, and single process against mpirun -np 2 / 3
// (statistics within 1e-6 relative, per-document rows identical) and a rank that dies; progress counts each
// document's tokens once, and `focal inspect` summarises a stats file.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include "batch_internal.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal_batch/batch.h"
#include "focal_batch/corpus.h"
#include "focal_batch/stats.h"
#include "focal_batch/stats_file.h"
#include "focal_figures/corpus.h"
#include "test_util.h"

using namespace focal;
using namespace focal::batch;

namespace {

std::string tmp_dir() {
  std::string d = focal::test::make_temp_dir("batch_test");  // removed when the test process ends
  if (d.empty()) throw std::runtime_error("could not make a temporary directory");
  return d;
}
void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }
std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}
std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}
struct Result {
  int rc = -1;
  std::string err, out;
};
// Runs a shell command line with stderr and stdout captured; rc is the exit status, or 128 + signal.
Result sh(const std::string& cmd, const std::string& dir) {
  const std::string err = dir + "/stderr.txt", out = dir + "/stdout.txt";
  const int st = std::system(("OMP_NUM_THREADS=1 " + cmd + " 2>" + quote(err) + " >" + quote(out)).c_str());
  Result r;
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.err = slurp(err);
  r.out = slurp(out);
  return r;
}
const std::string kModel = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";
const std::string kFocal = FOCAL_CLI_PATH;

// A small corpus of blank-line-separated documents of different lengths.
std::string corpus_text(int n_docs) {
  const char* words[] = {"the", "river", "ran", "past", "a",   "quiet", "town",  "where", "nobody", "spoke",
                         "of",  "kings", "or",  "wars", "and", "every", "night", "lamps", "burned", "low"};
  std::mt19937 rng(7);
  std::string t;
  for (int d = 0; d < n_docs; ++d) {
    const int n = 5 + (int)(rng() % 60);
    for (int i = 0; i < n; ++i) t += std::string(words[rng() % 20]) + (i + 1 < n ? " " : ".\n");
    t += "\n";
  }
  return t;
}

// ----- statistics -----

TEST(Moments, ChanMergeOfChunksEqualsTwoPassDouble) {
  std::mt19937 rng(3);
  std::normal_distribution<double> nd(2.5, 1.5);
  std::vector<double> x(10007);
  for (double& v : x) v = nd(rng);
  // Oracle: two-pass mean and sample variance in long double.
  long double s = 0;
  for (double v : x) s += v;
  const long double mean = s / x.size();
  long double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  const long double var = ss / (x.size() - 1);
  // Uneven chunks, each by Welford, merged by Chan in a scrambled order.
  std::vector<Moments> parts;
  size_t i = 0;
  for (size_t len : {1u, 2u, 997u, 5000u, 13u, 3994u}) {
    Moments m;
    for (size_t k = 0; k < len; ++k) m.add(x[i++]);
    parts.push_back(m);
  }
  ASSERT_EQ(i, x.size());
  Moments a = parts[3];
  for (int k : {0, 5, 1, 4, 2}) a.merge(parts[(size_t)k]);
  EXPECT_EQ(a.n, (double)x.size());
  EXPECT_NEAR(a.mean, (double)mean, 1e-12 * std::fabs((double)mean));
  EXPECT_NEAR(a.variance(), (double)var, 1e-12 * (double)var);
  Moments e;
  e.merge(Moments());
  EXPECT_EQ(e.n, 0.0);
}

TEST(Stats, BucketsAndBins) {
  EXPECT_EQ(position_bucket(1), 0);
  EXPECT_EQ(position_bucket(2), 1);
  EXPECT_EQ(position_bucket(3), 1);
  EXPECT_EQ(position_bucket(4), 2);
  EXPECT_EQ(position_bucket(511), 8);
  StatsShape s;
  s.max_tokens = 512;
  s.n_bins = 4;
  EXPECT_EQ(s.n_buckets(), 9);  // [1,2) [2,4) ... [256,512)
  const std::vector<int32_t> pe = position_bucket_edges(s);
  EXPECT_EQ(pe.front(), 1);
  EXPECT_EQ(pe.back(), 512);
  const std::vector<double> e = histogram_edges(s, kMaxProb);  // [0, 1] in 4 bins
  ASSERT_EQ(e.size(), 5u);
  EXPECT_DOUBLE_EQ(e[1], 0.25);
  EXPECT_EQ(histogram_bin(e, false, 0.0), 0);
  EXPECT_EQ(histogram_bin(e, false, 0.25), 1);  // an edge belongs to the bin it opens
  EXPECT_EQ(histogram_bin(e, false, 0.9999), 3);
  EXPECT_EQ(histogram_bin(e, false, 1.0), 3);  // the top edge closes the last bin
  EXPECT_EQ(histogram_bin(e, false, -3.0), 0);
  const std::vector<double> le = histogram_edges(s, kEffSupport);  // log-spaced 1..512: 1, 4.76, 22.6, 107.6, 512
  EXPECT_NEAR(le[2], std::sqrt(512.0), 1e-9);
  EXPECT_EQ(histogram_bin(le, true, 22.0), 1);
  EXPECT_EQ(histogram_bin(le, true, 23.0), 2);
}

TEST(Stats, AccumulatorAgainstHandValues) {
  StatsShape s;
  s.n_runs = 1;
  s.n_layers = 1;
  s.n_heads = 1;
  s.n_metrics = kNumRowMetrics;
  s.n_bins = 4;
  s.max_tokens = 8;
  CorpusStats st(s);
  Accumulator acc(s);
  // 4 rows; metric max_prob = 1 (row 0, never counted), 0.2, 0.6, NaN (skipped).
  std::vector<float> m(4 * kNumRowMetrics, 0.5f);
  m[0 * kNumRowMetrics + kMaxProb] = 1.0f;
  m[1 * kNumRowMetrics + kMaxProb] = 0.2f;
  m[2 * kNumRowMetrics + kMaxProb] = 0.6f;
  m[3 * kNumRowMetrics + kMaxProb] = NAN;
  acc.add_layer(st, 0, 0, 4, m.data());
  std::vector<float> means = acc.finish_document(st);
  const size_t c = st.cell(0, 0, 0, kMaxProb);
  EXPECT_EQ(st.moments[c].n, 2.0);
  EXPECT_NEAR(st.moments[c].mean, 0.4, 1e-7);
  EXPECT_NEAR(st.moments[c].variance(), 0.08, 1e-7);  // ((0.2-0.4)^2 + (0.6-0.4)^2) / 1
  EXPECT_NEAR(means[c], 0.4f, 1e-7);
  EXPECT_NEAR(st.min[c], 0.2, 1e-7);
  EXPECT_NEAR(st.max[c], 0.6, 1e-7);
  EXPECT_EQ(st.hist[c * 4 + 0], 1u);                           // 0.2 in [0, 0.25)
  EXPECT_EQ(st.hist[c * 4 + 2], 1u);                           // 0.6 in [0.5, 0.75)
  EXPECT_EQ(st.pos_count[c * (size_t)s.n_buckets() + 0], 1u);  // row 1 -> bucket 0
  EXPECT_EQ(st.pos_count[c * (size_t)s.n_buckets() + 1], 1u);  // row 2 -> bucket 1 (row 3 was NaN)
  EXPECT_NEAR(st.pos_sum[c * (size_t)s.n_buckets() + 1], 0.6, 1e-7);
}

// ----- corpus -----

TEST(Corpus, JsonlTextAndDirectory) {
  const std::string d = tmp_dir();
  write(d + "/a.jsonl", "{\"text\": \"one\", \"id\": \"first\"}\n\n{\"text\": \"two\", \"relevant\": [1, 2]}\n");
  CorpusReader r(d + "/a.jsonl", OnError::kFail);
  Document doc;
  ASSERT_TRUE(r.next(doc));
  EXPECT_EQ(doc.id, "first");
  EXPECT_EQ(doc.index, 0);
  ASSERT_TRUE(r.next(doc));
  EXPECT_EQ(doc.text, "two");
  EXPECT_EQ(doc.relevant, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(doc.id, d + "/a.jsonl:3");
  EXPECT_FALSE(r.next(doc));

  write(d + "/b.txt", "\n\npara one\nline two\n\n\n\nsecond doc\n");
  CorpusReader t(d + "/b.txt", OnError::kFail);
  ASSERT_TRUE(t.next(doc));
  EXPECT_EQ(doc.text, "para one\nline two");
  ASSERT_TRUE(t.next(doc));
  EXPECT_EQ(doc.text, "second doc");
  EXPECT_EQ(doc.index, 1);
  EXPECT_FALSE(t.next(doc));

  ::mkdir((d + "/dir").c_str(), 0777);
  write(d + "/dir/b.txt", "bee");
  write(d + "/dir/a.txt", "ay");
  write(d + "/dir/c.md", "not a txt");
  CorpusReader dr(d + "/dir", OnError::kFail);
  ASSERT_TRUE(dr.next(doc));
  EXPECT_EQ(doc.id, "a.txt");
  ASSERT_TRUE(dr.next(doc));
  EXPECT_EQ(doc.text, "bee");
  EXPECT_FALSE(dr.next(doc));
  EXPECT_EQ(read_document(d + "/dir", 1).text, "bee");
  EXPECT_THROW(read_document(d + "/dir", 2), Error);
}

TEST(Corpus, MalformedLineNamesItsLine) {
  const std::string d = tmp_dir();
  write(d + "/m.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"broken\"\n{\"txt\": \"no text\"}\n{\"text\": \"fine\"}\n");
  CorpusReader fail(d + "/m.jsonl", OnError::kFail);
  Document doc;
  ASSERT_TRUE(fail.next(doc));
  try {
    fail.next(doc);
    FAIL() << "a malformed line was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--on-error skip"), std::string::npos) << e.what();
  }
  CorpusReader skip(d + "/m.jsonl", OnError::kSkip);
  std::vector<std::string> texts;
  while (skip.next(doc)) texts.push_back(doc.text);
  EXPECT_EQ(texts, (std::vector<std::string>{"ok", "fine"}));
  EXPECT_EQ(skip.skipped(), 2u);
}

// Text that is not UTF-8 (a Latin-1 file) is refused naming its file, line and column, or skipped; an empty JSONL
// "text" is no document (a corpus of only those is empty).
TEST(Corpus, NonUtf8TextIsRefusedOrSkippedAndEmptyTextIsNoDocument) {
  const std::string d = tmp_dir();
  write(d + "/l.txt", "fine\n\nsecond line\ncaf\xe9 au lait\n\nlast\n");
  CorpusReader fail(d + "/l.txt", OnError::kFail);
  Document doc;
  ASSERT_TRUE(fail.next(doc));
  try {
    fail.next(doc);
    FAIL() << "a Latin-1 document was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("l.txt' line 4 is not UTF-8 text: byte 0xe9 at column 4"), std::string::npos)
        << e.what();
  }
  CorpusReader skip(d + "/l.txt", OnError::kSkip, true);
  std::vector<std::string> texts;
  while (skip.next(doc)) texts.push_back(doc.text);
  EXPECT_EQ(texts, (std::vector<std::string>{"fine", "last"}));
  EXPECT_EQ(skip.skipped(), 1u);

  ::mkdir((d + "/dir").c_str(), 0777);
  write(d + "/dir/a.txt", "ok\nthen \xff");
  CorpusReader dir(d + "/dir", OnError::kFail);
  try {
    dir.next(doc);
    FAIL() << "a file with byte 0xff was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a.txt' line 2 is not UTF-8 text: byte 0xff at column 6"), std::string::npos)
        << e.what();
  }

  write(d + "/e.jsonl", "{\"text\": \"\"}\n{\"text\": \"  \\n\"}\n{\"text\": \"x\"}\n");
  CorpusReader e(d + "/e.jsonl", OnError::kFail);
  ASSERT_TRUE(e.next(doc));
  EXPECT_EQ(doc.text, "x");
  EXPECT_EQ(doc.index, 0);
  EXPECT_FALSE(e.next(doc));
}

// A refused --resume names each option that changed in its own spelling (hand-written keys).
TEST(Resume, KeyDifferenceNamesOptionsAsTheyAreSpelled) {
  const std::string was =
      "weights=1;data=/c.txt;data_stamp=aa;window=0;on_error=0;limit=0;seed=1;"
      "run=standard:{\"kind\":\"standard\"};run=focal_t0.4:{\"t\":0.4}";
  EXPECT_EQ(key_difference(was, was), "its options");
  const std::string now =
      "weights=1;data=/c.txt;data_stamp=bb;window=1;on_error=1;limit=20;seed=1;"
      "run=standard:{\"kind\":\"standard\"};run=focal_t0.5:{\"t\":0.5}";
  EXPECT_EQ(key_difference(was, now),
            "--data's contents, --limit (all then, 20 now), --on-error (fail then, skip now), --runs "
            "(standard,focal_t0.4 then, standard,focal_t0.5 now), --long (cut then, window now)");
  const std::string same_names =
      "weights=1;data=/c.txt;data_stamp=aa;window=0;on_error=0;limit=0;seed=1;"
      "run=standard:{\"kind\":\"standard\"};run=focal_t0.4:{\"t\":0.3}";
  EXPECT_EQ(key_difference(was, same_names), "--runs (standard,focal_t0.4, with other settings)");
}

// ----- a batch against the forward's own metrics -----

TEST(Batch, StatisticsMatchMetricsRecordedFromTheForward) {
  const std::string d = tmp_dir();
  write(d + "/c.txt", corpus_text(3));
  auto model = Model::load(kModel);
  BatchOptions o;
  o.data_path = d + "/c.txt";
  o.out_path = d + "/s.h5";
  o.runs = {{"standard", TempSpec::standard()}, {"focal_t0.4", TempSpec::focal(0.4f)}};
  o.max_tokens = 24;
  o.window = true;
  int argc = 0;
  char** argv = nullptr;
  auto comm = make_comm(&argc, &argv);
  run_batch(*model, o, *comm, {});
  StatsFile f = read_stats(o.out_path);
  const ModelConfig& c = model->config();

  // Oracle: the same documents through Session::forward with a recording observer, summed in double.
  const int L = c.n_layers, H = c.n_heads, M = kNumRowMetrics;
  const size_t n_cells = (size_t)2 * L * H * M;
  std::vector<double> sum(n_cells), sq(n_cells), n(n_cells);
  CorpusReader r(o.data_path, OnError::kFail);
  Document doc;
  size_t n_docs = 0;
  while (r.next(doc)) {
    std::vector<int32_t> ids = model->require_tokenizer().encode(doc.text, c.add_bos);
    EXPECT_EQ(f.doc_n_tokens_total[n_docs], (int)ids.size());
    EXPECT_EQ(f.doc_n_windows[n_docs], (int)((ids.size() + 23) / 24));
    for (int run = 0; run < 2; ++run)
      for (size_t off = 0; off < ids.size(); off += 24) {
        const int len = (int)std::min<size_t>(24, ids.size() - off);
        test::RecordingObserver rec(L, H, len);
        Session s(*model, 24);
        RunOptions ro;
        ro.all_logits = false;
        s.forward(ids.data() + off, len, o.runs[(size_t)run].spec, ro, &rec, nullptr);
        for (int l = 0; l < L; ++l)
          for (int h = 0; h < H; ++h)
            for (int i = 1; i < len; ++i)
              for (int m = 0; m < M; ++m) {
                const double v = rec.metrics[(((size_t)l * H + h) * len + i) * M + m];
                if (std::isnan(v)) continue;
                const size_t cell = (((size_t)run * L + l) * H + h) * M + m;
                sum[cell] += v;
                sq[cell] += v * v;
                n[cell] += 1;
              }
      }
    ++n_docs;
  }
  ASSERT_EQ(f.n_docs(), n_docs);
  EXPECT_EQ(f.stats.n_docs, n_docs);
  for (size_t cell = 0; cell < sum.size(); ++cell) {
    ASSERT_EQ(f.stats.moments[cell].n, n[cell]) << cell;
    if (n[cell] == 0) continue;
    const double mean = sum[cell] / n[cell];
    EXPECT_NEAR(f.stats.moments[cell].mean, mean, 1e-9 + 1e-9 * std::fabs(mean)) << cell;
    if (n[cell] > 1) {
      const double var = (sq[cell] - n[cell] * mean * mean) / (n[cell] - 1);
      EXPECT_NEAR(f.stats.moments[cell].variance(), var, 1e-7 + 1e-6 * std::fabs(var)) << cell;
    }
    uint64_t hist_total = 0;
    for (int b = 0; b < f.stats.shape.n_bins; ++b) hist_total += f.stats.hist[cell * f.stats.shape.n_bins + b];
    EXPECT_EQ((double)hist_total, n[cell]);
  }
  // Focal t = 0.4 sharpens attention: lower mean entropy than standard in every layer (the paper's claim, and a
  // check that the runs are not swapped).
  for (int l = 0; l < L; ++l) {
    double e0 = 0, e1 = 0;
    for (int h = 0; h < H; ++h) {
      e0 += f.stats.moments[f.stats.cell(0, l, h, kEntropyNats)].mean;
      e1 += f.stats.moments[f.stats.cell(1, l, h, kEntropyNats)].mean;
    }
    EXPECT_LT(e1, e0) << "layer " << l;
  }
}

// ----- the command -----

class BatchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_dir();
    write(dir_ + "/corpus.txt", corpus_text(9));
  }
  // extra may give its own --max-tokens (an option given twice is refused).
  std::string cmd(const std::string& out, const std::string& extra = "") const {
    const bool own_max = extra.find("--max-tokens") != std::string::npos;
    return quote(kFocal) + " batch " + quote(kModel) + " --data " + quote(dir_ + "/corpus.txt") +
           " --runs standard,focal:0.4" + (own_max ? "" : " --max-tokens 32") + " --keep-rows 6 --quiet -o " +
           quote(out) + " " + extra;
  }
  std::string dir_;
};

void expect_same_docs(const StatsFile& a, const StatsFile& b) {
  ASSERT_EQ(a.n_docs(), b.n_docs());
  EXPECT_EQ(a.doc_index, b.doc_index);
  EXPECT_EQ(a.doc_id, b.doc_id);
  EXPECT_EQ(a.doc_n_tokens, b.doc_n_tokens);
  EXPECT_EQ(a.doc_n_windows, b.doc_n_windows);
  ASSERT_EQ(a.doc_head_means.size(), b.doc_head_means.size());
  EXPECT_EQ(0, std::memcmp(a.doc_head_means.data(), b.doc_head_means.data(), a.doc_head_means.size() * 4))
      << "per-document rows differ";
  ASSERT_EQ(a.kept_rows.size(), b.kept_rows.size());
  for (size_t i = 0; i < a.kept_rows.size(); ++i) {
    EXPECT_EQ(a.kept_rows[i].doc, b.kept_rows[i].doc);
    EXPECT_EQ(a.kept_rows[i].row, b.kept_rows[i].row);
    EXPECT_EQ(a.kept_rows[i].probs, b.kept_rows[i].probs);
  }
}

void expect_close_stats(const CorpusStats& a, const CorpusStats& b, double rel) {
  ASSERT_TRUE(a.shape == b.shape);
  EXPECT_EQ(a.n_docs, b.n_docs);
  EXPECT_EQ(a.n_tokens, b.n_tokens);
  EXPECT_EQ(a.hist, b.hist);
  EXPECT_EQ(a.pos_count, b.pos_count);
  EXPECT_EQ(a.min, b.min);
  EXPECT_EQ(a.max, b.max);
  auto close = [&](double x, double y) { return std::fabs(x - y) <= rel * std::max(std::fabs(x), 1e-12); };
  for (size_t c = 0; c < a.moments.size(); ++c) {
    EXPECT_EQ(a.moments[c].n, b.moments[c].n);
    EXPECT_TRUE(close(a.moments[c].mean, b.moments[c].mean))
        << c << ": " << a.moments[c].mean << " vs " << b.moments[c].mean;
    EXPECT_TRUE(close(a.moments[c].m2, b.moments[c].m2)) << c;
  }
  for (size_t i = 0; i < a.pos_sum.size(); ++i) EXPECT_TRUE(close(a.pos_sum[i], b.pos_sum[i])) << i;
}

TEST_F(BatchCli, ResumeAfterKillEqualsAnUninterruptedRun) {
  ASSERT_EQ(sh(cmd(dir_ + "/full.h5"), dir_).rc, 0);
  // SIGKILL after the 4th document was appended, before its checkpoint (FOCAL_BATCH_DIE_AFTER, docs/batch.md).
  Result k = sh("FOCAL_BATCH_DIE_AFTER=4 " + cmd(dir_ + "/r.h5", "--checkpoint-every 0"), dir_);
  EXPECT_EQ(k.rc, 128 + SIGKILL) << k.err;
  EXPECT_FALSE(exists(dir_ + "/r.h5"));
  EXPECT_TRUE(exists(dir_ + "/r.h5.ckpt"));
  Result r = sh(cmd(dir_ + "/r.h5", "--checkpoint-every 0 --resume"), dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(exists(dir_ + "/r.h5.ckpt"));
  EXPECT_FALSE(exists(dir_ + "/r.h5.rows"));
  StatsFile a = read_stats(dir_ + "/full.h5"), b = read_stats(dir_ + "/r.h5");
  expect_close_stats(a.stats, b.stats, 0.0);  // the same sequence of operations: bit for bit
  expect_same_docs(a, b);
  // A resume with other options is refused.
  ASSERT_EQ(sh("FOCAL_BATCH_DIE_AFTER=2 " + cmd(dir_ + "/x.h5", "--checkpoint-every 0"), dir_).rc, 128 + SIGKILL);
  Result bad = sh(cmd(dir_ + "/x.h5", "--resume --seed 9"), dir_);
  EXPECT_EQ(bad.rc, 1);
  EXPECT_NE(bad.err.find("other options"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("--seed (1 then, 9 now)"), std::string::npos) << bad.err;  // the option that differs
  // The same command without --resume keeps the checkpoint and says how to continue (it was deleted silently).
  Result again = sh(cmd(dir_ + "/x.h5", "--checkpoint-every 0"), dir_);
  EXPECT_EQ(again.rc, 1);
  EXPECT_NE(again.err.find("add --resume to continue it"), std::string::npos) << again.err;
  EXPECT_TRUE(exists(dir_ + "/x.h5.ckpt"));
  // An edited corpus is refused on --resume (the old documents' statistics went on under the new file).
  { std::ofstream(dir_ + "/corpus.txt", std::ios::app) << "\n\nA document added after the kill.\n"; }
  Result edited = sh(cmd(dir_ + "/x.h5", "--resume"), dir_);
  EXPECT_EQ(edited.rc, 1);
  EXPECT_NE(edited.err.find("--data's contents"), std::string::npos) << edited.err;
  write(dir_ + "/corpus.txt", corpus_text(9));  // the corpus the runs below compare with full.h5's
  // --data given relative to the directory the batch ran in is recorded absolute: the app and Python reopen its
  // documents from anywhere (they looked for 'corpus.txt' in their own directory).
  Result rel = sh("cd " + quote(dir_) + " && " + quote(kFocal) + " batch " + quote(kModel) +
                      " --data corpus.txt --max-tokens 16 --limit 2 --quiet -o rel.h5",
                  dir_);
  ASSERT_EQ(rel.rc, 0) << rel.err;
  EXPECT_EQ(read_stats(dir_ + "/rel.h5").data_path, dir_ + "/corpus.txt");
  // Values that would be replaced silently are refused naming the option: --limit 0 ran the whole corpus,
  // --topk-mass 0 wrote topk_mass = 0 everywhere, --checkpoint-every nan never checkpointed; a value out of range
  // exits 1 like --bins 0 (--checkpoint-every -1 exited 2, as if malformed).
  for (const char* opt : {"--limit 0", "--topk-mass 0", "--topk-mass 65", "--bins 0", "--checkpoint-every -1",
                          "--checkpoint-every nan"}) {
    Result r0 = sh(cmd(dir_ + "/o.h5", opt), dir_);
    EXPECT_EQ(r0.rc, 1) << opt << ": " << r0.err;
    EXPECT_NE(r0.err.find(std::string(opt).substr(0, std::string(opt).find(' '))), std::string::npos) << r0.err;
    EXPECT_FALSE(exists(dir_ + "/o.h5"));
  }
  // Killed before its first checkpoint (one per hour here): --resume starts over and still gives the same file.
  ASSERT_EQ(sh("FOCAL_BATCH_DIE_AFTER=2 " + cmd(dir_ + "/e.h5", "--checkpoint-every 3600"), dir_).rc, 128 + SIGKILL);
  EXPECT_FALSE(exists(dir_ + "/e.h5.ckpt"));
  Result e = sh(cmd(dir_ + "/e.h5", "--checkpoint-every 3600 --resume"), dir_);
  ASSERT_EQ(e.rc, 0) << e.err;
  EXPECT_NE(e.err.find("stopped before its first checkpoint; starting from the first document"), std::string::npos)
      << e.err;
  StatsFile c = read_stats(dir_ + "/e.h5");
  expect_close_stats(a.stats, c.stats, 0.0);
  expect_same_docs(a, c);
  // Nothing started with this -o: refused.
  Result none = sh(cmd(dir_ + "/never.h5", "--resume"), dir_);
  EXPECT_EQ(none.rc, 1);
  EXPECT_NE(none.err.find("no checkpoint"), std::string::npos) << none.err;
}

// A directory corpus with the output beside its .txt files: the batch's own row and checkpoint files do not count
// as the corpus changing (the resume key stamps only the files the reader reads), so --resume continues it.
TEST_F(BatchCli, ResumeOfADirectoryCorpusWithTheOutputInside) {
  const std::string docs = dir_ + "/docs";
  ASSERT_EQ(::mkdir(docs.c_str(), 0755), 0);
  for (int i = 0; i < 5; ++i) write(docs + "/d" + std::to_string(i) + ".txt", corpus_text(1 + i % 3));
  const std::string base = quote(kFocal) + " batch " + quote(kModel) + " --data " + quote(docs) +
                           " --runs standard --max-tokens 16 --quiet --checkpoint-every 0 -o " + quote(docs + "/s.h5");
  ASSERT_EQ(sh("FOCAL_BATCH_DIE_AFTER=2 " + base, dir_).rc, 128 + SIGKILL);
  ASSERT_TRUE(exists(docs + "/s.h5.ckpt"));
  Result r = sh(base + " --resume", dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(read_stats(docs + "/s.h5").n_docs(), 5u);
  // An edited .txt file is a changed corpus all the same.
  ASSERT_EQ(
      sh("FOCAL_BATCH_DIE_AFTER=2 " + base.substr(0, base.rfind(" -o ")) + " -o " + quote(docs + "/t.h5"), dir_).rc,
      128 + SIGKILL);
  write(docs + "/d4.txt", corpus_text(2) + "\n\nOne more paragraph.\n");
  Result e = sh(base.substr(0, base.rfind(" -o ")) + " -o " + quote(docs + "/t.h5") + " --resume", dir_);
  EXPECT_EQ(e.rc, 1);
  EXPECT_NE(e.err.find("--data's contents"), std::string::npos) << e.err;
}

// A full disk (the file size limit, RLIMIT_FSIZE through ulimit; the CLI ignores SIGXFSZ, so writes fail with EFBIG
// as they would with ENOSPC) stops the batch with "no space left on FILE", exit 1, no output; once there is space,
// the same command with --resume finishes from the last checkpoint and gives the uninterrupted run's file. Two
// limits: one the first row record or checkpoint does not fit, one only the final file does not.
TEST_F(BatchCli, AFullDiskStopsCleanlyAndResumeFinishes) {
  ASSERT_EQ(sh(cmd(dir_ + "/full.h5"), dir_).rc, 0);
  const size_t full_bytes = slurp(dir_ + "/full.h5").size();
  const StatsFile a = read_stats(dir_ + "/full.h5");
  for (const size_t limit_bytes : {size_t(2048), full_bytes - 1024}) {
    SCOPED_TRACE("limit " + std::to_string(limit_bytes) + " bytes");
    const std::string out = dir_ + "/d" + std::to_string(limit_bytes) + ".h5";
    // dash's ulimit -f counts 512-byte blocks; OMP_NUM_THREADS=1 as sh() sets it, for a bit-identical result.
    Result r = sh("true; ulimit -f " + std::to_string(limit_bytes / 512) + " && OMP_NUM_THREADS=1 " +
                      cmd(out, "--checkpoint-every 0"),
                  dir_);
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_NE(r.err.find("no space left on '" + out), std::string::npos) << r.err;
    EXPECT_FALSE(exists(out));
    Result resumed = sh(cmd(out, "--checkpoint-every 0 --resume"), dir_);
    ASSERT_EQ(resumed.rc, 0) << resumed.err;
    EXPECT_FALSE(exists(out + ".ckpt"));
    EXPECT_FALSE(exists(out + ".rows"));
    const StatsFile b = read_stats(out);
    expect_close_stats(a.stats, b.stats, 0.0);  // the same operations in the same order: bit for bit
    expect_same_docs(a, b);
  }
}

TEST_F(BatchCli, ASecondBatchOverTheSameOutputIsRefusedAndAKilledRunsTemporariesGo) {
  // A batch still running holds OUT.rows (flock): a second one over the same -o — a --resume of it wrote an empty
  // per-document table and exited 0 — is refused, naming -o, and writes nothing.
  const std::string out = dir_ + "/busy.h5";
  const int fd = ::open((out + ".rows").c_str(), O_RDWR | O_CREAT, 0666);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  for (const char* extra : {"", "--resume"}) {
    const Result r = sh(cmd(out, extra), dir_);
    EXPECT_EQ(r.rc, 1) << extra;
    EXPECT_NE(r.err.find("-o: another focal batch is writing '" + out + "' now"), std::string::npos) << r.err;
    EXPECT_FALSE(exists(out));
  }
  ::close(fd);
  // Once it is free the batch runs; the empty row file left by the holder is not a checkpoint's.
  // What a killed writer left (OUT.tmp.PID, OUT.ckpt.tmp.PID of a process that is gone) is removed; a live
  // process's temporary is not touched.
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  ::waitpid(gone, nullptr, 0);
  const std::string stale = out + ".tmp." + std::to_string(gone),
                    stale_ckpt = out + ".ckpt.tmp." + std::to_string(gone);
  const std::string live = out + ".tmp." + std::to_string(::getpid());
  for (const std::string& p : {stale, stale_ckpt, live}) std::ofstream(p) << "half";
  const Result ok = sh(cmd(out), dir_);
  ASSERT_EQ(ok.rc, 0) << ok.err;
  EXPECT_FALSE(exists(stale));
  EXPECT_FALSE(exists(stale_ckpt));
  EXPECT_TRUE(exists(live));
  EXPECT_FALSE(exists(out + ".rows"));
  ::unlink(live.c_str());
  // A corpus refused before its first document leaves no empty row file behind.
  write(dir_ + "/none.txt", "\n");
  const Result none = sh(quote(kFocal) + " batch " + quote(kModel) + " --data " + quote(dir_ + "/none.txt") +
                             " --quiet -o " + quote(dir_ + "/none.h5"),
                         dir_);
  EXPECT_EQ(none.rc, 1);
  EXPECT_FALSE(exists(dir_ + "/none.h5.rows"));
}

TEST_F(BatchCli, ProgressOffATerminalIsWholeLinesWithDocumentsTokensAndTheEnd) {
  std::string c = cmd(dir_ + "/p.h5");
  c.replace(c.find(" --quiet"), 8, "");
  Result r = sh(c, dir_);  // stderr is a file here, not a terminal
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("documents 9/9  tokens "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" elapsed, ETA "), std::string::npos) << r.err;
}

TEST_F(BatchCli, ProgressCountsEachDocumentsTokensOnce) {
  // Two runs go over every document; the progress line counted its tokens once per run (twice the corpus).
  std::string c = cmd(dir_ + "/p.h5");
  c.replace(c.find(" --quiet"), 8, "");
  Result r = sh(c, dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  const size_t at = r.err.rfind("documents 9/9  tokens ");
  ASSERT_NE(at, std::string::npos) << r.err;
  const unsigned long long shown = std::stoull(r.err.substr(at + std::strlen("documents 9/9  tokens ")));
  StatsFile f = read_stats(dir_ + "/p.h5");
  unsigned long long corpus = 0;  // tokens run per document (--max-tokens 32 cuts the longer ones)
  for (int32_t n : f.doc_n_tokens) corpus += (unsigned long long)n;
  EXPECT_EQ(shown, corpus) << r.err;
  EXPECT_EQ(shown, f.stats.n_tokens);
}

TEST_F(BatchCli, InspectSummarisesAStatsFile) {
  // `focal inspect stats.h5` refused the file ("not a focalscope capture"); it prints documents, tokens, runs,
  // provenance and each run's corpus means.
  const std::string out = dir_ + "/s.h5";
  ASSERT_EQ(sh(cmd(out), dir_).rc, 0);
  Result r = sh(quote(kFocal) + " inspect " + quote(out), dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  // --run and --budget apply to captures (and sweeps): here they were ignored, --run nosuch printing every run
  for (const char* opt : {" --run nosuch", " --budget 1"}) {
    Result o = sh(quote(kFocal) + " inspect " + quote(out) + opt, dir_);
    EXPECT_EQ(o.rc, 2) << opt;
    EXPECT_NE(o.err.find("focalscope-batch-stats file"), std::string::npos) << o.err;
  }
  StatsFile f = read_stats(out);
  const int L = f.stats.shape.n_layers, H = f.stats.shape.n_heads;
  unsigned long long tokens = 0, rows = 0;  // a document of n tokens gives rows 1..n-1 to every layer x head
  for (int32_t n : f.doc_n_tokens) tokens += (unsigned long long)n, rows += (unsigned long long)(n - 1) * L * H;
  EXPECT_NE(r.out.find("batch statistics " + out + ": 9 documents (0 skipped), " + std::to_string(tokens) +
                       " tokens, " + std::to_string(L) + " layers x " + std::to_string(H) + " heads\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("model " + kModel + ", tool "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("computed on cpu, precision "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--max-tokens 32, --long cut"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("runs: standard {"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(", focal_t0.4 {"), std::string::npos) << r.out;
  // Every cell holds the same rows, so the pooled mean is the plain mean of the L x H cell means in /stats/mean.
  double entropy_by_run[2] = {0, 0};
  for (int run = 0; run < 2; ++run) {
    double entropy = 0, max_p = 0;
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        entropy += f.stats.moments[f.stats.cell(run, l, h, kEntropyNats)].mean / (L * H);
        max_p += f.stats.moments[f.stats.cell(run, l, h, kMaxProb)].mean / (L * H);
      }
    const std::string name = f.run_names[(size_t)run];
    const size_t line = r.out.find("\n  " + name + " ");
    ASSERT_NE(line, std::string::npos) << r.out;
    std::istringstream row(r.out.substr(line + 3 + name.size()));
    double n_rows = 0, e = 0, hn = 0, eff = 0, mp = 0;
    row >> n_rows >> e >> hn >> eff >> mp;
    EXPECT_EQ(n_rows, (double)rows) << name;
    EXPECT_NEAR(e, entropy, 6e-5) << name;
    EXPECT_NEAR(mp, max_p, 6e-5) << name;
    entropy_by_run[run] = entropy;
  }
  const size_t diff = r.out.find("\n  focal_t0.4 - standard ");
  ASSERT_NE(diff, std::string::npos) << r.out;
  double d_entropy = NAN;
  std::istringstream(r.out.substr(diff + std::strlen("\n  focal_t0.4 - standard "))) >> d_entropy;
  EXPECT_NEAR(d_entropy, entropy_by_run[1] - entropy_by_run[0], 1e-4) << r.out;
  // A capture is still a capture, and a file of neither kind still gets the capture reader's message.
  write(dir_ + "/x.h5", "not hdf5");
  Result bad = sh(quote(kFocal) + " inspect " + quote(dir_ + "/x.h5"), dir_);
  EXPECT_EQ(bad.rc, 1);
}

TEST_F(BatchCli, MalformedJsonlLineFailsOrIsSkipped) {
  write(dir_ + "/m.jsonl", "{\"text\": \"a river ran\"}\n{\"text\": oops}\n{\"text\": \"past the town\"}\n");
  const std::string base = quote(kFocal) + " batch " + quote(kModel) + " --data " + quote(dir_ + "/m.jsonl") +
                           " --max-tokens 16 --quiet -o " + quote(dir_ + "/m.h5");
  Result f = sh(base, dir_);
  EXPECT_EQ(f.rc, 1);
  EXPECT_NE(f.err.find("m.jsonl' line 2: malformed JSON"), std::string::npos) << f.err;
  EXPECT_EQ(f.err.find("skipped"), std::string::npos) << f.err;  // one error, no "skipped" warning before it
  EXPECT_FALSE(exists(dir_ + "/m.h5"));
  Result s = sh(base + " --on-error skip", dir_);
  ASSERT_EQ(s.rc, 0) << s.err;
  EXPECT_NE(s.err.find("line 2"), std::string::npos) << s.err;
  EXPECT_EQ(s.err.find("line 2"), s.err.rfind("line 2")) << s.err;  // warned once
  StatsFile m = read_stats(dir_ + "/m.h5");
  EXPECT_EQ(m.n_docs(), 2u);
  EXPECT_EQ(m.stats.n_skipped, 1u);
}

TEST_F(BatchCli, EmptyCorpusAndLongDocuments) {
  write(dir_ + "/empty.txt", "\n\n  \n");
  Result e = sh(quote(kFocal) + " batch " + quote(kModel) + " --data " + quote(dir_ + "/empty.txt") + " --quiet -o " +
                    quote(dir_ + "/e.h5"),
                dir_);
  EXPECT_EQ(e.rc, 1);
  EXPECT_NE(e.err.find("holds no documents"), std::string::npos) << e.err;
  EXPECT_FALSE(exists(dir_ + "/e.h5"));
  // An output directory that does not exist: refused before the model is loaded, naming -o.
  Result o = sh(cmd(dir_ + "/no/such/dir/s.h5"), dir_);
  EXPECT_EQ(o.rc, 1);
  EXPECT_NE(o.err.find("-o: cannot write"), std::string::npos) << o.err;
  // Longer than the model's context (2048): refused, naming the option.
  Result c = sh(cmd(dir_ + "/c.h5", "--max-tokens 4096"), dir_);
  EXPECT_EQ(c.rc, 1);
  EXPECT_NE(c.err.find("--max-tokens 4096 is longer than the model's context of 2048"), std::string::npos) << c.err;
  // A document longer than --max-tokens: cut to its first 32 tokens, or run in windows of 32.
  std::string longdoc;
  for (int i = 0; i < 60; ++i) longdoc += "the river ran past the quiet town ";
  write(dir_ + "/long.txt", longdoc + "\n");
  const std::string base =
      quote(kFocal) + " batch " + quote(kModel) + " --data " + quote(dir_ + "/long.txt") + " --max-tokens 32 --quiet";
  ASSERT_EQ(sh(base + " -o " + quote(dir_ + "/cut.h5"), dir_).rc, 0);
  ASSERT_EQ(sh(base + " --long window -o " + quote(dir_ + "/win.h5"), dir_).rc, 0);
  StatsFile cut = read_stats(dir_ + "/cut.h5"), win = read_stats(dir_ + "/win.h5");
  const int total = cut.doc_n_tokens_total[0];
  EXPECT_GT(total, 32 * 4);
  EXPECT_EQ(cut.doc_n_tokens[0], 32);
  EXPECT_EQ(cut.doc_n_windows[0], 1);
  EXPECT_EQ(win.doc_n_tokens[0], total);
  EXPECT_EQ(win.doc_n_windows[0], (total + 31) / 32);
  EXPECT_EQ(win.stats.n_tokens, (uint64_t)total);
  // Position buckets never see a row at or beyond --max-tokens.
  EXPECT_EQ(win.pos_edges.back(), 32);
  // Without --max-tokens, a model whose context is under the default 512 runs at its context (it was refused).
  ASSERT_EQ(sh(quote(kFocal) + " init " + quote(dir_ + "/short") + " --tokenizer " +
                   quote(std::string(FOCAL_SOURCE_DIR) + "/assets/models/tokenizer.model") +
                   " --hidden 32 --layers 1 --heads 2 --kv-heads 1 --intermediate 64 --context 24",
               dir_)
                .rc,
            0);
  Result s = sh(quote(kFocal) + " batch " + quote(dir_ + "/short") + " --data " + quote(dir_ + "/long.txt") +
                    " --quiet -o " + quote(dir_ + "/short.h5"),
                dir_);
  ASSERT_EQ(s.rc, 0) << s.err;
  EXPECT_EQ(read_stats(dir_ + "/short.h5").doc_n_tokens[0], 24);
  Result over = sh(quote(kFocal) + " batch " + quote(dir_ + "/short") + " --data " + quote(dir_ + "/long.txt") +
                       " --max-tokens 25 --quiet -o " + quote(dir_ + "/over.h5"),
                   dir_);
  EXPECT_EQ(over.rc, 1);
  EXPECT_NE(over.err.find("--max-tokens 25 is longer than the model's context of 24"), std::string::npos) << over.err;
}

#ifdef FOCAL_MPIEXEC
// -x passes the named variables of the caller's environment to every rank. Open MPI's own start-up allocations
// (in components it dlopens, so no suppression can name them) are never freed: under AddressSanitizer the ranks run
// without leak detection; the single-process tests above keep it.
std::string mpirun(int np, const std::string& pass_env = "") {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=detect_leaks=0 " +
         quote(FOCAL_MPIEXEC) + " -x OMP_NUM_THREADS -x ASAN_OPTIONS " + pass_env + " --oversubscribe -np " +
         std::to_string(np) + " ";
}

TEST_F(BatchCli, MpiRanksEqualTheSingleProcess) {
  ASSERT_EQ(sh(cmd(dir_ + "/one.h5"), dir_).rc, 0);
  StatsFile one = read_stats(dir_ + "/one.h5");
  for (int np : {2, 3}) {
    const std::string out = dir_ + "/np" + std::to_string(np) + ".h5";
    Result r = sh(mpirun(np) + cmd(out), dir_);
    ASSERT_EQ(r.rc, 0) << r.err;
    StatsFile m = read_stats(out);
    EXPECT_EQ(m.n_ranks, np);
    expect_close_stats(one.stats, m.stats, 1e-6);
    expect_same_docs(one, m);
  }
}

TEST_F(BatchCli, MpiErrorEveryRankHitsIsReportedOnce) {
  // An error every rank hits alike is one message (rank 0's), not one per rank: an option given twice (found before
  // the model loads) and a layer past the model's (after). mpirun's own exit status says only that the job failed.
  const std::string out = dir_ + "/bad.h5";
  const std::string base = quote(kFocal) + " batch " + quote(kModel) + " --data " + quote(dir_ + "/corpus.txt") +
                           " --max-tokens 32 --quiet -o " + quote(out);
  for (const auto& [extra, said] : std::vector<std::pair<std::string, std::string>>{
           {" --runs standard --runs focal:0.4", "option --runs is given twice"},
           {" --runs standard,focal:0.4+99=0.3", "layer 99 is out of range"}}) {
    Result r = sh(mpirun(3) + base + extra, dir_);
    EXPECT_NE(r.rc, 0) << r.err;
    size_t reported = 0;
    for (size_t at = 0; (at = r.err.find(said, at)) != std::string::npos; ++at) ++reported;
    EXPECT_EQ(reported, 1u) << r.err;
    EXPECT_NE(r.err.find("focal batch [rank 0]: error: "), std::string::npos) << r.err;
    EXPECT_FALSE(std::ifstream(out).good());
  }
}

TEST_F(BatchCli, MpiDocsAreVirtualDatasetsH5pyReadsAndAMissingShardIsNamed) {
  // A malformed line under --on-error skip: reported once (by rank 0's counting pass) and counted once, not per rank.
  write(dir_ + "/m.jsonl",
        "{\"text\": \"a river ran past the town\"}\n{\"text\": oops}\n"
        "{\"text\": \"the quiet town slept\"}\n{\"text\": \"a road ran past the mill\"}\n");
  const std::string out = dir_ + "/v.h5";
  Result r = sh(mpirun(2) + quote(kFocal) + " batch " + quote(kModel) + " --data " + quote(dir_ + "/m.jsonl") +
                    " --max-tokens 16 --on-error skip --quiet -o " + quote(out),
                dir_);
  ASSERT_EQ(r.rc, 0) << r.err;
  size_t warned = 0;
  for (size_t at = 0; (at = r.err.find("m.jsonl' line 2", at)) != std::string::npos; ++at) ++warned;
  EXPECT_EQ(warned, 1u) << r.err;
  StatsFile m = read_stats(out);
  EXPECT_EQ(m.n_docs(), 3u);
  EXPECT_EQ(m.stats.n_skipped, 1u);
  // h5py (the oracle a notebook user has) sees /docs as virtual datasets and reads them as one array.
  Result py =
      sh("/usr/bin/python3 -c \"import h5py,sys; f=h5py.File(sys.argv[1],'r'); d=f['docs/index']; "
         "print(d.is_virtual, list(d[:]), f['docs/head_means'].shape[0])\" " +
             quote(out),
         dir_);
  ASSERT_EQ(py.rc, 0) << py.err;
  EXPECT_EQ(py.out, "True [0, 1, 2] 3\n");
  // A flipped bit in a shard's data is caught through the view's crc32 (the view is read, never the shard itself).
  const std::string copy = dir_ + "/damaged";
  ASSERT_EQ(
      sh("mkdir -p " + quote(copy) + " && cp -r " + quote(out) + " " + quote(out + ".d") + " " + quote(copy), dir_).rc,
      0);
  Result flip =
      sh("/usr/bin/python3 -c \"import h5py,glob,sys; p=sorted(glob.glob(sys.argv[1]+'/v.h5.d/*/rank0.h5'))[0]; "
         "o=h5py.File(p,'r')['docs/n_tokens'].id.get_offset(); b=bytearray(open(p,'rb').read()); "
         "b[o]^=4; open(p,'wb').write(b)\" " +
             quote(copy),
         dir_);
  ASSERT_EQ(flip.rc, 0) << flip.err;
  try {
    read_stats(copy + "/v.h5");
    ADD_FAILURE() << "a damaged shard read without an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/docs/n_tokens is damaged"), std::string::npos) << e.what();
  }
  // Without its shard folder the file's statistics still read, its documents are refused naming the shard.
  const std::string shards = out + ".d";
  ASSERT_EQ(std::rename(shards.c_str(), (shards + ".moved").c_str()), 0);
  EXPECT_EQ(read_stats(out, false).stats.n_docs, 3u);
  try {
    read_stats(out);
    ADD_FAILURE() << "documents read without their shards";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("v.h5.d/"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("is missing"), std::string::npos) << e.what();
  }
}

TEST_F(BatchCli, ADyingRankFailsTheJobAndKeepsTheEarlierFile) {
  const std::string out = dir_ + "/s.h5";
  ASSERT_EQ(sh(mpirun(2) + cmd(out), dir_).rc, 0);
  const std::string before = slurp(out);
  // Rank 1 is killed (SIGKILL) before its first document: rank 0 may have taken every document of this small
  // corpus by the time rank 1 asks, so "after its first document" could never happen.
  Result r = sh("FOCAL_BATCH_DIE_AFTER=0 FOCAL_BATCH_DIE_RANK=1 " +
                    mpirun(2, "-x FOCAL_BATCH_DIE_AFTER -x FOCAL_BATCH_DIE_RANK") + cmd(out),
                dir_);
  EXPECT_NE(r.rc, 0);
  EXPECT_NE(r.err.find("signal 9"), std::string::npos) << r.err;  // mpirun names the rank and its signal
  EXPECT_EQ(slurp(out), before);
  StatsFile f = read_stats(out);  // still whole, its shards included
  EXPECT_EQ(f.n_docs(), 9u);
}
#endif

}  // namespace

namespace {
TEST_F(BatchCli, CorpusFigureRendersAndRefusesBadSelections) {
  ASSERT_EQ(sh(cmd(dir_ + "/f.h5"), dir_).rc, 0);
  Result ok = sh(quote(kFocal) + " figure corpus " + quote(dir_ + "/f.h5") + " -o " + quote(dir_ + "/f.png"), dir_);
  ASSERT_EQ(ok.rc, 0) << ok.err;
  EXPECT_EQ(slurp(dir_ + "/f.png").substr(1, 3), "PNG");
  StatsFile f = read_stats(dir_ + "/f.h5", false);
  figures::FigureOptions opt;
  const std::string svg = figures::render_corpus(f, opt, figures::Format::kSvg);
  EXPECT_NE(svg.find("focal_t0.4 \xE2\x88\x92 standard"), std::string::npos);  // the matrix is b - a
  opt.runs = {"focal_t9"};
  EXPECT_THROW(figures::render_corpus(f, opt, figures::Format::kPng), Error);
  opt.runs = {};
  opt.metric = "relevant_mass";  // no document gave relevant positions
  EXPECT_THROW(figures::render_corpus(f, opt, figures::Format::kPng), Error);
  // --layers / --heads: the selection is drawn and named (it was accepted and ignored before), out of range refused.
  opt.metric = "";
  opt.layers = {1, 3};
  opt.heads = {0, 2};
  opt.width_in = 7;  // a page wide enough for the whole panel titles
  const std::string sel = figures::render_corpus(f, opt, figures::Format::kSvg);
  EXPECT_NE(sel.find("rows \xE2\x89\xA5 1, heads 0,2"), std::string::npos);
  EXPECT_NE(sel.find("mean over layers 1,3 and heads 0,2"), std::string::npos);
  opt.layers = {f.stats.shape.n_layers};
  try {
    figures::render_corpus(f, opt, figures::Format::kSvg);
    ADD_FAILURE() << "layer " << f.stats.shape.n_layers << " accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not in the stats file"), std::string::npos) << e.what();
  }
}
}  // namespace
