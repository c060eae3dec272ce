// Shared by the focalscope._core sources: nanobind with the type casters every binding uses, raise(), and numpy
// views of the runtime's buffers.
#pragma once

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

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace focalscope::py {

namespace nb = nanobind;
namespace fs = std::filesystem;

// Raises a Python exception of `type` with `msg` (throws nb::python_error).
[[noreturn]] inline void raise(PyObject* type, const std::string& msg) {
  PyErr_SetString(type, msg.c_str());
  throw nb::python_error();
}

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

}  // namespace focalscope::py
