// `focal figure` (a publication figure from capture, sweep, training-log or evaluation files) and `focal demo` (capture standard vs focal
// attention on a model, sweep the temperature and write a gallery of figures). Both go through focal_figures.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "args.h"
#include "output_option.h"
#include "device_option.h"
#include "focal/atomic_file.h"
#include "focal/capture.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal/progress.h"
#include "focal_figures/figures.h"

using namespace focal;
using focal::cli::Args;
using focal::cli::UsageError;

namespace {

const char* kFigureHelp = R"(usage: focal figure KIND FILE... [options] -o OUT.png|OUT.svg|OUT.pdf

Draws a publication figure from capture files (focal capture), sweep files (focal sweep), training logs
(OUT/train_log.h5 of focal train), evaluation files (focal eval -o), batch statistics (focal batch), position-loss
files (focal eval --positions) or temperature files (focal calibrate). The format follows the extension of -o;
the same input gives the same bytes. Sizes are print sizes: text is 7-8.5 pt at --width.

kinds:
  distribution  attention over the context tokens of one (layer, head, query), one panel per run (paper Fig. 1)
  heatmap       one head's query x key probabilities with a colour bar (one panel per run in --runs)
  grid          thumbnails of every stored layer x head of one run
  entropy       per-layer mean of a metric, runs side by side; --matrix: layer x head matrix, or run b - run a
  sweep         a metric (or the prompt loss) against the focal temperature t, from sweep files
  training      loss curves of training logs on one axis, one line per run (paper Fig. 3a / 4);
                --tau: the learned tau per layer over the steps of one log
  retrieval     accuracy and relevant-token attention mass against context length, one line per evaluation
                file, one panel per task kind (paper Fig. 9)
  corpus        from a stats file of focal batch: per-layer distributions of a metric (boxes, two runs), the
                metric by context position, and the layer x head matrix of the mean difference (docs/batch.md)
  positions     from a file of focal eval --positions: mean next-token NLL by position, one line per setting
                with its bootstrap band over documents, the trained context marked (docs/cli.md)
  temps         from a temperature file of focal calibrate: the learned t per layer x head (blue sharper, red
                flatter than t = 1) and the held-out loss before and after; with a capture of the same model
                as second file, each head's t against its entropy under the capture's run (--runs, default
                standard)

input:
  --budget SIZE      memory the input files may take when read (default: half the machine's memory); a file
                     declaring more is refused before anything is allocated

selection:
  --layer L          distribution, heatmap: stored layer (default: first stored); retrieval: relevant mass /
                     entropy of layer L (default: mean over layers)
  --head H           distribution, heatmap: stored head (default: first stored)
  --query Q          distribution: stored query position (default: last stored)
  --keys A:B         distribution: only keys A..B (inclusive); --keys last:N the N keys ending at the query
  --top-keys K       distribution: label the K most attended keys with token and position (default 3 when the
                     axis is too dense to name every key, which then shows key positions; 0: none)
  --layers LIST      grid, entropy, sweep, corpus, temps, training --tau, positions --metric entropy: only these
                     layers (e.g. 0,2,10-14); distribution, heatmap: one layer
  --heads LIST       grid, entropy, sweep, corpus, temps: only these heads; distribution, heatmap: one head
  --runs A,B         runs to draw, in order (default: distribution all, at most 3; heatmap, grid and
                     --matrix the first; entropy all). With several files name a run FILE:RUN if needed.
  --metric M         entropy: entropy_nats (default), entropy_norm, eff_support, max_prob, topk_mass,
                     tail_mass, sink_mass, relevant_mass; sweep: the same or loss;
                     training: val_loss (default), train_loss, step_loss (every step, smoothed);
                     retrieval: accuracy, relevant_mass or entropy (default: accuracy and relevant_mass rows);
                     positions: nll (default) or entropy (one run's attention entropy per layer by position)
  --kind K           retrieval: one task kind (e.g. kv; default: one panel per kind)
  --labels A,B       training, retrieval, sweep: legend labels, one per file (default: the run name; for retrieval
                     the model directory's name; for sweep the file's); \, is a comma inside a label
variants:
  --no-sink          distribution, heatmap, grid: drop the first token and renormalise each row over the rest
  --overlay          distribution: grouped bars in one panel instead of one panel per run
  --log              heatmap, grid: log10 colour scale; --floor P sets its lower end (default 1e-4). The grid
                     uses it by default when its median cell is below 5 % of the largest p, the heatmap when
                     more than half of its rows peak below 10 % of the largest p (a diffuse head)
  --linear           heatmap, grid: linear colour even where log would be the default
  --matrix           entropy: layer x head matrix; with --runs A,B the difference B - A (diverging colours)
  --lines            entropy: lines with markers instead of grouped bars
  --per-layer        sweep: one line per layer instead of the mean over layers
  --x steps|tokens   training: x axis in steps (default) or training tokens (step x batch x seq_len)
  --tau              training: learned tau per layer over steps (one log of a --attn learned run)
  --clip             training --tau: add a panel with the percentage of tau values at a clip bound
page:
  --width IN         width in inches (default 3.4, a paper column; 7 for two columns)
  --height IN        height in inches (default: the kind's natural height)
  --dpi N            PNG resolution (default 200)
  --title TEXT       replace the automatic title; --no-title draws none
  -o FILE            output .png, .svg or .pdf (written to a temporary name, then renamed)
)";

int non_negative(const Args& a, const std::string& name) {
  const long long v = a.get_int(name, -1);
  if (a.has(name) && v < 0) throw UsageError{name + " must be 0 or more"};
  return (int)v;
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

void make_dirs(const std::string& dir) {
  std::string cur;
  std::stringstream ss(dir);
  std::string part;
  if (!dir.empty() && dir[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      throw Error("cannot create the output directory '" + dir + "': " + std::strerror(errno));
  }
}

}  // namespace

namespace focal::cli {

int cmd_figure(int argc, char** argv) {
  Args a(argc, argv, 2,
         {"--help", "--no-sink", "--overlay", "--log", "--matrix", "--lines", "--per-layer", "--no-title", "--tau",
          "--clip", "--linear"},
         {"--layer", "--head", "--query", "--keys", "--top-keys", "--layers", "--heads", "--runs", "--metric",
          "--floor", "--width", "--height", "--dpi", "--title", "--output", "--x", "--kind", "--labels", "--budget"});
  if (a.has("--help")) {
    std::printf("%s", kFigureHelp);
    return 0;
  }
  if (a.positional().size() < 2) throw UsageError{"figure needs a KIND and at least one FILE"};
  const std::string kind = a.positional()[0];
  const std::vector<std::string>& kinds = figures::figure_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end())
    throw UsageError{"unknown figure kind '" + kind + "' (kinds: " + figures::figure_kinds_text() + ")"};
  const std::vector<std::string> files(a.positional().begin() + 1, a.positional().end());
  const std::string out = a.get("--output");
  if (out.empty()) throw UsageError{"give the output file with -o FILE.png|svg|pdf"};
  check_outputs_apart(a, {"--output"});
  const figures::Format format = figures::format_from_path(out);

  figures::FigureOptions opt;
  if (a.has("--budget")) opt.read_budget_bytes = parse_bytes(a.get("--budget"), "--budget");
  opt.layer = non_negative(a, "--layer");
  opt.head = non_negative(a, "--head");
  opt.query = non_negative(a, "--query");
  if (a.has("--keys")) {
    const std::string k = a.get("--keys");
    const size_t colon = k.find(':');
    auto num = [&](const std::string& v) {
      char* end = nullptr;
      const long x = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || x < 0) throw UsageError{"--keys: '" + k + "' is not A:B (key positions) or last:N"};
      return (int)x;
    };
    if (colon == std::string::npos) throw UsageError{"--keys: '" + k + "' is not A:B (key positions) or last:N"};
    if (k.substr(0, colon) == "last") {
      opt.key_window = num(k.substr(colon + 1));
      if (opt.key_window == 0) throw UsageError{"--keys last:N needs N >= 1"};
    } else {
      opt.key_first = num(k.substr(0, colon));
      opt.key_last = num(k.substr(colon + 1));
    }
  }
  opt.top_keys = non_negative(a, "--top-keys");
  opt.layers = parse_index_list(a.get("--layers"), "--layers");
  opt.heads = parse_index_list(a.get("--heads"), "--heads");
  // The API's own refusals name its fields (log_scale, per_layer); these two are the CLI's flags together.
  if (a.has("--linear") && a.has("--log"))
    throw UsageError{"--linear and --log ask for opposite colour scales: give one of them"};
  if (a.has("--per-layer") && a.get("--metric", "") == "loss")
    throw UsageError{
        "--per-layer draws one line per layer, and the loss is one value per temperature: drop "
        "--per-layer or give --metric another metric"};
  opt.linear_scale = a.has("--linear");
  opt.runs = split_names(a.get("--runs"));
  if (a.has("--runs") && opt.runs.empty()) throw UsageError{"--runs needs run names, e.g. --runs standard,focal_t0.4"};
  opt.metric = a.get("--metric");
  opt.no_sink = a.has("--no-sink");
  opt.overlay = a.has("--overlay");
  opt.log_scale = a.has("--log");
  opt.log_floor = (float)a.get_double("--floor", 1e-4);
  if (a.has("--floor") && !opt.log_scale) throw UsageError{"--floor sets the lower end of the --log scale: add --log"};
  opt.matrix = a.has("--matrix");
  opt.lines = a.has("--lines");
  opt.per_layer = a.has("--per-layer");
  opt.x_axis = a.get("--x");
  if (a.has("--x") && opt.x_axis.empty()) throw UsageError{"--x needs steps or tokens"};
  opt.tau = a.has("--tau");
  opt.clip = a.has("--clip");
  opt.task_kind = a.get("--kind");
  if (a.has("--kind") && opt.task_kind.empty()) throw UsageError{"--kind needs a task kind, e.g. --kind kv"};
  if (a.has("--labels")) {
    if (a.get("--labels").empty()) throw UsageError{"--labels needs labels, e.g. --labels standard,focal"};
    opt.labels = split_labels(a.get("--labels"));
  }
  opt.has_title = !a.has("--no-title");
  opt.title = a.get("--title");
  if (a.has("--title") && a.has("--no-title")) throw UsageError{"give --title or --no-title, not both"};
  opt.width_in = a.get_double("--width", 3.4);
  opt.height_in = a.get_double("--height", 0.0);
  if (a.has("--height") && opt.height_in <= 0) throw UsageError{"--height must be more than 0 inches"};
  opt.dpi = a.get_double("--dpi", 200.0);

  const std::string bytes = figures::render_figure_files(kind, files, opt, format);
  write_file_atomically(out, bytes);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace focal::cli

namespace {

const char* kDemoHelp = R"(usage: focal demo [--model DIR] [--out DIR] [--prompt TEXT] [--temp T]

The main job without a display: runs a built-in prompt through the model under focal attention (t = 0.4 by
default) and under standard attention, sweeps t from 0.2 to 1.2, and writes the capture, the sweep and a gallery
of figures into the output directory, printing where each one is:
  capture.h5, sweep.h5          the data (open them with focal inspect, focal figure, or h5py)
  distribution.png / .svg       attention of one head's last query, standard vs focal (the paper's Fig. 1)
  heatmap.png                   that head's query x key attention, standard and focal side by side
  grid.png                      every layer x head of the focal run
  entropy.png                   mean attention entropy per layer, standard vs focal
  entropy-diff.png              focal - standard entropy per layer x head
  sweep.png                     entropy against t, one line per layer

  --model DIR   model directory (default: the bundled assets/models/focal-t0.4)
  --out DIR     output directory (default out/demo; created if missing)
  --prompt TEXT replace the built-in prompt
  --temp T      focal temperature of the focal run (default 0.4)
)";

const char* kDemoPrompt =
    "In the beginning God created the heaven and the earth. And the earth was without form, and void; and "
    "darkness was upon the face of the deep.";

}  // namespace

namespace focal::cli {

int cmd_demo(int argc, char** argv) {
  Args a(argc, argv, 2, {"--help", kLoadFlag, kMmapFlag},
         {"--model", "--out", "--prompt", "--temp", kDeviceOption, kWeightsOption, kPrecisionOption});
  if (a.has("--help")) {
    std::printf("%s%s", kDemoHelp, kDeviceHelp);
    return 0;
  }
  if (!a.positional().empty()) throw UsageError{"demo takes no positional arguments (use --model DIR)"};
  const std::string model_dir = a.has("--model") ? a.get("--model") : default_model_dir();
  const std::string out_dir = a.get("--out", "out/demo");
  const float temp = (float)a.get_double("--temp", 0.4);
  if (!temp_in_range(temp))  // a value refused (exit 1), as capture --temp 0
    throw Error("--temp = " + a.get("--temp") + " " + kTempRangeText + "; 0.4 is the paper's focal setting");
  if (!a.has("--model") && !exists(model_dir + "/config.json"))
    throw Error("the bundled model " + model_dir + " is missing (assets/models of the source tree): give --model DIR");
  if (out_dir.empty()) throw UsageError{"--out is empty: give the directory the gallery goes in"};
  // a file or device there is an error of the path (exit 1), as -o's of the other commands
  focal::require_directory_or_absent(out_dir, "--out");
  const std::string prompt = a.get("--prompt", kDemoPrompt);
  if (prompt.empty()) throw Error("--prompt is empty");

  // The output directory is made once the model and the prompt are known to be good (none is left behind empty).
  auto model = load_model(a, model_dir);
  const std::vector<int32_t> ids = model->require_tokenizer().encode(prompt, model->config().add_bos);
  if ((int)ids.size() > model->config().max_positions)
    throw Error("--prompt has " + std::to_string(ids.size()) + " tokens, more than the model's context");
  make_dirs(out_dir);
  const std::string dir = out_dir.back() == '/' ? out_dir : out_dir + "/";

  CaptureRequest req;
  validate_capture_request(model->config(), (int)ids.size(), req, 2);
  CaptureFile cap = make_capture_file(*model, ids);
  const TempSpec focal_spec = TempSpec::focal(temp), standard_spec = TempSpec::standard();
  std::fprintf(stderr, "demo: %zu tokens, model %s\n", ids.size(), model_dir.c_str());
  cap.runs.push_back(capture_run(*model, ids, standard_spec, req, standard_spec.label()));
  cap.runs.push_back(capture_run(*model, ids, focal_spec, req, focal_spec.label()));
  const std::string std_name = cap.runs[0].name, focal_name = cap.runs[1].name;
  cap.comparisons.push_back(compare_runs(cap, std_name, focal_name));
  const std::string cap_path = dir + "capture.h5";
  write_capture(cap, cap_path);

  std::vector<float> temps;
  for (int i = 2; i <= 12; ++i) temps.push_back(i / 10.0f);
  ProgressReporter prog("sweep: temperature");
  const SweepFile sweep = run_sweep(*model, ids, TempSpec::focal(1.0f), temps, RunOptions{},
                                    [&](size_t s) { prog.update((int)s + 1, (int)temps.size()); });
  const std::string sweep_path = dir + "sweep.h5";
  write_sweep(sweep, sweep_path);

  // The head whose last-query attention changes most between the runs (largest JS divergence).
  const Comparison& cmp = cap.comparisons[0];
  const size_t Lc = cmp.layers.size(), Hc = cmp.heads.size(), Qc = cmp.queries.size();
  size_t best = 0;
  for (size_t i = 0; i < Lc * Hc; ++i)
    if (cmp.js[i * Qc + Qc - 1] > cmp.js[best * Qc + Qc - 1]) best = i;
  const int layer = cmp.layers[best / Hc], head = cmp.heads[best % Hc];

  std::vector<figures::Source> cap_src = {{&cap, nullptr, "capture"}};
  std::vector<figures::Source> sweep_src = {{nullptr, &sweep, "sweep"}};
  struct Item {
    std::string file, kind;
    figures::FigureOptions opt;
    bool sweep;
  };
  figures::FigureOptions dist;
  dist.layer = layer;
  dist.head = head;
  dist.runs = {std_name, focal_name};
  figures::FigureOptions heat = dist;
  heat.width_in = 7.0;
  figures::FigureOptions grid;
  grid.runs = {focal_name};
  figures::FigureOptions ent;
  ent.runs = {std_name, focal_name};
  figures::FigureOptions diff = ent;
  diff.matrix = true;
  figures::FigureOptions sw;
  sw.per_layer = true;
  const std::vector<Item> items = {{"distribution.png", "distribution", dist, false},
                                   {"distribution.svg", "distribution", dist, false},
                                   {"heatmap.png", "heatmap", heat, false},
                                   {"grid.png", "grid", grid, false},
                                   {"entropy.png", "entropy", ent, false},
                                   {"entropy-diff.png", "entropy", diff, false},
                                   {"sweep.png", "sweep", sw, true}};
  std::printf("wrote %s (runs %s, %s; %zu tokens)\n", cap_path.c_str(), std_name.c_str(), focal_name.c_str(),
              ids.size());
  std::printf("wrote %s (t = 0.2 ... 1.2)\n", sweep_path.c_str());
  for (const Item& it : items) {
    const std::string path = dir + it.file;
    const std::string bytes =
        figures::render_figure(it.kind, it.sweep ? sweep_src : cap_src, it.opt, figures::format_from_path(path));
    write_file_atomically(path, bytes);
    std::printf("wrote %s\n", path.c_str());
  }
  std::printf("layer %d, head %d is the head whose last query changes most between %s and %s (JS divergence)\n", layer,
              head, std_name.c_str(), focal_name.c_str());
  return 0;
}

}  // namespace focal::cli
