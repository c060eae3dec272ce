// ProgressReporter (focal/progress.h): \r updates on a terminal, a line per interval elsewhere, ETA from step times.
#include "focal/progress.h"

#include <unistd.h>

#include <cstdio>

namespace focal {

ProgressReporter::ProgressReporter(std::string what, std::FILE* out, double interval_s, int terminal)
    : what_(std::move(what)), out_(out), interval_s_(interval_s) {
  terminal_ = terminal >= 0 ? terminal == 1 : ::isatty(::fileno(out_)) == 1;
  t0_ = last_step_ = last_print_ = std::chrono::steady_clock::now();
}

double ProgressReporter::eta_seconds(const std::vector<double>& step_seconds, int total) {
  const size_t n = step_seconds.size();
  if ((int)n >= total) return 0.0;
  if (n < 2) return -1.0;  // only the setup-laden first step (or nothing) measured
  double sum = 0.0;
  for (size_t i = 1; i < n; ++i) sum += step_seconds[i];
  return sum / (double)(n - 1) * (double)(total - (int)n);
}

void ProgressReporter::update(int done, int total) {
  const auto now = std::chrono::steady_clock::now();
  steps_.push_back(std::chrono::duration<double>(now - last_step_).count());
  last_step_ = now;
  const double el = std::chrono::duration<double>(now - t0_).count();
  const double eta = eta_seconds(steps_, total);
  const bool last = done >= total;
  char eta_text[48];
  if (eta < 0)
    std::snprintf(eta_text, sizeof eta_text, "ETA after step 2");
  else
    std::snprintf(eta_text, sizeof eta_text, "ETA %.1fs", eta);
  if (terminal_) {
    // Padded: "ETA after step 2" is longer than "ETA 2.7s", whose redraw must not leave its tail behind.
    std::fprintf(out_, "\r%s %d/%d  %.1fs elapsed, %-18s", what_.c_str(), done, total, el, eta_text);
    if (last) std::fprintf(out_, "\n");
  } else {
    if (printed_ && !last && std::chrono::duration<double>(now - last_print_).count() < interval_s_) return;
    if (last)
      std::fprintf(out_, "%s %d/%d  done in %.1fs\n", what_.c_str(), done, total, el);
    else
      std::fprintf(out_, "%s %d/%d  %.1fs elapsed, %s\n", what_.c_str(), done, total, el, eta_text);
    printed_ = true;
    last_print_ = now;
  }
  std::fflush(out_);
}

}  // namespace focal
