// focalscope.Sweep and open_sweep: metrics against the focal temperature.
#include <vector>

#include "focal/capture.h"
#include "py_bindings.h"
#include "py_convert.h"

namespace focalscope::py {

using namespace nb::literals;

void bind_sweep(nb::module_& mod) {
  nb::class_<focal::SweepFile>(
      mod, "Sweep",
      "Metrics against the focal temperature: one forward per t (Model.sweep, focal sweep; docs/capture-format.md).")
      .def_prop_ro(
          "focal_temps",
          [](nb::handle self) {
            const auto& s = nb::cast<const focal::SweepFile&>(self);
            return view(s.focal_temps.data(), {s.focal_temps.size()}, self);
          },
          nb::sig("def focal_temps(self) -> numpy.typing.NDArray[numpy.float32]"), "The swept t, float32 [S].")
      .def_prop_ro(
          "head_metrics",
          [](nb::handle self) {
            const auto& s = nb::cast<const focal::SweepFile&>(self);
            return view(s.head_metrics.data(),
                        {s.focal_temps.size(), (size_t)s.n_layers, (size_t)s.n_heads, (size_t)focal::kNumRowMetrics},
                        self);
          },
          nb::sig("def head_metrics(self) -> numpy.typing.NDArray[numpy.float32]"),
          "Row metrics averaged over rows 1..T-1: float32 [S, n_layers, n_heads, 8] (temp, layer, head, metric).")
      .def_prop_ro(
          "mean_nll",
          [](nb::handle self) {
            const auto& s = nb::cast<const focal::SweepFile&>(self);
            return view(s.mean_nll.data(), {s.mean_nll.size()}, self);
          },
          nb::sig("def mean_nll(self) -> numpy.typing.NDArray[numpy.float32]"),
          "Mean next-token loss of the prompt in nats per t, float32 [S].")
      .def_prop_ro(
          "tokens",
          [](nb::handle self) {
            const auto& s = nb::cast<const focal::SweepFile&>(self);
            return view(s.token_ids.data(), {s.token_ids.size()}, self);
          },
          nb::sig("def tokens(self) -> numpy.typing.NDArray[numpy.int32]"), "The prompt's token ids [T].")
      .def_prop_ro("model_path", [](const focal::SweepFile& s) { return s.model_path; })
      .def_prop_ro("weights_checksum", [](const focal::SweepFile& s) { return s.weights_checksum; })
      .def_prop_ro("tool_version", [](const focal::SweepFile& s) { return s.tool_version; })
      .def_prop_ro(
          "created_utc", [](const focal::SweepFile& s) { return s.created_utc; },
          "ISO 8601 time the file was written ('' until saved).")
      .def_prop_ro(
          "device", [](const focal::SweepFile& s) { return s.device; }, "Where the forwards ran: 'cpu' or 'cuda'.")
      .def_prop_ro(
          "precision", [](const focal::SweepFile& s) { return s.precision; },
          "How the forwards computed: 'exact' or 'fast'.")
      .def_prop_ro(
          "tokenizer", [](const focal::SweepFile& s) { return s.tokenizer; },
          "The tokenizer the tokens came from, e.g. 'tokenizer.model (sentencepiece)' ('' when none is recorded).")
      .def_prop_ro(
          "warnings", [](const focal::SweepFile& s) { return s.warnings; },
          "What the runs went on despite (a prompt past the trained context, ...), one sentence a line; '' when "
          "nothing.")
      .def_prop_ro("n_layers", [](const focal::SweepFile& s) { return s.n_layers; })
      .def_prop_ro("n_heads", [](const focal::SweepFile& s) { return s.n_heads; })
      .def_prop_ro(
          "relevant", [](const focal::SweepFile& s) { return std::vector<int>(s.relevant.begin(), s.relevant.end()); },
          "The key positions relevant_mass is over (sweep(relevant=...)); [] when none were given.")
      .def_prop_ro(
          "base_spec", [](const focal::SweepFile& s) { return focal::TempSpec::from_json(s.base_spec_json, "sweep"); },
          "The setting whose t was swept.")
      .def(
          "save",
          [](const focal::SweepFile& s, const fs::path& p) {
            nb::gil_scoped_release rel;
            focal::write_sweep(s, path_str(p));
          },
          "path"_a, "Writes the sweep file `focal sweep -o` writes.")
      .def("__repr__", [](const focal::SweepFile& s) {
        return "<focalscope.Sweep " + std::to_string(s.focal_temps.size()) + " temperatures, " +
               std::to_string(s.token_ids.size()) + " tokens>";
      });
  mod.def(
      "open_sweep",
      [](const fs::path& p) {
        if (!fs::exists(p)) raise(PyExc_FileNotFoundError, "open_sweep: no such file: '" + path_str(p) + "'");
        nb::gil_scoped_release rel;
        return focal::read_sweep(path_str(p));
      },
      "path"_a, "Reads a sweep file.");
}

}  // namespace focalscope::py
