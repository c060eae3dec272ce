// What the app remembers between launches (JSON in $XDG_CONFIG_HOME/focalscope/settings.json, else
// ~/.config/focalscope/settings.json), and the scripted-run command file used by tests, screenshots and benchmarks.
#pragma once

#include <string>
#include <vector>

namespace focalscope {

struct Settings {
  std::string model_path;               // last model (A)
  std::string model_b_path;             // model B when two models were compared (empty: two settings of model A)
  int layer = 0, head = 0, query = -1;  // the selection, restored when model_path is reopened (query -1: last)
  std::string prompt;
  std::string spec_a_json, spec_b_json;  // TempSpec JSON of each side, applied when model_path is reopened
  std::vector<std::string> recent;
  std::string device = "auto";     // auto | cpu | cuda
  std::string weights = "native";  // native | fp32 (focal::WeightsMode)
  std::string precision = "auto";  // auto | exact | fast (focal::Precision)
  bool compare = true, live_propagate = true, hide_sink = false;
  std::string heat_color = "auto";  // auto | linear | log (HeatColor); files before it: log_color true -> log
  int window_w = 1600, window_h = 960;

  static std::string default_path();
  // Missing file: defaults. Unreadable or malformed: defaults, and *warning says why (the app shows it).
  static Settings load(const std::string& path, std::string* warning);
  // Written to a temporary name and renamed. Throws focal::Error naming the path.
  void save(const std::string& path) const;
};

// One line of a command file: `name arg...` (arguments split on spaces; `prompt` takes the rest of the line).
struct ScriptCommand {
  std::string name;
  std::vector<std::string> args;
  std::string rest;  // everything after the name
  int line = 0;
};

// Commands: open PATH | open-b PATH | prompt TEXT | temp T [a|b] | mode MODE [a|b] | layer-temp L T | head-temp L H T
// | set-temp LAYERS HEADS T [a|b] | tau-scale X | compare on|off | select LAYER HEAD [QUERY] | view a|b|diff
// | log on|off|auto | sink on|off | keys N | relevant POS | propagate on|off | wait | frames N | screenshot [PANEL] PATH.png
// | export PATH.h5 | figure KIND PATH | sweep | generate N | resize W H | tab metrics|output|sweep|generation|tau
// | truncate | quit. Blank lines and lines starting with # are skipped. Throws focal::Error naming the file and
// line of an unknown command or a wrong argument count.
std::vector<ScriptCommand> parse_script(const std::string& text, const std::string& path);

}  // namespace focalscope
