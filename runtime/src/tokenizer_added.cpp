// Added tokens in the text (tokenizer.json added_tokens, a vocabulary's control pieces): one matcher for the
// byte-level, sentencepiece-style and sentencepiece tokenizers.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer_internal.h"

namespace focal {

namespace {

// Whether the code point ending at / starting at byte `at` is a word character.
bool touches_word_before(const std::string& t, size_t at) {
  if (at == 0) return false;
  size_t b = at - 1, len = 0;
  while (b > 0 && ((uint8_t)t[b] >> 6) == 2 && at - b < 4) --b;
  const uint32_t cp = next_cp(t, b, &len);
  return b + len == at && word_char(cp);
}
bool touches_word_after(const std::string& t, size_t at) {
  if (at >= t.size()) return false;
  size_t len = 0;
  return word_char(next_cp(t, at, &len));
}
// If the code point ending at byte `at` (starting at `at`) is whitespace, moves *to past it and returns true.
bool is_space_before(const std::string& t, size_t at, size_t* to) {
  size_t b = at - 1, len = 0;
  while (b > 0 && ((uint8_t)t[b] >> 6) == 2 && at - b < 4) --b;
  const uint32_t cp = next_cp(t, b, &len);
  if (b + len != at || !white_space(cp)) return false;
  *to = b;
  return true;
}
bool is_space_at(const std::string& t, size_t at, size_t* to) {
  size_t len = 0;
  if (!white_space(next_cp(t, at, &len))) return false;
  *to = at + len;
  return true;
}

}  // namespace

AddedTokens::AddedTokens(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  tokens_.erase(std::remove_if(tokens_.begin(), tokens_.end(), [](const AddedToken& t) { return t.text.empty(); }),
                tokens_.end());
  for (const AddedToken& t : tokens_) first_byte_[(uint8_t)t.text[0]] = true;
  std::stable_sort(tokens_.begin(), tokens_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.text.size() > b.text.size(); });
}

void AddedTokens::split(const std::string& text, const std::function<void(size_t, size_t)>& plain,
                        const std::function<void(int32_t)>& token) const {
  size_t seg = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    if (first_byte_[(uint8_t)text[i]])
      for (const AddedToken& t : tokens_)
        if (text.compare(i, t.text.size(), t.text) == 0) {
          hit = &t;
          break;
        }
    if (!hit) {
      ++i;
      continue;
    }
    const size_t match_end = i + hit->text.size();
    size_t start = i, stop = match_end;
    if ((hit->flags & kAddedSingleWord) && (touches_word_before(text, start) || touches_word_after(text, stop))) {
      i = stop;
      continue;
    }
    bool more = (hit->flags & kAddedLstrip) != 0;
    while (more && start > seg) more = is_space_before(text, start, &start);
    more = (hit->flags & kAddedRstrip) != 0;
    while (more && stop < text.size()) more = is_space_at(text, stop, &stop);
    if (start > seg) plain(seg, start);
    token(hit->id);
    // The search goes on from the match's own end (an added token may start in the whitespace rstrip took), the
    // plain text from after the stripped whitespace, as in tokenizers.
    i = match_end;
    seg = std::max(seg, stop);
  }
  if (seg < text.size()) plain(seg, text.size());
}

}  // namespace focal
