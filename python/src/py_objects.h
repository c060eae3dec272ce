// The Python-side objects of focalscope._core: a loaded model, a capture, a batch stats file, a rendered figure, a
// generation.
#pragma once

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>

#include "focal/capture.h"
#include "focal/error.h"
#include "focal/model.h"
#include "focal_batch/stats_file.h"
#include "py_common.h"
#include "py_convert.h"

namespace focalscope::py {

struct PyModel {
  std::unique_ptr<focal::Model> model;
  std::mutex mu;  // one forward at a time per model (a Session per call; the backend is shared)

  const focal::ModelConfig& cfg() const { return model->config(); }

  const focal::Tokenizer& tok() const { return model->require_tokenizer(); }

  std::vector<int32_t> tokenize(const std::string& text) const { return tok().encode(text, cfg().add_bos); }

  // prompt_or_ids: a str (tokenized as `focal capture --prompt` does), a list of ints, or a 1-D C-contiguous int32
  // numpy array (no copy is made of it until the run).
  // for_forward: the ids will run through the model, so past the trained context a rotary model warns (and GPT-2
  // refuses); false for ids only decoded or displayed.
  std::vector<int32_t> ids_of(nb::handle p, const char* param = "prompt", bool for_forward = true) const {
    std::vector<int32_t> ids;
    if (PyUnicode_Check(p.ptr())) {
      const std::string text = text_arg(p, param);
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
    if (ids.empty() && for_forward) raise(PyExc_ValueError, std::string(param) + ": no tokens to run");
    const int V = cfg().vocab_size;
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= V)
        raise(PyExc_ValueError, std::string(param) + ": token id " + std::to_string(ids[i]) + " at position " +
                                    std::to_string(i) + " is outside the vocabulary (0.." + std::to_string(V - 1) +
                                    ")");
    // Past the trained context: a rotary model runs with a Python warning (UserWarning, once per call); a learned
    // position table (GPT-2) raises ValueError.
    if (!for_forward) return ids;
    std::string warning;
    try {
      warning = focal::context_length_warning(cfg(), (int)ids.size());
    } catch (const focal::Error& e) { raise(PyExc_ValueError, std::string(param) + ": " + e.what()); }
    if (!warning.empty() && PyErr_WarnEx(PyExc_UserWarning, (std::string(param) + ": " + warning).c_str(), 1) != 0)
      throw nb::python_error();
    return ids;
  }
};

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

// The comparison of runs a and b: stored in the capture, else computed from its rows.
focal::Comparison comparison(const PyCapture& c, const std::string& a, const std::string& b);

// A stats file of `focal batch` (open_stats).
struct PyStats {
  focal::batch::StatsFile file;
  bool with_docs = true;  // read with its per-document datasets and kept rows
};

struct PyFigure {
  std::string data;    // the encoded file
  std::string format;  // "png", "svg" or "pdf"
};

struct PyGeneration {
  std::vector<int32_t> prompt_ids, ids;
  std::optional<std::string> text;  // none for a model without a tokenizer
  std::optional<PyCapture> capture;
};

// Jupyter's rich view of a capture (py_html.cpp).
std::string capture_html(const PyCapture& c);

}  // namespace focalscope::py
