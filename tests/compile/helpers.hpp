// SPDX-License-Identifier: Apache-2.0
// Compiler tests: random arguments made from a function's parameter types, and the comparison of
// the compiled program's results with the reference evaluator's.
#pragma once

#include <kiln/compile.hpp>
#include <kiln/interpreter/reference_evaluator.hpp>
#include <kiln/ir/ir.hpp>
#include <kiln/pass/pass.hpp>
#include <kiln/vm/vm.hpp>

#include "../common/message_of.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <iomanip>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>

namespace kiln_test {

namespace ir = kiln::ir;
namespace vm = kiln::vm;
using kiln::dtype;
using kiln::runtime::shape_vector;
using kiln::runtime::tensor;

/// True when `text` contains `part`.
inline bool contains(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

/// A tensor of `shape` with random values (floats in [-1, 1), integers in [0, 5), bools).
inline tensor random_tensor(const shape_vector& shape, dtype dt, std::mt19937& gen) {
  tensor t = tensor::empty(shape, dt);
  std::uniform_real_distribution<double> u(-1, 1);
  std::uniform_int_distribution<int> k(0, 4);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    std::byte* p = static_cast<std::byte*>(t.data()) + std::size_t(i) * kiln::size_of(dt);
    const double v = kiln::is_float(dt) ? u(gen) : dt == dtype::bool_ ? double(k(gen) % 2) : double(k(gen));
    ir::ndarray::store(dt, p, v);
  }
  return t;
}

/// Arguments for function `fn` of `m`: random tensors of the parameters' types, with each size
/// variable given the value `dims` has for its name.
inline std::vector<vm::value> arguments_for(const ir::ir_module& m, const std::string& fn, const std::map<std::string, std::int64_t>& dims,
                                            unsigned seed = 1) {
  std::mt19937 gen(seed);
  std::vector<vm::value> args;
  auto& f = static_cast<const ir::function_node&>(*m->lookup(fn));
  for (auto& p : f.params) {
    auto* t = ir::dyn_cast<ir::tensor_type_node>(p->checked_type);
    REQUIRE_MESSAGE(t, "parameter " << p->name_hint << " is not a tensor");
    shape_vector shape;
    for (auto& d : *t->shape) {  // size variables by name, compound dimensions computed
      const ir::prim_expr v = ir::substitute(d, [&](const ir::size_var_node& s) { return ir::make_int(dims.at(s.name)); });
      REQUIRE(ir::as_int(v));
      shape.push_back(*ir::as_int(v));
    }
    args.push_back(vm::value(random_tensor(shape, t->dt, gen)));
  }
  return args;
}

/// The largest absolute difference between two results (tensors, tuples of them), or infinity
/// when their structure, shapes or dtypes differ; with `scaled`, each difference is divided by
/// max(1, |b|) (a relative difference, absolute near zero).
inline double max_difference(const vm::value& a, const vm::value& b, bool scaled = false) {
  const double inf = std::numeric_limits<double>::infinity();
  if (a.is_tuple() || b.is_tuple()) {
    if (!a.is_tuple() || !b.is_tuple() || a.as_tuple().size() != b.as_tuple().size()) return inf;
    double m = 0;
    for (std::size_t i = 0; i < a.as_tuple().size(); ++i) m = std::max(m, max_difference(a.as_tuple()[i], b.as_tuple()[i], scaled));
    return m;
  }
  if (a.is_tensor() && b.is_tensor()) {
    const tensor x = a.as_tensor(), y = b.as_tensor();
    if (x.type() != y.type() || x.shape() != y.shape()) return inf;
    const auto xs = kiln::kernels::cast(x, dtype::float64).to_vector<double>(), ys = kiln::kernels::cast(y, dtype::float64).to_vector<double>();
    double m = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      if (std::isnan(xs[i]) != std::isnan(ys[i])) return inf;
      if (!std::isnan(xs[i])) m = std::max(m, xs[i] == ys[i] ? 0.0 : std::abs(xs[i] - ys[i]) / (scaled ? std::max(1.0, std::abs(ys[i])) : 1.0));
    }
    return m;
  }
  if (a.is_shape() && b.is_shape()) return a.as_shape() == b.as_shape() ? 0 : inf;
  if (a.is_int() && b.is_int()) return a.as_int() == b.as_int() ? 0 : inf;
  return inf;
}

/// A file name under the temporary directory no other test process uses.
inline std::filesystem::path temp_file(const std::string& stem, const std::string& ext) {
  static int counter = 0;
  return std::filesystem::temp_directory_path() / ("kiln-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter) + "-" + stem + ext);
}

/// An [O, C, KH, KW] float32 weight as IR text.
inline std::string conv_weight_text(std::int64_t o, std::int64_t c, std::int64_t kh, std::int64_t kw) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << "R.const([";
  for (std::int64_t a = 0; a < o; ++a) {
    s << (a ? ", [" : "[");
    for (std::int64_t b = 0; b < c; ++b) {
      s << (b ? ", [" : "[");
      for (std::int64_t i = 0; i < kh; ++i) {
        s << (i ? ", [" : "[");
        for (std::int64_t j = 0; j < kw; ++j) s << (j ? ", " : "") << double((a * 5 + b * 3 + i * 7 + j) % 13) * 0.01 - 0.06;
        s << "]";
      }
      s << "]";
    }
    s << "]";
  }
  s << "], \"float32\")";
  return s.str();
}

/// `m` compiled in bytecode at opt level 2 without the pass named `disabled`.
inline vm::executable compile_without(const ir::ir_module& m, const std::string& disabled) {
  kiln::pass_context ctx(2);
  ctx.disable(disabled);
  kiln::pass_context_scope scope(ctx);
  return kiln::compile(m);
}

/// `m` compiled in the compiled mode at `opt_level`, built into a shared library and loaded back
/// (once per module text and opt level: building a library runs the C++ compiler).
inline const vm::executable& compiled_mode(const ir::ir_module& m, int opt_level = 2) {
  static std::map<std::pair<std::string, int>, vm::executable> cache;
  const auto key = std::make_pair(ir::print(m), opt_level);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  kiln::pass_context ctx(opt_level);
  kiln::pass_context_scope scope(ctx);
  const vm::executable ex = kiln::compile(m, {.mode = kiln::exec_mode::compiled});
  const std::filesystem::path lib = temp_file("module", ".so");
  vm::export_library(ex, lib, {.flags = {"-O1", "-march=native"}});  // the tests check results, not speed
  vm::executable loaded = vm::load_module(lib);
  loaded.generated_source = ex.generated_source;  // a library does not keep it; compiled_agrees reads it
  std::filesystem::remove(lib);  // loaded libraries stay mapped
  return cache.emplace(key, std::move(loaded)).first->second;
}

/// How far the compiled mode may be from the bytecode where it runs fused elementwise groups as
/// `fx::` expressions: those are built for the library's -march (FMA contraction, other SIMD
/// math), the bytecode's interpreter for the test program's. Scaled as `max_difference(a, b, true)`.
/// docs/compiler.md states it.
inline constexpr double fused_tolerance = 1e-5;

/// Whether `compiled`, a result of `ex` (from `compiled_mode`), agrees with the bytecode's result
/// `bytecode`: bit for bit, or within `fused_tolerance` when `ex` has fused groups.
inline bool compiled_agrees(const vm::executable& ex, const vm::value& compiled, const vm::value& bytecode) {
  const bool fused = ex.generated_source.find("rt::fused<") != std::string::npos;
  return fused ? max_difference(compiled, bytecode, true) <= fused_tolerance : max_difference(compiled, bytecode) == 0;
}

/// Which execution modes `check_against_evaluator` runs.
enum class modes { bytecode, both };

/// Compiles `m` at `opt_level` and checks that `fn(args)` gives what the reference evaluator
/// gives, within `tolerance`; with `modes::both`, also that the compiled mode gives what the
/// bytecode gives (`compiled_agrees`: the same kernels in the same order, fused groups inlined).
inline void check_against_evaluator(const ir::ir_module& m, const std::string& fn, const std::vector<vm::value>& args, int opt_level = 2,
                                    double tolerance = 0, modes which = modes::both) {
  vm::value got;
  {
    kiln::pass_context ctx(opt_level);
    kiln::pass_context_scope scope(ctx);
    const vm::executable ex = kiln::compile(m);
    vm::virtual_machine machine(ex, {}, kiln::vm::kernel_registry());
    got = machine.invoke_span(fn, args);
  }
  kiln::interpreter::reference_evaluator eval(m);
  const vm::value want = eval.call(fn, args);
  CHECK_MESSAGE(max_difference(got, want) <= tolerance, "function " << fn << " at opt level " << opt_level);
  if (which == modes::both) {
    vm::virtual_machine machine(compiled_mode(m, opt_level), {}, kiln::vm::kernel_registry());
    const vm::value compiled = machine.invoke_span(fn, args);
    CHECK_MESSAGE(compiled_agrees(compiled_mode(m, opt_level), compiled, got),
                  "function " << fn << " at opt level " << opt_level << ": the compiled mode differs from the bytecode by " << max_difference(compiled, got, true));
  }
}

}  // namespace kiln_test
