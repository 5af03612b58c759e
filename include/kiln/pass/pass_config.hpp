// SPDX-License-Identifier: Apache-2.0
/// \file
/// Typed pass configuration options: the registry of keys (the design's
/// TVM_REGISTER_PASS_CONFIG_OPTION) and `pass_config_option<T>`, a typed handle that registers its
/// key when it is constructed.
///
/// \code
/// inline const kiln::pass_config_option<int> unroll_max_step{"tir.unroll.max_step", "deepest loop to unroll"};
/// ctx.set_config(unroll_max_step, 16);             // or ctx.set_config("tir.unroll.max_step", 16)
/// int step = ctx.config(unroll_max_step, 8);       // in the pass: the value, or 8 when unset
/// \endcode
#pragma once

#include <kiln/support/error.hpp>
#include <kiln/support/strings.hpp>

#include <any>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <concepts>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

#include <boost/core/demangle.hpp>

namespace kiln {

namespace detail {

template <class T>
std::string config_type_name() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, int>) return "int";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, std::string>) return "string";
  else return boost::core::demangle(typeid(T).name());
}

/// The name of the type an `std::any` holds, for messages.
inline std::string held_type_name(const std::any& a) {
  const std::type_info& t = a.type();
  if (t == typeid(bool)) return "bool";
  if (t == typeid(int)) return "int";
  if (t == typeid(long) || t == typeid(long long)) return "int64";
  if (t == typeid(double)) return "double";
  if (t == typeid(float)) return "float";
  if (t == typeid(std::string) || t == typeid(const char*) || t == typeid(std::string_view)) return "string";
  return boost::core::demangle(t.name());
}

/// `in` as a `T`, when it holds a `T` or a value that converts to `T` without loss (any integer
/// to a wider or equal integer that holds it, integers to floating point exactly, text to string).
template <class T>
std::optional<T> coerce(const std::any& in) {
  if (const T* t = std::any_cast<T>(&in)) return *t;
  if constexpr (std::is_same_v<T, std::string>) {
    if (auto* p = std::any_cast<const char*>(&in)) return std::string(*p);
    if (auto* p = std::any_cast<std::string_view>(&in)) return std::string(*p);
  } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    auto from = [](auto v) -> std::optional<T> {
      if (std::in_range<T>(v)) return static_cast<T>(v);
      return std::nullopt;
    };
    if (auto* p = std::any_cast<int>(&in)) return from(*p);
    if (auto* p = std::any_cast<long>(&in)) return from(*p);
    if (auto* p = std::any_cast<long long>(&in)) return from(*p);
    if (auto* p = std::any_cast<unsigned>(&in)) return from(*p);
    if (auto* p = std::any_cast<unsigned long>(&in)) return from(*p);
    if (auto* p = std::any_cast<unsigned long long>(&in)) return from(*p);
  } else if constexpr (std::is_floating_point_v<T>) {
    auto from = [](auto v) -> std::optional<T> {
      T t = static_cast<T>(v);
      if (static_cast<decltype(v)>(t) == v) return t;
      return std::nullopt;
    };
    if (auto* p = std::any_cast<int>(&in)) return from(*p);
    if (auto* p = std::any_cast<long>(&in)) return from(*p);
    if (auto* p = std::any_cast<long long>(&in)) return from(*p);
    if (auto* p = std::any_cast<float>(&in)) return static_cast<T>(*p);
  }
  return std::nullopt;
}

/// Parses text as a `T` (bool: true/false/1/0; numbers in full; string as is).
template <class T>
std::optional<T> parse_config_text(std::string_view s) {
  if constexpr (std::is_same_v<T, bool>) {
    if (s == "true" || s == "1") return true;
    if (s == "false" || s == "0") return false;
    return std::nullopt;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return std::string(s);
  } else if constexpr (std::is_integral_v<T>) {
    T v{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
    return v;
  } else if constexpr (std::is_floating_point_v<T>) {
    std::string z(s);  // strtod wants a terminated string; from_chars for double is missing in some libstdc++
    char* end = nullptr;
    double v = std::strtod(z.c_str(), &end);
    if (z.empty() || end != z.c_str() + z.size()) return std::nullopt;
    return static_cast<T>(v);
  } else {
    return std::nullopt;
  }
}

/// `v` as text that `parse_config_text` reads back exactly.
template <class T>
std::string format_config_value(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v;
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(v);
  } else {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(v));  // round-trips a double
    return buf;
  }
}

}  // namespace detail

/// What the registry knows about one option.
struct pass_config_entry {
  std::string key;
  std::string type_name;
  std::string description;
  std::type_index type = typeid(void);
  /// The value `in` converted to the registered type, or an empty any when it does not fit.
  std::any (*coerce)(const std::any& in) = nullptr;
  /// Text parsed as the registered type, or an empty any (null for types without a text form).
  std::any (*parse)(std::string_view text) = nullptr;
  /// A value of the registered type as text that `parse` reads back (null for types without a
  /// text form): what crash reproducers write.
  std::string (*format)(const std::any& value) = nullptr;
  /// A value-initialized value of the registered type (null when it has none): what reading an
  /// unset option as another type is checked with.
  std::any (*zero)() = nullptr;
};

/// The process-wide registry of configuration keys. Thread-safe.
class pass_config_registry {
public:
  static pass_config_registry& global() {
    static pass_config_registry r;
    return r;
  }

  /// Registers `key` with type `T`. Registering the same key again with the same type is allowed
  /// (a header included twice); with another type it is a `usage_error`.
  template <std::copyable T>
  void add(std::string_view key, std::string_view description = {}) {
    if (key.empty()) throw usage_error("kiln::pass_config_registry: a config key cannot be empty");
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      if (it->second.type != typeid(T))
        throw usage_error("kiln::pass_config_registry: config key '" + std::string(key) + "' is already registered as " +
                          it->second.type_name + ", cannot register it again as " + detail::config_type_name<T>());
      return;
    }
    pass_config_entry e;
    e.key = std::string(key);
    e.type_name = detail::config_type_name<T>();
    e.description = std::string(description);
    e.type = typeid(T);
    e.coerce = [](const std::any& in) -> std::any {
      if (auto v = detail::coerce<T>(in)) return *v;
      return {};
    };
    if constexpr (std::default_initializable<T>) e.zero = []() -> std::any { return T{}; };
    if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::string>) {
      e.parse = [](std::string_view s) -> std::any {
        if (auto v = detail::parse_config_text<T>(s)) return *v;
        return {};
      };
      e.format = [](const std::any& v) { return detail::format_config_value(std::any_cast<const T&>(v)); };
    }
    entries_.emplace(e.key, std::move(e));
  }

  /// The entry for `key`, or a `usage_error` that names the key, suggests close matches and lists
  /// every registered key with its type.
  pass_config_entry find(std::string_view key, std::string_view who) const {
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) return it->second;
    std::vector<std::string> keys;
    std::string listing;
    for (const auto& [k, e] : entries_) {
      keys.push_back(k);
      listing.append(listing.empty() ? "" : ", ").append(k).append(" (").append(e.type_name).append(")");
    }
    throw usage_error(std::string(who) + ": unknown config option '" + std::string(key) + "'" +
                      detail::did_you_mean(key, keys) + "; registered options: " + (listing.empty() ? "none" : listing) +
                      ". Register a key with kiln::pass_config_option<T> or pass_config_registry::add<T> first.");
  }

  bool contains(std::string_view key) const {
    std::lock_guard lock(mutex_);
    return entries_.find(key) != entries_.end();
  }

  /// Every registered entry, ordered by key.
  std::vector<pass_config_entry> entries() const {
    std::lock_guard lock(mutex_);
    std::vector<pass_config_entry> out;
    for (const auto& [k, e] : entries_) out.push_back(e);
    return out;
  }

private:
  mutable std::mutex mutex_;
  std::map<std::string, pass_config_entry, std::less<>> entries_;
};

/// A typed configuration key; constructing it registers the key (so a namespace-scope `inline
/// const` option is registered before `main`).
template <std::copyable T>
class pass_config_option {
public:
  using value_type = T;
  explicit pass_config_option(std::string_view key, std::string_view description = {}) : key_(key) {
    pass_config_registry::global().add<T>(key, description);
  }
  const std::string& key() const noexcept { return key_; }

private:
  std::string key_;
};

}  // namespace kiln
