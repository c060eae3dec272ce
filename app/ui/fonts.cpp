// The app's font atlas: DejaVu Sans at two sizes and DejaVu Sans Mono, with the ranges the panels draw (Latin,
// Greek, Cyrillic, arrows, maths, sentencepiece's U+2581), plus the characters of the shown text (prompt, tokens,
// generation, messages) that the atlas lacks, merged from the font the figures draw them with (DejaVu Sans itself
// for its other scripts, a fallback font for CJK and the rest: focal_figures/fonts.h). Those are added when the text
// first shows them, by rebuilding the atlas between frames; a character no font here has stays ImGui's "?".
#include <imgui.h>
#include <imgui_impl_opengl3.h>
#include <imgui_internal.h>
#include <sys/stat.h>

#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "focal/error.h"
#include "focal_figures/fonts.h"
#include "ui.h"

namespace focalscope {
namespace {

const char* const kSans = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
const char* const kMono = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf";

bool file_exists(const char* p) {
  struct stat st {};
  return stat(p, &st) == 0;
}

const ImWchar* base_ranges() {
  static ImVector<ImWchar> ranges = [] {
    ImVector<ImWchar> r;
    ImFontGlyphRangesBuilder b;
    b.AddRanges(ImGui::GetIO().Fonts->GetGlyphRangesDefault());
    static const ImWchar extra[] = {0x0100, 0x024F, 0x0370, 0x03FF, 0x0400, 0x04FF, 0x2010, 0x205E, 0x2190,
                                    0x21FF, 0x2200, 0x22FF, 0x2423, 0x2423, 0x2580, 0x259F, 0};  // ␣: a space token
    b.AddRanges(extra);
    b.BuildRanges(&r);
    return r;
  }();
  return ranges.Data;
}

// One font at `size` with the extra characters merged in from their files.
ImFont* add_font(Ui& ui, const char* file, float size) {
  ImGuiIO& io = ImGui::GetIO();
  ImFont* f = io.Fonts->AddFontFromFileTTF(file, size, nullptr, base_ranges());
  ImFontConfig merge;
  merge.MergeMode = true;
  for (const auto& [path, ranges] : ui.glyph_ranges)
    io.Fonts->AddFontFromFileTTF(path.c_str(), size, &merge, ranges.data());
  return f;
}

void add_fonts(Ui& ui) {
  ImGuiIO& io = ImGui::GetIO();
  io.Fonts->Clear();
  ui.font = ui.font_small = ui.font_mono = nullptr;
  if (file_exists(kSans)) {
    ui.font = add_font(ui, kSans, 15.0f);
    ui.font_small = add_font(ui, kSans, 13.0f);
  }
  if (file_exists(kMono)) ui.font_mono = add_font(ui, kMono, 14.0f);
  if (!ui.font) ui.font = io.Fonts->AddFontDefault();
}

// Calls f(code point) for each character of UTF-8 text, as ImGui decodes it (U+FFFD for a broken sequence).
template <typename F>
void for_each_code_point(const std::string& s, F f) {
  const char* p = s.data();
  const char* end = p + s.size();
  while (p < end) {
    unsigned int c = 0;
    const int n = ImTextCharFromUtf8(&c, p, end);
    p += n > 0 ? n : 1;
    f(c);
  }
}

// The shown text's characters the atlas lacks, added to ui.glyph_ranges by the file that has them; true if any.
bool collect_missing(Ui& ui, const std::string& s) {
  bool added = false;
  for_each_code_point(s, [&](unsigned c) {
    if (c < 0x80 || c > 0xFFFF || c == 0xFFFD) return;  // ASCII is built in; ImWchar holds the BMP only
    if (!ui.glyphs_tried.insert(c).second) return;
    if (ui.font && ui.font->FindGlyphNoFallback((ImWchar)c)) return;
    std::string file;
    try {
      file = focal::figures::font_file_for(c);
    } catch (const focal::Error&) {  // no DejaVu Sans: the app runs on ImGui's own font
    }
    if (file.empty()) return;
    std::vector<ImWchar>& r = ui.glyph_ranges[file];
    if (!r.empty()) r.pop_back();  // the terminating 0
    r.push_back((ImWchar)c);
    r.push_back((ImWchar)c);
    r.push_back(0);
    added = true;
  });
  return added;
}

}  // namespace

void build_fonts(Ui& ui) {
  add_fonts(ui);
  ImGui::GetIO().Fonts->Build();
}

bool add_glyphs_for_shown_text(Ui& ui, bool texture_exists) {
  const AppState& st = ui.st;
  // Cheap test for a change: hashes of the prompt and the message, the pieces' count and last piece.
  const std::hash<std::string> h;
  size_t sig = h(st.prompt) ^ (h(st.message) * 3) ^ (st.file.pieces.size() * 0x9E3779B97F4A7C15ull);
  if (!st.file.pieces.empty()) sig ^= h(st.file.pieces.back()) * 7;
  if (st.gen) {
    std::lock_guard<std::mutex> lock(st.gen->mu);
    sig ^= (st.gen->pieces.size() + 1) * 0xC2B2AE3D27D4EB4Full;
    if (!st.gen->pieces.empty()) sig ^= h(st.gen->pieces.back()) * 11;
  }
  if (sig == ui.shown_text_sig) return false;
  ui.shown_text_sig = sig;
  bool added = collect_missing(ui, st.prompt);
  added |= collect_missing(ui, st.message);
  for (const std::string& p : st.file.pieces) added |= collect_missing(ui, p);
  if (st.gen) {
    std::lock_guard<std::mutex> lock(st.gen->mu);
    for (const std::string& p : st.gen->pieces) added |= collect_missing(ui, p);
  }
  if (!added) return false;
  if (texture_exists) ImGui_ImplOpenGL3_DestroyFontsTexture();
  build_fonts(ui);
  if (texture_exists) ImGui_ImplOpenGL3_CreateFontsTexture();
  return true;
}

std::vector<unsigned> glyphs_missing(const Ui& ui) {
  std::vector<unsigned> out;
  std::set<unsigned> seen;
  auto scan = [&](const std::string& s) {
    for_each_code_point(s, [&](unsigned c) {
      if (c < 0x20 || c == 0xFFFD || !seen.insert(c).second) return;
      if (!ui.font || !ui.font->FindGlyphNoFallback((ImWchar)c)) out.push_back(c);
    });
    // ImGui 1.86 decodes a character past the BMP (an emoji) as U+FFFD, skipped above, and draws it as "?": these
    // are decoded here (a four-byte sequence).
    for (size_t i = 0; i + 3 < s.size(); ++i) {
      const auto b = [&](size_t k) { return (unsigned)(unsigned char)s[i + k]; };
      if (b(0) < 0xF0 || b(0) > 0xF4 || (b(1) & 0xC0) != 0x80 || (b(2) & 0xC0) != 0x80 || (b(3) & 0xC0) != 0x80)
        continue;
      const unsigned c = ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
      if (c > 0xFFFF && c <= 0x10FFFF && seen.insert(c).second) out.push_back(c);
      i += 3;
    }
  };
  scan(ui.st.prompt);
  scan(ui.prompt_buf);  // the prompt box's own text (a capture opened alone: its tokens' text, not st.prompt)
  for (const std::string& piece : ui.st.file.pieces) scan(piece);
  return out;
}

}  // namespace focalscope
