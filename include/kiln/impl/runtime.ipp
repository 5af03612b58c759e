// SPDX-License-Identifier: Apache-2.0
/// \file
/// kiln's process-wide state, for a program built with `KILN_SEPARATE_COMPILATION` (part of
/// `<kiln/src.hpp>`): the default allocator, the thread pools' per-thread flag, the kernels' pool,
/// the caches the kernels block for, the VM's built-ins and global registry. Compiled once, for
/// the baseline instruction set, and shared by the kernels of every level (`kernels/isa.hpp`).
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/kernels/impl/cpu_caches.ipp>
#include <kiln/kernels/impl/parallel.ipp>
#include <kiln/runtime/impl/allocator.ipp>
#include <kiln/support/impl/thread_pool.ipp>
#include <kiln/vm/impl/builtins.ipp>
#include <kiln/vm/impl/kernel_registry.ipp>
