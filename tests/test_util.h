// Shared helpers for the focalscope tests: an observer that records every attention row, tolerance checks
// (allclose / expect_allclose for two code paths) and temporary directories.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "focal/model.h"

namespace focal::test {

// Bounded wait for another thread: calls step() and checks done() every millisecond until done() holds. After
// `limit` it records a test failure naming `what` and returns false, so a hang becomes a clear failure (under
// ThreadSanitizer too) instead of a test that never ends.
template <class Done, class Step>
bool wait_until(Done done, Step step, const std::string& what, std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto t0 = std::chrono::steady_clock::now();
  while (!done()) {
    if (std::chrono::steady_clock::now() - t0 > limit) {
      ADD_FAILURE() << "timed out after " << limit.count() << " s waiting for " << what;
      return false;
    }
    step();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}
template <class Done>
bool wait_until(Done done, const std::string& what, std::chrono::seconds limit = std::chrono::seconds(60)) {
  return wait_until(
      done, [] {}, what, limit);
}

// Records probabilities and raw scores of every (layer, head) into [L][H][T_total][T_total] arrays, plus metrics,
// row scales and tau as reported by the forward.
class RecordingObserver : public ForwardObserver {
 public:
  RecordingObserver(int n_layers, int n_heads, int t_total)
      : L(n_layers),
        H(n_heads),
        T(t_total),
        probs((size_t)L * H * T * T, 0.0f),
        raw((size_t)L * H * T * T, 0.0f),
        metrics((size_t)L * H * T * kNumRowMetrics, NAN),
        scale((size_t)L * H * T, NAN),
        tau((size_t)L * T, NAN) {}
  bool wants_metrics() const override { return true; }
  bool wants_rows(int, int) const override { return true; }
  void on_rows(int l, int h, int row0, int n_rows, int stride, const float* p, const float* r) override {
    for (int i = 0; i < n_rows; ++i)
      for (int j = 0; j <= row0 + i; ++j) {
        probs[at(l, h, row0 + i, j)] = p[(size_t)i * stride + j];
        raw[at(l, h, row0 + i, j)] = r[(size_t)i * stride + j];
      }
  }
  void on_layer(const LayerRecord& rec) override {
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < rec.n_tokens; ++i) {
        for (int m = 0; m < kNumRowMetrics; ++m)
          metrics[(((size_t)rec.layer * H + h) * T + rec.pos0 + i) * kNumRowMetrics + m] =
              rec.metrics[((size_t)h * rec.n_tokens + i) * kNumRowMetrics + m];
        scale[((size_t)rec.layer * H + h) * T + rec.pos0 + i] = rec.row_scale[(size_t)h * rec.n_tokens + i];
      }
    if (rec.tau)
      for (int i = 0; i < rec.n_tokens; ++i) tau[(size_t)rec.layer * T + rec.pos0 + i] = rec.tau[i];
  }
  size_t at(int l, int h, int i, int j) const { return (((size_t)l * H + h) * T + i) * T + j; }
  float metric(int l, int h, int i, int m) const { return metrics[(((size_t)l * H + h) * T + i) * kNumRowMetrics + m]; }

  int L, H, T;
  std::vector<float> probs, raw, metrics, scale, tau;
};

// max |a - b| / max |ref|
inline double rel_max_err(const float* a, const float* ref, size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; ++i) {
    num = std::max(num, (double)std::fabs(a[i] - ref[i]));
    den = std::max(den, (double)std::fabs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

// Closeness of two code paths that compute the same values with fp32 sums in another order (another GEMM shape, thread
// count, ISA or OpenBLAS kernel): every element must satisfy |actual - expected| <= atol + rtol * |expected|. NaN
// matches only NaN and an infinity only the same infinity (metrics undefined on both sides). A failure names `what`,
// the element furthest past its tolerance (index, both values, the difference, the tolerance) and how many failed.
// Callers state why their rtol / atol hold; bit-exact comparisons stay EXPECT_EQ, where the same code runs on the same
// shapes and threads.
template <class A, class E>
::testing::AssertionResult allclose(const A* actual, const E* expected, size_t n, double rtol, double atol,
                                    const std::string& what) {
  size_t n_bad = 0, worst = 0;
  double worst_ratio = -1.0;
  for (size_t i = 0; i < n; ++i) {
    const double a = (double)actual[i], e = (double)expected[i];
    double ratio;  // |a - e| over its tolerance; > 1 fails
    if (std::isnan(a) || std::isnan(e)) {
      ratio = std::isnan(a) && std::isnan(e) ? 0.0 : INFINITY;
    } else if (std::isinf(a) || std::isinf(e)) {
      ratio = a == e ? 0.0 : INFINITY;
    } else {
      const double tol = atol + rtol * std::fabs(e);
      const double d = std::fabs(a - e);
      ratio = d == 0.0 ? 0.0 : tol > 0.0 ? d / tol : INFINITY;
    }
    if (ratio > 1.0) ++n_bad;
    if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
  }
  if (n_bad == 0) return ::testing::AssertionSuccess();
  const double a = (double)actual[worst], e = (double)expected[worst];
  std::ostringstream msg;  // gtest's own stream would print 1e-05 as 1.0000000000000001e-05
  msg << what << ": " << n_bad << " of " << n << " elements differ by more than atol " << atol << " + rtol " << rtol
      << " * |expected|; worst at [" << worst << "]: actual " << std::setprecision(9) << a << ", expected " << e
      << ", |diff| " << std::setprecision(3) << std::fabs(a - e) << " > tolerance " << atol + rtol * std::fabs(e);
  return ::testing::AssertionFailure() << msg.str();
}

// Containers with data() and size() (std::vector<float>, std::vector<double>, ...); sizes must be equal.
template <class CA, class CE>
::testing::AssertionResult allclose(const CA& actual, const CE& expected, double rtol, double atol,
                                    const std::string& what) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << what << ": size " << actual.size() << ", expected " << expected.size();
  return allclose(actual.data(), expected.data(), actual.size(), rtol, atol, what);
}

// allclose as a non-fatal check reported at the caller's line (GCC and Clang fill in __builtin_FILE / __builtin_LINE
// at the call site); returns whether it held.
template <class CA, class CE>
bool expect_allclose(const CA& actual, const CE& expected, double rtol, double atol, const std::string& what,
                     const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  const ::testing::AssertionResult r = allclose(actual, expected, rtol, atol, what);
  if (!r) ADD_FAILURE_AT(file, line) << r.message();
  return (bool)r;
}

// The directories make_temp_dir made, removed with their contents when the test process ends (thousands were
// left in /tmp); FOCAL_KEEP_TEST_DIRS=1 keeps them to look at.
class TempDirs {
 public:
  void add(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mutex_);
    dirs_.push_back(dir);
  }
  ~TempDirs() {
    const char* keep = std::getenv("FOCAL_KEEP_TEST_DIRS");
    if (keep && *keep && std::string(keep) != "0") return;
    std::error_code ec;
    for (const std::string& d : dirs_) std::filesystem::remove_all(d, ec);
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> dirs_;
};
inline TempDirs g_temp_dirs;

inline std::string make_temp_dir(const std::string& tag) {
  std::string tmpl =
      (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : std::string("/tmp")) + "/focal_" + tag + "_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) return "";
  g_temp_dirs.add(buf.data());
  return buf.data();
}

}  // namespace focal::test
