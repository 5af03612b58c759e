// SPDX-License-Identifier: Apache-2.0
/// \file
/// The root of every IR node and the closed list of node kinds.
///
/// Dispatch in visitors, printers and structural comparison is a `switch` on `node::kind`, which
/// is cheaper than `dynamic_cast` and makes a missing case a compiler warning.
#pragma once

#include <kiln/support/error.hpp>
#include <kiln/support/ref.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::ir {

// The handle and cast vocabulary, available as ir::ref, ir::isa, ir::dyn_cast, ...
using kiln::dyn_cast;
using kiln::isa;
using kiln::make_ref;
using kiln::ref;
using kiln::ref_cast;

enum class node_kind : std::uint8_t {
  // symbolic integer expressions (dimensions)
  int_imm,
  size_var,
  prim_binary,
  // types
  object_type,
  prim_type,
  shape_type,
  tensor_type,
  tuple_type,
  func_type,
  // expressions
  var,
  dataflow_var,
  constant,
  global_var,
  op,
  extern_func,
  call,
  tuple,
  tuple_get_item,
  if_,
  seq,
  shape_expr,
  prim_value,
  string_imm,
  // functions
  function,
  prim_func,
  // module
  module,
};

/// The deepest IR kiln builds. A node's `depth()` is one more than its deepest child's (the
/// expressions, types and dimensions it refers to; a leaf is 1), computed when the node is made,
/// and a node that would be deeper than this is refused with a `depth_error`. Every recursive
/// algorithm over the IR — the printer, structural equality and hashing, the verifier, visitors,
/// mutators and kiln's passes — descends along these references only, so no IR that exists can
/// take one deeper than this: the limit keeps their recursion within a few hundred KB of stack,
/// whoever built the IR (the parser refuses deeper text earlier, at 256 levels of nesting).
/// Real models are a few dozen levels deep.
inline constexpr std::uint32_t max_ir_depth = 1000;

/// IR nested deeper than `max_ir_depth`.
class depth_error : public error {
public:
  using error::error;
};

/// Base of all IR nodes: an immutable, reference-counted object tagged with its kind.
class node : public boost::intrusive_ref_counter<node, boost::thread_safe_counter> {
public:
  const node_kind kind;

  /// 1 for a leaf; otherwise one more than the deepest child (see `max_ir_depth`).
  std::uint32_t depth() const noexcept { return depth_; }

  node(const node&) = delete;
  node& operator=(const node&) = delete;
  virtual ~node() = default;

protected:
  explicit node(node_kind k) noexcept : kind(k) {}

  /// Called by a constructor for each child (null children are ignored): makes this node deeper
  /// than `child`, or throws `depth_error` past `max_ir_depth`.
  template <class T>
  void nest(const ref<T>& child) {
    if (child) nest_depth(child->depth());
  }
  template <class T>
  void nest(const std::vector<ref<T>>& children) {
    for (const ref<T>& c : children) nest(c);
  }

private:
  void nest_depth(std::uint32_t child) {
    if (child >= max_ir_depth)
      throw depth_error("kiln::ir: IR nested too deeply: this node would be " + std::to_string(child + 1) +
                        " levels deep (limit " + std::to_string(max_ir_depth) +
                        ", kiln::ir::max_ir_depth); bind inner values to variables instead of nesting them");
    if (child >= depth_) depth_ = child + 1;
  }

  std::uint32_t depth_ = 1;
};

}  // namespace kiln::ir
