// SPDX-License-Identifier: Apache-2.0
// The ONNX importer's entry points, compiled once for kiln's own programs (see kiln_kernels.cpp).
#include <kiln/frontend/onnx/src.hpp>
