// Capture and sweep files (layout: docs/capture-format.md) over the HDF5 layer of h5_io.h, and CaptureFile::find_run.
// Training logs and evaluation files are in train_eval_h5.cpp.

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "focal/capture.h"
#include "focal/atomic_file.h"
#include "focal/error.h"
#include "h5_io.h"

namespace focal {

const RunCapture* CaptureFile::find_run(const std::string& name) const {
  for (const RunCapture& run : runs)
    if (run.name == name) return &run;
  return nullptr;
}

namespace {

using namespace h5;  // NOLINT(google-build-using-namespace): the HDF5 layer is this file's vocabulary

// Shape strings stored in each dataset's "shape" attribute.
constexpr const char* kShapePosition = "[position]";
constexpr const char* kShapeRelevant = "[relevant_key]";
constexpr const char* kShapeLayer = "[layer]";
constexpr const char* kShapeHead = "[head]";
constexpr const char* kShapeQuery = "[query]";
constexpr const char* kShapeRows = "[layer, head, query, key]";
constexpr const char* kShapeMetrics = "[layer, head, row, metric]";
constexpr const char* kShapeRowScale = "[layer, head, row]";
constexpr const char* kShapeTau = "[layer, row]";
constexpr const char* kShapeTopk = "[position, rank]";
constexpr const char* kShapeTopkFlat = "[position * rank]";  // string datasets are 1-D: [position, rank] row-major
constexpr const char* kShapeCompare = "[layer, head, query]";
constexpr const char* kShapeTemp = "[temp]";
constexpr const char* kShapeHeadMetrics = "[temp, layer, head, metric]";

// ---------------------------------------------------------------------------------------------------------------
// Validation shared by the writers (before any file is touched) and the readers (after everything is read).

bool valid_link_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

void check_values(const Where& where, const std::string& item, size_t n_values, const Dims& dims, const char* axes) {
  if (n_values != n_elements(dims))
    where.fail(item + " has " + std::to_string(n_values) + " values, expected " + axes + " " + dims_text(dims) + " = " +
               std::to_string(n_elements(dims)));
}

void check_indices(const Where& where, const std::string& item, const std::vector<int>& v, int limit,
                   const char* limit_name) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] < 0 || v[i] >= limit)
      where.fail(item + "[" + std::to_string(i) + "] = " + std::to_string(v[i]) + " is outside 0.." + limit_name +
                 "-1 (" + limit_name + " = " + std::to_string(limit) + ")");
}

Dims rows_dims(const std::vector<int>& layers, const std::vector<int>& heads, const std::vector<int>& queries,
               int n_tokens) {
  return {hsize_t(layers.size()), hsize_t(heads.size()), hsize_t(queries.size()), hsize_t(n_tokens)};
}

Dims compare_dims(const Comparison& c) {
  return {hsize_t(c.layers.size()), hsize_t(c.heads.size()), hsize_t(c.queries.size())};
}

// k of the stored next-token top-k: topk_ids is [T, k].
int topk_width(const RunCapture& run, int n_tokens) {
  return n_tokens > 0 ? int(run.topk_ids.size() / size_t(n_tokens)) : 0;
}

void check_run(const Where& where, const RunCapture& run, int n_layers, int n_heads, int n_tokens) {
  const std::string r = "run '" + run.name + "': ";
  if (!valid_link_name(run.name))
    where.fail("run name '" + run.name + "' is not usable as an HDF5 group name (empty, '.', or contains '/')");
  check_indices(where, r + "layers", run.layers, n_layers, "n_layers");
  check_indices(where, r + "heads", run.heads, n_heads, "n_heads");
  check_indices(where, r + "queries", run.queries, n_tokens, "n_tokens");
  const Dims rd = rows_dims(run.layers, run.heads, run.queries, n_tokens);
  if (!run.probs.empty()) check_values(where, r + "probs", run.probs.size(), rd, "[layers, heads, queries, tokens]");
  if (!run.scores.empty()) check_values(where, r + "scores", run.scores.size(), rd, "[layers, heads, queries, tokens]");
  const hsize_t L = hsize_t(n_layers), H = hsize_t(n_heads), T = hsize_t(n_tokens);
  check_values(where, r + "metrics", run.metrics.size(), {L, H, T, hsize_t(kNumRowMetrics)},
               "[n_layers, n_heads, tokens, metrics]");
  check_values(where, r + "row_scale", run.row_scale.size(), {L, H, T}, "[n_layers, n_heads, tokens]");
  if (!run.tau.empty()) check_values(where, r + "tau", run.tau.size(), {L, T}, "[n_layers, tokens]");
  if (n_tokens > 0 && run.topk_ids.size() % size_t(n_tokens) != 0)
    where.fail(r + "topk_ids has " + std::to_string(run.topk_ids.size()) + " values, not a multiple of " +
               std::to_string(n_tokens) + " tokens ([tokens, k])");
  const hsize_t k = hsize_t(topk_width(run, n_tokens));
  check_values(where, r + "topk_ids", run.topk_ids.size(), {T, k}, "[tokens, k]");
  check_values(where, r + "topk_probs", run.topk_probs.size(), {T, k}, "[tokens, k]");
  if (!run.topk_pieces.empty() && run.topk_pieces.size() != run.topk_ids.size())
    where.fail(r + "topk_pieces has " + std::to_string(run.topk_pieces.size()) + " entries, expected 0 or one per " +
               "topk_ids value (" + std::to_string(run.topk_ids.size()) + ")");
  check_values(where, r + "token_nll", run.token_nll.size(), {T}, "[tokens]");
}

void check_comparison(const Where& where, const Comparison& c, int n_layers, int n_heads, int n_tokens) {
  const std::string r = "comparison '" + c.run_a + "' vs '" + c.run_b + "': ";
  if (!valid_link_name(c.run_a) || !valid_link_name(c.run_b))
    where.fail(r + "run names must be non-empty and contain no '/'");
  check_indices(where, r + "layers", c.layers, n_layers, "n_layers");
  check_indices(where, r + "heads", c.heads, n_heads, "n_heads");
  check_indices(where, r + "queries", c.queries, n_tokens, "n_tokens");
  check_values(where, r + "kl", c.kl.size(), compare_dims(c), "[layers, heads, queries]");
  check_values(where, r + "js", c.js.size(), compare_dims(c), "[layers, heads, queries]");
}

std::string compare_group_name(const Comparison& c) { return c.run_a + "__vs__" + c.run_b; }

void check_capture(const Where& where, const CaptureFile& file) {
  if (file.n_layers < 0 || file.n_heads < 0 || file.d_head < 0)
    where.fail("n_layers, n_heads and d_head must not be negative");
  const int T = file.n_tokens();
  if (!file.pieces.empty() && int(file.pieces.size()) != T)
    where.fail("pieces has " + std::to_string(file.pieces.size()) + " entries, expected 0 or one per token (" +
               std::to_string(T) + ")");
  for (size_t i = 0; i < file.relevant.size(); ++i)
    if (file.relevant[i] < 0 || file.relevant[i] >= T)
      where.fail("relevant[" + std::to_string(i) + "] = " + std::to_string(file.relevant[i]) +
                 " is outside 0..n_tokens-1 (n_tokens = " + std::to_string(T) + ")");
  if (file.n_prompt_tokens < 0 || file.n_prompt_tokens > T)
    where.fail("n_prompt_tokens = " + std::to_string(file.n_prompt_tokens) +
               " is outside 0..n_tokens (n_tokens = " + std::to_string(T) + ")");
  std::set<std::string> names;
  for (const RunCapture& run : file.runs) {
    check_run(where, run, file.n_layers, file.n_heads, T);
    if (!names.insert(run.name).second) where.fail("two runs are named '" + run.name + "'");
  }
  std::set<std::string> pairs;
  for (const Comparison& c : file.comparisons) {
    check_comparison(where, c, file.n_layers, file.n_heads, T);
    if (!pairs.insert(compare_group_name(c)).second)
      where.fail("comparison '" + c.run_a + "' vs '" + c.run_b + "' appears twice");
  }
}

void check_sweep(const Where& where, const SweepFile& file) {
  if (file.n_layers < 0 || file.n_heads < 0) where.fail("n_layers and n_heads must not be negative");
  const hsize_t S = hsize_t(file.focal_temps.size());
  check_values(where, "head_metrics", file.head_metrics.size(),
               {S, hsize_t(file.n_layers), hsize_t(file.n_heads), hsize_t(kNumRowMetrics)},
               "[temps, n_layers, n_heads, metrics]");
  check_values(where, "mean_nll", file.mean_nll.size(), {S}, "[temps]");
  for (int32_t k : file.relevant)
    if (k < 0 || (size_t)k >= file.token_ids.size())
      where.fail("relevant key " + std::to_string(k) + " is outside the prompt's " +
                 std::to_string(file.token_ids.size()) + " positions");
}

std::vector<std::string> metric_names() {
  std::vector<std::string> names;
  names.reserve(kNumRowMetrics);
  for (int m = 0; m < kNumRowMetrics; ++m) names.push_back(row_metric_name(m));
  return names;
}

// Chunk of a [Lc, Hc, Qc, T] row dataset: one (layer, head), up to 64 queries, about 1 MiB of float32 at most.
Dims rows_chunk(const Dims& dims) {
  const hsize_t T = std::max<hsize_t>(1, dims[3]);
  const hsize_t q = std::max<hsize_t>(1, std::min<hsize_t>(64, (hsize_t(1) << 20) / (T * 4)));
  return {1, 1, q, dims[3]};
}

// Chunk of a [L, H, T, M] metrics dataset: one layer, as many heads as fit in about 256 KiB.
Dims metrics_chunk(const Dims& dims) {
  const hsize_t per_head = std::max<hsize_t>(1, dims[2] * dims[3] * 4);
  const hsize_t h = std::max<hsize_t>(1, (hsize_t(256) << 10) / per_head);
  return {1, h, dims[2], dims[3]};
}

// The capture / sweep root header: provenance (with the checksum in hex), and the metric names the metrics axis
// uses.
void write_header(Writer& w, hid_t root, const char* format, int version, const Provenance& p) {
  write_root_header(w, root, format, version, p, true);
  w.attr_strings(root, "/", "metric_names", metric_names());
}

void write_run(Writer& w, hid_t runs, const CaptureFile& file, const RunCapture& run, bool probs_fp16) {
  const std::string path = "/runs/" + run.name;
  GroupId g = w.group(runs, run.name, path, false);
  const hsize_t L = hsize_t(file.n_layers), H = hsize_t(file.n_heads), T = hsize_t(file.n_tokens());
  w.attr_string(g.get(), path, "temp_spec_json", run.temp_spec_json);
  w.attr_i32(g.get(), path, "topk_mass_k", run.topk_mass_k);
  if (!run.model_path.empty()) {  // a run of another model than the file's
    w.attr_string(g.get(), path, "model_path", run.model_path);
    w.attr_u64(g.get(), path, "weights_checksum", run.weights_checksum);
  }
  w.dataset_i32(g.get(), path, "layers", run.layers, kShapeLayer);
  w.dataset_i32(g.get(), path, "heads", run.heads, kShapeHead);
  w.dataset_i32(g.get(), path, "queries", run.queries, kShapeQuery);
  const Dims rd = rows_dims(run.layers, run.heads, run.queries, file.n_tokens());
  if (!run.probs.empty() && probs_fp16) {
    w.dataset_f16(g.get(), path, "probs", rd, run.probs.data(), kShapeRows, rows_chunk(rd));
  } else if (!run.probs.empty()) {
    w.dataset_f32(g.get(), path, "probs", rd, run.probs.data(), kShapeRows, rows_chunk(rd));
  }
  if (!run.scores.empty()) w.dataset_f32(g.get(), path, "scores", rd, run.scores.data(), kShapeRows, rows_chunk(rd));
  const Dims md = {L, H, T, hsize_t(kNumRowMetrics)};
  w.dataset_f32(g.get(), path, "metrics", md, run.metrics.data(), kShapeMetrics, metrics_chunk(md));
  w.dataset_f32(g.get(), path, "row_scale", {L, H, T}, run.row_scale.data(), kShapeRowScale);
  if (!run.tau.empty()) w.dataset_f32(g.get(), path, "tau", {L, T}, run.tau.data(), kShapeTau);
  const hsize_t k = hsize_t(topk_width(run, file.n_tokens()));
  w.dataset_i32(g.get(), path, "topk_ids", {T, k}, run.topk_ids.data(), kShapeTopk);
  w.dataset_f32(g.get(), path, "topk_probs", {T, k}, run.topk_probs.data(), kShapeTopk);
  if (!run.topk_pieces.empty()) w.dataset_strings(g.get(), path, "topk_pieces", run.topk_pieces, kShapeTopkFlat);
  w.dataset_f32(g.get(), path, "token_nll", {T}, run.token_nll.data(), kShapePosition);
}

void write_comparison(Writer& w, hid_t compare, const Comparison& c) {
  const std::string name = compare_group_name(c), path = "/compare/" + name;
  GroupId g = w.group(compare, name, path, false);
  w.attr_string(g.get(), path, "run_a", c.run_a);
  w.attr_string(g.get(), path, "run_b", c.run_b);
  w.dataset_i32(g.get(), path, "layers", c.layers, kShapeLayer);
  w.dataset_i32(g.get(), path, "heads", c.heads, kShapeHead);
  w.dataset_i32(g.get(), path, "queries", c.queries, kShapeQuery);
  w.dataset_f32(g.get(), path, "kl", compare_dims(c), c.kl.data(), kShapeCompare);
  w.dataset_f32(g.get(), path, "js", compare_dims(c), c.js.data(), kShapeCompare);
}

void check_metric_names(Reader& r, hid_t root) {
  const std::vector<std::string> got = r.attr_strings(root, "/", "metric_names");
  const std::vector<std::string> want = metric_names();
  if (got != want) {
    std::string g, w;
    for (const std::string& s : got) g += (g.empty() ? "" : ", ") + s;
    for (const std::string& s : want) w += (w.empty() ? "" : ", ") + s;
    r.where().fail("metric_names [" + g + "] differ from this focalscope's [" + w + "]");
  }
}

RunCapture read_run(Reader& r, hid_t runs, const std::string& name, const CaptureFile& file, bool& probs_fp16) {
  const std::string path = "/runs/" + name;
  GroupId g = r.group(runs, name, path);
  RunCapture run;
  run.name = name;
  run.temp_spec_json = r.attr_string(g.get(), path, "temp_spec_json");
  if (r.has_attr(g.get(), "model_path")) {
    run.model_path = r.attr_string(g.get(), path, "model_path");
    run.weights_checksum = r.attr_u64(g.get(), path, "weights_checksum");
  }
  run.topk_mass_k = r.attr_int_in(g.get(), path, "topk_mass_k", 0, std::numeric_limits<int>::max());
  const int n_tokens = file.n_tokens();
  run.layers = r.read_index(g.get(), path, "layers", hsize_t(file.n_layers), "n_layers");
  run.heads = r.read_index(g.get(), path, "heads", hsize_t(file.n_heads), "n_heads");
  run.queries = r.read_index(g.get(), path, "queries", hsize_t(n_tokens), "the token count");
  const Dims rd = rows_dims(run.layers, run.heads, run.queries, n_tokens);
  const char* rows_axes = "[layers, heads, queries, tokens]";
  if (r.has(g.get(), "probs")) {
    Array<float> a = r.read_f32(g.get(), path, "probs", 4, &rd, rows_axes);
    run.probs = std::move(a.data);
    if (a.stored_f16) probs_fp16 = true;
  }
  if (r.has(g.get(), "scores")) {
    Array<float> a = r.read_f32(g.get(), path, "scores", 4, &rd, rows_axes);
    run.scores = std::move(a.data);
  }
  const hsize_t L = hsize_t(file.n_layers), H = hsize_t(file.n_heads), T = hsize_t(n_tokens);
  const Dims md = {L, H, T, hsize_t(kNumRowMetrics)}, rsd = {L, H, T}, td = {L, T}, tokd = {T};
  Array<float> metrics = r.read_f32(g.get(), path, "metrics", 4, &md, "[n_layers, n_heads, tokens, metrics]");
  run.metrics = std::move(metrics.data);
  Array<float> row_scale = r.read_f32(g.get(), path, "row_scale", 3, &rsd, "[n_layers, n_heads, tokens]");
  run.row_scale = std::move(row_scale.data);
  if (r.has(g.get(), "tau")) {
    Array<float> tau = r.read_f32(g.get(), path, "tau", 2, &td, "[n_layers, tokens]");
    run.tau = std::move(tau.data);
  }
  // k is the file's own choice, at most the vocabulary (bounded here by what the file stores and the budget).
  const Dims topd = {T, Reader::kAnyDim};
  Array<int32_t> topk_ids = r.read_i32(g.get(), path, "topk_ids", 2, &topd, "[tokens, k]");
  const hsize_t k = topk_ids.dims[1];
  const Dims topkd = {T, k};
  run.topk_ids = std::move(topk_ids.data);
  Array<float> topk_probs = r.read_f32(g.get(), path, "topk_probs", 2, &topkd, "[tokens, k]");
  run.topk_probs = std::move(topk_probs.data);
  // Absent in files written before the top-k text was stored (and when the model had no tokenizer).
  if (r.has(g.get(), "topk_pieces")) {
    const Dims pd = r.shape_of(g.get(), path, "topk_pieces");  // checked before its strings are read
    if (pd.size() != 1 || pd[0] != T * k)
      r.where().fail(path + "/topk_pieces should hold one string per topk_ids value (" + std::to_string(T * k) + ")");
    run.topk_pieces = r.read_string_dataset(g.get(), path, "topk_pieces");
  }
  Array<float> nll = r.read_f32(g.get(), path, "token_nll", 1, &tokd, "[tokens]");
  run.token_nll = std::move(nll.data);
  check_run(r.where(), run, file.n_layers, file.n_heads, n_tokens);
  return run;
}

Comparison read_comparison(Reader& r, hid_t compare, const std::string& name, const CaptureFile& file) {
  const std::string path = "/compare/" + name;
  GroupId g = r.group(compare, name, path);
  Comparison c;
  c.run_a = r.attr_string(g.get(), path, "run_a");
  c.run_b = r.attr_string(g.get(), path, "run_b");
  c.layers = r.read_index(g.get(), path, "layers", hsize_t(file.n_layers), "n_layers");
  c.heads = r.read_index(g.get(), path, "heads", hsize_t(file.n_heads), "n_heads");
  c.queries = r.read_index(g.get(), path, "queries", hsize_t(file.n_tokens()), "the token count");
  const Dims cd = compare_dims(c);
  Array<float> kl = r.read_f32(g.get(), path, "kl", 3, &cd, "[layers, heads, queries]");
  c.kl = std::move(kl.data);
  Array<float> js = r.read_f32(g.get(), path, "js", 3, &cd, "[layers, heads, queries]");
  c.js = std::move(js.data);
  check_comparison(r.where(), c, file.n_layers, file.n_heads, file.n_tokens());
  return c;
}

}  // namespace

void write_capture(const CaptureFile& file, const std::string& path, bool probs_fp16,
                   const std::function<void(int, int)>& progress) {
  check_capture(Where{"cannot write capture file '" + path + "'"}, file);
  require_not_model_file(path, file.model_path, "capture file");
  for (const RunCapture& r : file.runs) require_not_model_file(path, r.model_path, "capture file");
  H5Call h5;
  write_atomically(path, "capture", [&](hid_t root, Writer& w) {
    write_header(w, root, CaptureFile::kFormatName, CaptureFile::kFormatVersion, file);
    w.attr_i32(root, "/", "n_layers", file.n_layers);
    w.attr_i32(root, "/", "n_heads", file.n_heads);
    w.attr_i32(root, "/", "d_head", file.d_head);
    if (file.n_prompt_tokens > 0) w.attr_i32(root, "/", "n_prompt_tokens", file.n_prompt_tokens);

    const hsize_t T = hsize_t(file.n_tokens());
    GroupId tokens = w.group(root, "tokens", "/tokens", false);
    w.dataset_i32(tokens.get(), "/tokens", "ids", {T}, file.token_ids.data(), kShapePosition);
    w.dataset_strings(tokens.get(), "/tokens", "pieces", file.pieces, kShapePosition);
    w.dataset_i32(tokens.get(), "/tokens", "relevant", {hsize_t(file.relevant.size())}, file.relevant.data(),
                  kShapeRelevant);

    const int total = (int)(file.runs.size() + file.comparisons.size());
    int done = 0;
    GroupId runs = w.group(root, "runs", "/runs", true);
    for (const RunCapture& run : file.runs) {
      write_run(w, runs.get(), file, run, probs_fp16);
      if (progress) progress(++done, total);
    }
    GroupId compare = w.group(root, "compare", "/compare", true);
    for (const Comparison& c : file.comparisons) {
      write_comparison(w, compare.get(), c);
      if (progress) progress(++done, total);
    }
  });
}

CaptureFile read_capture(const std::string& path, uint64_t read_budget_bytes) {
  FileReader in(path, "capture", "capture file '" + path + "'", CaptureFile::kFormatName, CaptureFile::kFormatVersion,
                SweepFile::kFormatName, "it is a temperature sweep; open it as a sweep", read_budget_bytes);
  Reader& r = in.reader();
  check_metric_names(r, in.root());

  CaptureFile file;
  static_cast<Provenance&>(file) = read_provenance(r, in.root(), true);
  const int kMax = std::numeric_limits<int>::max();
  file.n_layers = r.attr_int_in(in.root(), "/", "n_layers", 0, kMax);
  file.n_heads = r.attr_int_in(in.root(), "/", "n_heads", 0, kMax);
  file.d_head = r.attr_int_in(in.root(), "/", "d_head", 0, kMax);

  GroupId tokens = r.group(in.root(), "tokens", "/tokens");
  file.token_ids = r.read_i32(tokens.get(), "/tokens", "ids", 1).data;
  const hsize_t T = hsize_t(file.token_ids.size());
  const Dims pieces = r.shape_of(tokens.get(), "/tokens", "pieces");  // checked before its strings are read
  if (pieces.size() == 1 && pieces[0] != 0 && pieces[0] != T)
    r.where().fail("/tokens/pieces has " + std::to_string(pieces[0]) + " entries but /tokens/ids has " +
                   std::to_string(T));
  file.pieces = r.read_string_dataset(tokens.get(), "/tokens", "pieces");
  const std::vector<int> relevant = r.read_index(tokens.get(), "/tokens", "relevant", T, "the token count");
  file.relevant.assign(relevant.begin(), relevant.end());
  // Absent in files written before generation captures recorded it: the whole sequence is the prompt.
  if (r.has_attr(in.root(), "n_prompt_tokens"))
    file.n_prompt_tokens = r.attr_int_in(in.root(), "/", "n_prompt_tokens", 1, std::max<int64_t>(1, (int64_t)T));

  GroupId runs = r.group(in.root(), "runs", "/runs");
  for (const std::string& name : r.children(runs.get(), "/runs"))
    file.runs.push_back(read_run(r, runs.get(), name, file, file.probs_fp16));
  if (r.has(in.root(), "compare")) {
    GroupId compare = r.group(in.root(), "compare", "/compare");
    for (const std::string& name : r.children(compare.get(), "/compare")) {
      file.comparisons.push_back(read_comparison(r, compare.get(), name, file));
      for (const std::string& run : {file.comparisons.back().run_a, file.comparisons.back().run_b})
        if (!file.find_run(run))  // a damaged run name in a copy without header checksums, or a deleted run
          r.where().fail("/compare/" + name + " compares run '" + run + "', which the file does not hold" +
                         kDamagedAdvice);
    }
  }
  check_capture(r.where(), file);
  return file;
}

void write_sweep(const SweepFile& file, const std::string& path) {
  check_sweep(Where{"cannot write sweep file '" + path + "'"}, file);
  require_not_model_file(path, file.model_path, "sweep file");
  H5Call h5;
  write_atomically(path, "sweep", [&](hid_t root, Writer& w) {
    write_header(w, root, SweepFile::kFormatName, SweepFile::kFormatVersion, file);
    w.attr_string(root, "/", "base_spec_json", file.base_spec_json);
    w.attr_i32(root, "/", "n_layers", file.n_layers);
    w.attr_i32(root, "/", "n_heads", file.n_heads);
    const hsize_t S = hsize_t(file.focal_temps.size());
    w.dataset_i32(root, "", "token_ids", {hsize_t(file.token_ids.size())}, file.token_ids.data(), kShapePosition);
    w.dataset_f32(root, "", "focal_temps", {S}, file.focal_temps.data(), kShapeTemp);
    const Dims hd = {S, hsize_t(file.n_layers), hsize_t(file.n_heads), hsize_t(kNumRowMetrics)};
    w.dataset_f32(root, "", "head_metrics", hd, file.head_metrics.data(), kShapeHeadMetrics, {1, hd[1], hd[2], hd[3]});
    w.dataset_f32(root, "", "mean_nll", {S}, file.mean_nll.data(), kShapeTemp);
    if (!file.relevant.empty())
      w.dataset_i32(root, "", "relevant", {hsize_t(file.relevant.size())}, file.relevant.data(), kShapeRelevant);
  });
}

SweepFile read_sweep(const std::string& path, uint64_t read_budget_bytes) {
  FileReader in(path, "sweep", "sweep file '" + path + "'", SweepFile::kFormatName, SweepFile::kFormatVersion,
                CaptureFile::kFormatName, "it is an attention capture; open it as a capture", read_budget_bytes);
  Reader& r = in.reader();
  check_metric_names(r, in.root());

  SweepFile file;
  static_cast<Provenance&>(file) = read_provenance(r, in.root(), true);
  file.base_spec_json = r.attr_string(in.root(), "/", "base_spec_json");
  const int kMax = std::numeric_limits<int>::max();
  file.n_layers = r.attr_int_in(in.root(), "/", "n_layers", 0, kMax);
  file.n_heads = r.attr_int_in(in.root(), "/", "n_heads", 0, kMax);

  file.token_ids = r.read_i32(in.root(), "", "token_ids", 1).data;
  Array<float> temps = r.read_f32(in.root(), "", "focal_temps", 1);
  const hsize_t S = temps.dims[0];
  file.focal_temps = std::move(temps.data);
  Array<float> hm = r.read_f32(in.root(), "", "head_metrics", 4);
  r.expect_dims("/head_metrics", hm.dims, {S, hsize_t(file.n_layers), hsize_t(file.n_heads), hsize_t(kNumRowMetrics)},
                "[temps, n_layers, n_heads, metrics]");
  file.head_metrics = std::move(hm.data);
  Array<float> nll = r.read_f32(in.root(), "", "mean_nll", 1);
  r.expect_dims("/mean_nll", nll.dims, {S}, "[temps]");
  file.mean_nll = std::move(nll.data);
  if (r.has(in.root(), "relevant")) {  // written since 2026-12-07, when the sweep was given relevant keys
    const std::vector<int> rel =
        r.read_index(in.root(), "", "relevant", hsize_t(file.token_ids.size()), "the token count");
    file.relevant.assign(rel.begin(), rel.end());
  }
  return file;
}

}  // namespace focal
