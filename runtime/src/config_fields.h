// config.json field access with errors that name the file and the field (config.cpp, config_arch.cpp).
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "focal/config.h"
#include "focal/error.h"

namespace focal {

using json = nlohmann::json;

// How a JSON value looks in an error message: its type and (short) value.
inline std::string describe(const json& v) {
  if (v.is_array() || v.is_object())  // not dumped: a hostile file may nest them deeply
    return std::string(v.is_array() ? "an array" : "an object") + " of " + std::to_string(v.size()) + " entries";
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  const char* kind = v.is_string()           ? "a string"
                     : v.is_boolean()        ? "a boolean"
                     : v.is_null()           ? "null"
                     : v.is_array()          ? "an array"
                     : v.is_object()         ? "an object"
                     : v.is_number_integer() ? "an integer"
                                             : "a number";
  return std::string(kind) + " (" + text + ")";
}

// Every config.json field is read through this: a missing field takes its default; a present one must have the
// expected type and range, or the error names the file, the field, what was expected and what was found. `prefix`
// names a nested object ("focal."); `aliases` maps a field to the name its source used (GGUF metadata keys).
class Fields {
 public:
  Fields(const json& j, std::string path, std::string prefix, const ConfigFieldNames* aliases)
      : j_(j), path_(std::move(path)), prefix_(std::move(prefix)), aliases_(aliases) {}

  std::string name(const char* key) const {
    std::string full = prefix_ + key;
    if (aliases_) {
      auto it = aliases_->find(full);
      if (it != aliases_->end()) return it->second;
    }
    return full;
  }
  [[noreturn]] void fail(const char* key, const std::string& what) const {
    throw Error(path_ + ": field \"" + name(key) + "\" " + what);
  }
  const json* find(const char* key) const {
    auto it = j_.find(key);
    return (it == j_.end() || it->is_null()) ? nullptr : &*it;
  }
  bool has(const char* key) const { return find(key) != nullptr; }

  int64_t integer(const char* key, int64_t def, int64_t lo, int64_t hi, bool required = false) const {
    const json* v = find(key);
    if (!v) {
      if (required) fail(key, "is required but missing");
      return def;
    }
    if (!v->is_number_integer()) fail(key, "must be an integer, found " + describe(*v));
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi))
      fail(key, "= " + v->dump() + " is out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi)
      fail(key, "= " + std::to_string(x) + " is out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    return x;
  }
  float number(const char* key, float def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_number()) fail(key, "must be a number, found " + describe(*v));
    const double x = v->get<double>();
    if (!std::isfinite(x) || std::fabs(x) > 3.0e38)
      fail(key, "= " + v->dump() + " must be finite (and within float range)");
    return float(x);
  }
  float positive(const char* key, float def) const {
    const float x = number(key, def);
    if (!(x > 0.0f)) fail(key, "= " + std::to_string(x) + " must be > 0");
    return x;
  }
  bool boolean(const char* key, bool def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_boolean()) fail(key, "must be true or false, found " + describe(*v));
    return v->get<bool>();
  }
  std::string string(const char* key, const std::string& def) const {
    const json* v = find(key);
    if (!v) return def;
    if (!v->is_string()) fail(key, "must be a string, found " + describe(*v));
    return v->get<std::string>();
  }
  // A token id, or a list of them (some configs list several eos ids; the first is used). -1: absent.
  int token_id(const char* key) const {
    const json* v = find(key);
    if (!v) return -1;
    const json* first = v;
    if (v->is_array()) {
      if (v->empty()) fail(key, "is an empty list (give a token id)");
      first = &(*v)[0];
    }
    if (!first->is_number_integer()) fail(key, "must be an integer token id, found " + describe(*v));
    if (first->get<int64_t>() < 0 || first->get<int64_t>() > (1LL << 30))
      fail(key, "= " + first->dump() + " is not a valid token id");
    return int(first->get<int64_t>());
  }
  // Every id of a token id or a list of them (eos_token_id: [128001, 128008, 128009]); empty: absent.
  std::vector<int> token_ids(const char* key) const {
    std::vector<int> out;
    const json* v = find(key);
    if (!v) return out;
    const std::vector<json> items = v->is_array() ? v->get<std::vector<json>>() : std::vector<json>{*v};
    for (const json& x : items) {
      if (!x.is_number_integer()) fail(key, "must be an integer token id or a list of them, found " + describe(*v));
      if (x.get<int64_t>() < 0 || x.get<int64_t>() > (1LL << 30))
        fail(key, "= " + x.dump() + " is not a valid token id");
      out.push_back(int(x.get<int64_t>()));
    }
    return out;
  }
  const json* object(const char* key) const {
    const json* v = find(key);
    if (v && !v->is_object()) fail(key, "must be an object, found " + describe(*v));
    return v;
  }

 private:
  const json& j_;
  std::string path_, prefix_;
  const ConfigFieldNames* aliases_;
};

// Applies the architecture's config.json fields (norms, activation, biases, scales, soft-caps, windows, positions,
// rope_scaling) to c.arch; c's sizes are already parsed. Throws Error naming the field for what it cannot run.
struct ArchSpec;
void parse_architecture(const Fields& f, const std::string& path, const ArchSpec& spec, ModelConfig& c);

}  // namespace focal
