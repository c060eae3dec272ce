// focalscope._core: Python bindings (nanobind) over the runtime's and the figures' public APIs — load a model, run
// and capture a prompt under any attention temperature, sweep, generate, read and write capture files, and render
// figures for Jupyter. The forward runs with the GIL released; Ctrl-C is polled between layers. docs/python.md.
// This file is the module definition; each class's bindings are in its bind_*.cpp (py_bindings.h), the runs in
// py_runs.cpp, argument conversion in py_convert.cpp, the error / Ctrl-C bridge in py_errors.h.
#include "focal/capture.h"
#include "focal/device.h"
#include "focal/error.h"
#include "focal/hf_cache.h"
#include "focal/model.h"
#include "py_bindings.h"
#include "py_convert.h"

namespace nb = nanobind;
namespace py = focalscope::py;

NB_MODULE(_core, mod) {
  mod.doc() = "focalscope's C++ core: models, runs, captures and figures. Import the focalscope package instead.";
  nb::exception<focal::Error>(mod, "FocalError", PyExc_RuntimeError).attr("__doc__") =
      "An error reported by the focalscope runtime (a bad model file, option or capture); the message names "
      "the file, field or option at fault and what would fix it.";

  mod.def(
      "version", [] { return std::string(focal::version()); }, "The runtime's version string, e.g. '0.1.0'.");
  mod.def(
      "cpu_gemm", [] { return std::string(focal::cpu_gemm_kernels()); },
      "The kernels the CPU backend's fp32 matrix products run on, as `focal --version` prints them, e.g. 'OpenBLAS "
      "SkylakeX (chosen by focalscope from the CPU's features; ...)'.");
  mod.def("cuda_built", &focal::cuda_built, "True when this build has the CUDA backend.");
  mod.def("cached_models", &focal::hf_cached_models,
          "Names ('ORG/NAME') of the models in the local Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else "
          "~/.cache/huggingface/hub); load() takes them. focalscope never downloads.");
  mod.def("metric_names", &py::metric_names,
          "Names of the last axis of every metrics array, in order: entropy_nats, entropy_norm, eff_support, max_prob, "
          "topk_mass, tail_mass, sink_mass, relevant_mass (docs/metrics.md).");

  py::bind_temp_spec(mod);
  py::bind_capture(mod);
  py::bind_sweep(mod);
  py::bind_stats(mod);
  py::bind_figure(mod);
  py::bind_model(mod);
}
