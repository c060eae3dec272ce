// GPT-2 byte-level BPE (the tokenizer of SmolLM2, GPT-2, StarCoder ... as stored in GGUF): special tokens matched
// whole, a hand-written pre-tokenizer equivalent to GPT-2's regex (no std::regex), bytes mapped to GPT-2's printable
// stand-in alphabet, then merges applied lowest rank first. Unicode categories and NFC come from libutf8proc.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <queue>
#include <unordered_map>

#include <utf8proc.h>

#include "focal/error.h"
#include "tokenizer_internal.h"

namespace focal {

namespace {

const char kMetaSpace[] = "\xE2\x96\x81";  // U+2581, sentencepiece's space

// ---- GPT-2 byte alphabet: printable Latin-1 bytes stand for themselves, the other 68 bytes map to U+0100.. ----
struct ByteMap {
  std::string to_utf8[256];
  int from_cp[512];
  ByteMap() {
    std::fill(from_cp, from_cp + 512, -1);
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const int cp = printable ? b : next++;
      from_cp[cp] = b;
      std::string& s = to_utf8[b];
      if (cp < 0x80) {
        s = std::string(1, (char)cp);
      } else {
        s += (char)(0xC0 | (cp >> 6));
        s += (char)(0x80 | (cp & 0x3F));
      }
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

enum CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };

// Sets of Unicode general categories (bit c: utf8proc_category_t c) and whether a code point's category, from
// libutf8proc (Cn where unassigned or beyond U+10FFFF), is in one.
constexpr uint32_t cat_bit(utf8proc_category_t c) { return 1u << c; }
constexpr uint32_t kCatLetter = cat_bit(UTF8PROC_CATEGORY_LU) | cat_bit(UTF8PROC_CATEGORY_LL) |
                                cat_bit(UTF8PROC_CATEGORY_LT) | cat_bit(UTF8PROC_CATEGORY_LM) |
                                cat_bit(UTF8PROC_CATEGORY_LO);
constexpr uint32_t kCatNumber =
    cat_bit(UTF8PROC_CATEGORY_ND) | cat_bit(UTF8PROC_CATEGORY_NL) | cat_bit(UTF8PROC_CATEGORY_NO);
bool in_categories(uint32_t cp, uint32_t cats) {
  return cp <= 0x10FFFF && ((cats >> utf8proc_category((utf8proc_int32_t)cp)) & 1u);
}

CharClass classify(uint32_t cp) {
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return kLetter;
    if (cp >= '0' && cp <= '9') return kNumber;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return kSpace;
    return kOther;
  }
  if (cp == 0xFFFFFFFFu) return kOther;
  if (white_space(cp)) return kSpace;
  if (in_categories(cp, kCatLetter)) return kLetter;
  if (in_categories(cp, kCatNumber)) return kNumber;
  return kOther;
}

struct Cp {
  size_t off, len;
  CharClass cls;
  char ascii;      // the byte for ASCII code points, 0 otherwise
  bool is_long_s;  // U+017F
};

// GPT-2's pattern on cps[b, e): 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+,
// alternatives tried in order at each position (leftmost-first), appending [begin, end) code point ranges.
void split_gpt2(const std::vector<Cp>& c, size_t b, size_t e, std::vector<std::pair<size_t, size_t>>* out) {
  size_t i = b;
  while (i < e) {
    // Contractions (case-sensitive, as in GPT-2).
    if (c[i].ascii == '\'' && i + 1 < e) {
      const char a = c[i + 1].ascii;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        out->push_back({i, i + 2});
        i += 2;
        continue;
      }
      if (i + 2 < e) {
        const char a2 = c[i + 2].ascii;
        if ((a == 'r' && a2 == 'e') || (a == 'v' && a2 == 'e') || (a == 'l' && a2 == 'l')) {
          out->push_back({i, i + 3});
          i += 3;
          continue;
        }
      }
    }
    // ' ?' prefix followed by a run of one class (letters, numbers, or neither-space-letter-number).
    const size_t j0 = (c[i].ascii == ' ' && i + 1 < e && c[i + 1].cls != kSpace) ? i + 1 : i;
    const CharClass k = c[j0].cls;
    if (k != kSpace) {
      size_t j = j0 + 1;
      while (j < e && c[j].cls == k) ++j;
      out->push_back({i, j});
      i = j;
      continue;
    }
    // Whitespace run: \s+(?!\S) leaves the last space for the next word when one follows; else \s+.
    size_t j = i + 1;
    while (j < e && c[j].cls == kSpace) ++j;
    if (j < e && j - i >= 2) --j;
    out->push_back({i, j});
    i = j;
  }
}

// The regex of Llama 3 / cl100k (max_digits 3) or Qwen2 (max_digits 1) on cps[b, e), leftmost-first like
// split_gpt2: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
void split_cl100k(const std::vector<Cp>& c, size_t b, size_t e, size_t max_digits,
                  std::vector<std::pair<size_t, size_t>>* out) {
  // ASCII case folding, plus U+017F (long s), which folds to 's' in the regex engine of tokenizers.
  const auto lower = [&](size_t k) { return k >= e ? (char)0 : c[k].is_long_s ? 's' : (char)(c[k].ascii | 0x20); };
  const auto newline = [&](size_t k) { return c[k].ascii == '\r' || c[k].ascii == '\n'; };
  size_t i = b;
  while (i < e) {
    // Contractions, case-insensitive.
    if (c[i].ascii == '\'') {
      const char a = lower(i + 1), a2 = lower(i + 2);
      size_t n = 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') n = 2;
      if ((a == 'r' && a2 == 'e') || (a == 'v' && a2 == 'e') || (a == 'l' && a2 == 'l')) n = 3;
      if (n) {
        out->push_back({i, i + n});
        i += n;
        continue;
      }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    const bool lead = c[i].cls != kLetter && c[i].cls != kNumber && !newline(i);
    if (c[i].cls == kLetter || (lead && i + 1 < e && c[i + 1].cls == kLetter)) {
      size_t j = i + 1;
      while (j < e && c[j].cls == kLetter) ++j;
      out->push_back({i, j});
      i = j;
      continue;
    }
    // \p{N}{1,max_digits}
    if (c[i].cls == kNumber) {
      size_t j = i + 1;
      while (j < e && j - i < max_digits && c[j].cls == kNumber) ++j;
      out->push_back({i, j});
      i = j;
      continue;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*
    const size_t j0 = (c[i].ascii == ' ' && i + 1 < e && c[i + 1].cls == kOther) ? i + 1 : i;
    if (c[j0].cls == kOther) {
      size_t j = j0 + 1;
      while (j < e && c[j].cls == kOther) ++j;
      while (j < e && newline(j)) ++j;
      out->push_back({i, j});
      i = j;
      continue;
    }
    // c[i] is whitespace. \s*[\r\n]+ : through the last newline of the run.
    size_t k = i + 1;
    while (k < e && c[k].cls == kSpace) ++k;
    size_t nl_end = i;  // one past the run's last newline, i if none
    for (size_t q = k; q > i && nl_end == i; --q)
      if (newline(q - 1)) nl_end = q;
    if (nl_end > i) {
      out->push_back({i, nl_end});
      i = nl_end;
      continue;
    }
    // \s+(?!\S) leaves the last whitespace for the next word when one follows; else \s+.
    if (k < e && k - i >= 2) --k;
    out->push_back({i, k});
    i = k;
  }
}

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(BpeVocab v, const std::string& where) : v_(std::move(v)) {
    if (v_.tokens.empty()) throw Error(where + ": the BPE vocabulary is empty");
    if (!v_.types.empty() && v_.types.size() != v_.tokens.size())
      throw Error(where + ": tokenizer.ggml.token_type has " + std::to_string(v_.types.size()) + " entries but " +
                  "tokenizer.ggml.tokens has " + std::to_string(v_.tokens.size()));
    for (int id : {v_.bos_id, v_.eos_id, v_.unk_id})
      if (id >= (int)v_.tokens.size())
        throw Error(where + ": special token id " + std::to_string(id) + " is outside the vocabulary of " +
                    std::to_string(v_.tokens.size()));
    if (!v_.added_flags.empty() && v_.added_flags.size() != v_.tokens.size())
      throw Error(where + ": " + std::to_string(v_.added_flags.size()) + " added-token flags for " +
                  std::to_string(v_.tokens.size()) + " tokens");
    ids_.reserve(v_.tokens.size());
    std::vector<AddedToken> added, normalized;
    for (size_t i = 0; i < v_.tokens.size(); ++i) {
      ids_.emplace(v_.tokens[i], (int32_t)i);  // first occurrence wins
      const int t = v_.types.empty() ? kTokNormal : v_.types[i];
      if ((t != kTokControl && t != kTokUserDefined) || v_.tokens[i].empty()) continue;
      const uint8_t fl = v_.added_flags.empty() ? (uint8_t)0 : v_.added_flags[i];
      // As tokenizers: tokens not normalized are matched in the raw text first, then normalized ones in each stretch
      // between them once normalized, looked for as the normalizer writes them ("focalword" as "\u2581focalword"
      // after Prepend).
      if (fl & kAddedNormalized)
        normalized.push_back({normalize(v_.tokens[i]), (int32_t)i, fl});
      else
        added.push_back({v_.tokens[i], (int32_t)i, fl});
    }
    added_ = AddedTokens(std::move(added));
    normalized_added_ = AddedTokens(std::move(normalized));
    std::fill(byte_id_, byte_id_ + 256, -1);
    if (v_.pre == BpePre::kMetaspace)
      for (int b = 0; b < 256; ++b) {
        char p[8];
        std::snprintf(p, sizeof p, "<0x%02X>", b);
        const auto it = ids_.find(p);
        if (it != ids_.end()) byte_id_[b] = it->second;
      }
    ranks_.reserve(v_.merges.size());
    for (size_t r = 0; r < v_.merges.size(); ++r) {
      const std::string& m = v_.merges[r];
      const size_t sp = m.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 >= m.size() || m.find(' ', sp + 1) != std::string::npos)
        throw Error(where + ": merge " + std::to_string(r) + " ('" + m +
                    "') is not two pieces separated by one "
                    "space");
      ranks_.emplace(m, (int)r);  // first occurrence wins
    }
  }

  std::vector<int32_t> encode(const std::string& text, bool add_bos) const override {
    std::vector<int32_t> out;
    if (add_bos && v_.bos_id >= 0) out.push_back(v_.bos_id);
    added_.split(
        text, [&](size_t b, size_t e) { encode_plain(text.substr(b, e - b), b == 0, &out); },
        [&](int32_t id) { out.push_back(id); });
    return out;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    if (v_.pre != BpePre::kMetaspace) {
      for (int32_t id : ids) out += token_bytes(id);
      return out;
    }
    // tokenizers' ByteFallback decoder: a run of <0xNN> pieces that is not UTF-8 is one U+FFFD a byte. A run that
    // ends the ids cut inside its last character stays bytes: the next token may complete it (generated text is
    // printed a whole character at a time, utf8_whole_end).
    std::string run;
    auto flush = [&](bool last) {
      bool ok = true;
      for (size_t i = 0; i < run.size() && ok;) {
        const size_t n = utf8_sequence_length(run, i);
        ok = n > 0 || (last && i >= utf8_whole_end(run) && utf8_prefix_ok(run, i));
        i = n > 0 ? i + n : run.size();
      }
      if (ok)
        out += run;
      else
        for (size_t i = 0; i < run.size(); ++i) out += "\xEF\xBF\xBD";  // U+FFFD
      run.clear();
    };
    for (int32_t id : ids) {
      const std::string b = token_bytes(id);
      if (b.size() == 1 && byte_id_[(uint8_t)b[0]] == id) {
        run += b;
        continue;
      }
      flush(false);
      out += b;
    }
    flush(true);
    size_t strip = 0;
    while (strip < (size_t)v_.strip_decoded_spaces && strip < out.size() && out[strip] == ' ') ++strip;
    out.erase(0, strip);
    return out;
  }

  // Whether s[i..] is the start of one UTF-8 character cut short: a lead byte and fewer continuation bytes than it
  // needs.
  static bool utf8_prefix_ok(const std::string& s, size_t i) {
    const unsigned c = (unsigned char)s[i];
    const size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (need == 0 || s.size() - i >= need) return false;
    for (size_t k = i + 1; k < s.size(); ++k)
      if (((unsigned char)s[k] & 0xC0) != 0x80) return false;
    return true;
  }

  std::string piece(int32_t id) const override {
    if (id < 0 || id >= (int32_t)v_.tokens.size()) return "<?>";
    return v_.tokens[id];
  }

  std::string display(int32_t id) const override { return display_text(token_bytes(id)); }

  int vocab_size() const override { return (int)v_.tokens.size(); }
  int bos_id() const override { return v_.bos_id; }
  int eos_id() const override { return v_.eos_id; }

 private:
  // The bytes a token stands for: control tokens as their text, others through the byte alphabet.
  std::string token_bytes(int32_t id) const {
    if (id < 0 || id >= (int32_t)v_.tokens.size()) return "";
    const std::string& p = v_.tokens[id];
    const int t = v_.types.empty() ? kTokNormal : v_.types[id];
    const bool added = t == kTokControl || t == kTokUserDefined;
    if (added && v_.pre != BpePre::kMetaspace) return p;
    std::string out;
    if (v_.pre == BpePre::kMetaspace) {  // <0xNN> is its byte, U+2581 a space (in added tokens too: "\u2581\u2581")
      if (!added && p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>') {
        const int b = (int)std::strtol(p.substr(3, 2).c_str(), nullptr, 16);
        if (b >= 0 && b < 256 && byte_id_[b] == id) return std::string(1, (char)b);
      }
      for (size_t i = 0; i < p.size(); ++i) {
        if (p.compare(i, 3, kMetaSpace) == 0) {
          out += ' ';
          i += 2;
        } else {
          out += p[i];
        }
      }
      return out;
    }
    for (size_t i = 0; i < p.size();) {
      size_t len;
      const uint32_t cp = next_cp(p, i, &len);
      const int b = bpe_codepoint_to_byte(cp);
      if (b >= 0)
        out += (char)b;
      else
        out.append(p, i, len);
      i += len;
    }
    return out;
  }

  // The normalizer: NFC, or a sentencepiece-style one (U+2581 put first, spaces as U+2581).
  std::string normalize(const std::string& text) const {
    if (v_.pre == BpePre::kMetaspace) return with_meta_spaces(text, v_.norm_prepend, v_.norm_spaces);
    return v_.nfc ? nfc(text) : text;
  }

  // `t` with U+2581 put first if `prefix`, and its spaces as U+2581 if `spaces`.
  static std::string with_meta_spaces(const std::string& t, bool prefix, bool spaces) {
    std::string s = prefix ? kMetaSpace : "";
    for (char c : t)
      if (c == ' ' && spaces)
        s += kMetaSpace;
      else
        s += c;
    return s;
  }

  // A stretch of text between added tokens (`first`: it starts the text): normalized, split at the normalized added
  // tokens, each piece pre-tokenized into words and merged.
  void encode_plain(const std::string& text, bool first, std::vector<int32_t>* out) const {
    if (text.empty()) return;
    const std::string s = normalize(text);
    normalized_added_.split(
        s, [&](size_t b, size_t e) { encode_piece(s.substr(b, e - b), first && b == 0, out); },
        [&](int32_t id) { out->push_back(id); });
  }

  // Sentencepiece-style pre-tokenization: Metaspace's spaces as U+2581 and its U+2581 put first, then one word (or,
  // with split, a word from each U+2581 on) of characters.
  void encode_metaspace(const std::string& piece, bool first, std::vector<int32_t>* out) const {
    std::string s = piece;
    if (v_.meta_pre) {
      const bool starts_space = piece[0] == ' ' || piece.compare(0, 3, kMetaSpace) == 0;
      const MetaPrefix mp = v_.meta_prefix;
      s = with_meta_spaces(
          piece,
          (mp == MetaPrefix::kEveryUnlessSpace || (mp == MetaPrefix::kFirstUnlessSpace && first)) && !starts_space,
          true);
    }
    size_t w = 0;
    if (v_.meta_pre && v_.meta_split)
      for (size_t i = 1; i + 3 <= s.size(); ++i)
        if (s.compare(i, 3, kMetaSpace) == 0) {
          bpe_word(s, w, i, out);
          w = i;
          i += 2;
        }
    bpe_word(s, w, s.size(), out);
  }

  void encode_piece(std::string s, bool first, std::vector<int32_t>* out) const {
    if (s.empty()) return;
    if (v_.pre == BpePre::kMetaspace) {
      encode_metaspace(s, first, out);
      return;
    }
    if (v_.add_prefix_space && s[0] != ' ') s.insert(0, 1, ' ');
    std::vector<Cp> cps;
    for (size_t i = 0; i < s.size();) {
      size_t len;
      const uint32_t cp = next_cp(s, i, &len);
      cps.push_back({i, len, classify(cp), cp < 0x80 ? (char)cp : (char)0, cp == 0x17F});
      i += len;
    }
    std::vector<std::pair<size_t, size_t>> words;
    if (v_.pre == BpePre::kGpt2) {
      split_gpt2(cps, 0, cps.size(), &words);
    } else if (v_.pre == BpePre::kLlama3 || v_.pre == BpePre::kQwen2) {
      split_cl100k(cps, 0, cps.size(), v_.pre == BpePre::kLlama3 ? 3 : 1, &words);
    } else {  // every number character alone, GPT-2's pattern between them
      size_t run = 0;
      for (size_t i = 0; i <= cps.size(); ++i) {
        if (i == cps.size() || cps[i].cls == kNumber) {
          split_gpt2(cps, run, i, &words);
          if (i < cps.size()) words.push_back({i, i + 1});
          run = i + 1;
        }
      }
    }
    for (auto [b, e] : words) {
      const size_t o0 = cps[b].off, o1 = cps[e - 1].off + cps[e - 1].len;
      bpe_word(s, o0, o1, out);
    }
  }

  // BPE on the bytes s[o0, o1): one symbol per byte (as its stand-in character), then the adjacent pair with the
  // lowest merge rank merged, leftmost first among equal ranks, until no pair has a rank — the order of
  // tokenizers' BPE (a heap of (rank, position)). The symbols form a linked list and each candidate pair sits in a
  // heap, so a word of n bytes takes O(n log n) (merging every occurrence of the best pair per round took O(n^2):
  // minutes for one 20K-byte word).
  // Sentencepiece-style vocabularies start from one symbol per character (a byte that starts none is one too).
  void bpe_word(const std::string& s, size_t o0, size_t o1, std::vector<int32_t>* out) const {
    const ByteMap& bm = byte_map();
    std::vector<std::string> sym;  // [n] the symbols in order; a merged-away piece is empty
    sym.reserve(o1 - o0);
    if (v_.pre == BpePre::kMetaspace) {
      for (size_t i = o0, len = 0; i < o1; i += len) {
        (void)next_cp(s, i, &len);
        len = std::min(len, o1 - i);
        sym.push_back(s.substr(i, len));
      }
    } else {
      for (size_t i = o0; i < o1; ++i) sym.push_back(bm.to_utf8[(uint8_t)s[i]]);
    }
    const int n = (int)sym.size();
    if (v_.ignore_merges && n > 1) {
      std::string whole;
      for (const std::string& p : sym) whole += p;
      auto it = ids_.find(whole);
      if (it != ids_.end()) {
        out->push_back(it->second);
        return;
      }
    }
    std::vector<int> next((size_t)n), prev((size_t)n);  // [n] neighbours in the list (n / -1 at the ends)
    for (int i = 0; i < n; ++i) {
      next[(size_t)i] = i + 1;
      prev[(size_t)i] = i - 1;
    }
    struct Cand {
      int rank, left, right;
      size_t left_len, right_len;  // the pieces' lengths when pushed: a merge since then makes the entry stale
      bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    std::string key;
    auto push = [&](int l) {
      const int r = l >= 0 ? next[(size_t)l] : n;
      if (l < 0 || r >= n) return;
      key.assign(sym[(size_t)l]).append(1, ' ').append(sym[(size_t)r]);
      auto it = ranks_.find(key);
      if (it != ranks_.end()) heap.push({it->second, l, r, sym[(size_t)l].size(), sym[(size_t)r].size()});
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    while (!heap.empty()) {
      const Cand c = heap.top();
      heap.pop();
      const size_t l = (size_t)c.left, r = (size_t)c.right;
      if (sym[l].empty() || sym[r].empty() || next[l] != c.right || sym[l].size() != c.left_len ||
          sym[r].size() != c.right_len)
        continue;  // a neighbour merged since: the pair it names is gone
      sym[l] += sym[r];
      sym[r].clear();
      next[l] = next[r];
      if (next[r] < n) prev[(size_t)next[r]] = c.left;
      push(prev[l]);
      push(c.left);
    }
    bool last_unk = false;  // the previous piece of this word went out as unk_id (fuse_unk: one for the run)
    for (int i = 0; i < n; i = next[(size_t)i]) {
      const std::string& p = sym[(size_t)i];
      auto it = ids_.find(p);
      if (it != ids_.end()) {
        out->push_back(it->second);
        last_unk = false;
      } else if (v_.byte_fallback &&
                 std::all_of(p.begin(), p.end(), [&](char c) { return byte_id_[(uint8_t)c] >= 0; })) {
        for (char c : p) out->push_back(byte_id_[(uint8_t)c]);
        last_unk = false;
      } else if (v_.unk_id >= 0) {
        if (!(v_.fuse_unk && last_unk)) out->push_back(v_.unk_id);
        last_unk = true;
      }
      // A piece outside a byte-level vocabulary without <unk> cannot be represented; it is dropped.
    }
  }

  BpeVocab v_;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<std::string, int> ranks_;
  AddedTokens added_;             // control / user-defined tokens, matched whole in the text
  AddedTokens normalized_added_;  // kMetaspace: those matched in the normalized text
  int32_t byte_id_[256];          // kMetaspace: the id of piece <0xNN>, -1 if none
};

}  // namespace

uint32_t next_cp(const std::string& s, size_t i, size_t* len) {
  const uint8_t c = (uint8_t)s[i];
  int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) {
    *len = 1;
    return 0xFFFFFFFFu;
  }
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < n; ++k) {
    const uint8_t d = (uint8_t)s[i + k];
    if ((d >> 6) != 2) {
      *len = 1;
      return 0xFFFFFFFFu;
    }
    cp = (cp << 6) | (d & 0x3F);
  }
  *len = (size_t)n;
  return cp;
}

bool white_space(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Alphabetic is L, Nl and Other_Alphabetic, which is marks but for the circled and squared Latin letters (So;
// PropList.txt).
bool word_char(uint32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  if (cp == 0x200C || cp == 0x200D || (cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
      (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189))
    return true;
  return in_categories(cp, kCatLetter | cat_bit(UTF8PROC_CATEGORY_MN) | cat_bit(UTF8PROC_CATEGORY_MC) |
                               cat_bit(UTF8PROC_CATEGORY_ME) | cat_bit(UTF8PROC_CATEGORY_ND) |
                               cat_bit(UTF8PROC_CATEGORY_NL) | cat_bit(UTF8PROC_CATEGORY_PC));
}

std::string display_text(const std::string& b) {
  std::string out;
  for (size_t i = 0; i < b.size();) {
    size_t len;
    const uint32_t cp = next_cp(b, i, &len);
    char h[12];
    if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\\') {  // escaped, so a token spelling backslash-n reads apart from a newline
      out += "\\\\";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == 0xFFFFFFFFu || cp < 0x20 || cp == 0x7F) {
      std::snprintf(h, sizeof h, "\\x%02X", (uint8_t)b[i]);
      out += h;
    } else if ((cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029) {
      std::snprintf(h, sizeof h, "\\u%04X", (unsigned)cp);
      out += h;
    } else {
      out.append(b, i, len);
    }
    i += len;
  }
  return out;
}

const std::string& bpe_byte_to_utf8(uint8_t b) { return byte_map().to_utf8[b]; }

int bpe_codepoint_to_byte(uint32_t cp) { return cp < 512 ? byte_map().from_cp[cp] : -1; }

std::string bytes_of_display(const std::string& d) {
  std::string out;
  auto hex = [&](size_t at, size_t n, uint32_t* v) {  // n hex digits at d[at], all there
    if (at + n > d.size()) return false;
    *v = 0;
    for (size_t k = 0; k < n; ++k) {
      const char c = d[at + k];
      const int x = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                           : -1;
      if (x < 0) return false;
      *v = *v * 16 + (uint32_t)x;
    }
    return true;
  };
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i] != '\\' || i + 1 >= d.size()) {
      out += d[i];
      continue;
    }
    const char e = d[i + 1];
    uint32_t v = 0;
    if (e == 'n' || e == 't' || e == 'r' || e == '\\') {
      out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : '\\';
      ++i;
    } else if (e == 'x' && hex(i + 2, 2, &v)) {
      out += (char)v;
      i += 3;
    } else if (e == 'u' && hex(i + 2, 4, &v)) {  // U+0080..U+FFFF as UTF-8 (display_text writes C1, U+2028/9)
      if (v < 0x800) {
        out += (char)(0xC0 | (v >> 6));
      } else {
        out += (char)(0xE0 | (v >> 12));
        out += (char)(0x80 | ((v >> 6) & 0x3F));
      }
      out += (char)(0x80 | (v & 0x3F));
      i += 5;
    } else {
      out += d[i];  // not an escape display_text writes: kept as it is
    }
  }
  return out;
}

std::string nfc(const std::string& s) {
  // Below U+0300 nothing decomposes or composes: most text takes this path unchanged.
  bool plain = true;
  for (size_t i = 0; i < s.size() && plain; ++i) {
    const uint8_t c = (uint8_t)s[i];
    plain = c < 0xC0 || (c < 0xCC && c >= 0xC2);  // ASCII, continuation bytes, or a lead byte of U+0080..U+02FF
  }
  if (plain) return s;
  // libutf8proc before its fix for JuliaStrings/utf8proc#317 (Debian 12 has 2.8) composes an LV syllable with
  // U+11A7, the T base, which is no trailing consonant, and so drops it. U+11A7 is a starter that composes with
  // nothing: NFC of the text between two of them is NFC of the whole, and the text is normalised piece by piece.
  static const char kTBase[] = "\xE1\x86\xA7";
  std::string r;
  r.reserve(s.size());
  for (size_t b = 0;;) {
    const size_t e = std::min(s.find(kTBase, b), s.size());
    if (e > b) {
      // utf8proc_NFC's options without NULLTERM: the text may hold NUL bytes. Invalid UTF-8 is an error (n < 0).
      utf8proc_uint8_t* out = nullptr;
      const utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t*)s.data() + b, (utf8proc_ssize_t)(e - b), &out,
                                              (utf8proc_option_t)(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
      if (n < 0) return s;  // not valid UTF-8 (a piece of valid UTF-8 cut at U+11A7 is valid): left as it is
      r.append((const char*)out, (size_t)n);
      std::free(out);
    }
    if (e == s.size()) return r;
    r += kTBase;
    b = e + 3;
  }
}

std::unique_ptr<Tokenizer> make_bpe_tokenizer(BpeVocab v, const std::string& where) {
  return std::make_unique<BpeTokenizer>(std::move(v), where);
}

}  // namespace focal
