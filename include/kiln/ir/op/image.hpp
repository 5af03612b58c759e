// SPDX-License-Identifier: Apache-2.0
/// \file
/// Image operators: `image.resize`, interpolation along any axes (Relax's `image.resize2d`
/// generalised to every rank, with ONNX Resize's coordinate modes).
#pragma once

#include <kiln/ir/op/infer.hpp>

#include <cmath>

namespace kiln::ir::detail {

inline void require_one_of(const call_context& ctx, const char* attr_name, std::initializer_list<const char*> allowed) {
  const auto& v = ctx.attr<std::string>(attr_name);
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return;
    list += (list.empty() ? "\"" : ", \"") + std::string(a) + "\"";
  }
  ctx.fail("attribute '" + std::string(attr_name) + "' must be one of " + list + ", not \"" + v + "\"");
}

inline type infer_resize(const call_context& ctx) {
  auto& x = ctx.tensor(0);
  const int_array& size = ctx.attr<int_array>("size");
  require_one_of(ctx, "method", {"nearest", "linear", "cubic"});
  require_one_of(ctx, "coordinate_transformation_mode",
                 {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"});
  require_one_of(ctx, "rounding_method", {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
  for (auto s : size)
    if (s < 0) ctx.fail("attribute 'size' must not be negative, but has " + std::to_string(s));
  if (x.ndim >= 0 && static_cast<std::size_t>(x.ndim) != size.size())
    ctx.fail_arg(0, "has rank " + std::to_string(x.ndim) + ", but attribute 'size' gives " + std::to_string(size.size()) + " extents");
  if (is_known(x.dt) && ctx.attr<std::string>("method") != "nearest" && x.dt != dtype::float32 && x.dt != dtype::float64 &&
      x.dt != dtype::float16)
    ctx.fail_arg(0, "must be a floating-point tensor to interpolate, but its dtype is " + std::string(name(x.dt)));
  if (auto* s = ctx.attrs().find("scales")->get_if<float_array>()) {
    if (s->size() != size.size())
      ctx.fail("attribute 'scales' has " + std::to_string(s->size()) + " values for " + std::to_string(size.size()) + " axes");
    for (double v : *s)
      if (!(v > 0) || !std::isfinite(v)) ctx.fail("attribute 'scales' must be positive and finite");
  }
  if (ctx.attr<std::string>("coordinate_transformation_mode") == "tf_crop_and_resize") {
    auto* roi = ctx.attrs().find("roi")->get_if<float_array>();
    if (!roi || roi->size() != 2 * size.size())
      ctx.fail("tf_crop_and_resize needs attribute 'roi' with " + std::to_string(2 * size.size()) +
               " values (every axis' start, then every axis' end)");
  }
  std::vector<prim_expr> out;
  for (auto s : size) out.push_back(make_int(s));
  return tensor_type(std::move(out), x.dt);
}

inline void register_image_ops(op_registry& r) {
  r.add({"image.resize",
         {"data"},
         {{"size", attr_kind::ints, {}, true},
          {"scales", attr_kind::floats, {}, false, true},
          {"roi", attr_kind::floats, {}, false, true},
          {"method", attr_kind::string, "linear"},
          {"coordinate_transformation_mode", attr_kind::string, "half_pixel"},
          {"rounding_method", attr_kind::string, "round_prefer_floor"},
          {"cubic_alpha", attr_kind::floating, -0.75},
          {"cubic_exclude", attr_kind::boolean, false},
          {"extrapolation_value", attr_kind::floating, 0.0}},
         infer_resize, op_pattern::opaque,
         "resizes every axis to 'size' by nearest, linear or cubic interpolation; 'scales' (default size / extent) and the "
         "coordinate mode map output to input positions"});
}

}  // namespace kiln::ir::detail
