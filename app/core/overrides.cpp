// Overrides for a set of layers or heads (overrides.h).
#include "overrides.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <cstdlib>
#include <sstream>
#include <type_traits>

#include "focal/error.h"

namespace focalscope {

std::vector<int> parse_index_set(const std::string& text, int n, const std::string& what) {
  std::vector<int> out;
  const size_t b = text.find_first_not_of(' ');
  if (b == std::string::npos) return out;
  if (text.substr(b, 1) == "*") {
    for (int i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  std::stringstream ss(text);
  std::string item;
  auto number = [&](const std::string& s) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end || v < 0 || v >= n)
      throw focal::Error(what + ": '" + item + "' is not an index or range in 0-" + std::to_string(n - 1) +
                         " (e.g. 0-5,9 or *)");
    return (int)v;
  };
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (item.empty()) continue;
    const size_t dash = item.find('-');
    if (dash == std::string::npos) {
      out.push_back(number(item));
    } else {
      const int a = number(item.substr(0, dash)), z = number(item.substr(dash + 1));
      if (z < a) throw focal::Error(what + ": the range '" + item + "' runs backwards");
      for (int i = a; i <= z; ++i) out.push_back(i);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

focal::TempSpec with_overrides(focal::TempSpec spec, const std::vector<int>& layers, const std::vector<int>& heads,
                               float t) {
  if (!spec.temp_file.empty()) spec.file_overridden = true;
  for (int l : layers) {
    if (heads.empty()) {
      if (t > 0) {
        spec.layer_temp[l] = t;
        // as TempSpec::parse_override: a temperature file's t of the layer's heads would win over it
        if (!spec.temp_file.empty())
          for (auto it = spec.head_temp.lower_bound({l, 0}); it != spec.head_temp.end() && it->first.first == l;)
            it = spec.head_temp.erase(it);
      } else {
        spec.layer_temp.erase(l);
      }
    }
    for (int h : heads) {
      if (t > 0)
        spec.head_temp[{l, h}] = t;
      else
        spec.head_temp.erase({l, h});
    }
  }
  return spec;
}

focal::TempSpec parse_spec_command(const std::string& text, const focal::ModelConfig* cfg, const std::string& where) {
  if (!cfg) throw focal::Error(where + ": spec " + text + ": needs an open model");
  focal::TempSpec s = focal::TempSpec::parse(text, where + ": spec", cfg);  // its errors start with `where`
  try {
    s.validate(*cfg);
  } catch (const focal::Error& e) { throw focal::Error(where + ": spec " + text + ": " + e.what()); }
  return s;
}

std::pair<std::string, std::string> labels_apart(const focal::TempSpec& was, const focal::TempSpec& now) {
  std::string a = was.label(), b = now.label();
  if (a != b) return {a, b};
  char buf[48];
  auto t_text = [&](const float* t) {
    if (!t) return std::string("none");
    std::snprintf(buf, sizeof buf, "%.3g", *t);
    return std::string(buf);
  };
  std::vector<std::pair<std::string, std::string>> diffs;  // per differing override: its text in was, in now
  // One pass per override map (layer -> t, (layer, head) -> t): every key either side holds whose t differs.
  auto compare = [&](const auto& x_map, const auto& y_map, const auto& name_of) {
    std::set<typename std::decay_t<decltype(x_map)>::key_type> keys;
    for (const auto& [k, t] : x_map) keys.insert(k);
    for (const auto& [k, t] : y_map) keys.insert(k);
    for (const auto& k : keys) {
      auto x = x_map.find(k), y = y_map.find(k);
      const float* tx = x == x_map.end() ? nullptr : &x->second;
      const float* ty = y == y_map.end() ? nullptr : &y->second;
      if (tx && ty && *tx == *ty) continue;
      const std::string what = name_of(k) + " t ";
      diffs.push_back({what + t_text(tx), what + t_text(ty)});
    }
  };
  compare(was.layer_temp, now.layer_temp, [](int l) { return "layer " + std::to_string(l); });
  compare(was.head_temp, now.head_temp, [](const std::pair<int, int>& lh) {
    return "head " + std::to_string(lh.first) + "." + std::to_string(lh.second);
  });
  if (diffs.empty()) return {a, b + " (another setting)"};  // a tau projection or a file of other t
  std::string da, db;
  for (size_t i = 0; i < diffs.size() && i < 3; ++i) {
    da += (i ? ", " : "") + diffs[i].first;
    db += (i ? ", " : "") + diffs[i].second;
  }
  if (diffs.size() > 3) {
    const std::string more = ", " + std::to_string(diffs.size() - 3) + " more";
    da += more;
    db += more;
  }
  return {a + " (" + da + ")", b + " (" + db + ")"};
}

}  // namespace focalscope
