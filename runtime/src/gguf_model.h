// A llama-architecture GGUF file as a model source: the configuration derived from its metadata, its tensors under
// Hugging Face names (dequantised to fp32 on demand, Q/K rows un-permuted to HF's rotate_half layout) and the
// tokenizer it stores. Model::load uses this for .gguf paths.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "focal/config.h"
#include "focal/tokenizer.h"
#include "gguf.h"
#include "safetensors.h"

namespace focal {

struct GgufModel {
  std::unique_ptr<GgufFile> file;           // owns the mapping the tensors point into
  ModelConfig cfg;                          // source_json: an HF-style config.json synthesised from the metadata
  std::map<std::string, StTensor> tensors;  // HF name -> tensor (to_f32 set)
  std::unique_ptr<Tokenizer> tok;           // null when the file stores no tokenizer
  // The file's bytes read into process memory in place of the map (GgufFile::read_into_memory), tensors moved along.
  void read_into_memory(const std::function<void(size_t done, size_t total)>& progress);
};

// Throws Error naming the file and the key or tensor at fault.
std::unique_ptr<GgufModel> open_gguf_model(const std::string& path);

// The tokenizer stored in a GGUF file's tokenizer.ggml.* metadata, or null if there is none.
std::unique_ptr<Tokenizer> gguf_tokenizer(const GgufFile& f);

// HF's rotate_half row order from GGUF's interleaved one: w is [n_heads * d_head, cols]; within each head, GGUF row
// 2*i + s holds HF row s * d_head/2 + i.
void unpermute_rope_rows(float* w, int n_heads, int d_head, int64_t cols);

}  // namespace focal
