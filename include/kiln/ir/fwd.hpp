// SPDX-License-Identifier: Apache-2.0
/// \file
/// Forward declarations of the IR's node classes and handles, for headers that only pass them
/// around.
#pragma once

#include <kiln/support/ref.hpp>

namespace kiln::ir {
class node;
class prim_expr_node;
class size_var_node;
class type_node;
class expr_node;
class var_node;
class global_var_node;
class call_node;
class op_node;
class base_func_node;
class function_node;
class prim_func_node;
class ir_module_node;
using prim_expr = ref<prim_expr_node>;
using size_var = ref<size_var_node>;
using type = ref<type_node>;
using expr = ref<expr_node>;
using var = ref<var_node>;
using global_var = ref<global_var_node>;
using op = ref<op_node>;
using base_func = ref<base_func_node>;
using function = ref<function_node>;
using prim_func = ref<prim_func_node>;
using ir_module = ref<ir_module_node>;
}  // namespace kiln::ir
