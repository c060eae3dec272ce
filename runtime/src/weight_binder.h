// Binding a model's tensors to its weights (Model::load's middle step): each tensor the architecture table entry
// names is looked up, checked against the shape the config implies, scanned for non-finite values and uploaded to
// the backend — a matrix as a Weight in the form the backend keeps (stored blocks, 16-bit or fp32), a vector as
// fp32. Fused tensors (Phi-3 qkv / gate_up, GPT-2 c_attn) are cut into their parts by rows.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "arch_table.h"
#include "backend.h"
#include "model_internal.h"
#include "safetensors.h"

namespace focal {

struct GgufModel;

using TensorMap = std::map<std::string, std::pair<const StTensor*, std::string>>;  // name -> (tensor, file)

// A buffer some exporters save beside the weights (RoPE's inv_freq), which the forward recomputes: neither a weight
// nor an unexpected tensor.
bool is_saved_buffer(const std::string& name);

class WeightBinder {
 public:
  // all: the opened files' tensors; cfg_path: how errors name the config; gguf: the GGUF file when the model is one
  // (its held rows may be re-laid out for decode); held: native GGUF rows held in process memory on the CPU.
  WeightBinder(Backend& be, const LoadOptions& options, ModelConfig& c, const TensorMap& all, std::string dir,
               std::string cfg_path, GgufModel* gguf, bool held);
  // Every tensor of the architecture `spec` bound into new weights (tau_proj when has_tau_w). Throws Error naming
  // the file and tensor for a missing, misshaped or non-finite one.
  std::unique_ptr<Model::Weights> bind(const ArchSpec& spec, bool has_tau_w);

  const std::set<std::string>& used() const { return used_; }  // the tensor names bound (or knowingly skipped)
  bool any_stored() const { return any_stored_; }              // a matrix is kept in its stored format
  int n_relaid() const { return (int)relaid_.size(); }         // matrices re-laid out in decode panels
  size_t n_params() const { return n_params_; }

 private:
  // An expected size with the config field it comes from, for shape errors (config.json or GGUF key names).
  struct Dim {
    int64_t n;
    std::string from;
  };
  std::string field(const char* hf, const char* gg) const { return from_gguf_ ? gg : hf; }
  // The tensor `name`, checked against the shape dims (a misshaped one is an error naming both shapes); null when
  // it is absent (a required one is remembered, and bind() reports it once every name has been asked for).
  const StTensor* lookup(const std::string& name, const std::vector<Dim>& dims, bool required);
  // Native weights: the stored type of a 2-D tensor whose stored rows can be used as they are (GGUF blocks, fp16,
  // bf16; not fp32, which loads the same either way), else -1. want_transposed: the caller wants the transpose of
  // its shape (GGUF GPT-2 Conv1D).
  int stored_type(const StTensor& t, bool want_transposed) const;
  // A StoredWeight over rows row0 .. row0 + n_rows - 1 of the stored matrix, [n_rows, cols], scanned for non-finite
  // blocks and, when held on a CPU with the kernel, re-laid out in decode panels.
  StoredWeight stored_weight(const StTensor& t, int type, const std::string& file, int64_t row0, int64_t n_rows,
                             int64_t cols);
  // Records a loaded tensor: a matrix (its WeightBuffer) or a vector (its DeviceBuffer of fp32 values).
  Weight keep(const std::string& name, std::vector<int64_t> shape, size_t n, bool decay, WeightBuffer* mat,
              DeviceBuffer* vec);
  // `host_fn`, when given, edits the tensor's fp32 values on the host before the upload (Gemma's 1 + w norms). A
  // matrix becomes a Weight in the form the backend keeps; a vector fp32 backend memory (Weight::f32()).
  // table: a token table never multiplied (Backend::upload_table_stored when the file stores it in blocks).
  Weight take(const std::string& name, const std::vector<Dim>& dims, bool required = true, bool matrix = false,
              const std::function<void(std::vector<float>&)>& host_fn = nullptr, bool table = false);
  // A fused or Conv1D tensor: its fp32 values (transposed from [in, out] when `conv1d`), cut into consecutive row
  // blocks, each uploaded as its own matrix (or vector) under the name `<name>#<i>`.
  std::vector<Weight> take_parts(const std::string& name, const std::vector<Dim>& dims, bool conv1d,
                                 const std::vector<int64_t>& rows, bool matrix);

  Backend& be_;
  const LoadOptions& options_;
  ModelConfig& c_;
  const TensorMap& all_;
  const std::string dir_, cfg_path_;
  GgufModel* gguf_;
  const bool held_, from_gguf_;
  bool gpt2_layout_ = false;
  Model::Weights* w_ = nullptr;
  std::set<std::string> used_;
  std::string missing_;              // the first required tensor the files lack
  std::set<const uint8_t*> relaid_;  // held rows re-laid out for decode (a tied matrix arrives once per use)
  bool any_stored_ = false;
  size_t n_params_ = 0;
};

}  // namespace focal
