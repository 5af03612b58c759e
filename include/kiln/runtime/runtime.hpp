// SPDX-License-Identifier: Apache-2.0
/// \file
/// Everything in `kiln/runtime/`: objects, devices, allocators and storage, tensors, `.npy` I/O.
#pragma once

#include <kiln/runtime/allocator.hpp>
#include <kiln/runtime/compare.hpp>
#include <kiln/runtime/device.hpp>
#include <kiln/runtime/kv_cache.hpp>
#include <kiln/runtime/npy.hpp>
#include <kiln/runtime/object.hpp>
#include <kiln/runtime/tensor.hpp>
