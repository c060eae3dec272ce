// Tokenizers built from a vocabulary held in memory (the GGUF tokenizer.ggml.* metadata); runtime-internal.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "focal/tokenizer.h"

namespace focal {

// GGUF token types (the same numbering as sentencepiece's piece types).
enum TokenType : int {
  kTokNormal = 1,
  kTokUnknown = 2,
  kTokControl = 3,
  kTokUserDefined = 4,
  kTokUnused = 5,
  kTokByte = 6
};

// Pre-tokenizer of a byte-level BPE vocabulary (tokenizer.ggml.pre).
enum class BpePre {
  kGpt2,        // GPT-2's regex: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kDigitsGpt2,  // every \p{N} character on its own, then GPT-2's regex on the rest (smollm, starcoder, refact)
};

struct BpeVocab {
  std::vector<std::string> tokens;  // [vocab] byte-level pieces ("\u0120the")
  std::vector<int> types;           // [vocab] TokenType (empty: all normal)
  std::vector<std::string> merges;  // "left right", in rank order
  int bos_id = -1, eos_id = -1, unk_id = -1;
  BpePre pre = BpePre::kGpt2;
};

// GPT-2 byte-level BPE. Control and user-defined tokens in the text are matched whole (longest first), as
// Hugging Face tokenizers does for added special tokens. `where` names the source in error messages.
std::unique_ptr<Tokenizer> make_bpe_tokenizer(BpeVocab v, const std::string& where);

struct SpmVocab {
  std::vector<std::string> tokens;  // [vocab] sentencepiece pieces ("\u2581the", "<0x0A>")
  std::vector<float> scores;        // [vocab]
  std::vector<int> types;           // [vocab] TokenType
  int bos_id = -1, eos_id = -1, unk_id = 0, pad_id = -1;
  bool add_space_prefix = true;
  bool remove_extra_whitespaces = false;
  bool byte_fallback = false;  // set when the vocabulary has byte pieces
};

// Sentencepiece BPE model (llama's tokenizer) built from the vocabulary: a ModelProto is written and loaded into
// sentencepiece. No normaliser beyond whitespace handling is stored in GGUF, so none is applied.
std::unique_ptr<Tokenizer> make_spm_tokenizer(const SpmVocab& v, const std::string& where);

// Maps of GPT-2's byte-level alphabet: byte -> UTF-8 of its stand-in code point, and back (-1 if none).
const std::string& bpe_byte_to_utf8(uint8_t b);
int bpe_codepoint_to_byte(uint32_t cp);

}  // namespace focal
