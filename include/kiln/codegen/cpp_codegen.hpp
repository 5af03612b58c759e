// SPDX-License-Identifier: Apache-2.0
/// \file
/// `cpp_codegen`: the compiled execution mode's code generator. From the same lowered module
/// `vm_codegen` reads, it makes an executable whose graph-level functions are `compiled` (the
/// design's kVMTIRFunc) and the C++ that implements them (`executable::generated_source`), which
/// `export_library` builds into a shared library and `kiln-compile --emit-cpp` writes as a header.
///
/// The generated C++ is readable and deterministic: one function per IR function, named after it;
/// one statement per binding, with the binding as a comment above it; locals named after the IR's
/// variables. What each binding becomes:
/// - a call of a native function or of another function of the module: `rt::call` through the
///   executable's function table (natives are resolved when the VM loads the executable, as for
///   bytecode, so a missing one is reported before anything runs);
/// - `y = x` and `y = R.match_cast(x, T)`: a reference, `value& y = x;`;
/// - literals (static shapes, strings, numbers) are members of the generated `literals` struct,
///   made once per executable; constant tensors stay in the executable's constant pool;
/// - tuples and element access: `rt::tuple`, `rt::tuple_item`; `if`: C++ `if` on `rt::condition`
///   (with `vm.builtin.read_if_cond` first for a tensor condition), each branch assigning the
///   merge variable; `R.vm.kill_object(x)`: `x = value();`.
///
/// Errors carry the interpreter's context ("in 'main' at binding 'lv' (call 'kernels.add'): ...");
/// a module code generation cannot handle is a `codegen_error` naming the function and binding.
#pragma once

#include <kiln/codegen/lowered.hpp>
#include <kiln/codegen/vm_codegen.hpp>
#include <kiln/ir/printer.hpp>
#include <kiln/kernels/calling_convention.hpp>
#include <kiln/kernels/fused.hpp>
#include <kiln/vm/builtins.hpp>
#include <kiln/version.hpp>

#include <cctype>
#include <charconv>
#include <functional>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::codegen {

struct cpp_codegen_options {
  /// The namespace the generated code lives in (a C++ qualified name, "models::mlp").
  std::string name_space = "kiln_generated";
  /// Report every call (kernels, built-ins, fused groups, other functions) to the VM's instrument
  /// (`virtual_machine::set_instrument`) as the bytecode does, so that a per-kernel profile
  /// (`kiln-run --profile`) sees inside compiled functions. Off by default: without it calls are
  /// direct, and the instrument sees only the call of the compiled function itself (as in TVM).
  /// On, each call checks for an instrument, and built-ins go through the function table.
  bool instrumented = false;
};

namespace detail {

inline bool is_cpp_keyword(std::string_view s) {
  static const std::set<std::string_view> words = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch", "char", "char8_t",
      "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr", "constinit", "const_cast", "continue",
      "co_await", "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast", "else", "enum",
      "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable",
      "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected", "public",
      "register", "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast",
      "struct", "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename", "union",
      "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq", "main"};
  return words.count(s) != 0;
}

/// `s` as a C++ identifier: other characters become '_', a leading digit or a keyword gets a
/// prefix, and reserved forms (a leading underscore, a double underscore) are avoided.
inline std::string cpp_identifier(std::string_view s, std::string_view fallback) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    const char d = ok ? c : '_';
    if (d == '_' && (out.empty() || out.back() == '_')) continue;
    out.push_back(d);
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.empty()) out = fallback;
  if ((out[0] >= '0' && out[0] <= '9') || is_cpp_keyword(out)) out = std::string(fallback) + "_" + out;
  return out;
}

/// A C++ string literal of the bytes of `s`.
inline std::string cpp_string(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(char(c));
    } else if (c >= 0x20 && c < 0x7f && c != '?') {
      out.push_back(char(c));
    } else {
      const char oct[] = {'\\', char('0' + (c >> 6)), char('0' + ((c >> 3) & 7)), char('0' + (c & 7)), 0};
      out += oct;
    }
  }
  return out + "\"";
}

/// A C++ double literal that reads back as exactly `v`.
inline std::string cpp_double(double v) {
  if (std::isnan(v)) return "std::numeric_limits<double>::quiet_NaN()";
  if (std::isinf(v)) return v > 0 ? "std::numeric_limits<double>::infinity()" : "-std::numeric_limits<double>::infinity()";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

inline std::string cpp_int(std::int64_t v) {
  if (v == std::numeric_limits<std::int64_t>::min()) return "std::int64_t(-9223372036854775807LL - 1)";
  return "std::int64_t(" + std::to_string(v) + "LL)";
}

/// One line of IR for a comment: newlines folded, long text cut.
inline std::string comment_text(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  std::string out;
  for (char c : s)
    if (!(c == ' ' && !out.empty() && out.back() == ' ')) out.push_back(c);
  if (out.size() > 140) out = out.substr(0, 137) + "...";
  return out;
}

/// A fused group's description as an `fx::` expression (in parentheses when it is an infix
/// operation and `operand` says it is an operand of one).
inline std::string fx_text(const kernels::fused_expr::node& n, bool operand = false) {
  using node = kernels::fused_expr::node;
  using opcode = kernels::fused_expr::opcode;
  switch (n.kind) {
    case node::input: return "fx::arg<" + std::to_string(n.index) + ">{}";
    case node::constant: return "fx::constant{" + cpp_double(n.value) + "}";
    case node::apply: break;
  }
  const char* infix = n.op == opcode::add ? " + " : n.op == opcode::subtract ? " - " : n.op == opcode::multiply ? " * " : n.op == opcode::divide ? " / " : nullptr;
  if (infix) {
    const std::string s = fx_text(*n.children[0], true) + infix + fx_text(*n.children[1], true);
    return operand ? "(" + s + ")" : s;
  }
  std::string s = "fx::" + std::string(kernels::fused_expr::operator_names[std::size_t(n.op)]) + "(";
  for (std::size_t i = 0; i < n.children.size(); ++i) s += (i ? ", " : "") + fx_text(*n.children[i]);
  if (n.op == opcode::clip) s += ", " + cpp_double(n.lo) + ", " + cpp_double(n.hi);
  return s + ")";
}

/// The C++ initializer of a literal's value (a shape, a number, a bool, a string or null).
inline std::string cpp_initializer(const vm::value& v) {
  switch (v.kind()) {
    case vm::value_kind::shape: {
      std::string s = "value::shape({";
      bool first = true;
      for (auto d : v.as_shape()) {
        s += (first ? "" : ", ") + std::to_string(d);
        first = false;
      }
      return s + "})";
    }
    case vm::value_kind::float_: return "value(" + cpp_double(v.as_float()) + ")";
    case vm::value_kind::bool_: return v.as_bool() ? "value(true)" : "value(false)";
    case vm::value_kind::int_: return "value(" + cpp_int(v.as_int()) + ")";
    case vm::value_kind::string: return "value(std::string(" + cpp_string(v.as_string()) + "))";
    case vm::value_kind::null: return "value()";
    default: throw codegen_error("kiln::codegen::cpp_codegen: a literal of kind " + std::string(vm::name(v.kind())) + " has no C++ form");
  }
}

/// What all functions of one module share: the executable being made, the literals.
struct cpp_module_state {
  vm::executable exec;
  bool instrumented = false;
  constant_pool pool;
  std::map<std::string, std::string> literal_names;  ///< initializer -> member name
  std::vector<std::pair<std::string, std::string>> literals;  ///< member name, initializer, in order

  std::int64_t function_index(const std::string& name, vm::function_kind kind) {
    if (auto i = exec.find_function(name)) return std::int64_t(*i);
    vm::function_info f;
    f.kind = kind;
    f.name = name;
    f.num_args = -1;
    exec.functions.push_back(std::move(f));
    return std::int64_t(exec.functions.size() - 1);
  }
  std::string literal(const std::string& init) {
    auto it = literal_names.find(init);
    if (it != literal_names.end()) return "k." + it->second;
    std::string n = "k" + std::to_string(literals.size());
    literal_names.emplace(init, n);
    literals.emplace_back(n, init);
    return "k." + n;
  }
};

/// Writes one function.
class cpp_function_emitter {
public:
  cpp_function_emitter(cpp_module_state& st, const ir::ir_module& m, std::string name, std::string cpp_name, const ir::function& f,
                       std::string signature, std::size_t index)
      : st_(st), m_(m), name_(std::move(name)), cpp_name_(std::move(cpp_name)), signature_(std::move(signature)), f_(f), index_(index) {}

  std::string run() {
    collect_uses(static_cast<const ir::seq_expr_node&>(*f_->body));
    find_cacheable();
    // The generated code's own names; a variable of the same name gets another (fresh).
    for (const char* r : {"k", "vm", "args", "rt", "fx", "value", "vm_arg", "fn", "std", "kiln", "arena", "arena_use", "literals"}) taken_.insert(r);
    std::string params;
    for (std::size_t i = 0; i < f_->params.size(); ++i) {
      const ir::var& p = f_->params[i];
      const std::string n = fresh(p->name_hint);
      names_[p.get()] = n;
      locals_.insert(n);
      params += "  value& " + n + " = args[" + std::to_string(i) + "];  // " + comment_text(p->name_hint + ": " + ir::to_string(p->checked_type)) + "\n";
    }
    indent_ = 1;
    binding_ = "";
    const std::string result = emit_seq(static_cast<const ir::seq_expr_node&>(*f_->body));
    binding_ = "the result";
    line("return " + result + ";");

    std::string out;
    const std::string arena_type = cpp_name_ + "_arena";
    if (!arena_members_.empty()) {
      out += "/// What " + cpp_name_ + " keeps per VM between calls: the storage of its arena and the tensor views on it,\n";
      out += "/// made by the first call (a nested call of the function, while one runs, makes its own).\n";
      out += "struct " + arena_type + " {\n  bool busy = false;\n";
      for (auto& m : arena_members_) out += "  value " + m + ";\n";
      out += "};\n\n";
    }
    out += "/// @" + comment_text(name_ + signature_) + "\n";
    out += "inline value " + cpp_name_ + "([[maybe_unused]] const literals& k, [[maybe_unused]] kiln::vm::vm_context& vm, [[maybe_unused]] std::span<value> args) {\n";
    out += "  [[maybe_unused]] static constexpr const char* fn = " + cpp_string(name_) + ";\n";
    out += params;
    if (uses_vm_arg_) out += "  const value vm_arg(&vm);  // %vm, for the built-ins that take the VM\n";
    if (!arena_members_.empty()) {
      out += "  auto& arena = rt::state_of<" + arena_type + ">(vm, " + std::to_string(index_) + ");\n";
      out += "  const rt::arena_guard arena_use(arena.busy);\n";
    }
    for (auto& [idx, n] : constants_)
      out += "  const value& " + n + " = vm.constant(" + std::to_string(idx) + ");  // " + constant_comment(idx) + "\n";
    out += body_;
    out += "}\n";
    return out;
  }

private:
  /// The variables some expression reads.
  void collect_uses(const ir::seq_expr_node& s) {
    auto use = [&](const ir::expr& e) {
      ir::post_order_visit(e, [&](const ir::expr& x) {
        if (auto* v = ir::dyn_cast<ir::var_node>(x)) used_.insert(v);
      });
    };
    for (auto& block : s.blocks)
      for (auto& b : block.bindings) {
        if (auto* i = ir::dyn_cast<ir::if_node>(b.value)) {
          use(i->cond);
          collect_uses(static_cast<const ir::seq_expr_node&>(*i->then_branch));
          collect_uses(static_cast<const ir::seq_expr_node&>(*i->else_branch));
        } else {
          use(b.value);
        }
      }
    use(s.body);
  }

  [[noreturn]] void fail(const std::string& msg) const {
    throw codegen_error("kiln::codegen::cpp_codegen: in function '" + name_ + "', " +
                        (binding_.empty() || binding_ == "the result" ? std::string("the result") : "binding '" + binding_ + "'") + ": " + msg);
  }
  fail_fn failer() const {
    return [this](const std::string& msg) { fail(msg); };
  }

  std::string fresh(const std::string& hint) {
    const std::string base = cpp_identifier(hint, "v");
    std::string n = base;
    for (int i = 1; taken_.count(n); ++i) n = base + "_" + std::to_string(i);
    taken_.insert(n);
    return n;
  }

  void line(const std::string& s) { body_ += std::string(std::size_t(indent_) * 2, ' ') + s + "\n"; }

  std::string site() const {
    return "{fn, " + cpp_string(binding_.empty() ? std::string("the result") : binding_) + "}";
  }

  std::string constant_comment(std::int64_t idx) const {
    const vm::value& v = st_.exec.constants[std::size_t(idx)];
    if (v.is_tensor()) return "a constant " + describe(v.as_tensor());
    return "a constant";
  }

  // ---- operands -----------------------------------------------------------------------------------

  std::string constant_tensor(const ir::constant_node& c) {
    const std::int64_t idx = st_.pool.index(c, [&](vm::value v) {
      st_.exec.constants.push_back(std::move(v));
      return std::int64_t(st_.exec.constants.size() - 1);
    });
    auto it = constants_.find(idx);
    if (it == constants_.end()) it = constants_.emplace(idx, fresh("c" + std::to_string(idx))).first;  // apart from variables named c1, ...
    return it->second;
  }

  std::string function_value(std::int64_t index) { return "vm.function(" + std::to_string(index) + ")"; }

  /// The call of function-table entry `idx` with `args` (", a, b").
  std::string call_through_table(std::int64_t idx, const std::string& args) {
    return std::string(st_.instrumented ? "rt::call_reported(" : "rt::call(") + "vm, " + std::to_string(idx) + ", " + site() + args + ")";
  }

  /// The call of native `symbol` with `args` (", a, b"): a built-in directly, anything else
  /// through the function table.
  std::string native_call(const std::string& symbol, const std::string& args) {
    std::string_view b = symbol;
    if (b == "runtime.Tuple") b = "vm.builtin.make_tuple";
    if (b.starts_with("vm.builtin.") && !st_.instrumented) {
      b.remove_prefix(11);
      for (std::string_view n : vm::builtin_names)
        if (n == b)
          return "rt::direct<&kiln::vm::builtin::" + std::string(n) + ">(" + site() + ", " + cpp_string(symbol) + args + ")";
    }
    const std::int64_t idx = st_.function_index(symbol, vm::function_kind::native);
    return call_through_table(idx, args);
  }

  /// The literal an expression is, if it is one (as a C++ lvalue of type `const value&`).
  std::optional<std::string> literal(const ir::expr& e) {
    auto l = as_literal(e, m_, failer());
    if (!l) return std::nullopt;
    switch (l->kind) {
      case literal::constant: return constant_tensor(*l->tensor);
      case literal::value: return st_.literal(cpp_initializer(l->v));
      case literal::function: return function_value(st_.function_index(l->name, vm::function_kind::compiled));
      case literal::native: return function_value(st_.function_index(l->name, vm::function_kind::native));
    }
    return std::nullopt;
  }

  /// `e` as a C++ lvalue of type `const value&`: a local, a literal, or a temporary computed first.
  std::string operand(const ir::expr& e) {
    if (auto* v = ir::dyn_cast<ir::var_node>(e)) {
      auto it = names_.find(v);
      if (it == names_.end()) fail("variable '" + v->name_hint + "' has no value here");
      return it->second;
    }
    if (auto lit = literal(e)) return *lit;
    if (ir::isa<ir::tuple_node>(e) || ir::isa<ir::tuple_get_item_node>(e) || ir::isa<ir::call_node>(e)) {
      const std::string x = value_expr(e);
      const std::string t = fresh("tmp");
      line("const value " + t + " = " + x + ";");
      return t;
    }
    fail("cannot use this expression (an if or a sequence) as an operand; bind it to a variable first");
  }

  std::string operands(std::span<const ir::expr> xs) {
    std::string s;
    for (auto& x : xs) s += ", " + operand(x);
    return s;
  }

  /// The C++ expression computing `e` (a prvalue of type `value`).
  std::string value_expr(const ir::expr& e) {
    switch (e->kind) {
      case ir::node_kind::call: {
        auto& call = static_cast<const ir::call_node&>(*e);
        const lowered_call c = classify_call(call, m_, failer());
        switch (c.kind) {
          case lowered_call::builtin_with_ctx: {
            uses_vm_arg_ = true;
            return native_call(c.symbol, ", vm_arg" + operands(c.args));
          }
          case lowered_call::kill: fail("R.vm.kill_object must be a binding of its own, not an operand");
          case lowered_call::null_value: return "value()";
          case lowered_call::native:
            if (c.symbol == kernels::abi::fused::name)
              if (auto f = fused_call(call)) return *f;
            return native_call(c.symbol, operands(c.args));
          case lowered_call::function: {
            const std::int64_t idx = st_.function_index(c.symbol, vm::function_kind::compiled);
            return call_through_table(idx, operands(c.args));
          }
          case lowered_call::closure: {
            const std::string f = operand(*c.callee);
            const std::string args = operands(c.args);
            if (st_.instrumented) {  // reported as the bytecode reports it: a call of the built-in
              uses_vm_arg_ = true;
              return native_call("vm.builtin.invoke_closure", ", vm_arg, " + f + args);
            }
            return "rt::invoke(vm, " + f + ", " + site() + args + ")";
          }
        }
        return "value()";
      }
      case ir::node_kind::tuple: {
        std::string s = "rt::tuple(";
        bool first = true;
        for (auto& x : static_cast<const ir::tuple_node&>(*e).fields) {
          s += (first ? "" : ", ") + operand(x);
          first = false;
        }
        return s + ")";
      }
      case ir::node_kind::tuple_get_item: {
        auto& g = static_cast<const ir::tuple_get_item_node&>(*e);
        return "rt::tuple_item(" + operand(g.tuple) + ", " + std::to_string(g.index) + ", " + site() + ")";
      }
      default: return "value(" + operand(e) + ")";
    }
  }

  // ---- parameter checks -------------------------------------------------------------------------

  /// The inline test of a parameter check whose operands are all static — a `check_tensor_info`
  /// with a known rank and dtype, a `match_shape` whose every dimension is static — as
  /// C++ (`rt::is_tensor_of(x, 2, kiln::dtype::float32)`, `rt::has_shape(x, 2, 4)`). The generated
  /// code calls the built-in only when the test fails, so a mismatch is reported with its message.
  /// Not in the instrumented variant, where the instrument sees every built-in call.
  std::optional<std::string> inline_check(const ir::expr& e) {
    auto* c = ir::dyn_cast<ir::call_node>(e);
    auto* x = c ? ir::dyn_cast<ir::extern_func_node>(c->callee) : nullptr;
    if (st_.instrumented || !x || c->args.empty() || !ir::isa<ir::var_node>(c->args[0])) return std::nullopt;
    auto int_arg = [&](std::size_t i) -> std::optional<std::int64_t> {
      auto* p = i < c->args.size() ? ir::dyn_cast<ir::prim_value_node>(c->args[i]) : nullptr;
      if (!p || !p->int_value || p->dt == dtype::bool_) return std::nullopt;
      return ir::as_int(p->int_value);
    };
    if (x->symbol == "vm.builtin.check_tensor_info" && c->args.size() == 4) {
      const auto ndim = int_arg(1);
      auto* s = ir::dyn_cast<ir::string_imm_node>(c->args[2]);
      if (!s || !ndim || *ndim < 0) return std::nullopt;
      const dtype dt = parse_dtype(s->value).value_or(dtype::void_);  // (an optional here makes GCC 12 warn falsely)
      if (dt == dtype::void_ || !is_known(dt)) return std::nullopt;
      const std::string type = dt == dtype::bool_ ? "bool_" : std::string(name(dt));
      return "rt::is_tensor_of(" + operand(c->args[0]) + ", " + std::to_string(*ndim) + ", kiln::dtype::" + type + ")";
    }
    if (x->symbol == "vm.builtin.match_shape" && c->args.size() >= 4) {
      const auto ndim = int_arg(2);  // (the shape heap, args[1], is not read when every dimension is static)
      if (!ndim || *ndim < 0 || c->args.size() != std::size_t(*ndim) * 2 + 4) return std::nullopt;
      std::string dims;
      for (std::int64_t i = 0; i < *ndim; ++i) {
        const auto mode = int_arg(3 + 2 * std::size_t(i)), v = int_arg(4 + 2 * std::size_t(i));
        if (!mode || *mode != std::int64_t(vm::match_shape_code::assert_equal_to_imm) || !v || *v < 0) return std::nullopt;
        dims += ", " + std::to_string(*v);
      }
      return "rt::has_shape(" + operand(c->args[0]) + dims + ")";
    }
    return std::nullopt;
  }

  // ---- fused elementwise groups -----------------------------------------------------------------------

  /// `kernels.fused` with its description known: the group as a compile-time `fx::` expression,
  /// which the C++ compiler inlines into one loop (no interpreter). Anything this cannot see
  /// statically (a description that does not parse, too few inputs for it, an element type that
  /// is not float32 or float64) stays a call of the kernel, which reports it as the bytecode would.
  std::optional<std::string> fused_call(const ir::call_node& c) {
    if (c.args.size() < 3 || c.args.size() - 2 > kernels::detail::max_fused_inputs) return std::nullopt;
    auto* text = ir::dyn_cast<ir::string_imm_node>(c.args[0]);
    auto* out = c.args.back()->checked_type ? ir::dyn_cast<ir::tensor_type_node>(c.args.back()->checked_type) : nullptr;
    if (!text || !out || (out->dt != dtype::float32 && out->dt != dtype::float64)) return std::nullopt;
    std::optional<kernels::fused_expr> e;
    try {
      e = kernels::fused_expr::parse(text->value);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (e->num_inputs() > c.args.size() - 2) return std::nullopt;
    auto* result = ir::dyn_cast<ir::var_node>(c.args.back());
    const std::string n = fresh((result ? result->name_hint : binding_) + "_fx");
    line("static constexpr auto " + n + " = " + fx_text(e->root()) + ";");
    uses_fused_ = true;
    std::string args;
    for (std::size_t i = 1; i < c.args.size(); ++i) args += ", " + operand(c.args[i]);
    const std::string type = out->dt == dtype::float32 ? "float" : "double";
    if (st_.instrumented) return "rt::fused_reported<" + type + ">(vm, " + n + ", " + site() + args + ")";
    return "rt::fused<" + type + ">(" + n + ", " + site() + args + ")";
  }

public:
  /// Whether the function runs a fused group through `fx::` (the generated code then needs the kernels).
  bool uses_fused() const noexcept { return uses_fused_; }

private:
  // ---- bindings -----------------------------------------------------------------------------------

  /// Emits a sequence's bindings; returns the C++ lvalue of its result.
  std::string emit_seq(const ir::seq_expr_node& s) {
    for (auto& block : s.blocks)
      for (auto& b : block.bindings) emit_binding(b);
    binding_ = "";
    return operand(s.body);
  }

  void emit_binding(const ir::binding& b) {
    binding_ = b.variable->name_hint;
    const ir::var_node* v = b.variable.get();
    const bool used = used_.count(v) != 0;
    if (auto* i = ir::dyn_cast<ir::if_node>(b.value)) {
      line("// " + comment_text(b.variable->name_hint + " = if " + ir::print(i->cond) + ": ... else: ..."));
      return emit_if(*i, v, used);
    }
    line("// " + comment_text(b.variable->name_hint + " = " + ir::print(b.value)));
    if (auto* x = ir::dyn_cast<ir::var_node>(b.value)) {  // y = x, y = match_cast(x, T): y is x
      auto it = names_.find(x);
      if (it == names_.end()) fail("variable '" + x->name_hint + "' has no value here");
      if (is_local(it->second)) {
        const std::string n = fresh(b.variable->name_hint);
        line("[[maybe_unused]] value& " + n + " = " + it->second + ";");
        names_[v] = n;
        locals_.insert(n);
      } else {
        names_[v] = it->second;
      }
      return;
    }
    if (auto* c = ir::dyn_cast<ir::call_node>(b.value)) {
      if (const lowered_call k = classify_call(*c, m_, failer()); k.kind == lowered_call::kill) {
        if (auto* x = ir::dyn_cast<ir::var_node>(k.args[0])) {
          auto it = names_.find(x);
          if (cached_.count(x)) line("// " + (it != names_.end() ? it->second : x->name_hint) + " stays in the arena for the next call");
          else if (it != names_.end() && is_local(it->second)) line(it->second + " = value();");
        }
        if (used) declare(v, "value()");
        return;
      }
    }
    if (!ir::isa<ir::call_node>(b.value))
      if (auto lit = literal(b.value)) {  // no statement: uses read the literal
        names_[v] = *lit;
        return;
      }
    if (!used)
      if (auto test = inline_check(b.value)) {
        line("if (!" + *test + ") " + value_expr(b.value) + ";");
        return;
      }
    const std::string x = value_expr(b.value);
    if (cached_.count(v)) {
      const std::string n = fresh(v->name_hint), own = fresh(v->name_hint + "_own");
      line("value " + own + ";");
      line("value& " + n + " = arena_use.nested ? " + own + " : arena." + n + ";");
      line("if (" + n + ".is_null()) " + n + " = " + x + ";");
      arena_members_.push_back(n);
      names_[v] = n;
      locals_.insert(n);
      return;
    }
    if (used) declare(v, x);
    else line(x + ";");
  }

  // ---- the per-VM arena ---------------------------------------------------------------------------
  // Storage allocated with a static size, and tensor views on it with static offsets and shapes,
  // need making only once per VM when no tensor of that storage leaves the function: when every
  // use of each view is an argument of a kernel (which reads or writes it and keeps nothing), an
  // `if` condition, a kill, a field of a tuple used so (element access included), or the argument
  // of a `kernels.reshape_view` whose result is used so.
  // Only bindings at the function's top level are considered.

  static bool static_shape(const ir::expr& e) {
    auto* s = ir::dyn_cast<ir::shape_expr_node>(e);
    if (!s) return false;
    for (auto& d : s->values)
      if (!ir::as_int(d)) return false;
    return true;
  }
  static bool static_scalar(const ir::expr& e) {
    if (ir::isa<ir::string_imm_node>(e)) return true;
    auto* p = ir::dyn_cast<ir::prim_value_node>(e);
    return p && (!p->int_value || ir::as_int(p->int_value));
  }
  static const ir::extern_func_node* extern_callee(const ir::expr& e) {
    auto* c = ir::dyn_cast<ir::call_node>(e);
    return c ? ir::dyn_cast<ir::extern_func_node>(c->callee) : nullptr;
  }

  /// The variable whose value `e` is or is part of: `x`, or `t` for `t[i]`.
  static const ir::var_node* holder(const ir::expr& e) {
    if (auto* v = ir::dyn_cast<ir::var_node>(e)) return v;
    if (auto* g = ir::dyn_cast<ir::tuple_get_item_node>(e)) return ir::dyn_cast<ir::var_node>(g->tuple);
    return nullptr;
  }

  void find_cacheable() {
    const auto& body = static_cast<const ir::seq_expr_node&>(*f_->body);
    std::set<const ir::var_node*> storages;
    std::map<const ir::var_node*, const ir::var_node*> view_of;
    for (auto& block : body.blocks)
      for (auto& b : block.bindings) {
        auto* c = ir::dyn_cast<ir::call_node>(b.value);
        if (!c) continue;
        binding_ = b.variable->name_hint;  // for classify_call's messages
        if (const lowered_call k = classify_call(*c, m_, failer()); k.kind == lowered_call::builtin_with_ctx) {
          const auto& a = k.args;
          if (k.symbol == "vm.builtin.alloc_storage" && a.size() == 4 && static_shape(a[0]) && static_scalar(a[1]) &&
              static_scalar(a[2]) && static_scalar(a[3]))
            storages.insert(b.variable.get());
        } else if (auto* x = extern_callee(b.value); x && x->symbol == "vm.builtin.alloc_tensor" && c->args.size() == 4) {
          auto* st = ir::dyn_cast<ir::var_node>(c->args[0]);
          if (st && storages.count(st) && static_scalar(c->args[1]) && static_shape(c->args[2]) && static_scalar(c->args[3]))
            view_of[b.variable.get()] = st;
        }
      }
    if (view_of.empty()) return;
    std::set<const ir::var_node*> escapes;
    std::vector<std::pair<const ir::var_node*, const ir::var_node*>> derived;  ///< (a result, what it may hold): a reshape_view or a tuple
    std::function<void(const ir::seq_expr_node&)> walk = [&](const ir::seq_expr_node& s) {
      auto escape_all = [&](const ir::expr& e) {
        ir::post_order_visit(e, [&](const ir::expr& x) {
          if (auto* v = ir::dyn_cast<ir::var_node>(x)) escapes.insert(v);
        });
      };
      for (auto& block : s.blocks)
        for (auto& b : block.bindings) {
          if (auto* i = ir::dyn_cast<ir::if_node>(b.value)) {
            if (!ir::isa<ir::var_node>(i->cond)) escape_all(i->cond);  // a condition is read, not kept
            walk(static_cast<const ir::seq_expr_node&>(*i->then_branch));
            walk(static_cast<const ir::seq_expr_node&>(*i->else_branch));
            continue;
          }
          auto* c = ir::dyn_cast<ir::call_node>(b.value);
          const auto* x = extern_callee(b.value);
          const bool kernel = x && x->symbol.starts_with("kernels.") && x->symbol != kernels::abi::reshape_view::name;
          binding_ = b.variable->name_hint;
          if (c && classify_call(*c, m_, failer()).kind == lowered_call::kill) continue;
          if (x && x->symbol == kernels::abi::reshape_view::name && c->args.size() == 2 && holder(c->args[0])) {
            // A view (or a copy) of its argument: the argument leaves only if the result does.
            derived.emplace_back(b.variable.get(), holder(c->args[0]));
            escape_all(c->args[1]);
            continue;
          }
          if (ir::isa<ir::tuple_get_item_node>(b.value) && holder(b.value)) {  // an element: the tuple leaves if it does
            derived.emplace_back(b.variable.get(), holder(b.value));
            continue;
          }
          if (auto* t = ir::dyn_cast<ir::tuple_node>(b.value)) {  // holds its fields: they leave only if it does
            for (auto& field : t->fields)
              if (auto* fv = ir::dyn_cast<ir::var_node>(field)) derived.emplace_back(b.variable.get(), fv);
              else escape_all(field);
            continue;
          }
          if (kernel || (x && x->symbol == "vm.builtin.alloc_tensor" && view_of.count(b.variable.get()))) {
            for (std::size_t i = 0; i < c->args.size(); ++i) {
              const ir::expr& arg = c->args[i];
              if (ir::isa<ir::var_node>(arg) && (kernel || i == 0)) continue;
              if (auto* t = ir::dyn_cast<ir::tuple_node>(arg); t && kernel) {  // a kernel's tuple of inputs or outputs
                for (auto& field : t->fields)
                  if (!ir::isa<ir::var_node>(field)) escape_all(field);
                continue;
              }
              escape_all(arg);
            }
            continue;
          }
          escape_all(b.value);
        }
      escape_all(s.body);
    };
    walk(body);
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& [result, source] : derived)
        if (escapes.count(result) && escapes.insert(source).second) changed = true;
    }
    std::set<const ir::var_node*> bad_storages;
    for (auto& [view, st] : view_of)
      if (escapes.count(view)) bad_storages.insert(st);
    for (auto* st : storages)
      if (escapes.count(st)) bad_storages.insert(st);
    for (auto& [view, st] : view_of)
      if (!bad_storages.count(st)) {
        cached_.insert(view);
        cached_.insert(st);
      }
  }

  void declare(const ir::var_node* v, const std::string& init) {
    const std::string n = fresh(v->name_hint);
    line("value " + n + " = " + init + ";");
    names_[v] = n;
    locals_.insert(n);
  }

  /// Whether `n` names a mutable local (a parameter, a binding's value), not a literal or a constant.
  bool is_local(const std::string& n) const { return locals_.count(n) != 0; }

  void emit_if(const ir::if_node& i, const ir::var_node* v, bool used) {
    const bool is_prim = ir::isa<ir::prim_type_node>(i.cond->checked_type);
    std::string cond = operand(i.cond);
    if (!is_prim) cond = native_call("vm.builtin.read_if_cond", ", " + cond);
    std::string merge;
    if (used) {
      merge = fresh(v->name_hint);
      line("value " + merge + ";");
    }
    const std::string binding = binding_;
    line("if (rt::condition(" + cond + ", " + site() + ")) {");
    auto branch = [&](const ir::expr& s) {
      ++indent_;
      const std::string r = emit_seq(static_cast<const ir::seq_expr_node&>(*s));
      binding_ = binding;
      if (used) line(merge + " = " + r + ";");
      --indent_;
    };
    branch(i.then_branch);
    line("} else {");
    branch(i.else_branch);
    line("}");
    if (used) {
      names_[v] = merge;
      locals_.insert(merge);
    }
  }

  cpp_module_state& st_;
  const ir::ir_module& m_;
  std::string name_, cpp_name_, signature_;
  ir::function f_;
  std::size_t index_;
  std::set<const ir::var_node*> cached_;    ///< bindings kept in the per-VM arena
  std::vector<std::string> arena_members_;
  std::set<const ir::var_node*> used_;
  std::set<std::string> taken_, locals_;
  std::unordered_map<const ir::var_node*, std::string> names_;
  std::map<std::int64_t, std::string> constants_;
  std::string body_, binding_;
  int indent_ = 1;
  bool uses_vm_arg_ = false;
  bool uses_fused_ = false;
};

}  // namespace detail

/// The executable of a lowered module in the compiled mode: one compiled function per graph-level
/// function (named, typed and with the parameter names as in the module), the natives they call,
/// the constant pool, and in `generated_source` the C++ implementing the compiled functions
/// inside namespace `options.name_space`:
///
///     struct literals { ... };                       // what the functions use, made once
///     inline value main(const literals& k, vm_context& vm, std::span<value> args);
///     inline void add_functions(kiln::vm::native_code& code);   // registers them all
inline vm::executable cpp_codegen(const ir::ir_module& m, const cpp_codegen_options& options = {}) {
  detail::cpp_module_state st;
  st.instrumented = options.instrumented;
  // The graph-level functions come first in the table, so that their indices do not depend on
  // the order functions call each other.
  std::vector<std::pair<std::string, ir::function>> fns;
  for (auto& e : m->functions())
    if (auto f = ir::ref_cast<ir::function_node>(e.func)) {
      vm::function_info info;
      info.kind = vm::function_kind::compiled;
      info.name = e.gv->name;
      info.num_args = std::int64_t(f->params.size());
      info.register_file_size = info.num_args;
      for (auto& p : f->params) {
        info.param_names.push_back(p->name_hint);
        info.param_types.push_back(signature_of(p->checked_type));
      }
      info.ret_type = signature_of(f->ret_type);
      st.exec.functions.push_back(std::move(info));
      fns.emplace_back(e.gv->name, f);
    }
  if (!options.name_space.empty()) {
    std::string part;
    for (char c : options.name_space + "::") {
      if (c == ':') {
        if (!part.empty() && detail::cpp_identifier(part, "x") != part)
          throw codegen_error("kiln::codegen::cpp_codegen: the namespace '" + options.name_space + "' is not a C++ qualified name");
        part.clear();
      } else {
        part.push_back(c);
      }
    }
  }
  std::set<std::string> cpp_names;
  std::vector<std::string> bodies, registrations;
  bool uses_fused = false;
  for (auto& [name, f] : fns) {
    std::string cpp = detail::cpp_identifier(name, "fn");
    for (int i = 1; cpp_names.count(cpp) || cpp == "literals" || cpp == "add_functions" || cpp == "value"; ++i)
      cpp = detail::cpp_identifier(name, "fn") + "_" + std::to_string(i);
    cpp_names.insert(cpp);
    detail::cpp_function_emitter emitter(st, m, name, cpp, f, st.exec.functions[bodies.size()].signature_text(), bodies.size());
    bodies.push_back(emitter.run());
    uses_fused = uses_fused || emitter.uses_fused();
    registrations.push_back("  code.add(" + detail::cpp_string(name) + ", rt::make_function<literals, &" + cpp + ">(k));");
  }

  std::string src;
  src += "// Generated by kiln " + std::string(kiln::version) + " (kiln::codegen::cpp_codegen): the compiled functions of an executable.\n";
  src += "// Deterministic; regenerate it from the IR rather than editing it.\n";
  if (options.instrumented) src += "// Instrumented: every call is reported to the VM's instrument (set_instrument), as the bytecode does.\n";
  for (auto& f : st.exec.functions)
    if (f.kind == vm::function_kind::compiled) src += "//   @" + detail::comment_text(f.name + f.signature_text()) + "\n";
  const std::string ns = options.name_space.empty() ? std::string("kiln_generated") : options.name_space;
  std::string guard = "KILN_GENERATED_";
  for (char c : ns) guard.push_back(c == ':' ? '_' : char(std::toupper(static_cast<unsigned char>(c))));
  guard += "_HPP";
  src += "#ifndef " + guard + "\n#define " + guard + "\n\n";
  src += "#include <kiln/vm/compiled.hpp>\n";
  if (uses_fused) src += "#include <kiln/vm/compiled_fused.hpp>\n";
  src += "#include <kiln/vm/serialize.hpp>\n\n#include <cstdint>\n#include <filesystem>\n#include <limits>\n#include <memory>\n#include <span>\n#include <string>\n\n";
  src += "namespace " + ns + " {\n\n";
  src += "using kiln::vm::value;\nnamespace rt = kiln::vm::compiled;\n";
  if (uses_fused) src += "namespace fx = kiln::kernels::fx;\n";
  src += "\n";
  src += "/// The literals the functions use (shapes, strings, numbers), made once per executable.\nstruct literals {\n";
  for (auto& [n, init] : st.literals) src += "  value " + n + " = " + init + ";\n";
  src += "};\n\n";
  for (auto& b : bodies) src += b + "\n";
  src += "/// Adds the compiled functions to `code`, sharing one `literals`.\ninline void add_functions(kiln::vm::native_code& code) {\n";
  src += "  auto k = std::make_shared<const literals>();\n";
  for (auto& r : registrations) src += r + "\n";
  src += "}\n\n";
  src += "/// The executable this code belongs to, read from `path` (what `kiln-compile --emit-cpp` writes beside\n";
  src += "/// this header), with the functions attached: ready for a `kiln::vm::virtual_machine`.\n";
  src += "inline kiln::vm::executable load(const std::filesystem::path& path) {\n";
  src += "  return rt::attach(kiln::vm::load_executable(path), &add_functions);\n}\n\n";
  src += "}  // namespace " + ns + "\n\n#endif  // " + guard + "\n";

  vm::executable ex = std::move(st.exec);
  ex.generated_source = std::move(src);
  vm::validate(ex, "cpp_codegen");  // a bug here, not in the input, if it throws
  return ex;
}

}  // namespace kiln::codegen
