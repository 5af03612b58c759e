// SPDX-License-Identifier: Apache-2.0
/// \file
/// Everything kiln offers, in one include.
#pragma once

#include <kiln/ir/ir.hpp>
#include <kiln/ir/pass_traits.hpp>
#include <kiln/pass/pass.hpp>
#include <kiln/support/dtype.hpp>
#include <kiln/support/error.hpp>
#include <kiln/version.hpp>
