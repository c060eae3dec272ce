// Tests of the runtime's row metrics, softmax re-tempering and divergences (runtime/src/metrics.cpp) on small rows
// whose values are computed by hand in the comments.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "focal/capture.h"
#include "focal/metrics.h"
#include "focal/model.h"

namespace focal {
namespace {

const double kLn2 = std::log(2.0);

std::vector<float> metrics_of(const std::vector<float>& p, int topk_k, const std::vector<int32_t>& relevant) {
  std::vector<float> m(kNumRowMetrics, -1.0f);
  row_metrics(p.data(), (int)p.size(), topk_k, relevant.empty() ? nullptr : relevant.data(), (int)relevant.size(),
              m.data());
  return m;
}

// Tolerance for every hand-computed value below: 1e-6 absolute (fp32 logs and sums of <= 4 entries round at
// ~1e-7), unless a line says otherwise.
constexpr double kTol = 1e-6;

TEST(RowMetrics, HalfQuarterQuarter) {
  // p = {1/2, 1/4, 1/4}:
  //   H = 1/2 ln 2 + 2 * 1/4 ln 4 = 1.5 ln 2 = 1.0397208 nats; normalised H / ln 3 = 0.9463946;
  //   eff support e^H = 2^1.5 = 2.8284271; max 0.5; top-2 mass 0.75;
  //   tail = sum p [p < 1/3] = 0.25 + 0.25 = 0.5; sink p_0 = 0.5; relevant {2} -> R = 0.25.
  const std::vector<float> p = {0.5f, 0.25f, 0.25f};
  const auto m = metrics_of(p, 2, {2});
  EXPECT_NEAR(m[kEntropyNats], 1.5 * kLn2, kTol);
  EXPECT_NEAR(m[kEntropyNats], 1.0397208, kTol);
  EXPECT_NEAR(m[kEntropyNorm], 1.5 * kLn2 / std::log(3.0), kTol);
  EXPECT_NEAR(m[kEffSupport], std::pow(2.0, 1.5), kTol * 3);  // relative 1e-6 of 2.83
  EXPECT_NEAR(m[kMaxProb], 0.5, kTol);
  EXPECT_NEAR(m[kTopkMass], 0.75, kTol);
  EXPECT_NEAR(m[kTailMass], 0.5, kTol);
  EXPECT_NEAR(m[kSinkMass], 0.5, kTol);
  EXPECT_NEAR(m[kRelevantMass], 0.25, kTol);
  // noise = 1 - R = 0.75, SNR = R / (1 - R) = 1/3.
  EXPECT_NEAR(noise_mass(m[kRelevantMass]), 0.75, kTol);
  EXPECT_NEAR(relevant_snr(m[kRelevantMass]), 1.0 / 3.0, kTol);
}

TEST(RowMetrics, RelevantMassOnlyCountsVisibleKeys) {
  const std::vector<float> p = {0.5f, 0.25f, 0.25f};
  // Key 5 is not among the 3 visible keys -> no relevant key visible -> NaN (and noise/SNR propagate NaN).
  const auto m5 = metrics_of(p, 2, {5});
  EXPECT_TRUE(std::isnan(m5[kRelevantMass])) << m5[kRelevantMass];
  EXPECT_TRUE(std::isnan(noise_mass(m5[kRelevantMass])));
  EXPECT_TRUE(std::isnan(relevant_snr(m5[kRelevantMass])));
  // No relevant keys given at all -> NaN.
  const auto m_none = metrics_of(p, 2, {});
  EXPECT_TRUE(std::isnan(m_none[kRelevantMass])) << m_none[kRelevantMass];
  // Mixed: {0, 5} -> only key 0 counts, R = 0.5; {1, 2} -> 0.5; {0, 1, 2} -> 1 (SNR inf).
  EXPECT_NEAR(metrics_of(p, 2, {0, 5})[kRelevantMass], 0.5, kTol);
  EXPECT_NEAR(metrics_of(p, 2, {1, 2})[kRelevantMass], 0.5, kTol);
  const float r_all = metrics_of(p, 2, {0, 1, 2})[kRelevantMass];
  EXPECT_NEAR(r_all, 1.0, kTol);
  EXPECT_EQ(relevant_snr(1.0f), INFINITY);
  EXPECT_EQ(noise_mass(1.0f), 0.0f);
}

TEST(RowMetrics, OneHotRow) {
  // p = {0, 0, 1, 0}: H = 0, normalised 0, eff support 1, max 1, top-2 mass 1, tail = mass of the entries below
  // 1/4 = 0 + 0 + 0 = 0, sink p_0 = 0, relevant {2} -> 1, relevant {0} -> 0.
  const std::vector<float> p = {0.0f, 0.0f, 1.0f, 0.0f};
  const auto m = metrics_of(p, 2, {2});
  EXPECT_NEAR(m[kEntropyNats], 0.0, kTol);
  EXPECT_GE(m[kEntropyNats], 0.0f);
  EXPECT_NEAR(m[kEntropyNorm], 0.0, kTol);
  EXPECT_NEAR(m[kEffSupport], 1.0, kTol);
  EXPECT_EQ(m[kMaxProb], 1.0f);
  EXPECT_EQ(m[kTopkMass], 1.0f);
  EXPECT_EQ(m[kTailMass], 0.0f);
  EXPECT_EQ(m[kSinkMass], 0.0f);
  EXPECT_EQ(m[kRelevantMass], 1.0f);
  EXPECT_EQ(metrics_of(p, 2, {0})[kRelevantMass], 0.0f);
}

TEST(RowMetrics, UniformRow) {
  // p = 1/4 each: H = ln 4 = 1.3862944, normalised 1, eff support 4, max 0.25, top-2 0.5, tail 0 (0.25 < 0.25 is
  // false), sink 0.25.
  const std::vector<float> p(4, 0.25f);
  const auto m = metrics_of(p, 2, {});
  EXPECT_NEAR(m[kEntropyNats], std::log(4.0), kTol);
  EXPECT_NEAR(m[kEntropyNorm], 1.0, kTol);
  EXPECT_NEAR(m[kEffSupport], 4.0, 4 * kTol);  // relative 1e-6
  EXPECT_NEAR(m[kMaxProb], 0.25, kTol);
  EXPECT_NEAR(m[kTopkMass], 0.5, kTol);
  EXPECT_EQ(m[kTailMass], 0.0f);
  EXPECT_NEAR(m[kSinkMass], 0.25, kTol);
}

TEST(RowMetrics, TopkLargerThanRowSumsEverything) {
  // k = 5 > n = 3: top-k mass is the whole row, 1.
  const auto m = metrics_of({0.5f, 0.25f, 0.25f}, 5, {});
  EXPECT_NEAR(m[kTopkMass], 1.0, kTol);
  // k = 1: the max.
  EXPECT_NEAR(metrics_of({0.2f, 0.7f, 0.1f}, 1, {})[kTopkMass], 0.7, kTol);
}

TEST(RowMetrics, SingleKeyRow) {
  // n = 1: p = {1}; H = 0 and the normalised entropy is defined as 0 (ln 1 = 0 would divide by zero); eff support
  // 1, max 1, top-k 1, tail 0, sink 1.
  const auto m = metrics_of({1.0f}, 5, {0});
  EXPECT_EQ(m[kEntropyNorm], 0.0f);
  EXPECT_NEAR(m[kEntropyNats], 0.0, kTol);
  EXPECT_NEAR(m[kEffSupport], 1.0, kTol);
  EXPECT_EQ(m[kMaxProb], 1.0f);
  EXPECT_EQ(m[kTopkMass], 1.0f);
  EXPECT_EQ(m[kTailMass], 0.0f);
  EXPECT_EQ(m[kSinkMass], 1.0f);
  EXPECT_EQ(m[kRelevantMass], 1.0f);
}

TEST(SoftmaxScaled, RetempersRawScores) {
  // raw = {1.0, 0.5, -0.2}, focal temperature t = 0.5 -> scale 1/t = 2 -> logits {2, 1, -0.4}.
  // Hand-computed: e^2 = 7.3890561, e^1 = 2.7182818, e^-0.4 = 0.6703200, sum 10.7776579;
  // p = {0.6855901, 0.2522145, 0.0621953}.
  const std::vector<float> raw = {1.0f, 0.5f, -0.2f};
  const float t = 0.5f;
  std::vector<float> p(3, NAN), m(kNumRowMetrics, NAN);
  const int32_t rel[] = {1};
  softmax_scaled(raw.data(), 3, 1.0f / t, p.data(), m.data(), 2, rel, 1);
  const double ref[] = {0.6855901, 0.2522145, 0.0621953};
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(p[j], ref[j], kTol) << "j=" << j;
  // The same with the closed form e^(raw/t) / sum, in double.
  double z = 0.0;
  for (float r : raw) z += std::exp(r / 0.5);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(p[j], std::exp(raw[j] / 0.5) / z, kTol) << "j=" << j;
  // Metrics filled from the same row: H = -sum p ln p = 0.7789586 (computed here in double), max p_0, top-2 =
  // p_0 + p_1 = 0.9378046, tail = p_1 + p_2 (both < 1/3) = 0.3144098, sink p_0, relevant {1} -> p_1.
  double h = 0.0;
  for (double v : ref) h -= v * std::log(v);
  EXPECT_NEAR(m[kEntropyNats], h, 2e-6);  // 7-digit literals: 1e-6 error on the reference itself
  EXPECT_NEAR(m[kEntropyNorm], h / std::log(3.0), 2e-6);
  EXPECT_NEAR(m[kEffSupport], std::exp(h), 1e-5);
  EXPECT_NEAR(m[kMaxProb], ref[0], kTol);
  EXPECT_NEAR(m[kTopkMass], 0.9378046, kTol);
  EXPECT_NEAR(m[kTailMass], 0.3144098, kTol);
  EXPECT_NEAR(m[kSinkMass], ref[0], kTol);
  EXPECT_NEAR(m[kRelevantMass], ref[1], kTol);
  // metrics omitted (default null): probabilities only, same values.
  std::vector<float> p2(3, NAN);
  softmax_scaled(raw.data(), 3, 1.0f / t, p2.data());
  for (int j = 0; j < 3; ++j) EXPECT_EQ(p2[j], p[j]);
}

TEST(SoftmaxScaled, ColdTemperatureStaysFinite) {
  // t = 0.01 on raw scores of +-50: logits +-5000. Hand-computed: the two raw = 50 entries share the mass, 0.5 each;
  // the others are e^-10000 (raw -50) and e^-5000 (raw 0) of them, 0 in fp32. H = ln 2.
  const std::vector<float> raw = {50.0f, -50.0f, 50.0f, 0.0f};
  std::vector<float> p(4, NAN), m(kNumRowMetrics, NAN);
  softmax_scaled(raw.data(), 4, 1.0f / 0.01f, p.data(), m.data());
  EXPECT_NEAR(p[0], 0.5, kTol);
  EXPECT_NEAR(p[2], 0.5, kTol);
  // e^-5000 and e^-10000 relative to the winners: zero to any fp32 purpose; tolerance 1e-30 absolute (an
  // implementation may flush such terms to 0 or to the bottom of the normal range, ~1e-38).
  EXPECT_NEAR(p[1], 0.0, 1e-30);
  EXPECT_NEAR(p[3], 0.0, 1e-30);
  for (int k = 0; k < kRelevantMass; ++k) EXPECT_TRUE(std::isfinite(m[k])) << "metric " << k;
  EXPECT_NEAR(m[kEntropyNats], kLn2, kTol);
}

TEST(Divergence, HandComputedKlAndJs) {
  // p = {0.5, 0.5}, q = {0.9, 0.1}:
  //   KL(p||q) = 0.5 ln(0.5/0.9) + 0.5 ln(0.5/0.1) = 0.5108256
  //   KL(q||p) = 0.9 ln(0.9/0.5) + 0.1 ln(0.1/0.5) = 0.3680642
  //   JS = 1/2 KL(p||m) + 1/2 KL(q||m), m = {0.7, 0.3}, = 0.1017492
  // Tolerance 1e-6: 0.9f and 0.1f differ from 0.9 and 0.1 by ~1e-8 relative.
  const float p[] = {0.5f, 0.5f}, q[] = {0.9f, 0.1f};
  const double kl_pq = 0.5 * std::log(0.5 / 0.9) + 0.5 * std::log(0.5 / 0.1);
  EXPECT_NEAR(kl_divergence(p, q, 2), kl_pq, kTol);
  EXPECT_NEAR(kl_divergence(p, q, 2), 0.5108256, kTol);
  EXPECT_NEAR(kl_divergence(q, p, 2), 0.9 * std::log(0.9 / 0.5) + 0.1 * std::log(0.1 / 0.5), kTol);
  const double js = 0.5 * (0.5 * std::log(0.5 / 0.7) + 0.5 * std::log(0.5 / 0.3)) +
                    0.5 * (0.9 * std::log(0.9 / 0.7) + 0.1 * std::log(0.1 / 0.3));
  EXPECT_NEAR(js_divergence(p, q, 2), js, kTol);
  EXPECT_NEAR(js_divergence(p, q, 2), 0.1017492, kTol);
  EXPECT_NEAR(js_divergence(q, p, 2), js, kTol);  // symmetric
}

TEST(Divergence, IdentityBoundsAndDisjointSupports) {
  const float p[] = {0.2f, 0.3f, 0.5f};
  EXPECT_EQ(kl_divergence(p, p, 3), 0.0);  // KL(p||p) = 0 exactly: every term is p ln(p/p) = 0
  EXPECT_EQ(js_divergence(p, p, 3), 0.0);
  // q_j = 0 where p_j > 0: a softmax probability that underflowed fp32, taken at FLT_MIN (ln FLT_MIN = -87.336544,
  // by hand: ln 2^-126): KL(a || b) = 0.5 ln(0.5 / 1) + 0.5 (ln 0.5 + 87.336544), finite (it was +inf); the reverse
  // direction skips the p_j = 0 term.
  const double ln_min = -126.0 * std::log(2.0);
  const float a[] = {0.5f, 0.5f}, b[] = {1.0f, 0.0f};
  EXPECT_NEAR(kl_divergence(a, b, 2), 0.5 * std::log(0.5) + 0.5 * (std::log(0.5) - ln_min), kTol);
  EXPECT_NEAR(kl_divergence(b, a, 2), std::log(2.0), kTol);  // 1 * ln(1/0.5)
  // Disjoint supports: JS = ln 2 (each half contributes 1/2 * 1 * ln(1/0.5)).
  const float c[] = {0.0f, 1.0f};
  EXPECT_NEAR(js_divergence(b, c, 2), kLn2, kTol);
  EXPECT_NEAR(kl_divergence(b, c, 2), 0.0 - ln_min, kTol);
  // A tail key that underflows in the sharper run where the other has 2.5e-16 (standard against focal t = 0.4 on the
  // bundled model): a term of ~1.3e-14, not +inf.
  const float s[] = {0.9f, 0.1f - 2.5e-16f, 2.5e-16f}, f[] = {0.95f, 0.05f, 0.0f};
  const double want = 0.9 * std::log(0.9 / 0.95) + (double)s[1] * std::log((double)s[1] / 0.05) +
                      2.5e-16 * (std::log(2.5e-16) - ln_min);
  EXPECT_NEAR(kl_divergence(s, f, 3), want, kTol);
  // Another floor for rows that went through fp16 (a 0 there is anything below 2^-25), and any q below the floor is
  // taken at it: a denormal 1e-40 adds no more than a 0 (the term is a lower bound either way).
  const double ln_fp16 = -25.0 * std::log(2.0);
  EXPECT_NEAR(kl_divergence(a, b, 2, kFp16ProbFloor), 0.5 * std::log(0.5) + 0.5 * (std::log(0.5) - ln_fp16), kTol);
  const float d[] = {1.0f, 1e-40f};
  EXPECT_DOUBLE_EQ(kl_divergence(a, d, 2), kl_divergence(a, b, 2));
  // Random distributions: JS symmetric (to 1e-12, double sums of the same terms) and within [0, ln 2].
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> x(6), y(6);
    float sx = 0, sy = 0;
    for (int j = 0; j < 6; ++j) {
      sx += x[j] = u(rng);
      sy += y[j] = u(rng);
    }
    for (int j = 0; j < 6; ++j) {
      x[j] /= sx;
      y[j] /= sy;
    }
    const double j1 = js_divergence(x.data(), y.data(), 6), j2 = js_divergence(y.data(), x.data(), 6);
    EXPECT_NEAR(j1, j2, 1e-12);
    EXPECT_GE(j1, 0.0);
    EXPECT_LE(j1, kLn2 + 1e-12);
    EXPECT_GE(kl_divergence(x.data(), y.data(), 6), 0.0);
  }
}

TEST(RowMetricName, EveryIndexAndOutOfRange) {
  const char* expected[] = {"entropy_nats", "entropy_norm", "eff_support", "max_prob",
                            "topk_mass",    "tail_mass",    "sink_mass",   "relevant_mass"};
  static_assert(sizeof(expected) / sizeof(expected[0]) == kNumRowMetrics, "one name per metric");
  for (int m = 0; m < kNumRowMetrics; ++m) EXPECT_EQ(std::string(row_metric_name(m)), expected[m]) << "index " << m;
  EXPECT_EQ(std::string(row_metric_name(kEntropyNats)), "entropy_nats");
  EXPECT_EQ(std::string(row_metric_name(kRelevantMass)), "relevant_mass");
  EXPECT_EQ(std::string(row_metric_name(-1)), "unknown");
  EXPECT_EQ(std::string(row_metric_name(kNumRowMetrics)), "unknown");
  EXPECT_EQ(std::string(row_metric_name(1000)), "unknown");
}

}  // namespace

// Induction targets by hand: ids 5 7 9 5 7 9 5. Row 3 (5) -> key 1 (after the 5 at 0); row 4 (7) -> key 2; row 5
// (9) -> key 3; row 6 (5) -> keys 1 and 4; rows 0-2 have none. Row 1 of 5 5 has none (key 1 would be the row
// itself). The mass is the sum over those keys, NaN without any.
TEST(Induction, TargetsAndMassByHand) {
  const auto t = induction_targets({5, 7, 9, 5, 7, 9, 5});
  ASSERT_EQ(t.size(), 7u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(t[i].empty()) << i;
  EXPECT_EQ(t[3], std::vector<int>{1});
  EXPECT_EQ(t[4], std::vector<int>{2});
  EXPECT_EQ(t[5], std::vector<int>{3});
  EXPECT_EQ(t[6], (std::vector<int>{1, 4}));
  EXPECT_TRUE(induction_targets({5, 5})[1].empty());
  EXPECT_EQ(induction_targets({5, 6, 5})[2], std::vector<int>{1});
  const float p[7] = {0.1f, 0.2f, 0.05f, 0.05f, 0.4f, 0.1f, 0.1f};
  EXPECT_FLOAT_EQ(induction_mass(p, t[6]), 0.6f);
  EXPECT_TRUE(std::isnan(induction_mass(p, t[0])));
}

// compare_runs on rows read from an fp16 capture (every value an fp16 value) floors a 0 at 2^-25, what fp16 rounds to
// 0; fp32 rows keep FLT_MIN. By hand: row 1 of a is (0.5, 0.5), of b (1, 0).
TEST(Divergence, CompareRunsFloorsByTheRowsPrecision) {
  CaptureFile f;
  f.n_layers = 1;
  f.n_heads = 1;
  f.token_ids = {1, 2};
  for (const char* name : {"a", "b"}) {
    RunCapture r;
    r.name = name;
    r.layers = {0};
    r.heads = {0};
    r.queries = {0, 1};
    r.probs = std::string(name) == "a" ? std::vector<float>{1.0f, 0.0f, 0.5f, 0.5f}
                                       : std::vector<float>{1.0f, 0.0f, 1.0f, 0.0f};
    f.runs.push_back(r);
  }
  Comparison c = compare_runs(f, "a", "b");
  ASSERT_EQ(c.kl.size(), 2u);
  EXPECT_NEAR(c.kl[0], 0.0, 1e-7);
  EXPECT_NEAR(c.kl[1], 0.5 * std::log(0.5) + 0.5 * (std::log(0.5) + 25.0 * std::log(2.0)), 1e-6);
  f.runs[1].probs[2] = 0.99999994f;  // not an fp16 value: fp32 rows
  f.runs[1].probs[3] = 0.0f;
  c = compare_runs(f, "a", "b");
  EXPECT_NEAR(c.kl[1], 0.5 * std::log(0.5 / 0.99999994) + 0.5 * (std::log(0.5) + 126.0 * std::log(2.0)), 1e-5);
}

}  // namespace focal
