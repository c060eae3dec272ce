// Tokenizer interface: sentencepiece (a tokenizer.model, or a llama vocabulary from GGUF) and GPT-2 byte-level BPE
// (from GGUF or an HF tokenizer.json). The implementations are private; no sentencepiece header leaks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace focal {

std::string display_piece(const std::string& piece);

class Tokenizer {
 public:
  // Throws Error naming the file if it is missing or not a sentencepiece model.
  static std::unique_ptr<Tokenizer> load(const std::string& path);
  virtual ~Tokenizer() = default;

  virtual std::vector<int32_t> encode(const std::string& text, bool add_bos) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual std::string piece(int32_t id) const = 0;  // the raw piece, e.g. "\u2581the", "<0x0A>"
  // The token as a person should read it (captures store this): spaces as spaces, "\n" for a newline, "\\" for a
  // backslash (so a token spelling backslash-n reads apart from a newline), "\xNN" for a byte that is not printable
  // text. Default: display_piece(piece(id)) for sentencepiece pieces.
  virtual std::string display(int32_t id) const { return display_piece(piece(id)); }
  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;  // -1 if none
  virtual int eos_id() const = 0;

  // What it was read from, and its kind: "tokenizer.json (sentencepiece-style BPE)", "GGUF 'gpt2' (byte-level
  // BPE)". `focal info` shows it and files record it (Provenance::tokenizer): the same model directory tokenizes
  // otherwise with its tokenizer.json than with its tokenizer.model.
  std::string source;
};

// Generated text, streamed a token at a time: the end of `bytes`' longest prefix that does not stop inside a UTF-8
// character (a byte-level tokenizer spells an emoji over several tokens; the rest waits for the next token).
size_t utf8_whole_end(const std::string& bytes);
// `bytes` as UTF-8 text: each ill-formed sequence (a stray continuation byte, a character cut short) becomes one
// U+FFFD, as Python's decode(errors="replace") and transformers' decode write it.
std::string utf8_replaced(const std::string& bytes);
// The first byte of `text` that starts no UTF-8 character: its offset and 1-based line and column (in bytes); false
// when the text is UTF-8.
struct Utf8Fault {
  size_t offset = 0, line = 1, column = 1;
};
bool find_non_utf8(const std::string& text, Utf8Fault* fault);
// Throws Error unless `text` is UTF-8: "<what> is not UTF-8 text: byte 0xNN at offset I (line L) ...", naming the
// way to convert it. what: e.g. "data file 'x.txt'", "prompt file 'p.txt'".
void require_utf8_text(const std::string& text, const std::string& what, const std::string& field = "");

// A piece as a person should read it: "\u2581" (word start) becomes a space, byte-fallback pieces "<0xNN>" become the
// character when printable and "\n", "\t", "\xNN" otherwise; the rest as display_text.
std::string display_piece(const std::string& piece);
// Token bytes as one line of readable text, the rule of every tokenizer's display(): "\n", "\t", "\r", "\\" for a
// backslash, "\xNN" for another control byte, DEL or a byte that starts no UTF-8 character, "\uNNNN" for the C1
// controls U+0080..U+009F and the line / paragraph separators U+2028 / U+2029 (a terminal or a table would break
// its line at them: inspect printed a piece's raw carriage return).
std::string display_text(const std::string& bytes);
// The bytes a display text (display_text, display_piece) stands for: its escapes undone, so that pieces stored for
// display (a capture's `pieces`) join into the text they were tokenized from (the app's prompt box of a capture
// opened without its model: "\n" was typed back as a backslash and an n).
std::string bytes_of_display(const std::string& display);

}  // namespace focal
