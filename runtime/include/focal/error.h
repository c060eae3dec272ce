// The one exception type of the focalscope runtime: a user-facing message that names the file or field at fault and
// what would fix it, in the API's words (never a CLI option). The CLI prints it and exits non-zero; the app shows it
// and keeps running.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

namespace focal {

// The length of the well-formed UTF-8 sequence at s[i] (1 to 4), or 0 where the byte there starts none (a stray
// continuation byte, an overlong form, a surrogate, a code point past U+10FFFF, a sequence cut short).
inline size_t utf8_sequence_length(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned c = b(i);
  if (c < 0x80) return 1;
  size_t len = 0;
  unsigned cp = 0, min = 0;
  if ((c & 0xE0) == 0xC0)
    len = 2, cp = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0)
    len = 3, cp = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0)
    len = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  return (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) ? 0 : len;
}

// s with every byte that is not part of well-formed UTF-8 written as \xNN: a message quoting a damaged name stays
// text (Python raised its error with an empty message, a terminal showed a replacement glyph).
inline std::string utf8_escaped(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n > 0) {
      out.append(s, i, n);
      i += n;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(s[i]));
      out += hex;
      ++i;
    }
  }
  return out;
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(utf8_escaped(msg)) {}
  // A mistake in one field of a request the caller filled in (TempSpec::layer_temp, CaptureRequest::queries, ...):
  // the message names the field and its value in the API's own words (`layer_temp[7] = -1 ...`); field() lets a
  // front end point at its own control for that field (the CLI at its option, the app at its slider).
  Error(std::string field, const std::string& msg) : std::runtime_error(utf8_escaped(msg)), field_(std::move(field)) {}
  const std::string& field() const { return field_; }  // empty when the error is not about one field

 private:
  std::string field_;
};

}  // namespace focal
