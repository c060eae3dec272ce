// Option parsing helpers for the `focal` CLI.
#include "args.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <limits>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "focal/byte_size.h"
#include "focal/error.h"

namespace focal::cli {

Args::Args(int argc, char** argv, int first, const std::set<std::string>& flags, const std::set<std::string>& options) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.size() > 1 && a[0] == '-' && !(a.size() > 1 && (std::isdigit((unsigned char)a[1]) || a[1] == '.'))) {
      std::string name = a, value;
      bool has_value = false;
      const size_t eq = a.find('=');
      if (eq != std::string::npos) {
        name = a.substr(0, eq);
        value = a.substr(eq + 1);
        has_value = true;
      }
      if (name == "-o") name = "--output";
      if (name == "-n") name = "--n-new";
      if (flags.count(name)) {
        if (has_value) throw UsageError{"option " + name + " takes no value"};
        values_[name] = "1";
      } else if (options.count(name)) {
        if (!has_value) {
          // A following "--option" is never taken as a value (negative numbers like -1 still are).
          if (i + 1 >= argc || std::string(argv[i + 1]).rfind("--", 0) == 0 || std::string(argv[i + 1]) == "-o" ||
              std::string(argv[i + 1]) == "-n")
            throw UsageError{"option " + (a == "-o" ? std::string("-o") : name) + " needs a value"};
          value = argv[++i];
        }
        // Given twice, one value would be dropped without a word (capture --compare A --compare B ran B alone).
        if (const auto it = values_.find(name); it != values_.end())
          throw UsageError{"option " + name + " is given twice ('" + it->second + "', then '" + value +
                           "'): give it once"};
        values_[name] = value;
      } else {
        throw UsageError{"unknown option '" + name + "'"};
      }
    } else {
      positional_.push_back(a);
    }
  }
}

std::string Args::get(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

double parse_double(const std::string& s, const std::string& option) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0') throw UsageError{option + ": '" + s + "' is not a number"};
  return v;
}

double Args::get_double(const std::string& name, double def) const {
  return has(name) ? parse_double(get(name), name) : def;
}

long long Args::get_int(const std::string& name, long long def) const {
  if (!has(name)) return def;
  const std::string s = get(name);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') throw UsageError{name + ": '" + s + "' is not an integer"};
  if (errno == ERANGE) throw UsageError{name + ": " + s + " is out of range"};
  return v;
}

int Args::get_int32(const std::string& name, int def) const {
  const long long v = get_int(name, def);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    throw UsageError{name + ": " + get(name) + " is out of range (at most " +
                     std::to_string(std::numeric_limits<int>::max()) + ")"};
  return (int)v;
}

uint64_t Args::get_u64(const std::string& name, uint64_t def) const {
  if (!has(name)) return def;
  const std::string s = get(name);
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || s.find('-') != std::string::npos)
    throw UsageError{name + ": '" + s + "' is not an integer >= 0"};
  if (errno == ERANGE) throw UsageError{name + ": " + s + " is out of range (at most 18446744073709551615)"};
  return (uint64_t)v;
}

std::vector<int> parse_index_list(const std::string& s, const std::string& option) {
  std::vector<int> out;
  if (s.empty() || s == "all") return out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string::npos) comma = s.size();
    const std::string part = s.substr(pos, comma - pos);
    const size_t dash = part.find('-', 1);
    char* end = nullptr;
    if (dash == std::string::npos) {
      const long v = std::strtol(part.c_str(), &end, 10);
      if (part.empty() || *end) throw UsageError{option + ": '" + part + "' is not an index (use e.g. 0,2,5-7)"};
      out.push_back((int)v);
    } else {
      const std::string a = part.substr(0, dash), b = part.substr(dash + 1);
      const long lo = std::strtol(a.c_str(), &end, 10);
      if (a.empty() || *end) throw UsageError{option + ": '" + part + "' is not a range (use e.g. 5-7)"};
      const long hi = std::strtol(b.c_str(), &end, 10);
      if (b.empty() || *end || hi < lo) throw UsageError{option + ": '" + part + "' is not a range (use e.g. 5-7)"};
      for (long v = lo; v <= hi; ++v) out.push_back((int)v);
    }
    pos = comma + 1;
  }
  return out;
}

std::vector<float> parse_float_range(const std::string& s, const std::string& option) {
  std::vector<float> out;
  if (s.find(':') != std::string::npos) {
    const size_t c1 = s.find(':'), c2 = s.find(':', c1 + 1);
    if (c2 == std::string::npos) throw UsageError{option + ": use FROM:TO:STEP, e.g. 0.3:1.0:0.1"};
    const double a = parse_double(s.substr(0, c1), option), b = parse_double(s.substr(c1 + 1, c2 - c1 - 1), option),
                 st = parse_double(s.substr(c2 + 1), option);
    // Well-formed numbers that make no range are an error in a value (exit 1), as a temperature out of range is.
    if (!std::isfinite(a) || !std::isfinite(b) || !std::isfinite(st))  // nan:1:0.1 gave an empty list
      throw Error(option + " " + s + ": FROM, TO and STEP must be finite numbers (e.g. 0.3:1.0:0.1)");
    if (!(st > 0)) throw Error(option + " " + s + ": STEP must be above 0 (e.g. 0.3:1.0:0.1)");
    if (b < a) throw Error(option + " " + s + ": FROM is above TO (e.g. 0.3:1.0:0.1)");
    const double n_values = std::floor((b - a) / st + 1e-6) + 1;
    if (n_values > 10000)
      throw Error(option + " " + s + ": " + std::to_string((long long)std::min(n_values, 1e18)) +
                  " values, more than 10000: give a larger STEP");
    const int n = (int)n_values;
    for (int i = 0; i < n; ++i) out.push_back((float)(a + i * st));
  } else {
    size_t pos = 0;
    while (pos <= s.size()) {
      size_t comma = s.find(',', pos);
      if (comma == std::string::npos) comma = s.size();
      out.push_back((float)parse_double(s.substr(pos, comma - pos), option));
      pos = comma + 1;
    }
  }
  return out;
}

std::vector<std::string> split_names(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<std::string> split_labels(const std::string& s) {
  std::vector<std::string> out;
  std::string item;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == ',' || s[i + 1] == '\\')) {
      item += s[++i];
    } else if (s[i] == ',') {
      out.push_back(item);
      item.clear();
    } else {
      item += s[i];
    }
  }
  out.push_back(item);
  for (size_t k = 0; k < out.size(); ++k)
    if (out[k].empty())
      throw UsageError{"--labels: label " + std::to_string(k + 1) + " of '" + s +
                       "' is empty (one label per file, separated by commas; write \\, for a comma inside a label)"};
  return out;
}

size_t parse_bytes(const std::string& s, const std::string& option) {
  const std::optional<uint64_t> v = parse_byte_size(s);
  if (!v) throw UsageError{option + ": '" + s + "' is not a positive size (use e.g. 512M or 2G)"};
  return (size_t)*v;
}

std::string default_model_dir() {
#ifdef FOCAL_ASSETS_DIR
  return std::string(FOCAL_ASSETS_DIR) + "/models/focal-t0.4";
#else
  return "assets/models/focal-t0.4";
#endif
}

std::string model_arg(const Args& a, const char* command) {
  if (a.positional().size() > 1)
    throw UsageError{std::string(command) + " takes one MODEL (a model directory or a .gguf file)"};
  return a.positional().empty() ? default_model_dir() : a.positional()[0];
}

void check_limit_option(const Args& a) {
  if (a.get_int("--limit", 0) < 1)
    throw Error("--limit " + a.get("--limit") + ": give at least 1 document (or leave --limit out: all of them)");
}

}  // namespace focal::cli
