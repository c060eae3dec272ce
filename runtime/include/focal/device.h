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

// Resolves a device choice to kCpu or kCuda:
//   kCpu  -> kCpu;
//   kCuda -> kCuda when a CUDA device is usable; otherwise throws Error saying why (built with FOCAL_CUDA=OFF,
//            or the CUDA error from the driver / runtime);
//   kAuto -> kCuda when a device is usable, else kCpu.
// *note (if given) receives one line describing the choice, e.g. "device: auto -> cpu (no CUDA device: ...)".
Device resolve_device(Device d, std::string* note = nullptr);

}  // namespace focal
