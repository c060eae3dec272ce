// libFuzzer target: the safetensors parser and the fp32 conversion of every tensor it accepts. Any exception other
// than focal::Error, and any sanitizer report, is a finding (scripts/fuzz.sh).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "focal/error.h"
#include "safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    focal::SafetensorsFile f(data, size, "fuzz.safetensors");
    for (const auto& [name, t] : f.tensors())
      if (t.numel() <= (1u << 20)) (void)focal::tensor_to_f32(t, "fuzz.safetensors");
  } catch (const focal::Error&) {}
  return 0;
}
