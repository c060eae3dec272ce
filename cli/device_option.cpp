// --device for the commands that load a model.
#include "device_option.h"

#include <cstdio>

#include "focal/error.h"

namespace focal::cli {

const char* const kDeviceOption = "--device";
const char* const kDeviceHelp =
    "  --device D        auto | cpu | cuda (default auto: the CUDA backend when a device is usable, else the CPU)\n";

Device device_arg(const Args& a) {
  Device d = Device::kAuto;
  if (a.has(kDeviceOption)) {
    try {
      d = parse_device(a.get(kDeviceOption));
    } catch (const Error& e) {
      throw UsageError{e.what()};
    }
  }
  std::string note;
  const Device r = resolve_device(d, &note);
  // auto says what it chose in one line: always when asked for explicitly, and when a build with the CUDA
  // backend falls back to the CPU (a CPU-only build running on the CPU is the expected case and stays quiet).
  if (d == Device::kAuto && (a.has(kDeviceOption) || (cuda_built() && r == Device::kCpu)))
    std::fprintf(stderr, "%s\n", note.c_str());
  return r;
}

std::unique_ptr<Model> load_model(const Args& a, const std::string& dir) { return Model::load(dir, device_arg(a)); }

}  // namespace focal::cli
