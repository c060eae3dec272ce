// Read-only memory map of a whole file, shared by the safetensors and GGUF readers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace focal {

struct FileMap {
  const uint8_t* data = nullptr;
  size_t size = 0;
};

// Maps `path`. Throws Error naming the path when it cannot be opened, stat'ed or mapped, or when it is shorter than
// min_size bytes (the message is too_small(size), the format's own complaint).
FileMap map_file(const std::string& path, size_t min_size, const std::function<std::string(size_t)>& too_small);
void unmap_file(const FileMap& m);

// The bytes of a map (of `path`, named in errors) copied into anonymous, read-only process memory on every OpenMP
// thread, 16 MiB at a time, each chunk of the map dropped from the resident set once copied (so the process never
// holds both); unmap_file frees the copy, the caller still unmaps src. Streaming decode reads weights held this way
// faster than through the page cache's map on the machines measured (docs/performance.md, issue 14).
// progress(done, total) is called on the calling thread as chunks complete and must not throw (it runs inside an
// OpenMP loop). Throws Error when the memory cannot be allocated.
FileMap copy_into_memory(const FileMap& src, const std::string& path,
                         const std::function<void(size_t done, size_t total)>& progress);

}  // namespace focal
