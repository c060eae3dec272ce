// focalscope.Figure and focalscope.show: figures of a capture rendered by the project's cairo figure module.
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

PyFigure show(const PyCapture& cap, std::optional<int> layer, std::optional<int> head, const std::string& kind,
              nb::handle run, std::optional<int> query, const std::string& format, bool log_scale, bool no_sink,
              std::optional<double> width_in, std::optional<double> dpi) {
  const std::vector<std::string>& kinds = focal::figures::figure_kinds();
  if (kind != "heatmap" && kind != "distribution" && kind != "grid" && kind != "entropy") {
    std::string list = "'heatmap', 'distribution', 'grid', 'entropy'";
    raise(PyExc_ValueError, "kind: '" + kind + "' is not a figure of a capture (use " + list + ")");
  }
  (void)kinds;
  focal::figures::FigureOptions opt;
  opt.layer = layer.value_or(-1);
  opt.head = head.value_or(-1);
  opt.query = query.value_or(-1);
  if (!run.is_none()) opt.runs.push_back(cap.run_of(run).name);
  opt.log_scale = log_scale;
  opt.no_sink = no_sink;
  if (width_in) opt.width_in = *width_in;
  if (dpi) opt.dpi = *dpi;
  focal::figures::Source src;
  src.capture = &cap.file;
  PyFigure fig;
  fig.format = format;
  const focal::figures::Format f = format_of(format);
  nb::gil_scoped_release rel;
  fig.data = focal::figures::render_figure(kind, {src}, opt, f);
  return fig;
}

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
          "save", [](const PyFigure& f, const fs::path& p) { focal::figures::write_file_atomic(path_str(p), f.data); },
          "path"_a, "Writes the bytes to path.")
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

  mod.def("show", &show, "capture"_a, "layer"_a = nb::none(), "head"_a = nb::none(), "kind"_a = "heatmap",
          "run"_a = nb::none(), "query"_a = nb::none(), "format"_a = "png", "log_scale"_a = false, "no_sink"_a = false,
          "width_in"_a = nb::none(), "dpi"_a = nb::none(),
          nb::sig("def show(capture: Capture, layer: int | None = None, head: int | None = None, kind: str = "
                  "'heatmap', run: str | int | None = None, query: int | None = None, format: str = 'png', "
                  "log_scale: bool = False, no_sink: bool = False, width_in: float | None = None, "
                  "dpi: float | None = None) -> Figure"),
          "Renders a figure of a capture with the project's figure module (docs/figures.md) and returns a Figure, "
          "which Jupyter displays inline (PNG or SVG; no JavaScript).\n\n"
          "kind: 'heatmap' (a head's [query, key] probabilities), 'distribution' (the paper's Fig. 1: one query's "
          "attention over keys), 'grid' or 'entropy'. layer / head / query default to the first stored layer and "
          "head and the last stored query; run to every run the kind draws.");
}

}  // namespace focalscope::py
