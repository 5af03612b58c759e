// SPDX-License-Identifier: Apache-2.0
// The definitions of <kiln/kernels/transform.hpp>'s functions. Included by that header, or, with
// KILN_SEPARATE_COMPILATION, once by <kiln/kernels/impl/definitions.ipp>, where the kernels are compiled.
#pragma once

#include <kiln/kernels/transform.hpp>

namespace kiln::kernels::detail {

KILN_DECL void copy_unchecked(const tensor& src, const tensor& out) {
  if (out.numel() == 0) return;
  const loop_plan<2> plan({&out, &src});
  visit_item(out.type(), [&]<class U>(type_tag<U>) { copy_plan<U>(plan); });
}

KILN_DECL void check_same_dtype(std::string_view op, const tensor& x, const tensor& out) {
  if (!x.defined() || !out.defined()) fail(op, "an operand is undefined");
  if (x.type() != out.type())
    fail(op, kiln::detail::concat("the output ", describe_operand(out), " must have the input's dtype ", name(x.type())));
}

KILN_DECL void check_disjoint(std::string_view op, const tensor& x, const tensor& out) {
  if (overlaps(out, x))
    fail(op, kiln::detail::concat("the output ", describe_operand(out), " overlaps the input ", describe_operand(x),
                                  "; write into a separate tensor"));
}

KILN_DECL void checked_copy(std::string_view op, const tensor& x, const tensor& out) {
  check_same_dtype(op, x, out);
  check_broadcasts_to(op, x, out.shape());
  check_disjoint(op, x, out);
  copy_unchecked(x, out);
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void copy(const tensor& x, const tensor& out) { detail::checked_copy("copy", x, out); }

KILN_DECL void broadcast_to(const tensor& x, const tensor& out) { detail::checked_copy("broadcast_to", x, out); }

KILN_DECL tensor broadcast_to(const tensor& x, std::span<const std::int64_t> shape) {
  if (!x.defined()) fail("broadcast_to", "the input is undefined");
  detail::check_broadcasts_to("broadcast_to", x, shape);
  tensor out = new_output(shape_vector(shape.begin(), shape.end()), x.type());
  detail::copy_unchecked(x, out);
  return out;
}

KILN_DECL tensor broadcast_to(const tensor& x, std::initializer_list<std::int64_t> shape) {
  return broadcast_to(x, std::span<const std::int64_t>(shape.begin(), shape.size()));
}

KILN_DECL tensor broadcast_view(const tensor& x, std::span<const std::int64_t> shape) {
  if (!x.defined()) fail("broadcast_to", "the input is undefined");
  detail::check_broadcasts_to("broadcast_to", x, shape);
  shape_vector strides(shape.size(), 0);
  const std::size_t shift = shape.size() - x.ndim();
  for (std::size_t i = 0; i < x.ndim(); ++i)
    if (x.shape(i) != 1) strides[shift + i] = x.strides()[i];
  return tensor::from_storage(x.data_storage(), x.byte_offset(), x.type(), shape_vector(shape.begin(), shape.end()), std::move(strides));
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL shape_vector resolve_shape(std::string_view op, const tensor& x, std::span<const std::int64_t> spec) {
  shape_vector s(spec.begin(), spec.end());
  std::int64_t known = 1;
  std::optional<std::size_t> infer;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1 && !infer) infer = i;
    else if (s[i] < 0)
      fail(op, kiln::detail::concat("bad target shape ", runtime::shape_to_string(spec), " (one -1 and no other negative dimension)"));
    else if (__builtin_mul_overflow(known, s[i], &known))
      fail(op, kiln::detail::concat("the target shape ", runtime::shape_to_string(spec), " has more than 2^63 elements"));
  }
  const std::int64_t n = x.numel();
  if (infer) {
    if (known == 0 || n % known != 0)
      fail(op, kiln::detail::concat("cannot reshape ", describe_operand(x), " to ", runtime::shape_to_string(spec),
                                    ": no size for -1 gives ", n, " elements"));
    s[*infer] = n / known;
  } else if (known != n) {
    fail(op, kiln::detail::concat("cannot reshape ", describe_operand(x), " (", n, " elements) to ", runtime::shape_to_string(spec), " (",
                                  known, " elements)"));
  }
  return s;
}

KILN_DECL std::optional<shape_vector> view_strides(const tensor& x, const shape_vector& shape) {
  dims os, ost;  // x without its size-1 dimensions
  for (std::size_t i = 0; i < x.ndim(); ++i)
    if (x.shape(i) != 1) os.push_back(x.shape(i)), ost.push_back(x.strides()[i]);
  shape_vector st(shape.size(), 0);
  if (x.numel() == 0) return runtime::contiguous_strides(shape);
  std::size_t oi = 0, ni = 0;
  while (ni < shape.size() || oi < os.size()) {
    // Skip the new shape's unit dimensions (any stride will do).
    if (ni < shape.size() && shape[ni] == 1) {
      st[ni++] = 1;
      continue;
    }
    if (oi == os.size() || ni == shape.size()) return std::nullopt;
    const std::size_t o0 = oi, n0 = ni;
    std::int64_t op = os[oi++], np = shape[ni++];
    while (op != np) {
      if (op < np) op *= os[oi++];
      else np *= shape[ni++];
    }
    for (std::size_t k = o0; k + 1 < oi; ++k)
      if (ost[k] != ost[k + 1] * os[k + 1]) return std::nullopt;
    // The group's new dimensions step through it row-major from its innermost stride.
    std::int64_t step = ost[oi - 1];
    for (std::size_t k = ni; k-- > n0;) {
      st[k] = step;
      step *= shape[k];
    }
  }
  return st;
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL tensor reshape(const tensor& x, std::span<const std::int64_t> shape) {
  constexpr std::string_view op = "reshape";
  if (!x.defined()) fail(op, "the input is undefined");
  shape_vector s = detail::resolve_shape(op, x, shape);
  if (auto st = detail::view_strides(x, s)) return tensor::from_storage(x.data_storage(), x.byte_offset(), x.type(), std::move(s), std::move(*st));
  tensor out = new_output(std::move(s), x.type());
  const tensor in = tensor::from_storage(out.data_storage(), 0, out.type(), x.shape());  // out, seen with x's shape
  detail::copy_unchecked(x, in);
  return out;
}

KILN_DECL tensor reshape(const tensor& x, std::initializer_list<std::int64_t> shape) {
  return reshape(x, std::span<const std::int64_t>(shape.begin(), shape.size()));
}

KILN_DECL void reshape(const tensor& x, const tensor& out) {
  constexpr std::string_view op = "reshape";
  detail::check_same_dtype(op, x, out);
  if (x.numel() != out.numel())
    fail(op, kiln::detail::concat("cannot reshape ", describe_operand(x), " into ", describe_operand(out), ": the element counts differ"));
  detail::check_disjoint(op, x, out);
  if (x.shape() == out.shape()) return detail::copy_unchecked(x, out);
  // Whichever side can be viewed with the other's shape; else through a contiguous copy.
  if (auto st = detail::view_strides(out, x.shape()))
    return detail::copy_unchecked(x, tensor::from_storage(out.data_storage(), out.byte_offset(), out.type(), x.shape(), std::move(*st)));
  const tensor flat = reshape(x, out.shape());
  detail::copy_unchecked(flat, out);
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL shape_vector permutation(std::string_view op, const tensor& x, std::span<const std::int64_t> axes) {
  const std::size_t r = x.ndim();
  shape_vector perm(r);
  if (axes.empty()) {
    for (std::size_t i = 0; i < r; ++i) perm[i] = std::int64_t(r - 1 - i);
    return perm;
  }
  if (axes.size() != r)
    fail(op, kiln::detail::concat("axes ", runtime::shape_to_string(axes), " must list each of the ", r, " axes of ", describe_operand(x), " once"));
  std::vector<bool> seen(r, false);
  for (std::size_t i = 0; i < r; ++i) {
    const std::size_t a = normalize_axis(op, axes[i], r);
    if (seen[a]) fail(op, kiln::detail::concat("axes ", runtime::shape_to_string(axes), " name axis ", a, " twice"));
    seen[a] = true;
    perm[i] = std::int64_t(a);
  }
  return perm;
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void permute_dims(const tensor& x, std::span<const std::int64_t> axes, const tensor& out) {
  constexpr std::string_view op = "permute_dims";
  detail::check_same_dtype(op, x, out);
  const tensor v = x.permute(detail::permutation(op, x, axes));
  check_output(op, out, x.type(), v.shape());
  detail::check_disjoint(op, x, out);
  detail::copy_unchecked(v, out);
}

KILN_DECL tensor permute_dims(const tensor& x, std::span<const std::int64_t> axes) {
  constexpr std::string_view op = "permute_dims";
  if (!x.defined()) fail(op, "the input is undefined");
  const tensor v = x.permute(detail::permutation(op, x, axes));
  tensor out = new_output(v.shape(), x.type());
  detail::copy_unchecked(v, out);
  return out;
}

KILN_DECL void permute_dims(const tensor& x, std::initializer_list<std::int64_t> axes, const tensor& out) {
  permute_dims(x, std::span<const std::int64_t>(axes.begin(), axes.size()), out);
}

KILN_DECL tensor permute_dims(const tensor& x, std::initializer_list<std::int64_t> axes) {
  return permute_dims(x, std::span<const std::int64_t>(axes.begin(), axes.size()));
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL shape_vector concat_shape(std::string_view op, std::span<const tensor> xs, std::int64_t axis, std::size_t& a) {
  if (xs.empty()) fail(op, "needs at least one tensor");
  for (std::size_t i = 0; i < xs.size(); ++i)
    if (!xs[i].defined()) fail(op, kiln::detail::concat("input ", i, " is undefined"));
  const tensor& x0 = xs[0];
  if (x0.ndim() == 0) fail(op, "cannot concatenate scalars");
  a = normalize_axis(op, axis, x0.ndim());
  shape_vector s = x0.shape();
  for (std::size_t i = 1; i < xs.size(); ++i) {
    const tensor& x = xs[i];
    bool same = x.type() == x0.type() && x.ndim() == x0.ndim();
    for (std::size_t k = 0; same && k < x.ndim(); ++k) same = k == a || x.shape(k) == x0.shape(k);
    if (!same)
      fail(op, kiln::detail::concat("input ", i, " is ", describe_operand(x), " and input 0 is ", describe_operand(x0),
                                    "; they must have the same dtype and shape except along axis ", a));
    s[a] += x.shape(a);
  }
  return s;
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void concat(std::span<const tensor> xs, std::int64_t axis, const tensor& out) {
  constexpr std::string_view op = "concat";
  std::size_t a = 0;
  const shape_vector s = detail::concat_shape(op, xs, axis, a);
  check_output(op, out, xs[0].type(), s);
  for (const tensor& x : xs) detail::check_disjoint(op, x, out);
  std::int64_t at = 0;
  for (const tensor& x : xs) {
    detail::copy_unchecked(x, out.slice(a, at, at + x.shape(a)));
    at += x.shape(a);
  }
}

KILN_DECL tensor concat(std::span<const tensor> xs, std::int64_t axis) {
  std::size_t a = 0;
  shape_vector shape = detail::concat_shape("concat", xs, axis, a);  // checks xs before xs[0] is read
  tensor out = new_output(std::move(shape), xs[0].type());
  concat(xs, axis, out);
  return out;
}

KILN_DECL void concat(std::initializer_list<tensor> xs, std::int64_t axis, const tensor& out) {
  concat(std::span<const tensor>(xs.begin(), xs.size()), axis, out);
}

KILN_DECL tensor concat(std::initializer_list<tensor> xs, std::int64_t axis) {
  return concat(std::span<const tensor>(xs.begin(), xs.size()), axis);
}

KILN_DECL void split(const tensor& x, std::int64_t axis, std::span<const tensor> outs) {
  constexpr std::string_view op = "split";
  if (!x.defined()) fail(op, "the input is undefined");
  if (x.ndim() == 0) fail(op, "cannot split a scalar");
  const std::size_t a = detail::normalize_axis(op, axis, x.ndim());
  std::int64_t total = 0;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    const tensor& o = outs[i];
    bool ok = o.defined() && o.type() == x.type() && o.ndim() == x.ndim();
    for (std::size_t k = 0; ok && k < x.ndim(); ++k) ok = k == a || o.shape(k) == x.shape(k);
    if (!ok)
      fail(op, kiln::detail::concat("output ", i, " is ", describe_operand(o), "; it must have the dtype and shape of ", describe_operand(x),
                                    " except along axis ", a));
    detail::check_disjoint(op, x, o);
    total += o.shape(a);
  }
  if (total != x.shape(a))
    fail(op, kiln::detail::concat("the outputs take ", total, " positions of axis ", a, " but ", describe_operand(x), " has ", x.shape(a)));
  std::int64_t at = 0;
  for (const tensor& o : outs) {
    detail::copy_unchecked(x.slice(a, at, at + o.shape(a)), o);
    at += o.shape(a);
  }
}

KILN_DECL std::vector<tensor> split(const tensor& x, std::span<const std::int64_t> indices, std::int64_t axis) {
  constexpr std::string_view op = "split";
  if (!x.defined()) fail(op, "the input is undefined");
  if (x.ndim() == 0) fail(op, "cannot split a scalar");
  const std::size_t a = detail::normalize_axis(op, axis, x.ndim());
  std::vector<tensor> outs;
  std::int64_t prev = 0;
  for (std::size_t i = 0; i <= indices.size(); ++i) {
    const std::int64_t at = i < indices.size() ? indices[i] : x.shape(a);
    if (at < prev || at > x.shape(a))
      fail(op, kiln::detail::concat("split indices ", runtime::shape_to_string(indices), " must be non-decreasing and at most ", x.shape(a),
                                    " (axis ", a, " of ", describe_operand(x), ")"));
    shape_vector s = x.shape();
    s[a] = at - prev;
    outs.push_back(new_output(std::move(s), x.type()));
    prev = at;
  }
  split(x, axis, outs);
  return outs;
}

KILN_DECL std::vector<tensor> split(const tensor& x, std::initializer_list<std::int64_t> indices, std::int64_t axis) {
  return split(x, std::span<const std::int64_t>(indices.begin(), indices.size()), axis);
}

KILN_DECL std::vector<tensor> split(const tensor& x, std::int64_t sections, std::int64_t axis) {
  constexpr std::string_view op = "split";
  if (!x.defined()) fail(op, "the input is undefined");
  if (x.ndim() == 0) fail(op, "cannot split a scalar");
  const std::size_t a = detail::normalize_axis(op, axis, x.ndim());
  if (sections <= 0 || x.shape(a) % sections != 0)
    fail(op, kiln::detail::concat("cannot split axis ", a, " of ", describe_operand(x), " into ", sections, " equal sections"));
  shape_vector at;
  for (std::int64_t i = 1; i < sections; ++i) at.push_back(i * (x.shape(a) / sections));
  return split(x, std::span<const std::int64_t>(at), axis);
}

KILN_DECL tensor strided_slice_view(const tensor& x, std::span<const std::int64_t> axes, std::span<const std::int64_t> begin,
                                    std::span<const std::int64_t> end, std::span<const std::int64_t> strides) {
  constexpr std::string_view op = "strided_slice";
  if (!x.defined()) fail(op, "the input is undefined");
  if (begin.size() != axes.size() || end.size() != axes.size() || (!strides.empty() && strides.size() != axes.size()))
    fail(op, kiln::detail::concat("axes, begin, end and strides must have the same length, got ", axes.size(), ", ", begin.size(), ", ",
                                  end.size(), " and ", strides.size()));
  shape_vector shape = x.shape(), st = x.strides();
  std::int64_t offset = 0;  // in elements
  std::vector<bool> seen(x.ndim(), false);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const std::size_t a = detail::normalize_axis(op, axes[i], x.ndim());
    if (seen[a]) fail(op, kiln::detail::concat("axis ", a, " is sliced twice"));
    seen[a] = true;
    const std::int64_t s = strides.empty() ? 1 : strides[i], n = x.shape(a);
    if (s == 0) fail(op, kiln::detail::concat("the stride of axis ", a, " is 0"));
    auto clamp = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) { return std::clamp(v < 0 ? v + n : v, lo, hi); };
    const std::int64_t b = s > 0 ? clamp(begin[i], 0, n) : clamp(begin[i], -1, n - 1);
    const std::int64_t e = s > 0 ? clamp(end[i], 0, n) : clamp(end[i], -1, n - 1);
    const std::int64_t len = s > 0 ? (e > b ? (e - b + s - 1) / s : 0) : (b > e ? (b - e - s - 1) / -s : 0);
    shape[a] = len;
    if (len > 0) offset += b * x.strides()[a];
    st[a] = x.strides()[a] * s;
  }
  const auto byte_offset = std::int64_t(x.byte_offset()) + offset * std::int64_t(size_of(x.type()));
  return tensor::from_storage(x.data_storage(), std::size_t(byte_offset), x.type(), std::move(shape), std::move(st));
}

KILN_DECL void strided_slice(const tensor& x, std::span<const std::int64_t> axes, std::span<const std::int64_t> begin,
                             std::span<const std::int64_t> end, std::span<const std::int64_t> strides, const tensor& out) {
  constexpr std::string_view op = "strided_slice";
  const tensor v = strided_slice_view(x, axes, begin, end, strides);
  check_output(op, out, x.type(), v.shape());
  detail::check_disjoint(op, x, out);
  detail::copy_unchecked(v, out);
}

KILN_DECL tensor strided_slice(const tensor& x, std::span<const std::int64_t> axes, std::span<const std::int64_t> begin,
                               std::span<const std::int64_t> end, std::span<const std::int64_t> strides) {
  return strided_slice_view(x, axes, begin, end, strides).clone();
}

KILN_DECL tensor strided_slice(const tensor& x, std::initializer_list<std::int64_t> axes, std::initializer_list<std::int64_t> begin,
                               std::initializer_list<std::int64_t> end, std::initializer_list<std::int64_t> strides) {
  auto sp = [](std::initializer_list<std::int64_t> l) { return std::span<const std::int64_t>(l.begin(), l.size()); };
  return strided_slice(x, sp(axes), sp(begin), sp(end), sp(strides));
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL shape_vector take_shape(std::string_view op, const tensor& x, const tensor& indices, std::optional<std::int64_t> axis, std::size_t& a) {
  if (!x.defined() || !indices.defined()) fail(op, "an operand is undefined");
  if (indices.type() != dtype::int32 && indices.type() != dtype::int64)
    fail(op, kiln::detail::concat("the indices must be int32 or int64, got ", describe_operand(indices)));
  if (!axis) {
    a = 0;
    return indices.shape();
  }
  if (x.ndim() == 0) fail(op, "cannot take along an axis of a scalar");
  a = normalize_axis(op, *axis, x.ndim());
  shape_vector s(x.shape().begin(), x.shape().begin() + std::ptrdiff_t(a));
  s.insert(s.end(), indices.shape().begin(), indices.shape().end());
  s.insert(s.end(), x.shape().begin() + std::ptrdiff_t(a) + 1, x.shape().end());
  return s;
}

KILN_DECL std::vector<std::int64_t> checked_indices(std::string_view op, const tensor& indices, std::int64_t n, std::size_t axis) {
  std::vector<std::int64_t> out;
  out.reserve(std::size_t(indices.numel()));
  auto add = [&](std::int64_t i) {
    const std::int64_t k = i < 0 ? i + n : i;
    if (k < 0 || k >= n)
      fail(op, kiln::detail::concat("index ", i, " (element ", out.size(), " of the indices) is out of range for axis ", axis, " of extent ", n));
    out.push_back(k);
  };
  if (indices.type() == dtype::int32)
    for (auto i : indices.to_vector<std::int32_t>()) add(i);
  else
    for (auto i : indices.to_vector<std::int64_t>()) add(i);
  return out;
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void take(const tensor& x, const tensor& indices, std::optional<std::int64_t> axis, const tensor& out) {
  constexpr std::string_view op = "take";
  std::size_t a = 0;
  const shape_vector s = detail::take_shape(op, x, indices, axis, a);
  check_output(op, out, x.type(), s);
  detail::check_disjoint(op, x, out);
  detail::check_disjoint(op, indices, out);
  const tensor src = axis ? x.contiguous() : x.contiguous().view({x.numel()});
  const std::vector<std::int64_t> idx = detail::checked_indices(op, indices, src.shape(a), a);
  // src as [outer, extent, inner]; the result as [outer, count, inner], contiguous.
  std::int64_t outer = 1, inner = 1;
  for (std::size_t i = 0; i < a; ++i) outer *= src.shape(i);
  for (std::size_t i = a + 1; i < src.ndim(); ++i) inner *= src.shape(i);
  const bool direct = out.is_contiguous();
  const tensor dst = direct ? out : new_output(out.shape(), out.type());
  const std::size_t block = std::size_t(inner) * size_of(x.type());
  const auto* from = static_cast<const char*>(src.data());
  auto* to = static_cast<char*>(dst.data());
  const std::int64_t extent = src.shape(a), count = std::int64_t(idx.size());
  if (block != 0)
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t j = 0; j < count; ++j)
        std::memcpy(to + std::size_t(o * count + j) * block, from + std::size_t(o * extent + idx[std::size_t(j)]) * block, block);
  if (!direct) detail::copy_unchecked(dst, out);
}

KILN_DECL tensor take(const tensor& x, const tensor& indices, std::optional<std::int64_t> axis) {
  std::size_t a = 0;
  shape_vector shape = detail::take_shape("take", x, indices, axis, a);  // checks x before x.type() is read
  tensor out = new_output(std::move(shape), x.type());
  take(x, indices, axis, out);
  return out;
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL std::size_t gather_elements_axis(std::string_view op, const tensor& x, const tensor& indices, std::int64_t axis) {
  if (!x.defined() || !indices.defined()) fail(op, "an operand is undefined");
  if (indices.type() != dtype::int32 && indices.type() != dtype::int64)
    fail(op, kiln::detail::concat("the indices must be int32 or int64, got ", describe_operand(indices)));
  if (x.ndim() == 0) fail(op, "cannot gather along an axis of a scalar");
  if (indices.ndim() != x.ndim())
    fail(op, kiln::detail::concat("the indices ", describe_operand(indices), " must have the rank of x ", describe_operand(x)));
  const std::size_t a = normalize_axis(op, axis, x.ndim());
  for (std::size_t d = 0; d < x.ndim(); ++d)
    if (d != a && indices.shape(d) > x.shape(d))
      fail(op, kiln::detail::concat("the indices ", describe_operand(indices), " are longer than x ", describe_operand(x), " along axis ", d));
  return a;
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void gather_elements(const tensor& x, const tensor& indices, std::int64_t axis, const tensor& out) {
  constexpr std::string_view op = "gather_elements";
  const std::size_t a = detail::gather_elements_axis(op, x, indices, axis);
  check_output(op, out, x.type(), indices.shape());
  detail::check_disjoint(op, x, out);
  detail::check_disjoint(op, indices, out);
  const std::vector<std::int64_t> idx = detail::checked_indices(op, indices, x.shape(a), a);  // row-major over the indices
  const std::size_t item = size_of(x.type());
  dims x_strides(x.strides().begin(), x.strides().end()), out_strides(out.strides().begin(), out.strides().end());
  const std::int64_t along = x_strides[a];
  x_strides[a] = 0;  // the index along the axis comes from `indices`
  const auto* from = static_cast<const char*>(x.data());
  auto* to = static_cast<char*>(out.data());
  std::size_t t = 0;
  for_each_offsets<2>(std::span<const std::int64_t>(indices.shape().data(), indices.ndim()), {x_strides.data(), out_strides.data()},
                      [&](const std::array<std::int64_t, 2>& off) {
                        std::memcpy(to + std::size_t(off[1]) * item, from + std::size_t(off[0] + idx[t++] * along) * item, item);
                      });
}

KILN_DECL tensor gather_elements(const tensor& x, const tensor& indices, std::int64_t axis) {
  detail::gather_elements_axis("gather_elements", x, indices, axis);
  tensor out = new_output(indices.shape(), x.type());
  gather_elements(x, indices, axis, out);
  return out;
}

KILN_DECL scatter_reduction parse_scatter_reduction(std::string_view op, std::string_view s) {
  if (s == "update") return scatter_reduction::update;
  if (s == "add") return scatter_reduction::add;
  if (s == "mul") return scatter_reduction::mul;
  if (s == "max") return scatter_reduction::max;
  if (s == "min") return scatter_reduction::min;
  fail(op, kiln::detail::concat("the reduction must be 'update', 'add', 'mul', 'max' or 'min', not '", s, "'"));
}

KILN_DECL void scatter_elements(const tensor& x, const tensor& indices, const tensor& updates, std::int64_t axis, scatter_reduction reduction,
                                const tensor& out) {
  constexpr std::string_view op = "scatter_elements";
  const std::size_t a = detail::gather_elements_axis(op, x, indices, axis);
  if (!updates.defined()) fail(op, "an operand is undefined");
  if (updates.shape() != indices.shape() || updates.type() != x.type())
    fail(op, kiln::detail::concat("the updates must be ", name(x.type()), runtime::shape_to_string(indices.shape()),
                                  " (x's dtype, the indices' shape), got ", describe_operand(updates)));
  if (reduction != scatter_reduction::update && !ops::is_numeric(x.type()))
    fail(op, kiln::detail::concat("cannot combine ", name(x.type()), " elements; only 'update' takes them"));
  check_output(op, out, x.type(), x.shape());
  detail::check_disjoint(op, x, out);
  detail::check_disjoint(op, indices, out);
  detail::check_disjoint(op, updates, out);
  const std::vector<std::int64_t> idx = detail::checked_indices(op, indices, x.shape(a), a);
  detail::copy_unchecked(x, out);
  dims out_strides(out.strides().begin(), out.strides().end());
  const dims upd_strides(updates.strides().begin(), updates.strides().end());
  const std::int64_t along = out_strides[a];
  out_strides[a] = 0;
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    T* o = static_cast<T*>(out.data());
    const T* u = static_cast<const T*>(updates.data());
    std::size_t t = 0;
    for_each_offsets<2>(std::span<const std::int64_t>(indices.shape().data(), indices.ndim()), {out_strides.data(), upd_strides.data()},
                        [&](const std::array<std::int64_t, 2>& off) {
                          T& dst = o[off[0] + idx[t++] * along];
                          const T v = u[off[1]];
                          switch (reduction) {
                            case scatter_reduction::update: dst = v; break;
                            case scatter_reduction::add: dst = ops::add{}(dst, v); break;
                            case scatter_reduction::mul: dst = ops::multiply{}(dst, v); break;
                            case scatter_reduction::max: dst = ops::maximum{}(dst, v); break;
                            case scatter_reduction::min: dst = ops::minimum{}(dst, v); break;
                          }
                        });
  });
}

KILN_DECL tensor scatter_elements(const tensor& x, const tensor& indices, const tensor& updates, std::int64_t axis,
                                  scatter_reduction reduction) {
  if (!x.defined()) fail("scatter_elements", "an operand is undefined");
  tensor out = new_output(x.shape(), x.type());
  scatter_elements(x, indices, updates, axis, reduction, out);
  return out;
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL nd_plan plan_nd(std::string_view op, const tensor& x, const tensor& indices, std::int64_t batch_dims) {
  if (!x.defined() || !indices.defined()) fail(op, "an operand is undefined");
  if (indices.type() != dtype::int32 && indices.type() != dtype::int64)
    fail(op, kiln::detail::concat("the indices must be int32 or int64, got ", describe_operand(indices)));
  if (indices.ndim() < 1) fail(op, "the indices must have rank at least 1 (the last axis holds the index tuples)");
  const auto b = static_cast<std::size_t>(batch_dims);
  if (batch_dims < 0 || b >= indices.ndim() || b > x.ndim())
    fail(op, kiln::detail::concat("batch_dims ", batch_dims, " must be in [0, ", std::min(indices.ndim() - 1, x.ndim()), "]"));
  nd_plan p;
  p.k = indices.shape(indices.ndim() - 1);
  if (p.k < 1 || std::size_t(p.k) > x.ndim() - b)
    fail(op, kiln::detail::concat("index tuples of length ", p.k, " do not fit x ", describe_operand(x), " after ", batch_dims, " batch axes"));
  for (std::size_t d = 0; d < b; ++d) {
    if (indices.shape(d) != x.shape(d))
      fail(op, kiln::detail::concat("batch axis ", d, " of the indices ", describe_operand(indices), " differs from x ", describe_operand(x)));
    p.batch *= x.shape(d);
  }
  for (std::size_t d = b; d < b + std::size_t(p.k); ++d) p.rows *= x.shape(d);
  for (std::size_t d = b + std::size_t(p.k); d < x.ndim(); ++d) p.slice *= x.shape(d);
  for (std::size_t d = b; d + 1 < indices.ndim(); ++d) p.count *= indices.shape(d);
  const std::vector<std::int64_t> raw = indices.type() == dtype::int32 ? [&] {
    const auto v = indices.to_vector<std::int32_t>();
    return std::vector<std::int64_t>(v.begin(), v.end());
  }() : indices.to_vector<std::int64_t>();
  p.offsets.reserve(std::size_t(p.batch * p.count));
  for (std::int64_t t = 0; t < p.batch * p.count; ++t) {
    std::int64_t row = 0;
    for (std::int64_t j = 0; j < p.k; ++j) {
      const std::int64_t n = x.shape(b + std::size_t(j)), i = raw[std::size_t(t * p.k + j)];
      const std::int64_t v = i < 0 ? i + n : i;
      if (v < 0 || v >= n)
        fail(op, kiln::detail::concat("index ", i, " (tuple ", t, ", position ", j, ") is out of range for axis ", b + std::size_t(j), " of extent ", n));
      row = row * n + v;
    }
    p.offsets.push_back((t / p.count) * p.rows + row);
  }
  return p;
}

KILN_DECL shape_vector gather_nd_shape(const tensor& x, const tensor& indices, std::int64_t batch_dims, const nd_plan& p) {
  shape_vector s(indices.shape().begin(), indices.shape().end() - 1);
  for (std::size_t d = std::size_t(batch_dims) + std::size_t(p.k); d < x.ndim(); ++d) s.push_back(x.shape(d));
  return s;
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void gather_nd(const tensor& x, const tensor& indices, std::int64_t batch_dims, const tensor& out) {
  constexpr std::string_view op = "gather_nd";
  const detail::nd_plan p = detail::plan_nd(op, x, indices, batch_dims);
  check_output(op, out, x.type(), detail::gather_nd_shape(x, indices, batch_dims, p));
  detail::check_disjoint(op, x, out);
  const tensor src = x.contiguous();
  const bool direct = out.is_contiguous();
  const tensor dst = direct ? out : new_output(out.shape(), x.type());
  const std::size_t bytes = std::size_t(p.slice) * size_of(x.type());
  const auto* from = static_cast<const char*>(src.data());
  auto* to = static_cast<char*>(dst.data());
  for (std::size_t t = 0; t < p.offsets.size(); ++t) std::memcpy(to + t * bytes, from + std::size_t(p.offsets[t]) * bytes, bytes);
  if (!direct) detail::copy_unchecked(dst, out);
}

KILN_DECL tensor gather_nd(const tensor& x, const tensor& indices, std::int64_t batch_dims) {
  const detail::nd_plan p = detail::plan_nd("gather_nd", x, indices, batch_dims);
  tensor out = new_output(detail::gather_nd_shape(x, indices, batch_dims, p), x.type());
  gather_nd(x, indices, batch_dims, out);
  return out;
}

KILN_DECL void scatter_nd(const tensor& x, const tensor& indices, const tensor& updates, scatter_reduction reduction, const tensor& out) {
  constexpr std::string_view op = "scatter_nd";
  const detail::nd_plan p = detail::plan_nd(op, x, indices, 0);
  if (!updates.defined()) fail(op, "an operand is undefined");
  const shape_vector want = detail::gather_nd_shape(x, indices, 0, p);
  if (updates.shape() != want || updates.type() != x.type())
    fail(op, kiln::detail::concat("the updates must be ", name(x.type()), runtime::shape_to_string(want), ", got ", describe_operand(updates)));
  if (reduction != scatter_reduction::update && !ops::is_numeric(x.type()))
    fail(op, kiln::detail::concat("cannot combine ", name(x.type()), " elements; only 'update' takes them"));
  check_output(op, out, x.type(), x.shape());
  detail::check_disjoint(op, indices, out);
  detail::check_disjoint(op, updates, out);
  const bool direct = out.is_contiguous() && !overlaps(out, x);
  const tensor dst = direct ? out : new_output(x.shape(), x.type());
  detail::copy_unchecked(x, dst);
  const tensor u = updates.contiguous();
  visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
    T* o = static_cast<T*>(dst.data());
    const T* src = static_cast<const T*>(u.data());
    for (std::size_t t = 0; t < p.offsets.size(); ++t) {
      T* row = o + p.offsets[t] * p.slice;
      const T* v = src + std::int64_t(t) * p.slice;
      for (std::int64_t e = 0; e < p.slice; ++e) switch (reduction) {
          case scatter_reduction::update: row[e] = v[e]; break;
          case scatter_reduction::add: row[e] = ops::add{}(row[e], v[e]); break;
          case scatter_reduction::mul: row[e] = ops::multiply{}(row[e], v[e]); break;
          case scatter_reduction::max: row[e] = ops::maximum{}(row[e], v[e]); break;
          case scatter_reduction::min: row[e] = ops::minimum{}(row[e], v[e]); break;
        }
    }
  });
  if (!direct) detail::copy_unchecked(dst, out);
}

KILN_DECL tensor scatter_nd(const tensor& x, const tensor& indices, const tensor& updates, scatter_reduction reduction) {
  if (!x.defined()) fail("scatter_nd", "an operand is undefined");
  tensor out = new_output(x.shape(), x.type());
  scatter_nd(x, indices, updates, reduction, out);
  return out;
}

KILN_DECL pad_mode parse_pad_mode(std::string_view s) {
  if (s == "constant") return pad_mode::constant;
  if (s == "edge") return pad_mode::edge;
  if (s == "reflect") return pad_mode::reflect;
  fail("pad", kiln::detail::concat("unknown pad mode \"", s, "\" (constant, edge or reflect)"));
}

}  // namespace kiln::kernels

namespace kiln::kernels::detail {

KILN_DECL shape_vector pad_shape(std::string_view op, const tensor& x, std::span<const std::int64_t> widths, pad_mode mode) {
  if (!x.defined()) fail(op, "the input is undefined");
  if (widths.size() != 2 * x.ndim())
    fail(op, kiln::detail::concat("pad_width must have 2 values (before, after) per axis of ", describe_operand(x), ", got ", widths.size()));
  shape_vector s = x.shape();
  for (std::size_t i = 0; i < x.ndim(); ++i) {
    const std::int64_t lo = widths[2 * i], hi = widths[2 * i + 1], n = x.shape(i);
    if (lo < 0 || hi < 0) fail(op, kiln::detail::concat("pad_width of axis ", i, " is negative (", lo, ", ", hi, ")"));
    if (mode == pad_mode::reflect && (lo >= n || hi >= n) && (lo || hi))
      fail(op, kiln::detail::concat("reflect padding (", lo, ", ", hi, ") of axis ", i, " must be smaller than its extent ", n));
    if (mode == pad_mode::edge && n == 0 && (lo || hi)) fail(op, kiln::detail::concat("edge padding of axis ", i, " needs a non-empty axis"));
    s[i] = n + lo + hi;
  }
  return s;
}

}  // namespace kiln::kernels::detail

namespace kiln::kernels {

KILN_DECL void pad(const tensor& x, std::span<const std::int64_t> pad_width, pad_mode mode, double value, const tensor& out) {
  constexpr std::string_view op = "pad";
  const shape_vector s = detail::pad_shape(op, x, pad_width, mode);
  check_output(op, out, x.type(), s);
  detail::check_disjoint(op, x, out);
  // Converted and checked before anything is written.
  std::function<void(const tensor&)> fill_value;
  if (mode == pad_mode::constant)
    visit_dtype(op, x.type(), [&]<class T>(type_tag<T>) {
      T v;
      if (x.type() == dtype::bool_) v = value != 0;
      else if constexpr (std::is_integral_v<T>) {
        if (!(value >= double(std::numeric_limits<T>::min()) && value <= double(std::numeric_limits<T>::max()) && value == std::trunc(value)))
          fail(op, kiln::detail::concat("the pad value ", value, " is not a ", name(x.type())));
        v = T(value);
      } else {
        v = T(value);
      }
      fill_value = [v](const tensor& t) { detail::fill<T>(t, v); };
    });
  // The interior, then each axis' borders in turn: after axis a, axes 0..a are complete and the
  // later axes are filled on their interior extent only, which is all the next axes copy from.
  const std::size_t r = x.ndim();
  tensor part = out;
  for (std::size_t i = 0; i < r; ++i) part = part.slice(i, pad_width[2 * i], pad_width[2 * i] + x.shape(i));
  detail::copy_unchecked(x, part);
  for (std::size_t a = 0; a < r; ++a) {
    const std::int64_t lo = pad_width[2 * a], n = x.shape(a), total = s[a];
    // `band`: axes < a full, axis a full, axes > a interior.
    tensor band = out;
    for (std::size_t i = a + 1; i < r; ++i) band = band.slice(i, pad_width[2 * i], pad_width[2 * i] + x.shape(i));
    if (mode == pad_mode::constant) {
      fill_value(band.slice(a, 0, lo));
      fill_value(band.slice(a, lo + n, total));
      continue;
    }
    for (std::int64_t p = 0; p < total; ++p) {
      if (p >= lo && p < lo + n) continue;
      const tensor dst = band.slice(a, p, p + 1);
      std::int64_t q = p - lo;  // the source position on axis a
      if (mode == pad_mode::edge) q = std::clamp<std::int64_t>(q, 0, n - 1);
      else q = q < 0 ? -q : 2 * (n - 1) - q;
      detail::copy_unchecked(band.slice(a, lo + q, lo + q + 1), dst);
    }
  }
}

KILN_DECL tensor pad(const tensor& x, std::span<const std::int64_t> pad_width, pad_mode mode, double value) {
  shape_vector shape = detail::pad_shape("pad", x, pad_width, mode);  // checks x before x.type() is read
  tensor out = new_output(std::move(shape), x.type());
  pad(x, pad_width, mode, value, out);
  return out;
}

KILN_DECL tensor pad(const tensor& x, std::initializer_list<std::int64_t> pad_width, pad_mode mode, double value) {
  return pad(x, std::span<const std::int64_t>(pad_width.begin(), pad_width.size()), mode, value);
}

}  // namespace kiln::kernels
