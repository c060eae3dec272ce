// Publication figures from captures, sweep files, training logs and evaluation files: PNG, SVG and PDF through
// cairo, the same bytes for the same input. Used by `focal figure`, `focal demo` and (later) the app. Kinds, options and palettes: docs/figures.md.
#pragma once

#include <string>
#include <vector>

#include "focal/capture.h"

namespace focal {
struct TrainLog;  // focal/trainer.h
struct EvalFile;  // focal/eval.h
}  // namespace focal

namespace focal::figures {

enum class Format { kPng, kSvg, kPdf };

// Format from the output path's extension (.png, .svg, .pdf, any case). Throws Error naming the path otherwise.
Format format_from_path(const std::string& path);
const char* format_name(Format f);  // "png", "svg", "pdf"

// Figure kinds this build renders, in the order `focal figure --help` lists them.
const std::vector<std::string>& figure_kinds();
// The same as one line, "distribution, heatmap, ...", for a message naming the kinds.
std::string figure_kinds_text();

// What to draw and how big. Selection fields left at -1 / empty take the kind's default (docs/figures.md).
struct FigureOptions {
  // Selection.
  int layer = -1;                     // distribution, heatmap: a stored layer (default: the first stored);
                                      // retrieval: the layer of relevant_mass / entropy (default: mean over layers)
  int head = -1;                      // distribution, heatmap: a stored head (default: the first stored)
  int query = -1;                     // distribution: a stored query position (default: the last stored)
  int key_first = -1, key_last = -1;  // distribution: draw keys key_first..key_last only (inclusive; -1: 0 / query)
  int key_window = 0;                 // distribution: draw the key_window keys ending at the query (0: all)
  int top_keys = -1;                  // distribution: label the top_keys most attended keys with their token and
                                      // position (-1: 3 when the axis cannot label every key, else 0)
  std::vector<int> layers, heads;     // grid, entropy, sweep --per-layer: only these layers / heads (empty: all)
  std::vector<std::string> runs;      // run names, in drawing order (default: every run, within the kind's limit)
  std::string metric;                 // entropy: a row metric name; sweep: a row metric name or "loss";
                                      // training: val_loss, train_loss or step_loss; retrieval: accuracy,
                                      // relevant_mass or entropy (default: accuracy and relevant_mass, two rows)
  std::string task_kind;              // retrieval: one task kind (default: one panel per kind)
  std::vector<std::string> labels;    // training, retrieval: legend labels, one per file in file order
  // Variants.
  bool no_sink = false;       // distribution, heatmap, grid: drop key 0 and renormalise each row over the rest
  bool log_scale = false;     // heatmap, grid: colour by log10(p), p clamped below at log_floor (grid: the default
                              // when the median cell is below 5 % of the largest p)
  bool linear_scale = false;  // grid: linear colour even when the mass is concentrated
  float log_floor = 1e-4f;
  bool overlay = false;    // distribution: grouped bars in one panel instead of one panel per run
  bool lines = false;      // entropy: lines with markers instead of grouped bars
  bool matrix = false;     // entropy: layer x head matrix of one run, or of run b - run a with two runs
  bool per_layer = false;  // sweep: one line per layer instead of the mean over layers
  std::string x_axis;      // training: "steps" (default) or "tokens" (step x batch x seq_len)
  bool tau = false;        // training: the learned tau per layer over steps instead of losses
  bool clip = false;       // training --tau: a second panel with the fraction of clipped tau values
  bool has_title = true;   // false: no title line (for figures captioned in the paper)
  std::string title;       // replaces the automatic title when not empty
  // Page. Text sizes are in points at this size, so a figure placed at its width prints at 7-9 pt.
  double width_in = 3.4;   // a paper's column width
  double height_in = 0.0;  // 0: the kind's natural height for the width
  double dpi = 200.0;      // PNG only
  // Input: memory the captures and sweeps read may take (0: half the machine's memory; read_capture).
  uint64_t read_budget_bytes = 0;
};

// A loaded input: exactly one of capture, sweep, train_log or eval is set, and outlives the call. label names the
// file in legends and run names when several files are given (e.g. the file name without directory and extension;
// for training logs and eval files, the name of the directory holding them). path, when set, names the file in
// error messages.
struct Source {
  const CaptureFile* capture = nullptr;
  const SweepFile* sweep = nullptr;
  std::string label;
  const TrainLog* train_log = nullptr;
  const EvalFile* eval = nullptr;
  std::string path{};
};

// Renders one figure and returns the encoded file (PNG, SVG or PDF bytes). Deterministic: the same sources and
// options give the same bytes. Throws Error when the kind, metric or selection does not fit the sources; the
// message names the option and lists the valid choices.
std::string render_figure(const std::string& kind, const std::vector<Source>& sources, const FigureOptions& opt,
                          Format format);

// Reads the files the kind draws (captures; sweep files for sweep; training logs for training; evaluation files
// for retrieval) and renders them as render_figure does.
std::string render_figure_files(const std::string& kind, const std::vector<std::string>& paths,
                                const FigureOptions& opt, Format format);

// `s` with & < > " escaped, for SVG text and HTML (the notebook view of a capture).
std::string xml_escape(const std::string& s);

}  // namespace focal::figures
