// SPDX-License-Identifier: Apache-2.0
/// \file
/// The kernels' definitions and their registration (`kernels/register.hpp`): included by it
/// (header-only), or by `<kiln/src.hpp>` in the one source file of a program built with
/// `KILN_SEPARATE_COMPILATION`. Everything here depends on the instruction set it is compiled for:
/// kiln's own kernel library compiles it once per level (`kernels/isa.hpp`). The process-wide
/// state the kernels use (their thread pool, the default allocator, the VM's global registry) is
/// compiled once, elsewhere (`<kiln/impl/runtime.ipp>`).
#pragma once

#include <kiln/kernels/register.hpp>

#include <kiln/kernels/attention.hpp>
#include <kiln/kernels/fused.hpp>
#include <kiln/kernels/isa.hpp>
#include <kiln/kernels/linalg.hpp>
#include <kiln/kernels/nn.hpp>
#include <kiln/kernels/reduce.hpp>
#include <kiln/kernels/resize.hpp>
#include <kiln/kernels/transform.hpp>
#include <kiln/runtime/kv_cache.hpp>

// The kernels' definitions: each header includes its own when kiln is header-only; with
// KILN_SEPARATE_COMPILATION they are compiled here, once, with the registration that calls them.
#include <kiln/kernels/impl/attention.ipp>
#include <kiln/kernels/impl/elementwise.ipp>
#include <kiln/kernels/impl/fused.ipp>
#include <kiln/kernels/impl/isa.ipp>
#include <kiln/kernels/impl/linalg.ipp>
#include <kiln/kernels/impl/nn.ipp>
#include <kiln/kernels/impl/reduce.ipp>
#include <kiln/kernels/impl/resize.ipp>
#include <kiln/kernels/impl/transform.ipp>

#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace kiln::kernels {

KILN_DECL void register_kernels(vm::function_registry& r) {
  using vm::call_args;
#define KILN_REGISTER_BINARY(op, driver, result_type) r.add("kernels." #op, [](tensor a, tensor b, tensor out) { op(a, b, out); });
  KILN_KERNELS_BINARY_OPERATORS(KILN_REGISTER_BINARY)
#undef KILN_REGISTER_BINARY
#define KILN_REGISTER_UNARY(op) r.add("kernels." #op, [](tensor x, tensor out) { op(x, out); });
  KILN_KERNELS_UNARY_OPERATORS(KILN_REGISTER_UNARY)
  KILN_REGISTER_UNARY(cast)
#undef KILN_REGISTER_UNARY
  r.add("kernels.clip", [](tensor x, double lo, double hi, tensor out) { clip(x, lo, hi, out); });
  r.add("kernels.where", [](tensor c, tensor x, tensor y, tensor out) { where(c, x, y, out); });

#define KILN_REGISTER_REDUCE(op)                                                                         \
  r.add("kernels." #op, [](tensor x, const shape_vector& axes, bool keepdims, tensor out) { op(x, axes, keepdims, out); });
  KILN_REGISTER_REDUCE(sum)
  KILN_REGISTER_REDUCE(mean)
  KILN_REGISTER_REDUCE(max)
  KILN_REGISTER_REDUCE(min)
  KILN_REGISTER_REDUCE(prod)
#undef KILN_REGISTER_REDUCE
  auto optional_axis = [](const vm::value& v) { return v.is_null() ? std::optional<std::int64_t>() : std::optional(v.as_int()); };
  r.add("kernels.argmax", [=](tensor x, const vm::value& axis, bool keepdims, tensor out) { argmax(x, optional_axis(axis), keepdims, out); });
  r.add("kernels.argmin", [=](tensor x, const vm::value& axis, bool keepdims, tensor out) { argmin(x, optional_axis(axis), keepdims, out); });
  r.add("kernels.softmax", [](tensor x, std::int64_t axis, tensor out) { softmax(x, axis, out); });
  r.add("kernels.log_softmax", [](tensor x, std::int64_t axis, tensor out) { log_softmax(x, axis, out); });
  r.add("kernels.layer_norm", [](tensor x, const vm::value& gamma, const vm::value& beta, const shape_vector& axes, double epsilon,
                                 bool center, bool scale, tensor out) {
    auto maybe = [](const vm::value& v) { return v.is_null() ? tensor() : v.as_tensor(); };
    layer_norm(x, maybe(gamma), maybe(beta), axes, epsilon, out, center, scale);
  });

  r.add("kernels.matmul", [](tensor a, tensor b, bool ta, bool tb, tensor out) { matmul(a, b, out, ta, tb); });
  r.add("kernels.matmul_prepacked", [](tensor a, tensor packed, bool ta, const shape_vector& layout, tensor out) {
    matmul_prepacked(a, packed, packed_layout("matmul_prepacked", layout), out, ta);
  });

  r.add("kernels.conv2d", [](tensor x, tensor w, const vm::value& bias, const shape_vector& strides, const shape_vector& padding,
                             const shape_vector& dilation, std::int64_t groups, tensor out) {
    constexpr std::string_view op = "conv2d";
    const conv2d_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation), groups};
    conv2d(x, w, bias.is_null() ? tensor() : bias.as_tensor(), p, out);
  });
  r.add("kernels.conv2d_prepacked", [](tensor x, tensor packed, const vm::value& bias, const shape_vector& layout, const shape_vector& strides,
                                       const shape_vector& padding, const shape_vector& dilation, tensor out) {
    constexpr std::string_view op = "conv2d_prepacked";
    const conv2d_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation), 1};
    conv2d_prepacked(x, packed, packed_conv_layout_of(op, layout), bias.is_null() ? tensor() : bias.as_tensor(), p, out);
  });
  r.add("kernels.conv2d_winograd", [](tensor x, tensor packed, const vm::value& bias, const shape_vector& layout, const shape_vector& strides,
                                      const shape_vector& padding, const shape_vector& dilation, tensor out) {
    constexpr std::string_view op = "conv2d_winograd";
    const conv2d_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation), 1};
    conv2d_winograd(x, packed, winograd_conv_layout_of(op, layout), bias.is_null() ? tensor() : bias.as_tensor(), p, out);
  });
  r.add("kernels.conv2d_transpose", [](tensor x, tensor w, const shape_vector& strides, const shape_vector& padding, const shape_vector& output_padding,
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
  r.add("kernels.max_pool2d", [=](tensor x, const shape_vector& size, const shape_vector& strides, const shape_vector& padding,
                                  const shape_vector& dilation, bool ceil_mode, tensor out) {
    max_pool2d(x, pool_params("max_pool2d", size, strides, padding, dilation, ceil_mode, false), out);
  });
  r.add("kernels.avg_pool2d", [=](tensor x, const shape_vector& size, const shape_vector& strides, const shape_vector& padding,
                                  const shape_vector& dilation, bool ceil_mode, bool count_include_pad, tensor out) {
    avg_pool2d(x, pool_params("avg_pool2d", size, strides, padding, dilation, ceil_mode, count_include_pad), out);
  });
  r.add("kernels.adaptive_avg_pool2d", [](tensor x, tensor out) { adaptive_avg_pool2d(x, out); });
  r.add("kernels.global_avg_pool2d", [](tensor x, tensor out) { global_avg_pool2d(x, out); });

  r.add("kernels.copy", [](tensor x, tensor out) { copy(x, out); });
  r.add("kernels.broadcast_to", [](tensor x, tensor out) { broadcast_to(x, out); });
  r.add("kernels.reshape", [](tensor x, tensor out) { reshape(x, out); });
  r.add("kernels.reshape_view", [](tensor x, const shape_vector& shape) { return reshape(x, shape); });
  r.add("kernels.kv_cache_append", [](tensor past, tensor x, std::int64_t axis, std::int64_t capacity) {
    return runtime::kv_cache_append(past, x, axis, capacity);
  });
  r.add("kernels.permute_dims", [](tensor x, const shape_vector& axes, tensor out) { permute_dims(x, axes, out); });
  // A tuple argument as tensors, or an error naming the field that is not one.
  auto tensors_of = [](std::string_view op, const char* what, const vm::value& v) {
    if (!v.is_tuple()) fail(op, kiln::detail::concat(what, " must be a tuple of tensors, got ", vm::name(v.kind())));
    std::vector<tensor> ts;
    for (const vm::value& f : v.as_tuple()) {
      if (!f.is_tensor()) fail(op, kiln::detail::concat("field ", ts.size(), " of ", what, " must be a tensor, got ", vm::name(f.kind())));
      ts.push_back(f.as_tensor());
    }
    return ts;
  };
  r.add("kernels.concat", [=](const vm::value& xs, std::int64_t axis, tensor out) { concat(tensors_of("concat", "the inputs", xs), axis, out); });
  r.add("kernels.split", [=](tensor x, std::int64_t axis, const vm::value& outs) { split(x, axis, tensors_of("split", "the outputs", outs)); });
  r.add("kernels.strided_slice", [](tensor x, const shape_vector& axes, const shape_vector& begin, const shape_vector& end,
                                    const shape_vector& strides, tensor out) { strided_slice(x, axes, begin, end, strides, out); });
  r.add("kernels.take", [=](tensor x, tensor indices, const vm::value& axis, tensor out) { take(x, indices, optional_axis(axis), out); });
  r.add("kernels.scatter_elements", [](tensor x, tensor indices, tensor updates, std::int64_t axis, const std::string& reduction, tensor out) {
    scatter_elements(x, indices, updates, axis, parse_scatter_reduction("scatter_elements", reduction), out);
  });
  r.add("kernels.topk", [=](tensor x, std::int64_t k, std::int64_t axis, bool largest, bool sorted, const vm::value& outs) {
    const auto o = tensors_of("topk", "the outputs", outs);
    if (o.size() != 2) fail("topk", kiln::detail::concat("needs two outputs (values, indices), got ", o.size()));
    topk(x, k, axis, largest, sorted, o[0], o[1]);
  });
  r.add("kernels.gather_nd", [](tensor x, tensor indices, std::int64_t batch_dims, tensor out) { gather_nd(x, indices, batch_dims, out); });
  r.add("kernels.scatter_nd", [](tensor x, tensor indices, tensor updates, const std::string& reduction, tensor out) {
    scatter_nd(x, indices, updates, parse_scatter_reduction("scatter_nd", reduction), out);
  });
  r.add("kernels.gather_elements", [](tensor x, tensor indices, std::int64_t axis, tensor out) { gather_elements(x, indices, axis, out); });
  r.add("kernels.cumsum", [=](tensor x, const vm::value& axis, bool exclusive, bool reverse, tensor out) {
    cumsum(x, optional_axis(axis), exclusive, reverse, out);
  });
  r.add("kernels.resize", [](tensor x, const vm::value& scales, const vm::value& roi, const std::string& method, const std::string& coordinates,
                             const std::string& rounding, double cubic_alpha, bool exclude_outside, double extrapolation, tensor out) {
    constexpr std::string_view op = "resize";
    const auto reals = [&](const vm::value& v, const char* what) {
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
  r.add("kernels.pad", [](tensor x, const shape_vector& widths, const std::string& mode, double value, tensor out) {
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
  r.add("kernels.matmul_fused", [cache, operands_and_out](tensor a, tensor b, bool ta, bool tb, const std::string& text, call_args rest) {
    std::vector<tensor> ts = operands_and_out("matmul_fused", rest, 5);
    const fused_expr e = cache->get(text);
    matmul_fused(a, b, e, std::span<const tensor>(ts.data(), ts.size() - 1), ts.back(), ta, tb);
  });
  r.add("kernels.attention", [cache, operands_and_out](tensor q, tensor k, tensor v, bool tk, const std::string& pre, const std::string& post,
                                                       std::int64_t mask_mode, double fill, const vm::value& mask, call_args rest) {
    constexpr std::string_view op = "attention";
    if (mask_mode < 0 || mask_mode > 2) fail(op, kiln::detail::concat("the mask mode must be 0 (none), 1 (keep where true) or 2 (keep where false), got ", mask_mode));
    if ((mask_mode == 0) != mask.is_null()) fail(op, mask_mode == 0 ? "a mask is given but the mask mode is 0 (none)" : "the mask mode needs a mask tensor");
    if (!mask.is_null() && !mask.is_tensor()) fail(op, kiln::detail::concat("the mask must be a tensor or null, got ", vm::name(mask.kind())));
    std::vector<tensor> ts = operands_and_out(op, rest, 9);
    const std::optional<fused_expr> pe = pre.empty() ? std::nullopt : std::optional(cache->get(pre));
    const std::optional<fused_expr> po = post.empty() ? std::nullopt : std::optional(cache->get(post));
    const attention_scores s{pe ? &*pe : nullptr, mask.is_null() ? tensor() : mask.as_tensor(), mask_mode != 2, fill, po ? &*po : nullptr};
    attention(q, k, v, tk, s, std::span<const tensor>(ts.data(), ts.size() - 1), ts.back());
  });
  r.add("kernels.matmul_fused_prepacked",
        [cache, operands_and_out](tensor a, tensor packed, bool ta, const shape_vector& layout, const std::string& text, call_args rest) {
          constexpr std::string_view op = "matmul_fused_prepacked";
          std::vector<tensor> ts = operands_and_out(op, rest, 5);
          const fused_expr e = cache->get(text);
          matmul_fused_prepacked(a, packed, packed_layout(op, layout), e, std::span<const tensor>(ts.data(), ts.size() - 1), ts.back(), ta);
        });
  r.add("kernels.conv2d_fused", [cache, operands_and_out](tensor x, tensor w, const vm::value& bias, const shape_vector& strides,
                                                          const shape_vector& padding, const shape_vector& dilation, std::int64_t groups,
                                                          const std::string& text, call_args rest) {
    constexpr std::string_view op = "conv2d_fused";
    std::vector<tensor> ts = operands_and_out(op, rest, 8);
    const conv2d_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation), groups};
    const fused_expr e = cache->get(text);
    conv2d_fused(x, w, bias.is_null() ? tensor() : bias.as_tensor(), p, e, std::span<const tensor>(ts.data(), ts.size() - 1), ts.back());
  });
  r.add("kernels.conv2d_fused_prepacked", [cache, operands_and_out](tensor x, tensor packed, const vm::value& bias, const shape_vector& layout,
                                                                   const shape_vector& strides, const shape_vector& padding,
                                                                   const shape_vector& dilation, const std::string& text, call_args rest) {
    constexpr std::string_view op = "conv2d_fused_prepacked";
    std::vector<tensor> ts = operands_and_out(op, rest, 8);
    const conv2d_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation), 1};
    const fused_expr e = cache->get(text);
    conv2d_fused_prepacked(x, packed, packed_conv_layout_of(op, layout), bias.is_null() ? tensor() : bias.as_tensor(), p, e,
                           std::span<const tensor>(ts.data(), ts.size() - 1), ts.back());
  });
  r.add("kernels.conv2d_fused_winograd", [cache, operands_and_out](tensor x, tensor packed, const vm::value& bias, const shape_vector& layout,
                                                                  const shape_vector& strides, const shape_vector& padding,
                                                                  const shape_vector& dilation, const std::string& text, call_args rest) {
    constexpr std::string_view op = "conv2d_fused_winograd";
    std::vector<tensor> ts = operands_and_out(op, rest, 8);
    const conv2d_params p{pair2(op, "strides", strides), padding4(op, padding), pair2(op, "dilation", dilation), 1};
    const fused_expr e = cache->get(text);
    conv2d_fused_winograd(x, packed, winograd_conv_layout_of(op, layout), bias.is_null() ? tensor() : bias.as_tensor(), p, e,
                          std::span<const tensor>(ts.data(), ts.size() - 1), ts.back());
  });
  r.add("kernels.fused", [cache](const std::string& text, call_args rest) {
    std::vector<tensor> inputs(rest.empty() ? 0 : rest.size() - 1);
    tensor out;
    fused_arguments(rest, inputs, out);
    cache->get(text).run(inputs, out);
  });
}

}  // namespace kiln::kernels
