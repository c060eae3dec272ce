// focalscope._core: Python bindings (nanobind) over the runtime's and the figures' public APIs — load a model, run
// and capture a prompt under any attention temperature, sweep, generate, read and write capture files, and render
// figures for Jupyter. The forward runs with the GIL released; Ctrl-C is polled between layers. docs/python.md.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "focal/capture.h"
#include "focal/device.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal_figures/figures.h"

namespace nb = nanobind;
using namespace nb::literals;
namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Errors and Ctrl-C

[[noreturn]] void raise(PyObject* type, const std::string& msg) {
  PyErr_SetString(type, msg.c_str());
  throw nb::python_error();
}

// A Python error raised while the runtime had the GIL released (Ctrl-C seen between layers, or an exception from a
// user callback): kept here, the run is abandoned, and the error is raised again once the call is back in Python.
class PendingError {
 public:
  ~PendingError() {
    if (type_) {
      nb::gil_scoped_acquire g;
      Py_XDECREF(type_);
      Py_XDECREF(value_);
      Py_XDECREF(tb_);
    }
  }
  bool pending() const { return type_ != nullptr; }
  // Polled by the runtime between layers, from the calling thread, without the GIL.
  bool poll() {
    if (pending()) return true;
    nb::gil_scoped_acquire g;
    if (PyErr_CheckSignals() != 0) take();
    return pending();
  }
  // Calls a Python callback (f takes the GIL itself not; it runs with the GIL held here); an exception is kept.
  template <class F>
  void call(F&& f) {
    if (pending()) return;
    nb::gil_scoped_acquire g;
    try {
      f();
    } catch (nb::python_error& e) {
      e.restore();
      take();
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
      take();
    }
  }
  // With the GIL held: raises the kept error, if any.
  void rethrow() {
    if (!pending()) return;
    PyErr_Restore(type_, value_, tb_);
    type_ = value_ = tb_ = nullptr;
    throw nb::python_error();
  }

 private:
  void take() { PyErr_Fetch(&type_, &value_, &tb_); }
  PyObject *type_ = nullptr, *value_ = nullptr, *tb_ = nullptr;
};

// ---------------------------------------------------------------------------------------------------------------
// numpy arrays

template <class T>
using Array = nb::ndarray<nb::numpy, T>;

// A read-only view of `data` (no copy); `owner` (the Python object holding the data) stays alive while it is used.
template <class T>
Array<const T> view(const T* data, std::vector<size_t> shape, nb::handle owner, std::vector<int64_t> strides = {}) {
  return Array<const T>(data, shape.size(), shape.data(), owner, strides.empty() ? nullptr : strides.data());
}

// A new array that owns `v`.
template <class T>
Array<T> owned(std::vector<T>&& v, std::vector<size_t> shape) {
  auto* heap = new std::vector<T>(std::move(v));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return Array<T>(heap->data(), shape.size(), shape.data(), owner);
}

// ---------------------------------------------------------------------------------------------------------------
// Arguments

std::string path_str(const fs::path& p) { return p.string(); }

// None -> all; an int -> that one; a sequence of ints -> those. Checked against 0..n-1 with the parameter's name.
std::vector<int> index_list(nb::handle h, int n, const char* param, const char* what, const char* range_owner) {
  std::vector<int> out;
  if (h.is_none()) return out;
  auto check = [&](long long v) {
    if (v < 0 || v >= n)
      raise(PyExc_IndexError, std::string(param) + ": " + what + " " + std::to_string(v) +
                                  " is out of range: " + range_owner + " " + what + "s 0.." + std::to_string(n - 1));
    if (std::find(out.begin(), out.end(), (int)v) != out.end())
      raise(PyExc_ValueError, std::string(param) + ": " + what + " " + std::to_string(v) + " is listed twice");
    out.push_back((int)v);
  };
  if (PyBool_Check(h.ptr()))
    raise(PyExc_TypeError, std::string(param) + ": expected None, an int or a sequence of ints, got bool");
  // An int (or a numpy integer); sequences, numpy arrays included, are iterated.
  if (PyLong_Check(h.ptr()) || (PyIndex_Check(h.ptr()) && !PySequence_Check(h.ptr()))) {
    check(nb::cast<long long>(nb::int_(h)));
    return out;
  }
  if (!PySequence_Check(h.ptr()) || PyUnicode_Check(h.ptr()) || PyBytes_Check(h.ptr()))
    raise(PyExc_TypeError, std::string(param) + ": expected None, an int or a sequence of ints, got " +
                               nb::cast<std::string>(nb::str(h.type().attr("__name__"))));
  for (nb::handle item : nb::iter(h)) {
    if (!PyIndex_Check(item.ptr()) || PyBool_Check(item.ptr()))
      raise(PyExc_TypeError, std::string(param) + ": every item must be an int, got " +
                                 nb::cast<std::string>(nb::str(item.type().attr("__name__"))));
    check(nb::cast<long long>(nb::int_(item)));
  }
  return out;
}

float check_temp(double t, const std::string& what) {
  if (!std::isfinite(t) || !(t > 0.0))
    raise(PyExc_ValueError, what + " must be a finite number > 0 (got " +
                                nb::cast<std::string>(nb::repr(nb::float_(t))) +
                                "); 1 is standard attention, 0.4 the paper's focal setting");
  return (float)t;
}

double parse_number(const std::string& s, const std::string& what) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) { used = 0; }
  if (used == 0 || used != s.size()) raise(PyExc_ValueError, what + ": '" + s + "' is not a number");
  return v;
}

// The one spec grammar (focal::TempSpec::parse); a malformed or non-positive spec is a ValueError. `native` needs
// cfg.
focal::TempSpec parse_temp(const std::string& text, const focal::ModelConfig* cfg, const char* param = "temp") {
  try {
    return focal::TempSpec::parse(text, param, cfg);
  } catch (const focal::Error& e) { raise(PyExc_ValueError, e.what()); }
}

// temp argument: None -> the model's native setting; str; a number t; a TempSpec. Validated against the model.
focal::TempSpec to_spec(nb::handle temp, const focal::ModelConfig& cfg, const char* param = "temp") {
  focal::TempSpec s;
  if (temp.is_none()) {
    s = focal::TempSpec::native(cfg);
  } else if (nb::isinstance<focal::TempSpec>(temp)) {
    s = nb::cast<focal::TempSpec>(temp);
  } else if (PyUnicode_Check(temp.ptr())) {
    const std::string text = nb::cast<std::string>(temp);
    s = parse_temp(text, &cfg, param);
  } else if (PyFloat_Check(temp.ptr()) || (PyLong_Check(temp.ptr()) && !PyBool_Check(temp.ptr()))) {
    s = focal::TempSpec::focal(check_temp(nb::cast<double>(temp), std::string(param) + ": t"));
  } else {
    raise(PyExc_TypeError, std::string(param) +
                               ": expected None, a str such as 'focal:0.4', a number t or a "
                               "TempSpec, got " +
                               nb::cast<std::string>(nb::str(temp.type().attr("__name__"))));
  }
  s.validate(cfg);  // focal::Error (FocalError) naming the override at fault
  return s;
}

size_t parse_budget(nb::handle h) {
  if (h.is_none()) return size_t(2) << 30;
  if (PyLong_Check(h.ptr())) {
    const long long b = nb::cast<long long>(h);
    if (b <= 0) raise(PyExc_ValueError, "budget: must be > 0 bytes");
    return (size_t)b;
  }
  if (PyUnicode_Check(h.ptr())) {
    std::string s = nb::cast<std::string>(h);
    double mult = 1;
    if (!s.empty()) {
      const char u = (char)std::toupper((unsigned char)s.back());
      if (u == 'K' || u == 'M' || u == 'G') {
        mult = u == 'K' ? 1024.0 : u == 'M' ? 1048576.0 : 1073741824.0;
        s.pop_back();
      }
    }
    const double v = parse_number(s, "budget");
    if (!(v > 0)) raise(PyExc_ValueError, "budget: must be > 0");
    return (size_t)(v * mult);
  }
  raise(PyExc_TypeError, "budget: expected bytes as an int or a size such as '512M' or '2G'");
}

// ---------------------------------------------------------------------------------------------------------------
// Model

struct PyModel {
  std::unique_ptr<focal::Model> model;
  std::mutex mu;  // one forward at a time per model (a Session per call; the backend is shared)

  const focal::ModelConfig& cfg() const { return model->config(); }

  const focal::Tokenizer& tok() const { return model->require_tokenizer(); }

  std::vector<int32_t> tokenize(const std::string& text) const { return tok().encode(text, cfg().add_bos); }

  // prompt_or_ids: a str (tokenized as `focal capture --prompt` does), a list of ints, or a 1-D C-contiguous int32
  // numpy array (no copy is made of it until the run).
  std::vector<int32_t> ids_of(nb::handle p, const char* param = "prompt") const {
    std::vector<int32_t> ids;
    if (PyUnicode_Check(p.ptr())) {
      const std::string text = nb::cast<std::string>(p);
      if (text.empty()) raise(PyExc_ValueError, std::string(param) + ": the prompt is empty");
      ids = tokenize(text);
    } else if (nb::hasattr(p, "__array_interface__") || nb::hasattr(p, "__dlpack__")) {
      const std::string dtype = nb::cast<std::string>(nb::str(nb::object(p.attr("dtype"))));
      if (dtype != "int32")
        raise(PyExc_TypeError, std::string(param) + ": token ids must be an int32 array, got dtype " + dtype +
                                   " (convert with ids.astype(numpy.int32))");
      const int ndim = (int)PyLong_AsLong(nb::object(p.attr("ndim")).ptr());
      if (ndim != 1)
        raise(PyExc_ValueError, std::string(param) + ": token ids must be a 1-D array, got " + std::to_string(ndim) +
                                    " dimensions (flatten it, or pass one sequence)");
      nb::object contiguous = p.attr("flags").attr("c_contiguous");
      if (!PyObject_IsTrue(contiguous.ptr()))
        raise(PyExc_ValueError, std::string(param) +
                                    ": the token id array is not contiguous (a strided view such as ids[::2]); "
                                    "pass numpy.ascontiguousarray(ids)");
      nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> a;
      if (!nb::try_cast(p, a, false))
        raise(PyExc_TypeError, std::string(param) + ": could not read the token id array (int32, 1-D, on the CPU)");
      ids.assign(a.data(), a.data() + a.shape(0));
    } else if (PyList_Check(p.ptr()) || PyTuple_Check(p.ptr())) {
      for (nb::handle item : nb::iter(p)) {
        if (!PyIndex_Check(item.ptr()) || PyBool_Check(item.ptr()))
          raise(PyExc_TypeError, std::string(param) + ": token ids must be ints, got " +
                                     nb::cast<std::string>(nb::str(item.type().attr("__name__"))));
        const long long v = nb::cast<long long>(nb::int_(item));
        if (v < INT32_MIN || v > INT32_MAX)
          raise(PyExc_ValueError,
                std::string(param) + ": token id " + std::to_string(v) + " is outside the vocabulary");
        ids.push_back((int32_t)v);
      }
    } else {
      raise(PyExc_TypeError, std::string(param) +
                                 ": expected a str, a list of token ids or an int32 numpy array, got " +
                                 nb::cast<std::string>(nb::str(p.type().attr("__name__"))));
    }
    if (ids.empty()) raise(PyExc_ValueError, std::string(param) + ": no tokens to run");
    const int V = cfg().vocab_size;
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= V)
        raise(PyExc_ValueError, std::string(param) + ": token id " + std::to_string(ids[i]) + " at position " +
                                    std::to_string(i) + " is outside the vocabulary (0.." + std::to_string(V - 1) +
                                    ")");
    if ((int)ids.size() > cfg().max_positions)
      raise(PyExc_ValueError, std::string(param) + ": the prompt has " + std::to_string(ids.size()) +
                                  " tokens but the model's context is " + std::to_string(cfg().max_positions) +
                                  " tokens: shorten it");
    return ids;
  }
};

// ---------------------------------------------------------------------------------------------------------------
// Capture

struct PyCapture {
  focal::CaptureFile file;
  bool probs_fp16 = false;  // made with fp16=True: save() stores probabilities as float16, as `focal capture --fp16`

  const focal::RunCapture& run_of(nb::handle run) const {
    if (file.runs.empty()) raise(PyExc_ValueError, "the capture holds no runs");
    if (run.is_none()) return file.runs[0];
    if (PyUnicode_Check(run.ptr())) {
      const std::string name = nb::cast<std::string>(run);
      if (const focal::RunCapture* r = file.find_run(name)) return *r;
      std::string names;
      for (const auto& r : file.runs) names += (names.empty() ? "'" : ", '") + r.name + "'";
      raise(PyExc_KeyError, "run '" + name + "' is not in the capture (runs: " + names + ")");
    }
    if (PyIndex_Check(run.ptr()) && !PyBool_Check(run.ptr())) {
      const long long i = nb::cast<long long>(nb::int_(run));
      const long long n = (long long)file.runs.size();
      if (i < -n || i >= n)
        raise(PyExc_IndexError,
              "run index " + std::to_string(i) + " is out of range: the capture has " + std::to_string(n) + " run(s)");
      return file.runs[(size_t)(i < 0 ? i + n : i)];
    }
    raise(PyExc_TypeError, "run: expected a run name (str), an index (int) or None (the first run)");
  }

  // probs / scores of stored rows: layer and head are the model's indices (None: every stored one).
  Array<const float> rows(nb::handle self, nb::handle run, nb::handle layer, nb::handle head, bool probs) const {
    const focal::RunCapture& r = run_of(run);
    const std::vector<float>& data = probs ? r.probs : r.scores;
    if (data.empty())
      raise(PyExc_ValueError, "run '" + r.name + "' stores no " + (probs ? "probabilities" : "scores") +
                                  " (captured with " + (probs ? "probs" : "scores") + "=False)");
    auto pick = [&](nb::handle h, const std::vector<int>& stored, const char* what) -> long long {
      if (h.is_none()) return -1;
      if (!PyIndex_Check(h.ptr()) || PyBool_Check(h.ptr()))
        raise(PyExc_TypeError, std::string(what) + ": expected an int or None");
      const long long v = nb::cast<long long>(nb::int_(h));
      auto it = std::find(stored.begin(), stored.end(), (int)v);
      if (it == stored.end()) {
        std::string list;
        for (int s : stored) list += (list.empty() ? "" : ", ") + std::to_string(s);
        raise(PyExc_IndexError, std::string(what) + " " + std::to_string(v) + " is not stored in run '" + r.name +
                                    "' (stored " + what + "s: " + list + ")");
      }
      return it - stored.begin();
    };
    const long long li = pick(layer, r.layers, "layer"), hi = pick(head, r.heads, "head");
    const size_t Lc = r.layers.size(), Hc = r.heads.size(), Qc = r.queries.size(), T = (size_t)file.n_tokens();
    const int64_t sk = 1, sq = (int64_t)T, sh = (int64_t)(Qc * T), sl = (int64_t)(Hc * Qc * T);
    const float* base = data.data() + (li < 0 ? 0 : li) * sl + (hi < 0 ? 0 : hi) * sh;
    std::vector<size_t> shape;
    std::vector<int64_t> strides;
    if (li < 0) {
      shape.push_back(Lc);
      strides.push_back(sl);
    }
    if (hi < 0) {
      shape.push_back(Hc);
      strides.push_back(sh);
    }
    shape.push_back(Qc);
    strides.push_back(sq);
    shape.push_back(T);
    strides.push_back(sk);
    return view(base, shape, self, strides);
  }
};

focal::Comparison comparison(const PyCapture& c, const std::string& a, const std::string& b) {
  for (const focal::Comparison& cmp : c.file.comparisons)
    if (cmp.run_a == a && cmp.run_b == b) return cmp;
  return focal::compare_runs(c.file, a, b);
}

// ---------------------------------------------------------------------------------------------------------------
// Figures

struct PyFigure {
  std::string data;    // the encoded file
  std::string format;  // "png", "svg" or "pdf"
};

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

std::string html_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

std::string base64(const std::string& in) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8 | (unsigned char)in[i + 2];
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += k[(v >> 6) & 63];
    out += k[v & 63];
  }
  if (i + 1 == in.size()) {
    const unsigned v = (unsigned char)in[i] << 16;
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const unsigned v = (unsigned char)in[i] << 16 | (unsigned char)in[i + 1] << 8;
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += k[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

// Jupyter's rich view of a capture: a summary table and the first run's first stored head as an inline PNG (a data:
// URI; no script, nothing fetched).
std::string capture_html(const PyCapture& c) {
  const focal::CaptureFile& f = c.file;
  std::ostringstream h;
  h << "<div class=\"focalscope-capture\"><p><b>focalscope capture</b>: " << f.n_tokens() << " tokens, " << f.n_layers
    << " layers &times; " << f.n_heads << " heads, model <code>" << html_escape(f.model_path) << "</code></p>";
  h << "<p style=\"font-family:monospace\">";
  for (int i = 0; i < f.n_tokens() && i < 48; ++i)
    h << "<span style=\"border:1px solid #ccc;margin:1px;padding:0 2px\">"
      << html_escape(f.pieces.empty() ? std::to_string(f.token_ids[i]) : f.pieces[i]) << "</span>";
  if (f.n_tokens() > 48) h << " &hellip;";
  h << "</p><table><tr><th>run</th><th>setting</th><th>stored rows (layers &times; heads &times; queries)</th>"
       "<th>arrays</th></tr>";
  for (const focal::RunCapture& r : f.runs)
    h << "<tr><td>" << html_escape(r.name) << "</td><td><code>" << html_escape(r.temp_spec_json) << "</code></td><td>"
      << r.layers.size() << " &times; " << r.heads.size() << " &times; " << r.queries.size() << "</td><td>"
      << (r.probs.empty() ? "" : "probs ") << (r.scores.empty() ? "" : "scores ") << "metrics"
      << (r.tau.empty() ? "" : " tau") << "</td></tr>";
  h << "</table>";
  for (const focal::Comparison& cmp : f.comparisons) {
    double kl = 0, js = 0;
    for (size_t i = 0; i < cmp.kl.size(); ++i) {
      kl += cmp.kl[i];
      js += cmp.js[i];
    }
    if (!cmp.kl.empty())
      h << "<p>" << html_escape(cmp.run_a) << " vs " << html_escape(cmp.run_b) << ": mean KL " << kl / cmp.kl.size()
        << " nats, mean JS " << js / cmp.js.size() << " nats over " << cmp.kl.size() << " rows</p>";
  }
  if (!f.runs.empty() && !f.runs[0].probs.empty()) {
    try {
      focal::figures::FigureOptions opt;
      opt.runs = {f.runs[0].name};
      focal::figures::Source src;
      src.capture = &f;
      const std::string png = focal::figures::render_figure("heatmap", {src}, opt, focal::figures::Format::kPng);
      h << "<img alt=\"attention heatmap\" style=\"max-width:480px\" src=\"data:image/png;base64," << base64(png)
        << "\"/>";
    } catch (const focal::Error& e) { h << "<p>(no heatmap: " << html_escape(e.what()) << ")</p>"; }
  }
  h << "</div>";
  return h.str();
}

// ---------------------------------------------------------------------------------------------------------------
// Runs

focal::CaptureRequest make_request(const focal::ModelConfig& cfg, int T, nb::handle layers, nb::handle heads,
                                   nb::handle queries, bool probs, bool scores, bool fp16, int topk, int topk_mass,
                                   nb::handle relevant, nb::handle budget) {
  focal::CaptureRequest req;
  req.layers = index_list(layers, cfg.n_layers, "layers", "layer", "the model has");
  req.heads = index_list(heads, cfg.n_heads, "heads", "head", "the model has");
  req.queries = index_list(queries, T, "queries", "query position", "the prompt has");
  req.store_probs = probs;
  req.store_scores = scores;
  req.probs_fp16 = fp16;
  req.topk_tokens = topk;
  req.run.topk_mass_k = topk_mass;
  for (int p : index_list(relevant, T, "relevant", "key position", "the prompt has")) req.run.relevant.push_back(p);
  req.budget_bytes = parse_budget(budget);
  return req;
}

PyCapture model_run(PyModel& m, nb::handle prompt, nb::handle temp, nb::handle layers, nb::handle heads,
                    nb::handle queries, nb::handle compare, std::optional<std::string> name, bool probs, bool scores,
                    bool fp16, int topk, int topk_mass, nb::handle relevant, nb::handle budget, nb::handle progress) {
  const focal::ModelConfig& cfg = m.cfg();
  const focal::TempSpec spec = to_spec(temp, cfg);
  const std::vector<int32_t> ids = m.ids_of(prompt);
  const focal::CaptureRequest req = make_request(cfg, (int)ids.size(), layers, heads, queries, probs, scores, fp16,
                                                 topk, topk_mass, relevant, budget);
  // As `focal capture`: the main run, and with compare= a second one and the per-row KL / JS between them.
  std::vector<std::pair<std::string, focal::TempSpec>> runs = {{name ? *name : spec.label(), spec}};
  if (name && (name->empty() || name->find('/') != std::string::npos))
    raise(PyExc_ValueError, "name: a run name must be non-empty and contain no '/'");
  if (!compare.is_none()) {
    focal::TempSpec other = to_spec(compare, cfg, "compare");
    std::string other_name = other.label();
    if (other_name == runs[0].first) other_name += "_b";
    runs.push_back({other_name, other});
  }
  focal::validate_capture_request(cfg, (int)ids.size(), req, (int)runs.size());

  PyCapture out;
  out.probs_fp16 = fp16 && probs;
  out.file = focal::make_capture_file(*m.model, ids);
  out.file.relevant = req.run.relevant;
  focal::CaptureRequest run_req = req;
  if (runs.size() == 2) run_req.probs_fp16 = false;  // KL / JS from the fp32 rows; save() still stores fp16
  PendingError pending;
  const bool has_progress = !progress.is_none();
  for (auto& [run_name, s] : runs) {
    focal::RunCapture rc;
    bool done;
    {
      nb::gil_scoped_release rel;
      std::lock_guard<std::mutex> lock(m.mu);
      std::function<void(int, int)> prog;
      if (has_progress) prog = [&, rn = run_name](int d, int t) { pending.call([&] { progress(rn, d, t); }); };
      done = focal::capture_run_cancellable(
          *m.model, ids, s, run_req, run_name, &rc, [&] { return pending.poll(); }, prog);
    }
    pending.rethrow();
    if (!done) raise(PyExc_KeyboardInterrupt, "run cancelled");
    out.file.runs.push_back(std::move(rc));
  }
  if (runs.size() == 2 && req.store_probs) {
    nb::gil_scoped_release rel;
    out.file.comparisons.push_back(focal::compare_runs(out.file, runs[0].first, runs[1].first));
  }
  return out;
}

focal::SweepFile model_sweep(PyModel& m, nb::handle prompt, std::vector<double> temps, nb::handle temp,
                             nb::handle relevant, int topk_mass, nb::handle progress) {
  const focal::ModelConfig& cfg = m.cfg();
  const focal::TempSpec base = to_spec(temp, cfg);
  const std::vector<int32_t> ids = m.ids_of(prompt);
  if (temps.empty()) raise(PyExc_ValueError, "temps: give at least one temperature");
  std::vector<float> ts;
  for (double t : temps) ts.push_back(check_temp(t, "temps: every temperature"));
  focal::RunOptions run;
  run.topk_mass_k = topk_mass;
  for (int p : index_list(relevant, (int)ids.size(), "relevant", "key position", "the prompt has"))
    run.relevant.push_back(p);
  PendingError pending;
  focal::SweepFile sf;
  const bool has_progress = !progress.is_none();
  try {
    nb::gil_scoped_release rel;
    std::lock_guard<std::mutex> lock(m.mu);
    sf = focal::run_sweep(
        *m.model, ids, base, ts, run,
        [&](size_t s) {
          if (has_progress) pending.call([&] { progress(ts[s], s + 1, ts.size()); });
        },
        [&] { return pending.poll(); });
  } catch (const focal::Error&) {
    pending.rethrow();
    throw;
  }
  pending.rethrow();
  return sf;
}

struct PyGeneration {
  std::vector<int32_t> prompt_ids, ids;
  std::string text;
  std::optional<PyCapture> capture;
};

struct StopGeneration {};

PyGeneration model_generate(PyModel& m, nb::handle prompt, int n_new, nb::handle temp, double sample_temp, int top_k,
                            uint64_t seed, bool stop_at_eos, nb::handle on_token, bool capture, nb::handle layers,
                            nb::handle heads, bool probs, bool scores, bool fp16) {
  const focal::ModelConfig& cfg = m.cfg();
  const focal::TempSpec spec = to_spec(temp, cfg);
  const std::vector<int32_t> prompt_ids = m.ids_of(prompt);
  if (n_new < 1) raise(PyExc_ValueError, "n: generate at least 1 token");
  if (!std::isfinite(sample_temp) || sample_temp < 0) raise(PyExc_ValueError, "sample_temp: must be >= 0 (0: greedy)");
  if (top_k < 0) raise(PyExc_ValueError, "top_k: must be >= 0 (0: the whole vocabulary)");
  if ((int)prompt_ids.size() >= cfg.max_positions)
    raise(PyExc_ValueError, "prompt: the prompt fills the model's context; nothing to generate");
  const int cap = std::min(cfg.max_positions, (int)prompt_ids.size() + n_new);
  focal::CaptureRequest req;
  if (capture) {
    req = make_request(cfg, cap, layers, heads, nb::none(), probs, scores, fp16, 10, 5, nb::none(), nb::none());
    focal::validate_capture_request(cfg, cap, req, 1);
  }
  const focal::Tokenizer* tok = m.model->tokenizer();
  focal::SampleOptions so;
  so.sample_temp = (float)sample_temp;
  so.top_k = top_k;
  so.seed = seed;
  so.stop_at_eos = stop_at_eos;

  struct CancelObserver final : focal::ForwardObserver {
    PendingError* p;
    bool cancelled() const override { return p->poll(); }
  } obs;
  PendingError pending;
  obs.p = &pending;
  PyGeneration g;
  g.prompt_ids = prompt_ids;
  std::vector<int32_t> all = prompt_ids;
  const bool has_cb = !on_token.is_none();
  {
    nb::gil_scoped_release rel;
    std::lock_guard<std::mutex> lock(m.mu);
    focal::Session s(*m.model, cap);
    try {
      focal::generate(s, prompt_ids, n_new, spec, so, focal::RunOptions{}, &obs, [&](int32_t id) {
        std::string piece;
        if (tok) {
          const std::string before = tok->decode(all);
          all.push_back(id);
          const std::string after = tok->decode(all);
          piece = after.substr(std::min(before.size(), after.size()));
        } else {
          all.push_back(id);
        }
        g.ids.push_back(id);
        bool stop = false;
        if (has_cb)
          pending.call([&] {
            nb::object r = on_token(id, piece);
            stop = r.is(nb::handle(Py_False));
          });
        if (stop || pending.pending()) throw StopGeneration{};
      });
    } catch (const StopGeneration&) {}
  }
  pending.rethrow();
  if (tok) {
    const std::string full = tok->decode(all), head = tok->decode(prompt_ids);
    g.text = full.substr(std::min(head.size(), full.size()));
  }
  if (capture) {
    // As `focal generate --capture`: prompt + generated tokens re-run in one pass.
    PyCapture pc;
    pc.probs_fp16 = fp16 && probs;
    pc.file = focal::make_capture_file(*m.model, all);
    focal::RunCapture rc;
    bool done;
    {
      nb::gil_scoped_release rel;
      std::lock_guard<std::mutex> lock(m.mu);
      done =
          focal::capture_run_cancellable(*m.model, all, spec, req, spec.label(), &rc, [&] { return pending.poll(); });
    }
    pending.rethrow();
    if (!done) raise(PyExc_KeyboardInterrupt, "run cancelled");
    pc.file.runs.push_back(std::move(rc));
    g.capture = std::move(pc);
  }
  return g;
}

}  // namespace

NB_MODULE(_core, mod) {
  mod.doc() = "focalscope's C++ core: models, runs, captures and figures. Import the focalscope package instead.";
  nb::exception<focal::Error>(mod, "FocalError", PyExc_RuntimeError).attr("__doc__") =
      "An error reported by the focalscope runtime (a bad model file, option or capture); the message names "
      "the file, field or option at fault and what would fix it.";

  mod.def(
      "version", [] { return std::string(focal::version()); }, "The runtime's version string, e.g. '0.1.0'.");
  mod.def("cuda_built", &focal::cuda_built, "True when this build has the CUDA backend.");
  mod.def(
      "metric_names",
      [] {
        std::vector<std::string> v;
        for (int i = 0; i < focal::kNumRowMetrics; ++i) v.push_back(focal::row_metric_name(i));
        return v;
      },
      "Names of the last axis of every metrics array, in order: entropy_nats, entropy_norm, eff_support, max_prob, "
      "topk_mass, tail_mass, sink_mass, relevant_mass (docs/metrics.md).");

  // TempSpec ------------------------------------------------------------------------------------------------------
  nb::class_<focal::TempSpec>(
      mod, "TempSpec",
      "How a run scales attention logits: softmax(q.k / (t sqrt(d_head))) with t per model, layer or head.\n\n"
      "TempSpec(0.4) is focal attention with t = 0.4; TempSpec(mode='standard'); TempSpec(0.4, layer_temp={0: 1.0}, "
      "head_temp={(2, 1): 0.3}); TempSpec(mode='learned', tau_scale=0.8); TempSpec(mode='ssmax', ssmax_s=1.0). "
      "Anywhere a temp= is taken, a string in the spec grammar works too (TempSpec.parse): 'native', 'standard', "
      "'focal:0.4', 'learned:0.8', 'ssmax:1', 'focal:0.4+2=0.3+2:1=0.5'.")
      .def(
          "__init__",
          [](focal::TempSpec* self, std::optional<double> t, std::optional<std::string> mode,
             std::map<int, double> layer_temp, std::map<std::pair<int, int>, double> head_temp, double tau_scale,
             double ssmax_s) {
            focal::TempSpec s;
            const std::string md = mode ? *mode : (t ? "focal" : "standard");
            try {
              s.mode = focal::parse_attn_mode(md, "mode");
            } catch (const focal::Error& e) { raise(PyExc_ValueError, e.what()); }
            if (t && s.mode != focal::AttnMode::kFocal)
              raise(PyExc_ValueError,
                    "t: a global t is for mode='focal' (use layer_temp / head_temp to override "
                    "layers or heads of other modes)");
            if (s.mode == focal::AttnMode::kFocal) {
              if (!t) raise(PyExc_ValueError, "mode='focal' needs t, e.g. TempSpec(0.4)");
              s.focal_temp = check_temp(*t, "t");
            }
            for (auto& [l, v] : layer_temp) s.layer_temp[l] = check_temp(v, "layer_temp[" + std::to_string(l) + "]");
            for (auto& [lh, v] : head_temp)
              s.head_temp[lh] =
                  check_temp(v, "head_temp[(" + std::to_string(lh.first) + ", " + std::to_string(lh.second) + ")]");
            s.tau_scale = check_temp(tau_scale, "tau_scale");
            s.ssmax_s = check_temp(ssmax_s, "ssmax_s");
            new (self) focal::TempSpec(s);
          },
          "t"_a = nb::none(), "mode"_a = nb::none(), "layer_temp"_a = std::map<int, double>{},
          "head_temp"_a = std::map<std::pair<int, int>, double>{}, "tau_scale"_a = 1.0, "ssmax_s"_a = 1.0)
      .def_static(
          "parse", [](const std::string& text) { return parse_temp(text, nullptr); }, "text"_a,
          "Parses the spec grammar shared with the CLI and the app: 'standard', 'focal:T' or 'T', 'learned' or "
          "'learned:X', 'ssmax' or 'ssmax:S', then any '+L=T' (layer) or '+L:H=T' (head) overrides, e.g. "
          "'focal:0.4+2=0.3+2:1=0.5'; run names ('focal_t0.4') work too. 'native' needs a model: pass the string "
          "as temp= or use Model.native_temp.")
      .def_prop_ro("text", &focal::TempSpec::text,
                   "The spec in the grammar's canonical spelling; TempSpec.parse(spec.text) == spec.")
      .def_static(
          "from_json", [](const std::string& j) { return focal::TempSpec::from_json(j, "TempSpec.from_json"); },
          "json"_a, "The spec a capture stores per run (its temp_spec_json).")
      .def_prop_ro(
          "mode", [](const focal::TempSpec& s) { return std::string(focal::attn_mode_name(s.mode)); },
          "'standard', 'focal', 'learned' or 'ssmax'.")
      .def_prop_ro(
          "t", [](const focal::TempSpec& s) { return s.focal_temp; }, "Global focal t (mode 'focal').")
      .def_prop_ro(
          "layer_temp", [](const focal::TempSpec& s) { return s.layer_temp; }, "{layer: t} overrides.")
      .def_prop_ro(
          "head_temp", [](const focal::TempSpec& s) { return s.head_temp; }, "{(layer, head): t} overrides.")
      .def_prop_ro(
          "tau_scale", [](const focal::TempSpec& s) { return s.tau_scale; }, "Multiplier on a learned tau.")
      .def_prop_ro(
          "ssmax_s", [](const focal::TempSpec& s) { return s.ssmax_s; }, "s of ssmax: logits * s * ln(n).")
      .def_prop_ro("label", &focal::TempSpec::label, "Run name this spec gets by default, e.g. 'focal_t0.4'.")
      .def("to_json", &focal::TempSpec::to_json, "JSON as stored in a capture's temp_spec_json.")
      .def("__eq__", [](const focal::TempSpec& a, const focal::TempSpec& b) { return a.to_json() == b.to_json(); })
      .def("__repr__", [](const focal::TempSpec& s) { return "TempSpec(" + s.to_json() + ")"; });

  // Figure --------------------------------------------------------------------------------------------------------
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

  // Capture -------------------------------------------------------------------------------------------------------
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
      .def_prop_ro("model_path", [](const PyCapture& c) { return c.file.model_path; })
      .def_prop_ro("weights_checksum", [](const PyCapture& c) { return c.file.weights_checksum; })
      .def_prop_ro("tool_version", [](const PyCapture& c) { return c.file.tool_version; })
      .def_prop_ro(
          "created_utc", [](const PyCapture& c) { return c.file.created_utc; },
          "ISO 8601 time the file was written ('' until saved).")
      .def_prop_ro(
          "metric_names",
          [](const PyCapture&) {
            std::vector<std::string> v;
            for (int i = 0; i < focal::kNumRowMetrics; ++i) v.push_back(focal::row_metric_name(i));
            return v;
          },
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
      .def(
          "save",
          [](PyCapture& c, const fs::path& p, std::optional<bool> fp16, std::optional<std::string> created) {
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
          "as float16 (default: as the capture was made). created_utc: fix the timestamp (default: now).")
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
        return c;
      },
      "path"_a, "Reads a capture file (from focal capture, focal generate --capture, the app or Capture.save).");

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

  // Sweep ---------------------------------------------------------------------------------------------------------
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
      .def_prop_ro("n_layers", [](const focal::SweepFile& s) { return s.n_layers; })
      .def_prop_ro("n_heads", [](const focal::SweepFile& s) { return s.n_heads; })
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

  // Generation ----------------------------------------------------------------------------------------------------
  nb::class_<PyGeneration>(mod, "Generation", "The result of Model.generate.")
      .def_prop_ro(
          "prompt_ids", [](const PyGeneration& g) { return g.prompt_ids; }, "The prompt's token ids.")
      .def_prop_ro(
          "ids", [](const PyGeneration& g) { return g.ids; }, "The generated token ids.")
      .def_prop_ro(
          "text", [](const PyGeneration& g) { return g.text; }, "The generated text (without the prompt).")
      .def_prop_ro(
          "capture", [](const PyGeneration& g) { return g.capture; },
          "The capture of prompt + generated tokens (generate(capture=True)), else None.")
      .def("__repr__",
           [](const PyGeneration& g) { return "<focalscope.Generation " + std::to_string(g.ids.size()) + " tokens>"; });

  // Model ---------------------------------------------------------------------------------------------------------
  nb::class_<PyModel>(
      mod, "Model",
      "A loaded LLaMA-family model (a Hugging Face directory or a .gguf file) on the CPU or a CUDA device. "
      "Made by load(). Runs release the GIL; Ctrl-C cancels a run between layers (KeyboardInterrupt).")
      .def("__repr__",
           [](const PyModel& m) {
             return "<focalscope.Model " + m.model->path() + ": " + std::to_string(m.cfg().n_layers) + " layers x " +
                    std::to_string(m.cfg().n_heads) + " heads, " + focal::device_name(m.model->device()) + ">";
           })
      .def_prop_ro("path", [](const PyModel& m) { return m.model->path(); })
      .def_prop_ro(
          "device", [](const PyModel& m) { return std::string(focal::device_name(m.model->device())); },
          "'cpu' or 'cuda': where the weights live and the forward runs.")
      .def_prop_ro(
          "precision", [](const PyModel& m) { return std::string(focal::precision_name(m.model->precision())); },
          "'exact' (fp32 everywhere; always on the CPU) or 'fast' (GPU: 16-bit GEMMs and attention on tensor "
          "cores, softmax and metrics in fp32), as resolved at load.")
      .def_prop_ro("n_layers", [](const PyModel& m) { return m.cfg().n_layers; })
      .def_prop_ro(
          "n_heads", [](const PyModel& m) { return m.cfg().n_heads; }, "Query heads.")
      .def_prop_ro("n_kv_heads", [](const PyModel& m) { return m.cfg().n_kv_heads; })
      .def_prop_ro("d_head", [](const PyModel& m) { return m.cfg().d_head; })
      .def_prop_ro("hidden", [](const PyModel& m) { return m.cfg().hidden; })
      .def_prop_ro("vocab_size", [](const PyModel& m) { return m.cfg().vocab_size; })
      .def_prop_ro(
          "max_positions", [](const PyModel& m) { return m.cfg().max_positions; }, "The context length.")
      .def_prop_ro("n_params", [](const PyModel& m) { return m.model->n_params(); })
      .def_prop_ro("weights_checksum", [](const PyModel& m) { return m.model->weights_checksum(); })
      .def_prop_ro(
          "config_json", [](const PyModel& m) { return m.cfg().source_json; }, "config.json as read.")
      .def_prop_ro(
          "native_temp", [](const PyModel& m) { return focal::TempSpec::native(m.cfg()); },
          "The attention setting the model was trained with (config.json 'focal'); temp=None uses it.")
      .def(
          "tokenize",
          [](const PyModel& m, const std::string& text, std::optional<bool> add_bos) {
            std::vector<int32_t> ids = m.tok().encode(text, add_bos.value_or(m.cfg().add_bos));
            const size_t n = ids.size();
            return owned(std::move(ids), {n});
          },
          "text"_a, "add_bos"_a = nb::none(),
          nb::sig("def tokenize(self, text: str, add_bos: bool | None = None) -> numpy.typing.NDArray[numpy.int32]"),
          "Token ids (int32 [n]) as `focal capture --prompt` makes them (with BOS when the model adds one).")
      .def(
          "detokenize", [](const PyModel& m, nb::handle ids) { return m.tok().decode(m.ids_of(ids, "ids")); }, "ids"_a,
          nb::sig(
              "def detokenize(self, ids: collections.abc.Sequence[int] | numpy.typing.NDArray[numpy.int32]) -> str"),
          "The text of token ids.")
      .def(
          "pieces",
          [](const PyModel& m, nb::handle ids) {
            std::vector<std::string> v;
            for (int32_t id : m.ids_of(ids, "ids")) v.push_back(m.tok().display(id));
            return v;
          },
          "ids"_a,
          nb::sig(
              "def pieces(self, ids: collections.abc.Sequence[int] | numpy.typing.NDArray[numpy.int32]) -> list[str]"),
          "Each token as a person should read it (what captures store).")
      .def("run", &model_run, "prompt"_a, "temp"_a = nb::none(), nb::kw_only(), "layers"_a = nb::none(),
           "heads"_a = nb::none(), "queries"_a = nb::none(), "compare"_a = nb::none(), "name"_a = nb::none(),
           "probs"_a = true, "scores"_a = true, "fp16"_a = false, "topk"_a = 10, "topk_mass"_a = 5,
           "relevant"_a = nb::none(), "budget"_a = nb::none(), "progress"_a = nb::none(),
           nb::sig("def run(self, prompt: str | collections.abc.Sequence[int] | numpy.typing.NDArray[numpy.int32], "
                   "temp: str | float | TempSpec | None = None, *, layers: int | collections.abc.Sequence[int] | None "
                   "= None, "
                   "heads: int | collections.abc.Sequence[int] | None = None, "
                   "queries: int | collections.abc.Sequence[int] | None = None, "
                   "compare: str | float | TempSpec | None = None, name: str | None = None, probs: bool = True, "
                   "scores: bool = True, fp16: bool = False, topk: int = 10, topk_mass: int = 5, "
                   "relevant: collections.abc.Sequence[int] | None = None, budget: int | str | None = None, "
                   "progress: collections.abc.Callable[[str, int, int], object] | None = None) -> Capture"),
           "Runs a prompt and captures what attention did: `focal capture` from Python, the same Capture (and, with "
           "save(), the same file) for the same arguments.\n\n"
           "prompt: text (tokenized as the CLI does), or token ids (a list, or a 1-D C-contiguous int32 array).\n"
           "temp: 'native' (None, the default: the model's own setting), 'standard', 'focal:0.4' (or 0.4), "
           "'learned', 'learned:X', 'ssmax:S', or a TempSpec.\n"
           "layers / heads / queries: rows whose probabilities and scores are stored (None: all); metrics are kept "
           "for every layer, head and row.\n"
           "compare: a second setting run over the same tokens, with per-row KL / JS (kl_js()).\n"
           "probs / scores: store them; fp16: save probabilities as float16; topk: next tokens kept per position; "
           "topk_mass: k of the topk_mass metric; relevant: key positions for relevant_mass; budget: memory limit "
           "checked before running (bytes or '512M', default '2G').\n"
           "progress(run_name, layers_done, n_layers) is called between layers; an exception from it cancels the "
           "run and is raised. The GIL is released during the forward; Ctrl-C cancels between layers.")
      .def("sweep", &model_sweep, "prompt"_a, "temps"_a, "temp"_a = nb::none(), nb::kw_only(),
           "relevant"_a = nb::none(), "topk_mass"_a = 5, "progress"_a = nb::none(),
           nb::sig("def sweep(self, prompt: str | collections.abc.Sequence[int] | numpy.typing.NDArray[numpy.int32], "
                   "temps: collections.abc.Sequence[float], temp: str | float | TempSpec | None = None, *, "
                   "relevant: collections.abc.Sequence[int] | None = None, topk_mass: int = 5, "
                   "progress: collections.abc.Callable[[float, int, int], object] | None = None) -> Sweep"),
           "`focal sweep`: one forward per focal t in temps (mode set to focal; temp's per-layer / per-head "
           "overrides kept), metrics per head averaged over rows 1..T-1. progress(t, done, total) after each t; "
           "Ctrl-C cancels between layers.")
      .def(
          "generate", &model_generate, "prompt"_a, "n"_a = 32, "temp"_a = nb::none(), nb::kw_only(),
          "sample_temp"_a = 0.0, "top_k"_a = 0, "seed"_a = 1, "stop_at_eos"_a = true, "on_token"_a = nb::none(),
          "capture"_a = false, "layers"_a = nb::none(), "heads"_a = nb::none(), "probs"_a = true, "scores"_a = true,
          "fp16"_a = false,
          nb::sig("def generate(self, prompt: str | collections.abc.Sequence[int] | numpy.typing.NDArray[numpy.int32], "
                  "n: int = 32, temp: str | float | TempSpec | None = None, *, sample_temp: float = 0.0, "
                  "top_k: int = 0, seed: int = 1, stop_at_eos: bool = True, "
                  "on_token: collections.abc.Callable[[int, str], object] | None = None, capture: bool = False, "
                  "layers: int | collections.abc.Sequence[int] | None = None, "
                  "heads: int | collections.abc.Sequence[int] | None = None, probs: bool = True, "
                  "scores: bool = True, fp16: bool = False) -> Generation"),
          "`focal generate`: up to n new tokens with a KV cache under temp (greedy, or sampled with "
          "sample_temp / top_k / seed). on_token(id, text) is called for each new token with its text; returning "
          "False stops, an exception stops and is raised. capture=True also captures prompt + generated tokens "
          "(as `focal generate --capture`) into Generation.capture.");

  mod.def(
      "load",
      [](const fs::path& p, const std::string& device, const std::string& precision) {
        const std::string path = path_str(p);
        if (!fs::exists(p))
          raise(PyExc_FileNotFoundError,
                "load: no such model: '" + path +
                    "' (give a Hugging Face model directory with config.json, or a .gguf file)");
        focal::Device d;
        try {
          d = focal::parse_device(device);
        } catch (const focal::Error& e) { raise(PyExc_ValueError, std::string("device: ") + e.what()); }
        focal::LoadOptions opt;
        try {
          opt.precision = focal::parse_precision(precision);
        } catch (const focal::Error& e) { raise(PyExc_ValueError, std::string("precision: ") + e.what()); }
        auto m = std::make_unique<PyModel>();
        {
          nb::gil_scoped_release rel;
          m->model = focal::Model::load(path, focal::resolve_device(d), opt);
        }
        return m;
      },
      "path"_a, "device"_a = "auto", "precision"_a = "auto",
      "Loads a model: a Hugging Face LLaMA-family directory (config.json, safetensors, tokenizer.model) or a "
      "llama-architecture .gguf file. device: 'auto' (CUDA when usable, else the CPU), 'cpu' or 'cuda'. precision: "
      "'auto' (fast on the GPU for 16-bit and quantized weights, else exact), 'exact' or 'fast' (as focal "
      "--precision).");
}
