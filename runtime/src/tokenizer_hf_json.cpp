// The tokenizer of a Hugging Face model directory: tokenizer.json (byte-level BPE: GPT-2, Llama 3, Qwen2, OLMo 2,
// SmolLM2) read into the BPE engine that GGUF vocabularies use, or a sentencepiece tokenizer.model. Special-token
// ids and whether prompts start with BOS come from tokenizer.json's post_processor and tokenizer_config.json, with
// generation_config.json and config.json as fallbacks (docs/model-format.md, "Tokenizers of HF directories").
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "focal/config.h"
#include "focal/atomic_file.h"
#include "focal/error.h"
#include "tokenizer_internal.h"

namespace focal {

using json = nlohmann::json;

namespace {

// The pre-tokenizer patterns (Split's "pattern": {"Regex": ...}) the engine implements, by scheme.
const char* const kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Token ids above this are refused (a corrupt file must not make us allocate gigabytes).
constexpr int64_t kMaxTokenId = 1 << 24;

bool is_file(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

json read_json_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot read '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) { throw Error("'" + path + "' is not valid JSON: " + e.what()); }
}

// "type" of a tokenizer.json component object, "" for null.
std::string type_of(const json& j, const std::string& where) {
  if (j.is_null()) return "";
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    throw Error(where + " must be an object with a string \"type\"");
  return j["type"].get<std::string>();
}

bool bool_field(const json& j, const char* key, bool def, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return def;
  if (!j[key].is_boolean()) throw Error(where + "." + key + " must be true or false");
  return j[key].get<bool>();
}

// The steps of tokenizer.json component `field` (normalizer, pre_tokenizer): a Sequence's list `list`, one step
// alone, or none; each with its field path ("pre_tokenizer.pretokenizers[1]") for error messages.
std::vector<std::pair<json, std::string>> steps_of(const json& tj, const std::string& field, const char* list,
                                                   const std::string& file) {
  const auto where = [&](const std::string& path) { return file + ": field \"" + path + "\""; };
  const json c = tj.value(field, json());
  const std::string t = type_of(c, where(field));
  std::vector<std::pair<json, std::string>> steps;
  if (t == "Sequence") {
    if (!c.contains(list) || !c[list].is_array())
      throw Error(where(field + "." + list) + " is missing (a Sequence needs a list)");
    for (size_t k = 0; k < c[list].size(); ++k)
      steps.emplace_back(c[list][k], field + "." + list + "[" + std::to_string(k) + "]");
  } else if (!t.empty()) {
    steps.emplace_back(c, field);
  }
  return steps;
}

// Reads tokenizer.json tj's pre_tokenizer into v->pre / v->add_prefix_space. Supported shapes: ByteLevel(use_regex=true);
// Sequence[Digits(individual_digits=true), ByteLevel(use_regex=true)]; Sequence[Split(Regex=known, Isolated),
// ByteLevel(use_regex=false)].
void read_pre_tokenizer(const json& tj, const std::string& file, BpeVocab* v) {
  const auto where = [&](const std::string& path) { return file + ": field \"" + path + "\""; };
  bool byte_level = false, split = false, digits = false, use_regex = true;
  for (const auto& [p, path] : steps_of(tj, "pre_tokenizer", "pretokenizers", file)) {
    const std::string pw = where(path);
    const std::string pk = type_of(p, pw);
    if (pk == "ByteLevel") {
      if (byte_level) throw Error(pw + ": a second ByteLevel is not supported");
      byte_level = true;
      use_regex = bool_field(p, "use_regex", true, pw);
      v->add_prefix_space = bool_field(p, "add_prefix_space", false, pw);
    } else if (pk == "Digits") {
      if (!bool_field(p, "individual_digits", false, pw))
        throw Error(pw +
                    ": Digits with individual_digits false is not supported (focalscope splits digits one by one)");
      digits = true;
    } else if (pk == "Split") {
      const json* re = p.contains("pattern") && p["pattern"].is_object() && p["pattern"].contains("Regex")
                           ? &p["pattern"]["Regex"]
                           : nullptr;
      if (!re || !re->is_string())
        throw Error(where(path + ".pattern") + ": only {\"Regex\": ...} patterns of byte-level BPE are supported");
      const std::string r = re->get<std::string>();
      if (r == kGpt2Regex) {
        v->pre = BpePre::kGpt2;
      } else if (r == kLlama3Regex) {
        v->pre = BpePre::kLlama3;
      } else if (r == kQwen2Regex) {
        v->pre = BpePre::kQwen2;
      } else {
        throw Error(where(path + ".pattern.Regex") + " '" + r +
                    "' is not a pre-tokenizer focalscope implements (it knows the regexes of GPT-2, Llama 3 / OLMo 2 "
                    "and Qwen2; see docs/model-format.md)");
      }
      const std::string behavior = p.value("behavior", std::string("Isolated"));
      if (behavior != "Isolated" || bool_field(p, "invert", false, pw))
        throw Error(pw + ": Split must have \"behavior\": \"Isolated\" and \"invert\": false (found \"" + behavior +
                    "\")");
      if (split) throw Error(pw + ": a second Split is not supported");
      split = true;
    } else {
      throw Error(pw + ": pre-tokenizer type '" + pk +
                  "' is not supported (focalscope reads byte-level BPE: ByteLevel, Digits, Split with the GPT-2, "
                  "Llama 3 or Qwen2 regex)");
    }
  }
  const std::string w = where("pre_tokenizer");
  if (!byte_level)
    throw Error(w +
                ": no ByteLevel pre-tokenizer — focalscope reads byte-level BPE tokenizer.json files only "
                "(for sentencepiece models put tokenizer.model in the directory)");
  if (split && use_regex)
    throw Error(w + ": Split followed by ByteLevel with use_regex true is not supported (set use_regex false)");
  if (!split && !use_regex) throw Error(w + ": ByteLevel with use_regex false and no Split regex is not supported");
  if (digits && split) throw Error(w + ": Digits together with Split is not supported");
  // ByteLevel's add_prefix_space applies to every piece an earlier pre-tokenizer made; only the plain GPT-2 shape,
  // where the piece is the whole text between added tokens, is implemented.
  if (v->add_prefix_space && (digits || split))
    throw Error(w + ": ByteLevel add_prefix_space true after Digits or Split is not supported");
  if (!split) v->pre = digits ? BpePre::kDigitsGpt2 : BpePre::kGpt2;
}

const char* const kMetaSpace = "\xE2\x96\x81";  // U+2581

// Whether a tokenizer.json is sentencepiece-style: a Metaspace pre-tokenizer, or a normalizer that writes spaces as
// U+2581 (Llama 2, Mistral, Gemma, Phi-3 as transformers converts their tokenizer.model).
bool is_metaspace(const json& tj) {
  const json pt = tj.value("pre_tokenizer", json()), nm = tj.value("normalizer", json());
  return (pt.is_object() && pt.dump().find("\"Metaspace\"") != std::string::npos) ||
         (nm.is_object() && nm.dump().find(kMetaSpace) != std::string::npos);
}

// Reads a sentencepiece-style tokenizer.json's normalizer (Prepend("▁"), Replace(" ", "▁"), or a Sequence of
// them), pre_tokenizer (none, Metaspace("▁"), Split(" ") after Replace) and decoder (its Strip) into v. Any other
// normalizer or pre-tokenizer step is refused by name.
void read_metaspace(const json& tj, const std::string& file, BpeVocab* v) {
  v->pre = BpePre::kMetaspace;
  const auto where = [&](const std::string& path) { return file + ": field \"" + path + "\""; };
  const std::string unsupported =
      "' is not supported in a sentencepiece-style tokenizer.json (focalscope reads Prepend(\"\xE2\x96\x81\") and "
      "Replace(\" \", \"\xE2\x96\x81\") normalizers and a Metaspace pre-tokenizer; put the model's tokenizer.model "
      "in the directory)";
  for (const auto& [n, path] : steps_of(tj, "normalizer", "normalizers", file)) {
    const std::string t = type_of(n, where(path));
    if (t == "Prepend" && n.value("prepend", std::string()) == kMetaSpace) {
      v->norm_prepend = true;
    } else if (t == "Replace" && n.contains("pattern") && n["pattern"].is_object() &&
               n["pattern"].value("String", std::string("-")) == " " &&
               n.value("content", std::string()) == kMetaSpace) {
      v->norm_spaces = true;
    } else {
      throw Error(where(path) + ": type '" + t + (t == "Prepend" || t == "Replace" ? " " + n.dump() : "") +
                  unsupported);
    }
  }
  // pre_tokenizer: none, Metaspace, or a Sequence of them and Split(" ") (Gemma's: nothing to split once the
  // normalizer has written the spaces as U+2581).
  for (const auto& [p, path] : steps_of(tj, "pre_tokenizer", "pretokenizers", file)) {
    const std::string t = type_of(p, where(path));
    if (t == "Metaspace") {
      if (v->meta_pre) throw Error(where(path) + ": a second Metaspace is not supported");
      if (p.contains("replacement") && p["replacement"] != json(kMetaSpace))
        throw Error(where(path + ".replacement") + " must be \"\xE2\x96\x81\" (U+2581)");
      v->meta_pre = true;
      // prepend_scheme (tokenizers >= 0.15), else the older add_prefix_space (true: always).
      std::string scheme = bool_field(p, "add_prefix_space", true, where(path)) ? "always" : "never";
      if (p.contains("prepend_scheme") && !p["prepend_scheme"].is_null()) {
        if (!p["prepend_scheme"].is_string())
          throw Error(where(path + ".prepend_scheme") + " must be \"first\", \"always\" or \"never\"");
        scheme = p["prepend_scheme"].get<std::string>();
      }
      if (scheme == "first")
        v->meta_prefix = MetaPrefix::kFirstUnlessSpace;
      else if (scheme == "always")
        v->meta_prefix = MetaPrefix::kEveryUnlessSpace;
      else if (scheme != "never")
        throw Error(where(path + ".prepend_scheme") + " is '" + scheme + "' (first, always or never)");
      v->meta_split = bool_field(p, "split", true, where(path));
    } else if (t == "Split" && v->norm_spaces && p.contains("pattern") && p["pattern"].is_object() &&
               p["pattern"].value("String", std::string("-")) == " " && !bool_field(p, "invert", false, where(path))) {
      // no space is left to split at
    } else {
      throw Error(where(path) + ": type '" + t + unsupported);
    }
  }
  if (!v->norm_spaces && !v->meta_pre)
    throw Error(where("normalizer") +
                " writes U+2581 but not for spaces: a sentencepiece-style tokenizer.json needs "
                "Replace(\" \", \"\xE2\x96\x81\") or a Metaspace pre-tokenizer");
  // decoder: Replace, ByteFallback, Fuse are what decode does; Strip(" ", N, 0) drops the text's first N spaces, a
  // Metaspace decoder whose scheme prepends its first one.
  const json dec = tj.value("decoder", json());
  if (!dec.is_null() && !dec.is_object()) throw Error(where("decoder") + " must be an object or null");
  if (dec.is_object()) {
    std::vector<json> steps;
    if (dec.value("type", std::string()) == "Sequence" && dec.contains("decoders") && dec["decoders"].is_array())
      for (const json& d : dec["decoders"]) steps.push_back(d);
    else
      steps.push_back(dec);
    for (const json& d : steps) {
      if (!d.is_object()) continue;
      const std::string t = d.value("type", std::string());
      if (t == "Strip" && d.value("content", std::string()) == " " && d.contains("start") &&
          d["start"].is_number_unsigned())
        v->strip_decoded_spaces = (int)std::min<uint64_t>(d["start"].get<uint64_t>(), 1u << 20);
      if (t == "Metaspace") {
        const json ps = d.value("prepend_scheme", json());
        const bool prepends = ps.is_string() ? ps.get<std::string>() != "never"
                                             : bool_field(d, "add_prefix_space", true, where("decoder"));
        if (prepends) v->strip_decoded_spaces = std::max(v->strip_decoded_spaces, 1);
      }
    }
  }
}

// A special token in tokenizer_config.json: "text", {"content": "text", ...} or null.
std::string token_text(const json& cfg, const char* key, const std::string& file) {
  if (!cfg.contains(key) || cfg[key].is_null()) return "";
  const json& t = cfg[key];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t["content"].is_string()) return t["content"].get<std::string>();
  throw Error(file + ": field \"" + key + "\" must be a token string or {\"content\": ...}");
}

// An id from generation_config.json / config.json ("bos_token_id": 1 or [1, 2]); -1 if absent.
int id_field(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return -1;
  const json* v = &j[key];
  if (v->is_array() && !v->empty()) v = &(*v)[0];
  return v->is_number_integer() && v->get<int64_t>() >= 0 && v->get<int64_t>() < kMaxTokenId ? v->get<int>() : -1;
}

// The tokenizer of `dir` from its parsed tokenizer.json `tj`.
HfJsonTokenizer from_parsed(const std::string& dir, const json& tj) {
  const std::string file = "'" + dir + "/tokenizer.json'";
  if (!tj.is_object()) throw Error(file + " must hold a JSON object");
  const json& model = tj.contains("model") ? tj["model"] : json();
  const std::string mtype = type_of(model, file + ": field \"model\"");
  if (mtype != "BPE")
    throw Error(file + ": field \"model.type\" is '" + mtype +
                "'; focalscope reads BPE tokenizer.json files, byte-level or sentencepiece-style (for other "
                "sentencepiece models put tokenizer.model in the directory)");
  BpeVocab v;
  // model.vocab {piece: id} and added_tokens [{id, content, special, lstrip, rstrip, single_word}] fill one id
  // space; ids no entry names stay empty, unused pieces.
  if (!model.contains("vocab") || !model["vocab"].is_object() || model["vocab"].empty())
    throw Error(file + ": field \"model.vocab\" is missing or empty (a {\"piece\": id} object)");
  std::map<int64_t, std::pair<std::string, int>> by_id;  // id -> (piece, TokenType)
  std::unordered_map<std::string, int> piece_id;
  for (const auto& [piece, idj] : model["vocab"].items()) {
    if (!idj.is_number_integer() || idj.get<int64_t>() < 0 || idj.get<int64_t>() >= kMaxTokenId)
      throw Error(file + ": field \"model.vocab\": piece '" + piece + "' has id " + idj.dump() +
                  ", not an integer in 0.." + std::to_string(kMaxTokenId - 1));
    const int64_t id = idj.get<int64_t>();
    if (!by_id.emplace(id, std::make_pair(piece, (int)kTokNormal)).second)
      throw Error(file + ": field \"model.vocab\": id " + std::to_string(id) + " is given to both '" + by_id[id].first +
                  "' and '" + piece + "'");
    piece_id.emplace(piece, (int)id);
  }
  std::map<int64_t, uint8_t> flags;
  if (tj.contains("added_tokens") && !tj["added_tokens"].is_null()) {
    if (!tj["added_tokens"].is_array()) throw Error(file + ": field \"added_tokens\" must be a list");
    size_t k = 0;
    for (const json& a : tj["added_tokens"]) {
      const std::string aw = file + ": field \"added_tokens[" + std::to_string(k++) + "]\"";
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string())
        throw Error(aw + " needs an integer \"id\" and a string \"content\"");
      const int64_t id = a["id"].get<int64_t>();
      const std::string content = a["content"].get<std::string>();
      if (id < 0 || id >= kMaxTokenId) throw Error(aw + ": id " + std::to_string(id) + " is out of range");
      if (content.empty()) throw Error(aw + ": \"content\" is empty");
      auto it = by_id.find(id);
      if (it != by_id.end() && it->second.first != content)
        throw Error(aw + ": id " + std::to_string(id) + " is '" + it->second.first + "' in model.vocab but '" +
                    content + "' here");
      const bool special = bool_field(a, "special", false, aw);
      by_id[id] = {content, special ? kTokControl : kTokUserDefined};
      piece_id[content] = (int)id;
      flags[id] = (bool_field(a, "lstrip", false, aw) ? kAddedLstrip : 0) |
                  (bool_field(a, "rstrip", false, aw) ? kAddedRstrip : 0) |
                  (bool_field(a, "single_word", false, aw) ? kAddedSingleWord : 0) |
                  (bool_field(a, "normalized", !special, aw) ? kAddedNormalized : 0);
    }
  }
  const size_t n = (size_t)by_id.rbegin()->first + 1;
  v.tokens.assign(n, "");
  v.types.assign(n, kTokUnused);
  v.added_flags.assign(n, 0);
  for (const auto& [id, pt] : by_id) {
    v.tokens[id] = pt.first;
    v.types[id] = pt.second;
  }
  for (const auto& [id, f] : flags) v.added_flags[id] = f;

  // model.merges: "a b" strings (tokenizers < 0.20) or [a, b] pairs; a, b and ab must all be pieces.
  if (!model.contains("merges") || !model["merges"].is_array())
    throw Error(file + ": field \"model.merges\" is missing (a list of \"a b\" strings or [a, b] pairs)");
  size_t r = 0;
  for (const json& m : model["merges"]) {
    const std::string mw = file + ": field \"model.merges[" + std::to_string(r++) + "]\"";
    std::string a, b;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        throw Error(mw + " ('" + s + "') is not two pieces separated by one space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
      if (a.find(' ') != std::string::npos || b.find(' ') != std::string::npos)
        throw Error(mw +
                    ": pieces with a space are not supported (byte-level and sentencepiece-style BPE spell "
                    "spaces as other characters)");
    } else {
      throw Error(mw + " must be an \"a b\" string or an [a, b] pair, found " + m.dump());
    }
    for (const std::string& p : {a, b, a + b})
      if (!piece_id.count(p)) throw Error(mw + " ('" + a + " " + b + "'): '" + p + "' is not in model.vocab");
    v.merges.push_back(a + " " + b);
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
      throw Error(file + ": field \"model." + key + "\" is not supported by byte-level BPE");
  if (model.contains("dropout") && model["dropout"].is_number() && model["dropout"].get<double>() > 0)
    throw Error(file + ": field \"model.dropout\" must be null (BPE dropout is for training)");
  v.ignore_merges = bool_field(model, "ignore_merges", false, file + ": field \"model\"");
  v.fuse_unk = bool_field(model, "fuse_unk", false, file + ": field \"model\"");
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    auto it = piece_id.find(model["unk_token"].get<std::string>());
    if (it == piece_id.end()) throw Error(file + ": field \"model.unk_token\" is not in model.vocab");
    v.unk_id = it->second;
  }

  if (is_metaspace(tj)) {
    read_metaspace(tj, file, &v);
    v.byte_fallback = bool_field(model, "byte_fallback", false, file + ": field \"model\"");
  } else {
    // normalizer: none, or NFC.
    const std::string norm = type_of(tj.value("normalizer", json()), file + ": field \"normalizer\"");
    v.nfc = norm == "NFC";
    if (!norm.empty() && norm != "NFC")
      throw Error(file + ": field \"normalizer\": type '" + norm +
                  "' is not supported (byte-level BPE tokenizers have none or NFC)");
    read_pre_tokenizer(tj, file, &v);
    if (bool_field(model, "byte_fallback", false, file + ": field \"model\""))
      throw Error(file +
                  ": field \"model.byte_fallback\" is true in a byte-level BPE tokenizer (its pieces cover "
                  "every byte already; set it false)");
  }

  // post_processor: a TemplateProcessing whose "single" template starts with a special token puts it first.
  HfJsonTokenizer out;
  std::vector<json> procs;
  const json pp = tj.value("post_processor", json());
  const std::string ppt = type_of(pp, file + ": field \"post_processor\"");
  if (ppt == "Sequence" && pp.contains("processors") && pp["processors"].is_array())
    for (const json& p : pp["processors"]) procs.push_back(p);
  else if (!ppt.empty())
    procs.push_back(pp);
  for (const json& p : procs) {
    if (!p.is_object() || p.value("type", std::string()) != "TemplateProcessing") continue;
    const json single = p.value("single", json::array());
    if (!single.is_array() || single.empty() || !single[0].contains("SpecialToken")) continue;
    const std::string name = single[0]["SpecialToken"].value("id", std::string());
    int id = -1;
    const json st = p.value("special_tokens", json::object());
    if (st.contains(name) && st[name].contains("ids") && st[name]["ids"].is_array() && st[name]["ids"].size() == 1 &&
        st[name]["ids"][0].is_number_integer())
      id = st[name]["ids"][0].get<int>();
    else if (piece_id.count(name))
      id = piece_id[name];
    if (id < 0 || id >= (int)n)
      throw Error(file + ": field \"post_processor\": the template's first token '" + name +
                  "' is not a token of this vocabulary");
    out.bos_from_template = id;
  }

  // tokenizer_config.json: bos_token / eos_token as text, add_bos_token.
  const std::string tc_path = dir + "/tokenizer_config.json";
  json tc = json::object();
  if (is_file(tc_path)) tc = read_json_file(tc_path);
  if (!tc.is_object()) throw Error("'" + tc_path + "' must hold a JSON object");
  const std::string tc_file = "'" + tc_path + "'";
  for (auto [key, id] : {std::pair<const char*, int*>{"bos_token", &out.bos_id}, {"eos_token", &out.eos_id}}) {
    const std::string text = token_text(tc, key, tc_file);
    if (text.empty()) continue;
    auto it = piece_id.find(text);
    if (it == piece_id.end())
      throw Error(tc_file + ": field \"" + key + "\" ('" + text + "') is not a token of " + file);
    *id = it->second;
  }
  // transformers' Llama, CodeLlama, Gemma, Cohere and GPT-NeoX fast tokenizers rebuild the template from
  // add_bos_token (default true, GPT-NeoX false) and bos_token; every other class (GPT2TokenizerFast,
  // PreTrainedTokenizerFast, Qwen2TokenizerFast ...) keeps tokenizer.json's post_processor and ignores add_bos_token.
  std::string cls = tc.contains("tokenizer_class") && tc["tokenizer_class"].is_string() ? tc["tokenizer_class"] : "";
  if (cls.size() > 4 && cls.compare(cls.size() - 4, 4, "Fast") == 0) cls.resize(cls.size() - 4);
  const bool rebuilds = cls == "LlamaTokenizer" || cls == "CodeLlamaTokenizer" || cls == "GemmaTokenizer" ||
                        cls == "CohereTokenizer" || cls == "GPTNeoXTokenizer";
  if (tc.contains("add_bos_token") && !tc["add_bos_token"].is_null() && !tc["add_bos_token"].is_boolean())
    throw Error(tc_file + ": field \"add_bos_token\" must be true or false");
  if (rebuilds)  // absent: the class's default; null: None, which adds no BOS
    out.add_bos_explicit = !tc.contains("add_bos_token")      ? cls != "GPTNeoXTokenizer"
                           : tc["add_bos_token"].is_boolean() ? tc["add_bos_token"].get<bool>()
                                                              : false;
  const json gc = is_file(dir + "/generation_config.json") ? read_json_file(dir + "/generation_config.json") : json();
  const json cc = is_file(dir + "/config.json") ? read_json_file(dir + "/config.json") : json();
  if (out.bos_id < 0) out.bos_id = out.bos_from_template;
  for (const json* j : {&gc, &cc}) {
    if (out.bos_id < 0) out.bos_id = id_field(*j, "bos_token_id");
    if (out.eos_id < 0) out.eos_id = id_field(*j, "eos_token_id");
  }
  if (out.bos_id >= (int)n) out.bos_id = -1;  // config.json ids of a larger vocabulary (config.cpp warns)
  if (out.eos_id >= (int)n) out.eos_id = -1;
  // Whether encode(text, add_special_tokens=True) starts with BOS, as transformers 4.47.1 does it.
  out.add_bos = out.add_bos_explicit ? *out.add_bos_explicit && out.bos_id >= 0 : out.bos_from_template >= 0;
  if (out.add_bos && !out.add_bos_explicit) out.bos_id = out.bos_from_template;
  v.bos_id = out.bos_id;
  v.eos_id = out.eos_id;
  out.tok = make_bpe_tokenizer(std::move(v), file);
  return out;
}

// from_parsed, with a JSON value of an unexpected type anywhere reported against the directory's tokenizer files.
HfJsonTokenizer from_parsed_checked(const std::string& dir, const json& tj) {
  try {
    return from_parsed(dir, tj);
  } catch (const json::exception& e) {
    throw Error("'" + dir +
                "/tokenizer.json' (or tokenizer_config.json): a field has an unexpected JSON type: " + e.what());
  }
}

}  // namespace

HfJsonTokenizer load_hf_json_tokenizer(const std::string& dir) {
  return from_parsed_checked(dir, read_json_file(dir + "/tokenizer.json"));
}

std::unique_ptr<Tokenizer> load_hf_dir_tokenizer(const std::string& dir, ModelConfig* cfg) {
  const std::string spm_path = dir + "/tokenizer.model", json_path = dir + "/tokenizer.json";
  require_link_target(json_path);  // a link to nothing read as no tokenizer ("has no tokenizer.model": ls shows one)
  require_link_target(spm_path);
  std::unique_ptr<Tokenizer> tok;
  std::string path;
  if (is_file(json_path)) {
    // tokenizer.json first, as transformers' AutoTokenizer reads it (byte-level BPE, or the sentencepiece-style BPE
    // transformers converts Llama 2 / Mistral / Gemma / Phi-3 tokenizers into); a sentencepiece directory whose
    // tokenizer.json is not byte-level and has a shape focalscope does not read keeps its tokenizer.model, and says so.
    const json tj = read_json_file(json_path);
    const bool byte_level =
        tj.is_object() && tj.value("pre_tokenizer", json()).dump().find("\"ByteLevel\"") != std::string::npos;
    try {
      HfJsonTokenizer h = from_parsed_checked(dir, tj);
      tok = std::move(h.tok);
      tok->source = is_metaspace(tj) ? "tokenizer.json (sentencepiece-style BPE)" : "tokenizer.json (byte-level BPE)";
      path = json_path;
      cfg->add_bos = h.add_bos;
    } catch (const Error& e) {
      if (byte_level || !is_file(spm_path)) throw;
      cfg->warnings.push_back(std::string(e.what()) +
                              "; its tokenizer.model is used instead (transformers' slow "
                              "tokenizer: a few texts may tokenize otherwise)");
    }
  }
  if (!tok && is_file(spm_path)) {
    // tokenizer_config.json beside it: the tokens added past tokenizer.model's pieces (Phi-3's chat tokens), matched
    // in the text with their lstrip / rstrip / single_word, and whether prompts start with BOS (config.json's
    // add_bos_token was read alone).
    std::vector<AddedToken> added;
    const std::string tc_path = dir + "/tokenizer_config.json";
    if (is_file(tc_path)) {
      const json tc = read_json_file(tc_path);
      if (tc.is_object() && tc.contains("added_tokens_decoder") && tc["added_tokens_decoder"].is_object())
        for (const auto& [key, v] : tc["added_tokens_decoder"].items()) {
          char* end = nullptr;
          const long id = std::strtol(key.c_str(), &end, 10);
          if (end == key.c_str() || *end || id < 0 || id >= kMaxTokenId) continue;
          if (!v.is_object() || !v.contains("content") || !v["content"].is_string()) continue;
          const std::string aw = "'" + tc_path + "': field \"added_tokens_decoder." + key + "\"";
          added.push_back({v["content"].get<std::string>(), (int32_t)id,
                           (uint8_t)((bool_field(v, "lstrip", false, aw) ? kAddedLstrip : 0) |
                                     (bool_field(v, "rstrip", false, aw) ? kAddedRstrip : 0) |
                                     (bool_field(v, "single_word", false, aw) ? kAddedSingleWord : 0))});
        }
      if (tc.is_object() && tc.contains("add_bos_token")) {
        if (!tc["add_bos_token"].is_boolean() && !tc["add_bos_token"].is_null())
          throw Error("'" + tc_path + "': field \"add_bos_token\" must be true or false");
        cfg->add_bos = tc["add_bos_token"].is_boolean() && tc["add_bos_token"].get<bool>() && cfg->bos_id >= 0;
      }
    }
    tok = load_spm_with_added(spm_path, added);
    path = spm_path;
  }
  if (!tok) return nullptr;
  if (tok->vocab_size() > cfg->vocab_size)
    throw Error("'" + path + "' has " + std::to_string(tok->vocab_size()) + " tokens but config.json vocab_size is " +
                std::to_string(cfg->vocab_size));
  return tok;
}

}  // namespace focal
