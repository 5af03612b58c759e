// SPDX-License-Identifier: Apache-2.0
// The compiled execution mode: the C++ cpp_codegen writes, export_library / load_module and their
// errors. (That every compiler test gives the same results in both modes is checked by the
// compile/ tests themselves, through helpers.hpp.)
#include <kiln/codegen/cpp_codegen.hpp>
#include <kiln/compile.hpp>
#include <kiln/ir/ir.hpp>
#include <kiln/vm/compiled_fused.hpp>
#include <kiln/vm/vm.hpp>

#include "../common/message_of.hpp"
#include "../common/scoped_directory.hpp"
#include "../compile/helpers.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>

using namespace kiln;
using namespace kiln_test;

namespace {

const char* const two_functions = R"(@I.ir_module
class Module:
    @R.function
    def helper(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        y: R.Tensor((2, 3), "float32") = R.exp(x)
        return y

    @R.function
    def main(x: R.Tensor((n, 3), "float32"), w: R.Tensor((3, 3), "float32")) -> R.Tuple(R.Tensor((n, 3), "float32"), R.Tensor((n, 3), "float32")):
        with R.dataflow():
            h: R.Tensor((n, 3), "float32") = R.matmul(x, w)
            r: R.Tensor((n, 3), "float32") = R.nn.relu(h)
            t: R.Tensor((n, 3), "float32") = R.add(r, R.const(0.5, "float32"))
            R.output(r, t)
        return (r, t)
)";

std::string read(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

/// Builds a shared library from the C++ `source` with the compiler kiln was configured with.
std::filesystem::path build_library(const std::string& source) {
  const auto cpp = temp_file("lib", ".cpp"), so = temp_file("lib", ".so");
  std::ofstream(cpp) << source;
  const std::string cmd = std::string(KILN_DEFAULT_CXX) + " -std=c++20 -shared -fPIC -I" + vm::detail::find_kiln_include_dir({}).string() + " -o " +
                          so.string() + " " + cpp.string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::filesystem::remove(cpp);
  return so;
}

/// A library whose description is `info_fields` (the initializer of kiln_library_info_v1).
std::string fake_library(const std::string& info_fields) {
  return "#include <kiln/vm/compiled.hpp>\nstatic void add(kiln::vm::native_code&) {}\n"
         "extern \"C\" __attribute__((visibility(\"default\"))) const kiln::vm::compiled::library_info kiln_library_info_v1 = {" +
         info_fields + "};\n";
}

}  // namespace

TEST_CASE("cpp_codegen: readable, deterministic C++ with one function per IR function and the IR as comments") {
  const ir::ir_module m = ir::parse_module(two_functions);
  const vm::executable a = kiln::compile(m, {.mode = exec_mode::compiled});
  const vm::executable b = kiln::compile(m, {.mode = exec_mode::compiled});
  CHECK(a.generated_source == b.generated_source);
  const std::string& src = a.generated_source;
  CHECK(contains(src, "#ifndef KILN_GENERATED_KILN_GENERATED_HPP"));
  CHECK(contains(src, "namespace kiln_generated {"));
  CHECK(contains(src, "inline value helper("));
  CHECK(contains(src, "inline value fn_main("));  // `main` is not a function name C++ allows here
  CHECK(contains(src, "/// @main(x: R.Tensor((n, 3), \"float32\"), w: R.Tensor((3, 3), \"float32\"))"));
  CHECK(contains(src, "value& x = args[0];  // x: R.Tensor((n, 3), \"float32\")"));
  CHECK(contains(src, "code.add(\"main\", rt::make_function<literals, &fn_main>(k));"));
  CHECK(contains(src, "// _ = R.call_packed(\"kernels."));
  // Static parameter checks are inline; the built-in runs (and reports) only when one fails.
  CHECK(contains(src, "if (!rt::is_tensor_of(w, 2, kiln::dtype::float32)) rt::direct<&kiln::vm::builtin::check_tensor_info>({fn, \"_\"}, "));
  CHECK(contains(src, "if (!rt::has_shape(w, 3, 3)) rt::direct<&kiln::vm::builtin::match_shape>({fn, \"_\"}, "));
  CHECK(contains(src, "rt::direct<&kiln::vm::builtin::match_shape>({fn, \"_\"}, \"vm.builtin.match_shape\", x, "));  // n: the general check
  CHECK(contains(src, "inline kiln::vm::executable load(const std::filesystem::path& path)"));
  // The function table: the module's functions are compiled ones, with their signatures.
  const auto main = a.find_function("main");
  REQUIRE(main);
  CHECK(a.functions[*main].kind == vm::function_kind::compiled);
  CHECK(a.functions[*main].param_names == std::vector<std::string>{"x", "w"});
  CHECK(a.functions[*main].num_args == 2);
  CHECK(a.num_instructions() == 0);

  const vm::executable c = kiln::compile(m, {.mode = exec_mode::compiled, .cpp = {.name_space = "models::small"}});
  CHECK(contains(c.generated_source, "namespace models::small {"));
  CHECK(contains(c.generated_source, "#ifndef KILN_GENERATED_MODELS__SMALL_HPP"));
  CHECK(message_of<codegen::codegen_error>([&] { (void)kiln::compile(m, {.mode = exec_mode::compiled, .cpp = {.name_space = "models::1x"}}); }) ==
        "kiln::codegen::cpp_codegen: the namespace 'models::1x' is not a C++ qualified name");
}

TEST_CASE("cpp_codegen: a module that is not lowered is an error naming the function and the binding") {
  const ir::ir_module m = ir::parse_module(two_functions);
  const std::string msg = message_of<codegen::codegen_error>([&] { (void)codegen::cpp_codegen(m); });
  CHECK(contains(msg, "kiln::codegen::cpp_codegen: in function 'helper', binding 'y': operator R.exp reached code generation"));
}

TEST_CASE("cpp_codegen: names that are not C++ identifiers or clash become distinct identifiers") {
  CHECK(codegen::detail::cpp_identifier("lv.3-x", "v") == "lv_3_x");
  CHECK(codegen::detail::cpp_identifier("3d", "v") == "v_3d");
  CHECK(codegen::detail::cpp_identifier("int", "v") == "v_int");
  CHECK(codegen::detail::cpp_identifier("__x__", "v") == "x");
  CHECK(codegen::detail::cpp_identifier("", "v") == "v");
  CHECK(codegen::detail::cpp_string("a\"b\\c\n?") == "\"a\\\"b\\\\c\\012\\077\"");
  CHECK(codegen::detail::cpp_double(0.5) == "0.5");
  CHECK(codegen::detail::cpp_double(3) == "3.0");
  CHECK(codegen::detail::cpp_double(1e-300) == "1e-300");
}

TEST_CASE("cpp_codegen: fused elementwise groups become compile-time fx:: expressions") {
  using kernels::fused_expr;
  CHECK(codegen::detail::fx_text(fused_expr::parse("(clip (add x0 (multiply x1 2)) -1 1)").root()) ==
        "fx::clip(fx::arg<0>{} + (fx::arg<1>{} * fx::constant{2.0}), -1.0, 1.0)");
  CHECK(codegen::detail::fx_text(fused_expr::parse("(power (sigmoid (subtract x0 x1)) (divide 1 x2))").root()) ==
        "fx::power(fx::sigmoid(fx::arg<0>{} - fx::arg<1>{}), fx::constant{1.0} / fx::arg<2>{})");

  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def f32(x: R.Tensor((n, 4), "float32"), y: R.Tensor((n, 4), "float32"), b: R.Tensor((4,), "float32")) -> R.Tensor((n, 4), "float32"):
        with R.dataflow():
            a: R.Tensor((n, 4), "float32") = R.multiply(x, y)
            c: R.Tensor((n, 4), "float32") = R.add(a, b)
            d: R.Tensor((n, 4), "float32") = R.exp(c)
            e: R.Tensor((n, 4), "float32") = R.clip(d, min=0.5, max=2.0)
            f: R.Tensor((n, 4), "float32") = R.sigmoid(e)
            R.output(f)
        return f

    @R.function
    def f64(x: R.Tensor((3, 5), "float64"), b: R.Tensor((3, 1), "float64")) -> R.Tensor((3, 5), "float64"):
        with R.dataflow():
            a: R.Tensor((3, 5), "float64") = R.subtract(x, b)
            c: R.Tensor((3, 5), "float64") = R.tanh(a)
            d: R.Tensor((3, 5), "float64") = R.multiply(c, R.const(0.5, "float64"))
            R.output(d)
        return d
)");
  const vm::executable ex = kiln::compile(m, {.mode = exec_mode::compiled});
  const std::string& src = ex.generated_source;
  CHECK(contains(src, "#include <kiln/vm/compiled_fused.hpp>"));
  CHECK(contains(src, "static constexpr auto f_fx = fx::sigmoid(fx::clip(fx::exp((fx::arg<0>{} * fx::arg<1>{}) + fx::arg<2>{}), 0.5, 2.0));"));
  CHECK(contains(src, "rt::fused<float>(f_fx, {fn, \"_\"}, x, y, b, f);"));
  CHECK(contains(src, "rt::fused<double>("));
  CHECK(!contains(src, "rt::call("));  // no call of the interpreting kernel (or any other) is left

  const vm::executable& loaded = compiled_mode(m);
  vm::virtual_machine compiled(loaded, {}, vm::kernel_registry());
  vm::virtual_machine bytecode(kiln::compile(m), {}, vm::kernel_registry());
  for (std::int64_t n : {1, 3, 17}) {
    const auto args = arguments_for(m, "f32", {{"n", n}}, unsigned(n));
    const vm::value got = compiled.invoke_span("f32", args), want = bytecode.invoke_span("f32", args);
    CHECK_MESSAGE(max_difference(got, want, true) <= fused_tolerance, "n = " << n);
  }
  const auto args = arguments_for(m, "f64", {}, 5);
  CHECK(max_difference(compiled.invoke_span("f64", args), bytecode.invoke_span("f64", args), true) <= 1e-12);

  // What the kernel checks, generated code checks with the kernel's messages and the binding's place.
  namespace rt = vm::compiled;
  constexpr auto e = rt::fx::arg<0>{} + rt::fx::arg<1>{};
  const vm::value a(tensor::from_values<float>({2}, {1, 2})), d(tensor::from_values<double>({2}, {1, 2}));
  CHECK(message_of<vm::vm_error>([&] { (void)rt::fused<float>(e, {"g", "lv"}, a, vm::value(std::int64_t(1)), a); }) ==
        "kiln::vm: in 'g' at binding 'lv' (call 'kernels.fused'): kiln::kernels::fused: argument 2 must be a tensor, got int");
  CHECK(contains(message_of<vm::vm_error>([&] { (void)rt::fused<float>(e, {"g", "lv"}, d, d, d); }),
                 "fused: this kernel was made for float32 operands, got float64[2]"));
  CHECK(contains(message_of<vm::vm_error>([&] { (void)rt::fused<float>(e, {"g", "lv"}, a, a, vm::value(tensor::from_values<float>({3}, {1, 2, 3}))); }),
                 "kiln::vm: in 'g' at binding 'lv' (call 'kernels.fused'): kiln::kernels::fused: "));
}

TEST_CASE("the instrumented variant reports the calls inside compiled functions as the bytecode does") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def helper(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        with R.dataflow():
            y: R.Tensor((2, 3), "float32") = R.exp(x)
            z: R.Tensor((2, 3), "float32") = R.multiply(y, R.const(2.0, "float32"))
            R.output(z)
        return z

    @R.function
    def scaled(x: R.Tensor((2, 3), "float32"), s: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        y: R.Tensor((2, 3), "float32") = R.multiply(x, s)
        return y

    @R.function
    def main(x: R.Tensor((2, 3), "float32"), w: R.Tensor((3, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        h: R.Tensor((2, 3), "float32") = R.matmul(x, w)
        r: R.Tensor((2, 3), "float32") = cls.helper(h)
        f: R.Callable((R.Tensor((2, 3), "float32"),), R.Tensor((2, 3), "float32")) = R.make_closure(cls.scaled, (h,))
        q: R.Tensor((2, 3), "float32") = f(r)
        return q
)");
  using event = std::pair<std::string, bool>;  // the callee, before or after
  auto record = [](vm::virtual_machine& machine, std::vector<event>& events, std::string skip = "") {
    machine.set_instrument([&events, skip](const vm::value&, std::string_view symbol, bool before, const vm::value&, vm::call_args) {
      // The bytecode clears a dead register with a call of vm.builtin.null_value; generated code assigns.
      if (symbol != "vm.builtin.null_value") events.emplace_back(std::string(symbol), before);
      return before && symbol == skip ? vm::instrument_action::skip_run : vm::instrument_action::no_op;
    });
  };
  const auto args = arguments_for(m, "main", {}, 7);
  kiln::pass_context ctx(2);
  kiln::pass_context_scope scope(ctx);
  vm::virtual_machine bytecode(kiln::compile(m), {}, vm::kernel_registry());
  std::vector<event> want;
  record(bytecode, want);
  const vm::value expected = bytecode.invoke_span("main", args);

  const vm::executable ex = kiln::compile(m, {.mode = exec_mode::compiled, .cpp = {.instrumented = true}});
  CHECK(contains(ex.generated_source, "// Instrumented: every call is reported"));
  CHECK(contains(ex.generated_source, "rt::call_reported(vm, "));
  CHECK(contains(ex.generated_source, "rt::fused_reported<float>(vm, "));
  CHECK(!contains(ex.generated_source, "rt::direct<"));  // built-ins go through the table, to be seen
  const auto lib = temp_file("instrumented", ".so"), copy = temp_file("instrumented", ".cpp");
  vm::export_library(ex, lib, {.source_copy = copy});
  CHECK(contains(read(copy), ex.generated_source));
  CHECK(contains(read(copy), "kiln_library_info_v1"));
  const vm::executable loaded = vm::load_module(lib);
  std::filesystem::remove(lib);
  std::filesystem::remove(copy);
  vm::virtual_machine compiled(loaded, {}, vm::kernel_registry());
  std::vector<event> got;
  record(compiled, got);
  CHECK(max_difference(compiled.invoke_span("main", args), expected, true) <= fused_tolerance);
  CHECK(got == want);  // the same calls in the same order: kernels, built-ins, the call of helper, the fused group
  CHECK(std::count(got.begin(), got.end(), event{"kernels.fused", true}) == 1);
  CHECK(std::count(got.begin(), got.end(), event{"helper", true}) == 1);
  CHECK(std::count(got.begin(), got.end(), event{"vm.builtin.invoke_closure", true}) == 1);  // the call through the closure

  // Without an instrument the variant runs as the plain one; an instrument may skip a call.
  compiled.set_instrument(nullptr);
  CHECK(max_difference(compiled.invoke_span("main", args), expected, true) <= fused_tolerance);
  std::vector<event> skipped;
  record(compiled, skipped, "vm.builtin.invoke_closure");
  CHECK(compiled.invoke_span("main", args).is_null());  // the skipped call's result is null, as in the bytecode
  CHECK(std::count(skipped.begin(), skipped.end(), event{"vm.builtin.invoke_closure", false}) == 0);
  CHECK(skipped.size() < got.size());  // nothing inside the skipped call ran

  // The plain variant: the instrument sees nothing inside compiled functions (as in TVM).
  vm::virtual_machine plain(compiled_mode(m), {}, vm::kernel_registry());
  std::vector<event> none;
  record(plain, none);
  (void)plain.invoke_span("main", args);
  CHECK(none.empty());
}

TEST_CASE("export_library and load_module: the loaded executable runs as the bytecode does") {
  const ir::ir_module m = ir::parse_module(two_functions);
  const scoped_directory dir("export_library");
  // The compiled mode as docs/compiler.md and docs/howto-deploy-compiled.md show it:
  // [compiled_mode]
  vm::executable ex = kiln::compile(m, {.mode = kiln::exec_mode::compiled});
  vm::export_library(ex, "model.so");                  // runs $CXX (or kiln's configured compiler)
  vm::executable lib = vm::load_module("model.so");    // checks, then attaches the compiled functions
  vm::virtual_machine machine(lib, {}, kiln::vm::kernel_registry());
  // [compiled_mode]
  std::filesystem::remove("model.so");  // the loaded code no longer needs the file
  REQUIRE(lib.code);
  CHECK(lib.code->names() == std::vector<std::string>{"helper", "main"});
  CHECK(lib.functions.size() == ex.functions.size());

  const vm::executable bytecode = kiln::compile(m);
  vm::virtual_machine& a = machine;
  vm::virtual_machine b(bytecode, {}, vm::kernel_registry());
  for (std::int64_t n : {1, 4}) {
    const auto args = arguments_for(m, "main", {{"n", n}}, unsigned(n));
    CHECK(max_difference(a.invoke_span("main", args), b.invoke_span("main", args)) == 0);
  }
  const auto hargs = arguments_for(m, "helper", {});
  CHECK(max_difference(a.invoke_span("helper", hargs), b.invoke_span("helper", hargs)) == 0);

  // Errors carry the interpreter's kind of context: the function, the binding, the callee.
  const std::string msg = message_of<vm::vm_error>([&] { (void)a.invoke("main", tensor::empty({2, 4}, dtype::float32), hargs[0]); });
  CHECK(contains(msg, "kiln::vm: in 'main' at binding '_' (call 'vm.builtin.match_shape'): vm.builtin.match_shape: main: parameter 'x'"));

  // The VM's instrument sees Call instructions: none run inside compiled functions (as in TVM).
  std::vector<std::string> seen;
  auto record = [&](const vm::value&, std::string_view name, bool before, const vm::value&, vm::call_args) {
    if (before) seen.emplace_back(name);
    return vm::instrument_action::no_op;
  };
  a.set_instrument(record);
  (void)a.invoke_span("main", arguments_for(m, "main", {{"n", 2}}));
  CHECK(seen.empty());
  b.set_instrument(record);
  (void)b.invoke_span("main", arguments_for(m, "main", {{"n", 2}}));
  CHECK(std::find(seen.begin(), seen.end(), "vm.builtin.match_shape") != seen.end());
}

TEST_CASE("a compiled executable without its code: the VM says where the code comes from") {
  const vm::executable ex = kiln::compile(ir::parse_module(two_functions), {.mode = exec_mode::compiled});
  const std::string msg = message_of<kiln::error>([&] { vm::virtual_machine machine(ex, {}, vm::kernel_registry()); });
  CHECK(contains(msg, "'__vmtir__helper'"));
  CHECK(contains(msg, "load it with vm::load_module"));
  // attach() checks that code and executable belong together.
  CHECK(contains(message_of<kiln::usage_error>([&] { (void)vm::compiled::attach(ex, [](vm::native_code&) {}); }),
                 "the executable's compiled function 'helper' has no code here"));
}

TEST_CASE("export_library: errors name the compiler, its command line and its messages") {
  const vm::executable bytecode = kiln::compile(ir::parse_module(two_functions));
  CHECK(message_of<vm::library_error>([&] { vm::export_library(bytecode, temp_file("x", ".so")); }) ==
        "kiln::vm::export_library: the executable has no generated code; compile it with exec_mode::compiled");
  const vm::executable ex = kiln::compile(ir::parse_module(two_functions), {.mode = exec_mode::compiled});
  const auto lib = temp_file("never", ".so");
  const std::string missing = message_of<vm::library_error>([&] { vm::export_library(ex, lib, {.compiler = "/nonexistent/c++"}); });
  CHECK(contains(missing, "kiln::vm::export_library: cannot run the C++ compiler '/nonexistent/c++': No such file or directory"));
  CHECK(contains(missing, "command: /nonexistent/c++ -std=c++20"));
  const std::string failed =
      message_of<vm::library_error>([&] { vm::export_library(ex, lib, {.flags = {"-O2", "-include", "kiln_test_no_such_header.hpp"}}); });
  CHECK(contains(failed, "kiln::vm::export_library: the C++ compiler failed (exit status 1)"));
  CHECK(contains(failed, "-include kiln_test_no_such_header.hpp"));  // the command line
  CHECK(contains(failed, "fatal error"));  // the compiler's own message (GCC and Clang word the rest differently)
  CHECK(!std::filesystem::exists(lib));
}

TEST_CASE("load_module: files that are not kiln libraries, or not for this kiln or CPU, are refused cleanly") {
  const auto none = temp_file("none", ".so");
  CHECK(message_of<vm::library_error>([&] { (void)vm::load_module(none); }) ==
        "kiln::vm::load_module: cannot open '" + none.string() + "': No such file or directory");
  const auto text = temp_file("text", ".so");
  std::ofstream(text) << "not a library";
  CHECK(contains(message_of<vm::library_error>([&] { (void)vm::load_module(text); }), "': not a shared library (no ELF header)"));
  std::filesystem::remove(text);

  // A real kiln library, cut short.
  const vm::executable ex = kiln::compile(ir::parse_module(two_functions), {.mode = exec_mode::compiled});
  const auto lib = temp_file("whole", ".so");
  vm::export_library(ex, lib);
  const std::string bytes = read(lib);
  const auto cut = temp_file("cut", ".so");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, 1000);
  CHECK(contains(message_of<vm::library_error>([&] { (void)vm::load_module(cut); }), "lies outside the file (cut short?)"));
  std::filesystem::remove(cut);
  std::filesystem::remove(lib);

  // A library that is not kiln's is refused before it is loaded: its constructor never runs.
  const auto marker = temp_file("constructor_ran", ".txt");
  const auto other = build_library("#include <cstdio>\nextern \"C\" int f() { return 1; }\n"
                                   "__attribute__((constructor)) static void ran() { std::fclose(std::fopen(\"" + marker.string() + "\", \"w\")); }\n");
  CHECK(contains(message_of<vm::library_error>([&] { (void)vm::load_module(other); }),
                 "': not a kiln library (it exports no kiln_library_info_v1; it was not loaded, and none of its code ran)"));
  CHECK(!std::filesystem::exists(marker));
  std::filesystem::remove(other);

  const std::string common = "kiln::vm::compiled::abi_tag, sizeof(kiln::vm::value), ";
  const auto old = build_library(fake_library("kiln::vm::compiled::library_info::magic_value, \"0.0.1\", " + common + "0, \"test\", nullptr, nullptr, &add"));
  CHECK(contains(message_of<vm::library_error>([&] { (void)vm::load_module(old); }),
                 "': built by kiln 0.0.1, this program has kiln " + std::string(kiln::version) + "; rebuild it with export_library"));
  std::filesystem::remove(old);
  const auto future = build_library(fake_library("kiln::vm::compiled::library_info::magic_value, kiln::version, " + common + "(1ull << 40) | 1, \"test\", nullptr, nullptr, &add"));
  CHECK(contains(message_of<vm::library_error>([&] { (void)vm::load_module(future); }), "': built for CPU features this machine lacks: "));
  CHECK(contains(message_of<vm::library_error>([&] { (void)vm::load_module(future); }), "feature bit 40"));
  std::filesystem::remove(future);
  const auto empty = build_library(fake_library("kiln::vm::compiled::library_info::magic_value, kiln::version, " + common + "0, \"test\", nullptr, nullptr, &add"));
  CHECK(contains(message_of<vm::library_error>([&] { (void)vm::load_module(empty); }), "': its embedded executable is missing"));
  std::filesystem::remove(empty);
}

TEST_CASE("the per-VM arena: intermediates made once per VM, results and nested calls get their own memory") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def rec(x: R.Tensor((4,), "float32"), n: R.Tensor((), "int64")) -> R.Tensor((4,), "float32"):
        a: R.Tensor((4,), "float32") = R.exp(x)
        b: R.Tensor((4,), "float32") = R.multiply(a, x)
        z: R.Tensor((), "bool") = R.equal(n, R.const(0, "int64"))
        if z:
            r: R.Tensor((4,), "float32") = R.negative(b)
        else:
            m: R.Tensor((), "int64") = R.subtract(n, R.const(1, "int64"))
            y: R.Tensor((4,), "float32") = R.multiply(x, R.const(0.5, "float32"))
            h: R.Tensor((4,), "float32") = cls.rec(y, m)
            r: R.Tensor((4,), "float32") = R.add(h, b)
        t: R.Tensor((4,), "float32") = R.add(r, b)
        return t

    @R.function
    def main(x: R.Tensor((4,), "float32"), n: R.Tensor((), "int64")) -> R.Tensor((4,), "float32"):
        return cls.rec(x, n)
)");
  const vm::executable ex = kiln::compile(m, {.mode = exec_mode::compiled});
  CHECK(contains(ex.generated_source, "struct rec_arena {"));
  CHECK(contains(ex.generated_source, "stays in the arena for the next call"));
  // b is made in rec's arena and used after the nested call: the nested call must not reuse it.
  const vm::executable& loaded = compiled_mode(m);
  vm::virtual_machine a(loaded, {}, vm::kernel_registry()), b(loaded, {}, vm::kernel_registry());
  interpreter::reference_evaluator eval(m);
  const tensor x = tensor::from_values<float>({4}, {0.5f, -1, 2, 0.25f});
  for (std::int64_t n : {0, 1, 3}) {
    const tensor depth = tensor::from_values<std::int64_t>({}, {n});
    const vm::value first = a.invoke("main", x, depth), want = eval("main", x, depth);
    const std::vector<float> kept = first.as_tensor().to_vector<float>();
    CHECK(max_difference(first, want, true) <= fused_tolerance);  // exp and multiply are one fused group
    (void)b.invoke("main", tensor::from_values<float>({4}, {9, 9, 9, 9}), depth);  // another VM: its own arena
    CHECK(max_difference(a.invoke("main", x, depth), first) == 0);                   // the arena reused
    CHECK(first.as_tensor().to_vector<float>() == kept);                             // results are not in it
  }
}

TEST_CASE("load_module loads the file as it is now, not an earlier library loaded from the same path") {
  const auto lib = temp_file("same", ".so");
  const ir::ir_module one = ir::parse_module(two_functions);
  vm::export_library(kiln::compile(one, {.mode = exec_mode::compiled}), lib);
  const vm::executable first = vm::load_module(lib);
  const ir::ir_module other = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def other(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y: R.Tensor((2,), "float32") = R.negative(x)
        return y
)");
  vm::export_library(kiln::compile(other, {.mode = exec_mode::compiled}), lib);
  const vm::executable second = vm::load_module(lib);
  std::filesystem::remove(lib);
  CHECK(first.find_function("main"));
  CHECK(!second.find_function("main"));
  REQUIRE(second.find_function("other"));
  vm::virtual_machine machine(second, {}, vm::kernel_registry());
  CHECK(machine.invoke("other", tensor::from_values<float>({2}, {1, -2})).as_tensor().to_vector<float>() == std::vector<float>{-1, 2});
}
