// Soft wrapping for the prompt editor. Dear ImGui 1.86's multiline input breaks lines only at '\n', so the editor
// wraps by turning the space before an overflowing word into a '\n' marked soft. A space and a '\n' are one byte
// each: the buffer's length and every cursor position stay as they are while the text reflows. The prompt itself
// (what runs) is the buffer with its soft breaks turned back into spaces; a newline the user typed stays hard.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace focalscope {

struct SoftWrap {
  std::string shadow;      // the buffer as this object last left it
  std::vector<bool> soft;  // [shadow.size()]: the '\n' at i is a soft break (a space of the prompt)

  // Starts editing `text` (no soft breaks yet).
  void reset(const std::string& text);
  // Brings the marks up to date with `buf` after the user's edit (the inserted bytes are the user's: a typed
  // newline is hard), then reflows `buf` in place to `width`: measure(begin, end) is the drawn width of those
  // bytes. Returns true when it changed a byte of buf.
  bool reflow(char* buf, size_t len, float width, const std::function<float(const char*, const char*)>& measure);
  // The prompt: buf with the soft breaks as spaces.
  std::string text(const char* buf, size_t len) const;
};

}  // namespace focalscope
