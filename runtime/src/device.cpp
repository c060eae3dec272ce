// Device choice: parsing, resolving auto, and making the backend a model runs on.
#include "focal/device.h"

#include "backend.h"
#include "focal/error.h"

namespace focal {

#ifdef FOCAL_HAVE_CUDA
int cuda_device_count(std::string* why);  // backend_cuda.cpp
std::string cuda_device_name(int device);
#endif

Device parse_device(const std::string& s) {
  if (s == "auto") return Device::kAuto;
  if (s == "cpu") return Device::kCpu;
  if (s == "cuda") return Device::kCuda;
  throw Error("device", "unknown device '" + s + "' (expected auto, cpu or cuda)");
}

const char* device_name(Device d) {
  switch (d) {
    case Device::kAuto: return "auto";
    case Device::kCpu: return "cpu";
    case Device::kCuda: return "cuda";
  }
  return "?";
}

Precision parse_precision(const std::string& s) {
  if (s == "auto") return Precision::kAuto;
  if (s == "exact") return Precision::kExact;
  if (s == "fast") return Precision::kFast;
  throw Error("precision", "unknown precision '" + s + "' (expected auto, exact or fast)");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kAuto: return "auto";
    case Precision::kExact: return "exact";
    case Precision::kFast: return "fast";
  }
  return "?";
}

bool cuda_built() {
#ifdef FOCAL_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

Device resolve_device(Device d, std::string* note) {
  if (d == Device::kCpu) {
    if (note) *note = "device: cpu";
    return Device::kCpu;
  }
#ifdef FOCAL_HAVE_CUDA
  std::string why;
  const int n = cuda_device_count(&why);
  if (n > 0) {
    if (note) *note = std::string("device: ") + device_name(d) + " -> cuda (" + cuda_device_name(0) + ")";
    return Device::kCuda;
  }
  if (d == Device::kCuda)
    throw Error("device", "device cuda: no usable CUDA device (" + why + "); choose device cpu or auto");
  if (note) *note = "device: auto -> cpu (no CUDA device: " + why + ")";
  return Device::kCpu;
#else
  if (d == Device::kCuda)
    throw Error("device",
                "device cuda: this build has no CUDA backend (FOCAL_CUDA=OFF); rebuild with "
                "-DFOCAL_CUDA=ON on a machine with the CUDA toolkit, or choose device cpu");
  if (note) *note = "device: auto -> cpu (built with FOCAL_CUDA=OFF)";
  return Device::kCpu;
#endif
}

std::unique_ptr<Backend> make_backend(Device d) {
  const Device r = resolve_device(d);
#ifdef FOCAL_HAVE_CUDA
  if (r == Device::kCuda) return make_cuda_backend(0);
#endif
  (void)r;
  return make_cpu_backend();
}

}  // namespace focal
