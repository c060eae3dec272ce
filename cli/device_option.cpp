// --device for the commands that load a model.
#include "device_option.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "error_flags.h"
#include "focal/byte_size.h"
#include "focal/error.h"

namespace focal::cli {

namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

bool g_verbose = false;
const char* const kDeviceOption = "--device";
const char* const kLoadFlag = "--allow-nonfinite-weights";
const char* const kWeightsOption = "--weights";
const char* const kMmapFlag = "--mmap";
const char* const kPrecisionOption = "--precision";
const char* const kRopeScalingOption = "--rope-scaling";
const char* const kRopeScalingHelp =
    "  --rope-scaling R  replace config.json's rope_scaling (rotary models): TYPE:FACTOR with TYPE linear, dynamic or\n"
    "                    yarn (e.g. dynamic:2), or default (none); recorded in the capture's warnings\n";
const char* const kDeviceHelp =
    "  --device D        auto | cpu | cuda (default auto: the CUDA backend when a device is usable, else the CPU)\n"
    "  --allow-nonfinite-weights   load a checkpoint whose weights hold NaN or Inf (refused by default, naming the\n"
    "                    tensor) to study it; each such tensor is reported on stderr\n"
    "  --weights W       native | fp32 (default native: quantized GGUF and fp16 / bf16 weights stay as stored;\n"
    "                    fp32 widens them at load, 4 bytes per parameter, and matches transformers to 1e-5)\n"
    "  --precision P     auto | exact | fast (default auto: fast on the GPU for 16-bit and quantized weights, exact\n"
    "                    otherwise; the CPU is always exact). exact: fp32 everywhere, matches the CPU to 1e-5;\n"
    "                    fast: bf16 / fp16 GEMMs and attention on tensor cores, softmax and metrics in fp32\n"
    "  --mmap            map a GGUF file instead of reading it into memory at load (native weights on the CPU):\n"
    "                    opens at once and shares its pages with other processes, but decodes slower on some\n"
    "                    machines (safetensors files are always mapped)\n";

Device device_arg(const Args& a) {
  Device d = Device::kAuto;
  if (a.has(kDeviceOption)) {
    try {
      d = parse_device(a.get(kDeviceOption));
    } catch (const Error& e) { throw UsageError{with_flag(e)}; }
  }
  std::string note;
  const Device r = resolve_device(d, &note);
  // auto says what it chose in one line, once, when the device was asked for (--device) or with -v; a default
  // run stays quiet (the fallback note used to print on every command).
  static bool noted = false;
  if (d == Device::kAuto && !noted && (a.has(kDeviceOption) || g_verbose)) {
    std::fprintf(stderr, "%s\n", note.c_str());
    noted = true;
  }
  return r;
}

std::unique_ptr<Model> load_model(const Args& a, const std::string& dir) {
  const std::string rope = a.has(kRopeScalingOption) ? a.get(kRopeScalingOption) : std::string();
  if (!rope.empty()) {  // its spelling is a usage error (exit 2) before the model loads; the model's own refusal
    ModelConfig probe;  // (learned positions) stays an error of the model (exit 1)
    probe.arch.position = PositionKind::kRope;
    try {
      apply_rope_override(probe, rope);
    } catch (const Error& e) { throw UsageError{std::string("--rope-scaling: ") + e.what()}; }
  }
  return load_model(a, dir, rope);
}

std::unique_ptr<Model> load_model(const Args& a, const std::string& dir, const std::string& rope_scaling) {
  return load_model(a, dir, rope_scaling, device_arg(a));
}

std::unique_ptr<Model> load_model(const Args& a, const std::string& dir, const std::string& rope_scaling,
                                  Device device) {
  LoadOptions opt;
  opt.rope_scaling = rope_scaling;
  opt.allow_nonfinite_weights = a.has(kLoadFlag);
  if (a.has(kWeightsOption)) {
    try {
      opt.weights = parse_weights_mode(a.get(kWeightsOption));
    } catch (const Error& e) { throw UsageError{with_flag(e)}; }
  }
  // The weights must fit --budget when the command has one, else the machine's memory: refused before allocating.
  if (a.has("--budget")) {
    opt.budget_bytes = parse_bytes(a.get("--budget"), "--budget");
  } else {
    opt.budget_bytes = machine_memory_bytes();
    opt.budget_is_machine = true;
  }
  opt.map_weights = a.has(kMmapFlag);
  if (opt.map_weights && opt.weights == WeightsMode::kFp32)  // accepted without a word, and changed nothing
    std::fprintf(stderr,
                 "warning: --mmap maps native weights; with --weights fp32 they are widened in memory anyway\n");
  if (a.has(kPrecisionOption)) {
    try {
      opt.precision = parse_precision(a.get(kPrecisionOption));
    } catch (const Error& e) { throw UsageError{with_flag(e)}; }
  }
  // Reading a big file into memory takes seconds: a progress line with an ETA, on a terminal, once past a second.
  const double t0 = now_s();
  double last = 0.0;
  bool shown = false;
  if (isatty(STDERR_FILENO))
    opt.on_read = [&](size_t done, size_t total) {
      const double el = now_s() - t0;
      if (done < total && (el < 1.0 || el - last < 0.5)) return;
      if (done == total && !shown) return;
      last = el;
      shown = true;
      const double eta = done ? el * (double)(total - done) / (double)done : 0.0;
      std::fprintf(stderr, "\rreading %s into memory: %5.1f%% of %.2f GB, %.0f s elapsed, ETA %.0f s   %s", dir.c_str(),
                   100.0 * (double)done / (double)total, (double)total / 1e9, el, eta, done == total ? "\n" : "");
    };
  std::unique_ptr<Model> m = Model::load(dir, device, opt);
  for (const std::string& w : m->config().warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  return m;
}

}  // namespace focal::cli
