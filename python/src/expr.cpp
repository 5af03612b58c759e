// SPDX-License-Identifier: Apache-2.0
// Expressions from Python: read-only views of kiln's IR expressions, constructors that infer
// types as the C++ builder does, a mutator a Python class can subclass (post-order rewrite hooks
// over kiln's ir::expr_mutator), and the dataflow pattern language with rewrite_bindings.
#include "bindings.hpp"

#include <kiln/transform/pattern.hpp>
#include <kiln/transform/pattern_rewrite.hpp>

#include <pybind11/numpy.h>

#include <cstring>
#include <sstream>

namespace kiln::python {

namespace {

using ir::expr;

std::string kind_name(const expr& e) {
  switch (e->kind) {
    case ir::node_kind::var: return "var";
    case ir::node_kind::dataflow_var: return "dataflow_var";
    case ir::node_kind::constant: return "constant";
    case ir::node_kind::global_var: return "global_var";
    case ir::node_kind::op: return "op";
    case ir::node_kind::extern_func: return "extern_func";
    case ir::node_kind::call: return "call";
    case ir::node_kind::tuple: return "tuple";
    case ir::node_kind::tuple_get_item: return "tuple_get_item";
    case ir::node_kind::if_: return "if";
    case ir::node_kind::seq: return "seq";
    case ir::node_kind::shape_expr: return "shape";
    case ir::node_kind::prim_value: return "prim_value";
    case ir::node_kind::string_imm: return "string";
    default: return "other";
  }
}

template <class Node>
const Node& as_node(const expr& e, const char* what) {
  if (auto* n = ir::dyn_cast<Node>(e)) return *n;
  throw py::attribute_error(std::string("kiln.ir.Expr: a ") + kind_name(e) + " has no " + what);
}

py::array constant_to_numpy(const ir::ndarray& a) {
  static const char* names[] = {"V0", "bool", "int8", "int32", "int64", "uint8", "float16", "float32", "float64"};
  py::array out(py::dtype(names[static_cast<int>(a.dt())]), std::vector<py::ssize_t>(a.shape().begin(), a.shape().end()));
  if (!a.bytes().empty()) std::memcpy(out.mutable_data(), a.bytes().data(), a.bytes().size());
  return out;
}

ir::ndarray numpy_to_constant(const py::handle& o) {
  py::array a = py::array::ensure(o, py::array::c_style);
  if (!a) throw py::type_error("kiln.ir.const: the value is not an array");
  if (!a.dtype().attr("isnative").cast<bool>())  // byte-swapped: kiln's constants are native order
    a = py::array::ensure(a.attr("astype")(a.dtype().attr("newbyteorder")("=")), py::array::c_style);
  const std::string kind(1, a.dtype().kind());
  const auto size = a.dtype().itemsize();
  dtype t = dtype::void_;
  if (kind == "b") t = dtype::bool_;
  else if (kind == "i" && size == 1) t = dtype::int8;
  else if (kind == "i" && size == 4) t = dtype::int32;
  else if (kind == "i" && size == 8) t = dtype::int64;
  else if (kind == "u" && size == 1) t = dtype::uint8;
  else if (kind == "f" && size == 2) t = dtype::float16;
  else if (kind == "f" && size == 4) t = dtype::float32;
  else if (kind == "f" && size == 8) t = dtype::float64;
  else throw py::type_error("kiln.ir.const: numpy dtype " + std::string(py::str(a.dtype())) + " has no kiln counterpart");
  std::vector<std::byte> bytes(std::size_t(a.nbytes()));
  if (!bytes.empty()) std::memcpy(bytes.data(), a.data(), bytes.size());
  return ir::ndarray(t, std::vector<std::int64_t>(a.shape(), a.shape() + a.ndim()), std::move(bytes));
}

/// A binding as Python sees it.
struct py_binding {
  expr var;
  expr value;
  std::optional<std::string> cast_type;
};
struct py_block {
  bool dataflow;
  std::vector<py_binding> bindings;
};

// ---- the mutator ----------------------------------------------------------------------------------

/// kiln's expr_mutator with post-order hooks in Python: after a node's children are rewritten, the
/// Python object's rewrite_call / rewrite_tuple / rewrite_tuple_get_item / rewrite_constant (those
/// it defines) receive the node and return its replacement, or None to keep it. Bindings whose new
/// value no longer fits their variable's type get a new variable, and its uses follow.
class python_mutator final : public ir::expr_mutator {
public:
  explicit python_mutator(py::object self) : self_(std::move(self)) {
    py::handle cls = self_.get_type();
    call_ = py::hasattr(cls, "rewrite_call");
    tuple_ = py::hasattr(cls, "rewrite_tuple");
    item_ = py::hasattr(cls, "rewrite_tuple_get_item");
    constant_ = py::hasattr(cls, "rewrite_constant");
  }
  expr mutate_call(const ir::call_node& n, const expr& self) override {
    return hook(call_, "rewrite_call", ir::expr_mutator::mutate_call(n, self));
  }
  expr mutate_tuple(const ir::tuple_node& n, const expr& self) override {
    return hook(tuple_, "rewrite_tuple", ir::expr_mutator::mutate_tuple(n, self));
  }
  expr mutate_tuple_get_item(const ir::tuple_get_item_node& n, const expr& self) override {
    return hook(item_, "rewrite_tuple_get_item", ir::expr_mutator::mutate_tuple_get_item(n, self));
  }
  expr mutate_constant(const ir::constant_node& n, const expr& self) override {
    return hook(constant_, "rewrite_constant", ir::expr_mutator::mutate_constant(n, self));
  }

private:
  expr hook(bool present, const char* name, expr e) {
    if (!present) return e;
    py::object out = self_.attr(name)(e);
    if (out.is_none()) return e;
    if (!py::isinstance<expr>(out)) {
      PyErr_SetString(PyExc_TypeError, (std::string("kiln.ir.ExprMutator.") + name + " returned a " +
                                        std::string(py::str(out.get_type().attr("__name__"))) +
                                        ", not a kiln.ir.Expr or None")
                                           .c_str());
      throw py::error_already_set();
    }
    return out.cast<expr>();
  }

  py::object self_;
  bool call_, tuple_, item_, constant_;
};

// ---- patterns -------------------------------------------------------------------------------------

using transform::pattern;

/// A match as Python sees it: the names bound, and the matched expression.
struct py_match {
  std::map<std::string, expr, std::less<>> bound;
  expr root;
};

}  // namespace

void init_expr(py::module_& m) {
  py::module_ ir_m = m.attr("ir").cast<py::module_>();

  py::class_<expr>(ir_m, "Expr", "An IR expression (immutable); what its kind has, as properties")
      .def_property_readonly("kind", &kind_name, "var, dataflow_var, constant, call, tuple, tuple_get_item, if, seq, "
                                                 "shape, prim_value, string, global_var, extern_func or op")
      .def_property_readonly("type", [](const expr& e) { return ir::to_string(e->checked_type); }, "The checked type, as text")
      .def_property_readonly("dtype",
                             [](const expr& e) -> py::object {
                               if (auto* t = ir::dyn_cast<ir::tensor_type_node>(e->checked_type))
                                 return py::str(std::string(name(t->dt)));
                               return py::none();
                             }, "A tensor's dtype name (\"float32\", ...), else None")
      .def_property_readonly("shape",
                             [](const expr& e) -> py::object {
                               auto* t = ir::dyn_cast<ir::tensor_type_node>(e->checked_type);
                               if (!t || !t->shape) return py::none();
                               py::list dims;
                               for (const ir::prim_expr& d : *t->shape) {
                                 if (auto* i = ir::dyn_cast<ir::int_imm_node>(d)) dims.append(py::int_(i->value));
                                 else dims.append(py::str(ir::to_string(d)));
                               }
                               return py::tuple(dims);
                             },
                             "The tensor's shape: ints, and names for symbolic dimensions (None when unknown)")
      .def_property_readonly("name_hint", [](const expr& e) { return as_node<ir::var_node>(e, "name_hint").name_hint; }, "A variable's name")
      .def_property_readonly("op",
                             [](const expr& e) -> py::object {
                               const auto& c = as_node<ir::call_node>(e, "op");
                               if (auto* o = ir::dyn_cast<ir::op_node>(c.callee)) return py::str(o->name());
                               return py::none();
                             },
                             "The operator's name for a call of an operator, else None")
      .def_property_readonly("callee", [](const expr& e) { return as_node<ir::call_node>(e, "callee").callee; }, "What a call calls: an operator, a global function, an external function or a value")
      .def_property_readonly("args", [](const expr& e) { return as_node<ir::call_node>(e, "args").args; }, "A call's arguments")
      .def_property_readonly("attrs",
                             [](const expr& e) {
                               return attrs_to_python(as_node<ir::call_node>(e, "attrs").attrs);
                             }, "A call's attributes, as a dict")
      .def_property_readonly("fields", [](const expr& e) { return as_node<ir::tuple_node>(e, "fields").fields; }, "A tuple's fields")
      .def_property_readonly("tuple_value", [](const expr& e) { return as_node<ir::tuple_get_item_node>(e, "tuple_value").tuple; }, "The tuple a tuple_get_item reads")
      .def_property_readonly("index", [](const expr& e) { return as_node<ir::tuple_get_item_node>(e, "index").index; }, "The position a tuple_get_item reads")
      .def_property_readonly("data", [](const expr& e) { return constant_to_numpy(as_node<ir::constant_node>(e, "data").data); },
                             "A constant's value, as a new numpy array")
      .def_property_readonly("value",
                             [](const expr& e) -> py::object {
                               if (auto* p = ir::dyn_cast<ir::prim_value_node>(e)) {
                                 if (is_float(p->dt)) return py::float_(p->float_value);
                                 if (auto* i = ir::dyn_cast<ir::int_imm_node>(p->int_value)) return py::int_(i->value);
                                 return py::str(ir::to_string(p->int_value));
                               }
                               return py::str(as_node<ir::string_imm_node>(e, "value").value);
                             }, "A prim_value's value (int, float, or the text of a symbolic expression), or a string's text")
      .def_property_readonly("symbol", [](const expr& e) { return as_node<ir::extern_func_node>(e, "symbol").symbol; }, "An external function's symbol")
      .def_property_readonly("cond", [](const expr& e) { return as_node<ir::if_node>(e, "cond").cond; }, "An if's condition")
      .def_property_readonly("then_branch", [](const expr& e) { return as_node<ir::if_node>(e, "then_branch").then_branch; }, "An if's then branch (a seq expression)")
      .def_property_readonly("else_branch", [](const expr& e) { return as_node<ir::if_node>(e, "else_branch").else_branch; }, "An if's else branch (a seq expression)")
      .def_property_readonly("blocks",
                             [](const expr& e) {
                               std::vector<py_block> out;
                               for (const ir::binding_block& b : as_node<ir::seq_expr_node>(e, "blocks").blocks) {
                                 py_block pb{b.dataflow, {}};
                                 for (const ir::binding& bd : b.bindings)
                                   pb.bindings.push_back({expr(bd.variable), bd.value,
                                                          bd.is_match_cast() ? std::optional<std::string>(ir::to_string(bd.cast_type))
                                                                             : std::nullopt});
                                 out.push_back(std::move(pb));
                               }
                               return out;
                             }, "A seq expression's binding blocks (kiln.ir.BindingBlock)")
      .def_property_readonly("result", [](const expr& e) { return as_node<ir::seq_expr_node>(e, "result").body; }, "A seq expression's result")
      .def("same_as", [](const expr& a, const expr& b) { return a.get() == b.get(); }, "True when both are the same expression object (identity, as TVM's same_as)")
      .def("__str__", [](const expr& e) { return ir::print(e, ir::print_options::readable()); })
      .def("__repr__", [](const expr& e) { return "<kiln.ir.Expr " + kind_name(e) + ": " + ir::print(e, ir::print_options::readable()) + ">"; });

  py::class_<py_binding>(ir_m, "Binding", "var = value (cast_type set for a match_cast)")
      .def_readonly("var", &py_binding::var, "The variable bound")
      .def_readonly("value", &py_binding::value, "The value bound to it")
      .def_readonly("cast_type", &py_binding::cast_type, "For a match_cast, the type checked at run time (as text); else None");
  py::class_<py_block>(ir_m, "BindingBlock", "Bindings in order; a dataflow block when `dataflow`").def_readonly("dataflow", &py_block::dataflow, "True for a dataflow block (with R.dataflow())").def_readonly("bindings", &py_block::bindings, "The block's bindings, in order (kiln.ir.Binding)");

  // ---- construction ----
  ir_m.def(
      "call_op",
      [](const std::string& op, std::vector<expr> args, const py::dict& attrs) {
        ir::attr_map a;
        for (auto [k, v] : attrs) a.set(py::str(k), attr_from_python(py::str(k), v));
        return ir::call_op(op, std::move(args), a);
      },
      py::arg("op"), py::arg("args"), py::arg("attrs") = py::dict(),
      "A call of registered operator `op` (its type inferred, as in C++; a kiln.KilnError says what does not fit)");
  ir_m.def("const", [](const py::handle& value) { return ir::make_constant(numpy_to_constant(value)); }, py::arg("value"),
           "A constant tensor holding a copy of the numpy array `value`");
  ir_m.def("tuple_", [](std::vector<expr> fields) { return ir::make_tuple(std::move(fields)); }, py::arg("fields"), "A tuple of `fields`");
  ir_m.def("tuple_get_item", [](const expr& t, int index) { return ir::make_tuple_get_item(t, index); }, py::arg("tuple_value"),
           py::arg("index"), "Field `index` of the tuple `tuple_value`");
  ir_m.def("prim_value", [](std::int64_t v) { return ir::make_prim_value(v); }, py::arg("value"), "An int64 primitive value");
  ir_m.def("string_imm", [](std::string v) { return ir::make_string_imm(std::move(v)); }, py::arg("value"), "A string argument (for external calls)");
  ir_m.def(
      "post_order_visit", [](const expr& e, const py::function& fn) { ir::post_order_visit(e, [&](const expr& x) { fn(x); }); },
      py::arg("expr"), py::arg("fn"), "Calls fn on every expression under expr, children first");

  // ---- variables and the block builder ----
  py::class_<ir::prim_expr>(ir_m, "PrimExpr", "A symbolic integer (a dimension): a size variable, or arithmetic on them")
      .def("__str__", [](const ir::prim_expr& p) { return ir::to_string(p); })
      .def("__repr__", [](const ir::prim_expr& p) { return "<kiln.ir.PrimExpr " + ir::to_string(p) + ">"; });
  ir_m.def("size_var", [](std::string name) { return ir::prim_expr(ir::make_size_var(std::move(name))); }, py::arg("name"),
           "A symbolic dimension; use the same object wherever the same size is meant");
  ir_m.def(
      "var",
      [](std::string name, const py::sequence& shape, const std::string& dt) {
        std::optional<dtype> t = parse_dtype(dt);
        if (!t) throw py::value_error("kiln.ir.var: '" + dt + "' is not a dtype");
        std::vector<ir::prim_expr> dims;
        for (auto d : shape) {
          if (py::isinstance<ir::prim_expr>(d)) dims.push_back(d.cast<ir::prim_expr>());
          else if (py::isinstance<py::int_>(d)) dims.push_back(ir::make_int(d.cast<std::int64_t>()));
          else
            throw py::type_error("kiln.ir.var: a dimension is an int or a kiln.ir.size_var, not a " +
                                 std::string(py::str(d.get_type().attr("__name__"))) +
                                 " (make a symbolic dimension once with kiln.ir.size_var(name) and reuse it)");
        }
        return expr(ir::make_var(std::move(name), ir::tensor_type(std::move(dims), *t)));
      },
      py::arg("name"), py::arg("shape"), py::arg("dtype") = "float32", "A tensor variable (a function parameter)");

  py::class_<ir::block_builder>(ir_m, "_BlockBuilder")
      .def(py::init<>())
      .def("begin_function",
           [](ir::block_builder& bb, std::string name, const std::vector<expr>& params, const py::dict& attrs) {
             std::vector<ir::var> vs;
             for (const expr& p : params) {
               auto v = ir::ref_cast<ir::var_node>(p);
               if (!v) throw py::type_error("kiln.ir.BlockBuilder.function: parameters must be variables (kiln.ir.var), not a " + kind_name(p));
               vs.push_back(v);
             }
             ir::attr_map a;
             for (auto [k, v] : attrs) a.set(py::str(k), attr_from_python(py::str(k), v));
             bb.begin_function(std::move(name), std::move(vs), std::move(a));
           })
      .def("end_function", [](ir::block_builder& bb, const expr& result) { bb.end_function(result); })
      .def("abandon_function", &ir::block_builder::abandon_function)
      .def("begin_dataflow", &ir::block_builder::begin_dataflow)
      .def("end_dataflow", &ir::block_builder::end_dataflow)
      .def("abandon_dataflow", &ir::block_builder::abandon_dataflow)
      .def("emit", [](ir::block_builder& bb, const expr& value, std::string name) { return expr(bb.emit(value, std::move(name))); },
           py::arg("value"), py::arg("name_hint") = "")
      .def("emit_output",
           [](ir::block_builder& bb, const expr& value, std::string name) { return expr(bb.emit_output(value, std::move(name))); },
           py::arg("value"), py::arg("name_hint") = "gv")
      .def("call", [](const ir::block_builder& bb, const std::string& name, std::vector<expr> args) { return bb.call(name, std::move(args)); })
      .def_property_readonly("in_function", &ir::block_builder::in_function)
      .def_property_readonly("in_dataflow", &ir::block_builder::in_dataflow)
      .def("get", [](const ir::block_builder& bb) { return bb.module(); });

  // ---- the mutator ----
  ir_m.def("_mutate_expr", [](py::object self, const expr& e) { return python_mutator(std::move(self)).mutate(e); });
  ir_m.def("_mutate_function", [](py::object self, const ir::base_func& f) -> ir::base_func {
    auto fn = ir::ref_cast<ir::function_node>(f);
    if (!fn) throw py::type_error("kiln.ir.ExprMutator.visit_function: a prim_func has no graph-level body to rewrite");
    return python_mutator(std::move(self)).mutate_function(fn);
  });
  ir_m.def("_mutate_module", [](py::object self, const ir::ir_module& mod) { return python_mutator(std::move(self)).mutate_module(mod); });

  // ---- patterns ----
  py::module_ dpl = m.def_submodule("dpl", "Dataflow patterns and rewriting (Relax's dpl)");
  py::class_<pattern>(dpl, "Pattern", "A pattern over the IR; refine it with named, has_dtype, has_rank, has_shape, has_attr, "
                                      "commutative, where; combine with |")
      .def("__call__", [](const pattern& p, const py::args& operands) {
        std::vector<pattern> ops;
        for (auto o : operands) ops.push_back(o.cast<pattern>());
        return p.with_operands(std::move(ops));
      })
      .def("named", &pattern::named, py::arg("name"), "The same pattern, binding what it matches to `name` (match[name])")
      .def("has_dtype",
           [](const pattern& p, const std::string& dt) {
             std::optional<dtype> t = parse_dtype(dt);
             if (!t) throw py::value_error("kiln.dpl.Pattern.has_dtype: '" + dt + "' is not a dtype");
             return p.has_dtype(*t);
           },
           py::arg("dtype"), "The same pattern, matching only tensors of `dtype`")
      .def("has_rank", &pattern::has_rank, py::arg("ndim"), "The same pattern, matching only tensors of `ndim` dimensions")
      .def("has_shape", &pattern::has_shape, py::arg("shape"), "The same pattern, matching only tensors of `shape`")
      .def("has_attr",
           [](const pattern& p, const std::string& key, const py::object& v) { return p.has_attr(key, attr_from_python(key, v)); },
           py::arg("key"), py::arg("value"), "The same pattern, matching only calls whose attribute `key` is `value`")
      .def("commutative", &pattern::commutative, "The same pattern, also matching its two operands swapped")
      .def("where",
           [](const pattern& p, const std::string& description, const py::function& test) {
             auto fn = std::make_shared<py_handle>(test);
             return p.where(description, [fn](const expr& e) {
               py::gil_scoped_acquire gil;
               return fn->get()(e).cast<bool>();
             });
           },
           py::arg("description"), py::arg("test"), "The same pattern, matching only where test(expr) is true; `description` names the test in printing")
      .def("__or__", [](const pattern& a, const pattern& b) { return a | b; })
      .def("__str__", [](const pattern& p) {
        std::ostringstream os;
        os << p;
        return os.str();
      });
  dpl.def("wildcard", [](const std::string& name) { return transform::patterns::wildcard(name); }, py::arg("name") = "", "A pattern matching anything (bound to `name` when given)");
  dpl.def("is_op", [](const std::string& name) { return transform::patterns::is_op(name); }, py::arg("op"), "A pattern matching a call of operator `op`; call it with operand patterns: is_op(\"add\")(a, b)");
  dpl.def("is_const", [] { return transform::patterns::is_const(); }, "A pattern matching a constant");
  dpl.def("is_var", [] { return transform::patterns::is_var(); }, "A pattern matching a variable");
  dpl.def("is_elementwise", [] { return transform::patterns::is_elementwise(); }, "A pattern matching a call of any elementwise operator");

  py::class_<py_match>(dpl, "Match", "What a pattern matched: match['x'] for a named part, match.root for the whole")
      .def("__getitem__",
           [](const py_match& mt, const std::string& name) {
             auto it = mt.bound.find(name);
             if (it == mt.bound.end()) {
               std::string known;
               for (const auto& [n, e] : mt.bound) known.append(known.empty() ? "" : ", ").append(n);
               throw py::key_error("kiln.dpl.Match: nothing is bound to '" + name + "' (bound: " + (known.empty() ? "none" : known) + ")");
             }
             return it->second;
           })
      .def("__contains__", [](const py_match& mt, const std::string& name) { return mt.bound.count(name) != 0; })
      .def_readonly("root", &py_match::root, "The expression the whole pattern matched");

  dpl.def(
      "rewrite_bindings",
      [](const ir::ir_module& mod, const py::list& rules) {
        std::vector<transform::rewrite_rule> cpp_rules;
        for (auto r : rules) {
          auto t = r.cast<py::tuple>();
          if (t.size() != 3)
            throw py::type_error("kiln.dpl.rewrite_bindings: each rule is (name, pattern, rewrite(match) -> Expr or None)");
          auto fn = std::make_shared<py_handle>(py::reinterpret_borrow<py::object>(t[2]));
          cpp_rules.push_back({t[0].cast<std::string>(), t[1].cast<pattern>(),
                               [fn](const transform::match_result& mr, transform::rewrite_context&) -> expr {
                                 py::gil_scoped_acquire gil;
                                 py_match pm{{mr.bound().begin(), mr.bound().end()}, mr.root()};
                                 py::object out = fn->get()(pm);
                                 return out.is_none() ? expr() : out.cast<expr>();
                               }});
        }
        return transform::rewrite_bindings(mod, std::span<const transform::rewrite_rule>(cpp_rules));
      },
      py::arg("mod"), py::arg("rules"),
      "Applies rules (name, pattern, rewrite) to every binding of every function: the first rule whose pattern "
      "matches and whose rewrite returns an Expr replaces the binding's value, and the bindings the match looked "
      "through go (C++'s transform::rewrite_bindings)");
}

}  // namespace kiln::python
