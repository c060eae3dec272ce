// The temperature figure of a `focal calibrate` file (focal/calibrate.h TempFile, docs/cli.md): the learned t per
// layer x head as a matrix, with the held-out loss before and after, and with a capture of the same model each
// head's t against its mean entropy under the capture's standard run. `focal figure temps TEMPS.json [CAPTURE.h5]`
// draws it through render_figure_files.
#pragma once

#include <string>

#include "focal/calibrate.h"
#include "focal/capture.h"
#include "focal_figures/figures.h"

namespace focal::figures {

// label: the file's name in the title. cap (or null): a capture of the file's model (same weights checksum);
// opt.runs names its run (default "standard"). opt.layers / opt.heads pick rows and columns (default all); page
// options. Throws Error naming the option at fault, or the capture when it is of another model.
std::string render_temps(const TempFile& f, const std::string& label, const CaptureFile* cap, const FigureOptions& opt,
                         Format fmt);

}  // namespace focal::figures
