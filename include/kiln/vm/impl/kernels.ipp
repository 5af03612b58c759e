// SPDX-License-Identifier: Apache-2.0
/// \file
/// The VM's registration of the kernels (`vm/kernels.hpp`), with the kernels' definitions: included
/// by it (header-only), or by `<kiln/src.hpp>` in the one source file of a program built with
/// `KILN_SEPARATE_COMPILATION`. Everything here depends on the instruction set it is compiled for:
/// kiln's own kernel library compiles it once per level (`kernels/isa.hpp`). The process-wide
/// state the kernels use (their thread pool, the default allocator, the VM's global registry) is
/// compiled once, elsewhere (`<kiln/impl/runtime.ipp>`).
///
/// Each kernel is added through its signature (`kernels/calling_convention.hpp`): `add_kernel<K>` checks
/// at compile time that the callable takes, in order, a C++ parameter for each argument kind the
/// signature lists, so the registration cannot drift from the calls the compiler emits.
#pragma once

#include <kiln/vm/kernels.hpp>

#include <kiln/kernels/attention.hpp>
#include <kiln/kernels/fused.hpp>
#include <kiln/kernels/isa.hpp>
#include <kiln/kernels/linalg.hpp>
#include <kiln/kernels/nn.hpp>
#include <kiln/kernels/reduce.hpp>
#include <kiln/kernels/resize.hpp>
#include <kiln/kernels/transform.hpp>
#include <kiln/runtime/kv_cache.hpp>

#include <kiln/kernels/impl/definitions.ipp>

#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>

namespace kiln::vm {

KILN_DECL void register_kernels(function_registry& r) {
  using namespace kernels;
  namespace abi = kernels::abi;
  // The elementwise families: every operator of kernels/elementwise.hpp's lists is one of the
  // signature's, and the lists are as long.
#define KILN_REGISTER_BINARY(op, driver, result_type)                                                                   \
  static_assert(abi::is_binary_operator(#op), "kernels." #op " is missing from kernels/calling_convention.hpp's binary_operators"); \
  add_kernel<abi::binary>(r, "kernels." #op, [](tensor a, tensor b, tensor out) { kernels::op(a, b, out); });
  KILN_KERNELS_BINARY_OPERATORS(KILN_REGISTER_BINARY)
#undef KILN_REGISTER_BINARY
#define KILN_REGISTER_UNARY(op)                                                                                          \
  static_assert(abi::is_unary_operator(#op), "kernels." #op " is missing from kernels/calling_convention.hpp's unary_operators"); \
  add_kernel<abi::unary>(r, "kernels." #op, [](tensor x, tensor out) { kernels::op(x, out); });
  KILN_KERNELS_UNARY_OPERATORS(KILN_REGISTER_UNARY)
#undef KILN_REGISTER_UNARY
#define KILN_COUNT_OPERATOR(...) +1
  static_assert(0 KILN_KERNELS_BINARY_OPERATORS(KILN_COUNT_OPERATOR) == std::size(abi::binary_operators) &&
                    0 KILN_KERNELS_UNARY_OPERATORS(KILN_COUNT_OPERATOR) == std::size(abi::unary_operators),
                "kernels/calling_convention.hpp lists an elementwise operator kernels/elementwise.hpp does not define");
#undef KILN_COUNT_OPERATOR
  add_kernel<abi::cast>(r, [](tensor x, tensor out) { kernels::cast(x, out); });
  add_kernel<abi::clip>(r, [](tensor x, double lo, double hi, tensor out) { clip(x, lo, hi, out); });
  add_kernel<abi::where>(r, [](tensor c, tensor x, tensor y, tensor out) { where(c, x, y, out); });

#define KILN_REGISTER_REDUCE(op) add_kernel<abi::op>(r, [](tensor x, const shape_vector& axes, bool keepdims, tensor out) { kernels::op(x, axes, keepdims, out); });
  KILN_REGISTER_REDUCE(sum)
  KILN_REGISTER_REDUCE(mean)
  KILN_REGISTER_REDUCE(max)
  KILN_REGISTER_REDUCE(min)
  KILN_REGISTER_REDUCE(prod)
#undef KILN_REGISTER_REDUCE
  auto optional_axis = [](const value& v) { return v.is_null() ? std::optional<std::int64_t>() : std::optional(v.as_int()); };
  auto optional_tensor = [](const value& v) { return v.is_null() ? tensor() : v.as_tensor(); };
  add_kernel<abi::argmax>(r, [=](tensor x, const value& axis, bool keepdims, tensor out) { argmax(x, optional_axis(axis), keepdims, out); });
  add_kernel<abi::argmin>(r, [=](tensor x, const value& axis, bool keepdims, tensor out) { argmin(x, optional_axis(axis), keepdims, out); });
  add_kernel<abi::softmax>(r, [](tensor x, std::int64_t axis, tensor out) { softmax(x, axis, out); });
  add_kernel<abi::log_softmax>(r, [](tensor x, std::int64_t axis, tensor out) { log_softmax(x, axis, out); });
  add_kernel<abi::layer_norm>(r, [=](tensor x, const value& gamma, const value& beta, const shape_vector& axes, double epsilon,
                                 bool center, bool scale, tensor out) {
    layer_norm(x, optional_tensor(gamma), optional_tensor(beta), axes, epsilon, out, center, scale);
  });

  add_kernel<abi::matmul>(r, [](tensor a, tensor b, bool ta, bool tb, tensor out) { matmul(a, b, out, ta, tb); });
  add_kernel<abi::matmul_prepacked>(r, [](tensor a, tensor packed, bool ta, const shape_vector& layout, tensor out) {
    matmul_prepacked(a, packed, packed_layout("matmul_prepacked", layout), out, ta);
  });

  add_kernel<abi::conv2d>(r, [=](tensor x, tensor w, const value& bias, const shape_vector& strides, const shape_vector& padding,
                             const shape_vector& dilation, std::int64_t groups, tensor out) {
    constexpr std::string_view op = "conv2d";
    const conv2d_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation), groups};
    conv2d(x, w, optional_tensor(bias), p, out);
  });
  add_kernel<abi::conv2d_prepacked>(r, [=](tensor x, tensor packed, const value& bias, const shape_vector& layout, const shape_vector& strides,
                                       const shape_vector& padding, const shape_vector& dilation, tensor out) {
    constexpr std::string_view op = "conv2d_prepacked";
    const conv2d_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation), 1};
    conv2d_prepacked(x, packed, packed_conv_layout_of(op, layout), optional_tensor(bias), p, out);
  });
  add_kernel<abi::conv2d_winograd>(r, [=](tensor x, tensor packed, const value& bias, const shape_vector& layout, const shape_vector& strides,
                                      const shape_vector& padding, const shape_vector& dilation, tensor out) {
    constexpr std::string_view op = "conv2d_winograd";
    const conv2d_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation), 1};
    conv2d_winograd(x, packed, winograd_conv_layout_of(op, layout), optional_tensor(bias), p, out);
  });
  add_kernel<abi::conv2d_pointwise>(r, [=](tensor x, tensor packed, const value& bias, const shape_vector& layout, const shape_vector& strides,
                                       const shape_vector& padding, const shape_vector& dilation, tensor out) {
    constexpr std::string_view op = "conv2d_pointwise";
    const conv2d_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation), 1};
    conv2d_pointwise(x, packed, packed_layout(op, layout), optional_tensor(bias), p, out);
  });
  add_kernel<abi::conv2d_transpose>(r, [](tensor x, tensor w, const shape_vector& strides, const shape_vector& padding, const shape_vector& output_padding,
                                       const shape_vector& dilation, std::int64_t groups, tensor out) {
    constexpr std::string_view op = "conv2d_transpose";
    const conv2d_transpose_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "output_padding", output_padding),
                                    pair2(op, "dilation", dilation), groups};
    conv2d_transpose(x, w, p, out);
  });
  auto pool_params = [](std::string_view op, const shape_vector& size, const shape_vector& strides, const shape_vector& padding,
                        const shape_vector& dilation, bool ceil_mode, bool count_include_pad) {
    return pool2d_params{pair2(op, "pool_size", size), pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation),
                         ceil_mode, count_include_pad};
  };
  add_kernel<abi::max_pool2d>(r, [=](tensor x, const shape_vector& size, const shape_vector& strides, const shape_vector& padding,
                                  const shape_vector& dilation, bool ceil_mode, tensor out) {
    max_pool2d(x, pool_params("max_pool2d", size, strides, padding, dilation, ceil_mode, false), out);
  });
  add_kernel<abi::avg_pool2d>(r, [=](tensor x, const shape_vector& size, const shape_vector& strides, const shape_vector& padding,
                                  const shape_vector& dilation, bool ceil_mode, bool count_include_pad, tensor out) {
    avg_pool2d(x, pool_params("avg_pool2d", size, strides, padding, dilation, ceil_mode, count_include_pad), out);
  });
  add_kernel<abi::adaptive_avg_pool2d>(r, [](tensor x, tensor out) { adaptive_avg_pool2d(x, out); });
  add_kernel<abi::global_avg_pool2d>(r, [](tensor x, tensor out) { global_avg_pool2d(x, out); });

  add_kernel<abi::copy>(r, [](tensor x, tensor out) { copy(x, out); });
  add_kernel<abi::broadcast_to>(r, [](tensor x, tensor out) { broadcast_to(x, out); });
  add_kernel<abi::reshape>(r, [](tensor x, tensor out) { reshape(x, out); });
  add_kernel<abi::reshape_view>(r, [](tensor x, const shape_vector& shape) { return reshape(x, shape); });
  add_kernel<abi::kv_cache_append>(r, [](tensor past, tensor x, std::int64_t axis, std::int64_t capacity) {
    return runtime::kv_cache_append(past, x, axis, capacity);
  });
  add_kernel<abi::permute_dims>(r, [](tensor x, const shape_vector& axes, tensor out) { permute_dims(x, axes, out); });
  // A tuple argument as tensors, or an error naming the field that is not one.
  auto tensors_of = [](std::string_view op, const char* what, const value& v) {
    if (!v.is_tuple()) fail(op, kiln::detail::concat(what, " must be a tuple of tensors, got ", vm::name(v.kind())));
    std::vector<tensor> ts;
    for (const value& f : v.as_tuple()) {
      if (!f.is_tensor()) fail(op, kiln::detail::concat("field ", ts.size(), " of ", what, " must be a tensor, got ", vm::name(f.kind())));
      ts.push_back(f.as_tensor());
    }
    return ts;
  };
  add_kernel<abi::concat>(r, [=](const value& xs, std::int64_t axis, tensor out) { concat(tensors_of("concat", "the inputs", xs), axis, out); });
  add_kernel<abi::split>(r, [=](tensor x, std::int64_t axis, const value& outs) { split(x, axis, tensors_of("split", "the outputs", outs)); });
  add_kernel<abi::strided_slice>(r, [](tensor x, const shape_vector& axes, const shape_vector& begin, const shape_vector& end,
                                    const shape_vector& strides, tensor out) { strided_slice(x, axes, begin, end, strides, out); });
  add_kernel<abi::take>(r, [=](tensor x, tensor indices, const value& axis, tensor out) { take(x, indices, optional_axis(axis), out); });
  add_kernel<abi::scatter_elements>(r, [](tensor x, tensor indices, tensor updates, std::int64_t axis, const std::string& reduction, tensor out) {
    scatter_elements(x, indices, updates, axis, parse_scatter_reduction("scatter_elements", reduction), out);
  });
  add_kernel<abi::topk>(r, [=](tensor x, std::int64_t k, std::int64_t axis, bool largest, bool sorted, const value& outs) {
    const auto o = tensors_of("topk", "the outputs", outs);
    if (o.size() != 2) fail("topk", kiln::detail::concat("needs two outputs (values, indices), got ", o.size()));
    topk(x, k, axis, largest, sorted, o[0], o[1]);
  });
  add_kernel<abi::gather_nd>(r, [](tensor x, tensor indices, std::int64_t batch_dims, tensor out) { gather_nd(x, indices, batch_dims, out); });
  add_kernel<abi::scatter_nd>(r, [](tensor x, tensor indices, tensor updates, const std::string& reduction, tensor out) {
    scatter_nd(x, indices, updates, parse_scatter_reduction("scatter_nd", reduction), out);
  });
  add_kernel<abi::gather_elements>(r, [](tensor x, tensor indices, std::int64_t axis, tensor out) { gather_elements(x, indices, axis, out); });
  add_kernel<abi::cumsum>(r, [=](tensor x, const value& axis, bool exclusive, bool reverse, tensor out) {
    cumsum(x, optional_axis(axis), exclusive, reverse, out);
  });
  add_kernel<abi::resize>(r, [](tensor x, const value& scales, const value& roi, const std::string& method, const std::string& coordinates,
                             const std::string& rounding, double cubic_alpha, bool exclude_outside, double extrapolation, tensor out) {
    constexpr std::string_view op = "resize";
    const auto reals = [&](const value& v, const char* what) {
      std::vector<double> r;
      if (v.is_null()) return r;
      const tensor t = v.as_tensor();
      if (t.type() != dtype::float64 || t.ndim() != 1)
        fail(op, kiln::detail::concat("the ", what, " must be a float64 vector, got ", describe_operand(t)));
      const tensor c = t.contiguous();
      const auto* p = static_cast<const double*>(c.data());
      r.assign(p, p + c.numel());
      return r;
    };
    resize_params p{parse_resize_method(op, method), parse_resize_coordinates(op, coordinates), parse_nearest_rounding(op, rounding), cubic_alpha,
                    exclude_outside, extrapolation, reals(scales, "scales"), reals(roi, "region of interest")};
    resize(x, p, out);
  });
  add_kernel<abi::pad>(r, [](tensor x, const shape_vector& widths, const std::string& mode, double value, tensor out) {
    pad(x, widths, parse_pad_mode(mode), value, out);
  });

  // Parsed descriptions, shared by every VM the registry serves.
  struct fused_cache {
    std::mutex mutex;
    std::unordered_map<std::string, fused_expr> parsed;
    fused_expr get(const std::string& text) {
      std::lock_guard lock(mutex);
      auto it = parsed.find(text);
      if (it == parsed.end()) it = parsed.emplace(text, fused_expr::parse(text)).first;
      return it->second;
    }
  };
  auto cache = std::make_shared<fused_cache>();
  // The tensors of `rest` (the epilogue's operands, then the output) for kernel `op`.
  auto operands_and_out = [](std::string_view op, call_args rest, std::size_t before) {
    if (rest.empty()) fail(op, "needs the output after the epilogue's description");
    std::vector<tensor> ts;
    for (std::size_t i = 0; i < rest.size(); ++i) {
      if (!rest[i].is_tensor()) fail(op, kiln::detail::concat("argument ", before + i, " must be a tensor, got ", vm::name(rest[i].kind())));
      ts.push_back(rest[i].as_tensor());
    }
    return ts;
  };
  add_kernel<abi::matmul_fused>(r, [cache, operands_and_out](tensor a, tensor b, bool ta, bool tb, const std::string& text, call_args rest) {
    std::vector<tensor> ts = operands_and_out("matmul_fused", rest, 5);
    const fused_expr e = cache->get(text);
    matmul_fused(a, b, e, std::span<const tensor>(ts.data(), ts.size() - 1), ts.back(), ta, tb);
  });
  add_kernel<abi::attention>(r, [cache, operands_and_out, optional_tensor](tensor q, tensor k, tensor v, bool tk, const std::string& pre, const std::string& post,
                                                       std::int64_t mask_mode, double fill, const value& mask, call_args rest) {
    constexpr std::string_view op = "attention";
    if (mask_mode < 0 || mask_mode > 2) fail(op, kiln::detail::concat("the mask mode must be 0 (none), 1 (keep where true) or 2 (keep where false), got ", mask_mode));
    if ((mask_mode == 0) != mask.is_null()) fail(op, mask_mode == 0 ? "a mask is given but the mask mode is 0 (none)" : "the mask mode needs a mask tensor");
    if (!mask.is_null() && !mask.is_tensor()) fail(op, kiln::detail::concat("the mask must be a tensor or null, got ", vm::name(mask.kind())));
    std::vector<tensor> ts = operands_and_out(op, rest, 9);
    const std::optional<fused_expr> pe = pre.empty() ? std::nullopt : std::optional(cache->get(pre));
    const std::optional<fused_expr> po = post.empty() ? std::nullopt : std::optional(cache->get(post));
    const attention_scores s{pe ? &*pe : nullptr, optional_tensor(mask), mask_mode != 2, fill, po ? &*po : nullptr};
    attention(q, k, v, tk, s, std::span<const tensor>(ts.data(), ts.size() - 1), ts.back());
  });
  add_kernel<abi::matmul_fused_prepacked>(r,
        [cache, operands_and_out](tensor a, tensor packed, bool ta, const shape_vector& layout, const std::string& text, call_args rest) {
          constexpr std::string_view op = "matmul_fused_prepacked";
          std::vector<tensor> ts = operands_and_out(op, rest, 5);
          const fused_expr e = cache->get(text);
          matmul_fused_prepacked(a, packed, packed_layout(op, layout), e, std::span<const tensor>(ts.data(), ts.size() - 1), ts.back(), ta);
        });
  add_kernel<abi::conv2d_fused>(r, [cache, operands_and_out, optional_tensor](tensor x, tensor w, const value& bias, const shape_vector& strides,
                                                          const shape_vector& padding, const shape_vector& dilation, std::int64_t groups,
                                                          const std::string& text, call_args rest) {
    constexpr std::string_view op = "conv2d_fused";
    std::vector<tensor> ts = operands_and_out(op, rest, 8);
    const conv2d_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation), groups};
    const fused_expr e = cache->get(text);
    conv2d_fused(x, w, optional_tensor(bias), p, e, std::span<const tensor>(ts.data(), ts.size() - 1), ts.back());
  });
  add_kernel<abi::conv2d_fused_prepacked>(r, [cache, operands_and_out, optional_tensor](tensor x, tensor packed, const value& bias, const shape_vector& layout,
                                                                   const shape_vector& strides, const shape_vector& padding,
                                                                   const shape_vector& dilation, const std::string& text, call_args rest) {
    constexpr std::string_view op = "conv2d_fused_prepacked";
    std::vector<tensor> ts = operands_and_out(op, rest, 8);
    const conv2d_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation), 1};
    const fused_expr e = cache->get(text);
    conv2d_fused_prepacked(x, packed, packed_conv_layout_of(op, layout), optional_tensor(bias), p, e,
                           std::span<const tensor>(ts.data(), ts.size() - 1), ts.back());
  });
  add_kernel<abi::conv2d_fused_winograd>(r, [cache, operands_and_out, optional_tensor](tensor x, tensor packed, const value& bias, const shape_vector& layout,
                                                                  const shape_vector& strides, const shape_vector& padding,
                                                                  const shape_vector& dilation, const std::string& text, call_args rest) {
    constexpr std::string_view op = "conv2d_fused_winograd";
    std::vector<tensor> ts = operands_and_out(op, rest, 8);
    const conv2d_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation), 1};
    const fused_expr e = cache->get(text);
    conv2d_fused_winograd(x, packed, winograd_conv_layout_of(op, layout), optional_tensor(bias), p, e,
                          std::span<const tensor>(ts.data(), ts.size() - 1), ts.back());
  });
  add_kernel<abi::conv2d_fused_pointwise>(r, [cache, operands_and_out, optional_tensor](tensor x, tensor packed, const value& bias, const shape_vector& layout,
                                                                   const shape_vector& strides, const shape_vector& padding,
                                                                   const shape_vector& dilation, const std::string& text, call_args rest) {
    constexpr std::string_view op = "conv2d_fused_pointwise";
    std::vector<tensor> ts = operands_and_out(op, rest, 8);
    const conv2d_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation), 1};
    const fused_expr e = cache->get(text);
    conv2d_fused_pointwise(x, packed, packed_layout(op, layout), optional_tensor(bias), p, e, std::span<const tensor>(ts.data(), ts.size() - 1),
                           ts.back());
  });
  add_kernel<abi::fused>(r, [cache](const std::string& text, call_args rest) {
    std::vector<tensor> inputs(rest.empty() ? 0 : rest.size() - 1);
    tensor out;
    fused_arguments(rest, inputs, out);
    cache->get(text).run(inputs, out);
  });
}

}  // namespace kiln::vm
