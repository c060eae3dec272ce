// libFuzzer target: the GGUF parser, dequantisation of every tensor it accepts, and the tokenizer built from its
// metadata (encode + decode of a fixed string). Any exception other than focal::Error, and any sanitizer report, is
// a finding. Build and run: scripts/fuzz.sh; crashes are kept in fuzz/regressions/ and replayed by ctest.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "focal/error.h"
#include "gguf.h"
#include "gguf_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    focal::GgufFile f(data, size, "fuzz.gguf");
    for (const focal::GgufTensor& t : f.tensors()) {
      if (t.numel > (1u << 20)) continue;
      std::vector<float> out((size_t)t.numel);
      focal::ggml_dequantize(t.type, t.data, out.data(), (int64_t)t.numel);
    }
    if (auto tok = focal::gguf_tokenizer(f)) {
      const std::vector<int32_t> ids = tok->encode("Hello, world! 123 <|im_start|>\n  x", true);
      (void)tok->decode(ids);
      for (int32_t id : ids) (void)tok->display(id);
    }
  } catch (const focal::Error&) {}
  return 0;
}
