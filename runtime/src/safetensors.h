// Read-only view of a .safetensors file (memory-mapped), validated on open: header length within the file,
// well-formed JSON, known dtypes, shapes matching byte ranges, ranges inside the data area and not overlapping.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace focal {

struct StTensor {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", ...
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // into the mapping
  size_t n_bytes = 0;
  // Set for tensors that are not stored as safetensors (GGUF): produces the fp32 data in `shape` order.
  std::function<std::vector<float>()> to_f32;
  std::string source_name;  // the name in its file when that differs (GGUF: "blk.0.attn_q.weight")
  // GGUF tensors whose stored bytes can serve as weight rows (Model::load's native weights): their ggml type
  // (ops::QType), -1 otherwise. perm_heads > 0: llama q / k rows stored in GGUF's interleaved RoPE order (heads of
  // perm_d_head rows; unpermute_rope_rows maps them). stored_transposed: the bytes hold the transpose of `shape`
  // (GGUF GPT-2 Conv1D matrices are stored [out, in], HF's shape is [in, out]).
  int stored_type = -1;
  int perm_heads = 0, perm_d_head = 0;
  bool stored_transposed = false;
  size_t numel() const;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // throws Error naming the file and the problem
  // Parses a buffer the caller keeps alive (fuzzing, tests). `name` is used in error messages.
  SafetensorsFile(const uint8_t* data, size_t size, const std::string& name);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, StTensor>& tensors() const { return tensors_; }
  // FNV-1a 64 of the whole file, folded into `h`.
  uint64_t fnv1a(uint64_t h) const;

 private:
  void parse();
  std::string path_;
  const uint8_t* map_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;
  std::map<std::string, StTensor> tensors_;
};

// Converts F32 / F16 / BF16 data to fp32. Throws Error naming the tensor and file for any other dtype.
std::vector<float> tensor_to_f32(const StTensor& t, const std::string& file);

}  // namespace focal
