// SPDX-License-Identifier: Apache-2.0
// import_file's mapped weights (import_options::map_weights): the wire-format walk that finds
// them (skeleton_of) on good and on broken bytes, constants over the file's pages that import,
// compile and run as read ones do, executables that no longer need the file, and a file written
// in place after the import refused by name.
#include <kiln/compile.hpp>
#include <kiln/frontend/onnx/import.hpp>
#include <kiln/frontend/onnx/mapped_model.hpp>
#include <kiln/ir/structural_equal.hpp>
#include <kiln/ir/visitor.hpp>
#include <kiln/vm/vm.hpp>

#include "../../common/message_of.hpp"
#include "model_builder.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

using namespace kiln;
namespace kx = kiln::frontend::onnx;
using kiln_test::floats;
using kiln_test::message_of;
using kiln_test::model_builder;
using kiln_test::run;

namespace {

/// A float initializer stored as raw_data.
::onnx::TensorProto& raw_initializer(model_builder& b, const std::string& name, std::vector<std::int64_t> dims, float first) {
  auto* t = b.g().add_initializer();
  t->set_name(name);
  t->set_data_type(::onnx::TensorProto::FLOAT);
  std::size_t n = 1;
  for (auto d : dims) t->add_dims(d), n *= std::size_t(d);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = first + float(i % 97) * 0.25f;
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), n * 4));
  return *t;
}

/// y = x @ w + b, w [128, 256] (128 KiB, mapped), b [256] (1 KiB, read).
model_builder linear_model(int opset = 13) {
  model_builder b(opset);
  b.input("x", {"2", "128"});
  raw_initializer(b, "w", {128, 256}, -3);
  raw_initializer(b, "b", {256}, 1);
  b.node("MatMul", {"x", "w"}, {"h"});
  b.node("Add", {"h", "b"}, {"y"});
  b.output("y", {"2", "256"});
  return b;
}

struct temp_dir {
  std::filesystem::path path = std::filesystem::temp_directory_path() / ("kiln_mapped_" + std::to_string(::getpid()));
  temp_dir() { std::filesystem::create_directories(path); }
  ~temp_dir() { std::filesystem::remove_all(path); }
};

void write(const std::filesystem::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes; }

std::span<const std::byte> as_bytes(const std::string& s) { return std::as_bytes(std::span<const char>(s)); }

const ir::ndarray& constant_named(const ir::ir_module& m, std::size_t nbytes) {
  static ir::ndarray none;
  const ir::ndarray* found = &none;
  ir::post_order_visit(static_cast<const ir::function_node&>(*m->lookup("main")).body, [&](const ir::expr& e) {
    if (auto* c = ir::dyn_cast<ir::constant_node>(e); c && c->data.bytes().size() == nbytes) found = &c->data;
  });
  return *found;
}

vm::value input() {
  std::vector<float> x(2 * 128);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i % 13) - 6;
  return vm::value(floats({2, 128}, x));
}

}  // namespace

TEST_CASE("skeleton_of: each large initializer's raw_data becomes a one-byte placeholder, and where it lies is noted") {
  model_builder b = linear_model();
  const std::string bytes = b.m.SerializeAsString();
  const auto s = kx::detail::skeleton_of(as_bytes(bytes), 64 << 10);
  REQUIRE(s);
  REQUIRE(s->raw_data.size() == 1);  // w; b is below the threshold
  const std::span<const std::byte> w = s->raw_data.at("w");
  CHECK(w.size() == 128 * 256 * 4);
  CHECK(std::memcmp(w.data(), b.g().initializer(0).raw_data().data(), w.size()) == 0);
  CHECK(w.data() >= as_bytes(bytes).data());
  CHECK(s->bytes.size() < 4096);

  ::onnx::ModelProto parsed;
  REQUIRE(parsed.ParseFromString(s->bytes));
  ::onnx::ModelProto expected = b.m;
  expected.mutable_graph()->mutable_initializer(0)->set_raw_data(std::string(1, '\0'));
  CHECK(parsed.SerializeAsString() == expected.SerializeAsString());

  // Nothing to keep in place: nothing.
  CHECK_FALSE(kx::detail::skeleton_of(as_bytes(bytes), 1 << 20));
}

TEST_CASE("skeleton_of leaves alone what is not plain raw data, and gives up on two initializers of one name") {
  model_builder b = linear_model();
  // External data, a segment: kept as they are (the importer reports them).
  model_builder ext = b;
  ext.g().mutable_initializer(0)->set_data_location(::onnx::TensorProto::EXTERNAL);
  CHECK_FALSE(kx::detail::skeleton_of(as_bytes(ext.m.SerializeAsString()), 4096));
  model_builder seg = b;
  seg.g().mutable_initializer(0)->mutable_segment()->set_begin(0);
  CHECK_FALSE(kx::detail::skeleton_of(as_bytes(seg.m.SerializeAsString()), 4096));
  // An unnamed tensor cannot be found again by name.
  model_builder unnamed = b;
  unnamed.g().mutable_initializer(0)->clear_name();
  CHECK_FALSE(kx::detail::skeleton_of(as_bytes(unnamed.m.SerializeAsString()), 4096));
  model_builder twice = b;
  *twice.g().add_initializer() = b.g().initializer(0);
  CHECK_FALSE(kx::detail::skeleton_of(as_bytes(twice.m.SerializeAsString()), 4096));
  // Two graph fields, which protobuf merges: the initializers of both are found.
  model_builder other(13);
  raw_initializer(other, "v", {64, 64}, 0);
  const std::string merged = b.m.SerializeAsString() + other.m.SerializeAsString();
  const auto s = kx::detail::skeleton_of(as_bytes(merged), 4096);
  REQUIRE(s);
  CHECK(s->raw_data.size() == 2);
  ::onnx::ModelProto parsed, whole;
  REQUIRE(parsed.ParseFromString(s->bytes));
  REQUIRE(whole.ParseFromString(merged));
  CHECK(parsed.graph().initializer_size() == whole.graph().initializer_size());
}

TEST_CASE("skeleton_of on every truncation and on corrupted bytes: nothing, or a skeleton that parses as the bytes do") {
  const std::string good = linear_model().m.SerializeAsString();
  const auto check = [](const std::string& bytes) {
    const auto s = kx::detail::skeleton_of(as_bytes(bytes), 1024);
    if (!s) return;
    ::onnx::ModelProto from_skeleton, from_bytes;
    const bool a = from_skeleton.ParseFromString(s->bytes), b = from_bytes.ParseFromString(bytes);
    CHECK(a == b);
    for (const auto& [name, span] : s->raw_data) {
      CHECK(span.data() >= as_bytes(bytes).data());
      CHECK(span.data() + span.size() <= as_bytes(bytes).data() + bytes.size());
    }
  };
  for (std::size_t n = 0; n <= good.size(); n += (n < 64 || n + 64 > good.size()) ? 1 : 997) check(good.substr(0, n));
  std::uint32_t state = 1;
  for (int round = 0; round < 200; ++round) {
    std::string bad = good;
    for (int k = 0; k < 4; ++k) {
      state = state * 1664525u + 1013904223u;
      const std::size_t at = state % 64;  // the headers, where the lengths are
      state = state * 1664525u + 1013904223u;
      bad[at] = char(state >> 24);
    }
    check(bad);
  }
}

TEST_CASE("import_file maps the large weights: the module equals the one read into memory, and runs alike") {
  temp_dir dir;
  const auto path = dir.path / "linear.onnx";
  write(path, linear_model().m.SerializeAsString());

  const ir::ir_module mapped = kx::import_file(path);
  const ir::ir_module read = kx::import_file(path, {.map_weights = false});
  CHECK(constant_named(mapped, 128 * 256 * 4).is_mapped());
  CHECK_FALSE(constant_named(mapped, 256 * 4).is_mapped());
  CHECK_FALSE(constant_named(read, 128 * 256 * 4).is_mapped());
  CHECK(ir::structural_equal(mapped, read));
  const std::vector<float> expected = run(read, {input()}).as_tensor().to_vector<float>();
  CHECK(run(mapped, {input()}).as_tensor().to_vector<float>() == expected);

  // Initializers as parameters, and a model ONNX's version converter brings up first.
  CHECK(ir::structural_equal(kx::import_file(path, {.keep_params_in_input = true}),
                             kx::import_file(path, {.keep_params_in_input = true, .map_weights = false})));
  write(path, linear_model(6).m.SerializeAsString());
  CHECK(run(kx::import_file(path), {input()}).as_tensor().to_vector<float>() == expected);
}

TEST_CASE("an executable keeps no page of the file and runs after the file is gone, and a file written in place before compiling is refused") {
  temp_dir dir;
  const auto path = dir.path / "linear.onnx";
  write(path, linear_model().m.SerializeAsString());
  const std::vector<float> expected = run(kx::import_file(path, {.map_weights = false}), {input()}).as_tensor().to_vector<float>();

  const ir::ir_module m = kx::import_file(path);
  const vm::executable exe = kiln::compile(m);
  std::filesystem::remove(path);
  write(path, "not a model any more");
  vm::virtual_machine machine(exe);
  std::vector<vm::value> args{input()};
  CHECK(machine.invoke_span("main", args).as_tensor().to_vector<float>() == expected);

  // Replaced by a rename: the module still reads the old file.
  write(path, linear_model().m.SerializeAsString());
  const ir::ir_module renamed = kx::import_file(path);
  write(dir.path / "next.onnx", "something else");
  std::filesystem::rename(dir.path / "next.onnx", path);
  CHECK(run(renamed, {input()}).as_tensor().to_vector<float>() == expected);

  // Truncated in place: compiling the module is an error naming the file, not a crash.
  write(path, linear_model().m.SerializeAsString());
  const ir::ir_module truncated = kx::import_file(path);
  write(path, "short");
  const std::string msg = message_of<kiln::error>([&] { kiln::compile(truncated); });
  CHECK_MESSAGE(msg.find("'" + path.string() + "' changed after its bytes were mapped") != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("must not be written while they are in use") != std::string::npos, msg);
}
