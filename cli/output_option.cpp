#include "output_option.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

#include "args.h"
#include "focal/atomic_file.h"
#include "focal/error.h"

namespace focal::cli {

void check_output(const std::string& path, const char* opt) {
  if (path.empty()) throw UsageError{std::string("give the output file with ") + opt + " FILE"};
  if (path.back() == '/')  // "the directory 'newdir/' does not exist: create it first" led to the next error
    throw Error(std::string(opt) + ": '" + path + "' ends in '/', which names a directory: give a file path");
  std::string target;
  try {
    target = focal::output_target(path);
  } catch (const Error& e) {  // named by the option that gave the path (generate's --capture, not -o)
    throw Error(std::string(opt) + ": " + e.what());
  }
  // The writers' temporary is TARGET.tmp.PID: a name that fits only without the suffix fails there, after the work.
  const std::string probe = target + ".tmp." + std::to_string((long)::getpid());
  std::FILE* f = std::fopen(probe.c_str(), "wb");
  if (!f) {
    const int err = errno;
    const size_t slash = target.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : target.substr(0, slash + 1);
    std::string why;
    switch (err) {
      case ENAMETOOLONG:
        why =
            "the name is too long for the file system with the temporary suffix a write adds (.tmp.PID): "
            "give a shorter name";
        break;
      case EROFS: why = "its file system is read-only: write elsewhere"; break;
      case ENOENT: why = "the directory '" + dir + "' does not exist: create it first"; break;
      case EACCES:
      case EPERM: why = "the directory '" + dir + "' is not writable (permission denied): write elsewhere"; break;
      case ENOSPC:
      case EDQUOT: why = "the file system is full: free some space, or write elsewhere"; break;
      default: why = std::strerror(err);
    }
    throw Error(std::string(opt) + ": cannot write '" + path + "': " + why);
  }
  std::fclose(f);
  std::remove(probe.c_str());
}

namespace {

// The files an argument names: itself when it is an existing file; each file directly inside when it is a directory;
// each part of a comma list and what follows a "calibrated:" / "temps:"-style prefix, the same way.
void add_input_files(const std::string& value, const std::string& label,
                     std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::string> parts = {value};
  for (size_t at = 0; at <= value.size();) {
    const size_t comma = std::min(value.find(',', at), value.size());
    const std::string item = value.substr(at, comma - at);
    if (item != value) parts.push_back(item);
    const size_t colon = item.find(':');
    if (colon != std::string::npos) parts.push_back(item.substr(colon + 1));
    at = comma + 1;
  }
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    std::error_code ec;
    const std::filesystem::file_status st = std::filesystem::status(p, ec);
    if (ec) continue;
    if (std::filesystem::is_regular_file(st)) {
      files.emplace_back(p, label.rfind("--", 0) == 0 ? "the " + label + " file '" + p + "'"
                            : label == "the model"    ? "the model '" + p + "'"
                                                      : "the input '" + p + "'");
    } else if (std::filesystem::is_directory(st)) {
      for (const auto& e : std::filesystem::directory_iterator(p, ec))
        if (e.is_regular_file(ec) && read_from_a_directory(e.path().string()))
          files.emplace_back(e.path().string(),
                             "a file of " + (label.rfind("--", 0) == 0 ? label + " " : std::string()) + "'" + p + "'");
    }
  }
}

}  // namespace

bool same_path(const std::string& a, const std::string& b) {
  // Made absolute first: weakly_canonical leaves a relative path none of whose parts exist relative ("x.json"),
  // while "./x.json" came back absolute, so the two spellings of one new file compared unequal.
  std::error_code ea, eb;
  const std::filesystem::path pa = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ea), ea);
  const std::filesystem::path pb = std::filesystem::weakly_canonical(std::filesystem::absolute(b, eb), eb);
  return !ea && !eb && pa == pb;
}

void check_outputs_apart(const Args& a, const std::vector<std::string>& outputs,
                         const std::vector<std::string>& extra_inputs) {
  auto is_output = [&](const std::string& name) {
    return std::find(outputs.begin(), outputs.end(), name) != outputs.end();
  };
  auto shown = [](const std::string& opt) { return opt == "--output" ? std::string("-o") : opt; };
  std::vector<std::pair<std::string, std::string>> inputs;  // file, what it is
  for (const std::string& p : a.positional()) add_input_files(p, "an argument", inputs);
  for (const std::string& p : extra_inputs) add_input_files(p, "the model", inputs);
  static const char* const kText[] = {"--prompt", "--name", "--labels", "--title"};  // text, not paths
  for (const auto& [name, value] : a.values())
    if (!is_output(name) && !value.empty() && std::find(std::begin(kText), std::end(kText), name) == std::end(kText))
      add_input_files(value, name, inputs);
  std::vector<std::pair<std::string, std::string>> outs;  // option, path
  for (const std::string& o : outputs)
    if (a.has(o) && !a.get(o).empty()) outs.emplace_back(o, a.get(o));
  for (size_t i = 0; i < outs.size(); ++i) {
    std::error_code ec;
    for (size_t j = 0; j < i; ++j)
      if (same_path(outs[j].second, outs[i].second))
        throw Error(shown(outs[i].first) + " '" + outs[i].second + "' is also " + shown(outs[j].first) +
                    "'s file: give each output its own path");
    if (!std::filesystem::exists(outs[i].second, ec)) continue;  // a new file replaces no input
    for (const auto& [file, what] : inputs) {
      std::error_code ec3;
      if (std::filesystem::equivalent(outs[i].second, file, ec3) && !ec3)
        throw Error(shown(outs[i].first) + " '" + outs[i].second + "' is " + what +
                    ", which this command reads: writing there would replace it; give another path");
    }
  }
}

void check_new_model_dir(const std::string& dir, bool force, const char* opt) {
  require_directory_or_absent(dir, opt);
  if (force) return;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return;
  if (std::filesystem::directory_iterator(dir, ec) == std::filesystem::directory_iterator()) return;
  throw Error(std::string(opt) + " '" + dir + "' is not empty" +
              (std::filesystem::exists(dir + "/config.json", ec) ? " (it holds a model: config.json)" : "") +
              ": give a new or empty directory, or add --force to write over its files");
}

std::string shell_word(const std::string& s) {
  bool plain = !s.empty();
  for (char c : s)
    if (!(std::isalnum((unsigned char)c) || std::string("_./:=@%+-").find(c) != std::string::npos)) plain = false;
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace focal::cli
