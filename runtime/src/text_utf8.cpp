// UTF-8 at the edges of text: streaming generated text by whole characters, replacing what is not UTF-8, and refusing
// input files that are not UTF-8 (focal/tokenizer.h).
#include <cstdio>
#include <string>

#include "focal/error.h"
#include "focal/tokenizer.h"

namespace focal {

size_t utf8_whole_end(const std::string& bytes) {
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const unsigned char c = (unsigned char)bytes[n - back];
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back for its lead
    const size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return back < len ? n - back : n;  // the lead's character lacks bytes: stop before it
  }
  return n;
}

std::string utf8_replaced(const std::string& bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = utf8_sequence_length(bytes, i);
    if (n > 0) {
      out.append(bytes, i, n);
      i += n;
      continue;
    }
    // One U+FFFD for a lead byte and the continuation bytes it was given before the sequence broke off.
    const unsigned char c = (unsigned char)bytes[i];
    const size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    size_t k = 1;
    while (k < len && i + k < bytes.size() && ((unsigned char)bytes[i + k] & 0xC0) == 0x80) ++k;
    out += "\xEF\xBF\xBD";
    i += k;
  }
  return out;
}

bool find_non_utf8(const std::string& text, Utf8Fault* fault) {
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence_length(text, i);
    if (n == 0) {
      *fault = Utf8Fault{i, line, i - line_start + 1};
      return true;
    }
    if (text[i] == '\n') ++line, line_start = i + 1;
    i += n;
  }
  return false;
}

void require_utf8_text(const std::string& text, const std::string& what, const std::string& field) {
  Utf8Fault f;
  if (!find_non_utf8(text, &f)) return;
  char b[8];
  std::snprintf(b, sizeof b, "0x%02x", (unsigned)(unsigned char)text[f.offset]);
  throw Error(field, what + " is not UTF-8 text: byte " + b + " at offset " + std::to_string(f.offset) + " (line " +
                         std::to_string(f.line) +
                         ") starts no UTF-8 character; convert it (iconv -f latin1 -t utf-8, say) or give UTF-8 text");
}

}  // namespace focal
