// The error / Ctrl-C bridge of focalscope._core: a Python error raised while the runtime ran without the GIL.
#pragma once

#include "py_common.h"

namespace focalscope::py {

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

}  // namespace focalscope::py
