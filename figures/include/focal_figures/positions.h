// The position figure of a `focal eval --positions` file (batch/position_loss.h, docs/cli.md): mean next-token NLL
// against position, one line per setting with its bootstrap band over documents, the model's trained context marked.
// `focal figure positions FILE.h5` draws it through render_figure_files.
#pragma once

#include <string>

#include "focal_batch/position_loss.h"
#include "focal_figures/figures.h"

namespace focal::figures {

// opt.runs: the settings drawn, in order (default: all); page options. Throws Error naming the option at fault.
std::string render_positions(const batch::PositionLossFile& f, const FigureOptions& opt, Format fmt);

}  // namespace focal::figures
