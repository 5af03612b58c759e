// SPDX-License-Identifier: Apache-2.0
/// \file
/// Attribute values and maps, for operator attributes and function / module attributes.
#pragma once

#include <kiln/support/dtype.hpp>
#include <kiln/support/error.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace kiln::ir {

using int_array = std::vector<std::int64_t>;
using float_array = std::vector<double>;
/// Integers by name, e.g. `{"n": 1024}` (the upper bounds of size variables).
using int_dict = std::map<std::string, std::int64_t>;

/// The kinds an attribute can hold; `none` is an absent optional value.
enum class attr_kind : std::uint8_t { none, boolean, integer, floating, string, data_type, ints, int_dict, floats };

constexpr const char* name(attr_kind k) noexcept {
  switch (k) {
    case attr_kind::none: return "None";
    case attr_kind::boolean: return "bool";
    case attr_kind::integer: return "int";
    case attr_kind::floating: return "float";
    case attr_kind::string: return "string";
    case attr_kind::data_type: return "dtype";
    case attr_kind::ints: return "list of int";
    case attr_kind::int_dict: return "dict of int";
    case attr_kind::floats: return "list of float";
  }
  return "?";
}

/// One attribute value: None, bool, int, float, string, dtype, a list of ints, a dict of ints or a
/// list of floats.
class attr_value {
public:
  using storage = std::variant<std::monostate, bool, std::int64_t, double, std::string, dtype, int_array, int_dict, float_array>;

  attr_value() = default;
  attr_value(bool b) : v_(b) {}
  attr_value(int i) : v_(std::int64_t{i}) {}
  attr_value(std::int64_t i) : v_(i) {}
  attr_value(double d) : v_(d) {}
  attr_value(const char* s) : v_(std::string(s)) {}
  attr_value(std::string s) : v_(std::move(s)) {}
  attr_value(dtype d) : v_(d) {}
  attr_value(int_array a) : v_(std::move(a)) {}
  attr_value(int_dict d) : v_(std::move(d)) {}
  attr_value(float_array a) : v_(std::move(a)) {}
  attr_value(std::initializer_list<std::int64_t> a) : v_(int_array(a)) {}

  attr_kind kind() const noexcept { return static_cast<attr_kind>(v_.index()); }
  bool is_none() const noexcept { return kind() == attr_kind::none; }

  /// The value as `T`; throws `kiln::error` naming both kinds when it holds something else.
  template <class T>
  const T& as() const {
    if (auto* p = std::get_if<T>(&v_)) return *p;
    throw error("kiln::ir::attr_value: expected " + std::string(name(kind_of<T>())) + ", but the value is " +
                name(kind()));
  }
  template <class T>
  const T* get_if() const noexcept {
    return std::get_if<T>(&v_);
  }
  const storage& raw() const noexcept { return v_; }

  friend bool operator==(const attr_value&, const attr_value&) = default;

  template <class T>
  static constexpr attr_kind kind_of() noexcept {
    if constexpr (std::is_same_v<T, bool>) return attr_kind::boolean;
    else if constexpr (std::is_same_v<T, std::int64_t>) return attr_kind::integer;
    else if constexpr (std::is_same_v<T, double>) return attr_kind::floating;
    else if constexpr (std::is_same_v<T, std::string>) return attr_kind::string;
    else if constexpr (std::is_same_v<T, dtype>) return attr_kind::data_type;
    else if constexpr (std::is_same_v<T, int_array>) return attr_kind::ints;
    else if constexpr (std::is_same_v<T, int_dict>) return attr_kind::int_dict;
    else if constexpr (std::is_same_v<T, float_array>) return attr_kind::floats;
    else return attr_kind::none;
  }

private:
  storage v_;
};

/// Attributes by name, kept sorted so that printing and comparison are deterministic.
class attr_map {
public:
  attr_map() = default;
  attr_map(std::initializer_list<std::pair<const std::string, attr_value>> init) : m_(init) {}

  bool contains(const std::string& key) const { return m_.count(key) != 0; }
  bool empty() const noexcept { return m_.empty(); }
  std::size_t size() const noexcept { return m_.size(); }

  /// The value under `key`, or nullptr.
  const attr_value* find(const std::string& key) const {
    auto it = m_.find(key);
    return it == m_.end() ? nullptr : &it->second;
  }
  /// The typed value under `key`, or `fallback` when absent or None.
  template <class T>
  T get_or(const std::string& key, T fallback) const {
    auto* v = find(key);
    if (!v || v->is_none()) return fallback;
    return v->as<T>();
  }
  /// A copy with `key` set to `value`.
  attr_map with(std::string key, attr_value value) const {
    attr_map r = *this;
    r.m_.insert_or_assign(std::move(key), std::move(value));
    return r;
  }
  void set(std::string key, attr_value value) { m_.insert_or_assign(std::move(key), std::move(value)); }

  auto begin() const noexcept { return m_.begin(); }
  auto end() const noexcept { return m_.end(); }
  friend bool operator==(const attr_map&, const attr_map&) = default;

private:
  std::map<std::string, attr_value> m_;
};

/// Names of function attributes that kiln itself reads.
namespace attr {
inline constexpr const char* global_symbol = "global_symbol";          ///< external name of the function
inline constexpr const char* skip_optimization = "SkipOptimization";  ///< function passes leave it alone
}  // namespace attr

}  // namespace kiln::ir
