// The figures entry points: kind dispatch, reading input files, page helpers shared by the kinds, and the
// all-or-nothing file write.
#include "focal_figures/figures.h"

#include <sys/stat.h>

#include <algorithm>
#include <tuple>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "focal/error.h"
#include "focal/eval.h"
#include "focal/hf_cache.h"
#include "focal/trainer.h"
#include "focal_figures/corpus.h"
#include "focal_figures/positions.h"
#include "focal_figures/temps.h"
#include "kinds.h"
#include "plot.h"

namespace focal::figures {

// The kinds that draw training logs and evaluation files (fig_training.cpp, fig_retrieval.cpp).
std::string render_training(const std::vector<Source>& src, const FigureOptions& opt, Format fmt);
std::string render_retrieval(const std::vector<Source>& src, const FigureOptions& opt, Format fmt);

namespace {

std::string lower(std::string s) {
  for (char& ch : s) ch = (char)std::tolower((unsigned char)ch);
  return s;
}

// The file name without directory and extension, for legends.
std::string file_label(const std::string& path) {
  std::string s = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  const size_t dot = s.rfind('.');
  if (dot != std::string::npos && dot > 0) s = s.substr(0, dot);
  return s;
}

// Training logs and evaluation files have fixed names inside their run's directory (train_log.h5, eval.h5): such a
// file is named by its directory ("out/train/standard/train_log.h5" -> "standard"), one renamed by its own name
// ("results/train_log-seed2-standard.h5" -> "train_log-seed2-standard").
std::string dir_label(const std::string& path) {
  std::string stem = file_label(path);
  if (stem != "train_log" && stem != "eval") return stem;
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return file_label(path);
  std::string dir = path.substr(0, slash);
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string name = dir.substr(dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/') + 1);
  return name.empty() || name == "." || name == ".." ? file_label(path) : name;
}

// labels[i] where no other label is the same; else the fewest last components of paths[i] (its directories, then
// the label) that no other such label shares, from the absolute path (a relative and an absolute path of two files
// compare alike).
std::vector<std::string> distinct_path_labels(const std::vector<std::string>& paths, std::vector<std::string> labels) {
  const size_t n = paths.size();
  std::vector<std::vector<std::string>> dirs(n);  // each path's directories, innermost first
  for (size_t i = 0; i < n; ++i) {
    std::error_code ec;
    std::string abs = std::filesystem::absolute(paths[i], ec).lexically_normal().string();
    if (ec) abs = paths[i];
    abs = abs.substr(0, abs.find_last_of('/') == std::string::npos ? 0 : abs.find_last_of('/'));
    while (!abs.empty()) {
      const size_t slash = abs.find_last_of('/');
      dirs[i].push_back(abs.substr(slash == std::string::npos ? 0 : slash + 1));
      abs = slash == std::string::npos ? "" : abs.substr(0, slash);
    }
  }
  const std::vector<std::string> base = labels;
  size_t deepest = 0;
  for (const auto& d : dirs) deepest = std::max(deepest, d.size());
  for (size_t depth = 1;; ++depth) {
    bool clash = false;
    std::vector<std::string> next = labels;
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j)
        if (i != j && labels[i] == labels[j] && depth <= dirs[i].size()) {
          // A directory already named by the label (dir_label) is not repeated.
          const std::string& d = dirs[i][depth - 1];
          next[i] = d + "/" + labels[i];
          if (depth == 1 && d == base[i]) next[i] = labels[i];
          clash = true;
          break;
        }
    if (!clash || depth > deepest) return labels;
    labels.swap(next);
  }
}

// The options only the training and retrieval figures read are refused by the other kinds.
void reject_log_options(const FigureOptions& opt, const std::string& kind) {
  reject_option(opt.tau, "tau", kind);
  reject_option(opt.clip, "clip", kind);
  reject_option(!opt.x_axis.empty(), "x_axis", kind);
  reject_option(!opt.task_kind.empty(), "task_kind", kind);
  if (kind != "sweep") reject_option(!opt.labels.empty(), "labels", kind);  // the sweep's legend names its files too
}

// Reads a file of the kind `kind` draws; a file of another focalscope kind gets a hint at the right figure.
template <class T, class Read>
std::unique_ptr<T> read_input(const std::string& path, const std::string& kind, Read read) {
  try {
    return std::make_unique<T>(read(path));
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.find("not a focalscope") == std::string::npos) throw;
    const std::string hint = kind == "training"
                                 ? "the training figure reads training logs: OUT/train_log.h5 from focal train"
                                 : "the retrieval figure reads evaluation files, as focal eval writes them";
    throw Error(msg + " (" + hint + ")");
  }
}

}  // namespace

Format format_from_path(const std::string& path) {
  const size_t dot = path.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : lower(path.substr(dot + 1));
  if (ext == "png") return Format::kPng;
  if (ext == "svg") return Format::kSvg;
  if (ext == "pdf") return Format::kPdf;
  throw Error("output", "output " + path + ": the figure format comes from the extension: use .png, .svg or .pdf");
}

const char* format_name(Format f) {
  switch (f) {
    case Format::kPng: return "png";
    case Format::kSvg: return "svg";
    case Format::kPdf: return "pdf";
  }
  return "?";
}

const std::vector<std::string>& figure_kinds() {
  static const std::vector<std::string> kinds = {"distribution", "heatmap",   "grid",   "entropy",   "sweep",
                                                 "training",     "retrieval", "corpus", "positions", "temps"};
  return kinds;
}

std::string render_figure(const std::string& kind, const std::vector<Source>& sources, const FigureOptions& opt_in,
                          Format format) {
  FigureOptions opt = opt_in;
  if (kind != "distribution") {
    reject_option(opt.key_first >= 0 || opt.key_last >= 0 || opt.key_window > 0, "keys", kind);
    reject_option(opt.top_keys >= 0, "top_keys", kind);
  }
  if (kind != "grid" && kind != "heatmap") reject_option(opt.linear_scale, "linear_scale", kind);
  if (kind == "training" || kind == "retrieval") {
    // training --tau draws a line per layer: --layers picks them; nothing else here has layers or heads to pick.
    if (kind == "retrieval" || !opt.tau) reject_option(!opt.layers.empty(), "layers", kind);
    reject_option(!opt.heads.empty(), "heads", kind);
  }
  if (kind == "distribution" || kind == "heatmap") {  // one head: --layers L / --heads H name it as --layer / --head do
    for (auto [list, one, name] : {std::tuple<std::vector<int>*, int*, std::string>{&opt.layers, &opt.layer, "layer"},
                                   {&opt.heads, &opt.head, "head"}}) {
      if (list->empty()) continue;
      if (list->size() == 1 && *one >= 0 && *one != list->front())  // both spellings, other values
        throw Error(name + "s", name + "s " + std::to_string(list->front()) + " and the one " + name + " given (" +
                                    std::to_string(*one) + ") name different " + name + "s: give one of them");
      if (list->size() > 1)
        throw Error(name + "s", name + "s: the " + kind + " figure draws one head: give one " + name + " (" + name +
                                    " " + std::to_string(list->front()) + "), or draw several with the grid figure");
      *one = list->front();
      list->clear();
    }
  }
  if (kind == "training") return render_training(sources, opt, format);
  if (kind == "retrieval") return render_retrieval(sources, opt, format);
  if (kind == "corpus")
    throw Error("the corpus figure reads a stats file of focal batch: use render_figure_files or render_corpus");
  if (kind == "positions")
    throw Error("the positions figure reads a file of focal eval --positions: use render_figure_files");
  if (kind == "temps")
    throw Error("the temps figure reads a temperature file of focal calibrate: use render_figure_files");
  if (std::find(figure_kinds().begin(), figure_kinds().end(), kind) != figure_kinds().end())
    reject_log_options(opt, kind);
  if (kind == "distribution") return render_distribution(sources, opt, format);
  if (kind == "heatmap") return render_heatmap(sources, opt, format);
  if (kind == "grid") return render_grid(sources, opt, format);
  if (kind == "entropy") return render_entropy(sources, opt, format);
  if (kind == "sweep") return render_sweep(sources, opt, format);
  throw Error("unknown figure kind '" + kind + "' (kinds: " + figure_kinds_text() + ")");
}

std::string render_figure_files(const std::string& kind, const std::vector<std::string>& paths,
                                const FigureOptions& opt, Format format) {
  if (std::find(figure_kinds().begin(), figure_kinds().end(), kind) == figure_kinds().end())
    render_figure(kind, {}, opt, format);  // throws the unknown-kind message before any file is read
  if (paths.empty()) throw Error("the " + kind + " figure needs at least one input file");
  if (kind == "corpus") {
    if (paths.size() != 1) throw Error("the corpus figure draws one stats file of focal batch");
    return render_corpus(batch::read_stats(paths[0], false), opt, format);
  }
  if (kind == "positions") {
    if (paths.size() != 1) throw Error("the positions figure draws one file of focal eval --positions");
    return render_positions(batch::read_position_loss(paths[0]), opt, format);
  }
  if (kind == "temps") {
    if (paths.size() > 2)
      throw Error(
          "the temps figure draws one temperature file of focal calibrate, and optionally one capture of "
          "its model");
    std::unique_ptr<CaptureFile> cap;
    if (paths.size() == 2) cap = std::make_unique<CaptureFile>(read_capture(paths[1], opt.read_budget_bytes));
    return render_temps(read_temp_file(paths[0]), file_label(paths[0]), cap.get(), opt, format);
  }
  std::vector<std::unique_ptr<CaptureFile>> captures;
  std::vector<std::unique_ptr<SweepFile>> sweeps;
  std::vector<std::unique_ptr<TrainLog>> logs;
  std::vector<std::unique_ptr<EvalFile>> evals;
  std::vector<Source> sources;
  for (const std::string& p : paths) {
    Source s;
    s.label = file_label(p);
    s.path = p;
    if (kind == "training") {
      logs.push_back(read_input<TrainLog>(p, kind, read_train_log));
      s.train_log = logs.back().get();
      s.label = dir_label(p);
    } else if (kind == "retrieval") {
      evals.push_back(read_input<EvalFile>(p, kind, read_eval));
      s.eval = evals.back().get();
      s.label = dir_label(p);
    } else if (kind == "sweep") {
      sweeps.push_back(std::make_unique<SweepFile>(read_sweep(p, opt.read_budget_bytes)));
      s.sweep = sweeps.back().get();
    } else {
      captures.push_back(std::make_unique<CaptureFile>(read_capture(p, opt.read_budget_bytes)));
      s.capture = captures.back().get();
    }
    sources.push_back(s);
  }
  // Same labels from different directories: each of those takes as many of its path's last components as tell it
  // apart ("seed1/standard", "seed2/standard"; the paths as given were cut to the same prefix in the legend).
  std::vector<std::string> labels;
  labels.reserve(sources.size());
  for (const Source& s : sources) labels.push_back(s.label);
  labels = distinct_path_labels(paths, labels);
  for (size_t k = 0; k < sources.size(); ++k) sources[k].label = labels[k];
  return render_figure(kind, sources, opt, format);
}

// ---- page helpers (kinds.h) ----

void check_page_options(const FigureOptions& opt) {
  if (!(opt.width_in >= 1.0 && opt.width_in <= 40.0))
    throw Error("width_in",
                "width_in: " + format_sig(opt.width_in, 4) + " in is outside 1-40 inches (a column is about 3.4)");
  if (opt.height_in != 0.0 && !(opt.height_in >= 0.8 && opt.height_in <= 40.0))
    throw Error("height_in", "height_in: " + format_sig(opt.height_in, 4) + " in is outside 0.8-40 inches");
  if (!(opt.dpi >= 30.0 && opt.dpi <= 1200.0))
    throw Error("dpi", "dpi: " + format_sig(opt.dpi, 4) + " is outside 30-1200");
  if (!(opt.log_floor > 0.0f && opt.log_floor < 0.5f))
    throw Error("log_floor", "log_floor: " + format_sig(opt.log_floor, 4) +
                                 " must be above 0 and below 0.5 (the probability the log scale starts at; e.g. 1e-4)");
}

void reject_option(bool set, const std::string& option, const std::string& kind) {
  if (set) throw Error(option, option + " does not apply to the " + kind + " figure");
}

double page_width(const FigureOptions& opt) { return opt.width_in * 72.0; }

double page_height(const FigureOptions& opt, double natural_pt) {
  return opt.height_in > 0 ? opt.height_in * 72.0 : std::ceil(natural_pt);
}

double title_space(const FigureOptions& opt) {
  if (!opt.has_title) return kMargin;
  return kMargin + (kCapHeight + kDescent) * kTitleSize + 5.0;
}

std::string title_text(const FigureOptions& opt, const std::string& automatic) {
  if (!opt.has_title) return "";
  return opt.title.empty() ? automatic : opt.title;
}

std::string fit_text(const Canvas& c, const std::string& s0, double size, double max_w, bool bold) {
  std::string s = clean_utf8(s0);
  if (c.text_width(s, size, bold) <= max_w) return s;
  size_t n = utf8_length(s);
  while (n > 1 && c.text_width(utf8_prefix(s, n) + "\xE2\x80\xA6", size, bold) > max_w) --n;
  return utf8_prefix(s, n) + "\xE2\x80\xA6";
}

std::string fit_text_middle(const Canvas& c, const std::string& s0, double size, double max_w, bool bold) {
  std::string s = clean_utf8(s0);
  if (c.text_width(s, size, bold) <= max_w) return s;
  const size_t n = utf8_length(s);
  // Keep the end's share a little larger: a file name or a run's setting sits there.
  for (size_t keep = n - 1; keep > 1; --keep) {
    const size_t head = keep * 2 / 5, tail = keep - head;
    std::string t = utf8_prefix(s, head) + "\xE2\x80\xA6" + utf8_suffix(s, tail);
    if (c.text_width(t, size, bold) <= max_w) return t;
  }
  return "\xE2\x80\xA6";
}

std::vector<std::string> wrap_text(const Canvas& c, const std::string& s0, double size, double max_w, bool bold) {
  const std::string s = clean_utf8(s0);
  std::vector<std::string> lines;
  std::string line;
  for (size_t at = 0; at <= s.size();) {
    size_t end = s.find(' ', at);
    if (end == std::string::npos) end = s.size();
    const std::string word = s.substr(at, end - at);
    at = end + 1;
    if (word.empty()) continue;
    const std::string joined = line.empty() ? word : line + " " + word;
    if (line.empty() || c.text_width(joined, size, bold) <= max_w) {
      line = joined;
    } else {
      lines.push_back(fit_text(c, line, size, max_w, bold));
      line = word;
    }
  }
  // No last line of one word ("heads" / "6"): the word before it goes down too when that line still fits.
  const size_t cut = lines.empty() ? std::string::npos : lines.back().rfind(' ');
  if (line.find(' ') == std::string::npos && cut != std::string::npos) {
    const std::string pair = lines.back().substr(cut + 1) + " " + line;
    if (c.text_width(pair, size, bold) <= max_w) {
      lines.back().resize(cut);
      line = pair;
    }
  }
  if (!line.empty() || lines.empty()) lines.push_back(fit_text(c, line, size, max_w, bold));
  return lines;
}

void draw_title(Canvas& c, const FigureOptions& opt, const std::string& automatic) {
  if (!opt.has_title) return;
  const double max_w = c.width() - 2 * kMargin;
  std::string t = fit_text(c, title_text(opt, automatic), kTitleSize, max_w, true);
  // An automatic "NAME: what is shown" too wide for the page: NAME is shortened in its middle and what is shown
  // kept (a long run name cut "...: attention by layer and head (log)" away).
  const size_t colon = automatic.find(": ");
  if (opt.title.empty() && t != clean_utf8(automatic) && colon != std::string::npos) {
    const std::string rest = clean_utf8(automatic.substr(colon));
    const double name_w = max_w - c.text_width(rest, kTitleSize, true);
    if (name_w >= 0.25 * max_w) t = fit_text_middle(c, automatic.substr(0, colon), kTitleSize, name_w, true) + rest;
  }
  c.text(t, c.width() / 2, kMargin, kTitleSize, 0.5, 1.0, 0, true, kInk);
}

std::string quoted(const std::string& s) { return "\xE2\x80\x9C" + s + "\xE2\x80\x9D"; }

std::string base_name(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.find_last_of('/');
  std::string name = slash == std::string::npos ? p : p.substr(slash + 1);
  // A GGUF model's file name without ".gguf": titles name the model, and the extension was what they cut first.
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".gguf") == 0) name.resize(name.size() - 5);
  // A model in the Hugging Face cache by its ORG/NAME (the snapshot's hash named it in titles).
  if (std::string hf = hf_cache_display_name(p); !hf.empty()) return hf;
  return name;
}

std::string figure_kinds_text() {
  std::string s;
  for (const auto& k : figure_kinds()) s += (s.empty() ? "" : ", ") + k;
  return s;
}

}  // namespace focal::figures
