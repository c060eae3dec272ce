// Which font draws a character, for other front ends (the app builds its font atlas from the same files as the
// figures): DejaVu Sans, then the fallback fonts for what it lacks (CJK, emoji, other scripts; docs/figures.md).
#pragma once

#include <cstdint>
#include <string>

namespace focal::figures {

// The file of the font that draws code_point in the figures: DejaVu Sans's when it has the character, else the
// first installed fallback font's that has it, else "" (no font here has it). Throws focal::Error if DejaVu Sans
// is not installed.
std::string font_file_for(uint32_t code_point);

}  // namespace focal::figures
