#include "output_option.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "args.h"
#include "focal/atomic_file.h"
#include "focal/error.h"

namespace focal::cli {

void check_output(const std::string& path, const char* opt) {
  if (path.empty()) throw UsageError{std::string("give the output file with ") + opt + " FILE"};
  std::string target;
  try {
    target = focal::output_target(path);
  } catch (const Error& e) {  // named by the option that gave the path (generate's --capture, not -o)
    throw Error(std::string(opt) + ": " + e.what());
  }
  const std::string probe = target + ".probe." + std::to_string((long)::getpid());
  std::ofstream f(probe);
  if (!f)
    throw Error(std::string(opt) + ": cannot write '" + path + "': its directory does not exist or is not writable");
  f.close();
  std::remove(probe.c_str());
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
