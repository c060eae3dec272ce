// ProgressReporter (focal/progress.h): the ETA from measured step times (hand-computed values) and the output modes
// (a terminal gets \r updates; a log gets whole lines, at most one per interval besides the first and the last).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "focal/progress.h"

namespace focal {
namespace {

TEST(Progress, EtaLeavesOutTheFirstStepWhichCarriesTheSetup) {
  // A 30-layer run whose first layer took 2 s (setup) and the next ones 0.1 s: 27 layers left at 0.1 s = 2.7 s.
  // The mean over all three steps (0.733 s) would say 19.8 s: the "10x off" first estimate.
  EXPECT_NEAR(ProgressReporter::eta_seconds({2.0, 0.1, 0.1}, 30), 2.7, 1e-12);
  // After the first step alone the ETA is unknown (-1): that step x 29 would be the 10x-off first estimate.
  EXPECT_EQ(ProgressReporter::eta_seconds({2.0}, 30), -1.0);
  EXPECT_EQ(ProgressReporter::eta_seconds({0.5, 0.5}, 2), 0.0);  // done
  EXPECT_EQ(ProgressReporter::eta_seconds({}, 5), -1.0);
}

std::string run_steps(int terminal, double interval_s, int n) {
  std::FILE* f = std::tmpfile();
  {
    ProgressReporter p("capture standard: layer", f, interval_s, terminal);
    for (int i = 1; i <= n; ++i) p.update(i, n);
  }
  std::rewind(f);
  std::string s;
  for (int ch; (ch = std::fgetc(f)) != EOF;) s += (char)ch;
  std::fclose(f);
  return s;
}

TEST(Progress, ALogGetsWholeLinesAtMostOnePerIntervalATerminalGetsCarriageReturns) {
  const std::string log = run_steps(0, 5.0, 30);
  EXPECT_EQ(log.find('\r'), std::string::npos) << log;
  // 30 quick steps within one 5 s interval: the first step and the last, two lines.
  size_t lines = 0;
  for (char ch : log) lines += ch == '\n';
  EXPECT_EQ(lines, 2u) << log;
  EXPECT_EQ(log.rfind("capture standard: layer 1/30  ", 0), 0u) << log;
  EXPECT_NE(log.find("layer 1/30  0.0s elapsed, ETA after step 2\n"), std::string::npos) << log;
  EXPECT_NE(log.find("capture standard: layer 30/30  done in "), std::string::npos) << log;
  // Interval 0: every step is a line.
  const std::string every = run_steps(0, 0.0, 5);
  size_t n = 0;
  for (char ch : every) n += ch == '\n';
  EXPECT_EQ(n, 5u);
  // A terminal: one line rewritten in place.
  const std::string tty = run_steps(1, 5.0, 3);
  size_t cr = 0;
  for (char ch : tty) cr += ch == '\r';
  EXPECT_EQ(cr, 3u);
  EXPECT_EQ(tty.back(), '\n');
}

}  // namespace
}  // namespace focal
