// SPDX-License-Identifier: Apache-2.0
// kiln.compile and kiln.runtime from Python: compiling a module to an executable, the virtual
// machine, and numpy arrays in and out without copies.
//
// Arrays in: a C-contiguous numpy array of a dtype kiln has becomes a kiln tensor over the array's
// own memory (a storage whose allocator holds a reference to the array); anything else that numpy
// can turn into such an array is converted first. Arrays out: a kiln tensor becomes a numpy array
// over the tensor's memory, keeping the tensor alive. The GIL is released while the VM runs.
#include "bindings.hpp"

#include <pybind11/functional.h>
#include <pybind11/numpy.h>

#include <filesystem>
#include <memory>
#include <optional>

namespace kiln::python {

namespace {

/// kiln's headers as the Python package carries them (a wheel's kiln/include), or empty.
std::filesystem::path& packaged_headers() {
  static std::filesystem::path dir;
  return dir;
}

using runtime::tensor;
using vm::value;

// ---- numpy <-> kiln --------------------------------------------------------------------------------

std::optional<dtype> dtype_of(const py::dtype& d) {
  const char kind = d.kind();
  const auto size = d.itemsize();
  if (kind == 'b' && size == 1) return dtype::bool_;
  if (kind == 'i' && size == 1) return dtype::int8;
  if (kind == 'i' && size == 4) return dtype::int32;
  if (kind == 'i' && size == 8) return dtype::int64;
  if (kind == 'u' && size == 1) return dtype::uint8;
  if (kind == 'f' && size == 2) return dtype::float16;
  if (kind == 'f' && size == 4) return dtype::float32;
  if (kind == 'f' && size == 8) return dtype::float64;
  return std::nullopt;
}

py::dtype numpy_dtype(dtype t) {
  switch (t) {  // dtype::of<T> is a lookup by type number; a dtype made from its name is parsed
    case dtype::bool_: return py::dtype::of<bool>();
    case dtype::int8: return py::dtype::of<std::int8_t>();
    case dtype::int32: return py::dtype::of<std::int32_t>();
    case dtype::int64: return py::dtype::of<std::int64_t>();
    case dtype::uint8: return py::dtype::of<std::uint8_t>();
    case dtype::float16: return py::dtype("float16");
    case dtype::float32: return py::dtype::of<float>();
    case dtype::float64: return py::dtype::of<double>();
    case dtype::void_: break;
  }
  throw py::type_error("kiln: a tensor of dtype void has no numpy form");
}

/// Where a value came from, for error messages: built only when one is raised.
struct origin {
  const char* what;
  const std::string* name = nullptr;  ///< a function's name, when there is one
  std::size_t index = std::size_t(-1);
  std::string text() const {
    std::string s(what);
    if (name) s.append("['").append(*name).append("']");
    if (index != std::size_t(-1)) s.append(" argument ").append(std::to_string(index));
    return s;
  }
};

/// Hands out the memory of one numpy array, once, and holds the array until kiln lets go of it.
class borrowed_array_allocator final : public runtime::allocator {
public:
  // The data pointer of a read-only array too (np.frombuffer, a read-only memmap): kiln never
  // writes to its inputs, and a tensor it hands back over such memory is a numpy array marked
  // read-only again (tensor_to_numpy of a borrowed tensor is not made: outputs are kiln's own).
  borrowed_array_allocator(py::array a) : allocator(runtime::cpu()), data_(const_cast<void*>(a.data())), array_(std::move(a)) {}
  std::string_view type_name() const noexcept override { return "python.BorrowedArray"; }
  runtime::allocator_kind kind() const noexcept override { return runtime::allocator_kind::naive; }
  void* allocate(std::size_t) override { return data_; }
  void free(void*, std::size_t) noexcept override {}
  runtime::allocator_stats stats() const override { return {}; }

private:
  void* data_;
  py_handle array_;
};

/// The name of the capsule that keeps a kiln tensor alive under the numpy array viewing it.
constexpr const char* tensor_capsule = "kiln.runtime.Tensor";

/// `o` as a kiln tensor: the tensor itself when `o` is the array kiln returned for it (a result
/// passed back in keeps its layout and storage: a key/value cache appends in place), the same
/// memory when it is a C-contiguous array of a dtype kiln has (and writeable or not: kiln never
/// writes to its inputs), a converted copy otherwise.
tensor tensor_from_python(const py::handle& o, const origin& where) {
  if (py::isinstance<py::array>(o)) {
    const auto given = py::reinterpret_borrow<py::array>(o);
    const py::object base = given.base();
    if (base && PyCapsule_CheckExact(base.ptr()) && PyCapsule_IsValid(base.ptr(), tensor_capsule)) {
      const tensor& t = *static_cast<const tensor*>(PyCapsule_GetPointer(base.ptr(), tensor_capsule));
      bool same = given.data() == t.data() && std::size_t(given.ndim()) == t.ndim() && dtype_of(given.dtype()) == t.type();
      const auto item = py::ssize_t(size_of(t.type()));
      for (std::size_t d = 0; same && d < t.ndim(); ++d)
        same = given.shape(py::ssize_t(d)) == t.shape()[d] && given.strides(py::ssize_t(d)) == t.strides()[d] * item;
      if (same) return t;
    }
  }
  py::array a = py::array::ensure(o);
  if (!a) throw py::type_error(where.text() + ": a " + std::string(py::str(o.get_type().attr("__name__"))) + " is not an array");
  std::optional<dtype> t = dtype_of(a.dtype());
  if (!t)
    throw py::type_error(where.text() + ": numpy dtype " + std::string(py::str(a.dtype())) +
                         " has no kiln counterpart (kiln has bool, int8, int32, int64, uint8, float16, float32, float64)");
  if (!a.dtype().attr("isnative").cast<bool>())  // a byte-swapped array ('>f4'): kiln reads native order
    a = py::array::ensure(a.attr("astype")(a.dtype().attr("newbyteorder")("=")));
  if (!(a.flags() & py::array::c_style)) a = py::array::ensure(a, py::array::c_style);
  runtime::shape_vector shape(a.shape(), a.shape() + a.ndim());
  const std::size_t nbytes = std::size_t(a.nbytes());
  auto alloc = runtime::make_object<borrowed_array_allocator>(a);
  auto st = runtime::make_storage(nbytes, *alloc);
  return tensor::from_storage(st, 0, *t, std::move(shape));
}

/// A tensor as a numpy array over its memory (strides kept), which keeps the tensor alive.
py::array tensor_to_numpy(const tensor& t) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end()), strides;
  const auto item = py::ssize_t(size_of(t.type()));
  for (std::int64_t s : t.strides()) strides.push_back(py::ssize_t(s) * item);
  auto* keep = new tensor(t);
  py::capsule owner(keep, tensor_capsule, [](PyObject* c) { delete static_cast<tensor*>(PyCapsule_GetPointer(c, tensor_capsule)); });
  return py::array(numpy_dtype(t.type()), std::move(shape), std::move(strides), t.data(), owner);
}

/// kiln.runtime.ShapeTuple: a shape value (an R.Shape argument), as TVM's tvm.runtime.ShapeTuple.
struct py_shape_tuple {
  runtime::shape_vector dims;
};

/// kiln.runtime.Object: a VM value Python has no form of (a key/value cache, a closure, a
/// storage), held as it is so that it can be passed back.
struct py_vm_object {
  value v;
};

value value_from_python(const py::handle& o, const origin& where) {
  if (py::isinstance<py::array>(o)) return value(tensor_from_python(o, where));  // the common case first
  if (o.is_none()) return value();
  if (py::isinstance<py::bool_>(o)) return value(o.cast<bool>());
  if (py::isinstance<py::int_>(o)) return value(o.cast<std::int64_t>());
  if (py::isinstance<py::float_>(o)) return value(o.cast<double>());
  if (py::isinstance<py::str>(o)) return value(o.cast<std::string>());
  if (py::isinstance<py_shape_tuple>(o)) return value::shape(o.cast<const py_shape_tuple&>().dims);
  if (py::isinstance<py_vm_object>(o)) return o.cast<const py_vm_object&>().v;
  if (py::isinstance<py::tuple>(o) || py::isinstance<py::list>(o)) {
    std::vector<value> items;
    for (auto item : o.cast<py::sequence>()) items.push_back(value_from_python(item, where));
    return value::tuple(std::move(items));
  }
  return value(tensor_from_python(o, where));
}

py::object value_to_python(const value& v) {
  switch (v.kind()) {
    case vm::value_kind::null: return py::none();
    case vm::value_kind::int_: return py::int_(v.as_int());
    case vm::value_kind::float_: return py::float_(v.as_float());
    case vm::value_kind::bool_: return py::bool_(v.as_bool());
    case vm::value_kind::string: return py::str(std::string(v.as_string()));
    case vm::value_kind::tensor: return tensor_to_numpy(v.as_tensor());
    case vm::value_kind::shape: {
      py::tuple t(v.as_shape().size());
      for (std::size_t i = 0; i < v.as_shape().size(); ++i) t[i] = py::int_(v.as_shape()[i]);
      return t;
    }
    case vm::value_kind::tuple: {
      std::span<const value> items = v.as_tuple();
      py::tuple t(items.size());
      for (std::size_t i = 0; i < items.size(); ++i) t[i] = value_to_python(items[i]);
      return t;
    }
    default: return py::cast(py_vm_object{v});
  }
}

std::vector<value> values_from_python(const py::args& args, const char* what, const std::string* name = nullptr) {
  std::vector<value> out;
  out.reserve(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) out.push_back(value_from_python(args[i], origin{what, name, i}));
  return out;
}

// ---- the virtual machine ---------------------------------------------------------------------------

/// kiln.runtime.VirtualMachine: a VM over an executable, with kiln's kernels.
struct py_vm {
  std::shared_ptr<const vm::executable> exec;
  std::unique_ptr<vm::virtual_machine> machine;
  py_handle instrument;  // the Python callback set_instrument installed, if any

  explicit py_vm(std::shared_ptr<const vm::executable> e) : exec(std::move(e)) {
    machine = std::make_unique<vm::virtual_machine>(exec, vm::vm_options{}, vm::kernel_registry());
  }

  py::object call(const std::string& name, const py::args& args) {
    std::vector<value> in = values_from_python(args, "kiln.runtime.VirtualMachine", &name);
    value out;
    {
      py::gil_scoped_release release;
      out = machine->invoke_span(name, in);
    }
    return value_to_python(out);
  }
};

/// vm["main"]: a function of a VM, callable with numpy arrays; the function is looked up once.
struct py_vm_function {
  std::shared_ptr<py_vm> vm;
  std::string name;
  vm::function_handle handle;
  py::object operator()(const py::args& args) const {
    std::vector<value> in = values_from_python(args, "kiln.runtime.VirtualMachine", &name);
    value out;
    {
      py::gil_scoped_release release;
      out = handle.call(in);
    }
    return value_to_python(out);
  }
};

/// kiln.runtime.Decoder: kiln::vm::decoder over a VirtualMachine, which it keeps alive.
struct py_decoder {
  std::shared_ptr<py_vm> vm;
  vm::decoder decoder;

  py_decoder(std::shared_ptr<py_vm> v, const std::string& function) : vm(std::move(v)), decoder(*vm->machine, function) {}

  std::vector<std::vector<std::int64_t>> generate(const std::vector<std::vector<std::int64_t>>& prompts, std::int64_t max_new_tokens,
                                                  std::optional<std::int64_t> stop_token, std::int64_t pad_token, double temperature,
                                                  std::int64_t top_k, double top_p, std::uint64_t seed, const py::object& on_token) {
    vm::generate_options o;
    o.max_new_tokens = max_new_tokens;
    o.stop_token = stop_token;
    o.pad_token = pad_token;
    o.temperature = temperature;
    o.top_k = top_k;
    o.top_p = top_p;
    o.seed = seed;
    if (!on_token.is_none()) {
      if (!PyCallable_Check(on_token.ptr())) throw py::type_error("kiln.runtime.Decoder.generate: on_token must be callable");
      o.on_token = [&on_token](std::size_t row, std::int64_t token) {
        py::gil_scoped_acquire hold;
        on_token(row, token);
      };
    }
    py::gil_scoped_release release;
    return decoder.generate(prompts, o);
  }
};

struct py_timing {
  vm::timing_result r;
};

/// What a Python instrument returned: None or VMInstrumentReturnKind.NO_OP (0) runs the call,
/// SKIP_RUN (1) skips it; anything else is a TypeError or ValueError that says so.
vm::instrument_action instrument_result(const py::object& r, std::string_view symbol) {
  if (r.is_none()) return vm::instrument_action::no_op;
  const auto bad = [&](const std::string& got) {
    return "kiln.runtime.VirtualMachine instrument (called for '" + kiln::detail::printable(symbol) +
           "'): expected None, VMInstrumentReturnKind.NO_OP (0) or VMInstrumentReturnKind.SKIP_RUN (1), got " + got;
  };
  // Raised as Python exceptions, so that they reach the caller as an instrument's own would.
  const auto raise = [](PyObject* type, const std::string& message) {
    PyErr_SetString(type, message.c_str());
    throw py::error_already_set();
  };
  if (!PyLong_Check(r.ptr()) && !PyIndex_Check(r.ptr()))
    raise(PyExc_TypeError, bad("a " + std::string(py::str(r.get_type().attr("__name__")))));
  const py::int_ i = py::reinterpret_steal<py::int_>(PyNumber_Index(r.ptr()));
  if (!i) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow == 0 && v == int(vm::instrument_action::no_op)) return vm::instrument_action::no_op;
  if (overflow == 0 && v == int(vm::instrument_action::skip_run)) return vm::instrument_action::skip_run;
  raise(PyExc_ValueError, bad(std::string(py::repr(r))));
  return vm::instrument_action::no_op;  // not reached
}

}  // namespace

void init_runtime(py::module_& m) {
  py::module_ rt = m.def_submodule("runtime", "The executable and the virtual machine");

  py::class_<vm::executable, std::shared_ptr<vm::executable>>(rt, "Executable", "A compiled module: bytecode and constants")
      .def("as_text", &vm::executable::as_text, "The bytecode as text")
      .def("as_python", &vm::executable::as_python, "The bytecode as the Python-like form TVM prints")
      .def("stats", &vm::executable::stats, "Functions, instructions and constants, summarised")
      .def_property_readonly("function_names",
                             [](const vm::executable& e) {
                               std::vector<std::string> out;
                               for (const auto& f : e.functions) out.push_back(f.name);
                               return out;
                             }, "The names of the executable's functions (its own and the natives it calls)")
      .def("save", [](const vm::executable& e, const std::string& path) { vm::save_executable(e, path); }, py::arg("path"),
           "Writes the executable to `path` (kiln's executable format)")
      .def_property_readonly("generated_source", [](const vm::executable& e) { return e.generated_source; },
                             "The C++ of the compiled functions (exec_mode='compiled'), else ''")
      .def(
          "export_library",
          [](const vm::executable& e, const std::string& path, std::optional<std::string> compiler, std::optional<std::vector<std::string>> flags) {
            vm::export_options o;
            if (compiler) o.compiler = *compiler;
            if (flags) o.flags = *flags;
            const char* env = std::getenv("KILN_INCLUDE_DIR");
            if (!(env && *env)) o.kiln_include_dir = packaged_headers();  // a wheel's kiln/include; else as C++ finds them
            py::gil_scoped_release release;
            vm::export_library(e, path, o);
          },
          py::arg("path"), py::arg("compiler") = py::none(), py::arg("flags") = py::none(),
          "Builds an executable compiled with exec_mode='compiled' into the shared library `path` with the C++ compiler "
          "(compiler: default $CXX, else the one kiln was configured with; flags: default -O3 -march=native)")
      .def("__bytes__",
           [](const vm::executable& e) {
             std::vector<std::byte> b = vm::serialize(e);
             return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
           });
  rt.def(
      "load_executable",
      [](const std::string& path) { return std::make_shared<vm::executable>(vm::load_executable(path)); }, py::arg("path"),
      "Reads an executable `save` wrote; a kiln.KilnError naming what is wrong with a bad file");
  rt.def(
      "load_module",
      [](const std::string& path) {
        py::gil_scoped_release release;
        return std::make_shared<vm::executable>(vm::load_module(path));
      },
      py::arg("path"),
      "Loads a shared library export_library built: its executable, with the compiled functions attached. Loading a library runs "
      "its code (its constructors): load only libraries you built or trust. A file that is not a kiln library is refused before "
      "it is loaded.");
  rt.def(
      "_set_packaged_headers", [](const std::string& dir) { packaged_headers() = dir; }, py::arg("dir"),
      "Where export_library finds kiln's headers when KILN_INCLUDE_DIR is not set (the wheel's kiln/include)");
  rt.def(
      "executable_from_bytes",
      [](const py::bytes& data) {
        std::string_view v = data;
        return std::make_shared<vm::executable>(
            vm::deserialize(std::span<const std::byte>(reinterpret_cast<const std::byte*>(v.data()), v.size())));
      },
      py::arg("data"), "An executable from the bytes bytes(executable) gave (kiln's executable format); a kiln.VMError saying what is wrong with bad bytes");

  py::class_<py_timing>(rt, "BenchmarkResult", "Times from time_evaluator, in seconds (TVM's BenchmarkResult)")
      .def_property_readonly("results", [](const py_timing& t) { return t.r.results; }, "The time of each repeat, in seconds (each the mean of `number` calls)")
      .def_property_readonly("mean", [](const py_timing& t) { return t.r.mean(); }, "The mean of results, in seconds")
      .def_property_readonly("median", [](const py_timing& t) { return t.r.median(); }, "The median of results, in seconds")
      .def_property_readonly("min", [](const py_timing& t) { return t.r.min(); }, "The smallest of results, in seconds")
      .def_property_readonly("max", [](const py_timing& t) { return t.r.max(); }, "The largest of results, in seconds")
      .def_property_readonly("std", [](const py_timing& t) { return t.r.stddev(); }, "The standard deviation of results, in seconds")
      .def_property_readonly("number", [](const py_timing& t) { return t.r.number; }, "The calls each result is the mean of")
      .def("__repr__", [](const py_timing& t) {
        char line[200];
        std::snprintf(line, sizeof line, "BenchmarkResult(mean=%.6g s, median=%.6g s, min=%.6g s, max=%.6g s, std=%.3g s, %zu repeats of %d)",
                      t.r.mean(), t.r.median(), t.r.min(), t.r.max(), t.r.stddev(), t.r.results.size(), t.r.number);
        return std::string(line);
      });

  py::class_<py_shape_tuple>(rt, "ShapeTuple", "A shape, passed where a function takes R.Shape (TVM's tvm.runtime.ShapeTuple)")
      .def(py::init([](const std::vector<std::int64_t>& dims) { return py_shape_tuple{runtime::shape_vector(dims.begin(), dims.end())}; }),
           py::arg("shape"))
      .def("__len__", [](const py_shape_tuple& s) { return s.dims.size(); })
      .def("__getitem__",
           [](const py_shape_tuple& s, std::int64_t i) {
             const auto n = std::int64_t(s.dims.size());
             if (i < -n || i >= n) throw py::index_error("kiln.runtime.ShapeTuple: index " + std::to_string(i) + " out of range for " + std::to_string(n) + " dimensions");
             return s.dims[std::size_t(i < 0 ? i + n : i)];
           })
      .def("__eq__", [](const py_shape_tuple& a, const py_shape_tuple& b) { return a.dims == b.dims; })
      .def("__repr__", [](const py_shape_tuple& s) {
        std::string r = "ShapeTuple([";
        for (std::size_t i = 0; i < s.dims.size(); ++i) r += (i ? ", " : "") + std::to_string(s.dims[i]);
        return r + "])";
      });

  py::class_<py_vm_object>(rt, "Object",
                           "A VM value with no Python form (a key/value cache, a closure, a storage), held as it is: pass it back "
                           "to the VM as an argument")
      .def_property_readonly("type_name", [](const py_vm_object& o) {
        return o.v.holds_object() ? std::string(o.v.as_object().type_name()) : std::string(vm::name(o.v.kind()));
      }, "The object's type, e.g. vm.AttentionKVCache")
      .def("__repr__", [](const py_vm_object& o) {
        return "<kiln.runtime.Object " + std::string(o.v.holds_object() ? o.v.as_object().type_name() : vm::name(o.v.kind())) + ">";
      });

  py::class_<py_vm_function>(rt, "Function", "A function of a virtual machine; call it with numpy arrays")
      .def("__call__", &py_vm_function::operator())
      .def_readonly("name", &py_vm_function::name, "The function's name");

  py::class_<py_vm, std::shared_ptr<py_vm>>(rt, "VirtualMachine",
                                            "kiln's virtual machine running an executable.\n\n"
                                            "A machine serves one caller at a time: a call made while another thread is inside it raises "
                                            "kiln.UsageError. Use one VirtualMachine per thread; machines may share one Executable.")
      .def(py::init([](std::shared_ptr<vm::executable> e) { return std::make_shared<py_vm>(std::move(e)); }), py::arg("exec"))
      .def("__getitem__",
           [](const std::shared_ptr<py_vm>& self, const std::string& name) {
             if (!self->machine->has_function(name)) {
               std::string names;
               for (const auto& f : self->exec->functions)
                 if (f.kind != vm::function_kind::native) names.append(names.empty() ? "" : ", ").append(f.name);
               throw py::key_error("kiln.runtime.VirtualMachine: no function named '" + name + "' (the executable has: " + names + ")");
             }
             return py_vm_function{self, name, self->machine->get_function(name)};
           })
      .def("invoke", [](py_vm& self, const std::string& name, const py::args& args) { return self.call(name, args); },
           py::arg("name"), "Calls function `name` with the arguments (numpy arrays, ints, floats, tuples) and returns its result")
      .def("set_input",
           [](py_vm& self, const std::string& name, const py::args& args) {
             self.machine->set_input_span(name, values_from_python(args, "kiln.runtime.VirtualMachine.set_input", &name));
           },
           py::arg("func_name"), "Stores the arguments for invoke_stateful(func_name)")
      .def("invoke_stateful",
           [](py_vm& self, const std::string& name) {
             py::gil_scoped_release release;
             self.machine->invoke_stateful(name);
           },
           py::arg("func_name"), "Calls `func_name` with the arguments set_input stored; get_outputs(func_name) returns the result")
      .def("get_outputs", [](const py_vm& self, const std::string& name) { return value_to_python(self.machine->get_outputs(name)); },
           py::arg("func_name"), "The result of the last invoke_stateful(func_name)")
      .def("save_function",
           [](py_vm& self, const std::string& name, const std::string& saved_name, const py::args& args, bool include_return) {
             self.machine->save_function_span(name, saved_name, vm::save_options{include_return},
                                              values_from_python(args, "kiln.runtime.VirtualMachine.save_function", &name));
           },
           py::arg("func_name"), py::arg("saved_name"), py::kw_only(), py::arg("include_return") = true,
           "Binds arguments to func_name under saved_name (TVM's save_function)")
      .def("time_evaluator",
           [](const std::shared_ptr<py_vm>& self, const std::string& name, int number, int repeat, double min_repeat_ms) {
             auto timer = self->machine->time_evaluator(name, number, repeat, min_repeat_ms);
             return py::cpp_function([self, timer](const py::args& args) {
               std::vector<value> in = values_from_python(args, "time_evaluator");
               py_timing t;
               py::gil_scoped_release release;
               t.r = timer(in);
               return t;
             });
           },
           py::arg("func_name"), py::arg("number") = 10, py::arg("repeat") = 1, py::arg("min_repeat_ms") = 0.0,
           "A function that runs func_name number x repeat times on its arguments and returns a BenchmarkResult")
      .def("set_instrument",
           [](py_vm& self, const py::object& fn) {
             if (fn.is_none()) {
               self.machine->set_instrument({});
               return;
             }
             if (!PyCallable_Check(fn.ptr())) throw py::type_error("kiln.runtime.VirtualMachine.set_instrument: the instrument must be callable");
             auto handle = std::make_shared<py_handle>(fn);
             self.machine->set_instrument([handle](const value&, std::string_view symbol, bool before_run, const value& ret,
                                                   vm::call_args args) {
               py::gil_scoped_acquire gil;
               py::list py_args;
               for (std::size_t i = 0; i < args.size(); ++i) py_args.append(value_to_python(args[i]));
               py::object r = handle->get()(py::str(std::string(symbol)), py::str(std::string(symbol)), before_run,
                                            before_run ? py::object(py::none()) : value_to_python(ret), *py_args);
               return instrument_result(r, symbol);
             });
           },
           py::arg("instrument"),
           "Calls instrument(func, func_symbol, before_run, ret_value, *args) around every call the bytecode makes; "
           "returning VMInstrumentReturnKind.SKIP_RUN before a call skips it. Arrays it receives are valid during the call only.");

  py::class_<py_decoder>(rt, "Decoder",
                         "Autoregressive generation with a decoder that carries its key/value cache (kiln::vm::decoder).\n\n"
                         "The function takes input_ids, attention_mask and position_ids (both optional) and past_* caches, and returns "
                         "the logits and the grown caches in the caches' order: the decoder-with-past form Hugging Face Optimum exports "
                         "(scripts/gpt2.py writes one).")
      .def(py::init([](std::shared_ptr<py_vm> vm, const std::string& function) { return py_decoder(std::move(vm), function); }),
           py::arg("vm"), py::arg("function") = "main")
      .def_property_readonly("cache_names",
                             [](const py_decoder& d) {
                               std::vector<std::string> names;
                               for (const auto& c : d.decoder.layout().caches) names.push_back(c.name);
                               return names;
                             },
                             "The function's cache parameters, in the order it returns them")
      .def("generate", &py_decoder::generate, py::arg("prompts"), py::kw_only(), py::arg("max_new_tokens") = 64,
           py::arg("stop_token") = py::none(), py::arg("pad_token") = 0, py::arg("temperature") = 0.0, py::arg("top_k") = 0,
           py::arg("top_p") = 1.0, py::arg("seed") = 0, py::arg("on_token") = py::none(),
           "Generates up to max_new_tokens tokens after each prompt (a list of token-id lists, one row of the batch each; "
           "rows of different lengths are padded on the left). temperature 0 is greedy; above 0, tokens are sampled from "
           "softmax(logits / temperature) among the top_k most likely (0: all) and the fewest whose probability reaches top_p, "
           "from a generator seeded with seed. A row ends after stop_token (kept). on_token(row, token) is called as each "
           "token is chosen. Returns the new tokens of each row.");

  rt.def("set_num_threads", [](std::size_t n) { kernels::set_num_threads(n); }, py::arg("n"),
         "The threads kiln's kernels use (the calling thread and n - 1 workers)");
  rt.def("num_threads", [] { return kernels::num_threads(); }, "The threads kiln's kernels use");
  rt.def("isa", [] { return std::string(kernels::isa()); },
         "The instruction-set level of the kernels that run: 'x86-64', 'x86-64-v3' (AVX2) or 'x86-64-v4' (AVX-512), the best this CPU "
         "supports unless the environment variable KILN_ISA named a lower one when kiln was loaded");
  rt.def("isa_report", [] { return kernels::isa_report(); },
         "isa() with its vectors and how it was chosen, e.g. 'x86-64-v4 (AVX-512), chosen at run time among x86-64, x86-64-v3, x86-64-v4'");
  rt.def(
      "cpu_caches",
      [] {
        const kernels::cache_info c = kernels::cpu_caches();
        py::dict d;
        d["l1d"] = c.l1d;
        d["l2"] = c.l2;
        d["l3"] = c.l3;
        d["l3_shared_by"] = c.l3_shared_by;
        d["source"] = std::string(c.source);
        return d;
      },
      "The data caches the kernels block for, in bytes: {'l1d', 'l2', 'l3', 'l3_shared_by' (logical CPUs sharing the L3, 0 when "
      "unknown), 'source' (where they were read: 'sysfs', 'CPUID leaf 4', 'CPUID 0x8000001D', 'CPUID 0x80000005/6', 'assumed'; "
      "'set' when C++ code set them with set_cpu_caches)}");
  rt.def("_roundtrip", [](const py::object& o) { return value_to_python(value_from_python(o, origin{"roundtrip"})); },
         "Converts to a kiln value and back (tests the zero-copy path)");

  m.def(
      "compile",
      [](const ir::ir_module& mod, const std::optional<std::string>& pipeline, std::optional<int> opt_level, const std::string& exec_mode,
         bool instrumented) {
        compile_options options;
        options.pipeline = pipeline;
        options.opt_level = opt_level;
        if (exec_mode == "compiled") options.mode = exec_mode::compiled;
        else if (exec_mode != "bytecode")
          throw usage_error("kiln.compile: exec_mode must be 'bytecode' or 'compiled', not '" + exec_mode + "'");
        if (instrumented && exec_mode != "compiled") throw usage_error("kiln.compile: instrumented=True is for exec_mode='compiled'");
        options.cpp.instrumented = instrumented;
        py::gil_scoped_release release;
        return std::make_shared<vm::executable>(kiln::compile(mod, options));
      },
      py::arg("mod"), py::arg("pipeline") = py::none(), py::arg("opt_level") = py::none(), py::arg("exec_mode") = "bytecode",
      py::arg("instrumented") = false, "Compiles a module to an executable (the design's tvm.compile), under the current pass context");
  m.def(
      "_compile_with_pass",
      [](const ir::ir_module& mod, const kiln::pass<ir::ir_module>& pipeline, std::optional<int> opt_level, const std::string& exec_mode,
         bool instrumented) {
        if (exec_mode != "compiled" && exec_mode != "bytecode")
          throw usage_error("kiln.compile: exec_mode must be 'bytecode' or 'compiled', not '" + exec_mode + "'");
        if (instrumented && exec_mode != "compiled") throw usage_error("kiln.compile: instrumented=True is for exec_mode='compiled'");
        std::optional<pass_context> own;
        pass_context& ctx = kiln::detail::compile_context(own, opt_level, "kiln.compile");
        py::gil_scoped_release release;
        if (exec_mode == "bytecode") return std::make_shared<vm::executable>(kiln::compile(mod, pipeline, ctx));
        ir::ir_module lowered = pipeline(mod, ctx);
        return std::make_shared<vm::executable>(codegen::cpp_codegen(lowered, {.instrumented = instrumented}));
      },
      py::arg("mod"), py::arg("pipeline"), py::arg("opt_level") = py::none(), py::arg("exec_mode") = "bytecode",
      py::arg("instrumented") = false);
}

}  // namespace kiln::python
