// SPDX-License-Identifier: Apache-2.0
// kiln.ir from Python: modules parsed from and printed to the text format, their functions,
// attributes and types, structural equality and hashing.
#include "bindings.hpp"

#include <sstream>

namespace kiln::python {

/// An attribute as the Python value it reads as.
py::object attr_to_python(const ir::attr_value& v) {
  return std::visit(
      [](const auto& x) -> py::object {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) return py::none();
        else if constexpr (std::is_same_v<T, dtype>) return py::str(std::string(name(x)));
        else return py::cast(x);
      },
      v.raw());
}

/// A Python value as an attribute: None, bool, int, float, str, a list of ints or floats, a dict
/// of ints. A TypeError that names the key otherwise.
ir::attr_value attr_from_python(const std::string& key, const py::handle& o) {
  if (o.is_none()) return {};
  if (py::isinstance<py::bool_>(o)) return o.cast<bool>();
  if (py::isinstance<py::int_>(o)) return o.cast<std::int64_t>();
  if (py::isinstance<py::float_>(o)) return o.cast<double>();
  if (py::isinstance<py::str>(o)) return o.cast<std::string>();
  if (py::isinstance<py::list>(o) || py::isinstance<py::tuple>(o)) {
    auto seq = o.cast<py::sequence>();
    bool all_int = true;
    for (auto item : seq) all_int = all_int && py::isinstance<py::int_>(item) && !py::isinstance<py::bool_>(item);
    if (all_int) return ir::int_array(o.cast<std::vector<std::int64_t>>());
    bool all_number = true;
    for (auto item : seq)
      all_number = all_number && (py::isinstance<py::int_>(item) || py::isinstance<py::float_>(item)) && !py::isinstance<py::bool_>(item);
    if (all_number) return ir::float_array(o.cast<std::vector<double>>());
  }
  if (py::isinstance<py::dict>(o)) {
    try {
      return o.cast<ir::int_dict>();
    } catch (const py::cast_error&) {
    }
  }
  throw py::type_error("kiln.ir: attribute '" + key + "' cannot hold a " + std::string(py::str(o.get_type().attr("__name__"))) +
                       " (attributes are None, bool, int, float, str, a list of ints or floats, or a dict of str to int)");
}

py::dict attrs_to_python(const ir::attr_map& a) {
  py::dict d;
  for (const auto& [k, v] : a) d[py::str(k)] = attr_to_python(v);
  return d;
}

namespace {

/// The first lines where two printed modules differ, for assert_structural_equal's message.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ha = static_cast<bool>(std::getline(sa, la)), hb = static_cast<bool>(std::getline(sb, lb));
    if (!ha && !hb) return "the printed forms are the same; they differ in what the text does not show (types or identities)";
    if (ha != hb || la != lb)
      return "first difference at line " + std::to_string(line) + ":\n  lhs: " + (ha ? la : "<end>") + "\n  rhs: " + (hb ? lb : "<end>");
  }
}

}  // namespace

void init_ir(py::module_& m) {
  py::module_ ir_m = m.def_submodule("ir", "kiln's tensor IR: modules, functions, structural equality");

  py::class_<ir::base_func>(ir_m, "BaseFunc", "A function of a module: a graph-level Function or a PrimFunc")
      .def_property_readonly("kind", [](const ir::base_func& f) { return ir::isa<ir::function_node>(f) ? "function" : "prim_func"; }, "\"function\" for a graph-level function, \"prim_func\" for a kernel function")
      .def_property_readonly("attrs", [](const ir::base_func& f) { return attrs_to_python(f->attrs); }, "The function's attributes, as a dict")
      .def_property_readonly("params",
                             [](const ir::base_func& f) {
                               std::vector<ir::expr> out;
                               const std::vector<ir::var>* params = nullptr;
                               if (auto* fn = ir::dyn_cast<ir::function_node>(f)) params = &fn->params;
                               else params = &static_cast<const ir::prim_func_node&>(*f).params;
                               for (const ir::var& v : *params) out.emplace_back(v);
                               return out;
                             },
                             "The parameters, as kiln.ir.Expr variables (name_hint, type)")
      .def_property_readonly("body",
                             [](const ir::base_func& f) -> py::object {
                               if (auto* fn = ir::dyn_cast<ir::function_node>(f)) return py::cast(fn->body);
                               const auto& pf = static_cast<const ir::prim_func_node&>(*f);
                               return pf.body ? py::cast(pf.body) : py::object(py::none());
                             },
                             "The body: a seq expression (blocks of bindings, then the result)")
      .def_property_readonly("ret_type",
                             [](const ir::base_func& f) -> std::string {
                               if (auto* fn = ir::dyn_cast<ir::function_node>(f)) return ir::to_string(fn->ret_type);
                               return ir::to_string(static_cast<const ir::prim_func_node&>(*f).output_type());
                             }, "The return type, as text")
      .def_property_readonly("signature", [](const ir::base_func& f) { return ir::to_string(f->signature()); }, "The function's type, as text (R.Callable(...))")
      .def(
          "with_attr",
          [](const ir::base_func& f, const std::string& key, const py::object& value) {
            return ir::with_attr(f, key, attr_from_python(key, value));
          },
          py::arg("key"), py::arg("value"), "A copy with attribute `key` set to `value`")
      .def(
          "script",
          [](const ir::base_func& f, const std::string& name, bool show_meta) {
            return ir::print(name, f, show_meta ? ir::print_options{} : ir::print_options::readable());
          },
          py::arg("name") = "f", py::arg("show_meta") = false,
          "The function in the text format, under `name`; constants of more than 16 elements elided unless show_meta")
      .def("__str__", [](const ir::base_func& f) { return ir::print("f", f, ir::print_options::readable()); })
      .def("same_as", [](const ir::base_func& a, const ir::base_func& b) { return a.get() == b.get(); }, "True when both are the same function object");

  py::class_<ir::ir_module>(ir_m, "IRModule", "An immutable module of named functions (kiln's IRModule)")
      .def(py::init([] { return ir::make_module(); }), "An empty module")
      .def_static(
          "from_text", [](const std::string& text) { return ir::parse_module(text); }, py::arg("text"),
          "Parses the text format (what script(show_meta=True) prints); a kiln.ParseError with line and column when it is "
          "malformed, or when its constants were elided")
      .def(
          "script",
          [](const ir::ir_module& mod, bool show_meta) {
            return ir::print(mod, show_meta ? ir::print_options{} : ir::print_options::readable());
          },
          py::arg("show_meta") = false,
          "The module in the text format. As TVM's, it leaves large constants out unless show_meta: constants of more than "
          "16 elements print as R.const(meta[i], dtype, shape=...); with show_meta=True every element is printed and the "
          "text reads back with from_text")
      .def(
          "show",
          [](const ir::ir_module& mod, bool show_meta) {
            py::print(ir::print(mod, show_meta ? ir::print_options{} : ir::print_options::readable()), py::arg("end") = "");
          },
          py::arg("show_meta") = false, "Prints script(show_meta) (TVM's IRModule.show)")
      .def("to_dot", [](const ir::ir_module& mod) { return ir::to_dot(mod); },
           "The module as a Graphviz digraph (one cluster per function, one node per binding, fused kernels as clusters); "
           "render it with `dot -Tsvg`")
      .def("__str__", [](const ir::ir_module& mod) { return ir::print(mod, ir::print_options::readable()); })
      .def("__repr__", [](const ir::ir_module& mod) {
        std::string names;
        for (const auto& e : mod->functions()) names.append(names.empty() ? "" : ", ").append(e.gv->name);
        return "<kiln.ir.IRModule with " + std::to_string(mod->size()) + " function(s): " + names + ">";
      })
      .def("__len__", [](const ir::ir_module& mod) { return mod->size(); })
      .def("__contains__", [](const ir::ir_module& mod, const std::string& name) { return mod->contains(name); })
      .def("__getitem__",
           [](const ir::ir_module& mod, const std::string& name) {
             if (!mod->contains(name)) {
               std::string names;
               for (const auto& e : mod->functions()) names.append(names.empty() ? "" : ", ").append(e.gv->name);
               throw py::key_error("kiln.ir.IRModule: no function named '" + name + "' (the module has: " +
                                   (names.empty() ? "none" : names) + ")");
             }
             return mod->lookup(name);
           })
      .def("get_global_vars",
           [](const ir::ir_module& mod) {
             std::vector<std::string> out;
             for (const auto& e : mod->functions()) out.push_back(e.gv->name);
             return out;
           },
           "The names of the functions, in module order")
      .def("functions_items",
           [](const ir::ir_module& mod) {
             std::vector<std::pair<std::string, ir::base_func>> out;
             for (const auto& e : mod->functions()) out.emplace_back(e.gv->name, e.func);
             return out;
           },
           "(name, function) pairs, in module order")
      .def("with_function", [](const ir::ir_module& mod, const std::string& name, const ir::base_func& f) {
        return ir::with_function(mod, name, f);
      }, py::arg("name"), py::arg("func"), "A copy with function `name` added or replaced")
      .def("without_function", [](const ir::ir_module& mod, const std::string& name) { return ir::without_function(mod, name); },
           py::arg("name"), "A copy without function `name`")
      .def_property_readonly("attrs", [](const ir::ir_module& mod) { return attrs_to_python(mod->attrs); }, "The module's attributes, as a dict")
      .def("with_attr",
           [](const ir::ir_module& mod, const std::string& key, const py::object& value) {
             return ir::with_module_attrs(mod, mod->attrs.with(key, attr_from_python(key, value)));
           },
           py::arg("key"), py::arg("value"), "A copy with module attribute `key` set to `value`")
      .def("same_as", [](const ir::ir_module& a, const ir::ir_module& b) { return a.get() == b.get(); },
           "True when both are the same module object (a pass that changed nothing returns its input)")
      .def("verify",
           [](const ir::ir_module& mod) {
             std::vector<std::string> out;
             for (const ir::diagnostic& d : ir::verify(mod)) out.push_back(d.to_string());
             return out;
           },
           "The verifier's messages; empty when the module is well formed");

  ir_m.def("structural_equal", [](const ir::ir_module& a, const ir::ir_module& b) { return ir::structural_equal(a, b); },
           py::arg("lhs"), py::arg("rhs"), "True when the modules are the same IR up to the names of bound variables");
  ir_m.def("structural_equal", [](const ir::base_func& a, const ir::base_func& b) { return ir::structural_equal(a, b); },
           py::arg("lhs"), py::arg("rhs"));
  ir_m.def("structural_hash", [](const ir::ir_module& a) { return ir::structural_hash(a); }, py::arg("node"),
           "A hash consistent with structural_equal");
  ir_m.def("structural_hash", [](const ir::base_func& a) { return ir::structural_hash(a); }, py::arg("node"));
  ir_m.def(
      "assert_structural_equal",
      [](const ir::ir_module& a, const ir::ir_module& b) {
        if (ir::structural_equal(a, b)) return;
        const std::string ta = ir::print(a), tb = ir::print(b);
        throw py::value_error("kiln.ir.assert_structural_equal: the modules differ; " + first_difference(ta, tb) +
                              "\nlhs:\n" + ta + "\nrhs:\n" + tb);
      },
      py::arg("lhs"), py::arg("rhs"), "Raises ValueError, showing where the printed forms differ, unless structurally equal");
}

}  // namespace kiln::python
