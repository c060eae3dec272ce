// ggml tensor types of GGUF files: names, block sizes and dequantisation to fp32 (declared in gguf.h). The block
// formats themselves live in the kernels (focal_kernels/quant.h), which also compute with them in place.

#include <cstring>
#include <string>

#include "focal/error.h"
#include "focal_kernels/quant.h"
#include "gguf.h"

namespace focal {

// ---- ggml types ----

std::string ggml_type_name(uint32_t t) {
  static const char* kNames[] = {"F32",   "F16",        "Q4_0",       "Q4_1",       "Q4_2",     "Q4_3",     "Q5_0",
                                 "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
                                 "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
                                 "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
                                 "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
                                 "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4",    "NVFP4",    "Q1_0"};
  if (t < sizeof(kNames) / sizeof(kNames[0])) return std::string(kNames[t]) + " (type " + std::to_string(t) + ")";
  return "unknown type " + std::to_string(t);
}

const char* ggml_supported_types() {
  return "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K";
}

int ggml_block_elems(uint32_t t) { return t > 64 ? 0 : ops::qtype_block_elems((int)t); }

int ggml_block_bytes(uint32_t t) { return t > 64 ? 0 : ops::qtype_block_bytes((int)t); }

bool ggml_type_supported(uint32_t t) { return ggml_block_elems(t) > 0; }

void ggml_dequantize(uint32_t t, const uint8_t* src, float* dst, int64_t n) {
  if (!ggml_type_supported(t))
    throw Error("GGUF tensor type " + ggml_type_name(t) + " is not supported (supported: " + ggml_supported_types() +
                ")");
  ops::dequant_blocks((int)t, src, dst, n);
}

}  // namespace focal
