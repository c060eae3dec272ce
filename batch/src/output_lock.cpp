// One single-process batch writes an -o at a time (batch_internal.h OutputLock).
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "batch_internal.h"
#include "focal/atomic_file.h"
#include "focal/error.h"

namespace focal::batch {

OutputLock::OutputLock(const std::string& out_path) : rows_(out_path + ".rows"), ckpt_(out_path + ".ckpt") {
  struct stat before {};
  rows_existed_ = ::stat(rows_.c_str(), &before) == 0;
  fd_ = ::open(rows_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) throw Error("-o: cannot write '" + rows_ + "': " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw Error("-o: another focal batch is writing '" + out_path + "' now (it holds '" + rows_ +
                  "'): wait for it to finish (a --resume of it would mix two runs' rows), or give another -o");
    throw Error("-o: cannot lock '" + rows_ + "': " + std::strerror(err));
  }
  // What a killed run's writers left (OUT.tmp.PID, OUT.ckpt.tmp.PID): nothing else writes them while the lock holds.
  remove_stale_temporaries(out_path);
  remove_stale_temporaries(ckpt_);
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  // The empty row file the lock made, when the run stopped before its first document (a refused corpus, say).
  // Rows written stay: --resume goes on from them, or from the first document when there is no checkpoint.
  struct stat st {
  }, rs{};
  if (!done_ && (::stat(ckpt_.c_str(), &st) != 0 || st.st_size == 0) && ::stat(rows_.c_str(), &rs) == 0 &&
      rs.st_size == 0)
    (void)::unlink(rows_.c_str());
  ::close(fd_);
}

}  // namespace focal::batch
