// SPDX-License-Identifier: Apache-2.0
/// \file
/// Everything in `kiln/vm/`: values, bytecode, executables and their serialization, the builder,
/// native functions and built-ins, the virtual machine, and generated code's support and shared
/// libraries (`compiled.hpp`, `library.hpp`), and generation with a decoder that carries its cache
/// (`generate.hpp`).
#pragma once

#include <kiln/vm/builtins.hpp>
#include <kiln/vm/bytecode.hpp>
#include <kiln/vm/compiled.hpp>
#include <kiln/vm/context.hpp>
#include <kiln/vm/exec_builder.hpp>
#include <kiln/vm/executable.hpp>
#include <kiln/vm/generate.hpp>
#include <kiln/vm/library.hpp>
#include <kiln/vm/native.hpp>
#include <kiln/vm/serialize.hpp>
#include <kiln/vm/value.hpp>
#include <kiln/vm/virtual_machine.hpp>
