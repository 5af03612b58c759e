// SPDX-License-Identifier: Apache-2.0
/// \file
/// `kiln::vm::value`: what a VM register holds (the design's `ffi::Any`).
///
/// A value is 16 bytes: an 8-byte payload and a kind tag. Numbers, booleans and the VM pointer sit
/// in the payload; strings, tensors, shape tuples, tuples, closures and users' opaque objects are
/// reference-counted `runtime::object`s the payload points to. Copying a value copies 16 bytes and,
/// for object kinds only, bumps one atomic count; moving never touches a count.
///
/// Reading a kind that is not there (`as_int()` on a tensor) throws `kiln::vm::value_error`
/// naming the expected and the actual kind.
#pragma once

#include <kiln/runtime/tensor.hpp>
#include <kiln/support/error.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::vm {

using runtime::object;
using runtime::object_ptr;
using runtime::shape_vector;
using runtime::tensor;

class vm_context;
class value;

/// The kinds a value can hold. Kinds from `string` on hold an object reference.
enum class value_kind : std::uint8_t { null, int_, float_, bool_, vm, string, tensor, shape, tuple, closure, object };

constexpr std::string_view name(value_kind k) noexcept {
  switch (k) {
    case value_kind::null: return "null";
    case value_kind::int_: return "int";
    case value_kind::float_: return "float";
    case value_kind::bool_: return "bool";
    case value_kind::vm: return "vm";
    case value_kind::string: return "string";
    case value_kind::tensor: return "tensor";
    case value_kind::shape: return "shape";
    case value_kind::tuple: return "tuple";
    case value_kind::closure: return "closure";
    case value_kind::object: return "object";
  }
  return "?";
}

/// A value read as a kind it does not hold.
class value_error : public error {
public:
  using error::error;
};

/// The arguments of a call: a view of values owned elsewhere (registers, constants, the caller).
class call_args {
public:
  call_args() = default;
  call_args(const value* const* items, std::size_t n) noexcept : p_(items), n_(n) {}
  std::size_t size() const noexcept { return n_; }
  bool empty() const noexcept { return n_ == 0; }
  const value& operator[](std::size_t i) const noexcept { return *p_[i]; }
  const value* const* data() const noexcept { return p_; }
  /// The arguments from `first` on.
  call_args drop_front(std::size_t first) const noexcept {
    return first >= n_ ? call_args(p_ + n_, 0) : call_args(p_ + first, n_ - first);
  }

private:
  const value* const* p_ = nullptr;
  std::size_t n_ = 0;
};

/// A value's payload and kind in a trivially copyable form, so that a function can return it in
/// two machine registers. It owns what the value owned: `value::into_raw` hands a reference over
/// and `value::from_raw` takes it back; a raw_value must end in exactly one `from_raw`.
struct raw_value {
  std::int64_t bits;
  value_kind kind;
};

/// One argument of a Call as the VM's ops hold it: the byte offset of a register in the caller's
/// frame, or the address of a literal (a constant, a function, an immediate) with bit 0 set.
/// Values are 8-byte aligned, so bit 0 is free. `resolve_operand` gives the value.
using call_operand = std::uintptr_t;

/// A C++ function the VM can call: one indirect call through `fn` with `state`. The result comes
/// back as a `raw_value` in registers, which the VM stores straight into the destination
/// register. `make_native` (vm/native.hpp) builds one from any typed callable.
struct native_function {
  using fn_type = raw_value (*)(const void* state, call_args args);
  /// The VM's own entry, optional: the arguments are the Call's `operands` against the caller's
  /// registers `regs`, and their number is already checked (the VM checks `arity` at load). It
  /// saves the VM gathering argument pointers; `make_native` provides it for fixed arities.
  using direct_fn_type = raw_value (*)(const void* state, const value* regs, const call_operand* operands);
  fn_type fn = nullptr;
  direct_fn_type direct = nullptr;
  const void* state = nullptr;
  std::shared_ptr<const void> owner;  ///< keeps `state` alive
  int arity = -1;                     ///< number of arguments, or -1 when it takes any number

  explicit operator bool() const noexcept { return fn != nullptr; }
  value operator()(call_args args) const;
};

// ---- object payloads ----------------------------------------------------------------------------

class string_obj final : public object {
public:
  explicit string_obj(std::string s) : text(std::move(s)) {}
  std::string_view type_name() const noexcept override { return "runtime.String"; }
  const std::string text;
};

class shape_obj final : public object {
public:
  explicit shape_obj(shape_vector d) : dims(std::move(d)) {}
  std::string_view type_name() const noexcept override { return "runtime.Shape"; }
  const shape_vector dims;
};

class tuple_obj;
class closure_obj;

// ---- the value ----------------------------------------------------------------------------------

class value {
public:
  value() noexcept : i_(0) {}
  value(std::nullptr_t) noexcept : value() {}
  template <class T>
    requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
  value(T v) noexcept : i_(std::int64_t(v)), k_(value_kind::int_) {}
  value(bool v) noexcept : i_(0), k_(value_kind::bool_) { b_ = v; }
  /// No value from a pointer (it would silently become a bool).
  template <class T>
  value(T*) = delete;
  value(const char* s) : value(std::string(s)) {}
  value(char* s) : value(std::string(s)) {}
  value(double v) noexcept : f_(v), k_(value_kind::float_) {}
  value(float v) noexcept : f_(double(v)), k_(value_kind::float_) {}
  value(vm_context* vm) noexcept : vm_(vm), k_(value_kind::vm) {}
  value(std::string s) : value(runtime::make_object<string_obj>(std::move(s))) {}
  value(std::string_view s) : value(std::string(s)) {}
  value(const tensor& t) noexcept : value(object_ptr<const object>(t.node()), t.defined() ? value_kind::tensor : value_kind::null) {}
  value(object_ptr<const string_obj> p) noexcept : value(std::move(p), value_kind::string) {}
  value(object_ptr<const shape_obj> p) noexcept : value(std::move(p), value_kind::shape) {}
  value(object_ptr<const tuple_obj> p) noexcept;
  value(object_ptr<const closure_obj> p) noexcept;
  /// Any object; tensors, strings, shapes, tuples and closures get their own kinds.
  static value from_object(object_ptr<const object> p) noexcept;

  static value shape(shape_vector dims) { return value(runtime::make_object<shape_obj>(std::move(dims))); }
  static value tuple(std::vector<value> items);

  value(const value& o) noexcept : i_(o.i_), k_(o.k_) {
    if (holds_object()) o_->add_ref();
  }
  value(value&& o) noexcept : i_(o.i_), k_(o.k_) { o.k_ = value_kind::null; }
  value& operator=(const value& o) noexcept {
    const std::int64_t bits = o.i_;  // read first: `o` may be `*this`
    const value_kind kind = o.k_;
    if (o.holds_object()) o.o_->add_ref();
    reset();
    i_ = bits;
    k_ = kind;
    return *this;
  }
  value& operator=(value&& o) noexcept {
    if (this != &o) {
      reset();
      i_ = o.i_;
      k_ = o.k_;
      o.k_ = value_kind::null;
    }
    return *this;
  }
  ~value() { reset(); }

  /// Back to null, dropping any object reference.
  void reset() noexcept {
    if (holds_object()) o_->release();
    k_ = value_kind::null;
  }

  value_kind kind() const noexcept { return k_; }
  bool holds_object() const noexcept { return k_ >= value_kind::string; }
  bool is_null() const noexcept { return k_ == value_kind::null; }
  bool is_int() const noexcept { return k_ == value_kind::int_; }
  bool is_float() const noexcept { return k_ == value_kind::float_; }
  bool is_bool() const noexcept { return k_ == value_kind::bool_; }
  bool is_string() const noexcept { return k_ == value_kind::string; }
  bool is_tensor() const noexcept { return k_ == value_kind::tensor; }
  bool is_shape() const noexcept { return k_ == value_kind::shape; }
  bool is_tuple() const noexcept { return k_ == value_kind::tuple; }
  bool is_closure() const noexcept { return k_ == value_kind::closure; }

  std::int64_t as_int() const {
    if (k_ != value_kind::int_) [[unlikely]] mismatch(value_kind::int_);
    return i_;
  }
  /// A float, or an int converted to double.
  double as_float() const {
    if (k_ == value_kind::float_) return f_;
    if (k_ == value_kind::int_) return double(i_);
    mismatch(value_kind::float_);
  }
  bool as_bool() const {
    if (k_ != value_kind::bool_) [[unlikely]] mismatch(value_kind::bool_);
    return b_;
  }
  vm_context& as_vm() const {
    if (k_ != value_kind::vm) [[unlikely]] mismatch(value_kind::vm);
    return *vm_;
  }
  const std::string& as_string() const { return static_cast<const string_obj*>(payload(value_kind::string))->text; }
  tensor as_tensor() const {
    return tensor(object_ptr<const runtime::tensor_node>(static_cast<const runtime::tensor_node*>(payload(value_kind::tensor))));
  }
  const runtime::tensor_node& tensor_ref() const { return *static_cast<const runtime::tensor_node*>(payload(value_kind::tensor)); }
  const shape_vector& as_shape() const { return static_cast<const shape_obj*>(payload(value_kind::shape))->dims; }
  std::span<const value> as_tuple() const;
  const closure_obj& as_closure() const;
  /// The object of any object kind.
  const object& as_object() const {
    if (!holds_object()) mismatch(value_kind::object);
    return *o_;
  }
  /// The object as a `T`, for users' own object types.
  template <class T>
  object_ptr<const T> as_object() const {
    const auto* p = holds_object() ? dynamic_cast<const T*>(o_) : nullptr;
    if (!p) mismatch_object(typeid(T).name());
    return object_ptr<const T>(p);
  }

  /// Raw payload bits (for the VM's fast paths and for hashing).
  std::int64_t raw_bits() const noexcept { return i_; }

  /// Hands this value's payload over (an object reference included), leaving null.
  raw_value into_raw() && noexcept {
    const raw_value r{i_, k_};
    k_ = value_kind::null;
    return r;
  }
  /// Takes over what `into_raw` handed out.
  static value from_raw(raw_value r) noexcept {
    value v;
    v.i_ = r.bits;
    v.k_ = r.kind;
    return v;
  }
  /// `*this = from_raw(r)`, without the temporary. The old value is released after the new one is
  /// in place (its destructor may run arbitrary code).
  void assign_raw(raw_value r) noexcept {
    const value_kind old_kind = k_;
    const object* const old = o_;
    i_ = r.bits;
    k_ = r.kind;
    if (old_kind >= value_kind::string) old->release();
  }

private:
  value(object_ptr<const object> p, value_kind k) noexcept : i_(0), k_(p ? k : value_kind::null) {
    o_ = p.detach();
  }
  const object* payload(value_kind want) const {
    if (k_ != want) [[unlikely]] mismatch(want);
    return o_;
  }
  [[noreturn]] void mismatch(value_kind want) const {
    throw value_error("kiln::vm::value: expected " + std::string(name(want)) + ", got " + describe_kind());
  }
  [[noreturn]] void mismatch_object(const char* want) const {
    throw value_error("kiln::vm::value: expected an object of type " + std::string(want) + ", got " + describe_kind());
  }
  std::string describe_kind() const {
    if (k_ == value_kind::object) return "object " + std::string(o_->type_name());
    return std::string(name(k_));
  }

  union {
    std::int64_t i_;
    double f_;
    bool b_;
    vm_context* vm_;
    const object* o_;
  };
  value_kind k_ = value_kind::null;
};

static_assert(sizeof(value) == 16, "kiln::vm::value is meant to be 16 bytes");
static_assert(alignof(value) >= 2, "call_operand needs bit 0 of a value's address");

/// The value a `call_operand` names, for a frame whose registers start at `regs`. Registers are
/// the common case and the fall-through path (a taken branch per argument costs more than the
/// test).
inline const value& resolve_operand(call_operand w, const value* regs) noexcept {
  if (w & 1) [[unlikely]]
    return *reinterpret_cast<const value*>(w - 1);
  return *reinterpret_cast<const value*>(reinterpret_cast<const char*>(regs) + w);
}

class tuple_obj final : public object {
public:
  explicit tuple_obj(std::vector<value> v) : items(std::move(v)) {}
  std::string_view type_name() const noexcept override { return "runtime.Tuple"; }
  const std::vector<value> items;
};

/// A callable value: a native function or a function of a VM's executable, with arguments bound
/// after the caller's (`bind_last_args`, the design's `VMClosure::BindLastArgs`).
class closure_obj final : public object {
public:
  std::string_view type_name() const noexcept override { return "vm.Closure"; }

  std::string name;
  native_function native;           ///< the target when it is a native function
  std::int64_t func_index = -1;     ///< the target when it is a function of `owner`'s executable
  const void* owner = nullptr;      ///< the executable `func_index` refers to
  std::vector<value> bound;         ///< appended after the call's own arguments

  bool is_native() const noexcept { return func_index < 0; }
};

inline value::value(object_ptr<const tuple_obj> p) noexcept : value(std::move(p), value_kind::tuple) {}
inline value::value(object_ptr<const closure_obj> p) noexcept : value(std::move(p), value_kind::closure) {}
inline value value::tuple(std::vector<value> items) {
  return value(object_ptr<const tuple_obj>(runtime::make_object<tuple_obj>(std::move(items))));
}
inline std::span<const value> value::as_tuple() const {
  return static_cast<const tuple_obj*>(payload(value_kind::tuple))->items;
}
inline const closure_obj& value::as_closure() const { return *static_cast<const closure_obj*>(payload(value_kind::closure)); }
inline value value::from_object(object_ptr<const object> p) noexcept {
  const object* o = p.get();
  const value_kind k = dynamic_cast<const runtime::tensor_node*>(o) ? value_kind::tensor
                       : dynamic_cast<const string_obj*>(o)        ? value_kind::string
                       : dynamic_cast<const shape_obj*>(o)         ? value_kind::shape
                       : dynamic_cast<const tuple_obj*>(o)         ? value_kind::tuple
                       : dynamic_cast<const closure_obj*>(o)       ? value_kind::closure
                                                                   : value_kind::object;
  return value(std::move(p), k);
}

inline value native_function::operator()(call_args args) const { return value::from_raw(fn(state, args)); }

/// `bind_last_args`: a closure calling `c` with `args` appended after the caller's arguments.
inline value bind_last_args(const closure_obj& c, std::vector<value> args) {
  auto r = runtime::make_object<closure_obj>();
  r->name = c.name;
  r->native = c.native;
  r->func_index = c.func_index;
  r->owner = c.owner;
  r->bound = std::move(args);
  r->bound.insert(r->bound.end(), c.bound.begin(), c.bound.end());
  return value(object_ptr<const closure_obj>(std::move(r)));
}

/// Same kind and same contents: numbers by value, strings, shapes and tuples element by element,
/// tensors by dtype, shape and elements; closures and other objects by identity.
inline bool equal(const value& a, const value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case value_kind::null: return true;
    case value_kind::int_: return a.as_int() == b.as_int();
    case value_kind::float_: return a.as_float() == b.as_float();
    case value_kind::bool_: return a.as_bool() == b.as_bool();
    case value_kind::vm: return &a.as_vm() == &b.as_vm();
    case value_kind::string: return a.as_string() == b.as_string();
    case value_kind::tensor: return equal(a.as_tensor(), b.as_tensor());
    case value_kind::shape: return a.as_shape() == b.as_shape();
    case value_kind::tuple: {
      auto x = a.as_tuple(), y = b.as_tuple();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i])) return false;
      return true;
    }
    case value_kind::closure:
    case value_kind::object: return &a.as_object() == &b.as_object();
  }
  return false;
}

/// A short rendering for traces and messages: `3`, `2.5`, `true`, `"text"`, `float32[2, 3]`,
/// `shape(2, 3)`, `(1, "a")`, `closure(main)`.
inline std::string to_string(const value& v) {
  switch (v.kind()) {
    case value_kind::null: return "null";
    case value_kind::int_: return std::to_string(v.as_int());
    case value_kind::float_: {
      std::string s = std::to_string(v.as_float());
      while (s.size() > 1 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
      return s;
    }
    case value_kind::bool_: return v.as_bool() ? "true" : "false";
    case value_kind::vm: return "vm";
    case value_kind::string: return "\"" + v.as_string() + "\"";
    case value_kind::tensor: return describe(v.as_tensor());
    case value_kind::shape: {
      std::string s = "shape(";
      for (std::size_t i = 0; i < v.as_shape().size(); ++i) s.append(i ? ", " : "").append(std::to_string(v.as_shape()[i]));
      return s + ")";
    }
    case value_kind::tuple: {
      std::string s = "(";
      for (std::size_t i = 0; i < v.as_tuple().size(); ++i) s.append(i ? ", " : "").append(to_string(v.as_tuple()[i]));
      return s + ")";
    }
    case value_kind::closure: return "closure(" + v.as_closure().name + ")";
    case value_kind::object: return "object(" + std::string(v.as_object().type_name()) + ")";
  }
  return "?";
}

}  // namespace kiln::vm
