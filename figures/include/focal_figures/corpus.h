// The corpus figure of a `focal batch` stats file (batch/, docs/batch.md): per-layer distributions of a row metric
// for two runs (boxes from the fixed-bin histograms), the metric against context position (log-spaced buckets), and
// the layer x head matrix of the difference of corpus means. `focal figure corpus STATS.h5` draws it through
// render_figure_files; the app calls render_corpus with the file it already holds.
#pragma once

#include <string>

#include "focal_batch/stats_file.h"
#include "focal_figures/figures.h"

namespace focal::figures {

// opt.metric (default entropy_nats), opt.runs (one or two run names; default the file's first two: the matrix shows
// the second minus the first), page options. Throws Error naming the option at fault.
std::string render_corpus(const batch::StatsFile& f, const FigureOptions& opt, Format fmt);

}  // namespace focal::figures
