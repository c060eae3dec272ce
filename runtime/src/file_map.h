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

}  // namespace focal
