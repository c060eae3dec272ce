// focalscope.Capture and open_capture: a capture's runs as numpy views, its metrics, KL / JS, the per-head summary,
// and save().
#include <cmath>

#include "focal/error.h"
#include "focal/provenance.h"
#include "py_bindings.h"
#include "py_convert.h"
#include "py_objects.h"

namespace focalscope::py {

using namespace nb::literals;

focal::Comparison comparison(const PyCapture& c, const std::string& a, const std::string& b) {
  for (const focal::Comparison& cmp : c.file.comparisons)
    if (cmp.run_a == a && cmp.run_b == b) return cmp;
  return focal::compare_runs(c.file, a, b);
}

namespace {

// Capture.head_summary: per (layer, head) the mean of a metric over rows 1..T-1 in each run (focal::head_metric_mean,
// the number `focal inspect` prints), with two runs their difference, as columns.
nb::dict head_summary(const PyCapture& c, const std::string& metric, nb::handle runs, std::optional<std::string> sort) {
  const std::vector<std::string> names = metric_names();
  const auto mit = std::find(names.begin(), names.end(), metric);
  if (mit == names.end()) {
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    raise(PyExc_ValueError, "metric: '" + metric + "' is not a row metric (use one of " + list + ")");
  }
  const int m = (int)(mit - names.begin());
  std::vector<const focal::RunCapture*> rs;
  if (runs.is_none()) {
    for (const focal::RunCapture& r : c.file.runs) rs.push_back(&r);
  } else if (PyUnicode_Check(runs.ptr()) || PyIndex_Check(runs.ptr())) {
    rs.push_back(&c.run_of(runs));
  } else if (PySequence_Check(runs.ptr())) {
    for (nb::handle r : nb::iter(runs)) rs.push_back(&c.run_of(r));
  } else {
    raise(PyExc_TypeError, "runs: expected None (every run), a run name or index, or a sequence of them");
  }
  if (rs.empty()) raise(PyExc_ValueError, "runs: no runs given (None: every run)");
  for (size_t i = 0; i < rs.size(); ++i)
    for (size_t j = i + 1; j < rs.size(); ++j)
      if (rs[i] == rs[j]) raise(PyExc_ValueError, "runs: run '" + rs[i]->name + "' is listed twice");
  const bool diff = rs.size() == 2;
  const int L = c.file.n_layers, H = c.file.n_heads, T = c.file.n_tokens();
  const size_t N = (size_t)L * H;
  std::vector<std::vector<double>> mean(rs.size(), std::vector<double>(N));
  for (size_t k = 0; k < rs.size(); ++k)
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) mean[k][(size_t)l * H + h] = focal::head_metric_mean(*rs[k], H, T, l, h, m);
  std::vector<double> delta;
  if (diff)
    for (size_t i = 0; i < N; ++i) delta.push_back(mean[1][i] - mean[0][i]);

  std::vector<size_t> order(N);
  for (size_t i = 0; i < N; ++i) order[i] = i;
  if (sort) {
    const std::vector<double>* key = nullptr;
    bool absolute = false;
    if (*sort == "abs_delta" || *sort == "delta") {
      if (!diff)
        raise(PyExc_ValueError,
              "sort: '" + *sort + "' needs two runs (runs=(a, b)); this summary has " + std::to_string(rs.size()));
      key = &delta;
      absolute = *sort == "abs_delta";
    } else {
      for (size_t k = 0; k < rs.size(); ++k)
        if (rs[k]->name == *sort) key = &mean[k];
      if (!key) raise(PyExc_ValueError, "sort: '" + *sort + "' is not 'abs_delta', 'delta' or a run of the summary");
    }
    // Largest first; NaN (a head without rows) last; ties keep (layer, head) order.
    auto value = [&](size_t i) { return absolute ? std::fabs((*key)[i]) : (*key)[i]; };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const double va = value(a), vb = value(b);
      if (std::isnan(va) || std::isnan(vb)) return !std::isnan(va) && std::isnan(vb);
      return va > vb;
    });
  }
  std::vector<int32_t> layer(N), head(N);
  for (size_t i = 0; i < N; ++i) {
    layer[i] = (int32_t)(order[i] / (size_t)H);
    head[i] = (int32_t)(order[i] % (size_t)H);
  }
  auto permuted = [&](const std::vector<double>& v) {
    std::vector<double> o(N);
    for (size_t i = 0; i < N; ++i) o[i] = v[order[i]];
    return owned(std::move(o), {N});
  };
  nb::dict out;
  out["layer"] = owned(std::move(layer), {N});
  out["head"] = owned(std::move(head), {N});
  for (size_t k = 0; k < rs.size(); ++k) {
    if (rs[k]->name == "layer" || rs[k]->name == "head" || (diff && rs[k]->name == "delta"))
      raise(PyExc_ValueError, "runs: run '" + rs[k]->name + "' would clash with a column of the summary");
    out[rs[k]->name.c_str()] = permuted(mean[k]);
  }
  if (diff) out["delta"] = permuted(delta);
  return out;
}

}  // namespace

void bind_capture(nb::module_& mod) {
  nb::class_<PyCapture>(
      mod, "Capture",
      "What attention did in one or more named runs over the same tokens: the in-memory form of a capture file "
      "(docs/capture-format.md). Made by Model.run / Model.generate or read by open_capture. Array accessors return "
      "read-only numpy views of the capture's memory (no copy); they keep the capture alive.")
      .def_prop_ro(
          "runs",
          [](const PyCapture& c) {
            std::vector<std::string> v;
            for (const auto& r : c.file.runs) v.push_back(r.name);
            return v;
          },
          "Run names, in capture order.")
      .def_prop_ro(
          "n_tokens", [](const PyCapture& c) { return c.file.n_tokens(); }, "T.")
      .def_prop_ro("n_layers", [](const PyCapture& c) { return c.file.n_layers; })
      .def_prop_ro("n_heads", [](const PyCapture& c) { return c.file.n_heads; })
      .def_prop_ro("d_head", [](const PyCapture& c) { return c.file.d_head; })
      .def_prop_ro(
          "tokens",
          [](nb::handle self) {
            const PyCapture& c = nb::cast<const PyCapture&>(self);
            return view(c.file.token_ids.data(), {c.file.token_ids.size()}, self);
          },
          nb::sig("def tokens(self) -> numpy.typing.NDArray[numpy.int32]"), "Token ids [T] (int32).")
      .def_prop_ro(
          "pieces", [](const PyCapture& c) { return c.file.pieces; }, "Display text of each token [T].")
      .def_prop_ro(
          "relevant", [](const PyCapture& c) { return c.file.relevant; }, "Key positions of the relevant_mass metric.")
      .def_prop_ro(
          "n_prompt_tokens", [](const PyCapture& c) { return c.file.prompt_end(); },
          "Tokens of the prompt: positions 0..n_prompt_tokens-1 were the prompt and the rest were generated "
          "(Model.generate(capture=True), `focal generate --capture`). n_tokens for a capture of a prompt alone, and "
          "for files that do not record it (written before generation captures did).")
      .def_prop_ro("model_path", [](const PyCapture& c) { return c.file.model_path; })
      .def_prop_ro("weights_checksum", [](const PyCapture& c) { return c.file.weights_checksum; })
      .def_prop_ro("tool_version", [](const PyCapture& c) { return c.file.tool_version; })
      .def_prop_ro(
          "device", [](const PyCapture& c) { return c.file.device; },
          "Where the forward ran: 'cpu' or 'cuda' ('' in files written before it was recorded).")
      .def_prop_ro(
          "precision", [](const PyCapture& c) { return c.file.precision; },
          "How the forward computed: 'exact' or 'fast' ('' in files written before it was recorded).")
      .def_prop_ro(
          "tokenizer", [](const PyCapture& c) { return c.file.tokenizer; },
          "The tokenizer the tokens came from, e.g. 'tokenizer.json (byte-level BPE)' ('' for a model without one and "
          "in files written before it was recorded).")
      .def_prop_ro(
          "warnings", [](const PyCapture& c) { return c.file.warnings; },
          "What the run went on despite (a prompt past the trained context, a rope_scaling override), one sentence "
          "a line; '' when nothing.")
      .def_prop_ro(
          "created_utc", [](const PyCapture& c) { return c.file.created_utc; },
          "ISO 8601 time the file was written ('' until saved).")
      .def_prop_ro(
          "metric_names", [](const PyCapture&) { return metric_names(); },
          "Names of the last axis of metrics(), in order.")
      .def(
          "temp_spec",
          [](const PyCapture& c, nb::handle run) {
            return focal::TempSpec::from_json(c.run_of(run).temp_spec_json, "temp_spec");
          },
          "run"_a = nb::none(), nb::sig("def temp_spec(self, run: str | int | None = None) -> TempSpec"),
          "The temperature setting of a run.")
      .def(
          "layers", [](const PyCapture& c, nb::handle run) { return c.run_of(run).layers; }, "run"_a = nb::none(),
          nb::sig("def layers(self, run: str | int | None = None) -> list[int]"), "Layers whose rows the run stores.")
      .def(
          "heads", [](const PyCapture& c, nb::handle run) { return c.run_of(run).heads; }, "run"_a = nb::none(),
          nb::sig("def heads(self, run: str | int | None = None) -> list[int]"), "Heads stored.")
      .def(
          "queries", [](const PyCapture& c, nb::handle run) { return c.run_of(run).queries; }, "run"_a = nb::none(),
          nb::sig("def queries(self, run: str | int | None = None) -> list[int]"), "Query positions stored.")
      .def(
          "probs",
          [](nb::handle self, nb::handle run, nb::handle layer, nb::handle head) {
            return nb::cast<const PyCapture&>(self).rows(self, run, layer, head, true);
          },
          "run"_a = nb::none(), "layer"_a = nb::none(), "head"_a = nb::none(),
          nb::sig("def probs(self, run: str | int | None = None, layer: int | None = None, head: int | None = None) "
                  "-> numpy.typing.NDArray[numpy.float32]"),
          "Attention probabilities of stored rows, float32, a view (no copy).\n\n"
          "layer and head are the model's indices and must be stored in the run. Shape [Qc, T] (query, key) for one "
          "layer and head; [Hc, Qc, T] with head=None; [Lc, Qc, T] with layer=None; [Lc, Hc, Qc, T] with neither. "
          "Row c is query position queries(run)[c]; keys beyond it are 0. fp16=True captures are saved as float16; in "
          "memory they are float32, already rounded to float16 values unless compare= was given (KL / JS use the "
          "fp32 rows, as in the CLI).")
      .def(
          "scores",
          [](nb::handle self, nb::handle run, nb::handle layer, nb::handle head) {
            return nb::cast<const PyCapture&>(self).rows(self, run, layer, head, false);
          },
          "run"_a = nb::none(), "layer"_a = nb::none(), "head"_a = nb::none(),
          nb::sig("def scores(self, run: str | int | None = None, layer: int | None = None, head: int | None = None) "
                  "-> numpy.typing.NDArray[numpy.float32]"),
          "Raw scores q.k / sqrt(d_head) before any temperature, float32, a view; shapes as probs(). "
          "probs = softmax(scores * row_scale) over the visible keys.")
      .def(
          "metrics",
          [](nb::handle self, nb::handle run) {
            const PyCapture& c = nb::cast<const PyCapture&>(self);
            const focal::RunCapture& r = c.run_of(run);
            return view(r.metrics.data(),
                        {(size_t)c.file.n_layers, (size_t)c.file.n_heads, (size_t)c.file.n_tokens(),
                         (size_t)focal::kNumRowMetrics},
                        self);
          },
          "run"_a = nb::none(),
          nb::sig("def metrics(self, run: str | int | None = None) -> numpy.typing.NDArray[numpy.float32]"),
          "Per-row metrics of every layer, head and row: float32 [n_layers, n_heads, T, 8] (layer, head, row, metric), "
          "a view. The metric axis follows metric_names: entropy_nats, entropy_norm, eff_support, max_prob, "
          "topk_mass, tail_mass, sink_mass, relevant_mass.")
      .def(
          "row_scale",
          [](nb::handle self, nb::handle run) {
            const PyCapture& c = nb::cast<const PyCapture&>(self);
            const focal::RunCapture& r = c.run_of(run);
            return view(r.row_scale.data(),
                        {(size_t)c.file.n_layers, (size_t)c.file.n_heads, (size_t)c.file.n_tokens()}, self);
          },
          "run"_a = nb::none(),
          nb::sig("def row_scale(self, run: str | int | None = None) -> numpy.typing.NDArray[numpy.float32]"),
          "Logit multiplier applied to the raw scores: float32 [n_layers, n_heads, T], a view.")
      .def(
          "tau",
          [](nb::handle self, nb::handle run) -> nb::object {
            const PyCapture& c = nb::cast<const PyCapture&>(self);
            const focal::RunCapture& r = c.run_of(run);
            if (r.tau.empty()) return nb::none();
            return nb::cast(view(r.tau.data(), {(size_t)c.file.n_layers, (size_t)c.file.n_tokens()}, self));
          },
          "run"_a = nb::none(),
          nb::sig("def tau(self, run: str | int | None = None) -> numpy.typing.NDArray[numpy.float32] | None"),
          "Learned tau used per row: float32 [n_layers, T], a view; None unless the run is learned.")
      .def(
          "topk",
          [](nb::handle self, nb::handle run) {
            const PyCapture& c = nb::cast<const PyCapture&>(self);
            const focal::RunCapture& r = c.run_of(run);
            const size_t T = (size_t)c.file.n_tokens(), k = T ? r.topk_ids.size() / T : 0;
            return nb::make_tuple(view(r.topk_ids.data(), {T, k}, self), view(r.topk_probs.data(), {T, k}, self));
          },
          "run"_a = nb::none(),
          nb::sig("def topk(self, run: str | int | None = None) -> tuple[numpy.typing.NDArray[numpy.int32], "
                  "numpy.typing.NDArray[numpy.float32]]"),
          "(ids, probs): the k most likely next tokens after each position, int32 [T, k] and float32 [T, k], most "
          "likely first; views.")
      .def(
          "topk_pieces",
          [](nb::handle self, nb::handle run) -> nb::object {
            const PyCapture& c = nb::cast<const PyCapture&>(self);
            const focal::RunCapture& r = c.run_of(run);
            const size_t T = (size_t)c.file.n_tokens(), k = T ? r.topk_ids.size() / T : 0;
            if (r.topk_pieces.empty() || r.topk_pieces.size() != T * k) return nb::none();
            nb::list rows;
            for (size_t t = 0; t < T; ++t) {
              nb::list row;
              for (size_t j = 0; j < k; ++j) row.append(nb::str(r.topk_pieces[t * k + j].c_str()));
              rows.append(row);
            }
            return rows;
          },
          "run"_a = nb::none(),
          nb::sig("def topk_pieces(self, run: str | int | None = None) -> list[list[str]] | None"),
          "The text of topk()'s ids as the capture stores it, [T][k], so that a capture shows its next tokens "
          "without its model; None when it stores none (a model without a tokenizer, or a file written before).")
      .def(
          "token_nll",
          [](nb::handle self, nb::handle run) {
            const PyCapture& c = nb::cast<const PyCapture&>(self);
            const focal::RunCapture& r = c.run_of(run);
            return view(r.token_nll.data(), {r.token_nll.size()}, self);
          },
          "run"_a = nb::none(),
          nb::sig("def token_nll(self, run: str | int | None = None) -> numpy.typing.NDArray[numpy.float32]"),
          "-ln p(token[i+1] | tokens[..i]) in nats, float32 [T]; NaN at the last position; a view.")
      .def(
          "prompt_loss",
          [](const PyCapture& c, nb::handle run) { return focal::prompt_loss(c.run_of(run), c.file.prompt_end()); },
          "run"_a = nb::none(), nb::sig("def prompt_loss(self, run: str | int | None = None) -> float"),
          "Mean next-token loss in nats over the prompt's own tokens 1..n_prompt_tokens-1 (token_nll over positions "
          "0..n_prompt_tokens-2), as `focal inspect` prints it; NaN when the prompt has one token.")
      .def(
          "generated_loss",
          [](const PyCapture& c, nb::handle run) {
            return focal::generated_loss(c.run_of(run), c.file.has_generated() ? c.file.prompt_end() : 0);
          },
          "run"_a = nb::none(), nb::sig("def generated_loss(self, run: str | int | None = None) -> float"),
          "Mean loss in nats of the generated tokens n_prompt_tokens..T-1 (token_nll over positions "
          "n_prompt_tokens-1..T-2); NaN when nothing was generated.")
      .def(
          "kl_js",
          [](const PyCapture& c, nb::handle a, nb::handle b) {
            const std::string an = c.run_of(a).name, bn = c.run_of(b).name;
            focal::Comparison cmp = comparison(c, an, bn);
            const std::vector<size_t> shape = {cmp.layers.size(), cmp.heads.size(), cmp.queries.size()};
            return nb::make_tuple(owned(std::move(cmp.kl), shape), owned(std::move(cmp.js), shape));
          },
          "a"_a = 0, "b"_a = 1,
          nb::sig("def kl_js(self, a: str | int = 0, b: str | int = 1) -> tuple[numpy.typing.NDArray[numpy.float32], "
                  "numpy.typing.NDArray[numpy.float32]]"),
          "(kl, js): KL(a || b) and the Jensen-Shannon divergence in nats per row, float32 [Lc, Hc, Qc] over the "
          "rows both runs store with probabilities (layers, heads, queries common to both, in run a's order). The "
          "comparison stored by run(compare=...) is returned as is.")
      .def("head_summary", &head_summary, "metric"_a = "entropy_nats", "runs"_a = nb::none(), "sort"_a = nb::none(),
           nb::sig("def head_summary(self, metric: str = 'entropy_nats', runs: str | int | "
                   "collections.abc.Sequence[str | int] | None = None, sort: str | None = None) -> "
                   "dict[str, numpy.typing.NDArray[typing.Any]]"),
           "A table of every (layer, head): the mean of `metric` over rows 1..T-1 in each run (NaN rows skipped; the "
           "number `focal inspect` prints per head), and with two runs their difference delta = b - a. Returns "
           "columns as a dict of 1-D numpy arrays (pandas.DataFrame(...) takes it): 'layer', 'head' (int32), one "
           "float64 column per run named by the run, and 'delta'.\n\n"
           "runs: None (every run), a run, or a sequence of runs (names or indices), e.g. runs=('standard', "
           "'focal_t0.4'). sort: None ((layer, head) order), 'abs_delta' (largest |delta| first: the heads that "
           "changed most), 'delta', or a run's name (its largest means first); NaN last.")
      .def(
          "save",
          [](PyCapture& c, const fs::path& p, std::optional<bool> fp16, std::optional<std::string> created) {
            if (created && !created->empty() && !focal::is_utc_timestamp(*created))  // "": now, as None
              raise(PyExc_ValueError, "created_utc: '" + *created +
                                          "' is not a UTC timestamp as the files record it: YYYY-MM-DDTHH:MM:SSZ, "
                                          "e.g. '2026-12-06T17:30:00Z' (or None: now)");
            const std::string saved = c.file.created_utc;
            if (created) c.file.created_utc = *created;
            try {
              nb::gil_scoped_release rel;
              focal::write_capture(c.file, path_str(p), fp16.value_or(c.probs_fp16));
            } catch (...) {
              c.file.created_utc = saved;
              throw;
            }
            c.file.created_utc = saved;
          },
          "path"_a, "fp16"_a = nb::none(), "created_utc"_a = nb::none(),
          "Writes the HDF5 capture file `focal capture` writes (docs/capture-format.md). fp16: store probabilities "
          "as float16 (default: as the capture was made, or as the opened file stored them). created_utc: fix the "
          "timestamp (default: the capture's own: when it was made, or the opened file's).")
      .def("_repr_html_", &capture_html)
      .def("__repr__", [](const PyCapture& c) {
        std::string runs;
        for (const auto& r : c.file.runs) runs += (runs.empty() ? "" : ", ") + r.name;
        return "<focalscope.Capture " + std::to_string(c.file.n_tokens()) + " tokens, " +
               std::to_string(c.file.n_layers) + "x" + std::to_string(c.file.n_heads) + ", runs: " + runs + ">";
      });

  mod.def(
      "open_capture",
      [](const fs::path& p) {
        const std::string path = path_str(p);
        if (!fs::exists(p)) raise(PyExc_FileNotFoundError, "open_capture: no such file: '" + path + "'");
        PyCapture c;
        {
          nb::gil_scoped_release rel;
          c.file = focal::read_capture(path);
        }
        c.probs_fp16 = c.file.probs_fp16;  // save() keeps the file's float16 probabilities
        return c;
      },
      "path"_a, "Reads a capture file (from focal capture, focal generate --capture, the app or Capture.save).");
}

}  // namespace focalscope::py
