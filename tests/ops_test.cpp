// Tests of the CPU reference ops (kernels/src/ops_cpu.cpp) and the shared per-row math (shared_math.h): every op is
// checked against a naive double-precision implementation written here, with the tolerance stated next to it.
#include <cpuid.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <immintrin.h>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "focal_kernels/ops.h"
#include "focal_kernels/shared_math.h"
#include "softmax_simd.h"

namespace focal::ops {
namespace {

constexpr double kEps32 = 1.0 / (1 << 24);  // unit roundoff of fp32 (2^-24)

std::vector<float> random_vec(size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// ---------------------------------------------------------------------------------------------------------------
// Double-precision references.

// y[m, n] = x[m, k] . w[n, k]^T; also returns sum_k |x||w| per output (for the error bound).
void ref_matmul_xwt(const float* x, const float* w, int m, int n, int k, std::vector<double>& y,
                    std::vector<double>& abs_sum) {
  y.assign((size_t)m * n, 0.0);
  abs_sum.assign((size_t)m * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0.0, a = 0.0;
      for (int l = 0; l < k; ++l) {
        s += (double)x[(size_t)i * k + l] * (double)w[(size_t)j * k + l];
        a += std::fabs((double)x[(size_t)i * k + l] * (double)w[(size_t)j * k + l]);
      }
      y[(size_t)i * n + j] = s;
      abs_sum[(size_t)i * n + j] = a;
    }
}

std::vector<double> ref_softmax(const std::vector<double>& logits) {
  const double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double z = 0.0;
  for (size_t j = 0; j < logits.size(); ++j) z += (p[j] = std::exp(logits[j] - mx));
  for (auto& v : p) v /= z;
  return p;
}

// All eight row metrics from a double probability row, straight from the definitions in ops.h.
std::vector<double> ref_metrics(const std::vector<double>& p, int topk_k, const std::vector<int32_t>& relevant) {
  const int n = (int)p.size();
  std::vector<double> m(kNumRowMetrics);
  double h = 0.0;
  for (double v : p) h -= v > 0.0 ? v * std::log(v) : 0.0;
  m[kEntropyNats] = h;
  m[kEntropyNorm] = n > 1 ? h / std::log((double)n) : 0.0;
  m[kEffSupport] = std::exp(h);
  m[kMaxProb] = *std::max_element(p.begin(), p.end());
  std::vector<double> sorted = p;
  std::sort(sorted.begin(), sorted.end(), std::greater<double>());
  double top = 0.0;
  for (int i = 0; i < std::min(topk_k, n); ++i) top += sorted[i];
  m[kTopkMass] = top;
  double tail = 0.0;
  for (double v : p) tail += v < 1.0 / n ? v : 0.0;
  m[kTailMass] = tail;
  m[kSinkMass] = p[0];
  double rel = 0.0;
  int seen = 0;
  for (int32_t j : relevant)
    if (j >= 0 && j < n) {
      rel += p[j];
      ++seen;
    }
  m[kRelevantMass] = seen ? rel : std::numeric_limits<double>::quiet_NaN();
  return m;
}

// Tail mass is a threshold count: an entry whose double p lies within `band` of 1/n may fall on either side in fp32.
// The allowed tail error is the mass of such entries.
double tail_ambiguity(const std::vector<double>& p, double band) {
  const double inv_n = 1.0 / (double)p.size();
  double amb = 0.0;
  for (double v : p) amb += std::fabs(v - inv_n) <= band ? v : 0.0;
  return amb;
}

// Compares fp32 metrics with the double reference. Tolerances: probabilities-derived sums 2e-5 absolute (fp32 softmax
// of rows of <= ~100 keys with |logit| <= ~40 is accurate to a few 1e-6); entropy 1e-4 absolute (ln Z - A/Z cancels
// terms of size up to ~|logit range|, so its absolute error is ~n * eps * range); eff support relative 1e-4 (exp of
// the entropy); tail gets the mass of the entries within 1e-5 of the 1/n threshold on top.
void expect_metrics_near(const float* got, const std::vector<double>& ref, const std::vector<double>& p) {
  EXPECT_NEAR(got[kEntropyNats], ref[kEntropyNats], 1e-4);
  EXPECT_NEAR(got[kEntropyNorm], ref[kEntropyNorm], 1e-4);
  EXPECT_NEAR(got[kEffSupport], ref[kEffSupport], 1e-4 * ref[kEffSupport]);
  EXPECT_NEAR(got[kMaxProb], ref[kMaxProb], 2e-5);
  EXPECT_NEAR(got[kTopkMass], ref[kTopkMass], 2e-5);
  EXPECT_NEAR(got[kTailMass], ref[kTailMass], 2e-5 + tail_ambiguity(p, 1e-5));
  EXPECT_NEAR(got[kSinkMass], ref[kSinkMass], 2e-5);
  if (std::isnan(ref[kRelevantMass]))
    EXPECT_TRUE(std::isnan(got[kRelevantMass])) << "got " << got[kRelevantMass];
  else
    EXPECT_NEAR(got[kRelevantMass], ref[kRelevantMass], 2e-5);
}

// ---------------------------------------------------------------------------------------------------------------
// matmul_xwt

TEST(OpsMatmulXwt, MatchesDoubleReferenceOnOddSizes) {
  std::mt19937 rng(1);
  const int sizes[][3] = {{7, 13, 5}, {33, 64, 17}, {1, 3, 1}, {5, 1, 129}};  // m, k, n
  for (const auto& s : sizes) {
    const int m = s[0], k = s[1], n = s[2];
    SCOPED_TRACE(testing::Message() << "m=" << m << " k=" << k << " n=" << n);
    const auto x = random_vec((size_t)m * k, rng), w = random_vec((size_t)n * k, rng);
    std::vector<float> y((size_t)m * n, NAN);
    matmul_xwt(x.data(), w.data(), y.data(), m, n, k);
    std::vector<double> ref, abs_sum;
    ref_matmul_xwt(x.data(), w.data(), m, n, k, ref, abs_sum);
    // Reference: naive double dot products. Tolerance: the standard fp32 dot-product bound
    // |err| <= gamma_k * sum |x||w| with gamma_k ~= k * 2^-24 (+1 for the final rounding), any summation order.
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], ref[i], (k + 1) * kEps32 * abs_sum[i] + 1e-30) << "at " << i;
  }
}

// OpenBLAS 0.3.21 names CPUs newer than its model table "Prescott" (SSE3; seen on an Emerald Rapids Xeon): the
// library then chooses the core from the CPU's features (blas_core.cpp). Oracle: the CPU's features as the compiler's
// runtime reads them, and the products of a size that takes OpenBLAS's blocked kernels against double precision.
TEST(OpsMatmulXwt, RunsOnTheKernelsOfTheCpusVectorIsa) {
  const std::string core = blas_core();
  SCOPED_TRACE(core);
  if (std::getenv("OPENBLAS_CORETYPE")) GTEST_SKIP() << "OPENBLAS_CORETYPE is set: the user chose the core";
  if (core.rfind("OpenBLAS ", 0) != 0) GTEST_SKIP() << "not OpenBLAS: " << core;
  const std::string name = core.substr(9, core.find(' ', 9) - 9);
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx512) {
    EXPECT_TRUE(name == "SkylakeX" || name == "Cooperlake" || name == "SapphireRapids");
  } else if (avx2) {
    EXPECT_TRUE(name == "Haswell" || name == "Zen" || name == "Excavator");
  }
  std::mt19937 rng(3);
  const int m = 64, k = 1024, n = 96;
  const auto x = random_vec((size_t)m * k, rng), w = random_vec((size_t)n * k, rng);
  std::vector<float> y((size_t)m * n, NAN);
  matmul_xwt(x.data(), w.data(), y.data(), m, n, k);
  std::vector<double> ref, abs_sum;
  ref_matmul_xwt(x.data(), w.data(), m, n, k, ref, abs_sum);
  for (size_t i = 0; i < y.size(); ++i)  // the fp32 dot-product bound, as above
    ASSERT_NEAR(y[i], ref[i], (k + 1) * kEps32 * abs_sum[i] + 1e-30) << "at " << i;
}

// ---------------------------------------------------------------------------------------------------------------
// rmsnorm

std::vector<double> ref_rmsnorm(const std::vector<float>& x, const std::vector<float>& w, int rows, int n, double eps) {
  std::vector<double> y(x.size());
  for (int r = 0; r < rows; ++r) {
    double ss = 0.0;
    for (int i = 0; i < n; ++i) ss += (double)x[(size_t)r * n + i] * x[(size_t)r * n + i];
    const double f = 1.0 / std::sqrt(ss / n + eps);
    for (int i = 0; i < n; ++i) y[(size_t)r * n + i] = (double)w[i] * x[(size_t)r * n + i] * f;
  }
  return y;
}

TEST(OpsRmsnorm, MatchesDoubleReferenceAndAllowsAliasing) {
  std::mt19937 rng(2);
  const int shapes[][2] = {{3, 97}, {40, 1000}, {1, 1}};  // rows (40 > 16 takes the OpenMP path), n
  for (const auto& s : shapes) {
    const int rows = s[0], n = s[1];
    SCOPED_TRACE(testing::Message() << "rows=" << rows << " n=" << n);
    const float eps = 1e-5f;
    auto x = random_vec((size_t)rows * n, rng, -2.0f, 2.0f);
    const auto w = random_vec(n, rng, 0.5f, 1.5f);
    const auto ref = ref_rmsnorm(x, w, rows, n, eps);
    std::vector<float> y(x.size(), NAN);
    rmsnorm(x.data(), w.data(), y.data(), rows, n, eps);
    // Reference: double mean of squares. Tolerance: the fp32 sum of n squares is off by <= n * 2^-24 relative
    // (recursive summation bound), rsqrt halves that, and the three products add 3 * 2^-24; so per element
    // |err| <= (n/2 + 5) * 2^-24 * |ref|, plus 1e-12 absolute for exact zeros.
    const double rel = (n / 2.0 + 5) * kEps32;
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], rel * std::fabs(ref[i]) + 1e-12) << "at " << i;
    // In place (y aliases x): the same values as the out-of-place call, bit for bit (same arithmetic per element).
    rmsnorm(x.data(), w.data(), x.data(), rows, n, eps);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(x[i], y[i]) << "aliased at " << i;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// rope

// HF rotate_half in double: pair (i, i + d/2), inv_freq = theta^(-2i/d), angle = pos * inv_freq, all in double.
std::vector<double> ref_rope_double(const std::vector<float>& x, int n_tokens, int n_heads, int d, int pos0,
                                    double theta) {
  std::vector<double> y(x.begin(), x.end());
  const int half = d / 2;
  for (int t = 0; t < n_tokens; ++t)
    for (int h = 0; h < n_heads; ++h)
      for (int i = 0; i < half; ++i) {
        const double ang = (double)(pos0 + t) * std::pow(theta, -2.0 * i / d);
        const size_t o = ((size_t)t * n_heads + h) * d;
        const double x1 = x[o + i], x2 = x[o + i + half];
        y[o + i] = x1 * std::cos(ang) - x2 * std::sin(ang);
        y[o + i + half] = x2 * std::cos(ang) + x1 * std::sin(ang);
      }
  return y;
}

// The same rotation, but with the angle formed in fp32 exactly as transformers forms it
// (inv_freq = 1 / base^(2i/d) in fp32, angle = fp32(pos) * inv_freq in fp32); cos/sin and the rotation in double.
std::vector<double> ref_rope_hf_fp32_angle(const std::vector<float>& x, int n_tokens, int n_heads, int d, int pos0,
                                           float theta) {
  std::vector<double> y(x.begin(), x.end());
  const int half = d / 2;
  for (int t = 0; t < n_tokens; ++t)
    for (int h = 0; h < n_heads; ++h)
      for (int i = 0; i < half; ++i) {
        const float inv_freq = 1.0f / std::pow(theta, (float)(2 * i) / (float)d);
        const double ang = (double)((float)(pos0 + t) * inv_freq);
        const size_t o = ((size_t)t * n_heads + h) * d;
        const double x1 = x[o + i], x2 = x[o + i + half];
        y[o + i] = x1 * std::cos(ang) - x2 * std::sin(ang);
        y[o + i + half] = x2 * std::cos(ang) + x1 * std::sin(ang);
      }
  return y;
}

TEST(OpsRope, HandComputedRotateHalfPairing) {
  // d_head 4, theta 10000: inv_freq = {1, 1/100}. x = e_0 at pos 1 rotates within pair (0, 2) by 1 rad:
  // x0 = cos 1, x2 = sin 1; x = e_1 rotates within pair (1, 3) by 0.01 rad. Tolerance 1e-6 (fp32 cos/sin).
  std::vector<float> x = {1, 0, 0, 0, /*head 1*/ 0, 1, 0, 0};
  rope(x.data(), 1, 2, 4, 1, 10000.0f);
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(x[1], 0.0, 1e-6);
  EXPECT_NEAR(x[2], std::sin(1.0), 1e-6);
  EXPECT_NEAR(x[3], 0.0, 1e-6);
  EXPECT_NEAR(x[4], 0.0, 1e-6);
  EXPECT_NEAR(x[5], std::cos(0.01), 1e-6);
  EXPECT_NEAR(x[6], 0.0, 1e-6);
  EXPECT_NEAR(x[7], std::sin(0.01), 1e-6);
  // Position 0 is the identity.
  std::vector<float> y = {0.3f, -0.7f, 0.2f, 0.9f};
  const std::vector<float> y0 = y;
  rope(y.data(), 1, 1, 4, 0, 10000.0f);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], y0[i], 1e-7);
}

TEST(OpsRope, MatchesDoubleReferenceAcrossPositionsAndThetas) {
  std::mt19937 rng(3);
  const int d_heads[] = {8, 64};
  const float thetas[] = {10000.0f, 500000.0f};
  const int pos0s[] = {0, 1, 37, 4093, 131000};
  const int n_tokens = 20, n_heads = 3;  // 20 > 16 takes the OpenMP path
  for (int d : d_heads)
    for (float theta : thetas)
      for (int pos0 : pos0s) {
        SCOPED_TRACE(testing::Message() << "d=" << d << " theta=" << theta << " pos0=" << pos0);
        const auto x0 = random_vec((size_t)n_tokens * n_heads * d, rng);
        auto x = x0;
        rope(x.data(), n_tokens, n_heads, d, pos0, theta);
        const auto ref = ref_rope_double(x0, n_tokens, n_heads, d, pos0, theta);
        const auto ref_hf = ref_rope_hf_fp32_angle(x0, n_tokens, n_heads, d, pos0, theta);
        const int half = d / 2;
        for (int t = 0; t < n_tokens; ++t)
          for (int h = 0; h < n_heads; ++h)
            for (int i = 0; i < half; ++i) {
              const size_t o = ((size_t)t * n_heads + h) * d;
              const double angle = (double)(pos0 + t) * std::pow((double)theta, -2.0 * i / d);
              // Tolerance against the all-double reference: the fp32 angle is off by up to
              // angle * (2 ulp of inv_freq from powf + reciprocal, + 0.5 ulp of the product) <= angle * 2^-22; we
              // allow angle * 2^-21. A rotation error of delta moves each component by <= (|x1| + |x2|) * delta. At
              // pos ~1e5 that is ~0.06 for the fastest pair: the fp32 angle itself carries that error, in HF too.
              // Plus 4e-7 for fp32 cos/sin and the rotation's products (|x| <= 1).
              const double delta = angle * 2.0 * std::ldexp(1.0, -22);
              const double tol = (std::fabs(x0[o + i]) + std::fabs(x0[o + i + half])) * delta + 4e-7;
              ASSERT_NEAR(x[o + i], ref[o + i], tol) << "t=" << t << " h=" << h << " i=" << i;
              ASSERT_NEAR(x[o + i + half], ref[o + i + half], tol) << "t=" << t << " h=" << h << " i=" << i;
              // Against the HF fp32-angle reference the angle rounding is shared, so only cos/sin (<= 1 ulp each)
              // and the rotation's roundings remain: 1e-6 absolute, at every position.
              ASSERT_NEAR(x[o + i], ref_hf[o + i], 1e-6) << "hf t=" << t << " h=" << h << " i=" << i;
              ASSERT_NEAR(x[o + i + half], ref_hf[o + i + half], 1e-6) << "hf t=" << t << " h=" << h << " i=" << i;
            }
      }
}

TEST(OpsRope, TokenOffsetEqualsPos0) {
  // Rotating tokens [0, 5) from pos0 = 10 equals rotating each token alone at its absolute position: exact, since
  // the same fp32 angle is formed either way.
  std::mt19937 rng(4);
  const int n_tokens = 5, n_heads = 2, d = 8;
  const auto x0 = random_vec((size_t)n_tokens * n_heads * d, rng);
  auto all = x0;
  rope(all.data(), n_tokens, n_heads, d, 10, 10000.0f);
  for (int t = 0; t < n_tokens; ++t) {
    std::vector<float> one(x0.begin() + (size_t)t * n_heads * d, x0.begin() + (size_t)(t + 1) * n_heads * d);
    rope(one.data(), 1, n_heads, d, 10 + t, 10000.0f);
    for (int i = 0; i < n_heads * d; ++i) ASSERT_EQ(one[i], all[(size_t)t * n_heads * d + i]);
  }
}

// rope_freqs keeps the calling thread's last cos / sin table: a call with other positions, frequencies or scale
// must not read it. Each call against the fp32-angle reference in double (cos_scale applied to cos and sin), 1e-6
// absolute as above; the same x, so a stale table would show as another rotation.
TEST(OpsRope, KeptTableFollowsEachCall) {
  std::mt19937 rng(41);
  const int n_tokens = 3, n_heads = 2, d = 8, half = d / 2;
  const auto x0 = random_vec((size_t)n_tokens * n_heads * d, rng);
  std::vector<float> freq_a(half), freq_b(half);
  for (int i = 0; i < half; ++i) {
    freq_a[i] = 1.0f / std::pow(10000.0f, (float)(2 * i) / (float)d);
    freq_b[i] = 1.0f / std::pow(500000.0f, (float)(2 * i) / (float)d);
  }
  struct Call {
    int pos0;
    const std::vector<float>* freq;
    float scale;
  };
  const Call calls[] = {{5, &freq_a, 1.0f}, {5, &freq_a, 1.0f}, {5, &freq_b, 1.0f}, {5, &freq_a, 0.5f},
                        {6, &freq_a, 0.5f}, {6, &freq_a, 0.5f}, {0, &freq_b, 1.0f}};
  for (const Call& c : calls) {
    SCOPED_TRACE(testing::Message() << "pos0=" << c.pos0 << " scale=" << c.scale);
    auto x = x0;
    rope_freqs(x.data(), n_tokens, n_heads, d, c.pos0, c.freq->data(), c.scale);
    for (int t = 0; t < n_tokens; ++t)
      for (int h = 0; h < n_heads; ++h)
        for (int i = 0; i < half; ++i) {
          const size_t o = ((size_t)t * n_heads + h) * d;
          const double ang = (double)((float)(c.pos0 + t) * (*c.freq)[i]);
          const double cs = std::cos(ang) * c.scale, sn = std::sin(ang) * c.scale;
          ASSERT_NEAR(x[o + i], x0[o + i] * cs - x0[o + i + half] * sn, 1e-6) << "t=" << t << " i=" << i;
          ASSERT_NEAR(x[o + i + half], x0[o + i + half] * cs + x0[o + i] * sn, 1e-6) << "t=" << t << " i=" << i;
        }
  }
}

// A call whose table would pass 2^19 values (16 400 tokens x 32 pairs) forms each token's angles as it goes: its
// rows equal those of short calls at the same positions (which keep their tables), within 1e-6.
TEST(OpsRope, LongCallWithoutTableEqualsShortCalls) {
  std::mt19937 rng(42);
  const int n_tokens = 16400, n_heads = 1, d = 64;
  const auto x0 = random_vec((size_t)n_tokens * n_heads * d, rng);
  auto all = x0;
  rope(all.data(), n_tokens, n_heads, d, 3, 10000.0f);
  for (int t : {0, 1, 8191, 16399}) {
    std::vector<float> one(x0.begin() + (size_t)t * d, x0.begin() + (size_t)(t + 1) * d);
    rope(one.data(), 1, n_heads, d, 3 + t, 10000.0f);
    for (int i = 0; i < d; ++i) ASSERT_NEAR(one[i], all[(size_t)t * d + i], 1e-6) << "t=" << t << " i=" << i;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// swiglu, add_inplace, embed

TEST(OpsSwiglu, MatchesDoubleReference) {
  std::mt19937 rng(5);
  // 70 003 values: the parallel path (> 65 536), spans of 4 096 and a short last span.
  auto gate = random_vec(70003, rng, -8.0f, 8.0f);
  auto up = random_vec(70003, rng, -3.0f, 3.0f);
  // Extremes: silu(-100) underflows towards -0, silu(+100) = 100, silu(0) = 0.
  gate[0] = -100.0f;
  gate[1] = 100.0f;
  gate[2] = 0.0f;
  gate[3] = -80.0f;
  gate[4] = 30.0f;
  std::vector<float> out(gate.size(), NAN);
  swiglu(gate.data(), up.data(), out.data(), gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    // Reference: x / (1 + e^-x) * up in double. Tolerance: e^-|x| within 2e-7 relative (exp_nonpos), which the
    // sigmoid carries at most undamped, then the add, divide and two multiplies (0.5 ulp each): < 3.5e-7, within
    // 8 * 2^-24 = 4.8e-7 relative; 1e-30 absolute for results that underflow in fp32 (silu(-100) ~ -4e-42).
    const double g = gate[i];
    const double ref = g / (1.0 + std::exp(-g)) * (double)up[i];
    ASSERT_NEAR(out[i], ref, 8 * kEps32 * std::fabs(ref) + 1e-30) << "gate=" << g << " up=" << up[i];
  }
}

TEST(OpsAddInplace, MatchesDoubleSum) {
  std::mt19937 rng(6);
  auto y = random_vec(70000, rng), x = random_vec(70000, rng);  // > 65536 takes the OpenMP path
  const auto y0 = y;
  add_inplace(y.data(), x.data(), y.size());
  // Reference: the double sum of two floats in [-1, 1] is exact, so rounding it to fp32 gives the correctly rounded
  // fp32 sum: exact equality.
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], (float)((double)y0[i] + (double)x[i])) << "at " << i;
}

TEST(OpsEmbed, CopiesTableRows) {
  const int vocab = 6, hidden = 5;
  std::vector<float> table((size_t)vocab * hidden);
  for (int v = 0; v < vocab; ++v)
    for (int c = 0; c < hidden; ++c) table[(size_t)v * hidden + c] = (float)(100 * v + c);
  const std::vector<int32_t> ids = {3, 0, 5, 3};
  std::vector<float> out(ids.size() * hidden, NAN);
  embed(table.data(), ids.data(), out.data(), (int)ids.size(), hidden);
  // Reference: out[t, c] = 100 * ids[t] + c, exact.
  for (size_t t = 0; t < ids.size(); ++t)
    for (int c = 0; c < hidden; ++c) EXPECT_EQ(out[t * hidden + c], (float)(100 * ids[t] + c));
}

// ---------------------------------------------------------------------------------------------------------------
// topk

TEST(OpsTopk, DescendingWithTiesLowerIndexFirst) {
  // Hand-computed: values 3 at {1, 4, 6}, 5 at {2}, -1 elsewhere.
  const std::vector<float> x = {-1, 3, 5, -1, 3, -1, 3};
  std::vector<int32_t> idx(4);
  std::vector<float> val(4);
  topk(x.data(), (int)x.size(), 4, idx.data(), val.data());
  EXPECT_EQ(idx, (std::vector<int32_t>{2, 1, 4, 6}));
  EXPECT_EQ(val, (std::vector<float>{5, 3, 3, 3}));
}

TEST(OpsTopk, MatchesStableSortReference) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-4, 4);  // few distinct values -> many ties
  std::normal_distribution<float> normal(0.0f, 3.0f);
  // n up to a vocabulary (the block-maximum path starts above 64 * k entries); with many ties and with distinct
  // values; k up to 64 (insertion) and beyond (sort).
  for (int n : {1, 2, 9, 100, 4133, 49152}) {
    for (int ties : {1, 0}) {
      std::vector<float> x(n);
      for (auto& v : x) v = ties ? (float)small(rng) * 0.5f : normal(rng);
      // Reference: stable sort of indices by value descending (stable keeps lower index first among ties).
      std::vector<int32_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
      for (int k : {1, std::min(3, n), std::min(10, n), std::min(64, n), std::min(65, n), n}) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " k=" << k << " ties=" << ties);
        std::vector<int32_t> idx(k, -7);
        std::vector<float> val(k, NAN);
        topk(x.data(), n, k, idx.data(), val.data());
        for (int i = 0; i < k; ++i) {
          ASSERT_EQ(idx[i], order[i]) << "rank " << i;
          ASSERT_EQ(val[i], x[order[i]]) << "rank " << i;
        }
      }
    }
  }
}

TEST(OpsLogSumExp, MatchesDouble) {
  // Reference: max-subtracted log-sum-exp in double. Tolerance 2e-6 relative to max(1, |result|): float sums of
  // up to 49152 terms.
  std::mt19937 rng(9);
  for (int n : {1, 7, 4096, 49152})
    for (float spread : {0.1f, 5.0f, 60.0f}) {
      std::normal_distribution<float> d(3.0f, spread);
      std::vector<float> x(n);
      for (auto& v : x) v = d(rng);
      double mx = x[0], z = 0.0;
      for (float v : x) mx = std::max(mx, (double)v);
      for (float v : x) z += std::exp((double)v - mx);
      const double ref = mx + std::log(z);
      EXPECT_NEAR(log_sum_exp(x.data(), n), ref, 2e-6 * std::max(1.0, std::fabs(ref))) << n << " " << spread;
    }
}

// ---------------------------------------------------------------------------------------------------------------
// softmax_row

TEST(OpsSoftmaxRow, MatchesDoubleSoftmaxAndMetrics) {
  std::mt19937 rng(8);
  for (int n : {2, 7, 100}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    const auto logits = random_vec(n, rng, -8.0f, 8.0f);
    const std::vector<int32_t> relevant = {1, n - 1, n + 5};  // n + 5 is not visible and is ignored
    std::vector<float> p(n, NAN), m(kNumRowMetrics, -1.0f);
    softmax_row(logits.data(), p.data(), n, m.data(), 3, relevant.data(), (int)relevant.size());
    const auto ref = ref_softmax(std::vector<double>(logits.begin(), logits.end()));
    // Reference: double softmax. Tolerance per entry 2e-5 * p + 1e-8: the fp32 normaliser sums n <= 100 terms
    // (<= n * 2^-24 ~ 6e-6 relative) and each exp of a difference of size <= 16 adds ~16 * 2^-24.
    for (int j = 0; j < n; ++j) ASSERT_NEAR(p[j], ref[j], 2e-5 * ref[j] + 1e-8) << "j=" << j;
    expect_metrics_near(m.data(), ref_metrics(ref, 3, relevant), ref);
  }
}

// Every variant of the softmax's exponential pass the CPU can run (softmax_simd.h) against double exp of the same
// fp32 differences d = raw * scale - mx: each e within 4e-7 relative (exp_nonpos's polynomial: < 2e-7, with FMA or
// without, plus the rounding of the result), exactly 0 below -87, NaN for NaN; z and a within 1e-6 relative of the
// double sums of the returned e (the fp32 summation order is the variant's own). Lengths around the vector widths.
TEST(OpsSoftmaxRow, ExpPassVariantsMatchDoubleExp) {
  struct Variant {
    const char* name;
    ExpSums (*fn)(const float*, float, float, float*, int);
    bool available;
  };
  const Variant variants[] = {{"generic", softmax_exp_pass_generic, true},
                              {"avx2", softmax_exp_pass_avx2, cpu_has_avx2_fma()},
                              {"avx512", softmax_exp_pass_avx512, cpu_has_avx512f()},
                              {"chosen", softmax_exp_pass, true}};
  std::mt19937 rng(21);
  for (int n : {1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000}) {
    auto raw = random_vec(n, rng, -40.0f, 40.0f);
    if (n > 3) {
      raw[1] = -std::numeric_limits<float>::infinity();  // e = 0
      raw[2] = -1e30f;                                   // far below -87: e = 0
    }
    const float scale = 2.5f;
    float rmax = -std::numeric_limits<float>::infinity();
    for (float v : raw) rmax = std::max(rmax, v);
    const float mx = rmax * scale;
    for (const Variant& v : variants) {
      if (!v.available) continue;
      SCOPED_TRACE(testing::Message() << v.name << " n=" << n);
      std::vector<float> e(n, -1.0f);
      const ExpSums s = v.fn(raw.data(), scale, mx, e.data(), n);
      double z = 0.0, a = 0.0, a_abs = 0.0;
      for (int j = 0; j < n; ++j) {
        const float d = raw[j] * scale - mx;
        if (d < -87.0f) {
          ASSERT_EQ(e[j], 0.0f) << j;
          continue;
        }
        const double ref = std::exp((double)d);
        ASSERT_NEAR(e[j], ref, 4e-7 * ref) << j << " d=" << d;
        z += e[j];
        a += (double)e[j] * d;
        a_abs += std::fabs((double)e[j] * d);
      }
      EXPECT_NEAR(s.z, z, 1e-6 * z);
      EXPECT_NEAR(s.a, a, 1e-6 * a_abs + 1e-30);
    }
    // A NaN score reaches e and the sum (the row then reads NaN), in every variant.
    raw[n / 2] = std::numeric_limits<float>::quiet_NaN();
    for (const Variant& v : variants) {
      if (!v.available) continue;
      std::vector<float> e(n);
      const ExpSums s = v.fn(raw.data(), scale, mx, e.data(), n);
      EXPECT_TRUE(std::isnan(e[n / 2])) << v.name << " n=" << n;
      EXPECT_TRUE(std::isnan(s.z)) << v.name << " n=" << n;
    }
  }
}

TEST(OpsSoftmaxRow, MetricsNullLeavesOnlyProbabilities) {
  const std::vector<float> logits = {0.0f, std::log(3.0f)};
  std::vector<float> p(2, NAN);
  softmax_row(logits.data(), p.data(), 2, nullptr, 5, nullptr, 0);
  // Hand-computed: e^0 : e^ln3 = 1 : 3 -> {0.25, 0.75}; tolerance 1e-6.
  EXPECT_NEAR(p[0], 0.25, 1e-6);
  EXPECT_NEAR(p[1], 0.75, 1e-6);
}

TEST(OpsSoftmaxRow, ExtremeScaleStaysFinite) {
  // Focal temperature t = 0.01: logits = raw / t with raw in [-50, 50] -> |logit| up to 5000, where a naive
  // exp would overflow. Expected: no NaN/inf, probabilities sum to 1, and they match the double softmax.
  const float t = 0.01f;
  const std::vector<float> raw = {50.0f, -50.0f, 49.99f, 0.0f, -50.0f, 50.0f, 49.995f, -49.0f};
  const int n = (int)raw.size();
  std::vector<float> logits(n);
  for (int j = 0; j < n; ++j) logits[j] = raw[j] * (1.0f / t);
  std::vector<float> p(n, NAN), m(kNumRowMetrics, NAN);
  const std::vector<int32_t> relevant = {0, 5};
  softmax_row(logits.data(), p.data(), n, m.data(), 2, relevant.data(), 2);
  double sum = 0.0;
  for (int j = 0; j < n; ++j) {
    ASSERT_TRUE(std::isfinite(p[j])) << "j=" << j;
    ASSERT_GE(p[j], 0.0f);
    sum += p[j];
  }
  EXPECT_NEAR(sum, 1.0, 1e-6);  // tolerance: a few fp32 roundings of the normalisation
  for (int k = 0; k < kNumRowMetrics; ++k) EXPECT_TRUE(std::isfinite(m[k])) << "metric " << k;
  // Reference: double softmax of the fp32 logits (the fp32 logits themselves are the input, so no rounding of raw/t
  // enters the comparison). Tolerance 1e-5 absolute: differences of logits near 5000 are exact in fp32 (Sterbenz),
  // so only exp and the normaliser round.
  const auto ref = ref_softmax(std::vector<double>(logits.begin(), logits.end()));
  for (int j = 0; j < n; ++j) EXPECT_NEAR(p[j], ref[j], 1e-5) << "j=" << j;
  expect_metrics_near(m.data(), ref_metrics(ref, 2, relevant), ref);
  // All logits hugely negative: the max subtraction makes it uniform.
  std::vector<float> neg(4, -5000.0f), q(4, NAN), mq(kNumRowMetrics, NAN);
  softmax_row(neg.data(), q.data(), 4, mq.data(), 2, nullptr, 0);
  for (float v : q) EXPECT_NEAR(v, 0.25, 1e-7);
  EXPECT_NEAR(mq[kEntropyNats], std::log(4.0), 1e-6);
}

TEST(OpsSoftmaxRow, SingleElementRow) {
  // Hand-computed: one visible key -> p = 1, H = 0, normalised H defined as 0, eff support 1, tail 0 (1 < 1 is
  // false), sink 1. Tolerance 1e-7 (exact in fp32 except ln/exp roundings of 0).
  const float logit = 123.0f;
  float p = NAN;
  std::vector<float> m(kNumRowMetrics, NAN);
  const int32_t rel = 0;
  softmax_row(&logit, &p, 1, m.data(), 5, &rel, 1);
  EXPECT_EQ(p, 1.0f);
  EXPECT_NEAR(m[kEntropyNats], 0.0, 1e-7);
  EXPECT_EQ(m[kEntropyNorm], 0.0f);
  EXPECT_NEAR(m[kEffSupport], 1.0, 1e-7);
  EXPECT_EQ(m[kMaxProb], 1.0f);
  EXPECT_EQ(m[kTopkMass], 1.0f);
  EXPECT_EQ(m[kTailMass], 0.0f);
  EXPECT_EQ(m[kSinkMass], 1.0f);
  EXPECT_EQ(m[kRelevantMass], 1.0f);
}

TEST(OpsSoftmaxRow, AllEqualRowIsUniform) {
  // Hand-computed: n equal logits -> p = 1/n, H = ln n, normalised 1, eff support n, max 1/n, top-3 mass 3/n,
  // tail 0 (no entry is strictly below 1/n), sink 1/n, relevant {2, 4} -> 2/n. Tolerance 1e-6 (2e-6 relative for
  // eff support).
  for (int n : {3, 7, 64}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    std::vector<float> logits(n, 3.3f), p(n, NAN), m(kNumRowMetrics, NAN);
    const std::vector<int32_t> rel = {2, 4};
    softmax_row(logits.data(), p.data(), n, m.data(), 3, rel.data(), 2);
    for (float v : p) EXPECT_NEAR(v, 1.0 / n, 1e-7);
    EXPECT_NEAR(m[kEntropyNats], std::log((double)n), 1e-6);
    EXPECT_NEAR(m[kEntropyNorm], 1.0, 1e-6);
    EXPECT_NEAR(m[kEffSupport], n, 2e-6 * n);
    EXPECT_NEAR(m[kMaxProb], 1.0 / n, 1e-6);
    EXPECT_NEAR(m[kTopkMass], 3.0 / n, 1e-6);
    EXPECT_EQ(m[kTailMass], 0.0f);
    EXPECT_NEAR(m[kSinkMass], 1.0 / n, 1e-6);
    EXPECT_NEAR(m[kRelevantMass], n > 4 ? 2.0 / n : 1.0 / n, 1e-6);  // key 4 is not visible when n = 3
  }
}

TEST(OpsRowMetrics, MatchesDoubleReferenceOnProbabilityRow) {
  std::mt19937 rng(9);
  const int n = 50;
  const auto logits = random_vec(n, rng, -4.0f, 4.0f);
  const auto ref = ref_softmax(std::vector<double>(logits.begin(), logits.end()));
  const std::vector<float> p(ref.begin(), ref.end());
  const std::vector<int32_t> rel = {0, 10, 49, -3, 77};  // -3 and 77 are not visible keys
  std::vector<float> m(kNumRowMetrics, NAN);
  row_metrics(p.data(), n, 4, rel.data(), (int)rel.size(), m.data());
  // Reference: metrics of the double row; tolerances as in expect_metrics_near.
  expect_metrics_near(m.data(), ref_metrics(ref, 4, rel), ref);
}

// ---------------------------------------------------------------------------------------------------------------
// attention

struct AttnCase {
  int n_tokens, n_past, n_heads, n_kv_heads, d_head;
  int window = 0;            // > 0: the row at position i sees keys i - window + 1 .. i
  float softcap = 0.0f;      // > 0: logits softcap * tanh(raw * scale / softcap)
  float logit_scale = 0.0f;  // raw = q.k * logit_scale; 0: 1 / sqrt(d)
};

struct AttnInputs {
  std::vector<float> q, k_cache, v_cache, row_scale;
  int cache_stride = 0;
};

AttnInputs make_attn_inputs(const AttnCase& c, std::mt19937& rng) {
  AttnInputs in;
  const int n_ctx = c.n_past + c.n_tokens;
  in.cache_stride = n_ctx + 7;  // > n_past + T: positions beyond n_ctx are padding and must never be read
  // q scaled by 3 so that raw scores span a few units and rows are not all near-uniform.
  in.q = random_vec((size_t)c.n_tokens * c.n_heads * c.d_head, rng, -3.0f, 3.0f);
  in.k_cache.assign((size_t)c.n_kv_heads * in.cache_stride * c.d_head, NAN);
  in.v_cache.assign((size_t)c.n_kv_heads * in.cache_stride * c.d_head, NAN);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int kv = 0; kv < c.n_kv_heads; ++kv)
    for (int j = 0; j < n_ctx; ++j)
      for (int i = 0; i < c.d_head; ++i) {
        in.k_cache[((size_t)kv * in.cache_stride + j) * c.d_head + i] = u(rng);
        in.v_cache[((size_t)kv * in.cache_stride + j) * c.d_head + i] = u(rng);
      }
  in.row_scale = random_vec((size_t)c.n_heads * c.n_tokens, rng, 0.25f, 4.0f);
  return in;
}

struct AttnRef {
  std::vector<double> out;                 // [T, n_heads * d]
  std::vector<std::vector<double>> probs;  // [n_heads * T][n_vis]
  std::vector<std::vector<double>> raw;    // [n_heads * T][n_vis], q.k / sqrt(d) before the scale
};

// Naive causal attention in double: row t (absolute position n_past + t) sees keys [0, n_past + t], or under a
// window the last `window` of them (probability 0 before); logits raw * scale, soft-capped when the case says so.
AttnRef ref_attention(const AttnCase& c, const AttnInputs& in) {
  AttnRef r;
  const int T = c.n_tokens, d = c.d_head, qs = c.n_heads * d, group = c.n_heads / c.n_kv_heads;
  r.out.assign((size_t)T * qs, 0.0);
  r.probs.resize((size_t)c.n_heads * T);
  r.raw.resize((size_t)c.n_heads * T);
  for (int h = 0; h < c.n_heads; ++h) {
    const int kv = h / group;
    for (int t = 0; t < T; ++t) {
      const int n_vis = c.n_past + t + 1;
      const int lo = c.window > 0 && n_vis > c.window ? n_vis - c.window : 0;
      const double ls = c.logit_scale > 0.0f ? (double)c.logit_scale : 1.0 / std::sqrt((double)d);
      std::vector<double> raw(n_vis, 0.0), logits;
      logits.reserve(n_vis - lo);
      for (int j = lo; j < n_vis; ++j) {
        double s = 0.0;
        for (int i = 0; i < d; ++i)
          s += (double)in.q[(size_t)t * qs + (size_t)h * d + i] *
               (double)in.k_cache[((size_t)kv * in.cache_stride + j) * d + i];
        raw[j] = s * ls;
        const double x = raw[j] * (double)in.row_scale[(size_t)h * T + t];
        logits.push_back(c.softcap > 0.0f ? c.softcap * std::tanh(x / c.softcap) : x);
      }
      std::vector<double> p(lo, 0.0);
      const auto pv = ref_softmax(logits);
      p.insert(p.end(), pv.begin(), pv.end());
      for (int i = 0; i < d; ++i) {
        double o = 0.0;
        for (int j = 0; j < n_vis; ++j) o += p[j] * (double)in.v_cache[((size_t)kv * in.cache_stride + j) * d + i];
        r.out[(size_t)t * qs + (size_t)h * d + i] = o;
      }
      r.probs[(size_t)h * T + t] = p;
      r.raw[(size_t)h * T + t] = raw;
    }
  }
  return r;
}

// Every row_fn call, keyed by (head, absolute row): the full stride-long rows of probs and raw.
struct RowCollector {
  std::mutex mu;
  int n_past = 0, n_ctx = 0;
  std::map<std::pair<int, int>, std::pair<std::vector<float>, std::vector<float>>> rows;
  std::vector<std::pair<int, int>> duplicates;
  std::vector<std::string> errors;

  // The rows a case's attention may report (returns this).
  RowCollector& expect(const AttnCase& c) {
    n_past = c.n_past;
    n_ctx = c.n_past + c.n_tokens;
    return *this;
  }

  static void callback(void* ctx, int head, int row0, int n_rows, int stride, const float* probs, const float* raw) {
    auto* self = static_cast<RowCollector*>(ctx);
    std::lock_guard<std::mutex> lock(self->mu);
    // Contract: row r is absolute position row0 + r with row0 + r + 1 valid keys, so stride must hold them all.
    if (n_rows <= 0 || row0 < self->n_past || row0 + n_rows > self->n_ctx || stride < row0 + n_rows)
      self->errors.push_back("bad block: head " + std::to_string(head) + " row0 " + std::to_string(row0) + " n_rows " +
                             std::to_string(n_rows) + " stride " + std::to_string(stride));
    for (int r = 0; r < n_rows; ++r) {
      const auto key = std::make_pair(head, row0 + r);
      if (self->rows.count(key)) self->duplicates.push_back(key);
      self->rows[key] = {std::vector<float>(probs + (size_t)r * stride, probs + (size_t)(r + 1) * stride),
                         std::vector<float>(raw + (size_t)r * stride, raw + (size_t)(r + 1) * stride)};
    }
  }
};

// Wanted heads for the row callbacks: every other head, starting at 1.
std::vector<uint8_t> every_other_head(int n_heads) {
  std::vector<uint8_t> wanted(n_heads, 0);
  for (int h = 1; h < n_heads; h += 2) wanted[h] = 1;
  return wanted;
}

constexpr float kUnwritten = -12345.0f;

struct AttnRun {
  std::vector<float> out, metrics;
};

AttnRun run_attention(const AttnCase& c, const AttnInputs& in, int topk_k, const std::vector<int32_t>& relevant,
                      const std::vector<uint8_t>* head_wanted, RowCollector* collector, bool probs_fp16 = false) {
  AttnRun run;
  run.out.assign((size_t)c.n_tokens * c.n_heads * c.d_head, kUnwritten);
  run.metrics.assign((size_t)c.n_heads * c.n_tokens * kNumRowMetrics, kUnwritten);
  AttentionArgs a;
  a.n_tokens = c.n_tokens;
  a.n_past = c.n_past;
  a.n_heads = c.n_heads;
  a.n_kv_heads = c.n_kv_heads;
  a.d_head = c.d_head;
  a.q = in.q.data();
  a.k_cache = in.k_cache.data();
  a.v_cache = in.v_cache.data();
  a.cache_stride = in.cache_stride;
  a.row_scale = in.row_scale.data();
  a.out = run.out.data();
  a.metrics = run.metrics.data();
  a.topk = topk_k;
  a.relevant = relevant.empty() ? nullptr : relevant.data();
  a.n_relevant = (int)relevant.size();
  if (head_wanted) {
    a.head_wanted = head_wanted->data();
    a.row_fn = &RowCollector::callback;
    a.row_ctx = collector;
  }
  a.probs_fp16 = probs_fp16;
  a.window = c.window;
  a.softcap = c.softcap;
  a.logit_scale = c.logit_scale;
  attention(a);
  return run;
}

TEST(OpsAttention, MatchesNaiveCausalAttentionWithGqaCacheAndBlocks) {
  std::mt19937 rng(10);
  std::vector<AttnCase> cases;
  // T around the 64-row query block (one task: 64 rows of every query head of a GQA group, stacked) and past two
  // of them; n_past > 0 puts earlier positions in the KV cache; GQA groups of 2 and 3 (SmolLM2's 9 / 3), MQA (one
  // kv head) and plain MHA. T = 1, 2 and 4 take the decode path (attention_decode.cpp; a cache this short is one
  // chunk), 5 not.
  for (int T : {1, 2, 4, 5, 31, 63, 64, 65, 129})
    for (int n_past : {0, 9})
      for (auto hk : {std::make_pair(4, 2), std::make_pair(4, 1), std::make_pair(3, 3), std::make_pair(9, 3)})
        cases.push_back({T, n_past, hk.first, hk.second, 16});
  cases.push_back({33, 40, 4, 2, 64});
  cases.push_back({70, 3, 8, 2, 8});

  const int topk_k = 3;
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message() << "T=" << c.n_tokens << " n_past=" << c.n_past << " heads=" << c.n_heads
                                    << " kv=" << c.n_kv_heads << " d=" << c.d_head);
    const auto in = make_attn_inputs(c, rng);
    const int T = c.n_tokens, d = c.d_head, qs = c.n_heads * d, n_ctx = c.n_past + T;
    // Relevant keys: two positions in the new rows (rows before n_past + 3 see none -> NaN) and one never visible.
    const std::vector<int32_t> relevant = {c.n_past + 3, c.n_past + 20, n_ctx + 100};
    const std::vector<uint8_t> wanted = every_other_head(c.n_heads);
    RowCollector col;
    const auto run = run_attention(c, in, topk_k, relevant, &wanted, &col.expect(c));
    const auto ref = ref_attention(c, in);

    // out. Reference: double attention. Tolerance 2e-5 absolute: |v| <= 1 and sum p = 1, so the output error is
    // the probabilities' error (<= ~1e-5 total) plus the fp32 dot over <= 138 keys (~138 * 2^-24 = 8.2e-6) and the
    // product by 1 / sum of exponentials (one rounding, 2^-24 relative).
    for (size_t i = 0; i < run.out.size(); ++i)
      ASSERT_NEAR(run.out[i], ref.out[i], 2e-5) << "out[" << i / qs << ", " << i % qs << "]";

    // metrics for every (head, row). Reference: ref_metrics of the double probabilities.
    for (int h = 0; h < c.n_heads; ++h)
      for (int t = 0; t < T; ++t) {
        SCOPED_TRACE(testing::Message() << "metrics head " << h << " row " << t);
        const float* m = run.metrics.data() + ((size_t)h * T + t) * kNumRowMetrics;
        const auto& p = ref.probs[(size_t)h * T + t];
        expect_metrics_near(m, ref_metrics(p, topk_k, relevant), p);
      }

    // row_fn: every row of every wanted head exactly once, none of the others.
    for (const auto& e : col.errors) ADD_FAILURE() << e;
    EXPECT_TRUE(col.duplicates.empty()) << col.duplicates.size() << " rows reported twice";
    size_t expected_rows = 0;
    for (int h = 0; h < c.n_heads; ++h) expected_rows += wanted[h] ? (size_t)T : 0;
    EXPECT_EQ(col.rows.size(), expected_rows);
    for (const auto& kv : col.rows) {
      const int h = kv.first.first, row = kv.first.second;  // row is absolute
      ASSERT_TRUE(h >= 0 && h < c.n_heads && wanted[h]) << "unwanted head " << h << " reported";
      ASSERT_TRUE(row >= c.n_past && row < n_ctx) << "row " << row;
      const int t = row - c.n_past, n_vis = row + 1;
      const auto& probs = kv.second.first;
      const auto& raw = kv.second.second;
      const auto& rp = ref.probs[(size_t)h * T + t];
      const auto& rr = ref.raw[(size_t)h * T + t];
      // probs: tolerance 1e-5 absolute (see the softmax test); raw = q.k / sqrt(d) in fp32 with |q| <= 3, |k| <= 1:
      // the dot-product bound (d + 1) * 2^-24 * sum |q k| / sqrt(d) <= (d + 1) * 2^-24 * 3 * sqrt(d) < 3e-5.
      const double raw_tol = (d + 1) * kEps32 * 3.0 * std::sqrt((double)d) + 1e-7;
      for (int j = 0; j < n_vis; ++j) {
        ASSERT_NEAR(probs[j], rp[j], 1e-5) << "probs head " << h << " row " << row << " key " << j;
        ASSERT_NEAR(raw[j], rr[j], raw_tol) << "raw head " << h << " row " << row << " key " << j;
      }
      for (size_t j = n_vis; j < probs.size(); ++j) {
        ASSERT_EQ(probs[j], 0.0f) << "probs beyond visible: head " << h << " row " << row << " key " << j;
        ASSERT_EQ(raw[j], 0.0f) << "raw beyond visible: head " << h << " row " << row << " key " << j;
      }
    }
  }
}

TEST(OpsAttention, LongRowsWithWindowsAndSoftCapsMatchNaiveAttention) {
  // Rows of up to 2170 keys (the short-row test's rows stop at 138): plain rows, a sliding window that starts at a
  // different key for every row of a block (the products skip the keys before the block's first row's window, each
  // row masks the rest of its own), a soft-cap with an architecture logit scale (Gemma 2), and a window exactly as
  // wide as the first row's keys; two blocks of rows (64 + 6), GQA 6 / 2 and MQA.
  std::mt19937 rng(22);
  // Decode steps (T = 1 and 3: attention_decode.cpp over chunks of keys) behind the same long caches, windowed and
  // soft-capped.
  const std::vector<AttnCase> cases = {
      {70, 2100, 6, 2, 16}, {70, 2100, 6, 2, 16, 1500}, {70, 2100, 6, 2, 16, 0, 12.0f, 0.3f}, {20, 1030, 4, 1, 8, 1031},
      {1, 2100, 6, 2, 16},  {3, 2100, 6, 2, 16, 1500},  {1, 2100, 6, 2, 16, 0, 12.0f, 0.3f}};
  const int topk_k = 5;
  for (const auto& c : cases) {
    SCOPED_TRACE(testing::Message() << "T=" << c.n_tokens << " n_past=" << c.n_past << " window=" << c.window
                                    << " softcap=" << c.softcap);
    const auto in = make_attn_inputs(c, rng);
    const int T = c.n_tokens, d = c.d_head, qs = c.n_heads * d, n_ctx = c.n_past + T;
    const std::vector<int32_t> relevant = {5, 700, 1500, c.n_past + 3, n_ctx - 2, n_ctx + 100};
    const std::vector<uint8_t> wanted = every_other_head(c.n_heads);
    RowCollector col;
    const auto run = run_attention(c, in, topk_k, relevant, &wanted, &col.expect(c));
    const auto ref = ref_attention(c, in);
    // out: 2e-5 as in the short-row test, plus the fp32 p.v dot over up to n_ctx keys (sum p = 1, |v| <= 1:
    // n_ctx * 2^-24).
    const double out_tol = 2e-5 + n_ctx * kEps32;
    for (size_t i = 0; i < run.out.size(); ++i)
      ASSERT_NEAR(run.out[i], ref.out[i], out_tol) << "out[" << i / qs << ", " << i % qs << "]";
    // Metrics over the visible keys: the reference's metrics of the row's window, its relevant keys shifted to it
    // and no sink once the window has left key 0; tolerances as expect_metrics_near's.
    for (int h = 0; h < c.n_heads; ++h)
      for (int t = 0; t < T; ++t) {
        SCOPED_TRACE(testing::Message() << "metrics head " << h << " row " << t);
        const int n_vis = c.n_past + t + 1, lo = c.window > 0 && n_vis > c.window ? n_vis - c.window : 0;
        const auto& p = ref.probs[(size_t)h * T + t];
        const std::vector<double> vis(p.begin() + lo, p.end());
        std::vector<int32_t> rel(relevant.size());
        for (size_t i = 0; i < relevant.size(); ++i) rel[i] = relevant[i] >= lo ? relevant[i] - lo : -1;
        auto want = ref_metrics(vis, topk_k, rel);
        if (lo > 0) want[kSinkMass] = 0.0;
        expect_metrics_near(run.metrics.data() + ((size_t)h * T + t) * kNumRowMetrics, want, vis);
      }
    for (const auto& e : col.errors) ADD_FAILURE() << e;
    EXPECT_EQ(col.rows.size(), (size_t)T * (c.n_heads / 2));
    for (const auto& kv : col.rows) {
      const int h = kv.first.first, row = kv.first.second, t = row - c.n_past, n_vis = row + 1;
      const auto& rp = ref.probs[(size_t)h * T + t];
      const auto& rr = ref.raw[(size_t)h * T + t];
      const double ls = c.logit_scale > 0.0f ? c.logit_scale : 1.0 / std::sqrt((double)d);
      // raw: the dot-product bound of the short-row test at this case's logit scale.
      const double raw_tol = (d + 1) * kEps32 * 3.0 * d * ls + 1e-7;
      for (int j = 0; j < n_vis; ++j) {
        ASSERT_NEAR(kv.second.first[j], rp[j], 1e-5) << "probs head " << h << " row " << row << " key " << j;
        ASSERT_NEAR(kv.second.second[j], rr[j], raw_tol) << "raw head " << h << " row " << row << " key " << j;
      }
      for (size_t j = n_vis; j < kv.second.first.size(); ++j) {
        ASSERT_EQ(kv.second.first[j], 0.0f) << "probs beyond visible: head " << h << " row " << row;
        ASSERT_EQ(kv.second.second[j], 0.0f) << "raw beyond visible: head " << h << " row " << row;
      }
    }
  }
}

TEST(OpsAttention, NoRowCallbacksWithoutHeadWantedAndNullMetricsAllowed) {
  std::mt19937 rng(11);
  const AttnCase c{33, 4, 4, 2, 16};
  const auto in = make_attn_inputs(c, rng);
  // No head wanted: row_fn set but must never be called.
  std::vector<uint8_t> none(c.n_heads, 0);
  RowCollector col;
  col.n_past = c.n_past;
  col.n_ctx = c.n_past + c.n_tokens;
  const auto run = run_attention(c, in, 5, {}, &none, &col);
  EXPECT_TRUE(col.rows.empty());
  // No relevant keys given: relevant mass is NaN for every row.
  for (int r = 0; r < c.n_heads * c.n_tokens; ++r)
    EXPECT_TRUE(std::isnan(run.metrics[(size_t)r * kNumRowMetrics + kRelevantMass])) << "row " << r;
  // metrics == nullptr: no metrics, same output (bitwise: the output does not depend on the metrics pass).
  std::vector<float> out2(run.out.size(), kUnwritten);
  AttentionArgs a;
  a.n_tokens = c.n_tokens;
  a.n_past = c.n_past;
  a.n_heads = c.n_heads;
  a.n_kv_heads = c.n_kv_heads;
  a.d_head = c.d_head;
  a.q = in.q.data();
  a.k_cache = in.k_cache.data();
  a.v_cache = in.v_cache.data();
  a.cache_stride = in.cache_stride;
  a.row_scale = in.row_scale.data();
  a.out = out2.data();
  attention(a);
  for (size_t i = 0; i < out2.size(); ++i) ASSERT_EQ(out2[i], run.out[i]) << "at " << i;
}

TEST(OpsAttention, Fp16RowsAreTheRoundedFp32RowsAndNothingElseChanges) {
  std::mt19937 rng(12);
  // The blocked path and the decode path (2 rows behind a cache of 300).
  for (const AttnCase& c : {AttnCase{70, 3, 4, 2, 16}, AttnCase{2, 300, 4, 2, 16}}) {
    SCOPED_TRACE(testing::Message() << "T=" << c.n_tokens << " n_past=" << c.n_past);
    const auto in = make_attn_inputs(c, rng);
    std::vector<uint8_t> wanted = {1, 0, 0, 1};
    RowCollector c32, c16;
    c32.n_past = c16.n_past = c.n_past;
    c32.n_ctx = c16.n_ctx = c.n_past + c.n_tokens;
    const auto r32 = run_attention(c, in, 5, {}, &wanted, &c32, false);
    const auto r16 = run_attention(c, in, 5, {}, &wanted, &c16, true);
    // Output and metrics come from the fp32 probabilities either way: bitwise equal.
    for (size_t i = 0; i < r32.out.size(); ++i) ASSERT_EQ(r16.out[i], r32.out[i]) << "out " << i;
    for (size_t i = 0; i < r32.metrics.size(); ++i)  // relevant mass is NaN (no relevant keys given) in both
      ASSERT_EQ(math::float_bits(r16.metrics[i]), math::float_bits(r32.metrics[i])) << "metrics " << i;
    // The rows handed over are the fp32 rows rounded to fp16 (reference: F16C-checked math::round_to_half), raw
    // scores untouched.
    ASSERT_EQ(c16.rows.size(), c32.rows.size());
    size_t changed = 0;
    for (const auto& [key, pr] : c32.rows) {
      const auto& got = c16.rows.at(key);
      for (size_t j = 0; j < pr.first.size(); ++j) {
        ASSERT_EQ(got.first[j], math::round_to_half(pr.first[j])) << "head " << key.first << " row " << key.second;
        ASSERT_EQ(got.second[j], pr.second[j]);
        changed += got.first[j] != pr.first[j];
      }
    }
    EXPECT_GT(changed, 0u) << "fp16 rounding should change some probabilities";
  }
}

TEST(OpsAttention, CausalMaskIgnoresFutureKeysAndValues) {
  std::mt19937 rng(12);
  const AttnCase c{140, 5, 4, 2, 16};
  const auto in = make_attn_inputs(c, rng);
  const int T = c.n_tokens, qs = c.n_heads * c.d_head;
  const std::vector<int32_t> relevant = {7};
  const auto base = run_attention(c, in, 5, relevant, nullptr, nullptr);
  // Perturb the key and value at absolute position P for every kv head. P = n_past + 70 sits inside the second
  // 64-row block, so rows of the same block before P exercise the in-block mask as well as earlier blocks.
  const int P = c.n_past + 70;
  auto pert = in;
  for (int kv = 0; kv < c.n_kv_heads; ++kv)
    for (int i = 0; i < c.d_head; ++i) {
      pert.k_cache[((size_t)kv * in.cache_stride + P) * c.d_head + i] = 50.0f;
      pert.v_cache[((size_t)kv * in.cache_stride + P) * c.d_head + i] = 1000.0f;
    }
  const auto after = run_attention(c, pert, 5, relevant, nullptr, nullptr);
  // Rows at positions < P: unchanged bit for bit (masked probabilities are exactly 0, and 0 * v adds exactly 0).
  // Rows at positions >= P: the perturbation (v = 1000 with a non-zero probability) must show.
  for (int t = 0; t < T; ++t) {
    const int pos = c.n_past + t;
    for (int h = 0; h < c.n_heads; ++h) {
      bool same_out = true, same_metrics = true;
      for (int i = 0; i < c.d_head; ++i) {
        const size_t o = (size_t)t * qs + (size_t)h * c.d_head + i;
        same_out = same_out && base.out[o] == after.out[o];
      }
      for (int m = 0; m < kNumRowMetrics; ++m) {
        const size_t o = ((size_t)h * T + t) * kNumRowMetrics + m;
        const float x = base.metrics[o], y = after.metrics[o];
        same_metrics = same_metrics && (x == y || (std::isnan(x) && std::isnan(y)));
      }
      if (pos < P) {
        EXPECT_TRUE(same_out) << "row " << pos << " head " << h << " output changed by future position " << P;
        EXPECT_TRUE(same_metrics) << "row " << pos << " head " << h << " metrics changed by future position " << P;
      } else {
        EXPECT_FALSE(same_out) << "row " << pos << " head " << h << " did not see position " << P;
      }
    }
  }
}

TEST(OpsAttention, SingleKeyRowCopiesValue) {
  // Hand-computed: T = 1, n_past = 0: the only row sees one key, p = 1, out = v[0] exactly; entropy 0.
  std::mt19937 rng(13);
  const AttnCase c{1, 0, 2, 1, 8};
  const auto in = make_attn_inputs(c, rng);
  const auto run = run_attention(c, in, 5, {0}, nullptr, nullptr);
  for (int h = 0; h < c.n_heads; ++h) {
    for (int i = 0; i < c.d_head; ++i) EXPECT_EQ(run.out[(size_t)h * c.d_head + i], in.v_cache[i]);
    const float* m = run.metrics.data() + (size_t)h * kNumRowMetrics;
    EXPECT_NEAR(m[kEntropyNats], 0.0, 1e-7);
    EXPECT_EQ(m[kEntropyNorm], 0.0f);
    EXPECT_EQ(m[kSinkMass], 1.0f);
    EXPECT_EQ(m[kRelevantMass], 1.0f);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Online softmax (shared_math.h)

struct TwoPass {
  double m, z, h;  // max, sum e^(x - m), entropy -sum p ln p
};

TwoPass two_pass(const std::vector<float>& x) {
  TwoPass r{-INFINITY, 0.0, 0.0};
  for (float v : x) r.m = std::max(r.m, (double)v);
  for (float v : x) r.z += std::exp((double)v - r.m);
  for (float v : x) {
    const double p = std::exp((double)v - r.m) / r.z;
    r.h -= p > 0.0 ? p * std::log(p) : 0.0;
  }
  return r;
}

// Tolerance for the online entropy: z and a accumulate n fp32 terms (<= n * 2^-24 relative each), every rescale
// adds a few roundings, and H = ln Z - A/Z has absolute error ~ (relative error) * (1 + |x - m|max). We allow
// (n + 8) * 2^-24 * 4 * (1 + range).
double online_tol(const std::vector<float>& x) {
  const auto mm = std::minmax_element(x.begin(), x.end());
  return (x.size() + 8) * kEps32 * 4.0 * (1.0 + (double)(*mm.second - *mm.first));
}

TEST(OnlineSoftmax, PushInRandomOrderWithLateMaxMatchesTwoPass) {
  std::mt19937 rng(14);
  for (int n : {1, 2, 50, 300}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    auto x = random_vec(n, rng, -10.0f, 10.0f);
    std::shuffle(x.begin(), x.end(), rng);
    if (n > 2) x[n - 3] = 25.0f;  // a new maximum arriving late forces a rescale of everything before it
    math::OnlineSoftmax s = math::online_softmax_init();
    for (float v : x) math::online_softmax_push(s, v);
    const auto ref = two_pass(x);
    const double tol = online_tol(x);
    EXPECT_EQ(s.m, (float)ref.m);
    EXPECT_NEAR(s.z, ref.z, tol * ref.z);
    EXPECT_NEAR(math::online_softmax_entropy(s), ref.h, tol) << "reference: two-pass -sum p ln p in double";
  }
}

TEST(OnlineSoftmax, IncreasingSequenceRescalesEveryStep) {
  // Worst case for rescaling: each element is a new maximum.
  std::vector<float> x(100);
  for (int i = 0; i < 100; ++i) x[i] = -5.0f + 0.1f * i;
  math::OnlineSoftmax s = math::online_softmax_init();
  for (float v : x) math::online_softmax_push(s, v);
  const auto ref = two_pass(x);
  EXPECT_NEAR(math::online_softmax_entropy(s), ref.h, online_tol(x));
}

TEST(OnlineSoftmax, HandComputedTwoElements) {
  // logits {0, ln 3}: p = {1/4, 3/4}, H = -(1/4 ln 1/4 + 3/4 ln 3/4) = 0.562335 nats. Tolerance 1e-6.
  math::OnlineSoftmax s = math::online_softmax_init();
  math::online_softmax_push(s, std::log(3.0f));
  math::online_softmax_push(s, 0.0f);
  const double h = -(0.25 * std::log(0.25) + 0.75 * std::log(0.75));
  EXPECT_NEAR(math::online_softmax_entropy(s), h, 1e-6);
  EXPECT_NEAR(h, 0.562335, 1e-6);
}

TEST(OnlineSoftmax, MergeOfHalvesMatchesTwoPass) {
  std::mt19937 rng(15);
  for (int max_in : {0, 1}) {  // the maximum in the first half, then in the second half
    SCOPED_TRACE(testing::Message() << "max in half " << max_in);
    auto x = random_vec(200, rng, -10.0f, 10.0f);
    x[max_in ? 150 : 30] = 20.0f;
    math::OnlineSoftmax a = math::online_softmax_init(), b = math::online_softmax_init();
    for (int i = 0; i < 100; ++i) math::online_softmax_push(a, x[i]);
    for (int i = 100; i < 200; ++i) math::online_softmax_push(b, x[i]);
    const auto ref = two_pass(x);
    const double tol = online_tol(x);
    math::OnlineSoftmax ab = a;
    math::online_softmax_merge(ab, b);
    math::OnlineSoftmax ba = b;
    math::online_softmax_merge(ba, a);
    EXPECT_EQ(ab.m, 20.0f);
    EXPECT_NEAR(ab.z, ref.z, tol * ref.z);
    EXPECT_NEAR(math::online_softmax_entropy(ab), ref.h, tol) << "reference: two-pass -sum p ln p in double";
    EXPECT_NEAR(math::online_softmax_entropy(ba), ref.h, tol) << "merge order reversed";
    // Merging with an empty state is the identity, either way round (exact).
    math::OnlineSoftmax e = math::online_softmax_init();
    math::online_softmax_merge(e, a);
    EXPECT_EQ(e.m, a.m);
    EXPECT_EQ(e.z, a.z);
    EXPECT_EQ(e.a, a.a);
    math::OnlineSoftmax a2 = a;
    math::online_softmax_merge(a2, math::online_softmax_init());
    EXPECT_EQ(a2.m, a.m);
    EXPECT_EQ(a2.z, a.z);
    EXPECT_EQ(a2.a, a.a);
  }
}

TEST(OnlineSoftmax, AgreesWithSoftmaxRowEntropy) {
  // Both paths compute ln Z - A/Z; on the same row they must agree with the double entropy (tolerances as above).
  std::mt19937 rng(16);
  const auto x = random_vec(77, rng, -6.0f, 6.0f);
  math::OnlineSoftmax s = math::online_softmax_init();
  for (float v : x) math::online_softmax_push(s, v);
  std::vector<float> p(x.size()), m(kNumRowMetrics);
  softmax_row(x.data(), p.data(), (int)x.size(), m.data(), 5, nullptr, 0);
  const auto ref = two_pass(x);
  EXPECT_NEAR(math::online_softmax_entropy(s), ref.h, online_tol(x));
  EXPECT_NEAR(m[kEntropyNats], ref.h, online_tol(x));
}

TEST(ExpNonpos, MatchesDoubleExpOnItsDomain) {
  // Reference: std::exp in double. Tolerance: the documented relative error bound of exp_nonpos, 2e-7, on a grid of
  // 200001 points over [-87, 0] plus the ends; inputs below -87 give exactly 0; e^0 = 1 exactly.
  double worst = 0.0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f * (float)i / 200000.0f;
    const double ref = std::exp((double)x);
    worst = std::max(worst, std::fabs(math::exp_nonpos(x) - ref) / ref);
  }
  EXPECT_LT(worst, 2e-7);
  EXPECT_EQ(math::exp_nonpos(0.0f), 1.0f);
  EXPECT_NEAR(math::exp_nonpos(-87.0f), std::exp(-87.0), 2e-7 * std::exp(-87.0));
  EXPECT_EQ(math::exp_nonpos(-87.5f), 0.0f);
  EXPECT_EQ(math::exp_nonpos(-1e30f), 0.0f);
  EXPECT_EQ(math::exp_nonpos(-INFINITY), 0.0f);
}

TEST(OpsSoftmaxRow, HugeFiniteLogitRangeGivesNoNaN) {
  // ops.h: "Safe for any finite logits (no NaN/inf out)". Logits {FLT_MAX, 0, -FLT_MAX} are finite, but the
  // difference -FLT_MAX - FLT_MAX overflows to -inf in fp32. Hand-computed: p = {1, 0, 0} (a one-hot row), so
  // H = 0, normalised 0, eff support 1, max 1, tail 0, sink 1; every metric finite.
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> logits = {big, 0.0f, -big};
  std::vector<float> p(3, NAN), m(kNumRowMetrics, NAN);
  softmax_row(logits.data(), p.data(), 3, m.data(), 2, nullptr, 0);
  EXPECT_EQ(p[0], 1.0f);
  EXPECT_EQ(p[1], 0.0f);
  EXPECT_EQ(p[2], 0.0f);
  for (int k = 0; k < kRelevantMass; ++k) EXPECT_TRUE(std::isfinite(m[k])) << "metric " << k << " = " << m[k];
  EXPECT_NEAR(m[kEntropyNats], 0.0, 1e-7);
  EXPECT_NEAR(m[kEffSupport], 1.0, 1e-7);
}

}  // namespace
}  // namespace focal::ops

namespace focal::ops {
namespace {

// The fused (flash-style) CUDA attention's per-row scheme, run on the CPU with the same shared_math.h functions:
// 128 "threads" each push a strided subset of the logits into their own online state, the states are merged in
// thread order, then a second pass forms p = online_softmax_prob(state, x). Reference: two-pass softmax and
// entropy in double. Tolerances: entropy as online_tol; probabilities 4e-6 relative (exp_nonpos < 2e-7, one
// rounding of 1/Z, Z accumulated in fp32 over <= 2000 terms in 128 partial sums).
TEST(OnlineSoftmax, FusedAttentionRowSchemeMatchesTwoPassAndSoftmaxRow) {
  std::mt19937 rng(16);
  for (int n : {1, 7, 127, 128, 129, 2000}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    auto x = random_vec(n, rng, -12.0f, 12.0f);
    if (n > 100) x[n - 2] = 30.0f;  // late maximum: every thread's state and the merge must rescale
    constexpr int kThreads = 128;
    std::vector<math::OnlineSoftmax> st(kThreads, math::online_softmax_init());
    for (int t = 0; t < kThreads; ++t)
      for (int j = t; j < n; j += kThreads) math::online_softmax_push(st[t], x[j]);
    math::OnlineSoftmax all = math::online_softmax_init();
    for (int t = 0; t < kThreads; ++t) math::online_softmax_merge(all, st[t]);
    const auto ref = two_pass(x);
    EXPECT_EQ(all.m, (float)ref.m);
    EXPECT_NEAR(math::online_softmax_entropy(all), ref.h, online_tol(x)) << "reference: two-pass in double";
    double sum = 0.0, max_p = 0.0;
    for (int j = 0; j < n; ++j) {
      const float p = math::online_softmax_prob(all, x[j]);
      const double p_ref = std::exp((double)x[j] - ref.m) / ref.z;
      EXPECT_NEAR(p, p_ref, 4e-6 * p_ref + 1e-30) << "j=" << j;
      sum += p;
      max_p = std::max(max_p, (double)p);
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_EQ(max_p, (double)(1.0f / all.z)) << "the max logit's probability is exactly 1/Z";
    // The metrics the fused kernel writes agree with the CPU softmax row's (same entropy_metrics formulas).
    std::vector<float> p_cpu(n), m_cpu(kNumRowMetrics);
    ops::softmax_row(x.data(), p_cpu.data(), n, m_cpu.data(), 5, nullptr, 0);
    float h_nats, h_norm, eff;
    math::entropy_metrics(math::online_softmax_entropy(all), n, h_nats, h_norm, eff);
    const double tol = online_tol(x);
    EXPECT_NEAR(h_nats, m_cpu[kEntropyNats], 2 * tol);
    EXPECT_NEAR(h_norm, m_cpu[kEntropyNorm], n > 1 ? 2 * tol / std::log((double)n) + 1e-7 : 0.0);
    EXPECT_NEAR(eff, m_cpu[kEffSupport], 2 * tol * eff + 1e-6);
    EXPECT_NEAR(1.0f / all.z, m_cpu[kMaxProb], 1e-6);
  }
}

TEST(SharedMath, EntropyMetricsHandComputed) {
  // H = ln 4 over 4 keys (uniform): normalised 1, effective support 4. One key: normalised 0. Negative rounding
  // residue clamps to 0 (support 1). Tolerance 1e-6.
  float h, hn, eff;
  math::entropy_metrics(std::log(4.0f), 4, h, hn, eff);
  EXPECT_NEAR(h, 1.3862944, 1e-6);
  EXPECT_NEAR(hn, 1.0, 1e-6);
  EXPECT_NEAR(eff, 4.0, 1e-5);
  math::entropy_metrics(0.0f, 1, h, hn, eff);
  EXPECT_EQ(hn, 0.0f);
  EXPECT_EQ(eff, 1.0f);
  math::entropy_metrics(-1e-8f, 3, h, hn, eff);
  EXPECT_EQ(h, 0.0f);
  EXPECT_EQ(eff, 1.0f);
}

// The top-k and tail masses of long rows (the strided-group path, n >= 128) against a sort and a sum in double: every n
// around the block size, k from 1 to 64, random rows (scaled so that about half the values fall below 1 / n and
// count in the tail), rows with many equal values, rows whose largest values share one strided lane or sit in one
// block. Tolerance: the float sum of at most 64 values in [0, 1], 1e-6 relative; the tail's float sum of up to 4097
// values, 1e-5 relative.
TEST(OpsTopkMass, LongRowsMatchSortReference) {
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  auto check = [](const std::vector<float>& p, int k, const char* what) {
    std::vector<double> sorted(p.begin(), p.end());
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    double ref = 0.0, tail = 0.0;
    for (int i = 0; i < std::min<int>(k, (int)p.size()); ++i) ref += sorted[i];
    const float inv_n = 1.0f / (float)p.size();
    for (float v : p) tail += v < inv_n ? v : 0.0;
    float m[kNumRowMetrics];
    row_metrics(p.data(), (int)p.size(), k, nullptr, 0, m);
    ASSERT_NEAR(m[kTopkMass], ref, 1e-6 * ref + 1e-12) << what << " n " << p.size() << " k " << k;
    ASSERT_NEAR(m[kTailMass], tail, 1e-5 * tail + 1e-12) << what << " n " << p.size() << " k " << k;
  };
  for (int n : {127, 128, 129, 191, 200, 256, 1000, 4097})
    for (int k : {1, 2, 5, 17, 63, 64}) {
      std::vector<float> p(n);
      for (float& v : p) v = u(rng) * 2.0f / (float)n;
      check(p, k, "random");
      for (float& v : p) v = (float)(int)(u(rng) * 4) / 4.0f;  // 4 distinct values: ties everywhere
      check(p, k, "ties");
      std::fill(p.begin(), p.end(), 0.01f);
      for (int i = 5; i < n; i += 64) p[i] = 0.5f + 0.001f * i;  // the largest values all in one strided lane
      check(p, k, "one lane");
      std::fill(p.begin(), p.end(), 0.01f);
      for (int i = 64; i < std::min(n, 128); ++i) p[i] = 0.5f + 0.001f * i;  // ... all in one block
      check(p, k, "one block");
    }
}

// ---- fp16 storage of captured probabilities (shared by the CPU and CUDA backends) ----

TEST(HalfConversion, HandComputedValues) {
  using math::float_to_half_bits;
  EXPECT_EQ(float_to_half_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(0.5f), 0x3800);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);                    // largest finite half
  EXPECT_EQ(float_to_half_bits(65519.0f), 0x7bff);                    // below the halfway point to 2^16
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);                    // halfway: ties to even = inf
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1p-11f), 0x3c00);             // tie between 0x3c00 and 0x3c01: even
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * 0x1p-11f), 0x3c02);         // tie between 0x3c01 and 0x3c02: even
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // above the tie
  EXPECT_EQ(float_to_half_bits(0x1p-14f), 0x0400);                    // smallest normal
  EXPECT_EQ(float_to_half_bits(0x1p-24f), 0x0001);                    // smallest subnormal
  EXPECT_EQ(float_to_half_bits(0x1p-25f), 0x0000);                    // tie with 0: even
  EXPECT_EQ(float_to_half_bits(0x1.8p-25f), 0x0001);
  EXPECT_EQ(float_to_half_bits(3 * 0x1p-25f), 0x0002);  // 1.5 units: tie to even (2)
  EXPECT_EQ(float_to_half_bits(0x1.ffcp-15f), 0x0400);  // rounds up into the smallest normal
  EXPECT_EQ(float_to_half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half_bits(1e30f), 0x7c00);
  const uint16_t nan = float_to_half_bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(math::half_bits_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(math::half_bits_to_float(0x3555), 0x1.554p-2f);
  EXPECT_EQ(math::half_bits_to_float(0xfbff), -65504.0f);
  EXPECT_TRUE(std::isinf(math::half_bits_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(math::half_bits_to_float(0x7e00)));
}

// Reference: the CPU's own F16C conversion instructions (round to nearest even), over every half value and a
// dense sample of float bit patterns (every 97th pattern: all exponents, many mantissas) plus the neighbourhood
// of every half boundary.
// CPUID leaf 1, ECX bit 29 (GCC's __builtin_cpu_supports knows "f16c", clang 14's does not).
bool cpu_has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

__attribute__((target("f16c"))) uint16_t f16c_round(float f) { return (uint16_t)_cvtss_sh(f, 0); }
__attribute__((target("f16c"))) float f16c_widen(uint16_t h) { return _cvtsh_ss(h); }

TEST(HalfConversion, MatchesF16cOnEveryHalfAndSampledFloats) {
  if (!cpu_has_f16c()) GTEST_SKIP() << "this CPU has no F16C instructions to compare against";
  for (uint32_t h = 0; h < 65536; ++h) {
    const float w = f16c_widen((uint16_t)h);
    const float got = math::half_bits_to_float((uint16_t)h);
    if (std::isnan(w)) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(math::float_bits(got), math::float_bits(w)) << "half bits " << h;
      ASSERT_EQ(math::float_to_half_bits(w), (uint16_t)h) << "round trip of half " << h;
      // The float just above and below each half value, and the exact midpoints to the next half.
      const uint32_t b = math::float_bits(w);
      for (uint32_t nb : {b - 1, b + 1, b + 0x1000u, b + 0xfffu, b + 0x1001u}) {
        const float f = math::bits_to_float((int)nb);
        if (std::isnan(f)) continue;
        ASSERT_EQ(math::float_to_half_bits(f), f16c_round(f)) << "float bits " << nb;
      }
    }
  }
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 97) {
    const float f = math::bits_to_float((int)(uint32_t)bits);
    if (std::isnan(f)) continue;
    ASSERT_EQ(math::float_to_half_bits(f), f16c_round(f)) << "float bits " << bits;
  }
}

// NaN payloads: narrowing keeps the sign and the payload's top 10 (fp16) or 7 (bf16) bits and sets the quiet bit, as
// F16C does; widening keeps every bit, so a quiet fp16 NaN survives fp16 -> fp32 -> fp16 unchanged.
TEST(HalfConversion, NanPayloads) {
  using math::bits_to_float;
  EXPECT_EQ(math::float_to_half_bits(bits_to_float(0x7fc00000)), 0x7e00);        // the default quiet NaN
  EXPECT_EQ(math::float_to_half_bits(bits_to_float((int)0xffc00000u)), 0xfe00);  // sign kept
  EXPECT_EQ(math::float_to_half_bits(bits_to_float(0x7fc02000)), 0x7e01);        // payload's lowest kept bit
  EXPECT_EQ(math::float_to_half_bits(bits_to_float(0x7fc01fff)), 0x7e00);        // bits below it dropped
  EXPECT_EQ(math::float_to_half_bits(bits_to_float(0x7f802000)), 0x7e01);        // signalling: made quiet
  EXPECT_EQ(math::float_to_half_bits(bits_to_float(0x7f800001)), 0x7e00);        // ... never turned into inf
  EXPECT_EQ(math::float_to_half_bits(bits_to_float(0x7fffe000)), 0x7fff);
  for (uint32_t h = 0x7e00; h <= 0x7fff; ++h) {  // every quiet fp16 NaN, both signs
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint16_t bits = (uint16_t)(h | sign);
      const float wide = math::half_bits_to_float(bits);
      ASSERT_TRUE(std::isnan(wide));
      ASSERT_EQ(math::float_bits(wide), ((uint32_t)sign << 16) | 0x7f800000u | ((h & 0x3ffu) << 13));
      ASSERT_EQ(math::float_to_half_bits(wide), bits) << std::hex << bits;
    }
  }
  EXPECT_EQ(math::float_to_bf16_bits(bits_to_float(0x7fc00000)), 0x7fc0);
  EXPECT_EQ(math::float_to_bf16_bits(bits_to_float(0x7f810000)), 0x7fc1);  // signalling: quiet, payload kept
  EXPECT_EQ(math::float_to_bf16_bits(bits_to_float(0x7f800001)), 0x7fc0);  // not rounded up into inf or 0x7f80
  EXPECT_EQ(math::float_to_bf16_bits(bits_to_float((int)0xff8a0000u)), 0xffca);
  EXPECT_EQ(math::bf16_bits_to_float(0x7fc1) != math::bf16_bits_to_float(0x7fc1), true);
  EXPECT_EQ(math::float_bits(math::bf16_bits_to_float(0xffca)), 0xffca0000u);
  if (!cpu_has_f16c()) GTEST_SKIP() << "no F16C instructions to compare NaN narrowing against";
  for (uint32_t m = 1; m < (1u << 23); m += 7)  // NaN mantissas, both signs
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float f = bits_to_float((int)(sign | 0x7f800000u | m));
      ASSERT_EQ(math::float_to_half_bits(f), f16c_round(f)) << std::hex << (sign | 0x7f800000u | m);
    }
}

}  // namespace
}  // namespace focal::ops
