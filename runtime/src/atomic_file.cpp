// focal/atomic_file.h: write to PATH.tmp.PID, then rename.
#include "focal/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "focal/error.h"
#include "h5_io.h"

namespace focal {

void write_file_atomically(const std::string& path, std::string_view bytes, const AtomicWriteOptions& opt) {
  if (path.empty()) throw Error("output", "the output path is empty: give a file name");
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
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

}  // namespace focal
