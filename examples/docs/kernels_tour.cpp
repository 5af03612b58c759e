// SPDX-License-Identifier: Apache-2.0
// docs/kernels.md shows the region "tour" of this program (tests/docs/check_snippets.py); CTest
// builds and runs it.
#include <kiln/kernels/kernels.hpp>
#include <kiln/vm/kernels.hpp>

#include <iostream>

using kiln::runtime::tensor;

/// `shape` filled with small values that vary (the tour needs inputs, not particular ones).
tensor sample(kiln::runtime::shape_vector shape) {
  tensor t = tensor::empty(std::move(shape), kiln::dtype::float32);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i % 7) * 0.25f - 0.5f;
  return t;
}

int main() {
  const tensor x = sample({2, 3, 4}), bias = sample({4}), a = sample({8, 8}), b = sample({8}), c = sample({8, 8});
  tensor out = tensor::empty({8, 8}, kiln::dtype::float32);
  const tensor q = sample({2, 5, 16}), kmat = sample({2, 7, 16});
  const tensor xm = sample({6, 32}), wm = sample({32, 4});
  tensor out_m = tensor::empty({6, 4}, kiln::dtype::float32);
  const tensor img = sample({1, 3, 16, 16}), wconv = sample({8, 3, 7, 7}), bconv = sample({8});
  kiln::vm::function_registry registry;
  // [tour]
  namespace k = kiln::kernels;

  tensor y = k::add(x, bias);                    // numpy broadcasting; a new contiguous tensor
  k::multiply(a, b, out);                        // destination-passing: checks out, allocates nothing
  tensor s = k::softmax(k::sum(x, {0, 2}, /*keepdims=*/true), -1);

  constexpr auto gelu_bias = k::fx::gelu(k::fx::arg<0>{} + k::fx::arg<1>{});
  k::run_fused(gelu_bias, {a, b}, out);          // compile time: one pass, intermediates in registers
  k::fused_expr e = k::fused_expr::parse("(multiply (relu (add (multiply x0 x1) x2)) 0.5)");
  e.run({a, b, c}, out);                         // run time: one pass, intermediates in L1 tiles

  tensor sc = k::matmul(q, kmat, false, /*transpose_b=*/true);   // batched, numpy semantics
  k::set_num_threads(2);                         // optional: GEMM and conv2d share work out
  k::matmul_fused(xm, wm, k::fused_expr::parse("(gelu (add x0 x1))"), {bias}, out_m);   // epilogue per GEMM block

  k::conv2d_params cp;  cp.strides = {2, 2};  cp.padding = {3, 3, 3, 3};
  tensor f = k::conv2d(img, wconv, bconv, cp);   // NCHW x OIHW, groups, dilation
  tensor m = k::max_pool2d(f, {.pool_size = {3, 3}, .strides = {2, 2}, .padding = {1, 1, 1, 1}});
  tensor t = k::permute_dims(x, {0, 2, 1});      // also reshape (a view when possible), concat,
  tensor p = k::pad(img, {0, 0, 0, 0, 1, 1, 1, 1}, k::pad_mode::reflect);   // split, take, ...

  kiln::vm::register_kernels(registry);          // "kernels.add"(a, b, out), "kernels.fused"(text, ..., out), ...
  // [tour]
  k::set_num_threads(1);
  for (const tensor* r : {&y, &s, &sc, &f, &m, &t, &p}) std::cout << kiln::runtime::shape_to_string(r->shape()) << "\n";
}
