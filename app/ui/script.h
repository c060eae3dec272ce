// Scripted runs of the real app (tests, screenshots, benchmarks): executes a command file (app/core/settings.h
// lists the commands) one command per frame, in order: a command that loads or runs a model is finished before the
// next one starts, and a command that fails stops the script with its line number.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "settings.h"
#include "ui.h"

struct GLFWwindow;

namespace focalscope {

class ScriptRunner {
 public:
  ScriptRunner(std::vector<ScriptCommand> cmds, std::string path) : cmds_(std::move(cmds)), path_(std::move(path)) {}
  // Called once per frame before drawing. Returns false when the script has quit or failed (error() says why).
  bool step(Ui& ui, GLFWwindow* win);
  const std::string& error() const { return error_; }
  bool failed() const { return !error_.empty(); }

 private:
  std::vector<ScriptCommand> cmds_;
  std::string path_;
  size_t pc_ = 0;
  int wait_frames_ = 0;
  uint64_t seen_version_ = ~uint64_t(0);  // AppState::state_version when last looked at
  int frames_since_change_ = 0;           // frames drawn since it changed
  int idle_frames_ = 0;
  double wait_started_ = -1.0;
  // A command whose work runs on the worker (open, open-b, prompt, truncate): the next command waits until every
  // job has finished, and the script fails at this command's line if one of them reported an error.
  const ScriptCommand* awaiting_ = nullptr;
  uint64_t errors_before_ = 0;
  // The model or capture named on the command line loads before the first command runs (a first command other than
  // `wait` found no model), and a failed load fails the script.
  bool startup_done_ = false;
  std::string error_;
};

}  // namespace focalscope
