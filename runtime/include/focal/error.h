// The one exception type of the focalscope runtime: a user-facing message that names the file, field or option at
// fault and what would fix it. The CLI prints it and exits non-zero; the app shows it and keeps running.
#pragma once

#include <stdexcept>
#include <string>

namespace focal {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

}  // namespace focal
