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
  // The token as a person should read it (captures store this): spaces as spaces, "\n" for a newline, "\xNN" for
  // a byte that is not printable text. Default: display_piece(piece(id)) for sentencepiece pieces.
  virtual std::string display(int32_t id) const { return display_piece(piece(id)); }
  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;  // -1 if none
  virtual int eos_id() const = 0;
};

// A piece as a person should read it: "\u2581" (word start) becomes a space, byte-fallback pieces "<0xNN>" become the
// character when printable and "\n", "\t", "\xNN" otherwise.
std::string display_piece(const std::string& piece);

}  // namespace focal
