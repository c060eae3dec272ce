#include "file_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "focal/error.h"

namespace focal {

FileMap map_file(const std::string& path, size_t min_size, const std::function<std::string(size_t)>& too_small) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error("cannot stat '" + path + "': " + std::strerror(err));
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

void unmap_file(const FileMap& m) {
  if (m.data) munmap(const_cast<uint8_t*>(m.data), m.size);
}

}  // namespace focal
