#include "settings.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/stat.h>

#include "focal/atomic_file.h"
#include "heat_color.h"
#include "focal/error.h"

namespace focalscope {

using json = nlohmann::json;

std::string Settings::default_path() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  std::string base;
  if (xdg && *xdg)
    base = xdg;
  else if (const char* home = std::getenv("HOME"))
    base = std::string(home) + "/.config";
  else
    base = ".";
  return base + "/focalscope/settings.json";
}

Settings Settings::load(const std::string& path, std::string* warning) {
  Settings s;
  std::ifstream f(path);
  if (!f) return s;
  try {
    json j = json::parse(f);
    s.model_path = j.value("model_path", s.model_path);
    s.model_b_path = j.value("model_b_path", s.model_b_path);
    s.layer = j.value("layer", s.layer);
    s.head = j.value("head", s.head);
    s.query = j.value("query", s.query);
    s.prompt = j.value("prompt", s.prompt);
    s.spec_a_json = j.value("spec_a", s.spec_a_json);
    s.spec_b_json = j.value("spec_b", s.spec_b_json);
    if (j.contains("recent")) s.recent = j["recent"].get<std::vector<std::string>>();
    s.compare = j.value("compare", s.compare);
    s.device = j.value("device", s.device);
    s.weights = j.value("weights", s.weights);
    s.precision = j.value("precision", s.precision);
    s.live_propagate = j.value("live_propagate", s.live_propagate);
    if (j.contains("heat_color")) {
      const std::string c = j["heat_color"].get<std::string>();
      HeatColor parsed;
      if (parse_heat_color(c, parsed))
        s.heat_color = c;
      else if (warning)  // this field only (a later version's mode, say): the rest of the settings stay
        *warning = "settings '" + path + "': heat_color '" + c + "' is not auto, linear or log; using auto";
    } else if (j.value("log_color", false)) {  // written before heat_color: log ticked
      s.heat_color = "log";
    }
    s.hide_sink = j.value("hide_sink", s.hide_sink);
    s.window_w = j.value("window_w", s.window_w);
    s.window_h = j.value("window_h", s.window_h);
  } catch (const std::exception& e) {
    if (warning) *warning = "settings '" + path + "' could not be read (" + e.what() + "); using defaults";
    return Settings{};
  }
  return s;
}

void Settings::save(const std::string& path) const {
  const size_t slash = path.find_last_of('/');
  if (slash != std::string::npos) {  // create the directory chain
    std::string dir = path.substr(0, slash);
    for (size_t i = 1; i <= dir.size(); ++i)
      if (i == dir.size() || dir[i] == '/') mkdir(dir.substr(0, i).c_str(), 0755);
  }
  json j;
  j["model_path"] = model_path;
  j["model_b_path"] = model_b_path;
  j["layer"] = layer;
  j["head"] = head;
  j["query"] = query;
  j["prompt"] = prompt;
  j["spec_a"] = spec_a_json;
  j["spec_b"] = spec_b_json;
  j["recent"] = recent;
  j["compare"] = compare;
  j["device"] = device;
  j["weights"] = weights;
  j["precision"] = precision;
  j["live_propagate"] = live_propagate;
  j["heat_color"] = heat_color;
  j["log_color"] = heat_color == "log";  // what builds before heat_color read
  j["hide_sink"] = hide_sink;
  j["window_w"] = window_w;
  j["window_h"] = window_h;
  focal::write_file_atomically(path, j.dump(2) + "\n");
}

std::vector<ScriptCommand> parse_script(const std::string& text, const std::string& path) {
  // name -> {min args, max args}; -1: the rest of the line is one argument
  static const std::map<std::string, std::pair<int, int>> kArity = {
      {"open", {-1, -1}},     {"open-b", {-1, -1}},     {"prompt", {-1, -1}},      {"temp", {1, 2}},
      {"mode", {1, 2}},       {"layer-temp", {2, 2}},   {"head-temp", {3, 3}},     {"tau-scale", {1, 1}},
      {"compare", {1, 1}},    {"select", {2, 3}},       {"view", {1, 1}},          {"log", {1, 1}},
      {"sink", {1, 1}},       {"propagate", {1, 1}},    {"wait", {0, 1}},          {"frames", {1, 1}},
      {"screenshot", {1, 2}}, {"export", {1, 1}},       {"figure", {2, 2}},        {"sweep", {0, 0}},
      {"generate", {1, 1}},   {"resize", {2, 2}},       {"quit", {0, 0}},          {"truncate", {0, 0}},
      {"tab", {1, 1}},        {"relevant", {1, 1}},     {"keys", {1, 1}},          {"set-temp", {3, 4}},
      {"corpus-doc", {1, 1}}, {"edit-prompt", {0, 0}},  {"spec", {1, 2}},          {"capture-generation", {0, 0}},
      {"open-model", {0, 0}}, {"corpus-model", {0, 0}}, {"details-height", {1, 1}}};
  // name -> how many leading arguments are counts, indices or pixels: whole numbers >= 0, checked here so that
  // "frames abc" is a usage error (exit 2) like a wrong argument count, not a failure of the run (exit 1). Ranges
  // that depend on what is loaded (a layer of this model) are checked when the command runs.
  static const std::map<std::string, int> kWholeArgs = {
      {"frames", 1},   {"wait", 1},       {"select", 3},         {"relevant", 1},   {"keys", 1},     {"resize", 2},
      {"generate", 1}, {"corpus-doc", 1}, {"details-height", 1}, {"layer-temp", 1}, {"head-temp", 2}};
  std::vector<ScriptCommand> out;
  std::istringstream in(text);
  std::string line;
  int no = 0;
  while (std::getline(in, line)) {
    ++no;
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    line = line.substr(b);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    ScriptCommand c;
    c.line = no;
    const size_t sp = line.find(' ');
    c.name = line.substr(0, sp);
    c.rest = sp == std::string::npos ? "" : line.substr(line.find_first_not_of(' ', sp));
    std::istringstream ws(c.rest);
    for (std::string w; ws >> w;) c.args.push_back(w);
    auto it = kArity.find(c.name);
    const std::string where = path + ":" + std::to_string(no);
    if (it == kArity.end()) throw focal::Error(where + ": unknown command '" + c.name + "' (see focalscope --help)");
    if (it->second.first < 0) {
      if (c.rest.empty()) throw focal::Error(where + ": '" + c.name + "' needs an argument");
    } else if ((int)c.args.size() < it->second.first || (int)c.args.size() > it->second.second) {
      throw focal::Error(where + ": '" + c.name + "' takes " + std::to_string(it->second.first) +
                         (it->second.second != it->second.first ? "-" + std::to_string(it->second.second) : "") +
                         " arguments, got " + std::to_string(c.args.size()));
    }
    if (auto w = kWholeArgs.find(c.name); w != kWholeArgs.end())
      for (size_t i = 0; i < c.args.size() && (int)i < w->second; ++i)
        if (c.args[i].find_first_not_of("0123456789") != std::string::npos || c.args[i].size() > 9)
          throw focal::Error(where + ": " + c.name + ": '" + c.args[i] + "' is not a whole number >= 0");
    out.push_back(c);
  }
  return out;
}

}  // namespace focalscope
