// SPDX-License-Identifier: Apache-2.0
/// \file
/// What the parts of the Python module (`kiln._kiln`) share: the pybind11 namespace, the init
/// function of each part, and `py_handle`, a Python object that C++ state may hold and drop from
/// any thread.
#pragma once

#include <kiln/kiln.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>

namespace kiln::python {

namespace py = pybind11;

void init_errors(py::module_& m);
void init_ir(py::module_& m);
void init_transform(py::module_& m);
void init_runtime(py::module_& m);
void init_expr(py::module_& m);  // after init_ir

/// IR attributes to and from Python values (ir.cpp): None, bool, int, float, str, dtype (as str),
/// lists of ints or floats, dicts of str to int. attr_from_python raises a TypeError naming `key`.
py::object attr_to_python(const ir::attr_value& v);
py::dict attrs_to_python(const ir::attr_map& a);
ir::attr_value attr_from_python(const std::string& key, const py::handle& o);

/// A strong reference to a Python object, held by C++ state that may be released without the GIL
/// (a pass in a pipeline, an instrument in a context, a tensor that borrows a numpy array): the
/// reference is dropped under the GIL, and leaked once the interpreter is finalizing (nothing may
/// run Python then).
class py_handle {
public:
  py_handle() = default;
  explicit py_handle(py::object o) : obj_(std::move(o)) {}
  py_handle(const py_handle& o) {
    py::gil_scoped_acquire gil;
    obj_ = o.obj_;
  }
  py_handle& operator=(const py_handle&) = delete;
  ~py_handle() {
    if (!obj_) return;
    if (!Py_IsInitialized() || _Py_IsFinalizing()) {
      (void)obj_.release();
      return;
    }
    py::gil_scoped_acquire gil;
    obj_ = py::object();
  }
  /// Only with the GIL held.
  const py::object& get() const noexcept { return obj_; }

private:
  py::object obj_;
};

/// Python's exception classes for kiln's errors (kiln.KilnError and its subclasses), set by
/// init_errors.
struct error_types {
  py::object kiln_error, usage_error, parse_error, pass_error, vm_error;
};
const error_types& errors();

}  // namespace kiln::python
