// Warnings the runtime and the figures report when they go on with less (a malformed optional field, a comparison
// left out): by default one line on stderr; a front end may route them elsewhere. Thread-safe; the sink is called
// under a lock, from whichever thread reported.
#pragma once

#include <functional>
#include <string>

namespace focal {

// Reports `msg` (no trailing newline) through the current sink.
void log_warning(const std::string& msg);

// Replaces the sink; an empty function restores the default (stderr, "focal: warning: msg"). Returns the old one.
std::function<void(const std::string&)> set_warning_sink(std::function<void(const std::string&)> sink);

}  // namespace focal
