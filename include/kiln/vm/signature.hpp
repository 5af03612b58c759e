// SPDX-License-Identifier: Apache-2.0
/// \file
/// What a function of an executable takes and returns, as the IR annotated it.
///
/// A `type_signature` is the run-time image of an IR type (Relax's StructInfo): kind, dtype,
/// rank and each dimension, either a constant or the text of a symbolic expression (`n`,
/// `n * 4`). The compiler records one per parameter and one for the result, so that whoever holds
/// only the executable — `kiln-run`, the Python module, a serving loop — can make inputs of the
/// right shape, check them before a call, and print the function's signature:
///
///     @main(x: R.Tensor((n, 784), "float32"), w1: R.Tensor((784, 512), "float32")) -> R.Tensor((n, 10), "float32")
///
/// The bytecode itself checks its arguments (the design's `match_shape` built-ins); a signature
/// is a description, and `check_argument` gives the same verdict earlier, without running anything.
#pragma once

#include <kiln/support/dtype.hpp>
#include <kiln/vm/value.hpp>

#include <cctype>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln::vm {

/// One dimension of a tensor or shape signature: a constant (`expr` empty) or a symbolic
/// expression, printed as in the IR (`n`, `n * 4`), whose value is known only at run time.
struct dim_signature {
  std::int64_t size = -1;  ///< the constant size; -1 when symbolic
  std::string expr;        ///< the symbolic expression; empty when constant

  bool is_static() const noexcept { return expr.empty(); }
  std::string text() const { return is_static() ? std::to_string(size) : expr; }
  friend bool operator==(const dim_signature&, const dim_signature&) = default;
};

enum class signature_kind : std::uint8_t { object = 0, tensor = 1, shape = 2, prim = 3, tuple = 4, callable = 5 };

/// The type of one value. Any part may be unknown: dtype `void`, `ndim` -1, no `dims`.
struct type_signature {
  signature_kind kind = signature_kind::object;
  dtype dt = dtype::void_;                  ///< tensor, prim
  std::int64_t ndim = -1;                   ///< tensor, shape
  std::optional<std::vector<dim_signature>> dims;  ///< tensor, shape (size `ndim` when present)
  std::vector<type_signature> fields;       ///< tuple

  static type_signature object() { return {}; }
  static type_signature tensor(dtype d, std::vector<dim_signature> ds) {
    type_signature s;
    s.kind = signature_kind::tensor;
    s.dt = d;
    s.ndim = std::int64_t(ds.size());
    s.dims = std::move(ds);
    return s;
  }

  /// The signature in the IR's text format: `R.Tensor((n, 784), "float32")`, `R.Shape([n, 4])`,
  /// `R.Prim("int64")`, `R.Tuple(...)`, `R.Object`, `R.Callable`.
  std::string text() const;

  friend bool operator==(const type_signature&, const type_signature&) = default;
};

inline std::string type_signature::text() const {
  auto dim_list = [&](const char* open, const char* close) {
    std::string s = open;
    for (std::size_t i = 0; i < dims->size(); ++i) s.append(i ? ", " : "").append((*dims)[i].text());
    if (dims->size() == 1 && std::string_view(open) == "(") s.append(",");
    return s.append(close);
  };
  switch (kind) {
    case signature_kind::object: return "R.Object";
    case signature_kind::callable: return "R.Callable";
    case signature_kind::prim: return "R.Prim(\"" + std::string(name(dt)) + "\")";
    case signature_kind::shape:
      if (dims) return "R.Shape(" + dim_list("[", "]") + ")";
      if (ndim >= 0) return "R.Shape(ndim=" + std::to_string(ndim) + ")";
      return "R.Shape";
    case signature_kind::tensor: {
      std::vector<std::string> parts;
      if (dims) parts.push_back(dim_list("(", ")"));
      if (is_known(dt)) parts.push_back("\"" + std::string(name(dt)) + "\"");
      if (!dims && ndim >= 0) parts.push_back("ndim=" + std::to_string(ndim));
      if (parts.empty()) return "R.Tensor";
      std::string s = "R.Tensor(";
      for (std::size_t i = 0; i < parts.size(); ++i) s.append(i ? ", " : "").append(parts[i]);
      return s + ")";
    }
    case signature_kind::tuple: {
      std::string s = "R.Tuple(";
      for (std::size_t i = 0; i < fields.size(); ++i) s.append(i ? ", " : "").append(fields[i].text());
      return s + ")";
    }
  }
  return "?";
}

/// Problems of a signature that no IR type could have produced; empty when there are none.
/// `depth` bounds tuple nesting (deserialized signatures are untrusted).
inline std::optional<std::string> check_signature(const type_signature& s, int depth = 0) {
  if (depth > 32) return "tuple signatures nest more than 32 deep";
  if (std::uint8_t(s.kind) > std::uint8_t(signature_kind::callable)) return "unknown signature kind " + std::to_string(int(s.kind));
  const bool shaped = s.kind == signature_kind::tensor || s.kind == signature_kind::shape;
  if (!shaped && (s.ndim != -1 || s.dims)) return "a " + std::string(s.kind == signature_kind::tuple ? "tuple" : "non-tensor") + " signature has dimensions";
  if (s.kind != signature_kind::tuple && !s.fields.empty()) return "a signature that is not a tuple has fields";
  if (s.kind != signature_kind::tensor && s.kind != signature_kind::prim && s.dt != dtype::void_) return "a signature of this kind has a dtype";
  if (s.ndim < -1 || s.ndim > 64) return "rank " + std::to_string(s.ndim) + " is out of range";
  if (s.dims) {
    if (std::int64_t(s.dims->size()) != s.ndim)
      return std::to_string(s.dims->size()) + " dimensions for rank " + std::to_string(s.ndim);
    for (auto& d : *s.dims)
      if (d.is_static() ? d.size < 0 : d.size != -1) return "dimension '" + d.text() + "' is malformed";
  }
  for (auto& f : s.fields)
    if (auto msg = check_signature(f, depth + 1)) return msg;
  return std::nullopt;
}

/// Whether `v` fits `s`, as the bytecode's checks would decide: kind, dtype, rank, constant
/// dimensions, and each symbolic dimension that is a plain name bound consistently through
/// `bound` (shared between the arguments of one call). Returns the problem, or nothing.
/// Compound symbolic dimensions (`n * 4`) are not evaluated here.
inline std::optional<std::string> check_argument(const type_signature& s, const value& v,
                                                 std::map<std::string, std::int64_t>& bound) {
  auto is_name = [](const std::string& e) {
    for (char c : e)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    return !e.empty();
  };
  auto check_dims = [&](std::span<const std::int64_t> shape) -> std::optional<std::string> {
    if (s.ndim >= 0 && std::int64_t(shape.size()) != s.ndim)
      return "expected rank " + std::to_string(s.ndim) + ", got rank " + std::to_string(shape.size());
    if (!s.dims) return std::nullopt;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const auto& d = (*s.dims)[i];
      if (d.is_static()) {
        if (shape[i] != d.size)
          return "dimension " + std::to_string(i) + " must be " + std::to_string(d.size) + ", got " + std::to_string(shape[i]);
      } else if (is_name(d.expr)) {
        auto [it, fresh] = bound.emplace(d.expr, shape[i]);
        if (!fresh && it->second != shape[i])
          return "dimension " + std::to_string(i) + " is " + d.expr + " = " + std::to_string(it->second) + " (bound earlier), got " +
                 std::to_string(shape[i]);
      }
    }
    return std::nullopt;
  };
  switch (s.kind) {
    case signature_kind::object: return std::nullopt;
    case signature_kind::callable:
      if (!v.is_closure()) return "expected a callable, got " + std::string(name(v.kind()));
      return std::nullopt;
    case signature_kind::prim:
      if (!v.is_int() && !v.is_float() && !v.is_bool()) return "expected a primitive value, got " + std::string(name(v.kind()));
      return std::nullopt;
    case signature_kind::shape:
      if (!v.is_shape()) return "expected a shape, got " + std::string(name(v.kind()));
      return check_dims(v.as_shape());
    case signature_kind::tensor: {
      if (!v.is_tensor()) return "expected a tensor, got " + std::string(name(v.kind()));
      const auto& t = v.as_tensor();
      if (is_known(s.dt) && t.type() != s.dt)
        return "expected dtype " + std::string(name(s.dt)) + ", got " + std::string(name(t.type()));
      return check_dims(t.shape());
    }
    case signature_kind::tuple: {
      if (!v.is_tuple()) return "expected a tuple, got " + std::string(name(v.kind()));
      const auto& fs = v.as_tuple();
      if (fs.size() != s.fields.size())
        return "expected a tuple of " + std::to_string(s.fields.size()) + " fields, got " + std::to_string(fs.size());
      for (std::size_t i = 0; i < fs.size(); ++i)
        if (auto msg = check_argument(s.fields[i], fs[i], bound)) return "field " + std::to_string(i) + ": " + *msg;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace kiln::vm
