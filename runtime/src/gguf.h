// Read-only view of a GGUF file (llama.cpp's single-file model format, versions 2 and 3), validated on open:
// magic, version, every length and count within the file, tensor types known and supported, tensor data aligned
// and inside the data area. Dequantisation of the supported tensor types to fp32. Format facts: docs/model-format.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace focal {

// ggml tensor type ids as stored in GGUF tensor infos.
enum GgmlType : uint32_t {
  kGgmlF32 = 0,
  kGgmlF16 = 1,
  kGgmlQ4_0 = 2,
  kGgmlQ4_1 = 3,
  kGgmlQ5_0 = 6,
  kGgmlQ5_1 = 7,
  kGgmlQ8_0 = 8,
  kGgmlQ8_1 = 9,
  kGgmlQ2_K = 10,
  kGgmlQ3_K = 11,
  kGgmlQ4_K = 12,
  kGgmlQ5_K = 13,
  kGgmlQ6_K = 14,
  kGgmlQ8_K = 15,
  kGgmlBF16 = 30,
};

// "Q4_1", "IQ2_XS", ... or "unknown type N" for ids ggml does not define.
std::string ggml_type_name(uint32_t type);
// True for the types focalscope dequantises: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K.
bool ggml_type_supported(uint32_t type);
const char* ggml_supported_types();   // the list above as text, for error messages
int ggml_block_elems(uint32_t type);  // elements per block (1 for F32/F16/BF16); 0 if unsupported
int ggml_block_bytes(uint32_t type);  // bytes per block; 0 if unsupported
// Dequantises n elements (a multiple of the type's block size) from src to dst. type must be supported.
void ggml_dequantize(uint32_t type, const uint8_t* src, float* dst, int64_t n);

// GGUF metadata value types.
enum GgufValueType : uint32_t {
  kGgufU8 = 0,
  kGgufI8 = 1,
  kGgufU16 = 2,
  kGgufI16 = 3,
  kGgufU32 = 4,
  kGgufI32 = 5,
  kGgufF32 = 6,
  kGgufBool = 7,
  kGgufString = 8,
  kGgufArray = 9,
  kGgufU64 = 10,
  kGgufI64 = 11,
  kGgufF64 = 12,
};

struct GgufValue {
  uint32_t type = 0;
  uint32_t elem_type = 0;         // for arrays
  double num = 0;                 // every scalar number and bool (exact for integers below 2^53)
  int64_t i64 = 0;                // integer scalars (u64 above INT64_MAX saturates)
  std::string str;                // kGgufString
  std::vector<std::string> strs;  // array of strings
  std::vector<double> nums;       // array of numbers / bools
  uint64_t count = 0;             // array length
  bool is_int() const { return type <= kGgufI32 || type == kGgufU64 || type == kGgufI64; }
};

struct GgufTensor {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the contiguous (fastest) dimension
  uint32_t type = 0;
  uint64_t offset = 0;  // relative to the data area
  const uint8_t* data = nullptr;
  size_t n_bytes = 0;
  uint64_t numel = 0;
};

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);  // maps and parses the file; throws Error naming it
  // Parses a buffer the caller keeps alive (fuzzing, tests). `name` is used in error messages.
  GgufFile(const uint8_t* data, size_t size, const std::string& name);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufValue* find(const std::string& key) const;
  uint64_t fnv1a(uint64_t h) const;  // FNV-1a 64 of the whole file folded into h
  // Replaces the map of a file opened by path with a copy of its bytes in process memory (file_map.h's
  // copy_into_memory) and moves every tensor's data pointer along; returns how far the bytes moved (new - old
  // address), 0 when nothing was done (a caller's buffer, or already held). progress must not throw.
  std::ptrdiff_t read_into_memory(const std::function<void(size_t done, size_t total)>& progress);
  // Re-lays out `rows` rows of `row_bytes` at `at`, inside a file held in memory (read_into_memory): pack(bytes)
  // rewrites them in place in the new layout. original_row(r, out) must give back stored row r's original bytes
  // from the new layout, so fnv1a still hashes the file as it is on disk. Throws Error if the file is not held in
  // memory or the range is not inside it.
  void relayout(const uint8_t* at, int64_t rows, size_t row_bytes, const std::function<void(uint8_t* bytes)>& pack,
                std::function<void(int64_t r, uint8_t* out)> original_row);

 private:
  void parse();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  bool in_memory_ = false;
  struct Relaid {  // a range re-laid out in memory (relayout), by offset
    size_t offset = 0;
    int64_t rows = 0;
    size_t row_bytes = 0;
    std::function<void(int64_t r, uint8_t* out)> original_row;
  };
  std::vector<Relaid> relaid_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensor> tensors_;
};

// True if `path` names a GGUF file: a regular file that starts with the magic "GGUF" or whose name ends in .gguf.
bool is_gguf_path(const std::string& path);

}  // namespace focal
