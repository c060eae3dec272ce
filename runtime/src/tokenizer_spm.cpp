// Tokenizer backed by sentencepiece; the only file that includes sentencepiece headers.
#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <utility>
#include <vector>

#include "focal/error.h"
#include "focal/tokenizer.h"
#include "tokenizer_internal.h"

namespace focal {

namespace {

class SpmTokenizer final : public Tokenizer {
 public:
  // From a serialized ModelProto.
  SpmTokenizer(const std::string& proto, const std::string& where, bool) {
    const auto st = sp_.LoadFromSerializedProto(proto);
    if (!st.ok()) throw Error(where + ": sentencepiece refuses the vocabulary: " + st.ToString());
    find_specials();
  }
  explicit SpmTokenizer(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error("tokenizer '" + path + "' cannot be opened (put a sentencepiece tokenizer.model there)");
    const auto st = sp_.Load(path);
    if (!st.ok()) throw Error("tokenizer '" + path + "' is not a sentencepiece model: " + st.ToString());
    find_specials();
  }
  // The model's control and unknown pieces written in the text ("<s>", "</s>", "<unk>") and the tokens an HF
  // directory adds are those tokens, the text between them encoded piece by piece as sentencepiece encodes a text of
  // its own, as transformers' Llama tokenizers (slow and fast) split their special tokens out; they were encoded as
  // the letters < s >.
  std::vector<int32_t> encode(const std::string& text, bool add_bos) const override {
    std::vector<int32_t> out;
    if (add_bos && sp_.bos_id() >= 0) out.push_back(sp_.bos_id());
    std::vector<int> ids;
    specials_.split(
        text,
        [&](size_t b, size_t e) {
          const auto st = sp_.Encode(text.substr(b, e - b), &ids);
          if (!st.ok()) throw Error("tokenizer: cannot encode text: " + st.ToString());
          out.insert(out.end(), ids.begin(), ids.end());
        },
        [&](int32_t id) { out.push_back(id); });
    return out;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    // sentencepiece decodes its own pieces; an added token (tokenizer_config.json's added_tokens_decoder: Phi-3's
    // <|end|>, <|assistant|> past tokenizer.model's 32000) is its text, and an id neither knows is left out. One
    // such id made sentencepiece return nothing for the whole sequence.
    std::string out, part;
    std::vector<int> run;
    auto flush = [&] {
      if (run.empty()) return;
      part.clear();
      sp_.Decode(run, &part);
      // sentencepiece drops the word-start space of its first piece; after an added token it is a space of the text
      // ("<|end|> Hi", as transformers decodes it).
      if (!out.empty() && sp_.IdToPiece(run[0]).rfind("\xE2\x96\x81", 0) == 0 && part.rfind(' ', 0) != 0)
        part.insert(0, " ");
      out += part;
      run.clear();
    };
    for (int32_t id : ids) {
      const auto it = added_.find(id);
      if (it != added_.end()) {
        flush();
        out += it->second;
      } else if (id >= 0 && id < sp_.GetPieceSize()) {
        run.push_back(id);
      }
    }
    flush();
    return out;
  }
  std::string piece(int32_t id) const override {
    const auto it = added_.find(id);
    if (it != added_.end()) return it->second;
    if (id < 0 || id >= sp_.GetPieceSize()) return "<?>";
    return sp_.IdToPiece(id);
  }
  // Every added token is matched in the text; only those past tokenizer.model's pieces decode as their text (its own,
  // <s> and </s> listed again in added_tokens_decoder, decode as sentencepiece decodes them).
  void set_added(const std::vector<AddedToken>& added) {
    std::vector<AddedToken> all = added;
    for (const AddedToken& t : added)
      if (t.id >= sp_.GetPieceSize()) added_[t.id] = t.text;
    for (const AddedToken& t : model_specials_)
      if (std::none_of(added.begin(), added.end(), [&](const AddedToken& a) { return a.id == t.id; })) all.push_back(t);
    specials_ = AddedTokens(std::move(all));
  }
  int vocab_size() const override { return sp_.GetPieceSize(); }
  int bos_id() const override { return sp_.bos_id(); }
  int eos_id() const override { return sp_.eos_id(); }

 private:
  void find_specials() {
    for (int id = 0; id < sp_.GetPieceSize(); ++id)
      if (sp_.IsControl(id) || sp_.IsUnknown(id)) {
        const std::string p = sp_.IdToPiece(id);
        if (p.size() > 2 && p.front() == '<' && p.back() == '>') model_specials_.push_back({p, (int32_t)id, 0});
      }
    specials_ = AddedTokens(model_specials_);
  }

  sentencepiece::SentencePieceProcessor sp_;
  std::map<int32_t, std::string> added_;    // id -> text of tokens added past tokenizer.model's pieces
  std::vector<AddedToken> model_specials_;  // control / unknown pieces "<s>", and their ids
  AddedTokens specials_;                    // those and the directory's added tokens, matched in the text
};

// ---- protobuf wire format, just what a sentencepiece ModelProto needs ----
void put_varint(std::string* o, uint64_t v) {
  while (v >= 0x80) {
    o->push_back((char)(0x80 | (v & 0x7F)));
    v >>= 7;
  }
  o->push_back((char)v);
}
void put_tag(std::string* o, int field, int wire) { put_varint(o, ((uint64_t)field << 3) | (uint64_t)wire); }
void put_bytes(std::string* o, int field, const std::string& b) {
  put_tag(o, field, 2);
  put_varint(o, b.size());
  o->append(b);
}
void put_int(std::string* o, int field, int64_t v) {  // int32 / enum / bool (negative int32 as 10-byte varint)
  put_tag(o, field, 0);
  put_varint(o, (uint64_t)v);
}
void put_float(std::string* o, int field, float f) {
  put_tag(o, field, 5);
  char b[4];
  std::memcpy(b, &f, 4);
  o->append(b, 4);
}

}  // namespace

// ModelProto { 1: repeated SentencePiece {1: piece, 2: score, 3: type}, 2: TrainerSpec {3: model_type (BPE = 2),
// 4: vocab_size, 35: byte_fallback, 40: unk_id, 41: bos_id, 42: eos_id, 43: pad_id}, 3: NormalizerSpec {1: name,
// 3: add_dummy_prefix, 4: remove_extra_whitespaces, 5: escape_whitespaces} }.
std::unique_ptr<Tokenizer> make_spm_tokenizer(const SpmVocab& v, const std::string& where) {
  const size_t n = v.tokens.size();
  if (n == 0) throw Error(where + ": the sentencepiece vocabulary is empty");
  if (v.scores.size() != n || v.types.size() != n)
    throw Error(where + ": tokenizer.ggml.scores (" + std::to_string(v.scores.size()) + ") and token_type (" +
                std::to_string(v.types.size()) + ") must have one entry per token (" + std::to_string(n) + ")");
  for (int id : {v.bos_id, v.eos_id, v.unk_id, v.pad_id})
    if (id >= (int)n)
      throw Error(where + ": special token id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(n));
  std::string proto;
  for (size_t i = 0; i < n; ++i) {
    std::string sp;
    put_bytes(&sp, 1, v.tokens[i]);
    put_float(&sp, 2, v.scores[i]);
    int t = v.types[i];
    if (t < kTokNormal || t > kTokByte) t = kTokNormal;
    if ((int)i == v.unk_id) t = kTokUnknown;
    put_int(&sp, 3, t);
    put_bytes(&proto, 1, sp);
  }
  std::string trainer;
  put_int(&trainer, 3, 2);  // BPE: llama's tokenizer; merges follow the piece scores
  put_int(&trainer, 4, (int64_t)n);
  bool has_byte = false;
  for (int t : v.types) has_byte |= t == kTokByte;
  put_int(&trainer, 35, v.byte_fallback || has_byte);
  put_int(&trainer, 40, v.unk_id);
  put_int(&trainer, 41, v.bos_id);
  put_int(&trainer, 42, v.eos_id);
  put_int(&trainer, 43, v.pad_id);
  put_bytes(&proto, 2, trainer);
  std::string norm;
  put_bytes(&norm, 1, "identity");
  put_int(&norm, 3, v.add_space_prefix);
  put_int(&norm, 4, v.remove_extra_whitespaces);
  put_int(&norm, 5, 1);
  put_bytes(&proto, 3, norm);
  return std::make_unique<SpmTokenizer>(proto, where, true);
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path) {
  auto t = std::make_unique<SpmTokenizer>(path);
  t->source = "tokenizer.model (sentencepiece)";
  return t;
}

std::unique_ptr<Tokenizer> load_spm_with_added(const std::string& path, const std::vector<AddedToken>& added) {
  auto t = std::make_unique<SpmTokenizer>(path);
  t->set_added(added);
  t->source = "tokenizer.model (sentencepiece)";
  return t;
}

std::string display_piece(const std::string& piece) {
  // Byte-fallback piece "<0xNN>".
  if (piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>') {
    const int v = (int)std::strtol(piece.substr(3, 2).c_str(), nullptr, 16);
    if (v == '\n') return "\\n";
    if (v == '\t') return "\\t";
    if (v == '\r') return "\\r";
    if (v == '\\') return "\\\\";
    if (v >= 0x20 && v < 0x7f) return std::string(1, (char)v);
    char b[8];
    std::snprintf(b, sizeof b, "\\x%02X", v);
    return b;
  }
  static const std::string kWordStart = "\xE2\x96\x81";  // U+2581
  std::string text;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, 3, kWordStart) == 0) {
      text += ' ';
      i += 3;
    } else {
      text += piece[i++];
    }
  }
  return display_text(text);  // control characters escaped as byte-level tokens have them ("\r" was printed raw)
}

}  // namespace focal
