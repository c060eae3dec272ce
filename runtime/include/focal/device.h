// Where a model runs: the CPU backend or the CUDA backend. The CLI's --device and the app's device choice both go
// through parse_device and resolve_device.
#pragma once

#include <string>

namespace focal {

enum class Device { kAuto, kCpu, kCuda };

// "auto" | "cpu" | "cuda" -> Device; anything else throws Error naming --device and the accepted values.
Device parse_device(const std::string& s);
const char* device_name(Device d);  // "auto", "cpu", "cuda"

// True when this build has the CUDA backend (configured with FOCAL_CUDA=ON, or AUTO with nvcc found).
bool cuda_built();

// How the CUDA backend computes (the CPU backend always computes exact):
//   exact  fp32 storage and arithmetic everywhere (16-bit weights widened exactly); matches the CPU and
//          transformers to 1e-5;
//   fast   GEMM inputs rounded to the weights' 16-bit type (bf16 / fp16; fp32 weights in TF32) on tensor cores with
//          fp32 accumulation, and attention's QK^T and PV in fp16 on tensor cores (ops_cuda.h attention_tc);
//          the temperature, softmax and every metric stay fp32;
//   auto   fast on the GPU for 16-bit and quantized weights (what a PyTorch user gets), exact otherwise.
enum class Precision { kAuto, kExact, kFast };
// "auto" | "exact" | "fast" -> Precision; anything else throws Error naming --precision and the accepted values.
Precision parse_precision(const std::string& s);
const char* precision_name(Precision p);  // "auto", "exact", "fast"

// Resolves a device choice to kCpu or kCuda:
//   kCpu  -> kCpu;
//   kCuda -> kCuda when a CUDA device is usable; otherwise throws Error saying why (built with FOCAL_CUDA=OFF,
//            or the CUDA error from the driver / runtime);
//   kAuto -> kCuda when a device is usable, else kCpu.
// *note (if given) receives one line describing the choice, e.g. "device: auto -> cpu (no CUDA device: ...)".
Device resolve_device(Device d, std::string* note = nullptr);

}  // namespace focal
