// SPDX-License-Identifier: Apache-2.0
// kiln.transform and kiln.instrument from Python: passes written in Python (module and function
// passes) as kiln::pass values that run under the same protocol as C++ passes, pipelines mixing
// both, the pass context with its scopes, and instruments written in Python.
//
// The GIL: passes and pipelines run with it released; Python passes and instruments take it back
// for their calls. A Python exception raised there travels through kiln as the C++ exception
// `py::error_already_set` (nested in the pass_error kiln throws) and is raised again, unchanged, at
// the boundary (see module.cpp's translator).
#include "bindings.hpp"

#include <kiln/pass/instruments/pass_timing.hpp>

#include <memory>
#include <typeinfo>

namespace kiln::python {

namespace {

using module_pass = kiln::pass<ir::ir_module>;

// ---- pass info ------------------------------------------------------------------------------------

/// A pass's description as Python sees it: a copy, valid after the pass is gone.
struct py_pass_info {
  std::string name;
  int opt_level = 0;
  std::vector<std::string> required;
  std::string kind;
  std::string description;
  std::vector<std::string> needs, establishes, invalidates;

  explicit py_pass_info(const pass_info& info)
      : name(info.name), opt_level(info.opt_level), kind(std::string(to_string(info.kind))), description(info.description) {
    for (std::string_view r : info.required) required.emplace_back(r);
    for (const property_check& p : info.needs) needs.emplace_back(p.name);
    for (const property_check& p : info.establishes) establishes.emplace_back(p.name);
    for (const property_check& p : info.invalidates) invalidates.emplace_back(p.name);
  }
  /// TVM's form: "The meta data of the pass - pass name: x, opt_level: 1, required passes: [a, b]".
  std::string text() const {
    std::string s = "The meta data of the pass - pass name: " + name + ", opt_level: " + std::to_string(opt_level) +
                    ", required passes: [";
    for (std::size_t i = 0; i < required.size(); ++i) s.append(i ? ", " : "").append(required[i]);
    return s + "]";
  }
};

// ---- pass contexts --------------------------------------------------------------------------------

/// A pass context as Python holds it: its own context, or a thread's default one (not owned), with
/// the scopes Python's `with` opened on it.
struct context_box {
  std::unique_ptr<pass_context> owned;
  pass_context* ctx = nullptr;
  std::vector<std::unique_ptr<pass_context_scope>> scopes;

  context_box() : owned(std::make_unique<pass_context>()), ctx(owned.get()) {}
  explicit context_box(pass_context& borrowed) : ctx(&borrowed) {}
};

/// Set while a context's instruments are being entered and one of them failed: the instruments
/// that had entered are then not exited. TVM's Python tests check exactly this (relay's
/// test_enter_pass_ctx_exception: "%1 enter ctx", "%2 enter ctx", and nothing else); kiln's C++
/// contexts follow the design document instead and exit them (pass_context::enter_instruments).
thread_local bool enter_failed = false;

/// A Python pass context wrapped for a call that may raise: the flag above is cleared afterwards.
template <class F>
void entering(F&& f) {
  enter_failed = false;
  try {
    f();
  } catch (...) {
    enter_failed = false;
    throw;
  }
  enter_failed = false;
}

// ---- Python module objects for passes -------------------------------------------------------------

/// The Python PassContext object for `ctx` (a fresh handle on it, not owned): what a Python pass
/// receives as its `ctx` argument. kiln.transform.PassContext.current() gives the object the
/// user entered; this one compares equal to it.
py::object context_object(pass_context& ctx) {
  // Looked up once and kept for the life of the process (never released: a static py::object
  // would be destroyed after the interpreter is gone).
  static PyObject* from_handle =
      py::object(py::module_::import("kiln.transform").attr("PassContext").attr("_from_handle")).release().ptr();
  py::object handle = py::cast(std::make_shared<context_box>(ctx));
  return py::reinterpret_borrow<py::object>(from_handle)(handle);
}

// ---- Python passes --------------------------------------------------------------------------------

/// A pass whose transformation is a Python callable: `f(mod, ctx) -> IRModule` for a module pass,
/// `f(func, mod, ctx) -> Function` for a function pass (called once per graph-level function, in
/// module order; functions with SkipOptimization are left alone, as for C++ function passes).
class python_pass_model final : public kiln::detail::erased_pass_model<ir::ir_module> {
public:
  python_pass_model(py::object fn, std::string name, int opt_level, std::vector<std::string> required, pass_kind kind)
      : fn_(std::move(fn)), name_(std::move(name)), required_(std::move(required)) {
    if (!is_valid_pass_name(name_))
      throw py::value_error("kiln.transform: '" + name_ + "' is not a valid pass name (letters, digits, '_', '.' and '-')");
    if (opt_level < 0) throw py::value_error("kiln.transform: opt_level must be 0 or more, not " + std::to_string(opt_level));
    for (const std::string& r : required_) required_views_.emplace_back(r);
    info_ = {name_, opt_level, required_views_, kind};
  }

  const pass_info& info() const noexcept override { return info_; }
  ir::ir_module run(const ir::ir_module& m, pass_context& ctx, skip_reason gate) override {
    return kiln::detail::run_protocol_with<false>(info_, [&]() { return transform(m, ctx); }, m, ctx, gate);
  }
  ir::ir_module run_direct(const ir::ir_module& m, pass_context& ctx) override {
    auto body = [&]() { return transform(m, ctx); };
    return kiln::detail::run_body<false>(info_, body, m, ctx);
  }
  void invalidate_after_direct(const ir::ir_module& in, const ir::ir_module& out, pass_context& ctx) override {
    kiln::detail::invalidate_analyses<preserves<>>(ctx, in, out);
  }
  std::string text() const override { return name_; }
  std::vector<pipeline_step> steps() const override { return {pipeline_step{name_, false}}; }
  const std::type_info& type() const noexcept override { return typeid(python_pass_model); }

  /// The Python object behind the pass (the decorated function, or the instance of the decorated
  /// class): only with the GIL held.
  const py::object& callable() const noexcept { return fn_.get(); }

private:
  ir::ir_module transform(const ir::ir_module& m, pass_context& ctx) {
    py::gil_scoped_acquire gil;
    py::object py_ctx = context_object(ctx);
    if (info_.kind == pass_kind::module) {
      py::object out = fn_.get()(m, py_ctx);
      if (!py::isinstance<ir::ir_module>(out))
        raise_type_error("kiln.transform: module pass '" + name_ + "' returned " + type_name(out) + ", not a kiln.ir.IRModule");
      return out.cast<ir::ir_module>();
    }
    return module_traits<ir::ir_module>::map_functions(m, [&](std::string_view name, const ir::function& f) -> ir::function {
      if (ir::detail::has_skip_optimization(*f)) return f;
      py::object out = fn_.get()(ir::base_func(f), m, py_ctx);
      if (!py::isinstance<ir::base_func>(out) || !ir::isa<ir::function_node>(out.cast<ir::base_func>()))
        raise_type_error("kiln.transform: function pass '" + name_ + "' returned " + type_name(out) + " for function '" +
                         std::string(name) + "', not a kiln.ir function");
      return ir::function(static_cast<const ir::function_node*>(out.cast<ir::base_func>().get()));
    });
  }

  /// Raises a Python TypeError as a Python exception, so that it reaches the caller as one (kiln
  /// wraps it in the pass's pass_error on the way).
  [[noreturn]] static void raise_type_error(const std::string& message) {
    PyErr_SetString(PyExc_TypeError, message.c_str());
    throw py::error_already_set();
  }

  static std::string type_name(const py::object& o) {
    return o.is_none() ? "None" : std::string(py::str(o.get_type().attr("__name__")));
  }

  py_handle fn_;
  std::string name_;
  std::vector<std::string> required_;
  std::vector<std::string_view> required_views_;
  pass_info info_;
};

// ---- instruments ----------------------------------------------------------------------------------

/// A Python object with any of the hooks enter_pass_ctx, exit_pass_ctx, should_run(mod, info),
/// run_before_pass(mod, info), run_after_pass(mod, info), run_before_skipped_pass(mod, info) and
/// run_after_pass_failed(mod, info, message), as a kiln instrument. Hooks the object lacks are not
/// called. The module is given as a kiln.ir.IRModule, the pass as a kiln.transform.PassInfo.
struct python_instrument {
  static constexpr std::string_view name = "python_instrument";

  explicit python_instrument(py::object o) : obj(o) {
    has_enter = py::hasattr(o, "enter_pass_ctx");
    has_exit = py::hasattr(o, "exit_pass_ctx");
    has_should_run = py::hasattr(o, "should_run");
    has_before = py::hasattr(o, "run_before_pass");
    has_after = py::hasattr(o, "run_after_pass");
    has_skipped = py::hasattr(o, "run_before_skipped_pass");
    has_failed = py::hasattr(o, "run_after_pass_failed");
    if (!(has_enter || has_exit || has_should_run || has_before || has_after || has_skipped || has_failed))
      throw py::type_error("kiln.instrument: a " + std::string(py::str(o.get_type().attr("__name__"))) +
                           " is not an instrument: it has none of the hooks enter_pass_ctx, exit_pass_ctx, should_run, "
                           "run_before_pass, run_after_pass, run_before_skipped_pass, run_after_pass_failed");
  }

  void enter_pass_ctx() {
    if (!has_enter) return;
    py::gil_scoped_acquire gil;
    try {
      obj.get().attr("enter_pass_ctx")();
    } catch (...) {
      enter_failed = true;
      throw;
    }
  }
  void exit_pass_ctx() {
    if (!has_exit || enter_failed) return;
    py::gil_scoped_acquire gil;
    obj.get().attr("exit_pass_ctx")();
  }
  bool should_run(const module_view& m, const pass_info& info) {
    if (!has_should_run) return true;
    py::gil_scoped_acquire gil;
    return py::bool_(obj.get().attr("should_run")(module_of(m), py_pass_info(info)));
  }
  void run_before_pass(const module_view& m, const pass_info& info) {
    if (!has_before) return;
    py::gil_scoped_acquire gil;
    obj.get().attr("run_before_pass")(module_of(m), py_pass_info(info));
  }
  void run_after_pass(const module_view& m, const pass_info& info) {
    if (!has_after) return;
    py::gil_scoped_acquire gil;
    obj.get().attr("run_after_pass")(module_of(m), py_pass_info(info));
  }
  void run_before_skipped_pass(const module_view& m, const pass_info& info, skip_reason) {
    if (!has_skipped) return;
    py::gil_scoped_acquire gil;
    obj.get().attr("run_before_skipped_pass")(module_of(m), py_pass_info(info));
  }
  void run_after_pass_failed(const module_view& m, const pass_info& info, const pass_error& e) {
    if (!has_failed) return;
    py::gil_scoped_acquire gil;
    obj.get().attr("run_after_pass_failed")(module_of(m), py_pass_info(info), std::string(e.reason()));
  }

  static py::object module_of(const module_view& m) { return py::cast(m.get<ir::ir_module>()); }

  py_handle obj;
  bool has_enter, has_exit, has_should_run, has_before, has_after, has_skipped, has_failed;
};

/// kiln.instrument.PassTimingInstrument: TVM's, over kiln's pass_timing. As in TVM, the profile
/// is cleared when a context with it is entered and when it is exited; render() reads it inside.
struct timing_instrument {
  static constexpr std::string_view name = "PassTimingInstrument";
  pass_timing timing;
  bool timed_any = false;    // a pass was timed since the last reset
  bool cleared_used = false;  // the last reset dropped timings nobody rendered
  void enter_pass_ctx() { reset(); }
  void exit_pass_ctx() {
    if (!enter_failed) reset();
  }
  void reset() {
    cleared_used = timed_any;
    timed_any = false;
    timing.reset();
  }
  /// TVM's render(): empty when nothing was timed. Then a UserWarning says why, since an empty
  /// string alone looks like a profile of nothing.
  std::string render() const {
    std::string text = timing.tree();
    if (text.empty())
      PyErr_WarnEx(PyExc_UserWarning,
                   cleared_used
                       ? "PassTimingInstrument.render() is empty: the profile is cleared when the PassContext holding the "
                         "instrument is exited or its instruments are overridden (as in TVM); call render() inside the `with` block"
                       : "PassTimingInstrument.render() is empty: no pass has run in a PassContext holding this instrument",
                   1);
    return text;
  }
  void run_before_pass(const pass_info& info) {
    timed_any = true;
    timing.run_before_pass(info);
  }
  void run_after_pass(const pass_info& info) { timing.run_after_pass(info); }
  void run_after_pass_failed(const pass_info& info, const pass_error& e) { timing.run_after_pass_failed(info, e); }
};

/// A Python instrument object as a kiln instrument.
instrument to_instrument(const py::handle& o) {
  if (py::isinstance<timing_instrument>(o)) return instrument(o.cast<std::shared_ptr<timing_instrument>>());
  return instrument(python_instrument(py::reinterpret_borrow<py::object>(o)));
}

std::vector<instrument> to_instruments(const py::object& list) {
  std::vector<instrument> out;
  if (list.is_none()) return out;
  if (!py::isinstance<py::sequence>(list) || py::isinstance<py::str>(list))
    throw py::type_error("kiln.transform.PassContext: instruments must be a list of instruments");
  for (auto item : list.cast<py::sequence>()) out.push_back(to_instrument(item));
  return out;
}

// ---- config ---------------------------------------------------------------------------------------

/// Sets a config option from a Python value. An unknown key is an AttributeError that lists the
/// registered keys (TVM's "Invalid config option 'x' candidates are: ..."); a value of the wrong type
/// a TypeError.
void set_config(pass_context& ctx, const std::string& key, const py::handle& value) {
  if (!pass_config_registry::global().contains(key)) {
    std::string candidates;
    for (const pass_config_entry& e : pass_config_registry::global().entries())
      candidates.append(candidates.empty() ? " " : ", ").append(e.key);
    throw py::attribute_error("Invalid config option '" + key + "' candidates are:" + candidates);
  }
  try {
    if (py::isinstance<py::bool_>(value)) ctx.set_config(key, value.cast<bool>());
    else if (py::isinstance<py::int_>(value)) ctx.set_config(key, value.cast<std::int64_t>());
    else if (py::isinstance<py::float_>(value)) ctx.set_config(key, value.cast<double>());
    else if (py::isinstance<py::str>(value)) ctx.set_config_from_text(key, value.cast<std::string>());
    else
      throw py::type_error("kiln.transform.PassContext: config option '" + key + "' cannot take a " +
                           std::string(py::str(value.get_type().attr("__name__"))));
  } catch (const usage_error& e) {
    throw py::type_error(e.what());
  }
}

py::object config_value(const pass_context& ctx, const std::string& key) {
  const pass_config_entry e = pass_config_registry::global().find(key, "kiln.transform.PassContext.config");
  if (e.type == typeid(bool)) return py::bool_(ctx.config<bool>(key, false));
  if (e.type == typeid(int) || e.type == typeid(std::int64_t)) return py::int_(ctx.config<std::int64_t>(key, 0));
  if (e.type == typeid(double)) return py::float_(ctx.config<double>(key, 0.0));
  if (e.type == typeid(std::string)) return py::str(ctx.config<std::string>(key, {}));
  for (const auto& [k, text] : ctx.config_as_text())
    if (k == key) return text ? py::object(py::str(*text)) : py::object(py::none());
  return py::none();
}

}  // namespace

void init_transform(py::module_& m) {
  transform::register_passes();  // every pass kiln's compiler has, for get_pass and pipeline text
  py::module_ t = m.def_submodule("transform", "kiln's pass infrastructure: passes, pipelines, pass contexts");
  py::module_ in = m.def_submodule("instrument", "pass instruments");

  py::class_<py_pass_info>(t, "PassInfo", "A pass's name, opt level, requirements and kind")
      .def_readonly("name", &py_pass_info::name, "The pass's name")
      .def_readonly("opt_level", &py_pass_info::opt_level, "The opt level it runs at and above")
      .def_readonly("required", &py_pass_info::required, "Names of the passes it requires (run before it in a pipeline)")
      .def_readonly("kind", &py_pass_info::kind, "\"module pass\", \"function pass\", \"kernel function pass\" or \"sequential\"")
      .def_readonly("description", &py_pass_info::description, "One line saying what the pass does (empty when it has none)")
      .def_readonly("needs", &py_pass_info::needs, "The IR properties it needs from its input")
      .def_readonly("establishes", &py_pass_info::establishes, "The IR properties that hold after it")
      .def_readonly("invalidates", &py_pass_info::invalidates, "The IR properties that may no longer hold after it")
      .def("__str__", &py_pass_info::text)
      .def("__repr__", &py_pass_info::text);

  py::class_<module_pass>(t, "Pass", "A pass or pipeline on kiln.ir.IRModule (C++ or Python)")
      .def_property_readonly("info", [](const module_pass& p) { return py_pass_info(p.info()); })
      .def_property_readonly("name", [](const module_pass& p) { return std::string(p.name()); }, "The pass's name")
      .def_property_readonly("text", &module_pass::text, "The pipeline text form (`name`, or `name(a,b)` for a pipeline)")
      .def_property_readonly("steps",
                             [](const module_pass& p) {
                               std::vector<std::pair<std::string, bool>> out;
                               for (const pipeline_step& s : p.steps()) out.emplace_back(std::string(s.name), s.pulled_in);
                               return out;
                             },
                             "A pipeline's resolved steps: (name, pulled in as a requirement)")
      .def_property_readonly("_python_callable",
                             [](const module_pass& p) -> py::object {
                               if (auto* py_pass = p.target<python_pass_model>()) return py_pass->callable();
                               return py::none();
                             })
      .def(
          "__call__",
          [](const module_pass& p, const ir::ir_module& mod) {
            py::gil_scoped_release release;
            return p(mod, pass_context::current());
          },
          py::arg("mod"), "Runs the pass on `mod` in the current pass context and returns the new module")
      .def("__str__", &module_pass::text)
      .def("__repr__", [](const module_pass& p) { return "<kiln.transform.Pass " + p.text() + ">"; });

  t.def(
      "_make_python_pass",
      [](py::object fn, const std::string& name, int opt_level, std::vector<std::string> required, const std::string& kind) {
        const pass_kind k = kind == "function" ? pass_kind::function : pass_kind::module;
        return module_pass(std::make_shared<python_pass_model>(std::move(fn), name, opt_level, std::move(required), k));
      },
      py::arg("fn"), py::arg("name"), py::arg("opt_level"), py::arg("required"), py::arg("kind"));
  t.def(
      "_make_sequential",
      [](std::vector<module_pass> passes, const std::string& name, int opt_level) {
        return make_pipeline<ir::ir_module>(std::move(passes), name, opt_level);
      },
      py::arg("passes"), py::arg("name"), py::arg("opt_level"));
  t.def("get_pass", [](const std::string& name) { return get_pass<ir::ir_module>(name); }, py::arg("name"),
        "A new instance of the pass registered as `name` (every pass of kiln's compiler is registered)");
  t.def("list_passes", [] { return pass_registry<ir::ir_module>::global().names(); }, "The registered passes' names, sorted");
  t.def("list_aliases", [] { return pass_registry<ir::ir_module>::global().aliases(); },
        "Other names of registered passes (TVM's: FoldConstant, FuseOps, ...), as (alias, kiln name) pairs");
  t.def("describe_passes", [] { return describe_passes<ir::ir_module>(); },
        "Every registered pass and pipeline with its other names, description, opt level and properties (kiln-opt --list-passes)");
  t.def("get_pipeline", [](const std::string& name) { return transform::get_pipeline(name); }, py::arg("name") = "default",
        "TVM's relax.get_pipeline: 'default' (what kiln.compile runs), 'zero' or 'default_build'");
  t.def(
      "parse_pipeline", [](const std::string& text, const std::string& name) { return parse_pipeline<ir::ir_module>(text, pass_registry<ir::ir_module>::global(), name); },
      py::arg("text"), py::arg("name") = "sequential", "A pipeline from its text form, e.g. 'fold_constant,dead_code_elimination'");
  t.def(
      "register_pass",
      [](const module_pass& p) {
        pass_registry<ir::ir_module>::global().add(std::string(p.name()), [p] { return p; }, typeid(void));
      },
      py::arg("pass_"),
      "Registers a pass (a Python one, say) under its name, for get_pass, pipeline text and the requirements of others");
  t.def(
      "config_options",
      [] {
        std::vector<std::tuple<std::string, std::string, std::string>> out;
        for (const pass_config_entry& e : pass_config_registry::global().entries()) out.emplace_back(e.key, e.type_name, e.description);
        return out;
      },
      "The registered config options: (key, type, description)");

  py::class_<context_box, std::shared_ptr<context_box>>(t, "_PassContext")
      .def(py::init([](int opt_level, const std::vector<std::string>& required, const std::vector<std::string>& disabled,
                       const py::dict& config) {
             auto box = std::make_shared<context_box>();
             box->ctx->set_opt_level(opt_level);
             for (const std::string& r : required) box->ctx->require(r);
             for (const std::string& d : disabled) box->ctx->disable(d);
             for (auto [k, v] : config) set_config(*box->ctx, py::str(k), v);
             return box;
           }),
           py::arg("opt_level"), py::arg("required"), py::arg("disabled"), py::arg("config"))
      .def_static("_thread_default",
                  [] {
                    if (pass_context::in_scope())
                      throw py::value_error("kiln.transform.PassContext: a C++ scope is open on this thread");
                    return std::make_shared<context_box>(pass_context::current());
                  })
      .def("_same", [](const context_box& a, const context_box& b) { return a.ctx == b.ctx; })
      .def("_id", [](const context_box& b) { return reinterpret_cast<std::uintptr_t>(b.ctx); })
      .def("_set_instruments", [](context_box& b, const py::object& list) { b.ctx->set_instruments(to_instruments(list)); })
      .def("_override_instruments",
           [](context_box& b, const py::object& list) {
             std::vector<instrument> v = to_instruments(list);
             entering([&] { b.ctx->override_instruments(std::move(v)); });
           })
      .def_property_readonly("_num_instruments", [](const context_box& b) { return b.ctx->instruments().size(); })
      .def("_enter",
           [](context_box& b) {
             entering([&] { b.scopes.push_back(std::make_unique<pass_context_scope>(*b.ctx)); });
           })
      .def("_exit",
           [](context_box& b) {
             if (b.scopes.empty()) throw py::value_error("kiln.transform.PassContext: exit without a matching enter");
             pass_context_scope* s = b.scopes.back().release();
             b.scopes.pop_back();
             delete s;  // exits the instruments, and may throw (the memory is freed all the same)
           })
      .def_property("opt_level", [](const context_box& b) { return b.ctx->opt_level(); },
                    [](context_box& b, int level) { b.ctx->set_opt_level(level); })
      .def_property_readonly("required_pass", [](const context_box& b) { return b.ctx->required_passes(); })
      .def_property_readonly("disabled_pass", [](const context_box& b) { return b.ctx->disabled_passes(); })
      .def_property_readonly("config",
                             [](const context_box& b) {
                               py::dict d;
                               for (const auto& [k, text] : b.ctx->config_as_text()) d[py::str(k)] = config_value(*b.ctx, k);
                               return d;
                             })
      .def("set_config", [](context_box& b, const std::string& key, const py::object& v) { set_config(*b.ctx, key, v); })
      .def_property("num_threads", [](const context_box& b) { return b.ctx->num_threads(); },
                    [](context_box& b, std::size_t n) { b.ctx->set_num_threads(n); })
      .def_property_readonly("diagnostics",
                             [](const context_box& b) {
                               std::vector<std::string> out;
                               for (const diagnostic& d : b.ctx->diagnostics()) out.push_back(d.to_string());
                               return out;
                             })
      .def("statistics_report", [](const context_box& b) { return b.ctx->statistics_report(); });

  py::class_<timing_instrument, std::shared_ptr<timing_instrument>>(in, "PassTimingInstrument",
                                                                    "Times each pass (TVM's PassTimingInstrument)")
      .def(py::init([] { return std::make_shared<timing_instrument>(); }))
      .def(
          "render",
          [](const timing_instrument& t) {
            std::string text = t.render();
            if (PyErr_Occurred()) throw py::error_already_set();  // the warning was made an error (-W error)
            return text;
          },
          "TVM's form: 'name: total [self] (share of total; share of parent)', nested passes indented. Empty, with a "
          "UserWarning saying why, when nothing was timed: the profile is cleared when the context is exited, as in TVM")
      .def("table", [](const timing_instrument& t) { return t.timing.table(); }, "An aligned table of calls and times");
}

}  // namespace kiln::python
