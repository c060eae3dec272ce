// The app's open path, without a window, for the bad-input corpus (tests/badinput/run_corpus.py): opens a good
// model, then PATH, the way File > Open does (AppState::open_path on the worker). Prints the app's message to stderr.
// Exit 1: the app refused PATH with an error message and kept the good session; 0: PATH opened; 4: the good model
// did not open; 5: the refusal lost the session; 6: the open did not finish within 10 s.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "app_state.h"

namespace {

bool wait_idle(focalscope::AppState& s, double limit_s) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    s.poll();
    if (!s.busy()) {
      s.poll();
      return true;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > limit_s) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: app_open_probe GOOD_MODEL PATH\n");
    return 2;
  }
  focalscope::AppState s;
  s.device = focal::Device::kCpu;
  s.prompt = "The key is";  // the session the user would lose: a model with a prompt run
  s.open_path(argv[1]);
  const bool opened = wait_idle(s, 20);
  if (!opened || !s.has_model() || s.n_tokens() == 0 || s.message_is_error) {
    std::fprintf(stderr, "app_open_probe: the good model '%s' did not open (%s): %s\n", argv[1],
                 opened ? "finished" : "timed out", s.message.c_str());
    return 4;
  }
  const std::string good = s.loaded.path;
  s.open_path(argv[2]);
  if (!wait_idle(s, 10)) {
    std::fprintf(stderr, "app_open_probe: opening '%s' did not finish within 10 s\n", argv[2]);
    return 6;
  }
  std::fprintf(stderr, "%s\n", s.message.c_str());
  if (!s.message_is_error) return 0;
  if (!s.has_model() || s.loaded.path != good || s.n_tokens() == 0) {
    std::fprintf(stderr, "app_open_probe: the refusal lost the loaded session\n");
    return 5;
  }
  return 1;
}
