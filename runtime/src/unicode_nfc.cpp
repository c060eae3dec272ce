// Unicode NFC (canonical decomposition, canonical ordering, canonical composition) for tokenizer.json files whose
// normalizer is NFC (Qwen2), with the tables of scripts/gen-unicode-nfc-tables.py. Hangul syllables are composed
// and decomposed algorithmically (Unicode chapter 3.12).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer_internal.h"
#include "unicode_nfc_tables.h"

namespace focal {

namespace {

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

int combining_class(uint32_t cp) {
  const auto* e = std::lower_bound(std::begin(kNfcCombiningClass), std::end(kNfcCombiningClass), cp,
                                   [](const uint32_t(&r)[2], uint32_t c) { return r[0] < c; });
  return e != std::end(kNfcCombiningClass) && (*e)[0] == cp ? (int)(*e)[1] : 0;
}

void decompose(uint32_t cp, std::vector<uint32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out->push_back(kTBase + s % kTCount);
    return;
  }
  const auto* e = std::lower_bound(std::begin(kNfcDecomposition), std::end(kNfcDecomposition), cp,
                                   [](const uint32_t(&r)[3], uint32_t c) { return r[0] < c; });
  if (e == std::end(kNfcDecomposition) || (*e)[0] != cp) {
    out->push_back(cp);
    return;
  }
  decompose((*e)[1], out);
  if ((*e)[2]) decompose((*e)[2], out);
}

// The primary composite of (a, b), 0 if none.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto* e = std::lower_bound(std::begin(kNfcComposition), std::end(kNfcComposition), std::make_pair(a, b),
                                   [](const uint32_t(&r)[3], std::pair<uint32_t, uint32_t> k) {
                                     return r[0] < k.first || (r[0] == k.first && r[1] < k.second);
                                   });
  return e != std::end(kNfcComposition) && (*e)[0] == a && (*e)[1] == b ? (*e)[2] : 0;
}

void put_utf8(uint32_t cp, std::string* o) {
  if (cp < 0x80) {
    o->push_back((char)cp);
  } else if (cp < 0x800) {
    o->push_back((char)(0xC0 | (cp >> 6)));
    o->push_back((char)(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    o->push_back((char)(0xE0 | (cp >> 12)));
    o->push_back((char)(0x80 | ((cp >> 6) & 0x3F)));
    o->push_back((char)(0x80 | (cp & 0x3F)));
  } else {
    o->push_back((char)(0xF0 | (cp >> 18)));
    o->push_back((char)(0x80 | ((cp >> 12) & 0x3F)));
    o->push_back((char)(0x80 | ((cp >> 6) & 0x3F)));
    o->push_back((char)(0x80 | (cp & 0x3F)));
  }
}

// Strict UTF-8 decoding; false on any invalid sequence (overlong, surrogate, beyond U+10FFFF, truncated).
bool decode_utf8(const std::string& s, std::vector<uint32_t>* out) {
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = (uint8_t)s[i];
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) {
      const uint8_t d = (uint8_t)s[i + k];
      if ((d >> 6) != 2) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    out->push_back(cp);
    i += n;
  }
  return true;
}

}  // namespace

std::string nfc(const std::string& s) {
  // Below U+0300 nothing decomposes or composes: most text takes this path unchanged.
  bool plain = true;
  for (size_t i = 0; i < s.size() && plain; ++i) {
    const uint8_t c = (uint8_t)s[i];
    plain = c < 0xC0 || (c < 0xCC && c >= 0xC2);  // ASCII, continuation bytes, or a lead byte of U+0080..U+02FF
  }
  if (plain) return s;
  std::vector<uint32_t> cps, d;
  if (!decode_utf8(s, &cps)) return s;  // not valid UTF-8: left as it is
  d.reserve(cps.size());
  for (uint32_t cp : cps) decompose(cp, &d);
  // Canonical ordering: non-starters sorted by combining class, stable.
  std::vector<int> cc(d.size());
  for (size_t i = 0; i < d.size(); ++i) cc[i] = combining_class(d[i]);
  for (size_t i = 0; i < d.size();) {
    if (cc[i] == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && cc[j] != 0) ++j;
    std::vector<std::pair<int, uint32_t>> run;
    for (size_t k = i; k < j; ++k) run.push_back({cc[k], d[k]});
    std::stable_sort(run.begin(), run.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t k = i; k < j; ++k) {
      cc[k] = run[k - i].first;
      d[k] = run[k - i].second;
    }
    i = j;
  }
  // Canonical composition: each character joins the last starter unless a character between them blocks it.
  std::vector<uint32_t> out;
  std::vector<int> occ;
  out.reserve(d.size());
  long starter = -1;
  for (size_t i = 0; i < d.size(); ++i) {
    if (starter >= 0) {
      const int last_cc = occ.back();
      const bool adjacent = (long)out.size() - 1 == starter;
      if (adjacent || (last_cc != 0 && last_cc < cc[i])) {
        const uint32_t c = compose(out[starter], d[i]);
        if (c) {
          out[starter] = c;
          continue;
        }
      }
    }
    if (cc[i] == 0) starter = (long)out.size();
    out.push_back(d[i]);
    occ.push_back(cc[i]);
  }
  std::string r;
  r.reserve(s.size());
  for (uint32_t cp : out) put_utf8(cp, &r);
  return r;
}

}  // namespace focal
