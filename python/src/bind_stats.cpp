// focalscope.Stats and open_stats: a stats file of `focal batch` (docs/batch.md) as numpy arrays — per run x layer x
// head x metric moments, histograms and position profiles, the per-document rows and the kept attention rows.
#include <cmath>
#include <limits>

#include "focal/error.h"
#include "py_bindings.h"
#include "py_convert.h"
#include "py_objects.h"

namespace focalscope::py {

using namespace nb::literals;

namespace {

// [R, L, H, M] of the file's shape, plus `extra` trailing axes.
std::vector<size_t> cells(const PyStats& s, std::vector<size_t> extra = {}) {
  const focal::batch::StatsShape& sh = s.file.stats.shape;
  std::vector<size_t> v = {(size_t)sh.n_runs, (size_t)sh.n_layers, (size_t)sh.n_heads, (size_t)sh.n_metrics};
  v.insert(v.end(), extra.begin(), extra.end());
  return v;
}

// One field of every cell's Moments, as a new float64 array [R, L, H, M].
template <class F>
Array<double> moments_array(const PyStats& s, F field) {
  std::vector<double> v;
  v.reserve(s.file.stats.moments.size());
  for (const focal::batch::Moments& m : s.file.stats.moments) v.push_back(field(m));
  return owned(std::move(v), cells(s));
}

const PyStats& stats_of(nb::handle self) { return nb::cast<const PyStats&>(self); }

void need_docs(const PyStats& s, const char* what) {
  if (!s.with_docs)  // AttributeError: hasattr(stats, "doc_ids") is False, not an exception
    raise(PyExc_AttributeError, std::string(what) +
                                    ": the file was opened with docs=False; open it with "
                                    "open_stats(path) to read the per-document datasets");
}

}  // namespace

void bind_stats(nb::module_& mod) {
  using focal::batch::Moments;
  nb::class_<PyStats>(
      mod, "Stats",
      "A stats file of `focal batch` (docs/batch.md): per run x layer x head x metric the row count, mean, variance, "
      "min, max, a fixed-bin histogram and sums by log-spaced context position, over every document and every "
      "row >= 1; the per-document means and the kept attention rows. Made by open_stats. Arrays are float64 "
      "[R, L, H, M] (run, layer, head, metric) unless said otherwise; run_names and metric_names label the axes.")
      .def_prop_ro(
          "run_names", [](const PyStats& s) { return s.file.run_names; }, "The run axis: run names, e.g. 'standard'.")
      .def_prop_ro(
          "run_specs",
          [](const PyStats& s) {
            std::vector<focal::TempSpec> v;
            for (const std::string& j : s.file.run_specs_json) v.push_back(focal::TempSpec::from_json(j, "run_specs"));
            return v;
          },
          nb::sig("def run_specs(self) -> list[TempSpec]"), "The temperature setting of each run.")
      .def_prop_ro(
          "metric_names", [](const PyStats& s) { return s.file.metric_names; }, "The metric axis, in order.")
      .def_prop_ro("n_layers", [](const PyStats& s) { return s.file.stats.shape.n_layers; })
      .def_prop_ro("n_heads", [](const PyStats& s) { return s.file.stats.shape.n_heads; })
      .def_prop_ro(
          "n_bins", [](const PyStats& s) { return s.file.stats.shape.n_bins; }, "Histogram bins per metric.")
      .def_prop_ro(
          "max_tokens", [](const PyStats& s) { return s.file.stats.shape.max_tokens; },
          "--max-tokens: positions 0..max_tokens-1.")
      .def_prop_ro(
          "n_docs", [](const PyStats& s) { return s.file.stats.n_docs; }, "Documents counted.")
      .def_prop_ro(
          "n_tokens", [](const PyStats& s) { return s.file.stats.n_tokens; }, "Tokens run (per run).")
      .def_prop_ro(
          "n_skipped", [](const PyStats& s) { return s.file.stats.n_skipped; }, "Documents skipped (empty).")
      .def_prop_ro(
          "data_path", [](const PyStats& s) { return s.file.data_path; }, "The corpus as given to --data.")
      .def_prop_ro(
          "long", [](const PyStats& s) { return std::string(s.file.window ? "window" : "cut"); },
          "--long: 'cut' (each document's first max_tokens tokens) or 'window'.")
      .def_prop_ro(
          "n_ranks", [](const PyStats& s) { return s.file.n_ranks; }, "MPI ranks that wrote it.")
      .def_prop_ro("model_path", [](const PyStats& s) { return s.file.provenance.model_path; })
      .def_prop_ro("weights_checksum", [](const PyStats& s) { return s.file.provenance.weights_checksum; })
      .def_prop_ro("tool_version", [](const PyStats& s) { return s.file.provenance.tool_version; })
      .def_prop_ro("created_utc", [](const PyStats& s) { return s.file.provenance.created_utc; })
      .def_prop_ro(
          "device", [](const PyStats& s) { return s.file.provenance.device; },
          "Where the forwards ran: 'cpu' or 'cuda' ('' in files written before it was recorded).")
      .def_prop_ro(
          "precision", [](const PyStats& s) { return s.file.provenance.precision; },
          "How the forwards computed: 'exact' or 'fast' ('' in files written before it was recorded).")
      .def_prop_ro(
          "tokenizer", [](const PyStats& s) { return s.file.provenance.tokenizer; },
          "The tokenizer the documents were tokenized with, e.g. 'tokenizer.model (sentencepiece)' ('' in files "
          "written before it was recorded).")
      .def_prop_ro(
          "warnings", [](const PyStats& s) { return s.file.provenance.warnings; },
          "What the batch went on despite (a rope_scaling override, ...), one sentence a line; '' when nothing.")
      .def_prop_ro(
          "count", [](const PyStats& s) { return moments_array(s, [](const Moments& m) { return m.n; }); },
          nb::rv_policy::move, nb::sig("def count(self) -> numpy.typing.NDArray[numpy.float64]"),
          "Rows counted per cell, float64 [R, L, H, M] (rows >= 1 with a value).")
      .def_prop_ro(
          "mean", [](const PyStats& s) { return moments_array(s, [](const Moments& m) { return m.mean_or_nan(); }); },
          nb::rv_policy::move, nb::sig("def mean(self) -> numpy.typing.NDArray[numpy.float64]"),
          "Mean of each metric over the rows counted, float64 [R, L, H, M] (NaN where count is 0, as in the file).")
      .def_prop_ro(
          "variance",
          [](const PyStats& s) { return moments_array(s, [](const Moments& m) { return m.variance_or_nan(); }); },
          nb::rv_policy::move, nb::sig("def variance(self) -> numpy.typing.NDArray[numpy.float64]"),
          "Sample variance (M2 / (count - 1); NaN below two rows, as in the file), float64 [R, L, H, M].")
      .def_prop_ro(
          "min",
          [](nb::handle self) { return view(stats_of(self).file.stats.min.data(), cells(stats_of(self)), self); },
          nb::sig("def min(self) -> numpy.typing.NDArray[numpy.float64]"),
          "Smallest value per cell, float64 [R, L, H, M] (+inf where empty), a view.")
      .def_prop_ro(
          "max",
          [](nb::handle self) { return view(stats_of(self).file.stats.max.data(), cells(stats_of(self)), self); },
          nb::sig("def max(self) -> numpy.typing.NDArray[numpy.float64]"),
          "Largest value per cell, float64 [R, L, H, M] (-inf where empty), a view.")
      .def_prop_ro(
          "hist",
          [](nb::handle self) {
            const PyStats& s = stats_of(self);
            return view(s.file.stats.hist.data(), cells(s, {(size_t)s.file.stats.shape.n_bins}), self);
          },
          nb::sig("def hist(self) -> numpy.typing.NDArray[numpy.uint64]"),
          "Row counts per histogram bin, uint64 [R, L, H, M, n_bins], a view; bins by hist_edges (values outside "
          "the range are counted in the first or last bin).")
      .def_prop_ro(
          "hist_edges",
          [](const PyStats& s) {
            const size_t M = s.file.hist_edges.size(), B = (size_t)s.file.stats.shape.n_bins + 1;
            std::vector<double> v;
            v.reserve(M * B);
            for (const std::vector<double>& e : s.file.hist_edges) v.insert(v.end(), e.begin(), e.end());
            return owned(std::move(v), {M, B});
          },
          nb::rv_policy::move, nb::sig("def hist_edges(self) -> numpy.typing.NDArray[numpy.float64]"),
          "Bin edges of each metric's histogram, float64 [M, n_bins + 1].")
      .def_prop_ro(
          "pos_edges",
          [](nb::handle self) {
            const PyStats& s = stats_of(self);
            return view(s.file.pos_edges.data(), {s.file.pos_edges.size()}, self);
          },
          nb::sig("def pos_edges(self) -> numpy.typing.NDArray[numpy.int32]"),
          "Context-position buckets, int32 [P + 1]: bucket b holds positions pos_edges[b] .. pos_edges[b+1]-1.")
      .def_prop_ro(
          "pos_count",
          [](nb::handle self) {
            const PyStats& s = stats_of(self);
            return view(s.file.stats.pos_count.data(), cells(s, {(size_t)s.file.stats.shape.n_buckets()}), self);
          },
          nb::sig("def pos_count(self) -> numpy.typing.NDArray[numpy.uint64]"),
          "Rows per position bucket, uint64 [R, L, H, M, P], a view.")
      .def_prop_ro(
          "pos_mean",
          [](const PyStats& s) {
            const std::vector<double>& sum = s.file.stats.pos_sum;
            const std::vector<uint64_t>& n = s.file.stats.pos_count;
            std::vector<double> v(sum.size());
            for (size_t i = 0; i < v.size(); ++i)
              v[i] = n[i] ? sum[i] / (double)n[i] : std::numeric_limits<double>::quiet_NaN();
            return owned(std::move(v), cells(s, {(size_t)s.file.stats.shape.n_buckets()}));
          },
          nb::rv_policy::move, nb::sig("def pos_mean(self) -> numpy.typing.NDArray[numpy.float64]"),
          "The metric's mean per position bucket (the position profile), float64 [R, L, H, M, P]; NaN where a "
          "bucket has no rows.")
      .def_prop_ro(
          "doc_ids",
          [](const PyStats& s) {
            need_docs(s, "doc_ids");
            return s.file.doc_id;
          },
          "Each document's id, in corpus order [D] (the line or block number when the corpus names none).")
      .def_prop_ro(
          "doc_n_tokens",
          [](nb::handle self) {
            const PyStats& s = stats_of(self);
            need_docs(s, "doc_n_tokens");
            return view(s.file.doc_n_tokens.data(), {s.file.doc_n_tokens.size()}, self);
          },
          nb::sig("def doc_n_tokens(self) -> numpy.typing.NDArray[numpy.int32]"),
          "Tokens run per document, int32 [D] (after the cut), a view.")
      .def_prop_ro(
          "doc_n_tokens_total",
          [](nb::handle self) {
            const PyStats& s = stats_of(self);
            need_docs(s, "doc_n_tokens_total");
            return view(s.file.doc_n_tokens_total.data(), {s.file.doc_n_tokens_total.size()}, self);
          },
          nb::sig("def doc_n_tokens_total(self) -> numpy.typing.NDArray[numpy.int32]"),
          "Each document's tokens before the cut, int32 [D] (equal to doc_n_tokens where nothing was cut), a view.")
      .def_prop_ro(
          "doc_n_windows",
          [](nb::handle self) {
            const PyStats& s = stats_of(self);
            need_docs(s, "doc_n_windows");
            return view(s.file.doc_n_windows.data(), {s.file.doc_n_windows.size()}, self);
          },
          nb::sig("def doc_n_windows(self) -> numpy.typing.NDArray[numpy.int32]"),
          "Forwards run per document, int32 [D]: 1 under --long cut, the windows under --long window.")
      .def_prop_ro(
          "doc_head_means",
          [](nb::handle self) {
            const PyStats& s = stats_of(self);
            need_docs(s, "doc_head_means");
            std::vector<size_t> shape = cells(s);
            shape.insert(shape.begin(), s.file.n_docs());
            return view(s.file.doc_head_means.data(), shape, self);
          },
          nb::sig("def doc_head_means(self) -> numpy.typing.NDArray[numpy.float32]"),
          "Each document's mean per cell, float32 [D, R, L, H, M] (NaN where a document had no row), a view.")
      .def(
          "kept_rows",
          [](const PyStats& s) {
            need_docs(s, "kept_rows");
            const std::vector<focal::batch::KeptRow>& rows = s.file.kept_rows;
            const size_t K = rows.size(), R = (size_t)s.file.stats.shape.n_runs;
            const size_t N = (size_t)s.file.stats.shape.max_tokens;
            std::vector<int64_t> where;
            std::vector<float> probs;
            where.reserve(K * 5);
            probs.reserve(K * R * N);
            for (const focal::batch::KeptRow& r : rows) {
              for (int64_t v : {r.doc, (int64_t)r.window, (int64_t)r.layer, (int64_t)r.head, (int64_t)r.row})
                where.push_back(v);
              if (r.probs.size() != R * N) throw focal::Error("kept_rows: a kept row has the wrong length");
              probs.insert(probs.end(), r.probs.begin(), r.probs.end());
            }
            return nb::make_tuple(owned(std::move(where), {K, 5}), owned(std::move(probs), {K, R, N}));
          },
          nb::sig("def kept_rows(self) -> tuple[numpy.typing.NDArray[numpy.int64], "
                  "numpy.typing.NDArray[numpy.float32]]"),
          "The attention rows kept by --keep-rows: (where, probs) with where int64 [K, 5] (document, window, layer, "
          "head, row) and probs float32 [K, R, max_tokens] (keys after the row are 0); copies.")
      .def("__repr__", [](const PyStats& s) {
        std::string runs;
        for (const std::string& r : s.file.run_names) runs += (runs.empty() ? "" : ", ") + r;
        return "<focalscope.Stats " + std::to_string(s.file.stats.n_docs) + " documents, " +
               std::to_string(s.file.stats.shape.n_layers) + "x" + std::to_string(s.file.stats.shape.n_heads) +
               ", runs: " + runs + ">";
      });

  mod.def(
      "open_stats",
      [](const fs::path& p, bool docs) {
        const std::string path = path_str(p);
        if (!fs::exists(p)) raise(PyExc_FileNotFoundError, "open_stats: no such file: '" + path + "'");
        PyStats s;
        s.with_docs = docs;
        {
          nb::gil_scoped_release rel;
          s.file = focal::batch::read_stats(path, docs);
        }
        return s;
      },
      "path"_a, "docs"_a = true,
      "Reads a stats file of `focal batch` (docs/batch.md). docs=False skips the per-document datasets and kept "
      "rows (they need an MPI run's shard files beside it).");
}

}  // namespace focalscope::py
