#include "output_option.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
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
