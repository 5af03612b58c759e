// SPDX-License-Identifier: Apache-2.0
#include "helpers.hpp"

#include "../common/message_of.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <random>

using namespace kiln;
using namespace kiln::vm;
using kiln_test::message_of;

namespace {

/// A program with every kind of constant and a call between bytecode functions.
executable rich_program() {
  exec_builder b;
  const auto weights = b.add_constant(value(tensor::from_values<float>({2, 2}, {1, 2, 3, 4})));
  b.set_memory_scope(weights, "global");
  const auto tup = b.add_constant(value::tuple({1, 2.5, true, "x", value(), value::shape({3}), value::tuple({7})}));
  b.declare_function("helper", function_kind::bytecode, 1);
  b.begin_function("main", {"n"}, 3);
  type_signature n;
  n.kind = signature_kind::prim;
  n.dt = dtype::int64;
  type_signature result;
  result.kind = signature_kind::tuple;
  result.fields = {type_signature::object(), type_signature::tensor(dtype::float32, {{2, {}}, {-1, "m * 2"}})};
  b.set_signature({n}, result);
  b.emit_call("helper", {b.r(0)}, 1);
  b.emit_call("vm.builtin.make_tuple", {b.r(1), b.c(weights), b.c(tup), b.f("helper"), b.imm(-5)}, 2);
  b.emit_ret(2);
  b.end_function();
  b.begin_function("helper", {"x"}, 2);
  b.emit_call("test.add", {b.r(0), b.imm(instr_arg::value_min)}, 1);
  b.emit_ret(1);
  b.end_function();
  return b.get();
}

std::string load_error(const std::vector<std::byte>& bytes) {
  return message_of<format_error>([&] { deserialize(bytes, "test bytes"); });
}

}  // namespace

TEST_CASE("serialize, deserialize: the same executable, and running it gives the same results") {
  const executable e = rich_program();
  const auto bytes = serialize(e);
  const executable back = deserialize(bytes);
  CHECK(back.functions == e.functions);
  CHECK(back.instr_offset == e.instr_offset);
  CHECK(back.instr_data == e.instr_data);
  CHECK(back.memory_scopes == e.memory_scopes);
  REQUIRE(back.constants.size() == e.constants.size());
  for (std::size_t i = 0; i < e.constants.size(); ++i) CHECK(equal(back.constants[i], e.constants[i]));
  CHECK(serialize(back) == bytes);

  const auto path = std::filesystem::temp_directory_path() / "kiln_test_exec.kvm";
  save_executable(e, path);
  virtual_machine original(e, {}, kiln_test::test_registry()), loaded(load_executable(path), {}, kiln_test::test_registry());
  const value a = original.invoke("main", 10), b = loaded.invoke("main", 10);
  CHECK(to_string(a) == to_string(b));
  CHECK(equal(a.as_tuple()[0], b.as_tuple()[0]));
  CHECK(equal(a.as_tuple()[1], b.as_tuple()[1]));
  CHECK(a.as_tuple()[0].as_int() == 10 + instr_arg::value_min);
}

TEST_CASE("the header: magic number first, then the version string") {
  const auto bytes = serialize(rich_program());
  std::uint64_t magic = 0;
  for (int i = 0; i < 8; ++i) magic |= std::uint64_t(std::to_integer<std::uint8_t>(bytes[std::size_t(i)])) << (8 * i);
  CHECK(magic == 0xD225DE2F4214151EULL);
  auto bad = bytes;
  bad[0] = std::byte{0};
  CHECK(load_error(bad) == "kiln::vm: test bytes: not a kiln executable (bad magic number) (section 'header', byte 8)");
  auto other = bytes;
  other[16 + 9] = std::byte{'9'};  // "kiln-vm-0.2" -> "kiln-vm-092"
  CHECK(load_error(other) ==
        "kiln::vm: test bytes: the executable was written in format 'kiln-vm-092'; this kiln reads 'kiln-vm-0.2' (section 'header', byte 27)");
  CHECK(message_of([] { load_executable("/nonexistent/x.kvm"); }) == "kiln::vm::load_executable: cannot open '/nonexistent/x.kvm': No such file or directory");
}

TEST_CASE("every truncation of a valid executable is a clean error") {
  const auto bytes = serialize(rich_program());
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<std::byte> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(n));
    const std::string msg = load_error(cut);
    CHECK_MESSAGE(msg.find("kiln::vm: test bytes: ") == 0, msg);
  }
  auto longer = bytes;
  longer.push_back(std::byte{0});
  CHECK(load_error(longer).find("1 bytes follow the end of the executable") != std::string::npos);
}

TEST_CASE("every single-bit flip either loads a valid executable or is a clean error") {
  const auto bytes = serialize(rich_program());
  std::size_t rejected = 0;
  for (std::size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    auto flipped = bytes;
    flipped[bit / 8] ^= std::byte(1u << (bit % 8));
    try {
      const executable e = deserialize(flipped, "flipped");
      validate(e);  // whatever loads is valid, and a VM can be made from it or refuses cleanly
      try {
        virtual_machine vm(e, {}, kiln_test::test_registry());
      } catch (const kiln::error&) {
      }
    } catch (const format_error& error) {
      ++rejected;
      // Every rejection, by the reader or by the checks after it, says where.
      const std::string msg = error.what();
      CHECK_MESSAGE(msg.find(" (section '") != std::string::npos, msg);
      CHECK_MESSAGE(msg.find("', byte ") != std::string::npos, msg);
    }
  }
  CHECK(rejected > bytes.size() * 4);  // most flips break something
}

TEST_CASE("the checks after reading name the section and byte offset of what they reject") {
  // The bytecode of `helper`: its Call's callee index is out of range. Found by the checks that
  // run once everything is read; the message points at the instruction's first word.
  executable e = rich_program();
  const std::size_t helper_call = std::size_t(e.instr_offset[std::size_t(e.functions[*e.find_function("helper")].start_instr)]);
  e.instr_data[helper_call + 2] = 999;  // func_idx
  auto bytes = serialize(e);
  const std::size_t data_at = bytes.size() - 8 * e.instr_data.size();
  CHECK(load_error(bytes) == "kiln::vm: test bytes: function 'helper', instruction 0 (call): function index 999 is outside the function table of " +
                                 std::to_string(e.functions.size()) + " (section 'bytecode', byte " + std::to_string(data_at + 8 * helper_call) + ")");
  // A memory scope naming a constant the pool does not have.
  executable s = rich_program();
  s.memory_scopes[0].first = 50;
  CHECK(load_error(serialize(s)).find("memory scope 'global' names constant 50, the pool has 2 (section 'memory scopes', byte ") !=
        std::string::npos);
  // Two functions of one name: at the second's table entry.
  executable twice = rich_program();
  twice.functions[1].name = twice.functions[0].name;
  const std::string msg = load_error(serialize(twice));
  CHECK(msg.find("appears twice in the function table (section 'globals', byte ") != std::string::npos);
}

TEST_CASE("bytes from the input are shown escaped in messages") {
  auto bytes = serialize(rich_program());
  bytes[16 + 4] = std::byte{0};     // "kiln\0vm-0.2"
  bytes[16 + 5] = std::byte{0x1b};  // an escape
  CHECK(load_error(bytes) ==
        "kiln::vm: test bytes: the executable was written in format 'kiln\\x00\\x1bm-0.2'; this kiln reads 'kiln-vm-0.2' (section 'header', byte 27)");
  executable e = rich_program();
  e.functions[0].name = std::string("ma\0in\n", 6);
  e.functions[0].num_args = -3;
  const std::string named = load_error(serialize(e));
  CHECK_MESSAGE(named.find("function 'ma\\x00in\\x0a'") != std::string::npos, named);
}

TEST_CASE("random byte strings, with and without a valid header, are clean errors") {
  std::mt19937_64 rng(42);
  const auto valid = serialize(rich_program());
  for (int round = 0; round < 2000; ++round) {
    std::vector<std::byte> bytes(std::size_t(rng() % 400));
    for (auto& b : bytes) b = std::byte(rng() & 0xff);
    if (round % 2 == 0 && bytes.size() >= 27)  // keep the header so the later sections get fuzzed
      std::copy(valid.begin(), valid.begin() + 27, bytes.begin());
    CHECK_THROWS_AS(deserialize(bytes, "random"), format_error);
  }
}

TEST_CASE("function signatures survive the round trip, print like the IR, and malformed ones are rejected") {
  const executable e = rich_program();
  const executable back = deserialize(serialize(e));
  const auto& main = back.functions[*back.find_function("main")];
  CHECK(main.signature_text() == "(n: R.Prim(\"int64\")) -> R.Tuple(R.Object, R.Tensor((2, m * 2), \"float32\"))");
  CHECK(back.as_text().find("@main(n: R.Prim(\"int64\")) -> R.Tuple(") != std::string::npos);
  CHECK(back.functions[*back.find_function("helper")].signature_text() == "(x)");

  auto with = [&](auto mutate) {
    executable bad = e;
    mutate(bad.functions[*bad.find_function("main")]);
    return message_of<format_error>([&] { deserialize(serialize(bad), "test bytes"); });
  };
  CHECK(with([](function_info& f) { f.param_types.push_back(type_signature::object()); }) ==
        "kiln::vm: test bytes: function 'main': 2 parameter types for 1 arguments (section 'globals', byte 126)");
  CHECK(with([](function_info& f) { f.ret_type.fields[1].ndim = 3; }) ==
        "kiln::vm: test bytes: function 'main', result: 2 dimensions for rank 3 (section 'globals', byte 126)");
  CHECK(with([](function_info& f) { f.param_types[0].ndim = 2; }) ==
        "kiln::vm: test bytes: function 'main', parameter 0: a non-tensor signature has dimensions (section 'globals', byte 126)");
  CHECK(with([](function_info& f) { (*f.ret_type.fields[1].dims)[0] = {-7, {}}; }) ==
        "kiln::vm: test bytes: function 'main', result: dimension '-7' is malformed (section 'globals', byte 126)");
  type_signature deep;
  for (int i = 0; i < 40; ++i) {
    type_signature t;
    t.kind = signature_kind::tuple;
    t.fields.push_back(std::move(deep));
    deep = std::move(t);
  }
  CHECK(with([&](function_info& f) { f.ret_type = deep; }).find("nests tuples more than 32 deep") != std::string::npos);
}

TEST_CASE("check_argument: the verdict the bytecode's shape checks would give, before any call") {
  std::map<std::string, std::int64_t> bound;
  const type_signature x = type_signature::tensor(dtype::float32, {{-1, "n"}, {4, {}}});
  CHECK_FALSE(check_argument(x, value(tensor::zeros({3, 4}, dtype::float32)), bound));
  CHECK(bound.at("n") == 3);
  CHECK(check_argument(x, value(tensor::zeros({5, 4}, dtype::float32)), bound) == "dimension 0 is n = 3 (bound earlier), got 5");
  CHECK(check_argument(x, value(tensor::zeros({3, 5}, dtype::float32)), bound) == "dimension 1 must be 4, got 5");
  CHECK(check_argument(x, value(tensor::zeros({3}, dtype::float32)), bound) == "expected rank 2, got rank 1");
  CHECK(check_argument(x, value(tensor::zeros({3, 4}, dtype::int32)), bound) == "expected dtype float32, got int32");
  CHECK(check_argument(x, value(1), bound) == "expected a tensor, got int");
  type_signature pair;
  pair.kind = signature_kind::tuple;
  pair.fields = {x, type_signature::object()};
  CHECK(check_argument(pair, value::tuple({value(tensor::zeros({3, 4}, dtype::float32))}), bound) ==
        "expected a tuple of 2 fields, got 1");
  CHECK(check_argument(pair, value::tuple({value(tensor::zeros({2, 4}, dtype::float32)), value()}), bound) ==
        "field 0: dimension 0 is n = 3 (bound earlier), got 2");
}

TEST_CASE("the loader names what is out of range: registers, constants, functions, jumps, counts") {
  const executable good = rich_program();
  auto check = [&](auto mutate, std::string_view expect) {
    executable e = good;
    mutate(e);
    const std::string msg = load_error(serialize(e));
    CHECK_MESSAGE(msg.find(expect) != std::string::npos, msg);
  };
  // main: call helper(%0) -> %1 ; call make_tuple(...) -> %2 ; ret %2
  check([](executable& e) { e.instr_data[e.instr_offset[2] + 1] = 3; },
        "function 'main', instruction 2 (ret): result %3 is outside the register file of 3 registers");
  check([](executable& e) { e.instr_data[e.instr_offset[1] + 5] = instr_arg::const_idx(9).word(); },
        "function 'main', instruction 1 (call): argument 1 refers to constant 9, the pool has 2");
  check([](executable& e) { e.instr_data[e.instr_offset[1] + 7] = instr_arg::func_idx(-1).word(); },
        "function 'main', instruction 1 (call): argument 3 refers to function -1, the table has 4");
  check([](executable& e) { e.instr_data[e.instr_offset[0] + 2] = 7; },
        "function 'main', instruction 0 (call): function index 7 is outside the function table of 4");
  check([](executable& e) { e.instr_data[e.instr_offset[2]] = exec_word(opcode::goto_); e.instr_data[e.instr_offset[2] + 1] = 3; },
        "function 'main', instruction 2 (goto): the jump leads to instruction 5, outside the function's 3 instructions");
  check([](executable& e) { e.instr_data[e.instr_offset[0]] = 9; }, "instruction 0 has unknown opcode 9");
  check([](executable& e) { e.functions[*e.find_function("main")].register_file_size = std::int64_t(1) << 40; },
        "function 'main': 1 arguments in a register file of 1099511627776 (at most 1048576)");
  check([](executable& e) { e.functions[*e.find_function("main")].end_instr = 2; }, "instructions 2 to 2 belong to no function");
  check([](executable& e) { e.functions[2].name = "main"; }, "function 'main' appears twice in the function table");
  check([](executable& e) { e.memory_scopes[0].first = 5; }, "memory scope 'global' names constant 5, the pool has 2");
  check([](executable& e) { e.instr_data[e.instr_offset[0] + 3] = 1000; }, "instruction 0 (call) has 1000 arguments but");

  // A count larger than the rest of the file is caught before anything is allocated.
  auto bytes = serialize(good);
  for (int i = 0; i < 8; ++i) bytes[27 + std::size_t(i)] = std::byte{0xff};  // the number of functions
  CHECK(load_error(bytes).find("the number of functions is 18446744073709551615, more than the") != std::string::npos);
}

TEST_CASE("only data constants serialize") {
  exec_builder b;
  b.begin_function("main", {}, 1);
  b.emit_call("vm.builtin.null_value", {}, 0);
  b.emit_ret(0);
  b.end_function();
  executable e = b.get();
  e.constants.push_back(value(object_ptr<const closure_obj>(kiln::runtime::make_object<closure_obj>())));
  CHECK(message_of([&] { serialize(e); }) ==
        "kiln::vm::serialize: constant 0 is a closure, which cannot be serialized (constants are null, numbers, strings, shapes, "
        "tensors and tuples)");
}

TEST_CASE("a tensor constant with no elements but strides beyond int64 is a clean error") {
  // (0, 2^32, 2^32): 0 elements, so no data is read, but its row-major strides would overflow.
  exec_builder b;
  const auto k = b.add_constant(value(tensor::empty({0, 3, 5}, dtype::float32)));
  b.begin_function("main", {}, 1);
  b.emit_call("vm.builtin.null_value", {}, 0);
  b.emit_ret(0);
  b.end_function();
  (void)k;
  auto bytes = serialize(b.get());
  auto le64 = [](std::int64_t v) {
    std::vector<std::byte> out;
    for (int i = 0; i < 8; ++i) out.push_back(std::byte((std::uint64_t(v) >> (8 * i)) & 0xff));
    return out;
  };
  std::vector<std::byte> dims = le64(3), five = le64(5);
  dims.insert(dims.end(), five.begin(), five.end());
  auto at = std::search(bytes.begin(), bytes.end(), dims.begin(), dims.end());
  REQUIRE(at != bytes.end());
  const auto huge = le64(std::int64_t(1) << 32);
  std::copy(huge.begin(), huge.end(), at);
  std::copy(huge.begin(), huge.end(), at + 8);
  CHECK(load_error(bytes).find("shape [0, 4294967296, 4294967296] is too large: its strides overflow int64") != std::string::npos);
}
