// The temperature figure of a `focal calibrate` file (focal/calibrate.h TempFile, docs/cli.md): the learned t per
// layer x head as a matrix, with the held-out loss before and after. `focal figure temps TEMPS.json` draws it through
// render_figure_files.
#pragma once

#include <string>

#include "focal/calibrate.h"
#include "focal_figures/figures.h"

namespace focal::figures {

// label: the file's name in the title. opt.layers / opt.heads pick rows and columns (default all); page options.
// Throws Error naming the option at fault.
std::string render_temps(const TempFile& f, const std::string& label, const FigureOptions& opt, Format fmt);

}  // namespace focal::figures
