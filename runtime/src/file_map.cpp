#include "file_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "focal/error.h"

namespace focal {

FileMap map_file(const std::string& path, size_t min_size, const std::function<std::string(size_t)>& too_small) {
  // O_NONBLOCK: a FIFO opens at once (and is refused below) instead of waiting for a writer for ever
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error("cannot stat '" + path + "': " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("'" + path + "' is not a regular file (a FIFO, device or socket): give a file");
  }
  const size_t size = (size_t)st.st_size;
  if (size < min_size || size == 0) {
    ::close(fd);
    throw Error(too_small(size));
  }
  void* m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (m == MAP_FAILED) throw Error("cannot map '" + path + "': " + std::strerror(err));
  return FileMap{static_cast<const uint8_t*>(m), size};
}

FileMap copy_into_memory(const FileMap& src, const std::string& path,
                         const std::function<void(size_t done, size_t total)>& progress) {
  const size_t size = src.size;
  void* m = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    throw Error("cannot allocate " + std::to_string(size) + " bytes to hold '" + path + "': " + std::strerror(errno) +
                " (--mmap maps the file instead)");
  // Transparent huge pages where the kernel allows them for an madvise'd range (Debian's default: "madvise"): decode
  // streams every weight once per token, and 2 MiB pages take 512 times fewer TLB walks than 4 KiB ones. Advice only:
  // a kernel without THP ignores it.
  madvise(m, size, MADV_HUGEPAGE);
  auto* dst = static_cast<uint8_t*>(m);
  constexpr size_t kChunk = 16u << 20;  // a multiple of the page size
  const int64_t n_chunks = (int64_t)((size + kChunk - 1) / kChunk);
  std::atomic<size_t> done{0};
#pragma omp parallel for schedule(dynamic)
  for (int64_t c = 0; c < n_chunks; ++c) {
    const size_t off = (size_t)c * kChunk, n = std::min(kChunk, size - off);
    std::memcpy(dst + off, src.data + off, n);
    // the map's pages leave this process's resident set as they are copied (they stay in the page cache)
    madvise(const_cast<uint8_t*>(src.data) + off, n, MADV_DONTNEED);
    const size_t d = done.fetch_add(n) + n;
    if (progress && omp_get_thread_num() == 0) progress(d, size);
  }
  mprotect(m, size, PROT_READ);
  if (progress) progress(size, size);
  return FileMap{dst, size};
}

void unmap_file(const FileMap& m) {
  if (m.data) munmap(const_cast<uint8_t*>(m.data), m.size);
}

}  // namespace focal
