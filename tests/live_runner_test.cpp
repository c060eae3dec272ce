// Interactive re-runs (the app's propagate path): Session::rerun_from and LiveRunner must give exactly what a full
// run gives — reference: capture_run / Session::forward from scratch on the same model (the same fp32 ops on the
// same inputs, so the tolerance is 0 for re-run layers and copies). TempSpec::row_multiplier against the row scales
// the forward reports; first_changed_layer on hand-made cases.
#include <gtest/gtest.h>

#include <cmath>

#include "focal/capture.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal/model_writer.h"
#include "test_util.h"

namespace focal {
namespace {

ModelConfig cfg(AttnMode mode) {
  ModelConfig c;
  c.vocab_size = 53;
  c.hidden = 32;
  c.intermediate = 48;
  c.n_layers = 4;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_head = 8;
  c.max_positions = 64;
  c.bos_id = 1;
  c.eos_id = 2;
  c.focal.mode = mode;
  if (mode == AttnMode::kLearned) {
    c.focal.has_tau = true;
    c.focal.tau_bias = true;
    c.focal.tau_min = 2.0f;
    c.focal.tau_max = 3.0f;
  }
  return c;
}

std::unique_ptr<Model> make(AttnMode mode) {
  const std::string dir = test::make_temp_dir("live");
  const ModelConfig c = cfg(mode);
  write_model_dir(dir, c, random_model_tensors(c, 11), "F32", "");
  return Model::load(dir);
}

std::vector<int32_t> ids(int n) {
  std::vector<int32_t> v(n);
  for (int i = 0; i < n; ++i) v[i] = (i * 17 + 5) % 53;
  v[0] = 1;
  return v;
}

// Bit for bit, on any CPU: a re-run executes the same layer code on the kept layer input (a copy of the fp32 values),
// with the same shapes (T) and thread count as the full run, so every GEMM and softmax sums in the same order.
void expect_same_run(const RunCapture& a, const RunCapture& b) {
  EXPECT_EQ(a.layers, b.layers);
  ASSERT_EQ(a.metrics.size(), b.metrics.size());
  for (size_t i = 0; i < a.metrics.size(); ++i)
    if (!(std::isnan(a.metrics[i]) && std::isnan(b.metrics[i]))) {
      ASSERT_EQ(a.metrics[i], b.metrics[i]) << "metric " << i;
    }
  EXPECT_EQ(a.row_scale, b.row_scale);
  EXPECT_EQ(a.probs, b.probs);
  EXPECT_EQ(a.scores, b.scores);
  EXPECT_EQ(a.topk_ids, b.topk_ids);
  EXPECT_EQ(a.topk_probs, b.topk_probs);
  EXPECT_EQ(a.topk_pieces, b.topk_pieces);
  const auto same_or_both_nan = [](const std::vector<float>& x, const std::vector<float>& y, const char* what) {
    ASSERT_EQ(x.size(), y.size()) << what;
    for (size_t i = 0; i < x.size(); ++i)
      if (!(std::isnan(x[i]) && std::isnan(y[i]))) { ASSERT_EQ(x[i], y[i]) << what << " " << i; }
  };
  same_or_both_nan(a.tau, b.tau, "tau");  // NaN in a layer whose every head an override sets
  same_or_both_nan(a.token_nll, b.token_nll, "token_nll");
  same_or_both_nan(a.induction, b.induction, "induction");
}

TEST(RerunFrom, EqualsAFullForwardWhenOnlyLaterLayersChanged) {
  auto m = make(AttnMode::kStandard);
  const auto x = ids(24);
  Session s(*m, 24);
  s.keep_layer_inputs(true);
  std::vector<float> lg0, lg1, ref;
  ASSERT_TRUE(s.forward(x.data(), 24, TempSpec::focal(0.5f), {}, nullptr, &lg0));
  TempSpec spec = TempSpec::focal(0.5f);
  spec.layer_temp[2] = 0.3f;
  ASSERT_EQ(spec.first_changed_layer(TempSpec::focal(0.5f), m->config()), 2);
  test::RecordingObserver rec(4, 4, 24);
  ASSERT_TRUE(s.rerun_from(2, x.data(), 24, spec, {}, &rec, &lg1));
  Session fresh(*m, 24);
  ASSERT_TRUE(fresh.forward(x.data(), 24, spec, {}, nullptr, &ref));
  EXPECT_EQ(lg1, ref);  // layers 2, 3 re-run on the kept input of layer 2, same T and threads: identical (above)
  EXPECT_NE(lg0, ref);  // and the change mattered
  EXPECT_EQ(s.n_past(), 24);
  EXPECT_TRUE(std::isnan(rec.metrics[0]));  // layers before 2 are not reported
}

// A budget smaller than every layer's input: only layers 0 and 2 of 4 are kept (stride 2), and the memory held is
// theirs; a re-run from layer 3 starts at 2 and still equals a full forward (the same layer code on the same kept
// input), from layer 1 at 0.
TEST(RerunFrom, KeptInputsWithinABudgetStartAtTheKeptLayerBelow) {
  auto m = make(AttnMode::kStandard);
  const ModelConfig& c = m->config();
  const auto x = ids(24);
  const size_t per_layer = (size_t)24 * c.hidden * sizeof(float);
  Session s(*m, 24);
  s.keep_layer_inputs(true, 2 * per_layer + 16);
  std::vector<float> lg, ref;
  ASSERT_TRUE(s.forward(x.data(), 24, TempSpec::focal(0.5f), {}, nullptr, &lg));
  EXPECT_EQ(s.kept_input_bytes(), 2 * per_layer);
  EXPECT_EQ(s.kept_layers(), 4);
  EXPECT_EQ(s.rerun_start(3), 2);
  EXPECT_EQ(s.rerun_start(2), 2);
  EXPECT_EQ(s.rerun_start(1), 0);
  EXPECT_EQ(s.rerun_start(4), 2);  // nothing changed: the last layer re-runs, from the kept layer below it
  for (int from : {3, 1}) {
    TempSpec spec = TempSpec::focal(0.5f);
    spec.layer_temp[from] = 0.3f;
    test::RecordingObserver rec(4, 4, 24);
    ASSERT_TRUE(s.rerun_from(from, x.data(), 24, spec, {}, &rec, &lg));
    Session fresh(*m, 24);
    ASSERT_TRUE(fresh.forward(x.data(), 24, spec, {}, nullptr, &ref));
    EXPECT_EQ(lg, ref) << "from " << from;
    const int start = from == 3 ? 2 : 0;
    EXPECT_FALSE(std::isnan(rec.metrics[(size_t)start * 4 * 24 * kNumRowMetrics])) << "layer " << start << " re-ran";
    if (start > 0) { EXPECT_TRUE(std::isnan(rec.metrics[0])); }
    EXPECT_EQ(s.kept_input_bytes(), 2 * per_layer);
    // Back to the base setting for the next case.
    ASSERT_TRUE(s.rerun_from(0, x.data(), 24, TempSpec::focal(0.5f), {}, nullptr, &lg));
  }
  // Without a budget every layer's input is kept.
  Session all(*m, 24);
  all.keep_layer_inputs(true);
  ASSERT_TRUE(all.forward(x.data(), 24, TempSpec::standard(), {}, nullptr, &lg));
  EXPECT_EQ(all.kept_input_bytes(), 4 * per_layer);
  EXPECT_EQ(all.rerun_start(3), 3);
}

// Other rows under the same setting (the app's head switch): rerun_layers redoes layers 1..2 of 4 and stops. The
// observer sees exactly those layers, with the rows of a full forward (bit for bit, as above), and the session
// stays as the completed run left it: every layer kept, so a later re-run from layer 3 equals a full forward of
// its setting. With a budget (stride 2) the range starts at the kept layer below (0 for 1).
TEST(RerunLayers, RunsOnlyTheAskedLayersAndKeepsTheSessionValid) {
  auto m = make(AttnMode::kFocal);
  const ModelConfig& c = m->config();
  const int T = 20;
  const auto x = ids(T);
  const TempSpec base = TempSpec::focal(0.5f);
  test::RecordingObserver ref(c.n_layers, c.n_heads, T);
  {
    Session fresh(*m, T);
    ASSERT_TRUE(fresh.forward(x.data(), T, base, {}, &ref, nullptr));
  }
  const size_t per_layer = (size_t)T * c.hidden * sizeof(float);
  for (const size_t budget : {size_t(0), 2 * per_layer + 16}) {
    Session s(*m, T, /*prefill_only=*/true);
    s.keep_layer_inputs(true, budget);
    ASSERT_TRUE(s.forward(x.data(), T, base, {}, nullptr, nullptr));
    test::RecordingObserver rec(c.n_layers, c.n_heads, T);
    ASSERT_TRUE(s.rerun_layers(1, 2, x.data(), T, base, {}, &rec));
    const int start = budget ? 0 : 1;
    const size_t per = (size_t)c.n_heads * T * kNumRowMetrics;
    for (int l = 0; l < c.n_layers; ++l)
      for (size_t i = 0; i < per; ++i) {
        const float got = rec.metrics[(size_t)l * per + i];
        if (l < start || l > 2) {
          ASSERT_TRUE(std::isnan(got)) << "layer " << l << " was not asked for";
        } else if (!std::isnan(ref.metrics[(size_t)l * per + i])) {
          ASSERT_EQ(got, ref.metrics[(size_t)l * per + i]) << "layer " << l << " entry " << i;
        }
      }
    EXPECT_EQ(s.kept_layers(), c.n_layers) << "budget " << budget;
    EXPECT_EQ(s.n_past(), T);
    TempSpec late = base;
    late.layer_temp[3] = 0.3f;
    std::vector<float> lg, lg_ref;
    ASSERT_TRUE(s.rerun_from(3, x.data(), T, late, {}, nullptr, &lg));
    Session fresh(*m, T);
    ASSERT_TRUE(fresh.forward(x.data(), T, late, {}, nullptr, &lg_ref));
    EXPECT_EQ(lg, lg_ref) << "budget " << budget;
    EXPECT_THROW(s.rerun_layers(2, 1, x.data(), T, base, {}, nullptr), Error);
    EXPECT_THROW(s.rerun_layers(0, c.n_layers, x.data(), T, base, {}, nullptr), Error);
  }
}

TEST(RerunFrom, RejectsOtherTokensOrNoKeptInputs) {
  auto m = make(AttnMode::kStandard);
  const auto x = ids(10);
  Session s(*m, 16);
  std::vector<float> lg;
  ASSERT_TRUE(s.forward(x.data(), 10, TempSpec::standard(), {}, nullptr, &lg));
  EXPECT_THROW(s.rerun_from(1, x.data(), 10, TempSpec::standard(), {}, nullptr, &lg), Error);  // not kept
  s.keep_layer_inputs(true);
  s.reset();
  ASSERT_TRUE(s.forward(x.data(), 10, TempSpec::standard(), {}, nullptr, &lg));
  auto y = x;
  y[3] = 7;
  EXPECT_THROW(s.rerun_from(1, y.data(), 10, TempSpec::standard(), {}, nullptr, &lg), Error);
  EXPECT_THROW(s.rerun_from(5, x.data(), 10, TempSpec::standard(), {}, nullptr, &lg), Error);
  EXPECT_EQ(s.kept_layers(), 4);
  // A re-run from layer 1 cancelled after that layer: only layers 0..1 are kept, later starts are refused.
  struct CancelAfterOne : ForwardObserver {
    bool cancelled() const override { return true; }
  } cancel;
  EXPECT_FALSE(s.rerun_from(1, x.data(), 10, TempSpec::focal(0.5f), {}, &cancel, &lg));
  EXPECT_EQ(s.kept_layers(), 1);
  EXPECT_THROW(s.rerun_from(2, x.data(), 10, TempSpec::standard(), {}, nullptr, &lg), Error);
  std::vector<float> ref;
  ASSERT_TRUE(s.rerun_from(1, x.data(), 10, TempSpec::standard(), {}, nullptr, &lg));
  Session fresh(*m, 16);
  ASSERT_TRUE(fresh.forward(x.data(), 10, TempSpec::standard(), {}, nullptr, &ref));
  EXPECT_EQ(lg, ref);
  EXPECT_EQ(s.kept_layers(), 4);
}

class LiveRunnerModes : public ::testing::TestWithParam<AttnMode> {};

TEST_P(LiveRunnerModes, EveryIncrementalRunEqualsCaptureRun) {
  auto m = make(GetParam());
  const auto x = ids(20);
  LiveRunner runner(*m);
  CaptureRequest req;
  req.layers = {1};
  TempSpec base = GetParam() == AttnMode::kLearned ? TempSpec::native(m->config()) : TempSpec::focal(0.6f);
  if (GetParam() == AttnMode::kSsmax) {
    base = TempSpec{};
    base.mode = AttnMode::kSsmax;
  }
  RunCapture prev, out;
  int first = -1;
  ASSERT_TRUE(runner.run(x, base, req, "r", nullptr, &prev, {}, {}, &first));
  EXPECT_EQ(first, 0);
  expect_same_run(prev, capture_run(*m, x, base, req, "r"));

  // A head override in layer 3: only layer 3 re-runs.
  TempSpec s2 = base;
  s2.head_temp[{3, 1}] = 0.25f;
  ASSERT_TRUE(runner.run(x, s2, req, "r", &prev, &out, {}, {}, &first));
  EXPECT_EQ(first, 3);
  expect_same_run(out, capture_run(*m, x, s2, req, "r"));
  prev = out;

  // Another stored layer, same spec: only that layer re-runs; the later layers' records, the next-token arrays
  // and the loss are the previous run's, and all of it equals a full capture.
  // One run from prev: it re-ran layers want_first..want_last and equals a full capture; it becomes prev.
  const auto step = [&](const TempSpec& spec, const CaptureRequest& r, int want_first, int want_last) {
    int last = -1;
    ASSERT_TRUE(runner.run(x, spec, r, "r", &prev, &out, {}, {}, &first, nullptr, &last));
    EXPECT_EQ(first, want_first);
    EXPECT_EQ(last, want_last);
    expect_same_run(out, capture_run(*m, x, spec, r, "r"));
    prev = out;
  };
  CaptureRequest req2 = req;
  req2.layers = {2};
  step(s2, req2, 2, 2);

  // Another head of that layer (the app's head switch past its row budget), then a change in layer 3 after it:
  // layer 3's kept input is still valid, so that re-runs layer 3 alone.
  CaptureRequest req3 = req2;
  req3.heads = {3};
  step(s2, req3, 2, 2);
  TempSpec s2b = s2;
  s2b.layer_temp[3] = 0.45f;
  step(s2b, req3, 3, 3);
  step(s2, req2, 2, 3);  // back to s2, every head: layer 3's setting changed, so it re-runs too

  // A layer-0 override: everything re-runs.
  TempSpec s3 = s2;
  s3.layer_temp[0] = 0.7f;
  ASSERT_TRUE(runner.run(x, s3, req2, "r", &prev, &out, {}, {}, &first));
  EXPECT_EQ(first, 0);
  expect_same_run(out, capture_run(*m, x, s3, req2, "r"));
}

INSTANTIATE_TEST_SUITE_P(Modes, LiveRunnerModes,
                         ::testing::Values(AttnMode::kFocal, AttnMode::kLearned, AttnMode::kSsmax));

// Induction score: every row of every head against a naive double-precision sum over the stored probabilities of
// the keys right after earlier occurrences of the row's token (found here by a direct scan of the ids). Tolerance
// 1e-6 (float sum of at most a few probabilities). The incremental LiveRunner keeps it for re-run layers too.
TEST(Induction, CaptureRunAndLiveRunnerMatchANaiveSumOverStoredRows) {
  auto m = make(AttnMode::kFocal);
  std::vector<int32_t> x = ids(12);
  const std::vector<int32_t> half(x.begin() + 1, x.end());
  x.insert(x.end(), half.begin(), half.end());  // a repeated sequence: every second-half token occurred before
  const int T = (int)x.size(), L = m->config().n_layers, H = m->config().n_heads;
  CaptureRequest req;
  req.induction = true;
  const TempSpec spec = TempSpec::focal(0.5f);
  const RunCapture run = capture_run(*m, x, spec, req, "r");
  ASSERT_EQ(run.induction.size(), (size_t)L * H * T);
  int with_targets = 0;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      double acc = 0.0;
      int n = 0;
      for (int i = 0; i < T; ++i) {
        const float* p = &run.probs[stored_row_offset(run, l, h, i, T)];
        double ref = 0.0;
        bool any = false;
        for (int j = 0; j + 1 < i; ++j)
          if (x[j] == x[i]) ref += p[j + 1], any = true;
        const float got = run.induction[((size_t)l * H + h) * T + i];
        if (!any) {
          EXPECT_TRUE(std::isnan(got)) << l << " " << h << " " << i;
          continue;
        }
        ++with_targets;
        EXPECT_NEAR(got, ref, 1e-6) << l << " " << h << " " << i;
        acc += ref, ++n;
      }
      EXPECT_NEAR(head_induction_score(run, H, T, l, h), acc / n, 1e-6);
    }
  EXPECT_GE(with_targets, L * H * 11);
  // Without the request nothing is computed.
  EXPECT_TRUE(capture_run(*m, x, spec, CaptureRequest{}, "r").induction.empty());
  EXPECT_TRUE(std::isnan(head_induction_score(capture_run(*m, x, spec, CaptureRequest{}, "r"), H, T, 0, 0)));
  // The live runner, re-running only layer 3, equals a full capture bit for bit (as in expect_same_run).
  LiveRunner runner(*m);
  RunCapture prev, out;
  ASSERT_TRUE(runner.run(x, spec, req, "r", nullptr, &prev, {}, {}, nullptr));
  TempSpec s2 = spec;
  s2.layer_temp[3] = 0.3f;
  int first = -1;
  ASSERT_TRUE(runner.run(x, s2, req, "r", &prev, &out, {}, {}, &first));
  EXPECT_EQ(first, 3);
  const RunCapture full = capture_run(*m, x, s2, req, "r");
  ASSERT_EQ(out.induction.size(), full.induction.size());
  for (size_t i = 0; i < full.induction.size(); ++i)
    if (!std::isnan(full.induction[i])) { ASSERT_EQ(out.induction[i], full.induction[i]) << i; }
}

TEST(LiveRunner, CancelledRunLeavesOutputAndStartsOverNextTime) {
  auto m = make(AttnMode::kStandard);
  const auto x = ids(16);
  LiveRunner runner(*m);
  CaptureRequest req;
  RunCapture prev, out;
  ASSERT_TRUE(runner.run(x, TempSpec::focal(0.5f), req, "r", nullptr, &prev));
  int calls = 0;
  out.name = "untouched";
  EXPECT_FALSE(runner.run(x, TempSpec::focal(0.4f), req, "r", &prev, &out, [&] { return ++calls >= 2; }));
  EXPECT_EQ(out.name, "untouched");
  int first = -1;
  TempSpec s = TempSpec::focal(0.5f);
  s.layer_temp[3] = 0.9f;
  ASSERT_TRUE(runner.run(x, s, req, "r", &prev, &out, {}, {}, &first));
  EXPECT_EQ(first, 0);  // the cancelled run started at layer 0 (a global t change): it changed every layer
  expect_same_run(out, capture_run(*m, x, s, req, "r"));
}

// Runs into the recycled buffers of an unneeded result (the app's stale run): a full run and a partial re-run give
// exactly capture_run's result, although the recycled rows hold stale values (7 everywhere, tails included), for
// both a recycled run of the same shape and one of another shape (more layers stored, no scores); a recycled
// null-sized run, prev, or out itself are all accepted.
TEST(LiveRunner, RecycledBuffersGiveTheSameRuns) {
  auto m = make(AttnMode::kFocal);
  const auto x = ids(16);
  LiveRunner runner(*m);
  CaptureRequest req;
  req.layers = {1, 3};
  req.store_scores = true;
  const TempSpec base = TempSpec::focal(0.5f);
  RunCapture prev, out;
  ASSERT_TRUE(runner.run(x, base, req, "r", nullptr, &prev));
  auto stale = [](RunCapture r) {
    for (auto* v : {&r.probs, &r.scores, &r.metrics, &r.row_scale, &r.induction}) std::fill(v->begin(), v->end(), 7.0f);
    return r;
  };
  RunCapture junk = stale(prev);
  TempSpec s1 = base;
  s1.layer_temp[2] = 0.3f;  // a re-run from layer 2: layer 1's rows come from prev, layer 3's from the forward
  int first = -1;
  ASSERT_TRUE(runner.run(x, s1, req, "r", &prev, &out, {}, {}, &first, &junk));
  EXPECT_EQ(first, 2);
  EXPECT_TRUE(junk.probs.empty()) << "the recycled buffers were taken";
  expect_same_run(out, capture_run(*m, x, s1, req, "r"));
  // Another shape: the recycled run stored one layer, no scores, and holds stale values.
  CaptureRequest small = req;
  small.layers = {0};
  small.store_scores = false;
  RunCapture other;
  ASSERT_TRUE(LiveRunner(*m).run(x, base, small, "o", nullptr, &other));
  RunCapture junk2 = stale(other);
  prev = out;
  const TempSpec s2 = TempSpec::focal(0.45f);  // a global change: every layer re-runs
  ASSERT_TRUE(runner.run(x, s2, req, "r", &prev, &out, {}, {}, &first, &junk2));
  EXPECT_EQ(first, 0);
  expect_same_run(out, capture_run(*m, x, s2, req, "r"));
  // prev or out as the recycled run: ignored
  prev = out;
  TempSpec s3 = s2;
  s3.layer_temp[3] = 0.6f;
  ASSERT_TRUE(runner.run(x, s3, req, "r", &prev, &out, {}, {}, &first, &prev));
  expect_same_run(out, capture_run(*m, x, s3, req, "r"));
  EXPECT_FALSE(prev.probs.empty());
}

// Dragging a per-layer slider cancels runs that started at that layer: the layers before it stay those of the last
// completed run, so the next run still starts there (not at 0), and is exact.
TEST(LiveRunner, CancelledRerunKeepsTheLayersBeforeItsStart) {
  auto m = make(AttnMode::kFocal);
  const auto x = ids(16);
  LiveRunner runner(*m);
  CaptureRequest req;
  req.layers = {3};
  RunCapture prev, out;
  const TempSpec base = TempSpec::focal(0.5f);
  ASSERT_TRUE(runner.run(x, base, req, "r", nullptr, &prev));
  TempSpec s1 = base;
  s1.layer_temp[2] = 0.3f;  // starts at layer 2; cancelled after it
  int calls = 0;
  EXPECT_FALSE(runner.run(x, s1, req, "r", &prev, &out, [&] { return ++calls >= 1; }));
  EXPECT_EQ(calls, 1);
  int first = -1;
  TempSpec s2 = base;
  s2.layer_temp[2] = 0.35f;  // the slider's next value: layer 2 again
  ASSERT_TRUE(runner.run(x, s2, req, "r", &prev, &out, {}, {}, &first));
  EXPECT_EQ(first, 2);
  expect_same_run(out, capture_run(*m, x, s2, req, "r"));
  prev = out;
  // A run from layer 1 cancelled after layers 1 and 2 has overwritten the kept input of layers 2 and 3 with its own
  // setting. A change at layer 3 alone (against the last completed run) must then start at 1, not 3: starting at 3
  // would read the cancelled run's input and differ from capture_run.
  TempSpec s3 = s2;
  s3.layer_temp[1] = 0.2f;
  calls = 0;
  EXPECT_FALSE(runner.run(x, s3, req, "r", &prev, &out, [&] { return ++calls >= 2; }));
  EXPECT_EQ(calls, 2);
  TempSpec s4 = s2;
  s4.layer_temp[3] = 0.8f;
  ASSERT_EQ(s4.first_changed_layer(s2, m->config()), 3);
  ASSERT_TRUE(runner.run(x, s4, req, "r", &prev, &out, {}, {}, &first));
  EXPECT_EQ(first, 1);
  expect_same_run(out, capture_run(*m, x, s4, req, "r"));
}

TEST(TempSpecRowMultiplier, MatchesTheForwardsRowScales) {
  for (AttnMode mode : {AttnMode::kStandard, AttnMode::kFocal, AttnMode::kLearned, AttnMode::kSsmax}) {
    auto m = make(mode == AttnMode::kLearned ? AttnMode::kLearned : AttnMode::kStandard);
    const ModelConfig& c = m->config();
    TempSpec s;
    s.mode = mode;
    s.focal_temp = 0.45f;
    s.tau_scale = 0.8f;
    s.ssmax_s = 0.7f;
    s.layer_temp[1] = 0.6f;
    s.head_temp[{2, 3}] = 0.3f;
    const auto x = ids(12);
    CaptureRequest req;
    req.store_probs = req.store_scores = false;
    const RunCapture r = capture_run(*m, x, s, req, "r");
    for (int l = 0; l < c.n_layers; ++l)
      for (int h = 0; h < c.n_heads; ++h)
        for (int i = 0; i < 12; ++i) {
          const float tau_clipped = r.tau.empty() ? 1.0f : r.tau[(size_t)l * 12 + i] / s.tau_scale;
          const float want = r.row_scale[((size_t)l * c.n_heads + h) * 12 + i];
          EXPECT_NEAR(s.row_multiplier(c, l, h, i + 1, tau_clipped), want, 1e-6f * std::fabs(want))
              << "mode " << (int)mode << " layer " << l << " head " << h << " row " << i;
        }
  }
}

TEST(TempSpecFirstChangedLayer, HandMadeCases) {
  const ModelConfig c = cfg(AttnMode::kLearned);
  TempSpec a = TempSpec::focal(0.4f), b = a;
  EXPECT_EQ(a.first_changed_layer(b, c), 4);  // identical
  b.head_temp[{2, 1}] = 0.4f;                 // an override equal in value is still a different spec at layer 2
  EXPECT_EQ(a.first_changed_layer(b, c), 2);
  b = a;
  b.focal_temp = 0.5f;
  EXPECT_EQ(a.first_changed_layer(b, c), 0);
  for (int l = 0; l < 4; ++l) b.layer_temp[l] = 0.3f;  // every layer overridden: the global t no longer matters
  a.layer_temp = b.layer_temp;
  EXPECT_EQ(a.first_changed_layer(b, c), 4);
  TempSpec s = TempSpec::standard(), f = TempSpec::focal(1.0f);
  EXPECT_EQ(s.first_changed_layer(f, c), 0);  // another mode counts as changed (conservative)
  TempSpec la = TempSpec::native(c), lb = la;
  lb.tau_scale = 0.9f;
  EXPECT_EQ(la.first_changed_layer(lb, c), 0);
}

}  // namespace
}  // namespace focal
