// SPDX-License-Identifier: Apache-2.0
/// \file
/// Memory operators of the lowered IR (Relax's `R.builtin.*` and `R.memory.*`): what the compiler's
/// passes turn destination-passing calls into before code generation.
///
///     R.builtin.alloc_tensor(shape, dtype=..., device_index=0)     a fresh tensor (unplanned)
///     R.memory.alloc_storage(size, device_index=0, scope="global")  size: R.shape([bytes])
///     R.memory.alloc_tensor(storage, shape, offset=..., dtype=...)  a tensor at a byte offset
///     R.memory.kill_tensor(x)   R.memory.kill_storage(s)             the value is dead from here on
///
/// `call_tir_rewrite` produces `builtin.alloc_tensor`; `static_plan_block_memory` replaces what it
/// can plan with storage and offsets; `vm_builtin_lower` turns what remains into VM built-ins.
#pragma once

#include <kiln/ir/op/infer.hpp>

namespace kiln::ir::detail {

/// The shape argument `i` as a list of dimensions (a shape value of known values).
inline const std::vector<prim_expr>& known_shape_arg(const call_context& ctx, std::size_t i) {
  auto* s = dyn_cast<shape_type_node>(ctx.arg_type(i));
  if (!s || !s->values) ctx.fail_arg(i, "must be a shape with known dimensions (R.shape([...])), but has type " + to_string(ctx.arg_type(i)));
  return *s->values;
}

inline dtype known_dtype_attr(const call_context& ctx) {
  const dtype d = ctx.attr<dtype>("dtype");
  if (!is_known(d)) ctx.fail("attribute 'dtype' must be a concrete dtype, not void");
  return d;
}

inline void register_memory_ops(op_registry& r) {
  r.add({"builtin.alloc_tensor",
         {"shape"},
         {{"dtype", attr_kind::data_type, {}, true}, {"device_index", attr_kind::integer, std::int64_t{0}}},
         [](const call_context& ctx) { return tensor_type(known_shape_arg(ctx, 0), known_dtype_attr(ctx)); },
         op_pattern::opaque,
         "allocates a tensor of the given shape and dtype (a compiler output's buffer, before memory planning)"});
  r.add({"memory.alloc_storage",
         {"size"},
         {{"device_index", attr_kind::integer, std::int64_t{0}}, {"scope", attr_kind::string, "global"}},
         [](const call_context& ctx) {
           const auto& s = known_shape_arg(ctx, 0);
           if (s.size() != 1) ctx.fail_arg(0, "must be a one-dimensional shape holding the size in bytes, but has " + std::to_string(s.size()) + " dimensions");
           return object_type();
         },
         op_pattern::opaque,
         "allocates a block of memory of the given number of bytes"});
  r.add({"memory.alloc_tensor",
         {"storage", "shape"},
         {{"offset", attr_kind::integer, std::int64_t{0}}, {"dtype", attr_kind::data_type, {}, true}},
         [](const call_context& ctx) {
           if (ctx.arg_type(0)->kind != node_kind::object_type) ctx.fail_arg(0, "must be a storage (R.Object), but has type " + to_string(ctx.arg_type(0)));
           if (ctx.attr<std::int64_t>("offset") < 0) ctx.fail("attribute 'offset' must not be negative");
           return tensor_type(known_shape_arg(ctx, 1), known_dtype_attr(ctx));
         },
         op_pattern::opaque,
         "a tensor placed at a byte offset of a storage"});
  for (const char* n : {"memory.kill_tensor", "memory.kill_storage"})
    r.add({n, {"x"}, {}, [](const call_context&) { return tuple_type({}); }, op_pattern::opaque,
           "marks the value dead: its register is cleared and its memory may be released"});
}

}  // namespace kiln::ir::detail
