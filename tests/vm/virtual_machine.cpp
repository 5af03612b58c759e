// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

#include "../common/message_of.hpp"

#include <doctest/doctest.h>

using namespace kiln;
using namespace kiln::vm;
using kiln_test::message_of;
using kiln_test::test_registry;

TEST_CASE("a counting loop of If, Goto and native calls") {
  virtual_machine vm(kiln_test::sum_loop(), {}, test_registry());
  CHECK(vm.invoke("main", 0).as_int() == 0);
  CHECK(vm.invoke("main", 10).as_int() == 45);
  CHECK(vm.invoke("main", 1000).as_int() == 499500);
  CHECK(vm.get_function("main")(5).as_int() == 10);
  CHECK(vm.call_depth() == 0);
}

TEST_CASE("calls between bytecode functions, and recursion") {
  virtual_machine vm(kiln_test::factorial(), {}, test_registry());
  CHECK(vm.invoke("main", 1).as_int() == 1);
  CHECK(vm.invoke("main", 5).as_int() == 120);
  CHECK(vm.invoke("main", 20).as_int() == 2432902008176640000);
  CHECK(vm.invoke("fact", 3).as_int() == 6);  // any function can be entered
}

TEST_CASE("recursion past the depth limit is an error, and the VM still works afterwards") {
  vm_options opts;
  opts.max_call_depth = 100;
  virtual_machine vm(kiln_test::factorial(), opts, test_registry());
  CHECK(vm.invoke("main", 98).kind() == value_kind::int_);
  const std::string msg = message_of<vm_error>([&] { vm.invoke("main", 200); });
  CHECK(msg.find("kiln::vm: in 'fact' at instruction 5 (call 'fact'): the call stack reached 100 frames (unbounded recursion?); "
                 "raise vm_options::max_call_depth if intended\n  called from 'fact' at instruction 5") == 0);
  CHECK(msg.find("called from 'main' at instruction 0") != std::string::npos);
  CHECK(vm.call_depth() == 0);
  CHECK(vm.invoke("main", 5).as_int() == 120);
}

TEST_CASE("deep recursion crosses register-stack chunks and comes back with every register released") {
  vm_options opts;
  opts.max_call_depth = 50000;
  virtual_machine vm(kiln_test::factorial(), opts, test_registry());
  // 40,000 frames of 5 registers (4 and the sink) span several 16,384-register chunks.
  for (int round = 0; round < 2; ++round) {
    CHECK(vm.invoke("main", 40000).kind() == value_kind::int_);
    CHECK(vm.call_depth() == 0);
  }
  // Failing at the limit, mid-chunk, unwinds all of them too.
  CHECK(message_of<vm_error>([&] { vm.invoke("main", 60000); }).find("the call stack reached 50000 frames") != std::string::npos);
  CHECK(vm.call_depth() == 0);
  CHECK(vm.invoke("main", 5).as_int() == 120);
}

TEST_CASE("vm_options::max_call_depth must be between 1 and 2^22") {
  vm_options opts;
  opts.max_call_depth = 0;
  CHECK(message_of<usage_error>([&] { virtual_machine(kiln_test::factorial(), opts, test_registry()); }) ==
        "kiln::vm::vm_options: max_call_depth must be between 1 and 4194304, got 0");
  opts.max_call_depth = (std::size_t(1) << 22) + 1;
  CHECK(message_of<usage_error>([&] { virtual_machine(kiln_test::factorial(), opts, test_registry()); }) ==
        "kiln::vm::vm_options: max_call_depth must be between 1 and 4194304, got 4194305");
  opts.max_call_depth = 1;
  virtual_machine shallow(kiln_test::factorial(), opts, test_registry());
  CHECK(shallow.invoke("fact", 1).as_int() == 1);  // the entry frame is the one frame allowed
  CHECK(message_of<vm_error>([&] { shallow.invoke("main", 1); }).find("the call stack reached 1 frames") != std::string::npos);
}

TEST_CASE("a Call with a void destination drops its result, one may overwrite an argument register") {
  // main(x): t = tensor; void <- copy(t); x <- copy(x); void <- noop(); return x
  exec_builder b;
  b.begin_function("main", {"x"}, 2);
  b.emit_call("vm.builtin.copy", {b.c(b.add_constant(value(tensor::zeros({2}, dtype::int32))))}, 1);
  b.emit_call("vm.builtin.copy", {b.r(1)}, void_register);
  b.emit_call("vm.builtin.copy", {b.r(0)}, 0);
  b.emit_call("test.noop", {}, void_register);
  b.emit_ret(0);
  b.end_function();
  virtual_machine vm(b.get(), {}, test_registry());
  const auto t = vm.constant(0).as_tensor();
  const auto refs = t.node()->use_count();
  CHECK(vm.invoke("main", 7).as_int() == 7);
  CHECK(t.node()->use_count() == refs);  // the sink kept no reference once the frame was gone
}

TEST_CASE("a hand-written native returns its result as a raw_value that owns any reference") {
  native_function n;
  n.fn = [](const void*, call_args a) { return value::shape({std::int64_t(a.size()), 2}).into_raw(); };
  n.arity = -1;
  function_registry r;
  register_builtins(r);
  r.add("shape_of_args", n);
  exec_builder b;
  b.begin_function("main", {"x"}, 2);
  b.emit_call("shape_of_args", {b.r(0), b.r(0), b.imm(3)}, 1);
  b.emit_call("shape_of_args", {b.r(0)}, 1);  // overwriting releases the first shape
  b.emit_ret(1);
  b.end_function();
  virtual_machine vm(b.get(), {}, r);
  CHECK(equal(vm.invoke("main", 1), value::shape({1, 2})));
  CHECK(equal(n(call_args()), value::shape({0, 2})));
}

TEST_CASE("a failing native names the function, the instruction and the callee, the VM recovers") {
  exec_builder b;
  b.declare_function("inner", function_kind::bytecode, 1);
  b.begin_function("main", {"why"}, 2);
  b.emit_call("inner", {b.r(0)}, 1);
  b.emit_ret(1);
  b.end_function();
  b.begin_function("inner", {"why"}, 2);
  b.emit_call("vm.builtin.copy", {b.r(0)}, 1);
  b.emit_call("test.fail", {b.r(1)}, 1);
  b.emit_ret(1);
  b.end_function();
  virtual_machine vm(b.get(), {}, test_registry());
  CHECK(message_of<vm_error>([&] { vm.invoke("main", "disk on fire"); }) ==
        "kiln::vm: in 'inner' at instruction 1 (call 'test.fail'): disk on fire\n  called from 'main' at instruction 0");
  CHECK(message_of<vm_error>([&] { vm.invoke("main", 3); }) ==
        "kiln::vm: in 'inner' at instruction 1 (call 'test.fail'): kiln::vm: native function 'test.fail', argument 0: "
        "expected string, got int\n  called from 'main' at instruction 0");
  CHECK(vm.call_depth() == 0);
  CHECK(message_of<usage_error>([&] { vm.invoke("main"); }) == "kiln::vm: function 'main' takes 1 arguments, got 0");
  CHECK(message_of<usage_error>([&] { vm.invoke("mian", 1); }) == "kiln::vm: no function 'mian' in the executable (did you mean 'main'?)");
}

TEST_CASE("If needs an int or a bool") {
  exec_builder b;
  b.begin_function("main", {"c"}, 1);
  b.emit_if(0, 2);
  b.emit_ret(0);
  b.emit_ret(0);
  b.end_function();
  virtual_machine vm(b.get(), {}, test_registry());
  CHECK(vm.invoke("main", true).as_bool());
  CHECK(vm.invoke("main", 0).as_int() == 0);
  CHECK(message_of<vm_error>([&] { vm.invoke("main", 1.5); }) ==
        "kiln::vm: in 'main' at instruction 0: If: the condition register holds float, expected int or bool "
        "(use vm.builtin.read_if_cond for tensors)");
}

TEST_CASE("loading resolves natives, and reports missing ones and wrong native arities") {
  exec_builder b;
  b.begin_function("main", {}, 1);
  b.emit_call("test.ad", {b.imm(1), b.imm(2)}, 0);
  b.emit_ret(0);
  b.end_function();
  CHECK(message_of([&] { virtual_machine vm(b.get(), {}, test_registry()); }) ==
        "kiln::vm::virtual_machine: the executable calls functions the registry does not have: 'test.ad' (did you mean 'test.add'?)");
  exec_builder c;
  c.begin_function("main", {}, 1);
  c.emit_call("test.add", {c.imm(1)}, 0);
  c.emit_ret(0);
  c.end_function();
  CHECK(message_of([&] { virtual_machine vm(c.get(), {}, test_registry()); }) ==
        "kiln::vm::virtual_machine: function 'main', instruction 0 (call) calls native function 'test.add' with 1 arguments, it takes 2");
}

TEST_CASE("closures: make_closure binds captured values last, invoke_closure gets the VM register") {
  exec_builder b;
  b.declare_function("add3", function_kind::bytecode, 3);
  b.begin_function("main", {"x"}, 4);
  b.emit_call("vm.builtin.make_closure", {b.f("add3"), b.imm(10), b.imm(100)}, 1);  // add3(_, 10, 100)
  b.emit_call("vm.builtin.invoke_closure", {b.vm(), b.r(1), b.r(0)}, 2);
  b.emit_call("vm.builtin.make_closure", {b.f("test.add"), b.imm(1000)}, 3);        // native with a bound arg
  b.emit_call("vm.builtin.invoke_closure", {b.vm(), b.r(3), b.r(2)}, 2);
  b.emit_ret(2);
  b.end_function();
  b.begin_function("add3", {"a", "b", "c"}, 4);
  b.emit_call("test.add", {b.r(0), b.r(1)}, 3);
  b.emit_call("test.add", {b.r(3), b.r(2)}, 3);
  b.emit_ret(3);
  b.end_function();
  virtual_machine vm(b.get(), {}, test_registry());
  CHECK(vm.invoke("main", 1).as_int() == 1111);
  // A closure the VM hands out is callable through the context interface too.
  const value f = vm.function_value(*vm.exec().find_function("add3"));
  const value one(1), two(2), three(3);
  const value* args[] = {&one, &two, &three};
  CHECK(vm.call(f, call_args(args, 3)).as_int() == 6);
  CHECK(message_of([&] { vm.call(f, call_args(args, 2)); }) == "kiln::vm: closure 'add3' takes 3 arguments, got 2");
  virtual_machine other(kiln_test::sum_loop(), {}, test_registry());
  CHECK(message_of([&] { other.call(f, call_args(args, 3)); }) == "kiln::vm: closure 'add3' belongs to another executable");
}

TEST_CASE("natives that call back into the VM are limited in nesting") {
  exec_builder b;
  b.begin_function("main", {"f"}, 2);  // main(f) = invoke_closure(f, f)
  b.emit_call("vm.builtin.invoke_closure", {b.vm(), b.r(0), b.r(0)}, 1);
  b.emit_ret(1);
  b.end_function();
  vm_options opts;
  opts.max_reentry_depth = 20;
  virtual_machine vm(b.get(), opts, test_registry());
  const value self = vm.function_value(0);
  const std::string msg = message_of<vm_error>([&] { vm.invoke("main", self); });
  CHECK(msg.find("20 nested invocations (natives calling back into the VM)") != std::string::npos);
  CHECK(msg.find("called from 'main' at instruction 0") != std::string::npos);
  CHECK(vm.call_depth() == 0);
}

TEST_CASE("the instrument sees every Call before and after, in order, and can skip one") {
  virtual_machine vm(kiln_test::factorial(), {}, test_registry());
  std::vector<std::string> log;
  vm.set_instrument([&](const value& func, std::string_view symbol, bool before, const value& ret, call_args args) {
    CHECK(func.is_closure());
    CHECK(func.as_closure().name == symbol);
    std::string line = std::string(before ? "before " : "after ") + std::string(symbol) + "(";
    for (std::size_t i = 0; i < args.size(); ++i) line += (i ? "," : "") + to_string(args[i]);
    line += ")";
    if (!before) line += " = " + to_string(ret);
    log.push_back(line);
    return instrument_action::no_op;
  });
  CHECK(vm.invoke("main", 2).as_int() == 2);
  CHECK(log == std::vector<std::string>{
                   "before fact(2)", "before test.less(2,2)", "after test.less(2,2) = false", "before test.sub(2,1)",
                   "after test.sub(2,1) = 1", "before fact(1)", "before test.less(1,2)", "after test.less(1,2) = true",
                   "before vm.builtin.copy(1)", "after vm.builtin.copy(1) = 1", "after fact(1) = 1", "before test.mul(2,1)",
                   "after test.mul(2,1) = 2", "after fact(2) = 2"});

  // skip_run: the call does not happen and its destination gets null.
  virtual_machine sum(kiln_test::sum_loop(), {}, test_registry());
  int adds = 0;
  sum.set_instrument([&](const value&, std::string_view symbol, bool before, const value&, call_args args) {
    if (before && symbol == "test.add" && args[1].as_int() == 1 && args[0].as_int() == 0) return instrument_action::skip_run;
    if (before && symbol == "test.add") ++adds;
    return instrument_action::no_op;
  });
  // The first "i = i + 1" is skipped, so i becomes null and the next comparison fails.
  CHECK(message_of<vm_error>([&] { sum.invoke("main", 3); }).find("native function 'test.less', argument 0: expected int, got null") !=
        std::string::npos);
  sum.set_instrument(nullptr);
  CHECK(sum.invoke("main", 3).as_int() == 3);
}

TEST_CASE("an instrument may remove or replace itself while it runs: later calls go to the new one, each call's end to its own") {
  virtual_machine vm(kiln_test::factorial(), {}, test_registry());
  std::vector<std::string> log;
  // A big capture, so that the function object lives outside std::function's small buffer too.
  std::string first_name(200, 'x');
  auto second = [&](const value&, std::string_view symbol, bool before, const value&, call_args) {
    log.push_back(std::string("second ") + (before ? "before " : "after ") + std::string(symbol));
    return instrument_action::no_op;
  };
  vm.set_instrument([&, first_name](const value&, std::string_view symbol, bool before, const value&, call_args) {
    log.push_back(std::string("first ") + (before ? "before " : "after ") + std::string(symbol) + (first_name.empty() ? "!" : ""));
    if (before && symbol == "test.less") vm.set_instrument(second);  // replaces the running callback
    return instrument_action::no_op;
  });
  CHECK(vm.invoke("main", 1).as_int() == 1);
  CHECK(log == std::vector<std::string>{"first before fact", "first before test.less", "first after test.less",
                                        "second before vm.builtin.copy", "second after vm.builtin.copy", "first after fact"});
  // Removing itself from inside: the run goes on unreported.
  log.clear();
  vm.set_instrument([&](const value&, std::string_view symbol, bool before, const value&, call_args) {
    log.push_back(std::string(before ? "before " : "after ") + std::string(symbol));
    if (before && symbol == "test.less") vm.set_instrument(nullptr);
    return instrument_action::no_op;
  });
  CHECK(vm.invoke("main", 3).as_int() == 6);
  CHECK(log == std::vector<std::string>{"before fact", "before test.less", "after test.less", "after fact"});
  log.clear();
  CHECK(vm.invoke("main", 3).as_int() == 6);
  CHECK(log.empty());
}

TEST_CASE("the stateful interface, saved functions and the time evaluator") {
  virtual_machine vm(kiln_test::sum_loop(), {}, test_registry());
  vm.set_input("main", 4);
  vm.invoke_stateful("main");
  CHECK(vm.get_outputs("main").as_int() == 6);
  virtual_machine unset(kiln_test::sum_loop(), {}, test_registry());
  CHECK(message_of<usage_error>([&] { unset.invoke_stateful("main"); }) ==
        "kiln::vm::invoke_stateful: no inputs were set for 'main' (call set_input first)");
  CHECK(message_of<usage_error>([&] { vm.set_input("main", 1, 2); }) == "kiln::vm::set_input: function 'main' takes 1 arguments, got 2");
  virtual_machine fresh(kiln_test::sum_loop(), {}, test_registry());
  CHECK(message_of<usage_error>([&] { (void)fresh.get_outputs("main"); }) ==
        "kiln::vm::get_outputs: 'main' has not been run with invoke_stateful");

  vm.save_function("main", "main_100", 100);
  CHECK(vm.invoke("main_100").as_int() == 4950);
  CHECK(message_of<usage_error>([&] { vm.invoke("main_100", 1); }) ==
        "kiln::vm: saved function 'main_100' has its arguments bound; call it with none");

  auto timer = vm.time_evaluator("main", 3, 4);
  const value arg(50);
  const timing_result r = timer(std::span<const value>(&arg, 1));
  CHECK(r.results.size() == 4);
  CHECK(r.number == 3);
  for (double t : r.results) CHECK(t > 0);
  CHECK(r.min() <= r.median());
  CHECK(r.median() <= r.max());
  // min_repeat_ms raises `number` until one repeat lasts long enough.
  const timing_result slow = vm.time_evaluator("main", 1, 1, 2.0)(std::span<const value>(&arg, 1));
  CHECK(slow.number > 1);
  CHECK(slow.results[0] * slow.number >= 0.002);
  CHECK(message_of<usage_error>([&] { vm.time_evaluator("main", 0); }).find("number and repeat must be at least 1") != std::string::npos);
}

TEST_CASE("saved functions work wherever a function name does, as in TVM") {
  virtual_machine vm(kiln_test::sum_loop(), {}, test_registry());
  vm.save_function("main", "main_10", 10);
  // time_evaluator and get_function find saved names.
  const timing_result r = vm.time_evaluator("main_10", 2, 2)(std::span<const value>());
  CHECK(r.results.size() == 2);
  function_handle h = vm.get_function("main_10");
  CHECK(h.is_saved());
  CHECK(h().as_int() == 45);
  CHECK(vm.has_function("main_10"));
  CHECK(message_of<usage_error>([&] { h(1); }) == "kiln::vm: saved function 'main_10' has its arguments bound; call it with none");
  // Saving again under the same name rebinds it; the handle sees the new arguments.
  vm.save_function("main", "main_10", 11);
  CHECK(h().as_int() == 55);
  // include_return = false: the call runs and returns null (for timing without outputs).
  vm.save_function("main", "quiet", kiln::vm::save_options{.include_return = false}, 10);
  CHECK(vm.invoke("quiet").is_null());
}

TEST_CASE("a saved name shadows a function of the same name, as TVM looks saved closures up first") {
  virtual_machine vm(kiln_test::sum_loop(), {}, test_registry());
  function_handle original = vm.get_function("main");
  vm.save_function("main", "main", 10);
  CHECK(vm.invoke("main").as_int() == 45);
  CHECK(vm.get_function("main").is_saved());
  CHECK(vm.time_evaluator("main", 1, 1)(std::span<const value>()).results.size() == 1);
  CHECK(message_of<usage_error>([&] { vm.invoke("main", 3); }) == "kiln::vm: saved function 'main' has its arguments bound; call it with none");
  CHECK(original(4).as_int() == 6);  // a handle taken before still calls the function
}

TEST_CASE("invoke_stateful: an unknown function is named as unknown, it can be timed after set_input") {
  virtual_machine vm(kiln_test::sum_loop(), {}, test_registry());
  CHECK(message_of<usage_error>([&] { vm.invoke_stateful("nope"); }).starts_with("kiln::vm: no function 'nope' in the executable"));
  vm.set_input("main", 5);
  const value name("main");
  const timing_result r = vm.time_evaluator("invoke_stateful", 2, 3)(std::span<const value>(&name, 1));
  CHECK(r.results.size() == 3);
  CHECK(vm.get_outputs("main").as_int() == 10);
  CHECK(message_of<usage_error>([&] { vm.time_evaluator("invoke_stateful")(std::span<const value>()); })
            .starts_with("kiln::vm::time_evaluator: 'invoke_stateful' is timed with one argument"));
}

TEST_CASE("device index -1 is the host, as in TVM, a default instruction argument is the void register") {
  virtual_machine vm(kiln_test::sum_loop(), {}, test_registry());
  CHECK(&vm.allocator_for(-1) == &vm.allocator_for(0));
  CHECK(message_of<usage_error>([&] { (void)vm.allocator_for(-2); }).find("device index -2 is out of range") != std::string::npos);
  CHECK(instr_arg() == instr_arg::reg(void_register));
}

TEST_CASE("compiled functions get the register file with their arguments in registers 0..N-1") {
  function_registry reg;
  register_builtins(reg);
  reg.add("test.add", [](std::int64_t a, std::int64_t b) { return a + b; });
  reg.add_compiled("twice_plus", [](vm_context& vm, std::span<value> r) -> value {
    CHECK(r.size() == 3);
    r[2] = r[0].as_int() * 2 + r[1].as_int() + vm.constant(0).as_int();
    return r[2];
  });
  exec_builder b;
  b.add_constant(value(1000));
  b.declare_function("twice_plus", function_kind::compiled, 2, 3);
  b.begin_function("main", {"x"}, 2);
  b.emit_call("twice_plus", {b.r(0), b.imm(5)}, 1);
  b.emit_ret(1);
  b.end_function();
  const executable e = b.get();
  virtual_machine vm(e, {}, reg);
  CHECK(vm.invoke("main", 10).as_int() == 1025);
  CHECK(vm.invoke("twice_plus", 1, 1).as_int() == 1003);
  function_registry empty;
  register_builtins(empty);
  CHECK(message_of([&] { virtual_machine x(e, {}, empty); }).find("'__vmtir__twice_plus'") != std::string::npos);
}

TEST_CASE("every device gets an allocator, pooled by default, naive on request") {
  exec_builder b;
  b.begin_function("main", {"dev"}, 3);
  b.emit_call("vm.builtin.null_value", {}, 1);  // no shape heap
  b.emit_call("vm.builtin.make_shape", {b.r(1), b.imm(1), b.imm(0), b.imm(256)}, 1);
  b.emit_call("vm.builtin.alloc_storage", {b.vm(), b.r(1), b.r(0), b.c(b.add_constant(value("float32"))), b.c(b.add_constant(value("global")))}, 2);
  b.emit_ret(2);
  b.end_function();
  const executable e = b.get();
  vm_options two;
  two.num_devices = 2;
  virtual_machine pooled(e, two, test_registry());
  pooled.invoke("main", 1);  // the storage dies at once and goes back to device 1's pool
  pooled.invoke("main", 1);
  CHECK(pooled.allocator_stats(1).allocations == 2);
  CHECK(pooled.allocator_stats(1).reused == 1);
  CHECK(pooled.allocator_stats(0).allocations == 0);
  CHECK(message_of<vm_error>([&] { pooled.invoke("main", 2); }).find("device index 2 is out of range; the VM has 2 devices") !=
        std::string::npos);
  vm_options naive;
  naive.allocator = kiln::runtime::allocator_kind::naive;
  virtual_machine plain(e, naive, test_registry());
  plain.invoke("main", 0);
  plain.invoke("main", 0);
  CHECK(plain.allocator_stats().system_allocations == 2);
  CHECK(plain.allocator_stats().reused == 0);
}

TEST_CASE("typed native functions convert arguments and results, and name what does not fit") {
  const native_function f = make_native("demo", [](std::int32_t a, double b, const std::string& s, bool flag) {
    return s + std::to_string(a) + (flag ? "+" : "-") + std::to_string(int(b * 10));
  });
  CHECK(f.arity == 4);
  const value a(7), b(1.5), s("n="), t(true), big(std::int64_t(1) << 40);
  const value* args[] = {&a, &b, &s, &t};
  CHECK(f(call_args(args, 4)).as_string() == "n=7+15");
  const value* wide[] = {&big, &b, &s, &t};
  CHECK(message_of<value_error>([&] { f(call_args(wide, 4)); }) == "kiln::vm: native function 'demo', argument 0: 1099511627776 is out of range");
  const value* swapped[] = {&a, &s, &b, &t};
  CHECK(message_of<value_error>([&] { f(call_args(swapped, 4)); }) == "kiln::vm: native function 'demo', argument 1: expected float, got string");
  CHECK(message_of<value_error>([&] { f(call_args(args, 3)); }) == "kiln::vm: native function 'demo' takes 4 arguments, got 3");
  const native_function rest = make_native("rest", [](std::int64_t first, call_args more) { return first + std::int64_t(more.size()); });
  CHECK(rest.arity == -1);
  CHECK(rest(call_args(args, 4)).as_int() == 10);
  CHECK(message_of<value_error>([&] { rest(call_args(args, 0)); }) == "kiln::vm: native function 'rest' takes at least 1 arguments, got 0");
  CHECK(bool(f.direct));  // fixed arity: the VM's direct entry
  CHECK_FALSE(bool(rest.direct));
}

TEST_CASE("the VM's direct entry reads register and literal operands and reports bad ones as call_args does") {
  function_registry r;
  register_builtins(r);
  r.add("demo", [](std::int32_t a, double b, const std::string& s) { return s + std::to_string(a + int(b)); });
  // main(x, y): return demo(x, 2.0, y), with a float constant and an immediate beside registers
  exec_builder b;
  b.begin_function("main", {"x", "y"}, 3);
  b.emit_call("demo", {b.r(0), b.c(b.add_constant(value(2.0))), b.r(1)}, 2);
  b.emit_ret(2);
  b.end_function();
  b.begin_function("literal_first", {"y"}, 2);
  b.emit_call("demo", {b.imm(40), b.r(0), b.c(b.add_constant(value("k=")))}, 1);
  b.emit_ret(1);
  b.end_function();
  virtual_machine vm(b.get(), {}, r);
  CHECK(vm.invoke("main", 1, "v=").as_string() == "v=3");
  CHECK(vm.invoke("literal_first", 2).as_string() == "k=42");
  CHECK(message_of<vm_error>([&] { vm.invoke("main", 1, 5); }) ==
        "kiln::vm: in 'main' at instruction 0 (call 'demo'): kiln::vm: native function 'demo', argument 2: expected string, got int");
  CHECK(message_of<vm_error>([&] { vm.invoke("main", std::int64_t(1) << 40, "v="); }) ==
        "kiln::vm: in 'main' at instruction 0 (call 'demo'): kiln::vm: native function 'demo', argument 0: 1099511627776 is out of range");
  CHECK(message_of<vm_error>([&] { vm.invoke("literal_first", "no"); }) ==
        "kiln::vm: in 'literal_first' at instruction 0 (call 'demo'): kiln::vm: native function 'demo', argument 1: expected float, got string");
  CHECK(vm.invoke("main", 2, "w=").as_string() == "w=4");  // and the VM is fine afterwards
}
