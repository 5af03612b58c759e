// SPDX-License-Identifier: Apache-2.0
/// \file
/// The reference tensor IR, all of it: types, expressions, functions, modules, operators, the
/// builder, structural equality, visitors, the text format and the verifier.
#pragma once

#include <kiln/ir/attrs.hpp>
#include <kiln/ir/builder.hpp>
#include <kiln/ir/dot.hpp>
#include <kiln/ir/expr.hpp>
#include <kiln/ir/function.hpp>
#include <kiln/ir/module.hpp>
#include <kiln/ir/ndarray.hpp>
#include <kiln/ir/op.hpp>
#include <kiln/ir/parser.hpp>
#include <kiln/ir/prim_expr.hpp>
#include <kiln/ir/printer.hpp>
#include <kiln/ir/structural_equal.hpp>
#include <kiln/ir/type.hpp>
#include <kiln/ir/verifier.hpp>
#include <kiln/ir/visitor.hpp>
