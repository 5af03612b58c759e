// SPDX-License-Identifier: Apache-2.0
// The Python extension module kiln._kiln: its parts (ir, transform, instrument, runtime, onnx) and
// how kiln's C++ errors become Python exceptions.
#include "bindings.hpp"

#if KILN_PYTHON_ONNX
#include <kiln/frontend/onnx/import.hpp>
#endif

#include <exception>

namespace kiln::python {

namespace {
error_types* error_classes = nullptr;

/// The Python exception a Python callback raised, when `e` (a pass_error or a vm_error) carries
/// one nested inside it: restores it, with kiln's account of where it happened as a note (Python
/// 3.11's add_note), and returns true.
bool restore_nested_python_error(const std::exception& e, const char* outermost = nullptr) {
  if (!outermost) outermost = e.what();
  try {
    std::rethrow_if_nested(e);
  } catch (py::error_already_set& nested) {
    py::object value = nested.value();
    if (value && py::hasattr(value, "add_note")) {
      std::string where(outermost);
      if (auto at = where.find("\n\nAt:"); at != std::string::npos) where.resize(at);  // pybind11's traceback
      value.attr("add_note")("(in kiln) " + where);
    }
    nested.restore();
    return true;
  } catch (const std::exception& inner) {
    return restore_nested_python_error(inner, outermost);
  } catch (...) {
  }
  return false;
}
}  // namespace

const error_types& errors() { return *error_classes; }

void init_errors(py::module_& m) {
  static error_types types;
  py::object runtime_error = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
  py::object value_error = py::reinterpret_borrow<py::object>(PyExc_ValueError);
  auto make = [&](const char* name, py::tuple bases, const char* doc) {
    py::dict ns;
    ns["__doc__"] = doc;
    ns["__module__"] = "kiln";
    py::object cls = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(&PyType_Type))(name, bases, ns);
    m.attr(name) = cls;
    return cls;
  };
  types.kiln_error = make("KilnError", py::make_tuple(runtime_error), "An error kiln reported (its C++ kiln::error)");
  types.usage_error = make("UsageError", py::make_tuple(types.kiln_error, value_error),
                           "kiln was used wrongly: a bad argument, name or option (kiln::usage_error)");
  types.parse_error = make("ParseError", py::make_tuple(types.kiln_error, value_error),
                           "Malformed IR text or pipeline text; the message gives line and column");
  types.pass_error = make("PassError", py::make_tuple(types.kiln_error),
                          "A pass failed; the message names the pass and the pipelines around it");
  types.vm_error = make("VMError", py::make_tuple(types.kiln_error), "The virtual machine failed while running a function");
  error_classes = &types;

  // Messages are shown with their control characters escaped: they may quote names from a file.
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const pass_error& e) {
      // A Python pass or instrument raised: the original exception reaches the caller unchanged.
      if (restore_nested_python_error(e)) return;
      PyErr_SetString(errors().pass_error.ptr(), kiln::detail::escape_controls(e.what()).c_str());
    } catch (const ir::parse_error& e) {
      PyErr_SetString(errors().parse_error.ptr(), kiln::detail::escape_controls(e.what()).c_str());
    } catch (const pipeline_parse_error& e) {
      PyErr_SetString(errors().parse_error.ptr(), kiln::detail::escape_controls(e.what()).c_str());
    } catch (const vm::vm_error& e) {
      if (restore_nested_python_error(e)) return;
      PyErr_SetString(errors().vm_error.ptr(), kiln::detail::escape_controls(e.what()).c_str());
    } catch (const usage_error& e) {
      PyErr_SetString(errors().usage_error.ptr(), kiln::detail::escape_controls(e.what()).c_str());
    } catch (const kiln::error& e) {
      if (restore_nested_python_error(e)) return;
      PyErr_SetString(errors().kiln_error.ptr(), kiln::detail::escape_controls(e.what()).c_str());
    }
  });
}

}  // namespace kiln::python

PYBIND11_MODULE(_kiln, m) {
  namespace kp = kiln::python;
  m.doc() = "kiln's C++ core: IR, passes, pass contexts, instruments, compiler and virtual machine";
  m.attr("__version__") = kiln::version;
  kp::init_errors(m);
  kp::init_ir(m);
  kp::init_expr(m);
  kp::init_transform(m);
  kp::init_runtime(m);
#if KILN_PYTHON_ONNX
  namespace onnx = kiln::frontend::onnx;
  kp::py::module_ o = m.def_submodule("onnx", "The ONNX importer");
  o.def(
      "import_file",
      [](const std::string& path, const std::map<std::string, std::vector<std::int64_t>>& shapes, bool keep_params_in_input,
         const std::map<std::string, std::int64_t>& upper_bounds, bool map_weights) {
        onnx::import_options opt;
        opt.shapes = shapes;
        opt.keep_params_in_input = keep_params_in_input;
        opt.upper_bounds = upper_bounds;
        opt.map_weights = map_weights;
        kp::py::gil_scoped_release release;
        return onnx::import_file(path, opt);
      },
      kp::py::arg("path"), kp::py::arg("shapes") = std::map<std::string, std::vector<std::int64_t>>{},
      kp::py::arg("keep_params_in_input") = false, kp::py::arg("upper_bounds") = std::map<std::string, std::int64_t>{},
      kp::py::arg("map_weights") = true,
      "The kiln IR of the ONNX model in `path` (one function, main); `shapes` fixes input shapes by name, `upper_bounds` bounds "
      "symbolic dimensions by name (main's tir_var_upper_bound); `map_weights`: large weights stay in the file, mapped, until "
      "compiled (the file must not be written in place meanwhile)");
  o.def(
      "import_bytes",
      [](const kp::py::bytes& data, const std::map<std::string, std::vector<std::int64_t>>& shapes, bool keep_params_in_input,
         const std::map<std::string, std::int64_t>& upper_bounds) {
        onnx::import_options opt;
        opt.shapes = shapes;
        opt.keep_params_in_input = keep_params_in_input;
        opt.upper_bounds = upper_bounds;
        std::string_view v = data;
        std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(v.data()), v.size());
        kp::py::gil_scoped_release release;
        return onnx::import_bytes(bytes, "model bytes", opt);
      },
      kp::py::arg("data"), kp::py::arg("shapes") = std::map<std::string, std::vector<std::int64_t>>{},
      kp::py::arg("keep_params_in_input") = false, kp::py::arg("upper_bounds") = std::map<std::string, std::int64_t>{},
      "The kiln IR of a serialized ONNX model");
  m.attr("has_onnx") = true;
#else
  m.attr("has_onnx") = false;
#endif
}
