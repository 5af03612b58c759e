// SPDX-License-Identifier: Apache-2.0
/// \file
/// Fused elementwise kernels, the run-time form (`fused.hpp` has the whole picture): `fused_expr`,
/// a description parsed from text or built node by node, compiled into a short program over
/// slots, and interpreted one tile (4 KB of each operand) at a time, so the intermediates of a
/// tile stay in L1 and memory is read and written once:
///
///     fused_expr e = fused_expr::parse("(add (exp (multiply x0 x1)) x2)");
///     e.run({a, b, c}, out);
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/kernels/fx.hpp>
#include <kiln/kernels/parallel.hpp>
#include <kiln/support/strings.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::kernels {

/// A fused elementwise expression described at run time (see the file comment). Immutable and
/// cheap to copy; built with `input`, `constant` and `apply`, or parsed from text.
class fused_expr {
public:
  /// The operators a fused expression may use, in the order of `operator_names`.
  enum class opcode : std::uint8_t {
    add, subtract, multiply, divide, power, maximum, minimum,                          // binary
    negative, abs, relu, exp, log, sqrt, rsqrt, tanh, sigmoid, erf, gelu, gelu_tanh,  // unary
    clip,                                                                             // unary, two bounds
    copy                                                                              // internal
  };
  static constexpr std::string_view operator_names[] = {
      "add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "negative", "abs", "relu",
      "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "gelu", "gelu_tanh", "clip"};

  /// Input tensor `i` (0 <= i < 8).
  static fused_expr input(std::size_t i) {
    if (i >= detail::max_fused_inputs) fail("fused_expr", "input x" + std::to_string(i) + ": at most 8 inputs (x0..x7)");
    return fused_expr(std::make_shared<const node>(node{node::input, opcode::copy, i, 0, 0, 0, {}}));
  }
  static fused_expr constant(double v) { return fused_expr(std::make_shared<const node>(node{node::constant, opcode::copy, 0, v, 0, 0, {}})); }
  /// Operator `op` (a name of `operator_names`) on `args`; `clip` also takes its bounds.
  static fused_expr apply(std::string_view op, std::vector<fused_expr> args, double lo = 0, double hi = 0) {
    const opcode code = lookup(op);
    const std::size_t want = code <= opcode::minimum ? 2 : 1;
    if (args.size() != want)
      fail("fused_expr", kiln::detail::concat("'", op, "' takes ", want, " operands, got ", args.size()));
    if (code == opcode::clip && lo > hi) fail("fused_expr", "clip: the lower bound is above the upper bound");
    node n{node::apply, code, 0, 0, lo, hi, {}};
    for (auto& a : args) n.children.push_back(std::move(a.root_));
    return fused_expr(std::make_shared<const node>(std::move(n)));
  }
  /// Parses the s-expression form, e.g. "(add (exp (multiply x0 x1)) (clip x2 -1 1))".
  static fused_expr parse(std::string_view text) {
    // A `;` starts a comment that runs to the end (the compiler names the fused bindings there).
    if (const std::size_t semi = text.find(';'); semi != std::string_view::npos) text = text.substr(0, semi);
    parser p{text};
    fused_expr e = p.expression();
    p.skip_space();
    if (p.at < text.size()) p.error("unexpected text after the expression");
    return e;
  }

  /// The s-expression form (`parse(e.to_string())` gives `e` back).
  std::string to_string() const {
    std::string s;
    print(*root_, s);
    return s;
  }
  /// 1 + the highest input index used.
  std::size_t num_inputs() const noexcept { return program_->inputs; }

  /// Evaluates the expression over `inputs` into `out` in one pass.
  KILN_DECL void run(std::span<const tensor> inputs, const tensor& out) const;
  void run(std::initializer_list<tensor> inputs, const tensor& out) const { run(std::span<const tensor>(inputs.begin(), inputs.size()), out); }
  tensor run(std::span<const tensor> inputs) const {
    const dims shape = detail::check_fused("fused", inputs, num_inputs(), nullptr);
    tensor out = new_output(shape_vector(shape.begin(), shape.end()), inputs[0].type());
    run(inputs, out);
    return out;
  }
  tensor run(std::initializer_list<tensor> inputs) const { return run(std::span<const tensor>(inputs.begin(), inputs.size())); }

  /// Number of operators (nodes that compute), for cost models and tests.
  std::size_t num_operations() const noexcept {
    std::size_t n = 0;
    for (const instr& in : program_->code) n += 1 + in.posts;
    return n;
  }
  /// Number of passes over a tile the interpreter makes: operators less those applied in a
  /// register after the one before them (a cheap unary operator, or an arithmetic one with a
  /// constant, folded into the instruction that computes its operand).
  std::size_t num_instructions() const noexcept { return program_->code.size(); }
  /// Whether a kernel's epilogue (`fused_epilogue`) evaluates the expression in one pass over a
  /// block, without the interpreter: an activation (none, relu, clip, sigmoid, tanh, gelu,
  /// gelu_tanh, SiLU x * sigmoid(x), hard-sigmoid clip(x * a + b, lo, hi), hard-swish x *
  /// hard-sigmoid(x)) of x0 plus up to three operands (x0 + a, (x0 + a) + b, (x0 + a) + (b + c)),
  /// each operand read along the block's rows or as one value per row.
  bool one_pass_epilogue() const noexcept { return program_->form.has_value(); }

  /// A node of the expression tree: an input, a constant, or an operator applied to children.
  struct node {
    enum kind_t : std::uint8_t { input, constant, apply } kind;
    opcode op;
    std::size_t index;  ///< input
    double value;       ///< constant
    double lo, hi;      ///< clip
    std::vector<std::shared_ptr<const node>> children;
  };
  /// The expression tree, for tools that translate it (the C++ code generator writes it as an
  /// `fx::` expression).
  const node& root() const noexcept { return *root_; }

private:
  template <class T>
  friend class fused_epilogue;

  /// A cheap operator applied to an instruction's result while it is still in a register: a
  /// unary one (negative, abs, relu, clip) or a binary one with a constant on the `left` or
  /// the right (add, subtract, multiply, divide, maximum, minimum).
  struct post_op {
    opcode op;
    bool left;
    double c, lo, hi;
  };
  static constexpr std::size_t max_post_ops = 4;
  /// One step of the program: `slot[dst] = post(op(slot[a], slot[b]))`, where `post` is up to
  /// four cheap operators that followed it in the tree: each of them would otherwise cost one
  /// more store and load of the whole tile (an interpreter over L1 tiles is bound by those).
  struct instr {
    opcode op;
    std::uint32_t dst, a, b;
    double lo, hi;
    std::uint8_t posts = 0;
    std::array<post_op, max_post_ops> post{};
  };
  template <class T>
  struct step;
  /// One instruction over a tile: `d = post(op(a, b))` over `n` elements (a multiple of the
  /// vector width). `a` or `b` is null for a constant operand, the step's `ca` or `cb`, which is
  /// then broadcast in a register rather than read from a buffer.
  template <class T>
  using exec_fn = void (*)(const step<T>& st, T* d, const T* a, const T* b, std::int64_t n);
  /// A post operator resolved for one element type.
  template <class T>
  struct post_step {
    opcode op;
    bool left;
    T c;
    double lo, hi;
  };
  /// An instruction resolved for one element type: its function, constant operand and post
  /// operators.
  template <class T>
  struct step {
    exec_fn<T> fn;
    bool ka, kb;  ///< operand a or b is a constant broadcast in a register
    T ca, cb;
    double lo, hi;  ///< clip
    std::uint8_t posts;
    std::array<post_step<T>, max_post_ops> post;
  };
  /// An expression that an epilogue evaluates in one pass over its block, without the
  /// interpreter: an activation of a sum of x0 and up to three operands, in one of the orders the
  /// compiler writes them (x0 + a, (x0 + a) + b, (x0 + a) + (b + c), either operand of each add
  /// first). That is the bias, residual and activation that follow almost every convolution and
  /// matmul; evaluated by the interpreter, SiLU's three instructions and the bias's broadcast
  /// were a fifth of EfficientNet-B0's time. The activations compute with the interpreter's
  /// operators, in its order, so both give the same bits.
  struct activation_form {
    enum class act : std::uint8_t {
      none, relu, clip, sigmoid, tanh, gelu, gelu_tanh,
      silu,          ///< s * sigmoid(s)
      hard_sigmoid,  ///< clip(s * alpha + beta, lo, hi)
      hard_swish     ///< s * hard_sigmoid(s)
    };
    enum class sum : std::uint8_t { x0, x0_a, x0_a_b, x0_a_bc };
    act activation = act::none;
    sum shape = sum::x0;
    std::array<std::uint8_t, 3> operands{};  ///< the input indices of a, b and c
    double lo = 0, hi = 0, alpha = 0, beta = 0;
    /// The activations of exp, erf or tanh: the operator that computes it (sigmoid for SiLU; copy
    /// for the others), and the program's instruction of that operator, whose step function the
    /// epilogue runs too (the same code, so the same bits).
    opcode staged = opcode::copy;
    std::uint32_t instruction = 0;
  };

  /// Slots: the inputs, then the constants, then temporaries. The instructions are resolved for
  /// both element types once, when the expression is built, so that a run starts at once.
  struct program {
    std::size_t inputs = 0;
    std::vector<double> constants;
    std::size_t temps = 0;
    std::vector<instr> code;
    std::uint32_t result = 0;
    std::vector<step<float>> float_steps;
    std::vector<step<double>> double_steps;
    /// The constants some instruction reads from a buffer (a unary operator's operand, or both
    /// of a binary one's): only these are filled before a run.
    std::vector<std::uint32_t> buffered_constants;
    /// The expression as an `activation_form`, where it is one.
    std::optional<activation_form> form;

    std::uint32_t first_temp() const noexcept { return std::uint32_t(detail::max_fused_inputs + constants.size()); }
    bool is_constant(std::uint32_t slot) const noexcept { return slot >= detail::max_fused_inputs && slot < first_temp(); }
    double constant(std::uint32_t slot) const { return constants[slot - detail::max_fused_inputs]; }
    template <class T>
    const std::vector<step<T>>& steps() const {
      if constexpr (std::is_same_v<T, float>) return float_steps;
      else return double_steps;
    }
    /// SiLU, s * sigmoid(s), as one step over a buffer of sums: the interpreter's sigmoid and
    /// multiply, resolved with its other steps, so that it gives the same bits as its two
    /// instructions.
    exec_fn<float> float_silu = &exec_silu<float>;
    exec_fn<double> double_silu = &exec_silu<double>;
    template <class T>
    exec_fn<T> silu() const {
      if constexpr (std::is_same_v<T, float>) return float_silu;
      else return double_silu;
    }
  };

  explicit fused_expr(std::shared_ptr<const node> root) : root_(std::move(root)), program_(compile(*root_)) {}

  static opcode lookup(std::string_view op) {
    for (std::size_t i = 0; i < std::size(operator_names); ++i)
      if (operator_names[i] == op) return opcode(i);
    std::vector<std::string> names(std::begin(operator_names), std::end(operator_names));
    fail("fused_expr", kiln::detail::concat("unknown operator '", op, "'", kiln::detail::did_you_mean(op, names)));
  }

  static std::shared_ptr<const program> compile(const node& root) {
    auto p = std::make_shared<program>();
    // Inputs and constants get fixed slots below the temporaries: count them first.
    std::size_t constants = 0;
    auto count = [&](auto& self, const node& n) -> void {
      if (n.kind == node::input) p->inputs = std::max(p->inputs, n.index + 1);
      if (n.kind == node::constant) ++constants;
      for (const auto& c : n.children) self(self, *c);
    };
    count(count, root);
    const auto first_temp = std::uint32_t(detail::max_fused_inputs + constants);
    std::vector<std::uint32_t> free_temps;
    // Post-order: a node's result goes into a child's temporary when it has one, else into a
    // free one, so the program needs about as many temporaries as the tree is deep.
    auto emit = [&](auto& self, const node& n) -> std::uint32_t {
      if (n.kind == node::input) return std::uint32_t(n.index);
      if (n.kind == node::constant) {
        p->constants.push_back(n.value);
        return std::uint32_t(detail::max_fused_inputs + p->constants.size() - 1);
      }
      std::uint32_t args[2] = {0, 0};
      for (std::size_t i = 0; i < n.children.size(); ++i) args[i] = self(self, *n.children[i]);
      std::uint32_t dst = UINT32_MAX;
      for (std::size_t i = 0; i < n.children.size(); ++i) {
        if (args[i] < first_temp) continue;
        if (dst == UINT32_MAX) dst = args[i];
        else if (args[i] != dst) free_temps.push_back(args[i]);
      }
      if (dst == UINT32_MAX) {
        if (free_temps.empty()) {
          dst = first_temp + std::uint32_t(p->temps++);
        } else {
          dst = free_temps.back();
          free_temps.pop_back();
        }
      }
      p->code.push_back(instr{n.op, dst, args[0], n.children.size() > 1 ? args[1] : args[0], n.lo, n.hi});
      return dst;
    };
    p->result = emit(emit, root);
    p->form = match_activation(root);
    merge_post_ops(*p);
    if (p->form) {
      if (const opcode staged = p->form->staged; staged != opcode::copy) {
        const auto at = std::find_if(p->code.begin(), p->code.end(), [&](const instr& in) { return in.op == staged; });
        if (at == p->code.end()) p->form.reset();  // cannot happen: the form was matched on this tree
        else p->form->instruction = std::uint32_t(at - p->code.begin());
      }
    }
    if (p->code.empty()) {  // a bare input or constant: copy it
      p->code.push_back(instr{opcode::copy, first_temp, p->result, p->result, 0, 0});
      p->temps = 1;
      p->result = first_temp;
    }
    resolve_steps(*p, p->float_steps);
    resolve_steps(*p, p->double_steps);
    for (std::size_t c = 0; c < p->code.size(); ++c) {
      const instr& in = p->code[c];
      const step<double>& st = p->double_steps[c];
      auto buffered = [&](std::uint32_t slot) {
        if (p->is_constant(slot) && std::find(p->buffered_constants.begin(), p->buffered_constants.end(), slot) == p->buffered_constants.end())
          p->buffered_constants.push_back(slot);
      };
      if (!st.ka) buffered(in.a);
      if (!st.kb) buffered(in.b);
    }
    return p;
  }

  /// Whether the trees `a` and `b` compute the same value the same way.
  static bool same_tree(const node& a, const node& b) {
    if (&a == &b) return true;
    if (a.kind != b.kind || a.op != b.op || a.children.size() != b.children.size()) return false;
    if (a.kind == node::input) return a.index == b.index;
    if (a.kind == node::constant) return a.value == b.value;
    if (a.op == opcode::clip && (a.lo != b.lo || a.hi != b.hi)) return false;
    for (std::size_t i = 0; i < a.children.size(); ++i)
      if (!same_tree(*a.children[i], *b.children[i])) return false;
    return true;
  }
  /// `n` as a sum of `activation_form` (x0 once, operands x1...), or nothing.
  static std::optional<activation_form> match_sum(const node& n) {
    using sum = activation_form::sum;
    const auto operand = [](const node& m) { return m.kind == node::input && m.index > 0; };
    const auto is_add = [](const node& m) { return m.kind == node::apply && m.op == opcode::add; };
    activation_form f;
    if (n.kind == node::input && n.index == 0) return f;
    if (!is_add(n)) return std::nullopt;
    // x0 + a, either way round: a's index, or 0.
    const auto x0_plus = [&](const node& m) -> std::size_t {
      if (!is_add(m)) return 0;
      const node &l = *m.children[0], &r = *m.children[1];
      if (l.kind == node::input && l.index == 0 && operand(r)) return r.index;
      if (r.kind == node::input && r.index == 0 && operand(l)) return l.index;
      return 0;
    };
    if (const std::size_t a = x0_plus(n)) {
      f.shape = sum::x0_a;
      f.operands[0] = std::uint8_t(a);
      return f;
    }
    for (int side = 0; side < 2; ++side) {
      const node &first = *n.children[std::size_t(side)], &second = *n.children[std::size_t(1 - side)];
      const std::size_t a = x0_plus(first);
      if (!a) continue;
      f.operands[0] = std::uint8_t(a);
      if (operand(second)) {
        f.shape = sum::x0_a_b;
        f.operands[1] = std::uint8_t(second.index);
        return f;
      }
      if (is_add(second) && operand(*second.children[0]) && operand(*second.children[1])) {
        f.shape = sum::x0_a_bc;
        f.operands[1] = std::uint8_t(second.children[0]->index);
        f.operands[2] = std::uint8_t(second.children[1]->index);
        return f;
      }
    }
    return std::nullopt;
  }
  /// `n` as an `activation_form`, or nothing.
  static std::optional<activation_form> match_activation(const node& n) {
    using act = activation_form::act;
    if (auto f = match_sum(n)) return f;
    if (n.kind != node::apply) return std::nullopt;
    // clip(s * alpha + beta, lo, hi), either operand of the add and the multiply first; `s` is
    // set to the sum.
    const auto hard_sigmoid = [](const node& m, const node*& s) -> std::optional<activation_form> {
      if (m.kind != node::apply || m.op != opcode::clip) return std::nullopt;
      const node& add = *m.children[0];
      if (add.kind != node::apply || add.op != opcode::add) return std::nullopt;
      for (std::size_t side = 0; side < 2; ++side) {
        const node &mul = *add.children[side], &beta = *add.children[1 - side];
        if (beta.kind != node::constant || mul.kind != node::apply || mul.op != opcode::multiply) continue;
        for (std::size_t mside = 0; mside < 2; ++mside) {
          const node &sum = *mul.children[mside], &alpha = *mul.children[1 - mside];
          if (alpha.kind != node::constant) continue;
          auto f = match_sum(sum);
          if (!f) continue;
          f->activation = act::hard_sigmoid;
          f->alpha = alpha.value, f->beta = beta.value, f->lo = m.lo, f->hi = m.hi;
          s = &sum;
          return f;
        }
      }
      return std::nullopt;
    };
    const node* inner = nullptr;
    if (auto f = hard_sigmoid(n, inner)) return f;
    if (n.op == opcode::multiply) {  // s * sigmoid(s), s * hard_sigmoid(s)
      for (std::size_t side = 0; side < 2; ++side) {
        const node &s = *n.children[side], &g = *n.children[1 - side];
        if (g.kind == node::apply && g.op == opcode::sigmoid && same_tree(*g.children[0], s)) {
          if (auto f = match_sum(s)) {
            f->activation = act::silu;
            f->staged = opcode::sigmoid;
            return f;
          }
        }
        if (auto f = hard_sigmoid(g, inner); f && same_tree(*inner, s)) {
          f->activation = act::hard_swish;
          return f;
        }
      }
      return std::nullopt;
    }
    if (n.children.size() != 1) return std::nullopt;
    auto f = match_sum(*n.children[0]);
    if (!f) return std::nullopt;
    switch (n.op) {
      case opcode::relu: f->activation = act::relu; break;
      case opcode::sigmoid: f->activation = act::sigmoid, f->staged = n.op; break;
      case opcode::tanh: f->activation = act::tanh, f->staged = n.op; break;
      case opcode::gelu: f->activation = act::gelu, f->staged = n.op; break;
      case opcode::gelu_tanh: f->activation = act::gelu_tanh, f->staged = n.op; break;
      case opcode::clip:
        f->activation = act::clip;
        f->lo = n.lo, f->hi = n.hi;
        break;
      default: return std::nullopt;
    }
    return f;
  }

  /// Folds each cheap unary operator, or binary one with a constant operand, into the
  /// instruction before it when it reads that instruction's result (its only use: the program is
  /// a tree).
  static void merge_post_ops(program& p) {
    std::vector<instr> merged;
    for (const instr& in : p.code) {
      if (!merged.empty() && merged.back().posts < max_post_ops) {
        instr& prev = merged.back();
        std::optional<post_op> post;
        switch (in.op) {
          case opcode::negative:
          case opcode::abs:
          case opcode::relu:
          case opcode::clip:
            if (in.a == prev.dst) post = post_op{in.op, false, 0, in.lo, in.hi};
            break;
          case opcode::add:
          case opcode::subtract:
          case opcode::multiply:
          case opcode::divide:
          case opcode::maximum:
          case opcode::minimum:
            if (in.a == prev.dst && p.is_constant(in.b)) post = post_op{in.op, false, p.constant(in.b), 0, 0};
            else if (in.b == prev.dst && p.is_constant(in.a)) post = post_op{in.op, true, p.constant(in.a), 0, 0};
            break;
          default: break;
        }
        if (post) {
          prev.post[prev.posts++] = *post;
          prev.dst = in.dst;
          continue;
        }
      }
      merged.push_back(in);
    }
    p.code = std::move(merged);
  }

  static void print(const node& n, std::string& s) {
    if (n.kind == node::input) {
      s.append("x").append(std::to_string(n.index));
    } else if (n.kind == node::constant) {
      char buf[32];
      const auto r = std::to_chars(buf, buf + sizeof buf, n.value);
      s.append(buf, r.ptr);
    } else {
      s.append("(").append(operator_names[std::size_t(n.op)]);
      for (const auto& c : n.children) {
        s.append(" ");
        print(*c, s);
      }
      if (n.op == opcode::clip) {
        char buf[32];
        s.append(" ").append(buf, std::to_chars(buf, buf + sizeof buf, n.lo).ptr);
        s.append(" ").append(buf, std::to_chars(buf, buf + sizeof buf, n.hi).ptr);
      }
      s.append(")");
    }
  }

  struct parser {
    std::string_view text;
    std::size_t at = 0;
    [[noreturn]] void error(const std::string& what) const {
      fail("fused_expr::parse", kiln::detail::concat("at offset ", at, " of \"", text, "\": ", what));
    }
    void skip_space() {
      while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
    }
    std::string_view word() {
      skip_space();
      const std::size_t start = at;
      while (at < text.size() && !std::isspace(static_cast<unsigned char>(text[at])) && text[at] != '(' && text[at] != ')') ++at;
      return text.substr(start, at - start);
    }
    std::optional<double> number(std::string_view w) const {
      double v;
      const auto r = std::from_chars(w.data(), w.data() + w.size(), v);
      if (r.ec != std::errc() || r.ptr != w.data() + w.size()) return std::nullopt;
      return v;
    }
    double bound() {
      const std::string_view w = word();
      if (auto v = number(w)) return *v;
      error(kiln::detail::concat("clip needs number bounds, got '", w, "'"));
    }
    fused_expr expression(int depth = 0) {
      if (depth > 200) error("the expression nests too deeply");
      skip_space();
      if (at >= text.size()) error("expected an expression");
      if (text[at] == ')') error("unexpected ')'");
      if (text[at] == '(') {
        ++at;
        const std::size_t op_at = at;
        const std::string_view op = word();
        if (op.empty()) error("expected an operator name after '('");
        std::vector<fused_expr> args;
        double lo = 0, hi = 0;
        for (;;) {
          skip_space();
          if (at >= text.size()) error("missing ')'");
          if (text[at] == ')') break;
          if (op == "clip" && args.size() == 1) {
            lo = bound();
            hi = bound();
            continue;
          }
          args.push_back(expression(depth + 1));
        }
        ++at;
        try {
          return apply(op, std::move(args), lo, hi);
        } catch (const kernel_error& e) {
          at = op_at;
          std::string why = e.what();
          error(why.substr(why.find(": ") + 2));
        }
      }
      const std::string_view w = word();
      if (w.size() > 1 && w[0] == 'x') {
        std::size_t i = 0;
        const auto r = std::from_chars(w.data() + 1, w.data() + w.size(), i);
        if (r.ec == std::errc() && r.ptr == w.data() + w.size()) {
          if (i >= detail::max_fused_inputs) error(kiln::detail::concat("input ", w, ": at most 8 inputs (x0..x7)"));
          return input(i);
        }
      }
      if (auto v = number(w)) return constant(*v);
      error(kiln::detail::concat("expected '(', an input x0..x7 or a number, got '", w, "'"));
    }
  };

  /// Applies post operator `p` to the vectors `r`.
  template <class T, std::size_t M>
  __attribute__((always_inline)) static void apply_post(const post_step<T>& p, batch<T> (&r)[M]) {
    using V = batch<T>;
    const V c(p.c);
    auto binary = [&](auto op) __attribute__((always_inline)) {
      if (p.left)
        for (V& v : r) v = op(c, v);
      else
        for (V& v : r) v = op(v, c);
    };
    switch (p.op) {
      case opcode::add: binary(ops::add{}); break;
      case opcode::subtract: binary(ops::subtract{}); break;
      case opcode::multiply: binary(ops::multiply{}); break;
      case opcode::divide: binary(ops::divide{}); break;
      case opcode::maximum: binary(ops::maximum{}); break;
      case opcode::minimum: binary(ops::minimum{}); break;
      case opcode::negative:
        for (V& v : r) v = ops::negative{}(v);
        break;
      case opcode::abs:
        for (V& v : r) v = ops::abs{}(v);
        break;
      case opcode::relu:
        for (V& v : r) v = ops::relu{}(v);
        break;
      case opcode::clip: {
        const ops::clip clip{p.lo, p.hi};
        for (V& v : r) v = clip(v);
        break;
      }
      default: break;  // never merged (see merge_post_ops)
    }
  }
  /// `d[j] = post(f(j))` for each vector of `n` elements, four vectors per iteration (the loop is
  /// bound by its loads and stores).
  template <class T, class F>
  __attribute__((always_inline)) static void vector_loop(const step<T>& st, T* d, std::int64_t n, F&& f) {
    using V = batch<T>;
    constexpr std::int64_t W = std::int64_t(V::size);
    std::int64_t j = 0;
    if (st.posts == 0) {
      for (; j + 4 * W <= n; j += 4 * W) {
        const V r0 = f(j), r1 = f(j + W), r2 = f(j + 2 * W), r3 = f(j + 3 * W);
        r0.store_unaligned(d + j);
        r1.store_unaligned(d + j + W);
        r2.store_unaligned(d + j + 2 * W);
        r3.store_unaligned(d + j + 3 * W);
      }
      for (; j < n; j += W) f(j).store_unaligned(d + j);
      return;
    }
    for (; j + 4 * W <= n; j += 4 * W) {
      V r[4] = {f(j), f(j + W), f(j + 2 * W), f(j + 3 * W)};
      for (std::size_t k = 0; k < st.posts; ++k) apply_post(st.post[k], r);
      for (std::int64_t q = 0; q < 4; ++q) r[q].store_unaligned(d + j + q * W);
    }
    for (; j < n; j += W) {
      V r[1] = {f(j)};
      for (std::size_t k = 0; k < st.posts; ++k) apply_post(st.post[k], r);
      r[0].store_unaligned(d + j);
    }
  }
  template <class T, class Op>
  static void exec_unary(const step<T>& st, T* d, const T* a, const T*, std::int64_t n) {
    using V = batch<T>;
    Op op;
    if constexpr (std::is_same_v<Op, ops::clip>) op = ops::clip{st.lo, st.hi};
    vector_loop(st, d, n, [&](std::int64_t j) __attribute__((always_inline)) { return op(V::load_unaligned(a + j)); });
  }
  template <class T>
  static void exec_silu(const step<T>& st, T* d, const T* a, const T*, std::int64_t n) {
    using V = batch<T>;
    vector_loop(st, d, n, [&](std::int64_t j) __attribute__((always_inline)) {
      const V s = V::load_unaligned(a + j);
      return ops::multiply{}(s, ops::sigmoid{}(s));
    });
  }
  template <class T, class Op>
  static void exec_binary(const step<T>& st, T* d, const T* a, const T* b, std::int64_t n) {
    using V = batch<T>;
    if (!a) {
      const V va(st.ca);
      vector_loop(st, d, n, [&](std::int64_t j) __attribute__((always_inline)) { return Op{}(va, V::load_unaligned(b + j)); });
    } else if (!b) {
      const V vb(st.cb);
      vector_loop(st, d, n, [&](std::int64_t j) __attribute__((always_inline)) { return Op{}(V::load_unaligned(a + j), vb); });
    } else {
      vector_loop(st, d, n, [&](std::int64_t j) __attribute__((always_inline)) { return Op{}(V::load_unaligned(a + j), V::load_unaligned(b + j)); });
    }
  }
  struct identity_op {
    template <class V>
    V operator()(const V& x) const { return x; }
  };

  /// The function that runs `op` on float or double tiles: resolved once per run, so that each
  /// instruction is one indirect call to a small function (one switch over every operator would
  /// carry the largest one's stack frame into every call).
  template <class T>
  static exec_fn<T> resolve(opcode op) {
    switch (op) {
      case opcode::add: return &exec_binary<T, ops::add>;
      case opcode::subtract: return &exec_binary<T, ops::subtract>;
      case opcode::multiply: return &exec_binary<T, ops::multiply>;
      case opcode::divide: return &exec_binary<T, ops::divide>;
      case opcode::power: return &exec_binary<T, ops::power>;
      case opcode::maximum: return &exec_binary<T, ops::maximum>;
      case opcode::minimum: return &exec_binary<T, ops::minimum>;
      case opcode::negative: return &exec_unary<T, ops::negative>;
      case opcode::abs: return &exec_unary<T, ops::abs>;
      case opcode::relu: return &exec_unary<T, ops::relu>;
      case opcode::exp: return &exec_unary<T, ops::exp>;
      case opcode::log: return &exec_unary<T, ops::log>;
      case opcode::sqrt: return &exec_unary<T, ops::sqrt>;
      case opcode::rsqrt: return &exec_unary<T, ops::rsqrt>;
      case opcode::tanh: return &exec_unary<T, ops::tanh>;
      case opcode::sigmoid: return &exec_unary<T, ops::sigmoid>;
      case opcode::erf: return &exec_unary<T, ops::erf>;
      case opcode::gelu: return &exec_unary<T, ops::gelu>;
      case opcode::gelu_tanh: return &exec_unary<T, ops::gelu_tanh>;
      case opcode::clip: return &exec_unary<T, ops::clip>;
      case opcode::copy: return &exec_unary<T, identity_op>;
    }
    return &exec_unary<T, identity_op>;  // unreachable: every opcode is listed
  }

  template <class T>
  static void resolve_steps(const program& p, std::vector<step<T>>& steps) {
    steps.clear();
    for (const instr& in : p.code) {
      // A unary operator, or a binary one with two constants, reads the constant's buffer.
      const bool binary = in.op <= opcode::minimum, ka = binary && p.is_constant(in.a), kb = binary && p.is_constant(in.b) && !ka;
      step<T> st{resolve<T>(in.op), ka, kb, ka ? T(p.constant(in.a)) : T(0), kb ? T(p.constant(in.b)) : T(0), in.lo, in.hi, in.posts, {}};
      for (std::size_t k = 0; k < in.posts; ++k) {
        const post_op& q = in.post[k];
        st.post[k] = post_step<T>{q.op, q.left, T(q.c), q.lo, q.hi};
      }
      steps.push_back(st);
    }
  }

  /// Bytes of each slot buffer: a tile of every operand.
  static constexpr std::size_t tile_bytes = 4096;

  /// Elements below which `evaluate` runs on one thread: about 10 us of a cheap expression.
  static constexpr std::int64_t min_parallel_elements = std::int64_t(1) << 15;

  /// The expression over every element of `plan`, shared out among the kernels' threads in
  /// contiguous ranges of whole tiles (each element is computed alike whatever the range: the same
  /// bits on any thread count).
  template <class T, std::size_t N>
  void evaluate(const loop_plan<N + 1>& plan) const {
    constexpr std::int64_t tile = tile_bytes / sizeof(T);
    const std::int64_t total = plan.numel(), tiles = (total + tile - 1) / tile;
    const std::int64_t parts = total < min_parallel_elements ? 1 : std::min<std::int64_t>(std::int64_t(num_threads()), tiles);
    if (parts <= 1) return evaluate_range<T, N>(plan, 0, total);
    parallel_for(parts, [&](std::int64_t part) { evaluate_range<T, N>(plan, part * tiles / parts * tile, (part + 1) * tiles / parts * tile); });
  }

  /// `evaluate` over the elements [begin, end) of `plan` (row-major), on the calling thread.
  template <class T, std::size_t N>
  void evaluate_range(const loop_plan<N + 1>& plan, std::int64_t begin, std::int64_t end) const {
    constexpr std::int64_t tile = tile_bytes / sizeof(T);
    constexpr std::int64_t W = std::int64_t(batch<T>::size);
    static_assert(tile % W == 0);
    const program& p = *program_;
    const std::size_t slots = p.first_temp() + p.temps;
    // Buffers: one per input (gathered or broadcast values), constant and temporary.
    thread_local std::vector<T, xsimd::aligned_allocator<T, 64>> scratch;
    // Buffers are 256 bytes more than a tile apart, so that the same element of two buffers does
    // not fall at the same offset in a 4 KB page, where a load from one can be held up by a store
    // to the other (4K aliasing). A precaution: on Zen 4 it changed the 4-op chain at 1K floats by
    // under 10 %; folding cheap operators (merge_post_ops) is what made the driver faster.
    constexpr std::size_t pitch = std::size_t(tile) + 256 / sizeof(T);
    detail::grow(scratch, std::int64_t(slots * pitch));
    auto buffer = [&](std::size_t slot) { return scratch.data() + slot * pitch; };
    for (const std::uint32_t slot : p.buffered_constants)
      std::fill_n(buffer(slot), tile, T(p.constant(slot)));
    thread_local std::vector<const T*> src;
    src.resize(slots);
    for (std::size_t s = detail::max_fused_inputs; s < slots; ++s) src[s] = buffer(s);
    constexpr auto item = std::int64_t(sizeof(T));
    const std::vector<step<T>>& steps = p.template steps<T>();

    plan.for_each_run_between(begin, end, [&](std::int64_t n, const std::array<char*, N + 1>& ptr, const std::array<std::int64_t, N + 1>& stride) {
      // An operand broadcast along the run: its value over as much of a tile as the run reads
      // (a run of 49 or 196 elements, one value per channel, fills 64 or 208, not 1,024).
      const std::int64_t reach = std::min(tile, (n + W - 1) / W * W);
      for (std::size_t k = 0; k < N; ++k)
        if (stride[k + 1] == 0) std::fill_n(buffer(k), reach, *reinterpret_cast<const T*>(ptr[k + 1]));
      // Elements [i, i + m) of the run. `exact` (m a whole number of vectors): contiguous operands
      // are read, and a contiguous output written, in place; otherwise (a run's last elements,
      // fewer than a vector) through the buffers, padded to a vector.
      const auto chunk = [&](std::int64_t i, std::int64_t m, bool exact) {
        const std::int64_t padded = (m + W - 1) / W * W;
        for (std::size_t k = 0; k < N; ++k) {
          const char* at = ptr[k + 1] + i * stride[k + 1];
          if (stride[k + 1] == 0) {
            src[k] = buffer(k);
          } else if (exact && stride[k + 1] == item) {
            src[k] = reinterpret_cast<const T*>(at);  // read in place
          } else {
            T* b = buffer(k);
            for (std::int64_t j = 0; j < m; ++j) std::memcpy(b + j, at + j * stride[k + 1], sizeof(T));
            for (std::int64_t j = m; j < padded; ++j) b[j] = b[0];
            src[k] = b;
          }
        }
        char* out = ptr[0] + i * stride[0];
        const bool direct_out = exact && stride[0] == item;
        for (std::size_t c = 0; c < p.code.size(); ++c) {
          const instr& in = p.code[c];
          const bool last = c + 1 == p.code.size();
          T* d = last && direct_out ? reinterpret_cast<T*>(out) : buffer(in.dst);
          const step<T>& st = steps[c];
          st.fn(st, d, st.ka ? nullptr : src[in.a], st.kb ? nullptr : src[in.b], padded);
          if (!last) src[in.dst] = d;
        }
        if (!direct_out) {
          const T* r = buffer(p.code.back().dst);
          for (std::int64_t j = 0; j < m; ++j) std::memcpy(out + j * stride[0], r + j, sizeof(T));
        }
      };
      // Whole vectors in place, a tile at a time, then the run's last elements: a run of 196 (a
      // 14 x 14 plane) is 12 vectors in place and 4 elements, not 196 elements gathered and
      // scattered one at a time.
      for (std::int64_t i = 0; i < n; i += tile) {
        const std::int64_t m = std::min(tile, n - i), whole = m / W * W;
        if (whole > 0) chunk(i, whole, true);
        if (whole < m) chunk(i + whole, m - whole, false);
      }
    });
  }

  std::shared_ptr<const node> root_;
  std::shared_ptr<const program> program_;
};

}  // namespace kiln::kernels

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/kernels/impl/fused_expr.ipp>
#endif
