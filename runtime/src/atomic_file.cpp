// focal/atomic_file.h: write to PATH.tmp.PID, then rename.
#include "focal/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <filesystem>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "focal/error.h"
#include "h5_io.h"

namespace focal {

namespace {

// What an existing path is, for the error: "a directory", "a device", ...; nullptr for a regular file.
const char* not_a_file(mode_t m) {
  if (S_ISREG(m)) return nullptr;
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

constexpr int kPendingSlots = 16;
constexpr size_t kPendingPath = 4096;
char g_pending[kPendingSlots][kPendingPath];
std::atomic<bool> g_claimed[kPendingSlots];
std::atomic<bool> g_ready[kPendingSlots];  // the slot's path is whole: the handler may unlink it

}  // namespace

const char* not_a_file_kind(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? not_a_file(st.st_mode) : nullptr;
}

void require_regular_input(const std::string& path, const std::string& what) {
  if (const char* kind = not_a_file_kind(path))
    throw Error(what + " '" + path + "' is " + kind + ", not a file: give a file");
}

void require_not_directory(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw Error(what + " '" + path + "' is a directory, not a file: give a file");
}

bool read_from_a_directory(const std::string& file) {
  static const char* const kExt[] = {".safetensors", ".gguf", ".model", ".bin", ".txt", ".jsonl"};
  static const char* const kJson[] = {
      "config.json",           "generation_config.json",       "tokenizer.json",
      "tokenizer_config.json", "model.safetensors.index.json", "special_tokens_map.json",
      "manifest.json"};
  const std::filesystem::path f(file);
  const std::string ext = f.extension().string(), name = f.filename().string();
  return std::find(std::begin(kExt), std::end(kExt), ext) != std::end(kExt) ||
         std::find(std::begin(kJson), std::end(kJson), name) != std::end(kJson);
}

void require_not_model_file(const std::string& out, const std::string& model_path, const std::string& what) {
  std::error_code ec;
  if (model_path.empty() || out.empty() || !std::filesystem::exists(out, ec)) return;
  auto refuse = [&](const std::string& file) {
    throw Error(what + " '" + out + "' is the model file '" + file +
                "' (the model this data came from): writing there would replace it; give another path");
  };
  const std::filesystem::file_status st = std::filesystem::status(model_path, ec);
  if (ec) return;
  if (std::filesystem::is_regular_file(st)) {
    if (std::filesystem::equivalent(out, model_path, ec) && !ec) refuse(model_path);
    return;
  }
  if (!std::filesystem::is_directory(st)) return;
  for (const auto& e : std::filesystem::directory_iterator(model_path, ec)) {
    std::error_code ec2;
    if (e.is_regular_file(ec2) && read_from_a_directory(e.path().string()) &&
        std::filesystem::equivalent(out, e.path(), ec2) && !ec2)
      refuse(e.path().string());
  }
}

void require_directory_or_absent(const std::string& path, const std::string& what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) return;
  const char* kind = not_a_file(st.st_mode);
  throw Error(what + " '" + path + "' is " + (kind ? kind : "a file") +
              ", not a directory: give a directory (it is created when missing)");
}

std::string output_target(const std::string& path) {
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) return p;  // nothing there yet (or unreadable: the write says why)
    if (!S_ISLNK(st.st_mode)) {
      if (const char* what = not_a_file(st.st_mode))
        throw Error("output", "'" + path + "'" + (p == path ? "" : " (a link to '" + p + "')") + " is " + what +
                                  ", not a file: the output is written under a temporary name and renamed into "
                                  "place, which would replace it; give a file path");
      return p;
    }
    std::string to(4096, '\0');
    const ssize_t n = ::readlink(p.c_str(), to.data(), to.size());
    if (n <= 0 || (size_t)n >= to.size()) return p;  // unreadable link: rename replaces the link, as before
    to.resize((size_t)n);
    if (to[0] != '/') {  // relative to the link's own directory
      const size_t slash = p.rfind('/');
      if (slash != std::string::npos) to = p.substr(0, slash + 1) + to;
    }
    p = to;
  }
  throw Error("output", "'" + path + "': too many levels of symbolic links");
}

PendingTemporary::PendingTemporary(const std::string& path) {
  if (path.size() >= kPendingPath) return;  // not tracked: an interrupt would leave it, as before
  for (int i = 0; i < kPendingSlots; ++i) {
    if (g_claimed[i].exchange(true)) continue;
    std::memcpy(g_pending[i], path.c_str(), path.size() + 1);
    g_ready[i].store(true);
    slot_ = i;
    return;
  }
}

PendingTemporary::~PendingTemporary() {
  if (slot_ < 0) return;
  g_ready[slot_].store(false);
  g_claimed[slot_].store(false);
}

void remove_pending_temporaries() noexcept {
  for (int i = 0; i < kPendingSlots; ++i)
    if (g_ready[i].load()) ::unlink(g_pending[i]);
}

void write_file_atomically(const std::string& given, std::string_view bytes, const AtomicWriteOptions& opt) {
  if (given.empty()) throw Error("output", "the output path is empty: give a file name");
  const std::string path = output_target(given);
  remove_stale_temporaries(path);  // a killed earlier write's PATH.tmp.PID (kill -9 leaves it: no handler runs)
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const PendingTemporary pending(tmp);
  const auto fail = [&](int err) {
    if (h5::is_out_of_space(err)) throw Error(h5::no_space_text(err, path) + ": " + opt.when_full);
    throw Error("cannot write '" + path + "': " + h5::errno_text(err, path));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) fail(errno);
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail(err);
    }
    off += (size_t)n;
  }
  if (opt.fsync && ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(err);
  }
  if (::close(fd) != 0) {  // NFS and some FUSE file systems report a failed write only here
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot rename '" + tmp + "' into '" + path + "': " + h5::errno_text(err, path));
  }
}

void remove_stale_temporaries(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string prefix = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string pid_text = name.substr(prefix.size());
    if (pid_text.size() > 9 || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(pid_text.c_str(), nullptr, 10);
    if (pid <= 0 || pid == (long)::getpid()) continue;
    if (::kill((pid_t)pid, 0) != 0 && errno == ESRCH) stale.push_back(dir + "/" + name);
  }
  ::closedir(d);
  for (const std::string& p : stale) (void)::unlink(p.c_str());
}

void require_link_target(const std::string& path) {
  struct stat ls {
  }, st{};
  if (::lstat(path.c_str(), &ls) != 0 || !S_ISLNK(ls.st_mode) || ::stat(path.c_str(), &st) == 0) return;
  char target[4096];
  const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
  const std::string to = n > 0 ? std::string(target, (size_t)n) : std::string("?");
  throw Error("'" + path + "' is a symbolic link to '" + to +
              "', which does not exist (a copy that kept a relative link?): copy the file itself there (cp -L), or "
              "remove the link");
}

}  // namespace focal
