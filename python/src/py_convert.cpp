// Python arguments to runtime values (py_convert.h).
#include "py_convert.h"

#include <algorithm>
#include <cmath>

#include "focal/byte_size.h"
#include "focal/error.h"
#include "focal/metrics.h"

namespace focalscope::py {

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
    check(int_arg(h, param));
    return out;
  }
  if (!PySequence_Check(h.ptr()) || PyUnicode_Check(h.ptr()) || PyBytes_Check(h.ptr()))
    raise(PyExc_TypeError, std::string(param) + ": expected None, an int or a sequence of ints, got " +
                               nb::cast<std::string>(nb::str(h.type().attr("__name__"))));
  for (nb::handle item : nb::iter(h)) {
    if (!PyIndex_Check(item.ptr()) || PyBool_Check(item.ptr()))
      raise(PyExc_TypeError, std::string(param) + ": every item must be an int, got " +
                                 nb::cast<std::string>(nb::str(item.type().attr("__name__"))));
    check(int_arg(item, param));
  }
  return out;
}

float check_temp(double t, const std::string& what, const char* hint) {
  if (!focal::temp_in_range(t))  // the argument itself, before fp32 rounds 1e-50 to 0 or 1e50 to inf
    raise(PyExc_ValueError, what + " " + focal::kTempRangeText + " (got " +
                                nb::cast<std::string>(nb::repr(nb::float_(t))) + "); " + hint);
  return (float)t;
}

// The one spec grammar (focal::TempSpec::parse); a malformed or non-positive spec is a ValueError. `native` needs
// cfg.
focal::TempSpec parse_temp(const std::string& text, const focal::ModelConfig* cfg, const char* param) {
  try {
    return focal::TempSpec::parse(text, param, cfg);
  } catch (const focal::Error& e) { raise(PyExc_ValueError, e.what()); }
}

// temp argument: None -> the model's native setting; str; a number t; a TempSpec. Validated against the model.
focal::TempSpec to_spec(nb::handle temp, const focal::ModelConfig& cfg, const char* param) {
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

std::vector<std::string> metric_names() {
  std::vector<std::string> v;
  v.reserve(focal::kNumRowMetrics);
  for (int i = 0; i < focal::kNumRowMetrics; ++i) v.emplace_back(focal::row_metric_name(i));
  return v;
}

size_t parse_budget(nb::handle h) {
  if (h.is_none()) return size_t(2) << 30;
  if (PyLong_Check(h.ptr())) {
    const long long b = int_arg(h, "budget");
    if (b <= 0) raise(PyExc_ValueError, "budget: must be > 0 bytes");
    return (size_t)b;
  }
  if (PyUnicode_Check(h.ptr())) {
    const std::string s = nb::cast<std::string>(h);
    const std::optional<uint64_t> v = focal::parse_byte_size(s);
    if (!v) raise(PyExc_ValueError, "budget: '" + s + "' is not a positive size (use e.g. 512M or 2G)");
    return (size_t)*v;
  }
  raise(PyExc_TypeError, "budget: expected bytes as an int or a size such as '512M' or '2G'");
}

}  // namespace focalscope::py
