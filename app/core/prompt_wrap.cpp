// SoftWrap (prompt_wrap.h): soft line breaks in a fixed-length edit buffer.
#include "prompt_wrap.h"

#include <algorithm>
#include <cstddef>

namespace focalscope {

void SoftWrap::reset(const std::string& text) {
  shadow = text;
  soft.assign(text.size(), false);
}

bool SoftWrap::reflow(char* buf, size_t len, float width,
                      const std::function<float(const char*, const char*)>& measure) {
  // 1. The user's edit: the bytes between the common prefix and suffix of shadow and buf are new (not soft).
  const size_t old_len = shadow.size();
  size_t pre = 0;
  while (pre < old_len && pre < len && shadow[pre] == buf[pre]) ++pre;
  size_t suf = 0;
  while (suf < old_len - pre && suf < len - pre && shadow[old_len - 1 - suf] == buf[len - 1 - suf]) ++suf;
  std::vector<bool> marks(len, false);
  std::copy(soft.begin(), soft.begin() + (std::ptrdiff_t)pre, marks.begin());
  std::copy(soft.end() - (std::ptrdiff_t)suf, soft.end(), marks.end() - (std::ptrdiff_t)suf);
  // 2. Unwrap, then wrap again greedily: a line breaks at the last space before the word that overflows it.
  std::string t(buf, len);
  for (size_t i = 0; i < len; ++i)
    if (marks[i] && t[i] == '\n') t[i] = ' ';
  std::fill(marks.begin(), marks.end(), false);
  if (width > 0) {
    size_t line = 0;  // first byte of the current line
    while (line < len) {
      size_t end = t.find('\n', line);  // a hard break ends the paragraph
      if (end == std::string::npos) end = len;
      size_t last_space = std::string::npos;
      for (size_t i = line; i < end; ++i) {
        if (t[i] == ' ') last_space = i;
        // Measure at word ends only (a space or the paragraph's end follows).
        if (i + 1 < end && t[i + 1] != ' ') continue;
        if (measure(t.data() + line, t.data() + i + 1) > width && last_space != std::string::npos &&
            last_space > line) {
          marks[last_space] = true;
          line = last_space + 1;
          last_space = std::string::npos;
          i = line - 1;  // re-measure the overflowing word on its new line
        }
      }
      line = end + 1;
    }
  }
  bool changed = false;
  for (size_t i = 0; i < len; ++i) {
    const char want = marks[i] ? '\n' : t[i];
    if (buf[i] != want) {
      buf[i] = want;
      changed = true;
    }
  }
  shadow.assign(buf, len);
  soft = std::move(marks);
  return changed;
}

std::string SoftWrap::text(const char* buf, size_t len) const {
  std::string t(buf, len);
  if (shadow == t)
    for (size_t i = 0; i < len; ++i)
      if (soft[i]) t[i] = ' ';
  return t;
}

}  // namespace focalscope
