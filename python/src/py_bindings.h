// The binding functions of focalscope._core, one per Python class (bind_*.cpp), called by module.cpp in this order.
#pragma once

#include "py_common.h"

namespace focalscope::py {

void bind_temp_spec(nb::module_& mod);  // TempSpec
void bind_figure(nb::module_& mod);     // Figure, figure(), show(), figure_kinds()
void bind_capture(nb::module_& mod);    // Capture, open_capture()
void bind_sweep(nb::module_& mod);      // Sweep, open_sweep()
void bind_stats(nb::module_& mod);      // Stats, open_stats()
void bind_model(nb::module_& mod);      // Generation, Model, load()

}  // namespace focalscope::py
