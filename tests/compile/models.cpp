// SPDX-License-Identifier: Apache-2.0
// kiln::compile end to end on the IR tests' models, control flow, recursion, closures and tuples:
// the compiled program gives what the reference evaluator gives (the same kernels in the same
// order: bit for bit), at opt level 0 and 2 and at several values of the symbolic dimensions.
#include "../ir/models.hpp"
#include "helpers.hpp"

using namespace kiln;
using namespace kiln_test;

TEST_CASE("the MLP, CNN and transformer layer compile and match the evaluator at several batch sizes and opt levels") {
  for (int opt : {0, 2}) {
    for (std::int64_t n : {1, 3, 7}) {
      const ir::ir_module mlp = make_mlp();
      check_against_evaluator(mlp, "main", arguments_for(mlp, "main", {{"n", n}}, unsigned(n)), opt);
      const ir::ir_module cnn = make_cnn();
      check_against_evaluator(cnn, "main", arguments_for(cnn, "main", {{"n", n}}, unsigned(n)), opt);
    }
    const ir::ir_module enc = make_transformer_layer();
    for (auto [b, s] : {std::pair<std::int64_t, std::int64_t>{1, 5}, {2, 16}})
      check_against_evaluator(enc, "encoder_layer", arguments_for(enc, "encoder_layer", {{"batch", b}, {"seq", s}}, 3), opt);
  }
}

TEST_CASE("variables named as the compiled mode's own names (c0, c1, arena, literals, tmp) keep their values") {
  // c0 and c1 are also the names the generated C++ gives the pooled constants.
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3, 5, 5), "float32")) -> R.Tensor((2, 3, 5, 5), "float32"):
        c0: R.Tensor((2, 3, 5, 5), "float32") = R.add(x, R.const(1.5, "float32"))
        c1: R.Tensor((2, 3, 5, 5), "float32") = R.multiply(c0, R.const([[[0.5]], [[2.0]], [[-1.0]]], "float32"))
        arena: R.Tensor((2, 3, 5, 5), "float32") = R.nn.max_pool2d(c1, pool_size=[3, 3], padding=[1, 1, 1, 1])
        arena_use: R.Tensor((2, 3, 5, 5), "float32") = R.negative(arena)
        literals: R.Tensor((2, 3, 5, 5), "float32") = R.nn.relu(arena_use)
        tmp: R.Tensor((2, 3, 5, 5), "float32") = R.add(literals, c0)
        return tmp
)");
  for (int opt : {0, 2}) check_against_evaluator(m, "main", arguments_for(m, "main", {}), opt);
}

TEST_CASE("control flow: a tensor condition, a bool condition, values merged from both branches") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((3, 4), "float32"), y: R.Tensor((3, 4), "float32")) -> R.Tuple(R.Tensor((3, 4), "float32"), R.Tensor((), "float32")):
        s: R.Tensor((), "float32") = R.sum(x)
        c: R.Tensor((), "bool") = R.greater(s, R.const(0.0, "float32"))
        e: R.Tensor((3, 4), "float32") = R.exp(y)
        if c:
            a: R.Tensor((3, 4), "float32") = R.add(x, e)
            r: R.Tensor((3, 4), "float32") = R.multiply(a, a)
        else:
            r: R.Tensor((3, 4), "float32") = R.subtract(x, e)
        t: R.Tensor((3, 4), "float32") = R.add(r, e)
        return (t, s)
)");
  for (unsigned seed = 1; seed <= 6; ++seed)  // both branches are taken for some seed
    check_against_evaluator(m, "main", arguments_for(m, "main", {}, seed));
  const ir::ir_module sign = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32"), flag: R.Prim("bool")) -> R.Tensor((2,), "float32"):
        if flag:
            r: R.Tensor((2,), "float32") = R.negative(x)
        else:
            r: R.Tensor((2,), "float32") = x
        return r
)");
  const vm::executable ex = kiln::compile(sign);
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  const tensor x = tensor::from_values<float>({2}, {1.5f, -2.f});
  CHECK(machine.invoke("main", x, true).as_tensor().to_vector<float>() == std::vector<float>{-1.5f, 2.f});
  CHECK(machine.invoke("main", x, false).as_tensor().to_vector<float>() == std::vector<float>{1.5f, -2.f});
}

TEST_CASE("recursion: 2^n by calls between functions") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def pow2(n: R.Tensor((), "int64")) -> R.Tensor((), "int64"):
        z: R.Tensor((), "bool") = R.equal(n, R.const(0, "int64"))
        if z:
            r: R.Tensor((), "int64") = R.const(1, "int64")
        else:
            m: R.Tensor((), "int64") = R.subtract(n, R.const(1, "int64"))
            h: R.Tensor((), "int64") = cls.pow2(m)
            r: R.Tensor((), "int64") = R.add(h, h)
        return r

    @R.function
    def main(n: R.Tensor((), "int64")) -> R.Tensor((), "int64"):
        return cls.pow2(n)
)");
  const vm::executable ex = kiln::compile(m);
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  interpreter::reference_evaluator eval(m);
  for (std::int64_t n : {0, 1, 5, 20}) {
    const tensor arg = tensor::from_values<std::int64_t>({}, {n});
    CHECK(machine.invoke("main", arg).as_tensor().to_vector<std::int64_t>()[0] == (std::int64_t{1} << n));
    CHECK(eval("main", arg).as_tensor().to_vector<std::int64_t>()[0] == (std::int64_t{1} << n));
    check_against_evaluator(m, "main", {vm::value(arg)});  // and the compiled mode
  }
}

TEST_CASE("closures: make_closure binds the last parameters, a call through the closure runs the function") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def scale_add(x: R.Tensor((3,), "float32"), s: R.Tensor((3,), "float32"), b: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        y: R.Tensor((3,), "float32") = R.multiply(x, s)
        z: R.Tensor((3,), "float32") = R.add(y, b)
        return z

    @R.function
    def main(x: R.Tensor((3,), "float32"), s: R.Tensor((3,), "float32"), b: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        f: R.Callable((R.Tensor((3,), "float32"),), R.Tensor((3,), "float32")) = R.make_closure(cls.scale_add, (s, b))
        y: R.Tensor((3,), "float32") = f(x)
        z: R.Tensor((3,), "float32") = f(y)
        return z
)");
  check_against_evaluator(m, "main", arguments_for(m, "main", {}));
  const vm::executable ex = kiln::compile(m);
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  const tensor x = tensor::from_values<float>({3}, {1, 2, 3}), s = tensor::from_values<float>({3}, {2, 2, 2}), b = tensor::from_values<float>({3}, {1, 0, -1});
  CHECK(machine.invoke("main", x, s, b).as_tensor().to_vector<float>() == std::vector<float>{7, 8, 9});
}

TEST_CASE("tuples in and out: element access, a tuple built from parameters and results, split") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 6), "float32")) -> R.Tuple(R.Tensor((4, 4), "float32"), R.Tuple(R.Tensor((4, 2), "float32"), R.Tensor((4, 2), "float32"), R.Tensor((4, 2), "float32")), R.Tensor((4, 6), "float32")):
        parts: R.Tuple(R.Tensor((4, 2), "float32"), R.Tensor((4, 2), "float32"), R.Tensor((4, 2), "float32")) = R.split(x, sections=3, axis=1)
        a: R.Tensor((4, 2), "float32") = parts[0]
        c: R.Tensor((4, 2), "float32") = parts[2]
        s: R.Tensor((4, 2), "float32") = R.add(a, c)
        j: R.Tensor((4, 4), "float32") = R.concat((s, a), axis=1)
        return (j, parts, x)
)");
  check_against_evaluator(m, "main", arguments_for(m, "main", {}));
}

TEST_CASE("a symbolic dimension computed from others: reshapes to n * 4 and back") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 4), "float32"), y: R.Tensor((n * 2, 2), "float32")) -> R.Tensor((n * 2, 2), "float32"):
        lv: R.Tensor((n * 4,), "float32") = R.reshape(x, R.shape([n * 4]))
        z: R.Tensor((n * 2, 2), "float32") = R.reshape(lv, R.shape([n * 2, 2]))
        w: R.Tensor((n * 2, 2), "float32") = R.add(z, y)
        e: R.Tensor((n * 2, 2), "float32") = R.exp(w)
        return e
)");
  for (std::int64_t n : {1, 2, 9}) check_against_evaluator(m, "main", arguments_for(m, "main", {{"n", n}}, unsigned(n)));
}

TEST_CASE("upper bounds on size variables: planned in the arena, correct up to the bound, a clean error beyond it") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 4), "float32"), w: R.Tensor((4, 4), "float32")) -> R.Tensor((n * 2, 4), "float32"):
        R.func_attr({"tir_var_upper_bound": {"n": 16}})
        a: R.Tensor((n, 4), "float32") = R.matmul(x, w)
        b: R.Tensor((n, 4), "float32") = R.nn.relu(a)
        c: R.Tensor((n * 2, 4), "float32") = R.concat((a, b), axis=0)
        d: R.Tensor((n * 2, 4), "float32") = R.exp(c)
        return d
)");
  for (std::int64_t n : {1, 5, 16}) check_against_evaluator(m, "main", arguments_for(m, "main", {{"n", n}}, unsigned(n)));
  ir::ir_module lowered;
  const vm::executable ex = kiln::compile(m, {.lowered = &lowered});
  CHECK(transform::memory_plan_of(lowered->lookup("main")).storage_tokens == 0);
  CHECK(transform::memory_plan_of(lowered->lookup("main")).planned_bytes > 0);
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  const auto too_big = arguments_for(m, "main", {{"n", 17}});
  CHECK(message_of<vm::vm_error>([&] { machine.invoke_span("main", too_big); })
            .find("vm.builtin.check_upper_bound: main: parameter 'x' (R.Tensor((n, 4), \"float32\")): size variable n = 17 exceeds its upper "
                  "bound 16") != std::string::npos);
  const auto fine = arguments_for(m, "main", {{"n", 16}});
  CHECK(machine.invoke_span("main", fine).as_tensor().shape() == runtime::shape_vector{32, 4});  // still usable
}

TEST_CASE("a serialized executable, loaded back, gives the same results") {
  const ir::ir_module m = make_cnn();
  const vm::executable ex = kiln::compile(m);
  const vm::executable back = vm::deserialize(vm::serialize(ex));
  const auto args = arguments_for(m, "main", {{"n", 2}});
  vm::virtual_machine a(ex, {}, vm::kernel_registry()), b(back, {}, vm::kernel_registry());
  CHECK(max_difference(a.invoke_span("main", args), b.invoke_span("main", args)) == 0);
  CHECK(back.functions[*back.find_function("main")].param_names == std::vector<std::string>{"data", "conv1_w", "conv2_w", "fc_w"});
}

TEST_CASE("running a compiled function many times reuses its memory: the pool stops growing") {
  const ir::ir_module m = make_mlp();
  const vm::executable ex = kiln::compile(m);
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  const auto args = arguments_for(m, "main", {{"n", 4}});
  machine.invoke_span("main", args);
  const auto after_one = machine.allocator_stats();
  for (int i = 0; i < 5; ++i) machine.invoke_span("main", args);
  CHECK(machine.allocator_stats().system_allocations == after_one.system_allocations);
}

TEST_CASE("a long chain of bindings (not nesting) compiles and runs: passes walk bindings in loops, not by recursion") {
  // 10000 operators, each using the one before, in one dataflow block, and 1000 outside it:
  // deeper than any stack allows recursion, and long enough to show quadratic time (fusion's
  // search for a matmul to fuse into and the memory planner's placement were quadratic).
  const int length = 10000, outside = 1000;
  std::string text = "@I.ir_module\nclass Module:\n    @R.function\n"
                     "    def main(x: R.Tensor((4,), \"float32\")) -> R.Tensor((4,), \"float32\"):\n"
                     "        with R.dataflow():\n";
  std::string prev = "x";
  for (int i = 0; i < length + outside; ++i) {
    if (i == length) text += "            R.output(" + prev + ")\n";
    const std::string name = "t" + std::to_string(i);
    text += std::string(i < length ? 12 : 8, ' ') + name + ": R.Tensor((4,), \"float32\") = " +
            (i % 2 ? "R.add(" : "R.subtract(") + prev + ", R.const(1.0, \"float32\"))\n";
    prev = name;
  }
  text += "        return " + prev + "\n";
  const ir::ir_module m = ir::parse_module(text);
  for (int opt : {0, 2}) {
    kiln::compile_options options;
    options.opt_level = opt;
    const vm::executable ex = kiln::compile(m, options);
    vm::virtual_machine machine(ex, {}, vm::kernel_registry());
    CHECK(machine.invoke("main", tensor::from_values<float>({4}, {1, 2, 3, 4})).as_tensor().to_vector<float>() ==
          std::vector<float>{1, 2, 3, 4});
  }
}
