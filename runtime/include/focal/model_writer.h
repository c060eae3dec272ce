// Writing Hugging Face model directories (config.json + model.safetensors): random models for demos and tests
// now, trained checkpoints later. Files are written under temporary names and renamed into place.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "focal/config.h"

namespace focal {

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major, numel = prod(shape)
};

// dtype: "F32", "F16" or "BF16" (round to nearest even). Throws Error naming the path on failure.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors, const std::string& dtype);

// config.json text for `cfg` (LlamaForCausalLM fields plus the "focal" object when not standard); `dtype` (F32, F16,
// BF16) sets torch_dtype.
std::string config_to_json(const ModelConfig& cfg, const std::string& dtype = "F32");

// The tensors of a LlamaForCausalLM with `cfg`, randomly initialised from `seed` (deterministic).
// Inspection init (default): q/k projections get a larger spread than usual so that attention is visibly
// structured, norms are 1 + small noise. Training init: normal(0, init_std) matrices, output projections scaled by
// 1/sqrt(2 n_layers), norms exactly 1, q/k/v/o biases zero (cfg.attention_bias; the inspection init has none).
// Both: learned-tau projections (cfg.focal.has_tau) start with tau in the middle of [tau_min, tau_max] through the
// bias, so the clip is not saturated and w_tau gets gradients.
std::vector<NamedTensor> random_model_tensors(const ModelConfig& cfg, uint64_t seed, bool training_init = false,
                                              float init_std = 0.02f);

// Creates `dir` if needed and writes config.json and model.safetensors; copies tokenizer_model (if not empty) to
// dir/tokenizer.model.
void write_model_dir(const std::string& dir, const ModelConfig& cfg, const std::vector<NamedTensor>& tensors,
                     const std::string& dtype, const std::string& tokenizer_model);

// Writes the model directory `dst` through a staging directory beside it (DST.tmp.PID, one file system): `write`
// fills the stage; then a new or empty `dst` is the stage renamed, and an existing one (--force) gets each staged
// file moved in, its earlier file of that name moved aside and dropped at the end. A failure anywhere — a full
// disk while writing, a file that cannot be replaced — removes the stage, moves back what had moved, and throws
// focal::Error saying that `dst` is as it was: a model never ends as new weights under an old config.json, nor as
// a half-written directory that blocks the next run.
void write_model_dir_staged(const std::string& dst, const std::function<void(const std::string& stage)>& write);

// Re-writes the model directory `src` as `dst` with weights in `dtype` (e.g. BF16 for the bundled models):
// config.json, model.safetensors and tokenizer.model only (no optimizer state).
void export_model(const std::string& src, const std::string& dst, const std::string& dtype);

}  // namespace focal
