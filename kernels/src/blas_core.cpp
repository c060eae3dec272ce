// Which OpenBLAS kernels every sgemm runs on. A DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels from a table of
// CPU model numbers; a CPU newer than that table gets the table's fallback. Debian 12's OpenBLAS 0.3.21 names an
// Intel Xeon of model 207 (Emerald Rapids, AVX-512) "Prescott" and multiplies with SSE3: on such a VM, 2 threads,
// m = 128, n = 512, k = 4096, its sgemm ran 49-51 GFLOP/s against 170-223 under the SkylakeX kernels, and SmolLM2's
// prefill 4x slower (2026-12-06, docs/performance-log.md). So, once at load, when the user has not chosen a core
// (OPENBLAS_CORETYPE) and the core OpenBLAS picked lacks the vector ISA the CPU has, the core is chosen again from the
// CPU's features: SkylakeX for AVX-512 F/CD/BW/DQ/VL, Haswell for AVX2 + FMA. OpenBLAS exports the two calls that
// select its core (gotoblas_dynamic_quit / gotoblas_dynamic_init); a build without them (not DYNAMIC_ARCH) is left
// as it is.
#include <strings.h>

#include <cstdlib>
#include <string>

#include "focal_kernels/ops.h"

extern "C" {
char* openblas_get_corename(void) __attribute__((weak));
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace focal::ops {

namespace {

bool in_list(const char* name, const char* const* list) {
  for (; *list; ++list)
    if (strcasecmp(name, *list) == 0) return true;
  return false;
}

struct BlasChoice {
  std::string text;
  BlasChoice() {
    if (!openblas_get_corename) {
      text = "not OpenBLAS";
      return;
    }
    const std::string picked = openblas_get_corename();
    const char* user = std::getenv("OPENBLAS_CORETYPE");
    if (user && *user) {
      text = "OpenBLAS " + picked + " (OPENBLAS_CORETYPE=" + user + ")";
      return;
    }
    static const char* const kAvx512Cores[] = {"SkylakeX", "Cooperlake", "SapphireRapids", nullptr};
    static const char* const kAvx2Cores[] = {"Haswell", "Zen", "Excavator", nullptr};
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                        __builtin_cpu_supports("avx512vl");
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const char* want = nullptr;
    if (avx512 && !in_list(picked.c_str(), kAvx512Cores))
      want = "SkylakeX";
    else if (!avx512 && avx2 && !in_list(picked.c_str(), kAvx2Cores) && !in_list(picked.c_str(), kAvx512Cores))
      want = "Haswell";
    if (!want || !gotoblas_dynamic_init || !gotoblas_dynamic_quit) {
      text = "OpenBLAS " + picked;
      return;
    }
    // Before main (a static initialiser of the library that calls sgemm), so no sgemm is in flight. The variable is
    // set only for the re-selection and removed after, so child processes see the user's environment.
    setenv("OPENBLAS_CORETYPE", want, 1);
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
    text = "OpenBLAS " + std::string(openblas_get_corename()) +
           " (chosen by focalscope from the CPU's features; OpenBLAS's own table named this CPU " + picked + ")";
  }
};

const BlasChoice& blas_choice() {
  static const BlasChoice choice;
  return choice;
}

}  // namespace

const char* blas_core() { return blas_choice().text.c_str(); }

}  // namespace focal::ops
