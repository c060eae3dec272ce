// Tokenizers built from a vocabulary held in memory (the GGUF tokenizer.ggml.* metadata); runtime-internal.
#pragma once

#include <map>
#include <memory>
#include <optional>
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
  // Llama 3's (and OLMo 2's, cl100k's) regex: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  // ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kLlama3,
  kQwen2,  // Llama 3's regex with \p{N} instead of \p{N}{1,3}: digits one by one
};

// Flags of an added token (tokenizer.json added_tokens) for how it is matched in the text.
enum AddedFlag : uint8_t {
  kAddedLstrip = 1,      // the match swallows the whitespace before it
  kAddedRstrip = 2,      // ... and after it
  kAddedSingleWord = 4,  // only matched when no word character touches it on either side
};

struct BpeVocab {
  std::vector<std::string> tokens;  // [vocab] byte-level pieces ("\u0120the")
  std::vector<int> types;           // [vocab] TokenType (empty: all normal)
  std::vector<std::string> merges;  // "left right", in rank order
  int bos_id = -1, eos_id = -1, unk_id = -1;
  BpePre pre = BpePre::kGpt2;
  bool ignore_merges = false;        // a pre-tokenized word that is itself in the vocabulary is one token (Llama 3)
  bool fuse_unk = false;             // a run of pieces outside the vocabulary within a word is one unk_id
  bool add_prefix_space = false;     // a space is put before text that does not start with one (ByteLevel option)
  std::vector<uint8_t> added_flags;  // [vocab] AddedFlag bits of control / user-defined tokens (empty: none)
  bool nfc = false;                  // text between added tokens is put in Unicode NFC first (Qwen2's normalizer)
};

// Unicode NFC of UTF-8 text (libutf8proc; tokenizer_bpe.cpp); text that is not valid UTF-8 is returned unchanged.
std::string nfc(const std::string& s);

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
// A sentencepiece tokenizer.model with the tokens an HF directory adds beside it (id -> text; decode and piece show
// them).
std::unique_ptr<Tokenizer> load_spm_with_added(const std::string& path, std::map<int32_t, std::string> added);

// A Hugging Face tokenizer.json (byte-level BPE) with the special tokens of its directory.
struct HfJsonTokenizer {
  std::unique_ptr<Tokenizer> tok;
  int bos_id = -1, eos_id = -1;          // tokenizer_config.json, else the template, generation_config, config.json
  int bos_from_template = -1;            // the special token tokenizer.json's post_processor puts first, if any
  std::optional<bool> add_bos_explicit;  // add_bos_token, for the tokenizer classes that honour it
  bool add_bos = false;                  // whether transformers' encode(add_special_tokens=True) starts with BOS
};
// Reads DIR/tokenizer.json (+ tokenizer_config.json, generation_config.json, config.json when present). Throws
// Error naming the file and field for anything malformed or not byte-level BPE.
HfJsonTokenizer load_hf_json_tokenizer(const std::string& dir);

struct ModelConfig;
// The tokenizer of an HF model directory: a byte-level BPE tokenizer.json, else a sentencepiece tokenizer.model,
// else nullptr. For tokenizer.json, cfg->add_bos follows the tokenizer files. Checks the size against cfg.
std::unique_ptr<Tokenizer> load_hf_dir_tokenizer(const std::string& dir, ModelConfig* cfg);

// Maps of GPT-2's byte-level alphabet: byte -> UTF-8 of its stand-in code point, and back (-1 if none).
const std::string& bpe_byte_to_utf8(uint8_t b);
int bpe_codepoint_to_byte(uint32_t cp);

}  // namespace focal
