// focalscope.Figure, focalscope.figure and focalscope.show: every kind `focal figure` draws (captures, sweeps,
// training logs, evaluation files, batch stats files), rendered by the project's cairo figure module with the same
// options, so the same inputs give the same bytes as the CLI.
#include <cctype>
#include <cmath>

#include "focal/atomic_file.h"
#include "focal/error.h"
#include "focal/eval.h"
#include "focal/trainer.h"
#include "focal_figures/corpus.h"
#include "focal_figures/figures.h"
#include "py_bindings.h"
#include "py_convert.h"
#include "py_objects.h"

namespace focalscope::py {

using namespace nb::literals;

namespace {

focal::figures::Format format_of(const std::string& f) {
  if (f == "png") return focal::figures::Format::kPng;
  if (f == "svg") return focal::figures::Format::kSvg;
  if (f == "pdf") return focal::figures::Format::kPdf;
  raise(PyExc_ValueError, "format: '" + f + "' is not a figure format (use 'png', 'svg' or 'pdf')");
}

std::string py_type_name(nb::handle h) { return nb::cast<std::string>(nb::str(h.type().attr("__name__"))); }

std::string kinds_list() {
  std::string s;
  for (const std::string& k : focal::figures::figure_kinds()) s += (s.empty() ? "'" : ", '") + k + "'";
  return s;
}

// The keyword options of figure() / show(), in the order the docs list them, each with the `focal figure` option
// it stands for.
const std::vector<std::string>& option_names() {
  static const std::vector<std::string> v = {
      "layer",        "head",     "query",     "keys",      "last_keys", "top_keys", "layers",    "heads",
      "runs",         "metric",   "task_kind", "labels",    "no_sink",   "overlay",  "log_scale", "log_floor",
      "linear_scale", "matrix",   "lines",     "per_layer", "x_axis",    "tau",      "clip",      "title",
      "no_title",     "width_in", "height_in", "dpi",       "budget"};
  return v;
}

int opt_index(nb::handle v, const char* name) {
  if (v.is_none()) return -1;
  if (!PyIndex_Check(v.ptr()) || PyBool_Check(v.ptr()))
    raise(PyExc_TypeError, std::string(name) + ": expected an int or None, got " + py_type_name(v));
  const long long x = nb::cast<long long>(nb::int_(v));
  if (x < 0) raise(PyExc_ValueError, std::string(name) + ": must be 0 or more (got " + std::to_string(x) + ")");
  return (int)x;
}

bool opt_bool(nb::handle v, const char* name) {
  if (!PyBool_Check(v.ptr()))
    raise(PyExc_TypeError, std::string(name) + ": expected True or False, got " + py_type_name(v));
  return v.is(nb::handle(Py_True));
}

double opt_number(nb::handle v, const char* name) {
  if (PyBool_Check(v.ptr()) || !(PyFloat_Check(v.ptr()) || PyLong_Check(v.ptr())))
    raise(PyExc_TypeError, std::string(name) + ": expected a number, got " + py_type_name(v));
  const double x = nb::cast<double>(v);
  if (!std::isfinite(x)) raise(PyExc_ValueError, std::string(name) + ": must be a finite number");
  return x;
}

std::string opt_str(nb::handle v, const char* name) {
  if (!PyUnicode_Check(v.ptr())) raise(PyExc_TypeError, std::string(name) + ": expected a str, got " + py_type_name(v));
  return nb::cast<std::string>(v);
}

// A str or a sequence of str (run names, labels).
std::vector<std::string> opt_names(nb::handle v, const char* name) {
  if (PyUnicode_Check(v.ptr())) return {nb::cast<std::string>(v)};
  if (!PySequence_Check(v.ptr()))
    raise(PyExc_TypeError, std::string(name) + ": expected a str or a list of str, got " + py_type_name(v));
  std::vector<std::string> out;
  for (nb::handle item : nb::iter(v)) out.push_back(opt_str(item, name));
  if (out.empty()) raise(PyExc_ValueError, std::string(name) + ": the list is empty (give names, or leave it out)");
  return out;
}

// An int or a sequence of ints, without a model to check them against (the figure checks them against its input).
std::vector<int> opt_indices(nb::handle v, const char* name) {
  if (PyIndex_Check(v.ptr()) && !PyBool_Check(v.ptr()) && !PySequence_Check(v.ptr())) return {opt_index(v, name)};
  if (!PySequence_Check(v.ptr()) || PyUnicode_Check(v.ptr()))
    raise(PyExc_TypeError, std::string(name) + ": expected an int or a list of ints, got " + py_type_name(v));
  std::vector<int> out;
  for (nb::handle item : nb::iter(v)) out.push_back(opt_index(item, name));
  if (out.empty()) raise(PyExc_ValueError, std::string(name) + ": the list is empty (leave it out for all)");
  return out;
}

// Python keyword options -> FigureOptions, with the CLI's defaults (focal figure; cli/cmd_figure.cpp).
focal::figures::FigureOptions figure_options(const nb::kwargs& kw) {
  focal::figures::FigureOptions opt;
  bool title_set = false, no_title = false;
  for (auto [key, value] : kw) {
    const std::string k = nb::cast<std::string>(key);
    const char* n = k.c_str();
    if (std::find(option_names().begin(), option_names().end(), k) == option_names().end()) {
      std::string list;
      for (const std::string& o : option_names()) list += (list.empty() ? "" : ", ") + o;
      raise(PyExc_TypeError, "figure: unknown option '" + k + "' (options: " + list + ")");
    }
    if (value.is_none()) continue;  // None: the kind's default
    if (k == "layer")
      opt.layer = opt_index(value, n);
    else if (k == "head")
      opt.head = opt_index(value, n);
    else if (k == "query")
      opt.query = opt_index(value, n);
    else if (k == "keys") {
      const std::vector<int> ab = opt_indices(value, n);
      if (ab.size() != 2 || ab[0] > ab[1])
        raise(PyExc_ValueError, "keys: give (first, last) key positions with first <= last, e.g. keys=(0, 20)");
      opt.key_first = ab[0];
      opt.key_last = ab[1];
    } else if (k == "last_keys") {
      opt.key_window = opt_index(value, n);
      if (opt.key_window == 0) raise(PyExc_ValueError, "last_keys: must be 1 or more (the keys ending at the query)");
    } else if (k == "top_keys")
      opt.top_keys = opt_index(value, n);
    else if (k == "layers")
      opt.layers = opt_indices(value, n);
    else if (k == "heads")
      opt.heads = opt_indices(value, n);
    else if (k == "runs")
      opt.runs = opt_names(value, n);
    else if (k == "metric")
      opt.metric = opt_str(value, n);
    else if (k == "task_kind")
      opt.task_kind = opt_str(value, n);
    else if (k == "labels")
      opt.labels = opt_names(value, n);
    else if (k == "no_sink")
      opt.no_sink = opt_bool(value, n);
    else if (k == "overlay")
      opt.overlay = opt_bool(value, n);
    else if (k == "log_scale")
      opt.log_scale = opt_bool(value, n);
    else if (k == "log_floor")
      opt.log_floor = (float)opt_number(value, n);
    else if (k == "linear_scale")
      opt.linear_scale = opt_bool(value, n);
    else if (k == "matrix")
      opt.matrix = opt_bool(value, n);
    else if (k == "lines")
      opt.lines = opt_bool(value, n);
    else if (k == "per_layer")
      opt.per_layer = opt_bool(value, n);
    else if (k == "x_axis")
      opt.x_axis = opt_str(value, n);
    else if (k == "tau")
      opt.tau = opt_bool(value, n);
    else if (k == "clip")
      opt.clip = opt_bool(value, n);
    else if (k == "title") {
      opt.title = opt_str(value, n);
      title_set = true;
    } else if (k == "no_title")
      no_title = opt_bool(value, n);
    else if (k == "width_in")
      opt.width_in = opt_number(value, n);
    else if (k == "height_in") {
      opt.height_in = opt_number(value, n);
      if (opt.height_in <= 0) raise(PyExc_ValueError, "height_in: must be more than 0 inches (None: natural height)");
    } else if (k == "dpi")
      opt.dpi = opt_number(value, n);
    else if (k == "budget")
      opt.read_budget_bytes = parse_budget(value);
  }
  if (kw.contains("log_floor") && !kw["log_floor"].is_none() && !opt.log_scale)
    raise(PyExc_ValueError, "log_floor: sets the lower end of the log colour scale: add log_scale=True");
  if (title_set && no_title) raise(PyExc_ValueError, "title: give title= or no_title=True, not both");
  opt.has_title = !no_title;
  return opt;
}

// One input of a figure: a Capture, Sweep or Stats object, a path, or a (label, input) pair.
struct Input {
  std::string label;  // "" unless given as a pair
  std::string path;   // set for a path
  const PyCapture* capture = nullptr;
  const focal::SweepFile* sweep = nullptr;
  const PyStats* stats = nullptr;
};

Input input_of(nb::handle h, size_t i) {
  Input in;
  if (PyTuple_Check(h.ptr()) && PyTuple_Size(h.ptr()) == 2 && PyUnicode_Check(PyTuple_GetItem(h.ptr(), 0))) {
    in = input_of(nb::handle(PyTuple_GetItem(h.ptr(), 1)), i);
    in.label = nb::cast<std::string>(nb::handle(PyTuple_GetItem(h.ptr(), 0)));
    if (in.label.empty()) raise(PyExc_ValueError, "inputs: a (label, input) pair has an empty label");
    return in;
  }
  if (nb::isinstance<PyCapture>(h))
    in.capture = &nb::cast<const PyCapture&>(h);
  else if (nb::isinstance<focal::SweepFile>(h))
    in.sweep = &nb::cast<const focal::SweepFile&>(h);
  else if (nb::isinstance<PyStats>(h))
    in.stats = &nb::cast<const PyStats&>(h);
  else if (PyUnicode_Check(h.ptr()) || nb::hasattr(h, "__fspath__")) {
    in.path = nb::cast<std::string>(nb::str(nb::module_::import_("os").attr("fspath")(h)));
    if (!fs::exists(in.path)) raise(PyExc_FileNotFoundError, "figure: no such file: '" + in.path + "'");
  } else {
    raise(PyExc_TypeError, "inputs: item " + std::to_string(i) + " is a " + py_type_name(h) +
                               "; give a Capture, Sweep or Stats, a file path, or a (label, input) pair");
  }
  return in;
}

// The file name without directory and extension, as `focal figure` labels a file.
std::string stem(const std::string& path) { return fs::path(path).stem().string(); }

bool is_capture_kind(const std::string& kind) {
  return kind == "distribution" || kind == "heatmap" || kind == "grid" || kind == "entropy";
}

// What each kind draws, for the TypeError of a wrong input.
const char* kind_inputs(const std::string& kind) {
  if (kind == "sweep") return "Sweep objects or sweep files (Model.sweep, focal sweep)";
  if (kind == "training") return "training logs (the path of OUT/train_log.h5 from focal train)";
  if (kind == "retrieval") return "evaluation files (the path of a focal eval -o file)";
  if (kind == "corpus") return "one Stats object or stats file (open_stats, focal batch)";
  if (is_capture_kind(kind)) return "Capture objects or capture files (Model.run, open_capture, focal capture)";
  return "the files `focal figure` reads for it (see its --help)";
}

std::string render(const std::string& kind, const std::vector<Input>& inputs, const focal::figures::FigureOptions& opt,
                   focal::figures::Format fmt) {
  auto wrong = [&](size_t i, const char* what) {
    raise(PyExc_TypeError,
          "inputs: the " + kind + " figure draws " + kind_inputs(kind) + "; item " + std::to_string(i) + " is " + what);
  };
  bool all_paths = true;
  for (const Input& in : inputs) all_paths = all_paths && !in.path.empty() && in.label.empty();
  if (all_paths) {  // exactly `focal figure KIND FILE...`
    std::vector<std::string> paths;
    paths.reserve(inputs.size());
    for (const Input& in : inputs) paths.push_back(in.path);
    nb::gil_scoped_release rel;
    return focal::figures::render_figure_files(kind, paths, opt, fmt);
  }
  if (!is_capture_kind(kind) && kind != "sweep" && kind != "corpus")  // training, retrieval, ...: files only
    raise(PyExc_TypeError, "inputs: the " + kind + " figure draws " + kind_inputs(kind) + ", given as paths");
  if (kind == "corpus") {
    if (inputs.size() != 1) raise(PyExc_ValueError, "inputs: the corpus figure draws one stats file");
    if (!inputs[0].stats) wrong(0, "not a Stats object");
    nb::gil_scoped_release rel;
    return focal::figures::render_corpus(inputs[0].stats->file, opt, fmt);
  }
  const bool sweep_kind = kind == "sweep";
  std::vector<std::unique_ptr<focal::CaptureFile>> captures;
  std::vector<std::unique_ptr<focal::SweepFile>> sweeps;
  std::vector<focal::figures::Source> sources;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Input& in = inputs[i];
    focal::figures::Source s;
    if (in.stats) wrong(i, "a Stats object");
    if (sweep_kind ? in.capture != nullptr : in.sweep != nullptr) wrong(i, in.capture ? "a Capture" : "a Sweep");
    s.label = !in.label.empty()    ? in.label
              : !in.path.empty()   ? stem(in.path)
              : inputs.size() == 1 ? (sweep_kind ? "sweep" : "capture")
                                   : (sweep_kind ? "sweep" : "capture") + std::to_string(i + 1);
    s.path = in.path;
    if (!in.path.empty()) {
      nb::gil_scoped_release rel;
      if (sweep_kind)
        sweeps.push_back(std::make_unique<focal::SweepFile>(focal::read_sweep(in.path, opt.read_budget_bytes)));
      else
        captures.push_back(std::make_unique<focal::CaptureFile>(focal::read_capture(in.path, opt.read_budget_bytes)));
    }
    if (sweep_kind)
      s.sweep = in.sweep ? in.sweep : sweeps.back().get();
    else
      s.capture = in.capture ? &in.capture->file : captures.back().get();
    sources.push_back(s);
  }
  for (size_t i = 0; i < sources.size(); ++i)
    for (size_t j = i + 1; j < sources.size(); ++j)
      if (sources[i].label == sources[j].label)
        raise(PyExc_ValueError,
              "inputs: two inputs are labelled '" + sources[i].label + "': give them labels as (label, input) pairs");
  nb::gil_scoped_release rel;
  return focal::figures::render_figure(kind, sources, opt, fmt);
}

PyFigure make_figure(const std::string& kind, const std::vector<Input>& inputs, const std::string& format,
                     const nb::kwargs& kw) {
  const std::vector<std::string>& kinds = focal::figures::figure_kinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end())
    raise(PyExc_ValueError, "kind: '" + kind + "' is not a figure kind (use " + kinds_list() + ")");
  if (inputs.empty()) raise(PyExc_ValueError, "inputs: the " + kind + " figure needs " + kind_inputs(kind));
  const focal::figures::FigureOptions opt = figure_options(kw);
  PyFigure fig;
  fig.format = format;
  fig.data = render(kind, inputs, opt, format_of(format));
  return fig;
}

PyFigure figure(const std::string& kind, const nb::args& args, const std::string& format, const nb::kwargs& kw) {
  std::vector<Input> inputs;
  for (size_t i = 0; i < args.size(); ++i) inputs.push_back(input_of(args[i], i));
  return make_figure(kind, inputs, format, kw);
}

// show(x): the figure of one input, its kind defaulting to what the input is.
PyFigure show(nb::handle input, nb::handle layer, nb::handle head, std::optional<std::string> kind, nb::handle run,
              nb::handle query, const std::string& format, const nb::kwargs& kw_in) {
  const Input in = input_of(input, 0);
  std::string k;
  if (kind)
    k = *kind;
  else if (in.sweep)
    k = "sweep";
  else if (in.stats)
    k = "corpus";
  else if (in.capture)
    k = "heatmap";
  else
    raise(PyExc_ValueError, "kind: give the figure kind for a path (use " + kinds_list() + ")");
  nb::kwargs kw;
  for (auto [key, value] : kw_in) kw[key] = value;
  if (!layer.is_none()) kw["layer"] = layer;
  if (!head.is_none()) kw["head"] = head;
  if (!query.is_none()) kw["query"] = query;
  if (!run.is_none()) {
    if (kw.contains("runs")) raise(PyExc_ValueError, "run: give run= (one run) or runs=, not both");
    kw["runs"] = in.capture ? nb::object(nb::str(in.capture->run_of(run).name.c_str())) : nb::borrow(run);
  }
  return make_figure(k, {in}, format, kw);
}

const char* kOptionsDoc =
    "Options (keyword arguments; None or left out: the kind's default), named after `focal figure`'s:\n"
    "layer, head, query (--layer --head --query); keys=(first, last) (--keys A:B); last_keys=N (--keys last:N); "
    "top_keys (--top-keys); layers, heads: an int or a list (--layers --heads); runs: a run name or a list "
    "(--runs; with several inputs name a run LABEL:RUN); metric (--metric); task_kind (--kind, retrieval); labels "
    "(--labels); no_sink, overlay, log_scale (--log), log_floor (--floor), linear_scale (--linear), matrix, lines, "
    "per_layer, tau, clip: bool; x_axis: 'steps' or 'tokens' (--x); title, no_title; width_in, height_in, dpi "
    "(--width --height --dpi); budget: memory the files read may take (--budget, bytes or '512M').";

}  // namespace

void bind_figure(nb::module_& mod) {
  nb::class_<PyFigure>(
      mod, "Figure",
      "A rendered figure (PNG, SVG or PDF bytes from the project's cairo figure module). Jupyter shows it inline.")
      .def_prop_ro(
          "data", [](const PyFigure& f) { return nb::bytes(f.data.data(), f.data.size()); }, "The encoded file.")
      .def_prop_ro(
          "format", [](const PyFigure& f) { return f.format; }, "'png', 'svg' or 'pdf'.")
      .def(
          "save",
          [](const PyFigure& f, const fs::path& p) {
            // A path whose extension names another format would hold this one's bytes (x.svg of PNG bytes).
            std::string ext = p.extension().string();
            for (char& ch : ext) ch = (char)std::tolower((unsigned char)ch);
            if ((ext == ".png" || ext == ".svg" || ext == ".pdf") && ext.substr(1) != f.format)
              throw nb::value_error(("Figure.save: '" + path_str(p) + "' names " + ext.substr(1) +
                                     " but the figure is " + f.format + ": render it with format='" + ext.substr(1) +
                                     "', or save it as ." + f.format)
                                        .c_str());
            focal::write_file_atomically(path_str(p), f.data);
          },
          "path"_a, "Writes the bytes to path (its extension, if .png / .svg / .pdf, must be the figure's format).")
      .def("_repr_png_",
           [](const PyFigure& f) -> nb::object {
             if (f.format != "png") return nb::none();
             return nb::bytes(f.data.data(), f.data.size());
           })
      .def("_repr_svg_",
           [](const PyFigure& f) -> nb::object {
             if (f.format != "svg") return nb::none();
             return nb::str(f.data.data(), f.data.size());
           })
      .def("__repr__", [](const PyFigure& f) {
        return "<focalscope.Figure " + f.format + ", " + std::to_string(f.data.size()) + " bytes>";
      });

  static const std::string kinds_doc =
      "The figure kinds, in the order `focal figure --help` lists them: " + kinds_list() + ".";
  mod.def("figure_kinds", &focal::figures::figure_kinds, kinds_doc.c_str());

  static const std::string figure_doc =
      std::string(
          "`focal figure KIND INPUT... [options]` from Python: renders a figure with the project's figure "
          "module (docs/figures.md) and returns a Figure, which Jupyter displays inline (PNG or SVG).\n\n"
          "kind: one of figure_kinds(). inputs: Capture objects or capture files (distribution, heatmap, "
          "grid, entropy), Sweep objects or sweep files (sweep), paths of training logs (training), "
          "evaluation files (retrieval), position-loss files (positions) or a temperature file (temps), a Stats "
          "object or stats file (corpus); a Capture, Sweep or Stats input may be a (label, input) pair to name it "
          "in legends (paths are named by the files). Paths alone give exactly the CLI's bytes for the same "
          "files and options; objects are labelled 'capture' / 'sweep' (numbered when several).\n\n") +
      kOptionsDoc;
  mod.def("figure", &figure, "kind"_a, "inputs"_a, "format"_a = "png", "options"_a,
          nb::sig("def figure(kind: str, *inputs: Capture | Sweep | Stats | str | os.PathLike[str] | "
                  "tuple[str, Capture | Sweep | Stats | str | os.PathLike[str]], format: str = 'png', "
                  "layer: int | None = None, head: int | None = None, query: int | None = None, "
                  "keys: tuple[int, int] | None = None, last_keys: int | None = None, top_keys: int | None = None, "
                  "layers: int | collections.abc.Sequence[int] | None = None, "
                  "heads: int | collections.abc.Sequence[int] | None = None, "
                  "runs: str | collections.abc.Sequence[str] | None = None, metric: str | None = None, "
                  "task_kind: str | None = None, labels: collections.abc.Sequence[str] | None = None, "
                  "no_sink: bool = False, overlay: bool = False, log_scale: bool = False, "
                  "log_floor: float | None = None, linear_scale: bool = False, matrix: bool = False, "
                  "lines: bool = False, per_layer: bool = False, x_axis: str | None = None, tau: bool = False, "
                  "clip: bool = False, title: str | None = None, no_title: bool = False, "
                  "width_in: float | None = None, height_in: float | None = None, dpi: float | None = None, "
                  "budget: int | str | None = None) -> Figure"),
          figure_doc.c_str());

  static const std::string show_doc =
      std::string(
          "The figure of one input (a Capture, Sweep, Stats or a path; see figure()), its kind by default "
          "what the input is: 'heatmap' for a Capture, 'sweep' for a Sweep, 'corpus' for Stats (give kind= "
          "for a path). run= names one run of a capture (runs= several). Returns a Figure, which Jupyter "
          "displays inline.\n\n") +
      kOptionsDoc;
  mod.def("show", &show, "input"_a, "layer"_a = nb::none(), "head"_a = nb::none(), "kind"_a = nb::none(),
          "run"_a = nb::none(), "query"_a = nb::none(), "format"_a = "png", "options"_a,
          nb::sig("def show(input: Capture | Sweep | Stats | str | os.PathLike[str], layer: int | None = None, "
                  "head: int | None = None, kind: str | None = None, run: str | int | None = None, "
                  "query: int | None = None, format: str = 'png', **options: object) -> Figure"),
          show_doc.c_str());
}

}  // namespace focalscope::py
