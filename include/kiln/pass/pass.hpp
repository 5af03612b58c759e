// SPDX-License-Identifier: Apache-2.0
/// \file
/// The pass infrastructure, in one include: passes as types, `sequential` pipelines with static
/// dependency resolution, `pass_context`, instruments (run-time and compile-time policies), the
/// built-in instruments, the PrintIR pass, the fixed-point combinator, statistics, and run-time pipelines (`kiln::pass`, the registry, textual pipelines).
///
/// It knows no IR: plug yours in with `kiln::module_traits` (`module_traits.hpp`); kiln's own
/// reference IR does so in `kiln/ir/pass_traits.hpp`.
#pragma once

#include <kiln/pass/analysis.hpp>
#include <kiln/pass/diagnostics.hpp>
#include <kiln/pass/erased_pass.hpp>
#include <kiln/pass/instrument.hpp>
#include <kiln/pass/instruments/bisect.hpp>
#include <kiln/pass/instruments/crash_reproducer.hpp>
#include <kiln/pass/instruments/pass_timing.hpp>
#include <kiln/pass/instruments/print_ir.hpp>
#include <kiln/pass/instruments/verify_ir.hpp>
#include <kiln/pass/make_pass.hpp>
#include <kiln/pass/module_traits.hpp>
#include <kiln/pass/pass_config.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/pass_info.hpp>
#include <kiln/pass/pipeline.hpp>
#include <kiln/pass/print_ir_pass.hpp>
#include <kiln/pass/registry.hpp>
#include <kiln/pass/repeat.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>
