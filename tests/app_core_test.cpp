// The app's logic without a window (app/core): the job queue (cancellation, stale results, errors), AppState's
// preview and propagate paths, A/B bookkeeping, bad input, capture-only sessions, settings and command files.
// References: softmax of the stored raw scores recomputed here in double precision (preview), and capture_run on
// the same model (propagate).
#include <gtest/gtest.h>
#include <omp.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <functional>
#include <numeric>
#include <thread>

#include <nlohmann/json.hpp>

#include "app_state.h"
#include "selection.h"
#include "error_controls.h"
#include "focal/metrics.h"
#include "focal/error.h"
#include "focal/model_writer.h"
#include "focal_batch/batch.h"
#include "heat_pixels.h"
#include "jobs.h"
#include "overrides.h"
#include "prompt_wrap.h"
#include "settings.h"
#include "temp_spec_cases.h"
#include "test_util.h"

namespace focalscope {
namespace {

const std::string kBundled = std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-t0.4";
const std::string kStandard = std::string(FOCAL_SOURCE_DIR) + "/assets/models/standard";

void wait_idle(AppState& st) {
  focal::test::wait_until([&] { return !st.busy(); }, [&] { st.poll(); }, "the app's jobs to finish");
  st.poll();
}

// Probabilities of one stored row re-tempered in double: softmax(raw * mult).
std::vector<double> softmax_ref(const float* raw, int n, double mult) {
  std::vector<double> p(n);
  double mx = -INFINITY, z = 0;
  for (int j = 0; j < n; ++j) mx = std::max(mx, raw[j] * mult);
  for (int j = 0; j < n; ++j) z += (p[j] = std::exp(raw[j] * mult - mx));
  for (double& v : p) v /= z;
  return p;
}

// The prompt editor's soft wrap, with a monospace measure (one unit a byte): breaks by hand.
TEST(PromptWrap, WrapsAtTheLastSpaceKeepsTypedNewlinesAndGivesBackThePrompt) {
  const auto mono = [](const char* b, const char* e) { return (float)(e - b); };
  SoftWrap w;
  std::string buf = "the cat sat on the mat\nby the door";
  w.reset(buf);
  EXPECT_TRUE(w.reflow(buf.data(), buf.size(), 10.0f, mono));
  // "the cat sat" is 11 > 10: break before "sat"; "sat on the" fits (10); "mat" follows; the typed newline stays.
  EXPECT_EQ(buf, "the cat\nsat on the\nmat\nby the\ndoor");
  EXPECT_EQ(w.text(buf.data(), buf.size()), "the cat sat on the mat\nby the door");
  // The user types "x" after "the cat": the inserted byte is theirs, the text reflows around it.
  std::string typed = buf.substr(0, 7) + "x" + buf.substr(7);
  w.reflow(typed.data(), typed.size(), 10.0f, mono);
  EXPECT_EQ(w.text(typed.data(), typed.size()), "the catx sat on the mat\nby the door");
  EXPECT_EQ(typed, "the catx\nsat on the\nmat\nby the\ndoor");
  // A typed newline is hard: wider text keeps it and unwraps the soft ones.
  std::string wide = typed.substr(0, 3) + "\n" + typed.substr(3);
  w.reflow(wide.data(), wide.size(), 100.0f, mono);
  EXPECT_EQ(wide, "the\n catx sat on the mat\nby the door");
  // A word longer than the width stays whole on its own line.
  std::string lng = "a verylongword b";
  w.reset(lng);
  w.reflow(lng.data(), lng.size(), 5.0f, mono);
  EXPECT_EQ(lng, "a\nverylongword\nb");
  EXPECT_EQ(w.text(lng.data(), lng.size()), "a verylongword b");
}

TEST(JobQueue, NewJobUnderAKeyCancelsTheRunningOneAndDropsItsResult) {
  JobQueue q;
  std::atomic<bool> started{false};
  std::atomic<int> applied{0};
  q.submit("k", "slow", [&](JobContext& ctx) -> std::function<void()> {
    started = true;
    focal::test::wait_until([&] { return ctx.cancelled(); }, "the slow job to be cancelled");
    return [&] { applied += 100; };  // stale: must never be applied
  });
  ASSERT_TRUE(focal::test::wait_until([&] { return started.load(); }, "the slow job to start"));
  q.submit("k", "fresh", [&](JobContext&) -> std::function<void()> { return [&] { applied += 1; }; });
  ASSERT_TRUE(focal::test::wait_until([&] { return q.idle(); }, [&] { q.poll({}); }, "the queue to drain"));
  EXPECT_EQ(applied.load(), 1);
  EXPECT_EQ(q.cancelled_count(), 1u);
}

TEST(JobQueue, QueuedJobIsReplacedAndErrorsReachTheUiThread) {
  JobQueue q;
  std::atomic<bool> release{false};
  q.submit("block", "block", [&](JobContext&) -> std::function<void()> {
    focal::test::wait_until([&] { return release.load(); }, "the test to release the blocking job");
    return {};
  });
  int ran = 0;
  q.submit("k", "first", [&](JobContext&) -> std::function<void()> { return [&] { ran = 1; }; });
  q.submit("k", "second", [&](JobContext&) -> std::function<void()> { return [&] { ran = 2; }; });
  q.submit("e", "bad", [](JobContext&) -> std::function<void()> { throw focal::Error("model 'x' is broken"); });
  EXPECT_EQ(q.status().size(), 3u);  // block running, second and bad queued
  release = true;
  std::string err;
  ASSERT_TRUE(focal::test::wait_until([&] { return q.idle(); }, [&] { q.poll([&](const std::string& e) { err = e; }); },
                                      "the queue to drain"));
  EXPECT_EQ(ran, 2);
  EXPECT_EQ(err, "model 'x' is broken");
}

class AppStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    st.prompt = "The old man took the lamp and went down to the river.";
    st.open_path(kBundled);
    wait_idle(st);
    ASSERT_TRUE(st.has_model()) << st.message;
    ASSERT_TRUE(st.slots[0].run && st.slots[1].run);
  }
  AppState st;
};

TEST_F(AppStateTest, OpensWithTheModelsOwnSettingAgainstStandard) {
  EXPECT_EQ(st.slots[0].spec.label(), "focal_t0.4");
  EXPECT_EQ(st.slots[1].spec.label(), "standard");
  EXPECT_GT(st.n_tokens(), 5);
  const HeadRows& r = st.head_rows();
  EXPECT_TRUE(r.exact[0] && r.exact[1]);
  // Exact rows are the stored probabilities of the run.
  const auto& run = *st.slots[0].run;
  const int T = st.n_tokens(), q = T - 1;
  const size_t off = (((size_t)0 * run.heads.size() + st.sel_head) * run.queries.size() + q) * T;
  for (int k = 0; k <= q; ++k) EXPECT_EQ(r.p[0][(size_t)q * T + k], run.probs[off + k]);
}

// "hide sink" renormalises the other keys, but the sink mass the header shows stays the first key's mass in the
// whole row (it used to read the renormalised row's key 0, i.e. "sink 0.00"). Oracle: the run's stored
// probabilities, tolerance 1e-5 (fp32 softmax of the stored scores against the forward's own).
TEST_F(AppStateTest, HiddenSinkKeepsTheTrueSinkMassInTheRowMetrics) {
  st.view.hide_sink = true;
  st.state_version++;
  const HeadRows& r = st.head_rows();
  const auto& run = *st.slots[0].run;
  const int T = st.n_tokens();
  for (int q : {1, T / 2, T - 1}) {
    const size_t off = (((size_t)0 * run.heads.size() + st.sel_head) * run.queries.size() + q) * T;
    EXPECT_EQ(r.p[0][(size_t)q * T], 0.0f);  // hidden in the view
    EXPECT_NEAR(r.metrics[0][(size_t)q * focal::kNumRowMetrics + focal::kSinkMass], run.probs[off], 1e-5) << q;
    EXPECT_GT(run.probs[off], 0.01f);  // a real sink mass, so that 0 would have failed
    double rest = 0.0;
    for (int k = 1; k <= q; ++k) rest += r.p[0][(size_t)q * T + k];
    EXPECT_NEAR(rest, 1.0, 1e-5);
  }
}

// The app ranks heads by the induction score: every layer's (computed in the run), and for the stored layer equal
// to a naive double sum over the run's stored probabilities of the keys after earlier occurrences of each row's
// token (tolerance 1e-6).
TEST_F(AppStateTest, InductionScoreOfEveryHeadMatchesANaiveSumOnTheStoredLayer) {
  st.set_prompt("the cat sat on the mat and the cat sat on the mat again");
  wait_idle(st);
  const auto& run = *st.slots[0].run;
  const auto& x = st.file.token_ids;
  const int T = st.n_tokens(), H = st.config()->n_heads;
  for (int l = 0; l < st.config()->n_layers; ++l)
    for (int h = 0; h < H; ++h) EXPECT_FALSE(std::isnan(st.head_metric(0, l, h, kInductionScore))) << l << "." << h;
  const int l = st.sel_layer;
  for (int h = 0; h < H; ++h) {
    double acc = 0.0;
    int n = 0;
    for (int i = 0; i < T; ++i) {
      const float* p = &run.probs[(((size_t)0 * run.heads.size() + h) * run.queries.size() + i) * T];
      double mass = 0.0;
      bool any = false;
      for (int j = 0; j + 1 < i; ++j)
        if (x[j] == x[i]) mass += p[j + 1], any = true;
      if (any) acc += mass, ++n;
    }
    ASSERT_GT(n, 3);
    EXPECT_NEAR(st.head_metric(0, l, h, kInductionScore), acc / n, 1e-6) << h;
  }
  EXPECT_STREQ(head_metric_name(kInductionScore), "induction");
}

// A standard-trained model opens against focal t = 0.4 (it used to be compared with itself: A = B, every delta 0),
// and the banner reports the loss the post-hoc t costs: the two runs' own prompt losses (exact text).
TEST(AppStateDefaults, StandardTrainedModelOpensAgainstFocalAndTheBannerShowsTheLossDelta) {
  AppState st;
  st.prompt = "The old man took the lamp and went down to the river.";
  st.open_path(kStandard);
  wait_idle(st);
  ASSERT_TRUE(st.slots[0].run && st.slots[1].run) << st.message;
  EXPECT_EQ(st.slots[0].spec.label(), "standard");
  EXPECT_EQ(st.slots[1].spec.label(), "focal_t0.4");
  const float a = st.prompt_loss(0), b = st.prompt_loss(1);
  ASSERT_TRUE(std::isfinite(a) && std::isfinite(b));
  EXPECT_NE(a, b);
  char expect[128];
  std::snprintf(expect, sizeof expect, "Prompt loss %.3f -> %.3f nats/token (%+.3f)", a, b, b - a);
  EXPECT_NE(st.posthoc_banner().find(expect), std::string::npos) << st.posthoc_banner();
  EXPECT_NE(st.posthoc_banner().find("focal_t0.4 is post hoc: this model was trained with standard"),
            std::string::npos);
  // The focal-trained model keeps standard as B; its banner names standard as the post-hoc side.
  st.open_path(kBundled);
  wait_idle(st);
  EXPECT_EQ(st.slots[1].spec.label(), "standard");
  EXPECT_NE(st.posthoc_banner().find("standard is post hoc: this model was trained with focal_t0.4"), std::string::npos)
      << st.posthoc_banner();
  // A native loss above ln V (a uniform guess over the vocabulary) is said; below it nothing is added. The bundled
  // model on the story is below; the recall model, trained on synthetic tasks, is far above on its own prompt.
  const double ln_v = std::log((double)st.config()->vocab_size);
  ASSERT_LT(st.prompt_loss(0), ln_v);
  EXPECT_EQ(st.posthoc_banner().find("uniform guess"), std::string::npos) << st.posthoc_banner();
  st.open_path(std::string(FOCAL_SOURCE_DIR) + "/assets/models/recall-focal-t0.4");
  wait_idle(st);
  ASSERT_GT(st.prompt_loss(0), ln_v) << "the recall model on the story";
  char uniform[96];
  std::snprintf(uniform, sizeof uniform, "(focal_t0.4: above ln %d = %.2f, worse than a uniform guess on this text)",
                st.config()->vocab_size, ln_v);
  EXPECT_NE(st.posthoc_banner().find(uniform), std::string::npos) << st.posthoc_banner();
  // A previewed at another t (live propagate off): its run's loss would stand beside the new setting, so no banner
  // until it is propagated (it kept t = 0.4's loss while A showed t = 0.2)
  st.live_propagate = false;
  st.set_spec(0, focal::TempSpec::focal(0.2f));
  EXPECT_FALSE(st.readouts_current(0));
  EXPECT_EQ(st.posthoc_banner(), "");
}

// Overrides for a set of layers or heads: the parser by hand, and the behaviour: overriding every layer with t is the
// global focal t (the forward's probabilities equal exactly), and a set of heads only touches those heads.
TEST_F(AppStateTest, OverridesForASetOfLayersOrHeads) {
  EXPECT_EQ(parse_index_set("0-2,5, 3", 8, "layers"), (std::vector<int>{0, 1, 2, 3, 5}));
  EXPECT_EQ(parse_index_set("*", 3, "heads"), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(parse_index_set("", 3, "heads").empty());
  EXPECT_THROW(parse_index_set("1-9", 4, "layers"), focal::Error);
  EXPECT_THROW(parse_index_set("3-1", 4, "layers"), focal::Error);
  try {
    parse_index_set("x", 4, "layers");
  } catch (const focal::Error& e) { EXPECT_NE(std::string(e.what()).find("layers: 'x'"), std::string::npos); }
  const focal::TempSpec base = focal::TempSpec::focal(0.4f);
  const focal::TempSpec heads = with_overrides(base, {1, 3}, {0, 2}, 0.3f);
  EXPECT_EQ(heads.head_temp.size(), 4u);
  EXPECT_EQ(heads.head_temp.at({3, 2}), 0.3f);
  EXPECT_TRUE(heads.layer_temp.empty());
  EXPECT_TRUE(with_overrides(heads, {1, 3}, {0, 2}, 0.0f).head_temp.empty());  // t <= 0 clears them
  // A head-granularity temperature file's setting: a layer's t replaces the file's t of that layer's heads (they
  // won over it, so the layer's slider moved nothing), and the label says the file was changed.
  focal::TempSpec file;
  file.temp_file = "/x/t_head.json";
  file.base_checksum = 1;
  for (int h = 0; h < 4; ++h) file.head_temp[{1, h}] = file.head_temp[{2, h}] = 0.7f;
  const focal::TempSpec layer1 = with_overrides(file, {1}, {}, 0.3f);
  EXPECT_EQ(layer1.layer_temp.at(1), 0.3f);
  EXPECT_EQ(layer1.head_temp.count({1, 0}), 0u);
  EXPECT_EQ(layer1.head_temp.at({2, 0}), 0.7f);
  EXPECT_EQ(file.label(), "calibrated:t_head");
  EXPECT_EQ(layer1.label(), "calibrated:t_head+overrides");
  const int L = st.config()->n_layers;
  std::vector<int> all((size_t)L);
  std::iota(all.begin(), all.end(), 0);
  const focal::TempSpec every = with_overrides(base, all, {}, 0.25f);
  EXPECT_EQ((int)every.layer_temp.size(), L);
  const auto& model = *st.slots[0].model;
  const focal::RunCapture a = focal::capture_run(model, st.file.token_ids, every, focal::CaptureRequest{}, "a");
  const focal::RunCapture b =
      focal::capture_run(model, st.file.token_ids, focal::TempSpec::focal(0.25f), focal::CaptureRequest{}, "b");
  EXPECT_EQ(a.probs, b.probs);  // bit for bit: the same row scale (1 / 0.25) in the same code, shapes and threads
  // In the app: applying the set to side A re-runs it with those overrides.
  st.set_spec(0, with_overrides(st.slots[0].spec, {0, 2}, {1}, 0.2f));
  wait_idle(st);
  EXPECT_EQ(st.slots[0].run_spec.head_temp.size(), 2u);
  EXPECT_EQ(st.slots[0].run_spec.head_temp.at({2, 1}), 0.2f);
}

// With live propagate off, viewing another layer runs the model for that layer's rows under the setting the runs
// had, not under a setting the user only previews (it propagated A's new t, the checkbox still off).
TEST_F(AppStateTest, ALayerViewedWithPropagateOffKeepsANewSettingAPreview) {
  st.live_propagate = false;
  st.set_spec(0, focal::TempSpec::focal(0.2f));
  ASSERT_FALSE(st.readouts_current(0));
  const int other = st.sel_layer == 0 ? 1 : 0;
  st.select(other, 0, st.sel_query);
  wait_idle(st);
  ASSERT_TRUE(st.slots[0].run);
  EXPECT_EQ(st.slots[0].run_spec.label(), "focal_t0.4");  // the run's own setting
  EXPECT_EQ(st.slots[0].spec.label(), "focal_t0.2");      // still the preview
  EXPECT_FALSE(st.readouts_current(0));
  EXPECT_GE(index_of(st.slots[0].run->layers, other), 0) << "the viewed layer's rows are there";
  // Propagating applies it.
  st.propagate_all();
  wait_idle(st);
  EXPECT_EQ(st.slots[0].run_spec.label(), "focal_t0.2");
  EXPECT_TRUE(st.readouts_current(0));
}

// Turning live propagate on propagates what is only previewed (the box read on while A stayed a preview until the
// next change); turning it off leaves the runs as they are.
TEST_F(AppStateTest, TurningLivePropagateOnPropagatesThePreview) {
  st.set_live_propagate(false);
  st.set_spec(0, focal::TempSpec::focal(0.2f));
  wait_idle(st);
  ASSERT_FALSE(st.readouts_current(0));
  st.set_live_propagate(true);
  wait_idle(st);
  EXPECT_EQ(st.slots[0].run_spec.label(), "focal_t0.2");
  EXPECT_TRUE(st.readouts_current(0));
  st.set_live_propagate(false);
  EXPECT_FALSE(st.busy());
}

TEST_F(AppStateTest, PreviewReTempersTheStoredScoresWithoutRunningTheModel) {
  st.live_propagate = false;
  st.select(2, 3, -1);
  wait_idle(st);  // a layer change re-runs (from layer 2) to store that layer
  const uint64_t v = st.slots[0].version;
  focal::TempSpec s = st.slots[0].spec;
  s.focal_temp = 0.2f;
  st.set_spec(0, s);
  EXPECT_FALSE(st.busy());  // preview only: no job
  const HeadRows& r = st.head_rows();
  EXPECT_TRUE(r.preview[0]);
  EXPECT_EQ(st.slots[0].version, v);
  const auto& run = *st.slots[0].run;
  const int T = st.n_tokens();
  for (int q : {1, T / 2, T - 1}) {
    const size_t off = (((size_t)0 * run.heads.size() + 3) * run.queries.size() + q) * T;
    const auto ref = softmax_ref(&run.scores[off], q + 1, 1.0 / 0.2);
    for (int k = 0; k <= q; ++k) EXPECT_NEAR(r.p[0][(size_t)q * T + k], ref[k], 2e-6) << q << "," << k;
  }
}

TEST_F(AppStateTest, PreviewOfTheFirstChangedLayerEqualsThePropagatedRun) {
  st.live_propagate = false;
  st.select(1, 2, -1);
  wait_idle(st);
  focal::TempSpec s = st.slots[0].spec;
  s.layer_temp[1] = 0.25f;  // layer 1 is the first changed layer: its inputs are unchanged
  st.set_spec(0, s);
  const std::vector<float> preview = st.head_rows().p[0];
  st.propagate(0);
  wait_idle(st);
  const HeadRows& r = st.head_rows();
  EXPECT_TRUE(r.exact[0]);
  EXPECT_EQ(st.slots[0].first_layer_run, 1);
  // The preview re-tempers the stored scores by softmax_scaled with a multiplier of its own (row_multiplier), the
  // forward by its attention softmax: fp32 probabilities (<= 1) a few ulps apart, atol 1e-6.
  focal::test::expect_allclose(preview, r.p[0], 0.0, 1e-6, "preview against the propagated rows of layer 1");
  // And the propagated run is what a fresh capture gives, at the worker's thread count (OpenBLAS's sgemm can round
  // differently at another: on this 2-core machine 1 thread against 2 changed the 6th digit).
  focal::CaptureRequest req;
  req.layers = {1};
  focal::RunCapture ref;
  std::thread([&] {
    omp_set_num_threads(job_worker_threads());
    ref = focal::capture_run(*st.slots[0].model, st.file.token_ids, s, req, "ref");
  }).join();
  EXPECT_EQ(st.slots[0].run->probs, ref.probs);  // bit for bit: the same code, shapes and threads (as above)
  EXPECT_EQ(st.slots[0].run->metrics.size(), ref.metrics.size());
}

// Long prompts: past layer_rows_bytes a run holds the viewed head's rows only, and another head is a re-run whose
// rows equal those of a run that held every head (the same forward at the same thread count: atol 1e-6).
TEST_F(AppStateTest, PastTheLayerRowBudgetOnlyTheViewedHeadIsStoredAndAnotherHeadReRuns) {
  st.select(1, 0, -1);
  wait_idle(st);
  const auto full = st.slots[0].run;  // every head of layer 1
  const int T = st.n_tokens(), H = st.config()->n_heads;
  ASSERT_EQ((int)full->heads.size(), H);
  st.layer_rows_bytes = (size_t)T * T * sizeof(float);  // one head's rows fit, a layer's do not
  st.propagate_all();
  wait_idle(st);
  ASSERT_EQ(st.slots[0].run->heads, std::vector<int>{0});
  st.select(1, 2, -1);  // not held: re-runs both sides
  EXPECT_TRUE(st.busy());
  wait_idle(st);
  ASSERT_EQ(st.slots[0].run->heads, std::vector<int>{2});
  ASSERT_EQ(st.slots[1].run->heads, std::vector<int>{2});
  const std::vector<float> p2 = st.head_rows().p[0];
  ASSERT_EQ(p2.size(), (size_t)T * T);
  st.select(1, 3, -1);
  EXPECT_TRUE(st.busy());
  wait_idle(st);
  ASSERT_EQ(st.slots[0].run->heads, std::vector<int>{3});
  const HeadRows& r = st.head_rows();
  EXPECT_TRUE(r.exact[0]);
  for (int q = 0; q < T; ++q)
    for (int k = 0; k <= q; ++k) {
      const size_t off = focal::stored_row_offset(*full, 0, 3, (size_t)q, T);
      ASSERT_NEAR(r.p[0][(size_t)q * T + k], full->probs.empty() ? NAN : full->probs[off + k], 1e-6) << q << "," << k;
    }
  for (int q = 0; q < T; ++q)
    for (int k = 0; k <= q; ++k) {
      const size_t off = focal::stored_row_offset(*full, 0, 2, (size_t)q, T);
      ASSERT_NEAR(p2[(size_t)q * T + k], full->probs[off + k], 1e-6) << q << "," << k;
    }
  st.select(1, 3, 5);  // only the query changed: no re-run
  EXPECT_FALSE(st.busy());
  // The hover's raw score is run A's stored score of the viewed head (NaN for a masked key).
  const auto& ra = *st.slots[0].run;
  EXPECT_EQ(st.raw_score(5, 2), ra.scores[focal::stored_row_offset(ra, 0, 0, 5, T) + 2]);
  EXPECT_TRUE(std::isnan(st.raw_score(5, 6)));
}

// A prompt whose rows would pass rows_budget_bytes is refused with the estimate; the session stays as it was.
TEST_F(AppStateTest, PromptPastTheAppsRowBudgetIsRefusedWithTheEstimate) {
  const std::vector<int32_t> before = st.file.token_ids;
  const std::string prompt_before = st.prompt;
  const size_t err0 = st.error_count;
  st.rows_budget_bytes = app_rows_bytes(st.config()->n_heads, st.n_tokens(), st.layer_rows_bytes);
  st.set_prompt(prompt_before + " And then he came back up the hill with the lamp still burning.");
  EXPECT_FALSE(st.busy());
  EXPECT_EQ(st.error_count, err0 + 1);
  EXPECT_NE(st.message.find("GiB"), std::string::npos) << st.message;
  EXPECT_NE(st.message.find("focal capture --store metrics"), std::string::npos) << st.message;
  EXPECT_EQ(st.file.token_ids, before);
  EXPECT_EQ(st.prompt, prompt_before);
  // Hand-computed: T = 64, 4 heads, 16 384 B per head; a layer (65 536 B) within 70 000 B is kept whole. Pooled rows
  // over 8, 32, 128 and 512 keys: 2 x (2 048 + 512 + 128 + 32) B; the b x b cells of A, B and B - A:
  // 3 x (8 x 8 + 2 x 2 + 1 + 1) x 4 B.
  EXPECT_EQ(app_rows_bytes(4, 64, 70000), 2u * 65536u + 3u * 16384u + 2u * 2720u + 3u * 70u * 4u);
  EXPECT_EQ(app_rows_bytes(4, 64, 60000), 2u * 16384u + 3u * 16384u + 2u * 2720u + 3u * 70u * 4u);
  // Rows on demand: three runs' rows, per row a normaliser (16 B) and 8 metrics (32 B), the cells of both sides and
  // B - A's (no pooled rows, with or without a sliding window).
  EXPECT_EQ(app_rows_bytes(4, 64, 60000, false), 3u * 16384u + 2u * (64u * 48u + 70u * 4u) + 70u * 4u);
}

// Past dense_rows_max_tokens the panels' rows are computed when read, from the stored scores and one normaliser per
// row (HeadRows::row): every row, probability, key-range maximum and heatmap cell equals the dense rows of the same
// setting, at once and on the view worker, with the sink hidden or not. Tolerances: a row read alone is one double
// exponential of the logit minus log Z, 2e-6 relative + 1e-9 against the dense fp32 softmax; a key-range maximum
// one fp32 exponential, 1e-5 relative; cells are maxima of the same row function's values, 1e-7.
// The dense rows of both sides (HeadRows::p, metrics) to compare with.
struct DenseRows {
  std::array<std::vector<float>, 2> p, metrics;
};

void expect_rows_match_dense(const HeadRows& r, const DenseRows& dense, int T, const std::string& what) {
  for (int s = 0; s < 2; ++s) {
    ASSERT_TRUE(r.p[s].empty()) << what;
    ASSERT_EQ(r.norm[s].size(), (size_t)T) << what;
    ASSERT_TRUE(r.shown(s)) << what;
    ASSERT_EQ(dense.p[s].size(), (size_t)T * T) << what;
    focal::test::expect_allclose(r.metrics[s], dense.metrics[s], 0.0, 1e-7, what + ": metrics");
    for (int q : {0, 1, T / 2, T - 2, T - 1}) {
      const float* row = r.row(s, q);
      ASSERT_NE(row, nullptr) << what;
      for (int k = 0; k < T; ++k) {
        const float ref = dense.p[s][(size_t)q * T + k];
        ASSERT_NEAR(row[k], ref, 2e-6 * ref + 1e-9) << what << " side " << s << " row " << q << " key " << k;
        ASSERT_NEAR(r.at(s, q, k), ref, 2e-6 * ref + 1e-9) << what << " at " << q << "," << k;
      }
      for (auto [ka, kb] : {std::pair{0, T}, std::pair{1, 4}, std::pair{q / 2, q + 1}, std::pair{q, T}}) {
        float m = 0.0f;
        for (int k = ka; k < std::min(kb, q + 1); ++k) m = std::max(m, dense.p[s][(size_t)q * T + k]);
        EXPECT_NEAR(r.max_in(s, q, ka, kb), m, 1e-5 * m + 1e-9) << what << " max_in " << q << " " << ka << ".." << kb;
      }
    }
    // More rows than the cache holds, then the first again: recomputed, the same.
    for (int q = 0; q < T; ++q) r.row(s, q);
    const float* row0 = r.row(s, T / 2);
    for (int k = 0; k < T; ++k) ASSERT_NEAR(row0[k], dense.p[s][(size_t)(T / 2) * T + k], 2e-6 + 1e-9) << what;
    // The heatmap's b x b cells: the largest dense p of each cell (hand-computed here).
    for (int i = 0; i < kHeatPoolLevels; ++i) {
      const int b = kHeatPoolKeys[i], nb = (T + b - 1) / b;
      ASSERT_EQ(r.pooled2d[s][i].size(), (size_t)nb * nb) << what << " b " << b;
      for (int qi = 0; qi < nb; ++qi)
        for (int j = 0; j < nb; ++j) {
          float m = 0.0f;
          for (int q = qi * b; q < std::min(T, (qi + 1) * b); ++q)
            for (int k = j * b; k < std::min(T, (j + 1) * b); ++k) m = std::max(m, dense.p[s][(size_t)q * T + k]);
          ASSERT_NEAR(r.pooled2d[s][i][(size_t)qi * nb + j], m, 1e-7) << what << " b " << b << " " << qi << "," << j;
        }
    }
  }
}

// B - A's cells (HeadRows::diff2d) at every level against the largest |b - a| of each cell of the dense rows pa, pb
// [T, T], within tol.
void expect_diff_cells(const HeadRows& r, const std::vector<float>& pa, const std::vector<float>& pb, int T, float tol,
                       const char* what) {
  for (int i = 0; i < kHeatPoolLevels; ++i) {
    const int b = kHeatPoolKeys[i], nb = (T + b - 1) / b;
    ASSERT_EQ(r.diff2d[i].size(), (size_t)nb * nb) << what << ", " << b;
    for (int qi = 0; qi < nb; ++qi)
      for (int j = 0; j < nb; ++j) {
        float m = 0.0f;
        for (int q = qi * b; q < std::min(T, (qi + 1) * b); ++q)
          for (int k = j * b; k < std::min(T, (j + 1) * b); ++k) {
            const float d = pb[(size_t)q * T + k] - pa[(size_t)q * T + k];
            if (std::fabs(d) > std::fabs(m)) m = d;
          }
        ASSERT_NEAR(r.diff2d[i][(size_t)qi * nb + j], m, tol) << what << ", " << b << " " << qi << "," << j;
      }
  }
}

// Shows B - A: its cells are computed on the view worker (pending until then); the rows once they are there.
const HeadRows& show_diff_cells(AppState& st) {
  st.view.show = ViewRun::kDiff;
  st.state_version++;
  EXPECT_TRUE(st.head_rows().diff_pending);
  wait_idle(st);
  const HeadRows& r = st.head_rows();
  EXPECT_FALSE(r.diff_pending);
  return r;
}

// Dense rows of the current view (the synchronous path), then the same on demand (at once or on the view worker).
std::pair<DenseRows, const HeadRows*> dense_then_on_demand(AppState& st, int sync_max) {
  st.sync_rows_max_tokens = 1 << 20;
  st.dense_rows_max_tokens = 1 << 20;
  st.state_version++;
  DenseRows dense;
  for (int s = 0; s < 2; ++s) {
    dense.p[s] = st.head_rows().p[s];
    dense.metrics[s] = st.head_rows().metrics[s];
  }
  st.sync_rows_max_tokens = sync_max;
  st.dense_rows_max_tokens = 0;
  st.state_version++;
  st.head_rows();
  wait_idle(st);
  return {std::move(dense), &st.head_rows()};
}

// The heatmap past the dense-row limit: each texel is its rows' largest raw score less their log Z, one exponential
// of the texel's largest (HeadRows::max_log_p_spans, row by row), B - A per row from both sides' normalisers, or the
// view worker's b x b cells when a texel spans b keys and rows. Oracle: the same texels max-pooled from the dense
// rows, key by key (1e-5 relative, max_in's tolerance: its exponent is formed in fp32; B - A 1e-5 absolute, of
// p <= 1), the masks equal; each colour channel within one level (a texel 1e-5 apart may take the neighbouring
// sample of the colour table). Texels of several keys and rows, of one, and of less than one; the whole prompt and a
// zoomed-in window; A, B and B - A; linear and log colour. Returns the number of views compared.
int expect_heat_texels_match_dense(AppState& st, const std::string& what0) {
  const int T = st.n_tokens();
  st.sync_rows_max_tokens = 1 << 20;
  st.dense_rows_max_tokens = 1 << 20;
  st.state_version++;
  const HeadRows dense = st.head_rows();  // a copy: dense rows, no pooled copies (computed at once)
  st.dense_rows_max_tokens = 0;
  st.state_version++;
  st.head_rows();
  wait_idle(st);
  const HeadRows& od = st.head_rows();
  EXPECT_FALSE(dense.p[0].empty() || dense.p[1].empty()) << what0;
  EXPECT_TRUE(od.p[0].empty() && od.p[1].empty() && !od.norm[0].empty() && !od.norm[1].empty()) << what0;
  const HeatView whole{0, (double)T, 0, (double)T, T}, zoomed{T / 4.0, 3.0 * T / 4.0, T / 3.0, (double)T, T};
  int compared = 0;
  for (const ViewRun show : {ViewRun::kA, ViewRun::kB, ViewRun::kDiff})
    for (const HeatColor color : {HeatColor::kLinear, HeatColor::kLog, HeatColor::kAuto})
      for (const HeatView& v : {whole, zoomed})
        for (const int w : {1, 3, 4, T, 2 * T + 1}) {
          st.view.show = show;
          st.view.heat_color = color;
          const std::string what = what0 + ": show " + std::to_string((int)show) + " " + heat_color_name(color) +
                                   " view k " + std::to_string(v.k0) + ".." + std::to_string(v.k1) + " w " +
                                   std::to_string(w);
          std::vector<uint8_t> px_d, px_o;
          std::vector<float> tex_d, tex_o;
          bool log_d = false, log_o = false;
          const float vd = build_heat_pixels(st, dense, v, w, w, px_d, &tex_d, &log_d);
          const float vo = build_heat_pixels(st, od, v, w, w, px_o, &tex_o, &log_o);
          if (show == ViewRun::kDiff && vo < 0.0f) {  // B - A spanning 8 keys without its cells: not drawn
            EXPECT_GE((v.k1 - v.k0) / w, kHeatPoolKeys[0]) << what;
            continue;
          }
          EXPECT_EQ(tex_d.size(), (size_t)w * w) << what;
          if (color != HeatColor::kAuto) {
            EXPECT_EQ(log_d, color == HeatColor::kLog && show != ViewRun::kDiff) << what;
          }
          EXPECT_EQ(log_o, log_d) << what;
          if (tex_o.size() != tex_d.size() || px_o.size() != px_d.size()) {
            ADD_FAILURE() << what << ": sizes differ";
            continue;
          }
          const bool diff = show == ViewRun::kDiff;
          // The colour scale leaves out query row 0 (one key, p = 1); from b x b cells it leaves out their first row
          // of cells, the rows 0 .. b - 1, so there it is compared only through the texels and the colours.
          const bool cells = (v.k1 - v.k0) / w >= kHeatPoolKeys[0] && (v.q1 - v.q0) / w >= kHeatPoolKeys[0];
          if (!cells) { EXPECT_NEAR(vo, vd, diff ? 1e-5 : 1e-5 * vd + 1e-9) << what; }
          // B - A keeps the difference of largest magnitude; where +d and -d tie (a row of two visible keys: the
          // mass one key gains the other loses) either may be kept, so a texel whose sign differs is compared by its
          // magnitude and its colour is not compared.
          int bad = 0;
          std::vector<bool> flipped(tex_d.size(), false);
          for (size_t i = 0; i < tex_d.size() && bad < 3; ++i) {
            flipped[i] = diff && tex_o[i] * tex_d[i] < 0.0f;
            const float got = flipped[i] ? -tex_o[i] : tex_o[i];
            if (std::fabs(got - tex_d[i]) > (diff ? 1e-5 : 1e-5 * std::fabs(tex_d[i]) + 1e-9)) {
              ADD_FAILURE() << what << " texel " << i << ": " << tex_o[i] << " vs dense " << tex_d[i];
              ++bad;
            }
          }
          for (size_t i = 0; i < px_d.size() && bad < 3; ++i)
            if (!flipped[i / 4] && std::abs((int)px_o[i] - (int)px_d[i]) > 1) {
              ADD_FAILURE() << what << " byte " << i << ": " << (int)px_o[i] << " vs dense " << (int)px_d[i];
              ++bad;
            }
          ++compared;
        }
  st.view.show = ViewRun::kA;
  st.view.heat_color = HeatColor::kAuto;
  return compared;
}

// Layer 1, head 2, nothing propagated: A previews focal t = 0.3, a setting it did not run; B shows its run.
focal::TempSpec preview_a_at_t03(AppState& st) {
  st.live_propagate = false;
  st.select(1, 2, -1);
  wait_idle(st);
  focal::TempSpec s = st.slots[0].spec;
  s.mode = focal::AttnMode::kFocal;
  s.focal_temp = 0.3f;
  st.set_spec(0, s);
  return s;
}

TEST_F(AppStateTest, HeatmapTexelsFromRowsOnDemandEqualThoseOfTheDenseRows) {
  preview_a_at_t03(st);
  for (const bool hide : {false, true}) {
    st.view.hide_sink = hide;
    // every non-diff combination (40) and the diff ones at texels under 8 keys
    EXPECT_GE(expect_heat_texels_match_dense(st, hide ? "sink hidden" : "sink shown"), 50);
  }
}

TEST_F(AppStateTest, PastTheDenseRowLimitRowsAreComputedWhenReadAndEqualTheDenseRows) {
  focal::TempSpec s = preview_a_at_t03(st);
  const int T = st.n_tokens();
  DenseRows last_dense;
  for (const bool hide : {false, true})
    for (const int sync_max : {1 << 20, 0}) {
      st.view.hide_sink = hide;
      auto [dense, r] = dense_then_on_demand(st, sync_max);
      EXPECT_TRUE(r->preview[0]);
      EXPECT_EQ(r->label[0], s.label());
      expect_rows_match_dense(*r, dense, T,
                              std::string(hide ? "sink hidden" : "sink shown") + (sync_max ? ", at once" : ", worker"));
      last_dense = std::move(dense);
    }
  // B - A: its cells come from the view worker, the largest |b - a| of each cell of the dense rows (2e-6).
  const HeadRows& r = show_diff_cells(st);
  expect_diff_cells(r, last_dense.p[0], last_dense.p[1], T, 2e-6, "on demand");
  for (int q : {1, T / 2, T - 1}) {
    float m = 0.0f;
    for (int k = 0; k <= q; ++k) {
      const float d = last_dense.p[1][(size_t)q * T + k] - last_dense.p[0][(size_t)q * T + k];
      if (std::fabs(d) > std::fabs(m)) m = d;
    }
    EXPECT_NEAR(r.max_diff_in(q, 0, T), m, 2e-6) << q;
  }
  // A new run of A: until its rows arrive the old ones (held with their run) stay readable under their label.
  st.sync_rows_max_tokens = 0;
  s.focal_temp = 0.5f;
  st.slots[0].spec = s;
  st.propagate(0);
  wait_idle(st);  // the run; its rows are submitted by the next head_rows()
  const HeadRows& pend = st.head_rows();
  EXPECT_TRUE(pend.pending[0]);
  EXPECT_NE(pend.raw_run[0], st.slots[0].run);  // the old run, still held
  const float* old_row = pend.row(0, T - 1);
  ASSERT_NE(old_row, nullptr);
  for (int k = 0; k < T; ++k)
    ASSERT_NEAR(old_row[k], last_dense.p[0][(size_t)(T - 1) * T + k],
                2e-6 * last_dense.p[0][(size_t)(T - 1) * T + k] + 1e-9);
  wait_idle(st);
  EXPECT_FALSE(st.head_rows().pending[0]);
  EXPECT_EQ(st.head_rows().raw_run[0], st.slots[0].run);

  // Held rows from dense_diff_cells_min_tokens on: B - A's cells from the view worker too (not in a frame), from the
  // rows themselves (exact: each cell is one of the b - a values, 0 tolerance up to the float difference, 1e-7);
  // below it, none (the heatmap reads every key).
  st.dense_rows_max_tokens = 1 << 20;
  st.sync_rows_max_tokens = 1 << 20;
  st.dense_diff_cells_min_tokens = T + 1;
  st.state_version++;
  EXPECT_TRUE(st.head_rows().diff2d[0].empty());
  EXPECT_FALSE(st.head_rows().diff_pending);
  st.dense_diff_cells_min_tokens = T;
  st.state_version++;
  EXPECT_TRUE(st.head_rows().diff_pending);
  // A's rows replaced while the job may still read the old ones (it holds them; ASan and TSan watch this): the job
  // is superseded and the cells that arrive are of the new rows.
  s.focal_temp = 0.8f;
  st.set_spec(0, s);
  EXPECT_TRUE(st.head_rows().diff_pending);
  wait_idle(st);
  const HeadRows& held = st.head_rows();
  EXPECT_FALSE(held.diff_pending);
  EXPECT_EQ(held.label[0], s.label());
  ASSERT_FALSE(held.p[0].empty());
  ASSERT_FALSE(held.p[1].empty());
  expect_diff_cells(held, held.p[0], held.p[1], T, 1e-7, "held rows");
  // A's new rows from the view worker: the cells stay pending while the rows are computed (no frame reads every
  // key meanwhile), then follow them.
  st.sync_rows_max_tokens = 0;
  s.focal_temp = 0.6f;
  st.set_spec(0, s);
  EXPECT_TRUE(st.head_rows().pending[0]);
  EXPECT_TRUE(st.head_rows().diff_pending);
  EXPECT_TRUE(st.head_rows().diff2d[0].empty());
  wait_idle(st);                             // the rows
  EXPECT_TRUE(st.head_rows().diff_pending);  // the cells' job, submitted once they are there
  wait_idle(st);
  const HeadRows& after = st.head_rows();
  EXPECT_FALSE(after.pending[0]);
  EXPECT_FALSE(after.diff_pending);
  EXPECT_EQ(after.label[0], s.label());
  expect_diff_cells(after, after.p[0], after.p[1], T, 1e-7, "held rows from the view worker");
}

// A 2-layer random-weight rotary model (LLaMA layout, the bundled tokenizer) of max_positions positions, written to
// a fresh directory named after prefix.
std::string tiny_rotary_model(const char* prefix, int max_positions, uint64_t seed) {
  std::string dir = focal::test::make_temp_dir(prefix);
  focal::ModelConfig c;
  c.vocab_size = 4096;
  c.hidden = 16;
  c.intermediate = 32;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.d_head = 8;
  c.max_positions = max_positions;
  c.bos_id = 1;
  c.eos_id = 2;
  focal::write_model_dir(dir, c, focal::random_model_tensors(c, seed), "F32",
                         std::string(FOCAL_SOURCE_DIR) + "/assets/models/tokenizer.model");
  return dir;
}

// The same for a model with a sliding window (Mistral's config, window 6): keys before the window are 0 on demand
// too, the heatmap's cells (A's, and B - A's from the view worker) equal the dense rows' maxima (1e-7, as above),
// and no pooled rows are held; a texel's mask (texel_mask) is the per-row rule's over its rows and keys.
TEST(AppStateLong, RowsOnDemandOfASlidingWindowModelEqualTheDenseRows) {
  const std::string dir = tiny_rotary_model("app_window", 64, 5);
  {
    nlohmann::json j = nlohmann::json::parse(std::ifstream(dir + "/config.json"));
    j["model_type"] = "mistral";
    j["architectures"] = {"MistralForCausalLM"};
    j["sliding_window"] = 6;
    std::ofstream(dir + "/config.json") << j.dump();
  }
  AppState st;
  st.prompt = "one two three four five six seven eight nine ten eleven twelve";
  st.open_path(dir);
  wait_idle(st);
  ASSERT_TRUE(st.has_model()) << st.message;
  ASSERT_EQ(focal::layer_window(*st.config(), 1), 6);
  st.select(1, 1, -1);
  wait_idle(st);
  const int T = st.n_tokens();
  ASSERT_GT(T, 10);
  for (const bool hide : {false, true}) {
    st.view.hide_sink = hide;
    auto [dense, r] = dense_then_on_demand(st, 0);
    expect_rows_match_dense(*r, dense, T, hide ? "window, sink hidden" : "window");
    for (int i = 0; i < kHeatPoolLevels; ++i) {
      EXPECT_TRUE(r->pooled[0][i].empty());
      const int b = kHeatPoolKeys[i], nb = (T + b - 1) / b;
      ASSERT_EQ(r->pooled2d[0][i].size(), (size_t)nb * nb);
      for (int a = 0; a < nb; ++a)
        for (int j = 0; j < nb; ++j) {
          float m = 0.0f;
          for (int q = a * b; q < std::min(T, (a + 1) * b); ++q)
            for (int k = j * b; k < std::min(T, (j + 1) * b); ++k) m = std::max(m, dense.p[0][(size_t)q * T + k]);
          ASSERT_NEAR(r->pooled2d[0][i][(size_t)a * nb + j], m, 1e-7) << b << " " << a << " " << j;
        }
    }
    EXPECT_GE(expect_heat_texels_match_dense(st, hide ? "window heatmap, sink hidden" : "window heatmap"), 50);
    if (hide) continue;
    expect_diff_cells(show_diff_cells(st), dense.p[0], dense.p[1], T, 2e-6, "window, on demand");
    st.view.show = ViewRun::kA;
    st.state_version++;
  }
  // Every texel of up to 4 rows and keys: texel_mask against the rule per row (a key k of row q is shown when
  // window_first_key <= k <= q; a texel with none is the window's where some key is causally visible).
  const focal::ModelConfig& cfg = *st.config();
  for (int layer = 0; layer < 2; ++layer)
    for (int qa = 0; qa < T; ++qa)
      for (int qb = qa + 1; qb <= std::min(T, qa + 4); ++qb)
        for (int ka = 0; ka < T; ++ka)
          for (int kb = ka + 1; kb <= std::min(T, ka + 4); ++kb) {
            bool shown = false, causal = false;
            for (int q = qa; q < qb; ++q)
              for (int k = ka; k < kb; ++k) {
                causal |= k <= q;
                shown |= k <= q && k >= focal::window_first_key(cfg, layer, q + 1);
              }
            const TexelMask want = shown ? kTexelVisible : causal ? kTexelWindow : kTexelCausal;
            ASSERT_EQ(texel_mask(&cfg, layer, qa, qb, ka, kb), want) << layer << " " << qa << " " << qb << " " << ka;
          }
}

// Long prompts compute the rows of the viewed head on the view worker: until they arrive the panels keep the rows of
// the same place under their own label (pending), then the new ones equal the synchronous computation (the same
// row function; atol 1e-7 for the OpenMP schedule) and a double-precision softmax of the stored scores (2e-6).
TEST_F(AppStateTest, LongPromptRowsComeFromTheViewWorkerAndNameTheirSettingUntilThen) {
  st.live_propagate = false;
  st.select(2, 3, -1);
  wait_idle(st);
  focal::TempSpec s = st.slots[0].spec;
  s.mode = focal::AttnMode::kFocal;
  s.focal_temp = 0.2f;
  st.set_spec(0, s);
  const std::vector<float> sync02 = st.head_rows().p[0];
  const std::string label02 = st.head_rows().label[0];
  EXPECT_FALSE(st.head_rows().pending[0]);
  EXPECT_EQ(label02, s.label());
  s.focal_temp = 0.3f;
  st.set_spec(0, s);
  st.sync_rows_max_tokens = 0;  // every prompt is "long"
  const HeadRows& r = st.head_rows();
  EXPECT_TRUE(r.pending[0]);
  EXPECT_FALSE(r.pending[1]);      // B's setting did not change
  EXPECT_EQ(r.label[0], label02);  // still t = 0.2's rows, named so
  EXPECT_EQ(r.p[0].get(), sync02);
  wait_idle(st);
  const HeadRows& r2 = st.head_rows();
  EXPECT_FALSE(r2.pending[0]);
  EXPECT_EQ(r2.label[0], s.label());
  EXPECT_TRUE(r2.preview[0]);
  const auto& run = *st.slots[0].run;
  const int T = st.n_tokens();
  for (int q : {1, T / 2, T - 1}) {
    const size_t off = focal::stored_row_offset(run, 0, 3, (size_t)q, T);
    const auto ref = softmax_ref(&run.scores[off], q + 1, 1.0 / 0.3);
    for (int k = 0; k <= q; ++k) EXPECT_NEAR(r2.p[0][(size_t)q * T + k], ref[k], 2e-6) << q << "," << k;
  }
  // The heatmap's pooled rows: each cell the max of its block of keys (hand-computed here), at every level.
  for (int i = 0; i < kHeatPoolLevels; ++i) {
    const int b = kHeatPoolKeys[i], nb = (T + b - 1) / b;
    ASSERT_EQ(r2.pooled[0][i].size(), (size_t)T * nb) << b;
    for (int q : {0, T / 3, T - 1})
      for (int j = 0; j < nb; ++j) {
        float m = 0.0f;
        for (int k = j * b; k < std::min(T, (j + 1) * b); ++k) m = std::max(m, r2.p[0][(size_t)q * T + k]);
        EXPECT_EQ(r2.pooled[0][i][(size_t)q * nb + j], m) << b << " " << q << " " << j;
      }
    ASSERT_EQ(r2.pooled2d[0][i].size(), (size_t)nb * nb) << b;
    for (int qi = 0; qi < nb; ++qi)
      for (int j = 0; j < nb; ++j) {
        float m = 0.0f;
        for (int q = qi * b; q < std::min(T, (qi + 1) * b); ++q)
          for (int k = j * b; k < std::min(T, (j + 1) * b); ++k) m = std::max(m, r2.p[0][(size_t)q * T + k]);
        EXPECT_EQ(r2.pooled2d[0][i][(size_t)qi * nb + j], m) << b << " " << qi << " " << j;
      }
  }
  const std::vector<float> async03 = r2.p[0];
  st.sync_rows_max_tokens = 1 << 20;
  st.view.hide_sink = true;  // a change of key, then back: the synchronous path recomputes t = 0.3
  st.state_version++;
  st.head_rows();
  st.view.hide_sink = false;
  st.state_version++;
  focal::test::expect_allclose(st.head_rows().p[0], async03, 0.0, 1e-7, "synchronous against view-worker rows");
  // The layer divergence likewise: pending, then the synchronous values.
  const std::vector<float> kl_sync = st.layer_divergence().kl;
  ASSERT_EQ((int)kl_sync.size(), st.config()->n_heads);
  st.sync_rows_max_tokens = 0;
  st.select(2, 3, -1);
  st.view.hide_sink = true;
  EXPECT_TRUE(st.layer_divergence().pending);
  EXPECT_TRUE(st.layer_divergence().kl.empty());
  st.view.hide_sink = false;
  EXPECT_TRUE(st.layer_divergence().pending);
  wait_idle(st);
  EXPECT_FALSE(st.layer_divergence().pending);
  focal::test::expect_allclose(st.layer_divergence().kl, kl_sync, 1e-6, 1e-6, "KL on the view worker");
  // New tokens: the old rows are of another prompt and are not shown while the new ones are computed.
  st.set_prompt("A short prompt of a few other words.");
  const HeadRows& r3 = st.head_rows();
  EXPECT_TRUE(r3.p[0].empty());
  wait_idle(st);   // the runs of the new prompt
  st.head_rows();  // its rows: submitted
  wait_idle(st);
  EXPECT_EQ(st.head_rows().p[0].size(), (size_t)st.n_tokens() * st.n_tokens());
}

TEST_F(AppStateTest, CompareBookkeeping) {
  st.set_compare(false);
  EXPECT_TRUE(st.head_rows().p[1].empty());
  st.set_compare(true);
  wait_idle(st);
  EXPECT_FALSE(st.head_rows().p[1].empty());
  EXPECT_TRUE(std::isfinite(st.layer_divergence().kl.at(0)));
  // Two models: B runs the standard-trained model on the same tokens.
  st.open_model_b(kStandard);
  wait_idle(st);
  ASSERT_TRUE(st.slots[1].model);
  EXPECT_NE(st.slots[1].model.get(), st.slots[0].model.get());
  EXPECT_EQ(st.slots[1].spec.label(), "standard");
  const auto cf = st.capture_file();
  ASSERT_EQ(cf.runs.size(), 2u);
  EXPECT_NE(cf.runs[0].name, cf.runs[1].name);
  EXPECT_EQ(cf.comparisons.size(), 1u);
  st.close_model_b();
  wait_idle(st);
  EXPECT_FALSE(st.slots[1].model);
}

TEST_F(AppStateTest, BadInputKeepsThePreviousSession) {
  const auto tokens = st.file.token_ids;
  st.open_path("/nonexistent/model");
  wait_idle(st);
  EXPECT_TRUE(st.message_is_error);
  EXPECT_NE(st.message.find("/nonexistent/model"), std::string::npos) << st.message;
  EXPECT_TRUE(st.has_model());
  EXPECT_EQ(st.file.token_ids, tokens);
  st.set_prompt("   ");
  EXPECT_TRUE(st.message_is_error);
  EXPECT_NE(st.message.find("empty"), std::string::npos);
  EXPECT_EQ(st.file.token_ids, tokens);
  st.set_prompt("a");  // one token (+ BOS) runs
  wait_idle(st);
  EXPECT_LE(st.n_tokens(), 2);
  EXPECT_TRUE(st.slots[0].run);
}

// The device choice: auto loads where resolve_device says and records how it chose; cuda without a usable GPU is
// one clear error and the CPU session stays.
TEST_F(AppStateTest, DeviceChoiceNotesAutoAndRefusesCudaWithoutAGpu) {
  std::string note;
  const focal::Device expect = focal::resolve_device(focal::Device::kAuto, &note);
  EXPECT_EQ(st.slots[0].model->device(), expect);
  EXPECT_EQ(st.loaded.device_note, note);
  EXPECT_NE(st.message.find(std::string("on ") + focal::device_name(expect)), std::string::npos) << st.message;
  if (expect == focal::Device::kCuda) GTEST_SKIP() << "a CUDA device is usable here: " << note;
  const auto tokens = st.file.token_ids;
  const std::string path = st.loaded.path;
  st.device = focal::Device::kCuda;
  st.open_path(path);
  wait_idle(st);
  EXPECT_TRUE(st.message_is_error);
  EXPECT_NE(st.message.find("CUDA"), std::string::npos) << st.message;
  EXPECT_TRUE(st.has_model());
  EXPECT_EQ(st.slots[0].model->device(), focal::Device::kCpu);
  EXPECT_EQ(st.file.token_ids, tokens);
  st.device = focal::Device::kCpu;
  st.open_path(path);
  wait_idle(st);
  EXPECT_FALSE(st.message_is_error) << st.message;
  EXPECT_NE(st.loaded.device_note.find("cpu"), std::string::npos) << st.loaded.device_note;
}

// A rotary model runs a prompt past its trained context (issue 33): no truncation offer, the warning on the status
// line (not an error) and in the capture's provenance. (A learned position table, GPT-2, still offers truncation.)
TEST(AppStateLong, PromptLongerThanTheContextRunsWithAWarning) {
  const std::string dir = tiny_rotary_model("app_ctx", 12, 3);
  AppState st;
  st.prompt = "short";
  st.open_path(dir);
  wait_idle(st);
  ASSERT_TRUE(st.has_model()) << st.message;
  st.set_prompt("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen");
  EXPECT_FALSE(st.pending_truncation);
  EXPECT_FALSE(st.message_is_error);
  EXPECT_NE(st.message.find("past the model's trained context of 12"), std::string::npos) << st.message;
  EXPECT_NE(st.file.warnings.find("past the model's trained context of 12"), std::string::npos) << st.file.warnings;
  wait_idle(st);
  EXPECT_GT(st.n_tokens(), 12);
  EXPECT_TRUE(st.slots[0].run);
  // Generation continues past the context too, warned on the status line.
  st.set_prompt("one two three");
  wait_idle(st);
  const int n_prompt = st.n_tokens();
  ASSERT_LT(n_prompt, 12);
  st.generate(20, 0.0f);
  EXPECT_NE(st.message.find("past the model's trained context of 12"), std::string::npos) << st.message;
  wait_idle(st);
  ASSERT_TRUE(st.gen);
  EXPECT_GT(n_prompt + (int)st.gen->ids.size(), 12) << "generation stopped at the context";
}

TEST_F(AppStateTest, ModelBWithAnotherVocabularyIsRefused) {
  const std::string dir = focal::test::make_temp_dir("app_vocab");
  focal::ModelConfig c = st.slots[0].model->config();
  c.vocab_size = 100;
  c.hidden = 16;
  c.intermediate = 16;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.d_head = 8;
  c.focal = {};
  focal::write_model_dir(dir, c, focal::random_model_tensors(c, 3), "F32", "");
  st.open_model_b(dir);
  wait_idle(st);
  EXPECT_TRUE(st.message_is_error);
  EXPECT_NE(st.message.find("vocabulary"), std::string::npos) << st.message;
  EXPECT_FALSE(st.slots[1].model);
}

// Two models are compared head by head: a model B of other layers x heads is refused, and opening a model A of
// another shape closes B and says so (B's values were shown under A's heads by flat index, with KL inf).
TEST_F(AppStateTest, ModelsOfAnotherShapeAreNotComparedHeadByHead) {
  const std::string recall = std::string(FOCAL_SOURCE_DIR) + "/assets/models/recall-standard";  // 2 x 4, same tokens
  st.open_model_b(recall);
  wait_idle(st);
  EXPECT_TRUE(st.message_is_error);
  EXPECT_NE(st.message.find("2 layers x 4 heads but model A 4 x 6"), std::string::npos) << st.message;
  EXPECT_FALSE(st.slots[1].model);
  st.open_model_b(kStandard);  // 4 x 6, as A
  wait_idle(st);
  ASSERT_TRUE(st.slots[1].model) << st.message;
  st.open_path(recall);
  wait_idle(st);
  ASSERT_EQ(st.config()->n_layers, 2);
  EXPECT_FALSE(st.slots[1].model) << "B of another shape kept beside the new A";
  EXPECT_NE(st.message.find("model B standard closed: it has 4 layers x 6 heads but model A 2 x 4"), std::string::npos)
      << st.message;
}

// The prompt box of a capture opened without its model holds the text its pieces stand for, escapes undone: typed
// back (opening the model re-tokenizes it) it gives the capture's tokens. A backslash and characters outside the
// vocabulary (byte pieces, displayed "\xE4") came back as the escapes' letters.
TEST_F(AppStateTest, CapturePromptBoxIsTheTextOfItsPieces) {
  st.set_prompt("a back\\slash, caf\u00e9 and \u4E2D\u6587 outside the vocabulary");
  wait_idle(st);
  const std::string path = focal::test::make_temp_dir("app_cap_text") + "/c.h5";
  st.export_capture(path);
  AppState cap;
  cap.open_path(path);
  wait_idle(cap);
  ASSERT_TRUE(cap.capture_only()) << cap.message;
  bool escaped = false;  // the case needs pieces whose display differs from their text
  for (const std::string& p : cap.file.pieces) escaped |= p.find('\\') != std::string::npos;
  EXPECT_TRUE(escaped);
  const focal::Tokenizer& tok = *st.slots[0].model->tokenizer();
  EXPECT_EQ(tok.encode(cap.prompt, st.config()->add_bos), st.file.token_ids) << cap.prompt;
}

TEST_F(AppStateTest, ExportedCaptureReopensWithoutTheModelAndStillPreviews) {
  const std::string path = focal::test::make_temp_dir("app_cap") + "/c.h5";
  st.select(3, 1, -1);
  wait_idle(st);
  st.export_capture(path);
  AppState cap;
  cap.open_path(path);
  wait_idle(cap);
  ASSERT_TRUE(cap.capture_only()) << cap.message;
  EXPECT_EQ(cap.file.token_ids, st.file.token_ids);
  EXPECT_EQ(cap.prompt, st.prompt);  // the text as typed (sentencepiece's leading space of the first word dropped)
  EXPECT_EQ(cap.sel_layer, 3);
  const std::vector<float> before = cap.head_rows().p[0];
  ASSERT_FALSE(before.empty());
  focal::TempSpec s = cap.slots[0].spec;
  s.focal_temp = 0.15f;
  cap.set_spec(0, s);
  EXPECT_FALSE(cap.busy());
  const HeadRows& r = cap.head_rows();
  EXPECT_TRUE(r.preview[0]);
  EXPECT_NE(r.p[0].get(), before);
  cap.set_prompt("something else");
  EXPECT_TRUE(cap.message_is_error);  // tokens of a capture are fixed
}

// A capture opened without its model (issue 38): the next tokens' text comes with the capture (oracle: the
// model's tokenizer); after a preview (t = 0.2 on A) nothing that needs the model is shown under the new label — the
// loss is the stored run's, named, and export and sweep refuse with the reason; the model the capture names is
// offered because its checksum matches, and opening it re-runs A at t = 0.2 over the capture's tokens (oracle:
// capture_run on the same model, loss to 1e-5 nats). A capture whose model differs or is missing offers nothing.
TEST_F(AppStateTest, CaptureWithoutItsModelNeverShowsAStoredValueUnderANewLabel) {
  const focal::Tokenizer& tok = st.slots[0].model->require_tokenizer();
  const focal::RunCapture& live = *st.slots[0].run;
  ASSERT_EQ(live.topk_pieces.size(), live.topk_ids.size());
  for (size_t i = 0; i < live.topk_ids.size(); ++i) ASSERT_EQ(live.topk_pieces[i], tok.display(live.topk_ids[i])) << i;
  const std::string dir = focal::test::make_temp_dir("app_capmodel");
  const std::string path = dir + "/c.h5";
  st.export_capture(path);
  const float stored_loss = st.prompt_loss(0);

  AppState cap;
  cap.open_path(path);
  wait_idle(cap);
  ASSERT_TRUE(cap.capture_only()) << cap.message;
  EXPECT_EQ(cap.slots[0].run->topk_pieces, live.topk_pieces);  // text without the model
  EXPECT_TRUE(cap.capture_model.available) << cap.capture_model.why_not;
  EXPECT_EQ(cap.capture_model.path, st.file.model_path);
  EXPECT_TRUE(std::isnan(cap.head_metric(0, cap.sel_layer, cap.sel_head, kInductionScore)));
  EXPECT_NE(cap.head_metric_gap(0, kInductionScore).find("needs the model"), std::string::npos);
  EXPECT_EQ(cap.head_metric_gap(0, focal::kEntropyNats), "");
  EXPECT_TRUE(cap.readouts_current(0) && cap.readouts_current(1));

  focal::TempSpec t02 = cap.slots[0].spec;
  t02.focal_temp = 0.2f;
  cap.set_spec(0, t02);
  wait_idle(cap);
  EXPECT_FALSE(cap.readouts_current(0));
  EXPECT_EQ(cap.readout_gap(0), "needs the model");
  EXPECT_TRUE(cap.readouts_current(1));
  EXPECT_EQ(cap.slots[0].spec.label(), "focal_t0.2");
  EXPECT_EQ(cap.slots[0].run_spec.label(), "focal_t0.4");  // the name the stored loss is shown under
  EXPECT_FLOAT_EQ(cap.prompt_loss(0), stored_loss);
  try {
    cap.export_capture(dir + "/preview.h5");
    ADD_FAILURE() << "export of a preview without the model did not refuse";
  } catch (const focal::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("focal_t0.2"), std::string::npos) << m;
    EXPECT_NE(m.find("preview"), std::string::npos) << m;
    EXPECT_NE(m.find("needs the model"), std::string::npos) << m;
  }
  EXPECT_FALSE(std::ifstream(dir + "/preview.h5").good());
  cap.run_sweep(0.1f, 1.5f, 15);
  EXPECT_TRUE(cap.message_is_error);
  EXPECT_NE(cap.message.find("Open its model"), std::string::npos) << cap.message;

  cap.open_capture_model();
  wait_idle(cap);
  ASSERT_TRUE(cap.has_model()) << cap.message;
  EXPECT_FALSE(cap.message_is_error) << cap.message;
  EXPECT_EQ(cap.file.token_ids, st.file.token_ids);
  EXPECT_EQ(cap.slots[0].spec.label(), "focal_t0.2");
  ASSERT_TRUE(cap.readouts_current(0) && cap.readouts_current(1));
  EXPECT_EQ(cap.readout_gap(0), "");
  auto model = focal::Model::load(kBundled);
  focal::CaptureRequest req;
  req.layers = {cap.sel_layer};
  const focal::RunCapture ref = focal::capture_run(*model, cap.file.token_ids, t02, req, "ref");
  EXPECT_NEAR(cap.prompt_loss(0), focal::prompt_loss(ref), 1e-5);
  EXPECT_GT(std::fabs(cap.prompt_loss(0) - stored_loss), 1e-3);  // t = 0.2 is not the stored t = 0.4
  if (cap.slots[0].model->device() == focal::Device::kCpu) { EXPECT_EQ(cap.head_metric_gap(0, kInductionScore), ""); }
  cap.export_capture(dir + "/t02.h5");
  EXPECT_EQ(focal::read_capture(dir + "/t02.h5").runs[0].name, "focal_t0.2");

  // Other weights under the same path, and a path that is gone: no offer, and the reason.
  focal::CaptureFile f = focal::read_capture(path);
  f.weights_checksum ^= 1;
  focal::write_capture(f, dir + "/other.h5");
  f = focal::read_capture(path);
  f.model_path = dir + "/no-such-model";
  focal::write_capture(f, dir + "/gone.h5");
  for (const char* name : {"other.h5", "gone.h5"}) {
    SCOPED_TRACE(name);
    AppState o;
    o.open_path(dir + "/" + name);
    wait_idle(o);
    ASSERT_TRUE(o.capture_only()) << o.message;
    EXPECT_FALSE(o.capture_model.available);
    EXPECT_NE(o.capture_model.why_not.find(std::string(name) == "other.h5" ? "checksum" : "no-such-model"),
              std::string::npos)
        << o.capture_model.why_not;
    o.open_capture_model();
    EXPECT_TRUE(o.message_is_error);
    EXPECT_FALSE(o.busy());
    EXPECT_FALSE(o.has_model());
  }
}

// With a model, a change that is not propagated yet (live propagate off) is a preview too: the readouts stay the
// last run's, the gap says so, and export refuses until Propagate has run; after it the run is the setting's.
TEST_F(AppStateTest, UnpropagatedChangeIsNotExportedUnderItsLabel) {
  st.live_propagate = false;
  focal::TempSpec t02 = st.slots[0].spec;
  t02.focal_temp = 0.2f;
  st.set_spec(0, t02);
  wait_idle(st);
  EXPECT_FALSE(st.readouts_current(0));
  EXPECT_EQ(st.readout_gap(0), "is not propagated yet");
  EXPECT_EQ(st.slots[0].run_spec.label(), "focal_t0.4");
  const std::string dir = focal::test::make_temp_dir("app_unprop");
  try {
    st.export_capture(dir + "/c.h5");
    ADD_FAILURE() << "export of an unpropagated change did not refuse";
  } catch (const focal::Error& e) { EXPECT_NE(std::string(e.what()).find("press Propagate"), std::string::npos); }
  EXPECT_FALSE(std::ifstream(dir + "/c.h5").good());
  st.propagate_all();
  wait_idle(st);
  EXPECT_TRUE(st.readouts_current(0));
  st.export_capture(dir + "/c.h5");
  EXPECT_EQ(focal::read_capture(dir + "/c.h5").runs[0].name, "focal_t0.2");
}

// Mean of v over [lo, hi): the oracle of the app's losses.
double mean_over(const std::vector<float>& v, int lo, int hi) {
  double s = 0;
  for (int i = lo; i < hi; ++i) s += v[i];
  return s / (hi - lo);
}

// The Generation tab's capture: the session's tokens become exactly prompt + generated ids with the boundary
// recorded, and A and B run over them. A's greedy tokens are its own top-1 predictions at every generated position;
// the Output tab's prompt loss covers the prompt's tokens only and the generated tokens get their own loss (each
// the mean of the run's token_nll over its rows, by hand). Export writes the boundary, the reopened capture keeps it,
// and a new prompt clears it.
TEST_F(AppStateTest, GenerationCaptureMarksThePromptAndSplitsTheLoss) {
  const std::vector<int32_t> prompt_ids = st.file.token_ids;
  const int P = (int)prompt_ids.size();
  st.capture_generation();  // nothing generated yet
  EXPECT_TRUE(st.message_is_error);
  EXPECT_EQ(st.file.token_ids, prompt_ids);
  st.generate(6, 0.0f);
  wait_idle(st);
  ASSERT_TRUE(st.gen && !st.gen->ids.empty());
  const std::vector<int32_t> gen_ids = st.gen->ids;
  st.capture_generation();
  wait_idle(st);
  ASSERT_FALSE(st.message_is_error) << st.message;
  const int T = st.n_tokens();
  ASSERT_EQ(T, P + (int)gen_ids.size());
  EXPECT_EQ(std::vector<int32_t>(st.file.token_ids.begin(), st.file.token_ids.begin() + P), prompt_ids);
  EXPECT_EQ(std::vector<int32_t>(st.file.token_ids.begin() + P, st.file.token_ids.end()), gen_ids);
  EXPECT_EQ(st.file.n_prompt_tokens, P);
  EXPECT_EQ(st.file.prompt_end(), P);
  for (int side = 0; side < 2; ++side) {
    SCOPED_TRACE(side);
    ASSERT_TRUE(st.slots[side].run);
    const focal::RunCapture& r = *st.slots[side].run;
    ASSERT_EQ((int)r.token_nll.size(), T);
    EXPECT_NEAR(st.prompt_loss(side), mean_over(r.token_nll, 0, P - 1), 1e-5);
    EXPECT_NEAR(st.generated_loss(side), mean_over(r.token_nll, P - 1, T - 1), 1e-5);
  }
  const focal::RunCapture& a = *st.slots[0].run;
  const int K = (int)(a.topk_ids.size() / T);
  ASSERT_GT(K, 0);
  for (int i = P - 1; i + 1 < T; ++i) EXPECT_EQ(a.topk_ids[(size_t)i * K], st.file.token_ids[i + 1]) << i;

  const std::string path = focal::test::make_temp_dir("app_gen") + "/g.h5";
  st.export_capture(path);
  EXPECT_EQ(focal::read_capture(path).n_prompt_tokens, P);
  AppState cap;
  cap.open_path(path);
  wait_idle(cap);
  ASSERT_TRUE(cap.capture_only()) << cap.message;
  EXPECT_EQ(cap.file.prompt_end(), P);
  EXPECT_FLOAT_EQ(cap.generated_loss(0), st.generated_loss(0));
  EXPECT_FLOAT_EQ(cap.prompt_loss(1), st.prompt_loss(1));

  st.set_prompt("A new prompt of its own.");
  wait_idle(st);
  EXPECT_EQ(st.file.n_prompt_tokens, 0);
  EXPECT_TRUE(std::isnan(st.generated_loss(0)));
  EXPECT_NEAR(st.prompt_loss(0), mean_over(st.slots[0].run->token_nll, 0, st.n_tokens() - 1), 1e-5);

  // Another model opened: the generation was the previous model's. The Generation tab kept its text and
  // capture-generation made a "generation" of the new model from it (with a generated loss).
  st.generate(4, 0.0f);
  wait_idle(st);
  ASSERT_TRUE(st.gen && !st.gen->ids.empty());
  st.open_path(kStandard);
  wait_idle(st);
  EXPECT_FALSE(st.gen) << "the previous model's generation is still shown";
  const std::vector<int32_t> before = st.file.token_ids;
  st.capture_generation();
  EXPECT_TRUE(st.message_is_error);
  EXPECT_EQ(st.file.token_ids, before);
  EXPECT_EQ(st.file.n_prompt_tokens, 0);
  // A generation that names another model than A's is refused all the same (here: none).
  st.generate(3, 0.0f);
  wait_idle(st);
  ASSERT_TRUE(st.gen && !st.gen->ids.empty());
  st.gen->model.reset();
  st.capture_generation();
  EXPECT_TRUE(st.message_is_error);
  EXPECT_NE(st.message.find("made by another model"), std::string::npos) << st.message;
  EXPECT_EQ(st.file.n_prompt_tokens, 0);
}

// A generation of an earlier A or prompt is marked as such and not captured: after A's t changes the tab showed the
// old text under the new setting, and after a new prompt capture-generation brought the old prompt back.
TEST_F(AppStateTest, AGenerationOfAnotherSettingOrPromptIsMarkedAndNotCaptured) {
  st.generate(4, 0.0f);
  wait_idle(st);
  ASSERT_TRUE(st.gen && !st.gen->ids.empty());
  EXPECT_EQ(st.generation_gap(), "");
  const focal::TempSpec was = st.slots[0].spec;
  focal::TempSpec other = was;
  other.mode = focal::AttnMode::kFocal;
  other.focal_temp = 0.1f;
  st.set_spec(0, other);
  wait_idle(st);
  EXPECT_NE(st.generation_gap().find("generated under " + was.label() + "; A is now " + other.label()),
            std::string::npos)
      << st.generation_gap();
  const std::vector<int32_t> before = st.file.token_ids;
  st.capture_generation();
  EXPECT_TRUE(st.message_is_error);
  EXPECT_EQ(st.file.token_ids, before);
  st.set_spec(0, was);  // back to the setting that generated: it is that generation again
  wait_idle(st);
  EXPECT_EQ(st.generation_gap(), "");
  st.set_prompt("A dog ran far away into the big dark forest.");
  wait_idle(st);
  EXPECT_NE(st.generation_gap().find("earlier prompt"), std::string::npos) << st.generation_gap();
  const std::vector<int32_t> new_prompt = st.file.token_ids;
  st.capture_generation();
  EXPECT_TRUE(st.message_is_error);
  EXPECT_EQ(st.file.token_ids, new_prompt);
}

// The Sweep tab's key: what a sweep keeps fixed while t varies. Another override of A is another sweep; another t
// (or standard) is the same one.
TEST(SweepKey, OverridesMakeAnotherSweepTAloneDoesNot) {
  focal::TempSpec a = focal::TempSpec::focal(0.4f);
  EXPECT_EQ(sweep_key(a), sweep_key(focal::TempSpec::focal(0.2f)));
  EXPECT_EQ(sweep_key(a), sweep_key(focal::TempSpec::standard()));
  focal::TempSpec o = a;
  o.head_temp[{2, 3}] = 0.15f;
  EXPECT_NE(sweep_key(a), sweep_key(o));
}

// A runtime error about one field is shown with the app's control for it, never with a CLI option.
TEST_F(AppStateTest, RuntimeErrorsNameTheAppsControlNotACliOption) {
  focal::TempSpec s = st.slots[0].spec;
  s.mode = focal::AttnMode::kFocal;
  s.focal_temp = -1.0f;
  st.live_propagate = false;
  st.set_spec(0, s);
  st.propagate(0);  // validates the spec against the model
  wait_idle(st);
  EXPECT_TRUE(st.message_is_error);
  EXPECT_EQ(st.message.rfind("t slider: focal_temp = -1 must be a number in [1e-6, 1e6]", 0), 0u) << st.message;
  EXPECT_EQ(st.message.find("--"), std::string::npos) << st.message;
  EXPECT_EQ(with_control(focal::Error("relevant", "relevant position 99 \u2265 T = 40")),
            "relevant keys: relevant position 99 \u2265 T = 40");
  EXPECT_EQ(with_control(focal::Error("not a field of a request")), "not a field of a request");
}

// A capture that HDF5 reads but whose contents do not hold together (a malformed temperature spec, a stored layer
// its model does not have) is refused with a message naming the file; the loaded session stays.
TEST_F(AppStateTest, InconsistentCaptureIsRefusedAndTheSessionStays) {
  const std::string dir = focal::test::make_temp_dir("app_badcap");
  st.export_capture(dir + "/good.h5");
  const auto tokens = st.file.token_ids;
  const auto run_a = st.slots[0].run;
  struct Case {
    std::string name, needle;
    std::function<void(focal::CaptureFile&)> spoil;
  };
  const std::vector<Case> cases = {
      {"bad_spec.h5", "temperature spec", [](focal::CaptureFile& f) { f.runs[0].temp_spec_json = "{\"mode\": "; }},
      {"bad_override.h5", "layer 99",
       [](focal::CaptureFile& f) {
         f.runs[1].temp_spec_json = R"({"mode": "focal", "focal_temp": 0.4, "layer_temp": {"99": 0.5}})";
       }},
  };
  for (const Case& c : cases) {
    focal::CaptureFile f = focal::read_capture(dir + "/good.h5");
    ASSERT_GE(f.runs.size(), 2u);
    c.spoil(f);
    const std::string path = dir + "/" + c.name;
    focal::write_capture(f, path);
    st.open_path(path);
    wait_idle(st);
    EXPECT_TRUE(st.message_is_error) << c.name;
    EXPECT_NE(st.message.find(path), std::string::npos) << st.message;
    EXPECT_NE(st.message.find(c.needle), std::string::npos) << st.message;
    EXPECT_TRUE(st.has_model()) << c.name;
    EXPECT_FALSE(st.capture_only()) << c.name;
    EXPECT_EQ(st.file.token_ids, tokens);
    EXPECT_EQ(st.slots[0].run, run_a);
  }
}

// Marking relevant keys in the live app: both runs re-run with them, and every row's relevant mass is the sum of
// that row's stored probabilities over the marked keys it can see (reference: the sum recomputed here in double).
TEST_F(AppStateTest, MarkedRelevantKeysGiveRelevantMass) {
  st.set_compare(true);
  wait_idle(st);
  EXPECT_TRUE(std::isnan(st.head_metric(0, 0, 0, focal::kRelevantMass)));
  st.toggle_relevant(3);
  st.toggle_relevant(1);
  wait_idle(st);
  ASSERT_EQ(st.file.relevant, (std::vector<int32_t>{1, 3}));
  const int T = st.n_tokens();
  const auto& c = *st.config();
  for (int side = 0; side < 2; ++side) {
    const focal::RunCapture& run = *st.slots[side].run;
    ASSERT_FALSE(run.probs.empty());
    const int li = 0, l = run.layers[li];
    for (size_t hi = 0; hi < run.heads.size(); ++hi)
      for (int q : {0, 2, 3, T - 1}) {
        const float* p = &run.probs[((li * run.heads.size() + hi) * run.queries.size() + q) * T];
        double ref = 0.0;
        for (int k : {1, 3})
          if (k <= q) ref += p[k];
        const float got = run.metrics[(((size_t)l * c.n_heads + run.heads[hi]) * T + q) * focal::kNumRowMetrics +
                                      focal::kRelevantMass];
        if (q == 0) {
          EXPECT_TRUE(std::isnan(got)) << "row 0 sees no marked key";
        } else {
          EXPECT_NEAR(got, ref, 2e-6) << "side " << side << " head " << run.heads[hi] << " row " << q;
        }
      }
    EXPECT_TRUE(std::isfinite(st.head_metric(side, 0, 0, focal::kRelevantMass)));
  }
  // The marks travel with an exported capture, and unmarking clears the metric.
  const std::string path = focal::test::make_temp_dir("app_rel") + "/r.h5";
  st.export_capture(path);
  EXPECT_EQ(focal::read_capture(path).relevant, (std::vector<int32_t>{1, 3}));
  st.toggle_relevant(1);
  st.toggle_relevant(3);
  wait_idle(st);
  EXPECT_TRUE(st.file.relevant.empty());
  EXPECT_TRUE(std::isnan(st.head_metric(0, 0, 0, focal::kRelevantMass)));
  // New tokens clear the marks.
  st.toggle_relevant(2);
  st.set_prompt("A different prompt about the sea.");
  wait_idle(st);
  EXPECT_TRUE(st.file.relevant.empty());
}

// A result closure that throws on the UI thread is reported as an error instead of ending the app.
TEST(JobQueue, ThrowingResultBecomesAnError) {
  JobQueue q;
  q.submit("k", "x", [](JobContext&) -> std::function<void()> { return [] { throw focal::Error("broken apply"); }; });
  std::string err;
  const auto t0 = std::chrono::steady_clock::now();
  while (err.empty() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    q.poll([&](const std::string& e) { err = e; });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(err, "broken apply");
}

TEST(Settings, RoundTripAndMalformedFile) {
  const std::string dir = focal::test::make_temp_dir("app_settings");
  Settings s;
  s.model_path = "/m";
  s.prompt = "hello";
  s.recent = {"/a", "/b"};
  s.heat_color = "log";
  s.window_w = 1234;
  s.save(dir + "/sub/settings.json");
  std::string warn;
  const Settings r = Settings::load(dir + "/sub/settings.json", &warn);
  EXPECT_TRUE(warn.empty());
  EXPECT_EQ(r.model_path, "/m");
  EXPECT_EQ(r.recent, s.recent);
  EXPECT_EQ(r.heat_color, "log");
  EXPECT_EQ(r.window_w, 1234);
  std::ofstream(dir + "/bad.json") << "{not json";
  const Settings d = Settings::load(dir + "/bad.json", &warn);
  EXPECT_NE(warn.find("bad.json"), std::string::npos);
  EXPECT_EQ(d.window_w, Settings{}.window_w);
}

TEST(Script, ParsesCommandsAndNamesTheLineOfAnError) {
  const auto cmds = parse_script("# comment\nopen /x y\n\nprompt the old man\ntemp 0.4 b\nwait\nquit\n", "s.txt");
  ASSERT_EQ(cmds.size(), 5u);
  EXPECT_EQ(cmds[0].rest, "/x y");
  EXPECT_EQ(cmds[1].rest, "the old man");
  EXPECT_EQ(cmds[2].args, (std::vector<std::string>{"0.4", "b"}));
  EXPECT_EQ(cmds[2].line, 5);
  try {
    parse_script("wait\nfly away\n", "s.txt");
    FAIL();
  } catch (const focal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("s.txt:2: unknown command 'fly'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_script("select 1\n", "s.txt"), focal::Error);
  // counts and indices are whole numbers >= 0 when the script is read (a usage error, before anything runs)
  for (const char* bad : {"frames abc\n", "frames -1\n", "select 1 0.5\n", "resize 800 6e2\n", "wait 1x\n",
                          "head-temp 0 x 0.5\n", "frames 12345678901\n"})
    EXPECT_THROW(parse_script(bad, "s.txt"), focal::Error) << bad;
  EXPECT_EQ(parse_script("frames 0\nselect 1 2 3\nlayer-temp 1 0.25\nwait 30\n", "s.txt").size(), 4u);
}

// The script's `spec SPEC [a|b]` walks the shared table of the one spec grammar (tests/data/temp_specs.tsv) on the
// bundled learned-tau model (native = learned, 4 layers, 6 heads): each valid spec is the setting it spells, each
// invalid one a single error starting with the script's file:line.
TEST(Script, SpecCommandTakesTheSharedSpecTable) {
  const auto cmds = parse_script("spec focal:0.4+1:0=0.5 b\nspec native\n", "s.txt");
  ASSERT_EQ(cmds.size(), 2u);
  EXPECT_EQ(cmds[0].args, (std::vector<std::string>{"focal:0.4+1:0=0.5", "b"}));
  EXPECT_THROW(parse_script("spec\n", "s.txt"), focal::Error);
  const auto model = focal::Model::load(std::string(FOCAL_SOURCE_DIR) + "/assets/models/focal-learned");
  const focal::ModelConfig& cfg = model->config();
  ASSERT_EQ(cfg.focal.mode, focal::AttnMode::kLearned);
  for (const focal::test::SpecCase& c : focal::test::temp_spec_cases(FOCAL_SOURCE_DIR)) {
    SCOPED_TRACE("spec '" + c.spec + "'");
    try {
      const focal::TempSpec s = parse_spec_command(c.spec, &cfg, "s.txt:7");
      EXPECT_TRUE(c.error.empty()) << "accepted as " << s.text();
      if (c.error.empty()) { EXPECT_EQ(s.text(), c.canonical); }
    } catch (const focal::Error& e) {
      const std::string msg = e.what();
      EXPECT_FALSE(c.error.empty()) << "rejected: " << msg;
      EXPECT_EQ(msg.rfind("s.txt:7: ", 0), 0u) << msg;
      EXPECT_NE(msg.find(c.error), std::string::npos) << msg;
    }
  }
  EXPECT_THROW(parse_spec_command("focal:0.4", nullptr, "s.txt:1"), focal::Error);  // no model open
}

}  // namespace
}  // namespace focalscope

// ---- the Corpus tab's data (corpus_view.h) ----
namespace focalscope {
namespace {
TEST(CorpusView, MatrixIsTheDifferenceOfCorpusMeansAndDocumentsRankByTheirHeadMean) {
  const std::string dir = focal::test::make_temp_dir("corpus_view");  // removed when the test process ends
  ASSERT_FALSE(dir.empty());
  std::ofstream(dir + "/c.txt") << "the river ran past the town\n\nand every night the lamps burned low over the "
                                   "quiet water\n\nkings\n";
  auto model = focal::Model::load(kBundled);
  focal::batch::BatchOptions o;
  o.data_path = dir + "/c.txt";
  o.out_path = dir + "/s.h5";
  o.runs = {{"standard", focal::TempSpec::standard()}, {"focal_t0.4", focal::TempSpec::focal(0.4f)}};
  o.max_tokens = 16;
  int argc = 0;
  char** argv = nullptr;
  auto comm = focal::batch::make_comm(&argc, &argv);
  focal::batch::run_batch(*model, o, *comm, {});
  EXPECT_TRUE(is_corpus_path(o.out_path));
  EXPECT_FALSE(is_corpus_path(dir + "/c.txt"));
  CorpusView cv = CorpusView::load(o.out_path);
  ASSERT_EQ(cv.run_b, 1);
  const std::vector<float> m = cv.matrix();
  const auto& st = cv.stats.stats;
  const size_t c0 = st.cell(0, 2, 1, focal::kEntropyNats), c1 = st.cell(1, 2, 1, focal::kEntropyNats);
  EXPECT_NEAR(m[(size_t)2 * st.shape.n_heads + 1], st.moments[c1].mean - st.moments[c0].mean, 1e-6);
  const std::vector<size_t> r = cv.ranked_docs(1, 2, 1);
  ASSERT_EQ(r.size(), 3u);
  for (size_t i = 1; i < r.size(); ++i)
    EXPECT_GE(cv.stats.doc_head_mean(r[i - 1], 1, 2, 1, focal::kEntropyNats),
              cv.stats.doc_head_mean(r[i], 1, 2, 1, focal::kEntropyNats));
  EXPECT_EQ(cv.document_text(2), "kings");
}

// A stats file of the bundled text model (4 layers x 6 heads), two runs, three short documents.
std::string make_stats_file(const std::string& tag) {
  const std::string dir = focal::test::make_temp_dir(tag);
  std::ofstream(dir + "/c.txt") << "the river ran past the town\n\nand every night the lamps burned low\n\nkings\n";
  auto model = focal::Model::load(kBundled);
  focal::batch::BatchOptions o;
  o.data_path = dir + "/c.txt";
  o.out_path = dir + "/s.h5";
  o.runs = {{"standard", focal::TempSpec::standard()}, {"focal_t0.4", focal::TempSpec::focal(0.4f)}};
  o.max_tokens = 16;
  int argc = 0;
  char** argv = nullptr;
  auto comm = focal::batch::make_comm(&argc, &argv);
  focal::batch::run_batch(*model, o, *comm, {});
  return o.out_path;
}

// The histogram's axis spans the bins that hold counts (either run), one empty bin each side: counts set by hand.
TEST(CorpusView, HistogramBinsSpanTheDataOfBothRuns) {
  CorpusView cv;
  focal::batch::StatsShape& sh = cv.stats.stats.shape;
  sh.n_runs = 2, sh.n_layers = 1, sh.n_heads = 1, sh.n_metrics = focal::kNumRowMetrics, sh.n_bins = 8;
  cv.stats.stats.hist.assign(sh.cells() * 8, 0);
  cv.run_a = 0, cv.run_b = 1, cv.metric = focal::kEntropyNats;
  EXPECT_EQ(cv.hist_bins(0, 0), std::make_pair(0, 7));  // no counts: the whole range
  auto bin = [&](int run, int b) -> uint64_t& {
    return cv.stats.stats.hist[cv.stats.stats.cell(run, 0, 0, cv.metric) * 8 + b];
  };
  bin(0, 3) = 5, bin(0, 4) = 1;
  EXPECT_EQ(cv.hist_bins(0, 0), std::make_pair(2, 5));
  bin(1, 5) = 2;  // run B reaches further right
  EXPECT_EQ(cv.hist_bins(0, 0), std::make_pair(2, 6));
  cv.run_b = -1;  // A alone
  EXPECT_EQ(cv.hist_bins(0, 0), std::make_pair(2, 5));
  bin(0, 0) = 1, bin(0, 7) = 1;  // data at both ends: nothing to widen into
  EXPECT_EQ(cv.hist_bins(0, 0), std::make_pair(0, 7));
  // Another metric's counts do not count.
  cv.stats.stats.hist.assign(sh.cells() * 8, 0);
  cv.stats.stats.hist[cv.stats.stats.cell(0, 0, 0, focal::kMaxProb) * 8 + 6] = 9;
  EXPECT_EQ(cv.hist_bins(0, 0), std::make_pair(0, 7));
}

// The Corpus tab's selection is in the stats file's shape, whatever model is loaded; the script's select fails, and
// changes nothing, outside the shape of the view it goes to.
TEST(CorpusView, SelectionFollowsTheStatsFileShapeNotTheLoadedModel) {
  const std::string stats = make_stats_file("corpus_select");
  AppState st;
  st.open_path(stats);
  wait_idle(st);
  ASSERT_TRUE(st.corpus);
  ASSERT_EQ(st.corpus->n_layers(), 4);
  ASSERT_EQ(st.corpus->n_heads(), 6);
  ASSERT_EQ(st.config(), nullptr);
  select_head(st, 3, 5, -1, false);  // nothing else open: the corpus takes it
  EXPECT_EQ(st.corpus->layer, 3);
  EXPECT_EQ(st.corpus->head, 5);
  try {
    select_head(st, 4, 0, -1, false);
    ADD_FAILURE() << "select 4 0 on a 4-layer stats file did not fail";
  } catch (const focal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("4 layers x 6 heads"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(stats), std::string::npos) << e.what();
  }
  EXPECT_EQ(st.corpus->layer, 3);
  EXPECT_THROW(select_head(st, 0, 6, -1, false), focal::Error);
  EXPECT_THROW(select_head(st, -1, 0, -1, false), focal::Error);
  // Another model (the recall model, 2 x 4) opened after it: the Corpus tab (shown) still selects in 4 x 6 ...
  const std::string recall = std::string(FOCAL_SOURCE_DIR) + "/assets/models/recall-focal-t0.4";
  st.prompt = "the river ran past the town";
  st.open_path(recall);
  wait_idle(st);
  ASSERT_TRUE(st.has_model());
  ASSERT_EQ(st.config()->n_layers, 2);
  select_head(st, 3, 4, -1, true);
  EXPECT_EQ(st.corpus->layer, 3);
  EXPECT_EQ(st.corpus->head, 4);
  EXPECT_EQ(st.sel_layer, 0);  // the unrelated model keeps its own head
  // ... and the model panels select in 2 x 4: 3.4 is not there, and nothing moves.
  try {
    select_head(st, 3, 4, -1, false);
    ADD_FAILURE() << "select 3 4 on a 2-layer model did not fail";
  } catch (const focal::Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 layers x 4 heads"), std::string::npos) << e.what();
  }
  EXPECT_EQ(st.sel_layer, 0);
  select_head(st, 1, 3, -1, false);
  EXPECT_EQ(st.sel_layer, 1);
  EXPECT_EQ(st.sel_head, 3);
  EXPECT_EQ(st.corpus->layer, 3);
  EXPECT_THROW(select_head(st, 1, 3, st.n_tokens(), false), focal::Error);  // query past the last token
}

// Opening a stats file closes an unrelated model, so no panel shows it beside the corpus; the batch's own model stays,
// and then one selection serves both.
TEST(CorpusView, OpeningAStatsFileClosesAnUnrelatedModelAndKeepsItsOwn) {
  const std::string stats = make_stats_file("corpus_open");
  AppState st;
  st.prompt = "the river ran past the town";
  st.open_path(std::string(FOCAL_SOURCE_DIR) + "/assets/models/recall-focal-t0.4");
  wait_idle(st);
  ASSERT_TRUE(st.has_model());
  ASSERT_FALSE(st.file.token_ids.empty());
  st.open_path(stats);
  wait_idle(st);
  ASSERT_TRUE(st.corpus);
  EXPECT_FALSE(st.has_model());
  EXPECT_EQ(st.config(), nullptr);
  EXPECT_TRUE(st.file.token_ids.empty());
  EXPECT_FALSE(st.slots[0].run);
  EXPECT_FALSE(st.slots[1].run);
  EXPECT_TRUE(st.loaded.path.empty());
  EXPECT_TRUE(st.prompt.empty());  // the recall model's prompt went with it
  EXPECT_NE(st.message.find("recall-focal-t0.4, which is not the batch's model"), std::string::npos) << st.message;
  EXPECT_FALSE(st.message_is_error);
  // The batch's own model (named by another spelling of its path) stays loaded.
  EXPECT_TRUE(st.corpus->is_model(kBundled + "/"));
  EXPECT_TRUE(st.corpus->is_model(std::string(FOCAL_SOURCE_DIR) + "/assets/../assets/models/focal-t0.4"));
  EXPECT_FALSE(st.corpus->is_model(kStandard));
  AppState own;
  own.prompt = "the river ran past the town";
  own.open_path(kBundled);
  wait_idle(own);
  own.select(2, 5, -1);
  own.open_path(stats);
  wait_idle(own);
  ASSERT_TRUE(own.corpus);
  EXPECT_TRUE(own.has_model());
  EXPECT_EQ(own.corpus->layer, 2);  // the corpus opens on the model's head
  EXPECT_EQ(own.corpus->head, 5);
  select_head(own, 3, 1, -1, true);  // the batch's model: both views take it
  EXPECT_EQ(own.corpus->layer, 3);
  EXPECT_EQ(own.sel_layer, 3);
  EXPECT_EQ(own.sel_head, 1);
}

// The heatmap's automatic colour, against the rule counted by hand: T = 64, one texel per query and key; rows 1..63
// are either sharp (p = 1 on the diagonal) or uniform (p = 1/(q+1): below 0.1 of the largest p, 1/2 at row 1, from
// row 20 on). Log when more than half of the 63 rows are faint: uniform from row 32 on gives 32 faint rows (log),
// from row 33 on 31 (linear). Chosen colours are kept whatever the rows.
TEST(HeatPixels, AutoColourIsLogWhenMostRowsAreFaint) {
  const int T = 64;
  auto rows_with_uniform_from = [&](int first_uniform) {
    std::vector<float> p((size_t)T * T, 0.0f);  // [T, T]
    for (int q = 0; q < T; ++q)
      for (int k = 0; k <= q; ++k)
        p[(size_t)q * T + k] = q >= first_uniform ? 1.0f / float(q + 1) : (k == q ? 1.0f : 0.0f);
    HeadRows r;
    r.T = T;
    r.p[0] = std::move(p);
    return r;
  };
  AppState st;
  st.view.show = ViewRun::kA;
  const HeatView whole{0, (double)T, 0, (double)T, T};
  std::vector<uint8_t> px;
  bool log_used = false;
  const HeadRows uniform = rows_with_uniform_from(1), sharp = rows_with_uniform_from(T),
                 at32 = rows_with_uniform_from(32), at33 = rows_with_uniform_from(33);
  const std::pair<const HeadRows*, bool> cases[] = {{&uniform, true}, {&sharp, false}, {&at32, true}, {&at33, false}};
  for (const auto& [rows, want_log] : cases) {
    st.view.heat_color = HeatColor::kAuto;
    build_heat_pixels(st, *rows, whole, T, T, px, nullptr, &log_used);
    EXPECT_EQ(log_used, want_log) << "uniform rows from "
                                  << (rows == &uniform ? 1
                                      : rows == &sharp ? T
                                      : rows == &at32  ? 32
                                                       : 33);
    st.view.heat_color = HeatColor::kLinear;
    build_heat_pixels(st, *rows, whole, T, T, px, nullptr, &log_used);
    EXPECT_FALSE(log_used);
    st.view.heat_color = HeatColor::kLog;
    build_heat_pixels(st, *rows, whole, T, T, px, nullptr, &log_used);
    EXPECT_TRUE(log_used);
  }
}

TEST(Settings, HeatColourFromOlderFilesAndBadValues) {
  const std::string dir = focal::test::make_temp_dir("app_settings_colour");
  std::string warn;
  std::ofstream(dir + "/old.json") << R"({"log_color": true, "window_w": 1300})";
  EXPECT_EQ(Settings::load(dir + "/old.json", &warn).heat_color, "log");  // ticked before the choice had three ways
  std::ofstream(dir + "/old_off.json") << R"({"log_color": false})";
  EXPECT_EQ(Settings::load(dir + "/old_off.json", &warn).heat_color, "auto");
  warn.clear();
  std::ofstream(dir + "/bad.json") << R"({"heat_color": "rainbow", "window_w": 1300})";
  const Settings bad = Settings::load(dir + "/bad.json", &warn);
  EXPECT_NE(warn.find("rainbow"), std::string::npos) << warn;
  EXPECT_EQ(bad.heat_color, "auto");
  EXPECT_EQ(bad.window_w, 1300);  // the other settings stay (all of them were dropped)
}
}  // namespace
}  // namespace focalscope
