// SPDX-License-Identifier: Apache-2.0
/// \file
/// How kiln is compiled into a program: header-only (the default), or with its heaviest
/// definitions compiled once.
///
/// Header-only needs nothing: include what you use. A program with many source files that reach
/// the kernels' registration (through `kiln/compile.hpp`, `kiln/vm/kernels.hpp` or the
/// reference evaluator), `kiln::compile`, `transform::register_passes` or the ONNX importer
/// compiles them — every kernel for every dtype, every pass — in each of them. To compile them once
/// instead, as Asio's `ASIO_SEPARATE_COMPILATION` does:
///
///     target_compile_definitions(my_compiler PRIVATE KILN_SEPARATE_COMPILATION)   # every source file
///     // kiln.cpp, exactly one source file:
///     #include <kiln/src.hpp>
///     #include <kiln/frontend/onnx/src.hpp>   // when the program uses the ONNX importer
///
/// Forgetting `kiln/src.hpp` is a link error naming a kernel or `kiln::vm::register_kernels`.
/// With the macro, the kernels' headers declare the kernels (their templates stay in the headers)
/// and the VM's built-in registration, and are lighter for it: Clang's front end spent 3-4 s of
/// about 16 on the kernels' instantiations in each unit that included <kiln/kiln.hpp>.
///
/// `kiln/src.hpp` has three parts, which separate source files may hold instead, to compile in
/// parallel (kiln's own build does: `src/kiln_kernels.cpp`, `src/kiln_runtime.cpp`,
/// `src/kiln_compiler.cpp`): `<kiln/vm/impl/kernels.ipp>` (the kernels and their
/// registration: everything that depends on the instruction set, which kiln's own build compiles
/// once per level, `kernels/isa.hpp`), `<kiln/impl/runtime.ipp>` (the process-wide state: the VM's
/// built-ins and global registry, the kernels' thread pool, the default allocator), and
/// `<kiln/impl/compile.ipp>` with `<kiln/transform/impl/register_passes.ipp>` (the compiler; the
/// two share the passes' code).
#pragma once

#if defined(KILN_SEPARATE_COMPILATION)
#define KILN_DECL
#else
#define KILN_DECL inline
#endif
