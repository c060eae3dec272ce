// Progress of long work (layers of a run, temperatures of a sweep, the compare and write phases) on a stream. On a
// terminal one line is rewritten in place (\r); otherwise (a log file, a pipe, CI) a full line is printed for the
// first step, then at most every interval_s seconds, and for the last step, so logs stay readable. The ETA comes
// from the measured step times, leaving out the first step, which carries the setup (allocation, the embedding,
// thread start-up) and made the first estimate about 10x too long.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace focal {

class ProgressReporter {
 public:
  // what: e.g. "capture standard: layer"; out: the stream (stderr); terminal: -1 detect with isatty, 0 or 1 force.
  explicit ProgressReporter(std::string what, std::FILE* out = stderr, double interval_s = 5.0, int terminal = -1);
  // done of total steps finished (call with done = 1 .. total, in order).
  void update(int done, int total);
  // Seconds left for `total` steps after step_seconds.size() finished, from their measured durations: the mean of
  // the steps after the first, times the steps left. The first step carries the run's setup (a capture's first
  // layer can take 10x the others), so after it alone the ETA is unknown: -1 (printed as "ETA after step 2").
  static double eta_seconds(const std::vector<double>& step_seconds, int total);

 private:
  std::string what_;
  std::FILE* out_;
  double interval_s_;
  bool terminal_;
  std::chrono::steady_clock::time_point t0_, last_step_, last_print_;
  std::vector<double> steps_;
  bool printed_ = false;
};

}  // namespace focal
