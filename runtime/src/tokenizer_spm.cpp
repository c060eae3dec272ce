// Tokenizer backed by sentencepiece; the only file that includes sentencepiece headers.
#include <sentencepiece_processor.h>

#include <cstdio>
#include <fstream>

#include "focal/error.h"
#include "focal/tokenizer.h"

namespace focal {

namespace {

class SpmTokenizer final : public Tokenizer {
 public:
  explicit SpmTokenizer(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error("tokenizer '" + path + "' cannot be opened (put a sentencepiece tokenizer.model there)");
    const auto st = sp_.Load(path);
    if (!st.ok()) throw Error("tokenizer '" + path + "' is not a sentencepiece model: " + st.ToString());
  }
  std::vector<int32_t> encode(const std::string& text, bool add_bos) const override {
    std::vector<int> ids;
    const auto st = sp_.Encode(text, &ids);
    if (!st.ok()) throw Error("tokenizer: cannot encode text: " + st.ToString());
    std::vector<int32_t> out;
    out.reserve(ids.size() + 1);
    if (add_bos && sp_.bos_id() >= 0) out.push_back(sp_.bos_id());
    out.insert(out.end(), ids.begin(), ids.end());
    return out;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::vector<int> v(ids.begin(), ids.end());
    std::string s;
    sp_.Decode(v, &s);
    return s;
  }
  std::string piece(int32_t id) const override {
    if (id < 0 || id >= sp_.GetPieceSize()) return "<?>";
    return sp_.IdToPiece(id);
  }
  int vocab_size() const override { return sp_.GetPieceSize(); }
  int bos_id() const override { return sp_.bos_id(); }
  int eos_id() const override { return sp_.eos_id(); }

 private:
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path) { return std::make_unique<SpmTokenizer>(path); }

std::string display_piece(const std::string& piece) {
  // Byte-fallback piece "<0xNN>".
  if (piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>') {
    const int v = (int)std::strtol(piece.substr(3, 2).c_str(), nullptr, 16);
    if (v == '\n') return "\\n";
    if (v == '\t') return "\\t";
    if (v == '\r') return "\\r";
    if (v >= 0x20 && v < 0x7f) return std::string(1, (char)v);
    char b[8];
    std::snprintf(b, sizeof b, "\\x%02X", v);
    return b;
  }
  static const std::string kWordStart = "\xE2\x96\x81";  // U+2581
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, 3, kWordStart) == 0) {
      out += ' ';
      i += 3;
    } else {
      out += piece[i++];
    }
  }
  return out;
}

}  // namespace focal
