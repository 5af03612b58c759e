// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kill_after_last_use`: memory a function allocated for itself is released right after its last
/// use, not when the function returns (Relax's KillAfterLastUse).
///
///     storage0 = R.memory.alloc_storage(R.shape([n * 16]))
///     a = R.memory.alloc_tensor(storage0, R.shape([n, 4]), dtype="float32")
///     ...                                   # the last use of a, or of anything holding it
///  -> _ = R.memory.kill_storage(storage0)   # the block goes back to the VM's pool now
///
/// Killed are the storages the function allocates and the tensors it allocates on their own
/// (`R.builtin.alloc_tensor`), each after the last use of it or of anything that may hold it
/// (`detail/lifetimes.hpp`); what may reach the result is never killed. Tensors placed in a
/// storage are not killed one by one: their storage is, after the last of them. Code generation
/// turns a kill into clearing the value's register.
#pragma once

#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/property.hpp>
#include <kiln/transform/analyses.hpp>
#include <kiln/transform/detail/lifetimes.hpp>
#include <kiln/transform/properties.hpp>

#include <map>
#include <memory>

namespace kiln::transform {

struct kill_after_last_use {
  static constexpr std::string_view name = "kill_after_last_use";
  static constexpr std::string_view description =
      "Releases each tensor and storage after its last use, so memory returns to the allocator early.";
  static constexpr int opt_level = 0;
  using needs = property_list<properties::memory_planned>;

  ir::function operator()(const ir::function& f, const ir::ir_module&, pass_context& ctx) const {
    const std::shared_ptr<const detail::value_lifetimes> lifetimes = ctx.analysis<liveness>(f);
    const detail::value_lifetimes& life = *lifetimes;
    std::map<std::int64_t, std::vector<ir::binding>> kills_after;  // position -> kills
    for (std::int64_t p = 0; p < life.result_position; ++p) {
      const ir::binding& b = *life.bindings[std::size_t(p)];
      const bool storage = detail::is_op_call(b.value, "memory.alloc_storage");
      const bool own_tensor = detail::is_op_call(b.value, "builtin.alloc_tensor");
      if ((!storage && !own_tensor) || life.escapes.count(b.variable.get())) continue;
      const std::int64_t end = life.end.at(b.variable.get());
      if (end >= life.result_position) continue;
      kills_after[end].push_back(
          {ir::make_var("_", ir::tuple_type({})), ir::call_op(storage ? "memory.kill_storage" : "memory.kill_tensor", {b.variable}), {}});
    }
    if (kills_after.empty()) return f;
    auto& body = static_cast<const ir::seq_expr_node&>(*f->body);
    std::vector<ir::binding_block> blocks;
    std::int64_t p = 0;
    for (auto& block : body.blocks) {
      ir::binding_block out{block.dataflow, {}};
      for (auto& b : block.bindings) {
        out.bindings.push_back(b);
        if (auto it = kills_after.find(p++); it != kills_after.end())
          out.bindings.insert(out.bindings.end(), it->second.begin(), it->second.end());
      }
      blocks.push_back(std::move(out));
    }
    return detail::with_body(f, ir::make_seq(std::move(blocks), body.body));
  }
};

}  // namespace kiln::transform
