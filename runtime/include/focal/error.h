// The one exception type of the focalscope runtime: a user-facing message that names the file or field at fault and
// what would fix it, in the API's words (never a CLI option). The CLI prints it and exits non-zero; the app shows it
// and keeps running.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace focal {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
  // A mistake in one field of a request the caller filled in (TempSpec::layer_temp, CaptureRequest::queries, ...):
  // the message names the field and its value in the API's own words (`layer_temp[7] = -1 ...`); field() lets a
  // front end point at its own control for that field (the CLI at its option, the app at its slider).
  Error(std::string field, const std::string& msg) : std::runtime_error(msg), field_(std::move(field)) {}
  const std::string& field() const { return field_; }  // empty when the error is not about one field

 private:
  std::string field_;
};

}  // namespace focal
