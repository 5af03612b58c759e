// SPDX-License-Identifier: Apache-2.0
// The ONNX importer: bytes that import give a module that verifies and compiles, or a kiln error.
// A small model is also run (its inputs zero), so that the kernels meet fuzzed shapes and
// attributes: one whose every value has a static shape of at most `max_elements` elements.
// The same bytes go through import_file's wire-format walk (mapped_model.hpp), which must give
// back a model that, with the weights it noted put back, is the one protobuf parses.
#include <kiln/compile.hpp>
#include <kiln/frontend/onnx/import.hpp>
#include <kiln/frontend/onnx/mapped_model.hpp>
#include <kiln/ir/verifier.hpp>
#include <kiln/ir/visitor.hpp>
#include <kiln/vm/kernels.hpp>
#include <kiln/vm/vm.hpp>

#include "fuzz.hpp"

namespace {

constexpr std::int64_t max_elements = std::int64_t(1) << 16;

/// Whether every tensor `t` describes has a static shape of at most max_elements elements.
bool small(const kiln::ir::type& t) {
  using namespace kiln::ir;
  if (auto* tt = dyn_cast<tensor_type_node>(t)) {
    if (!tt->shape || !is_known(tt->dt)) return false;
    std::int64_t n = 1;
    for (int i = 0; i < tt->ndim; ++i) {
      const auto d = tt->static_dim(i);
      if (!d || *d < 0 || __builtin_mul_overflow(n, *d, &n) || n > max_elements) return false;
    }
    return true;
  }
  if (auto* tup = dyn_cast<tuple_type_node>(t)) {
    for (const auto& f : tup->fields)
      if (!small(f)) return false;
    return true;
  }
  return isa<prim_type_node>(t) || isa<shape_type_node>(t);
}

/// Runs `main` of `m` (compiled to `ex`) on zeros when all of its values are small.
void run_if_small(const kiln::ir::ir_module& m, const kiln::vm::executable& ex) {
  using namespace kiln::ir;
  const auto* f = dyn_cast<function_node>(m->lookup("main"));
  if (!f) return;
  bool ok = true;
  for (const auto& p : f->params) ok = ok && isa<tensor_type_node>(p->checked_type) && small(p->checked_type);
  if (!ok) return;
  post_order_visit(f->body, [&](const expr& e) { ok = ok && small(e->checked_type); });
  if (!ok) return;
  std::vector<kiln::vm::value> args;
  for (const auto& p : f->params) {
    const auto* tt = dyn_cast<tensor_type_node>(p->checked_type);
    kiln::runtime::shape_vector shape;
    for (int i = 0; i < tt->ndim; ++i) shape.push_back(*tt->static_dim(i));
    args.emplace_back(kiln::runtime::tensor::zeros(shape, tt->dt));
  }
  kiln::vm::virtual_machine machine(ex, {}, kiln::vm::kernel_registry());
  (void)machine.invoke_span("main", args);
}

/// The walk import_file maps weights with, on `bytes`: nothing, or a skeleton that parses when
/// they do and is, with each raw_data it noted put back, the model they hold.
void check_skeleton(std::span<const std::byte> bytes) {
  const auto s = kiln::frontend::onnx::detail::skeleton_of(bytes, 1);
  if (!s) return;
  ::onnx::ModelProto whole, skeleton;
  const bool parsed = whole.ParseFromArray(bytes.data(), int(bytes.size()));
  kiln_fuzz::fuzz_check(parsed == skeleton.ParseFromString(s->bytes), "the skeleton parses exactly when the model does");
  if (!parsed) return;
  for (auto& t : *skeleton.mutable_graph()->mutable_initializer())
    if (auto it = s->raw_data.find(t.name()); it != s->raw_data.end())
      t.set_raw_data(std::string(reinterpret_cast<const char*>(it->second.data()), it->second.size()));
  kiln_fuzz::fuzz_check(whole.SerializeAsString() == skeleton.SerializeAsString(), "the skeleton with its weights put back is the model");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_skeleton(kiln_fuzz::bytes(data, size));
  return kiln_fuzz::guarded([&] {
    const kiln::ir::ir_module m = kiln::frontend::onnx::import_bytes(kiln_fuzz::bytes(data, size));
    kiln_fuzz::fuzz_check(kiln::ir::verify(m).empty(), "an imported module is well formed");
    const kiln::vm::executable ex = kiln::compile(m);
    run_if_small(m, ex);
  });
}
