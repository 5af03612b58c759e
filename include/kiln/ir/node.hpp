// SPDX-License-Identifier: Apache-2.0
/// \file
/// The root of every IR node and the closed list of node kinds.
///
/// Dispatch in visitors, printers and structural comparison is a `switch` on `node::kind`, which
/// is cheaper than `dynamic_cast` and makes a missing case a compiler warning.
#pragma once

#include <kiln/support/ref.hpp>

#include <cstdint>

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

/// Base of all IR nodes: an immutable, reference-counted object tagged with its kind.
class node : public boost::intrusive_ref_counter<node, boost::thread_safe_counter> {
public:
  const node_kind kind;

  node(const node&) = delete;
  node& operator=(const node&) = delete;
  virtual ~node() = default;

protected:
  explicit node(node_kind k) noexcept : kind(k) {}
};

}  // namespace kiln::ir
