// Python arguments to runtime values for focalscope._core: index lists, temperatures in the one spec grammar, sizes.
#pragma once

#include "focal/config.h"
#include "focal/tokenizer.h"
#include "focal/temp_spec.h"
#include "py_common.h"

namespace focalscope::py {

inline std::string path_str(const fs::path& p) { return p.string(); }

// None -> all; an int -> that one; a sequence of ints -> those. Checked against 0..n-1 with the parameter's name.
std::vector<int> index_list(nb::handle h, int n, const char* param, const char* what, const char* range_owner);

// An int argument as a long long: ValueError naming `param` when it does not fit (2**64), not nanobind's bare cast
// error.
inline long long int_arg(nb::handle h, const std::string& param) {
  long long v = 0;
  if (!nb::try_cast<long long>(nb::int_(h), v))
    raise(PyExc_ValueError, param + ": " + nb::cast<std::string>(nb::repr(h)) + " is out of range");
  return v;
}

// Text as UTF-8: ValueError naming `param` when it has no UTF-8 spelling (a lone surrogate such as '\udcff').
inline std::string text_arg(nb::handle h, const std::string& param) {
  Py_ssize_t n = 0;
  const char* s = PyUnicode_AsUTF8AndSize(h.ptr(), &n);
  if (!s) {
    PyErr_Clear();
    raise(PyExc_ValueError, param + ": the text has no UTF-8 spelling (a lone surrogate such as '\\udcff'?)");
  }
  return std::string(s, (size_t)n);
}

// A callback argument: None or a callable, else TypeError naming `param` and how it is called (progress=5 failed
// later, inside the run, with "'int' object is not callable").
inline void callable_arg(nb::handle h, const std::string& param, const std::string& signature) {
  if (h.is_none() || PyCallable_Check(h.ptr())) return;
  raise(PyExc_TypeError,
        param + " must be a function called as " + signature + ", or None; got " + nb::cast<std::string>(nb::repr(h)));
}

// t as a temperature: finite and > 0, else ValueError naming `what`.
float check_temp(double t, const std::string& what,
                 const char* hint = "1 is standard attention, 0.4 the paper's focal setting");

// The one spec grammar (focal::TempSpec::parse); a malformed or non-positive spec is a ValueError. `native` needs
// cfg.
focal::TempSpec parse_temp(const std::string& text, const focal::ModelConfig* cfg, const char* param = "temp");

// temp argument: None -> the model's native setting; str; a number t; a TempSpec. Validated against the model.
focal::TempSpec to_spec(nb::handle temp, const focal::ModelConfig& cfg, const char* param = "temp");

// Text a tokenizer decoded, as a Python str: bytes that are not UTF-8 (a byte-level token can end inside a
// character) become U+FFFD instead of a UnicodeDecodeError.
inline nb::str text_of(const std::string& bytes) {
  PyObject* o = PyUnicode_DecodeUTF8(bytes.data(), (Py_ssize_t)bytes.size(), "replace");
  if (!o) throw nb::python_error();
  return nb::steal<nb::str>(o);
}

using focal::utf8_whole_end;  // focal/tokenizer.h: the end of the longest prefix of whole characters

// The row metrics' names in the order of the metrics arrays' last axis.
std::vector<std::string> metric_names();

// budget argument: None -> 2 GiB; an int of bytes; a size such as "512M" (focal::parse_byte_size, as the CLI).
size_t parse_budget(nb::handle h);

}  // namespace focalscope::py
