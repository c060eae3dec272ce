// Tokenizers built from a vocabulary held in memory (the GGUF tokenizer.ggml.* metadata); runtime-internal.
#pragma once

#include <functional>
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
  // Sentencepiece-style tokenizer.json (Llama 2, Mistral, Gemma, Phi-3): no split (or one word a space with
  // Metaspace split), spaces as U+2581, pieces of characters rather than GPT-2's byte alphabet.
  kMetaspace,
};

// Where a sentencepiece-style tokenizer.json's Metaspace pre-tokenizer puts a U+2581 before a piece of text.
enum class MetaPrefix : uint8_t {
  kNone,              // prepend_scheme "never"
  kEveryUnlessSpace,  // "always": every piece not starting with a space
  kFirstUnlessSpace,  // "first" (transformers' legacy: false): the text's first piece only
};

// Flags of an added token (tokenizer.json added_tokens) for how it is matched in the text.
enum AddedFlag : uint8_t {
  kAddedLstrip = 1,      // the match swallows the whitespace before it
  kAddedRstrip = 2,      // ... and after it
  kAddedSingleWord = 4,  // only matched when no word character touches it on either side
  kAddedNormalized = 8,  // matched in the normalized text (as normalized itself), not the raw text
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
  // pre == kMetaspace only. The normalizer, on each stretch of text between added tokens:
  bool norm_prepend = false;  // Prepend("\u2581") (Llama 2, Phi-3): every stretch starts with U+2581
  bool norm_spaces = false;   // Replace(" ", "\u2581") (Llama 2, Gemma)
  // The pre-tokenizer, on each piece between the normalized added tokens:
  bool meta_pre = false;  // Metaspace: spaces as U+2581, one put first by meta_prefix
  MetaPrefix meta_prefix = MetaPrefix::kNone;
  bool meta_split = false;       // Metaspace split: every U+2581 starts a word of its own
  bool byte_fallback = false;    // a character outside the vocabulary is its <0xNN> pieces (else unk_id)
  int strip_decoded_spaces = 0;  // decoder Strip(" ", N, 0): the decoded text's first N spaces are dropped (a
                                 // Metaspace decoder that prepends: one)
};

// One code point of UTF-8 at s[i], its length in *len; a byte that starts none (or a sequence cut short) is one
// byte with cp 0xFFFFFFFF, of no class.
uint32_t next_cp(const std::string& s, size_t i, size_t* len);
// Unicode White_Space (what \s matches in the regex engines of tokenizers).
bool white_space(uint32_t cp);
// A word character as \w of the regex engine behind tokenizers' single_word test (Alphabetic, marks, Nd, Pc,
// Join_Control).
bool word_char(uint32_t cp);

// Tokens matched whole in the text before anything else (tokenizer.json added_tokens, a vocabulary's control
// pieces), leftmost-longest as tokenizers' matcher: lstrip / rstrip take the whitespace beside a match with it, and a
// single_word token touching a word character is not matched there. One rule for every tokenizer.
struct AddedToken {
  std::string text;
  int32_t id = -1;
  uint8_t flags = 0;  // AddedFlag bits
};
class AddedTokens {  // tokenizer_added.cpp
 public:
  explicit AddedTokens(std::vector<AddedToken> tokens = {});
  bool empty() const { return tokens_.empty(); }
  // Calls plain(b, e) for each stretch text[b, e) between matches (e > b) and token(id) for each match, in order.
  void split(const std::string& text, const std::function<void(size_t, size_t)>& plain,
             const std::function<void(int32_t)>& token) const;

 private:
  std::vector<AddedToken> tokens_;  // longest text first
  bool first_byte_[256] = {};       // whether some token starts with this byte
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
// A sentencepiece tokenizer.model with the tokens an HF directory adds beside it (tokenizer_config.json's
// added_tokens_decoder): those past the model's pieces (Phi-3's <|end|>) are matched in the text with their flags,
// decoded as their text and shown as their piece.
std::unique_ptr<Tokenizer> load_spm_with_added(const std::string& path, const std::vector<AddedToken>& added);

// A Hugging Face tokenizer.json (byte-level BPE, or sentencepiece-style BPE) with the special tokens of its
// directory.
struct HfJsonTokenizer {
  std::unique_ptr<Tokenizer> tok;
  int bos_id = -1, eos_id = -1;          // tokenizer_config.json, else the template, generation_config, config.json
  int bos_from_template = -1;            // the special token tokenizer.json's post_processor puts first, if any
  std::optional<bool> add_bos_explicit;  // add_bos_token, for the tokenizer classes that honour it
  bool add_bos = false;                  // whether transformers' encode(add_special_tokens=True) starts with BOS
};
// Reads DIR/tokenizer.json (+ tokenizer_config.json, generation_config.json, config.json when present). Throws
// Error naming the file and field for anything malformed or of a shape focalscope does not read.
HfJsonTokenizer load_hf_json_tokenizer(const std::string& dir);

struct ModelConfig;
// The tokenizer of an HF model directory: tokenizer.json as transformers' AutoTokenizer reads it (byte-level or
// sentencepiece-style BPE), else a sentencepiece tokenizer.model (also when tokenizer.json has a shape focalscope
// does not read: noted in cfg->warnings), else nullptr. cfg->add_bos follows the tokenizer files. Checks the size
// against cfg.
std::unique_ptr<Tokenizer> load_hf_dir_tokenizer(const std::string& dir, ModelConfig* cfg);

// Maps of GPT-2's byte-level alphabet: byte -> UTF-8 of its stand-in code point, and back (-1 if none).
const std::string& bpe_byte_to_utf8(uint8_t b);
int bpe_codepoint_to_byte(uint32_t cp);

}  // namespace focal
