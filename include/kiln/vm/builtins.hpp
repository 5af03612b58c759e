// SPDX-License-Identifier: Apache-2.0
/// \file
/// The VM's built-in native functions, under the design's names, and `global_registry()` which
/// holds them.
///
/// Shape matching works on a *shape heap*, an int64 tensor where symbolic dimensions live:
///
///     vm.builtin.alloc_shape_heap(%vm, size)                -> int64[size] tensor
///     vm.builtin.match_shape(x, heap, ndim, (mode, v)*ndim, err_ctx)
///         x is a tensor (its shape) or a shape; per dimension `mode`:
///         0 assert_equal_to_imm   dim == v
///         1 store_to_heap         heap[v] = dim
///         2 no_op
///         3 assert_equal_to_load  dim == heap[v]
///     vm.builtin.make_shape(heap, ndim, (mode, v)*ndim)     -> shape
///         0 use_imm: v;  1 load_shape: heap[v]
///     vm.builtin.match_prim_value(x, heap, mode, v, err_ctx)  the match_shape modes on an int
///     vm.builtin.eval_shape_expr(heap, dst, (kind, v)*)     heap[dst] = a dimension expression, in
///         postfix: kind 0 pushes v, 1 pushes heap[v], 2 applies operator v to the top two
///         (0 +, 1 -, 2 *, 3 floor division, 4 floor modulo, 5 min, 6 max), overflow-checked
///     vm.builtin.shape_heap_load(heap, i) -> heap[i] as an int
///     vm.builtin.check_upper_bound(heap, i, bound, name, err_ctx)   heap[i] (size variable `name`) <= bound
///
/// and for the code the compiler emits:
///
///     vm.builtin.copy(x) -> x                      vm.builtin.null_value() -> null
///     vm.builtin.read_if_cond(x) -> bool           (int, bool, or a one-element tensor)
///     vm.builtin.alloc_storage(%vm, shape, device, dtype, scope) -> storage of numel x dtype bytes
///     vm.builtin.alloc_tensor(storage, byte_offset, shape, dtype) -> tensor viewing the storage
///     vm.builtin.make_tuple(x...) -> tuple         vm.builtin.tuple_getitem(t, i) -> t[i]
///     vm.builtin.tuple_size(t) -> int              vm.builtin.shape_of(x) -> shape
///     vm.builtin.make_closure(f, captured...) -> closure with captured args bound last
///     vm.builtin.invoke_closure(%vm, f, args...) -> f(args..., captured...)
///     vm.builtin.check_tensor_info(x, ndim, dtype, err_ctx)   ndim -1 / dtype "" accept any
///     vm.builtin.check_shape_info(x, ndim, err_ctx)   vm.builtin.check_tuple_info(x, size, err_ctx)
///
/// and TVM's key/value cache kept as a program's state (`runtime::attention_kv_cache`,
/// runtime/kv_cache.hpp):
///
///     vm.builtin.attention_kv_cache_create(init, reserve_shape, fill_count[, axis]) -> cache
///         init's first fill_count positions along axis (default 0; -1: all), room for reserve_shape
///     vm.builtin.attention_kv_cache_append(cache, x) -> cache   x's positions written after the others
///     vm.builtin.attention_kv_cache_view(cache, shape) -> tensor  the positions so far (shape: the cache's)
///     vm.builtin.attention_kv_cache_array_popn(caches, n)   drops the last n positions of each cache of a tuple
///     vm.builtin.attention_kv_cache_array_clear(caches)     drops every position of each (the room stays)
///
/// A mismatch throws `value_error` whose message starts with the built-in's name, then the
/// error context the compiler passed (which function, which argument), then the expected and
/// the actual value.
#pragma once

#include <kiln/support/config.hpp>

#include <kiln/runtime/allocator.hpp>
#include <kiln/runtime/kv_cache.hpp>
#include <kiln/runtime/tensor.hpp>
#include <kiln/vm/context.hpp>
#include <kiln/vm/native.hpp>
#include <kiln/vm/value.hpp>

#include <algorithm>
#include <climits>
#include <map>
#include <string>
#include <vector>

namespace kiln::vm {

/// Modes of `vm.builtin.match_shape` and `vm.builtin.match_prim_value`.
enum class match_shape_code : std::int64_t { assert_equal_to_imm = 0, store_to_heap = 1, no_op = 2, assert_equal_to_load = 3 };
/// Modes of `vm.builtin.make_shape`.
enum class make_shape_code : std::int64_t { use_imm = 0, load_shape = 1 };

namespace detail {

/// Whether the first element of `t` is non-zero (a condition held in a tensor).
inline bool truth_of_element(const tensor& t) {
  const void* p = t.data();
  switch (t.type()) {
    case dtype::bool_: return *static_cast<const bool*>(p);
    case dtype::int8: return *static_cast<const std::int8_t*>(p) != 0;
    case dtype::uint8: return *static_cast<const std::uint8_t*>(p) != 0;
    case dtype::int32: return *static_cast<const std::int32_t*>(p) != 0;
    case dtype::int64: return *static_cast<const std::int64_t*>(p) != 0;
    case dtype::float32: return *static_cast<const float*>(p) != 0;
    case dtype::float64: return *static_cast<const double*>(p) != 0;
    case dtype::float16: return (*static_cast<const std::uint16_t*>(p) & 0x7fff) != 0;
    case dtype::void_: break;
  }
  return false;
}

[[noreturn]] inline void builtin_fail(std::string_view builtin, std::string_view err_ctx, const std::string& msg) {
  std::string s = "vm.builtin.";
  s.append(builtin).append(": ");
  if (!err_ctx.empty()) s.append(err_ctx).append(": ");
  throw value_error(s.append(msg));
}

/// The int64 heap tensor (or null when the program uses no symbolic dimensions).
inline std::int64_t* heap_data(const value& heap, std::string_view builtin, std::int64_t& size) {
  if (heap.is_null()) {
    size = 0;
    return nullptr;
  }
  const tensor t = heap.as_tensor();
  if (t.type() != dtype::int64 || t.ndim() != 1 || !t.is_contiguous())
    builtin_fail(builtin, "", "the shape heap must be a contiguous 1-d int64 tensor, got " + describe(t));
  size = t.shape(0);
  return static_cast<std::int64_t*>(t.data());
}

inline std::int64_t& heap_slot(std::int64_t* heap, std::int64_t size, std::int64_t index, std::string_view builtin,
                               std::string_view ctx) {
  if (index < 0 || index >= size)
    builtin_fail(builtin, ctx, "shape heap index " + std::to_string(index) + " is outside the heap of " + std::to_string(size));
  return heap[index];
}

/// One dimension against one (mode, v) pair; `what()` names it in a message (built only on failure).
template <class What>
void match_one(std::int64_t actual, std::int64_t mode, std::int64_t v, std::int64_t* heap, std::int64_t size, std::string_view builtin,
               std::string_view ctx, const What& what) {
  switch (match_shape_code(mode)) {
    case match_shape_code::assert_equal_to_imm:
      if (actual != v) builtin_fail(builtin, ctx, what() + " is " + std::to_string(actual) + ", expected " + std::to_string(v));
      return;
    case match_shape_code::store_to_heap: heap_slot(heap, size, v, builtin, ctx) = actual; return;
    case match_shape_code::no_op: return;
    case match_shape_code::assert_equal_to_load: {
      const std::int64_t expected = heap_slot(heap, size, v, builtin, ctx);
      if (actual != expected)
        builtin_fail(builtin, ctx, what() + " is " + std::to_string(actual) + ", expected " + std::to_string(expected) +
                                       " (from shape heap slot " + std::to_string(v) + ")");
      return;
    }
  }
  builtin_fail(builtin, ctx, "unknown match mode " + std::to_string(mode));
}

inline const shape_vector& shape_of(const value& x, std::string_view builtin, std::string_view ctx) {
  if (x.is_tensor()) return x.tensor_ref().shape;
  if (x.is_shape()) return x.as_shape();
  builtin_fail(builtin, ctx, "expected a tensor or a shape, got " + std::string(name(x.kind())));
}

inline dtype dtype_named(std::string_view s, std::string_view builtin) {
  auto t = parse_dtype(s);
  if (!t || !is_known(*t)) builtin_fail(builtin, "", "unknown dtype '" + std::string(s) + "'");
  return *t;
}

}  // namespace detail

/// The built-ins as C++ functions, under their names without the "vm.builtin." prefix: what the
/// registry holds, and what generated code calls directly.
namespace builtin {

using detail::builtin_fail;

inline auto alloc_shape_heap(vm_context& vm, std::int64_t size) {
  if (size < 0) builtin_fail("alloc_shape_heap", "", "negative size " + std::to_string(size));
  return tensor::zeros({size}, dtype::int64, vm.allocator_for(0));
}

inline auto match_shape(call_args a) {
  constexpr std::string_view fn = "match_shape";
  if (a.size() < 4) builtin_fail(fn, "", "expects (x, heap, ndim, (mode, value)*ndim, err_ctx), got " + std::to_string(a.size()) + " arguments");
  const std::string_view ctx = a[a.size() - 1].is_string() ? std::string_view(a[a.size() - 1].as_string()) : std::string_view();
  const std::int64_t ndim = a[2].as_int();
  if (ndim < 0 || std::size_t(ndim) * 2 + 4 != a.size())
    builtin_fail(fn, ctx, std::to_string(a.size()) + " arguments do not match ndim " + std::to_string(ndim));
  const shape_vector& shape = detail::shape_of(a[0], fn, ctx);
  if (std::int64_t(shape.size()) != ndim)
    builtin_fail(fn, ctx, "rank is " + std::to_string(shape.size()) + " (shape " + runtime::shape_to_string(shape) +
                              "), expected " + std::to_string(ndim));
  std::int64_t size;
  std::int64_t* heap = detail::heap_data(a[1], fn, size);
  for (std::int64_t i = 0; i < ndim; ++i)
    detail::match_one(shape[std::size_t(i)], a[3 + 2 * std::size_t(i)].as_int(), a[4 + 2 * std::size_t(i)].as_int(), heap,
                      size, fn, ctx, [&] { return "dimension " + std::to_string(i) + " of shape " + runtime::shape_to_string(shape); });
}

inline auto make_shape(call_args a) {
  constexpr std::string_view fn = "make_shape";
  if (a.size() < 2) builtin_fail(fn, "", "expects (heap, ndim, (mode, value)*ndim)");
  const std::int64_t ndim = a[1].as_int();
  if (ndim < 0 || std::size_t(ndim) * 2 + 2 != a.size())
    builtin_fail(fn, "", std::to_string(a.size()) + " arguments do not match ndim " + std::to_string(ndim));
  std::int64_t size;
  std::int64_t* heap = detail::heap_data(a[0], fn, size);
  shape_vector dims(static_cast<std::size_t>(ndim));
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int64_t mode = a[2 + 2 * i].as_int(), v = a[3 + 2 * i].as_int();
    if (mode == std::int64_t(make_shape_code::use_imm)) dims[i] = v;
    else if (mode == std::int64_t(make_shape_code::load_shape)) dims[i] = detail::heap_slot(heap, size, v, fn, "");
    else builtin_fail(fn, "", "unknown make_shape mode " + std::to_string(mode));
  }
  return value::shape(std::move(dims));
}

inline auto match_prim_value(std::int64_t x, const value& heap, std::int64_t mode, std::int64_t v, std::string_view ctx) {
  std::int64_t size;
  std::int64_t* h = detail::heap_data(heap, "match_prim_value", size);
  detail::match_one(x, mode, v, h, size, "match_prim_value", ctx, [] { return std::string("the value"); });
}

inline auto eval_shape_expr(call_args a) {
  constexpr std::string_view fn = "eval_shape_expr";
  if (a.size() < 4 || a.size() % 2 != 0) builtin_fail(fn, "", "expects (heap, dst, (kind, value)+), got " + std::to_string(a.size()) + " arguments");
  std::int64_t size;
  std::int64_t* heap = detail::heap_data(a[0], fn, size);
  std::vector<std::int64_t> stack;
  for (std::size_t i = 2; i < a.size(); i += 2) {
    const std::int64_t kind = a[i].as_int(), v = a[i + 1].as_int();
    if (kind == 0) {
      stack.push_back(v);
    } else if (kind == 1) {
      stack.push_back(detail::heap_slot(heap, size, v, fn, ""));
    } else if (kind == 2) {
      if (stack.size() < 2) builtin_fail(fn, "", "operator " + std::to_string(v) + " needs two operands");
      const std::int64_t y = stack.back();
      stack.pop_back();
      std::int64_t& x = stack.back();
      bool overflow = false;
      switch (v) {
        case 0: overflow = __builtin_add_overflow(x, y, &x); break;
        case 1: overflow = __builtin_sub_overflow(x, y, &x); break;
        case 2: overflow = __builtin_mul_overflow(x, y, &x); break;
        case 3:
        case 4: {
          if (y == 0) builtin_fail(fn, "", "division by zero in a shape expression");
          if (x == INT64_MIN && y == -1) overflow = true;
          else {
            std::int64_t q = x / y;
            if (x % y != 0 && ((x < 0) != (y < 0))) --q;
            x = v == 3 ? q : x - q * y;
          }
          break;
        }
        case 5: x = std::min(x, y); break;
        case 6: x = std::max(x, y); break;
        default: builtin_fail(fn, "", "unknown operator " + std::to_string(v));
      }
      if (overflow) builtin_fail(fn, "", "integer overflow in a shape expression");
    } else {
      builtin_fail(fn, "", "unknown kind " + std::to_string(kind));
    }
  }
  if (stack.size() != 1) builtin_fail(fn, "", "the expression leaves " + std::to_string(stack.size()) + " values, not one");
  detail::heap_slot(heap, size, a[1].as_int(), fn, "") = stack.back();
}

inline auto shape_heap_load(const value& heap, std::int64_t i) {
  std::int64_t size;
  std::int64_t* h = detail::heap_data(heap, "shape_heap_load", size);
  return detail::heap_slot(h, size, i, "shape_heap_load", "");
}

inline auto check_upper_bound(const value& heap, std::int64_t i, std::int64_t bound, const std::string& var, const std::string& ctx) {
  std::int64_t size;
  std::int64_t* h = detail::heap_data(heap, "check_upper_bound", size);
  const std::int64_t v = detail::heap_slot(h, size, i, "check_upper_bound", ctx);
  if (v > bound)
    builtin_fail("check_upper_bound", ctx,
                 "size variable " + var + " = " + std::to_string(v) + " exceeds its upper bound " + std::to_string(bound) +
                     " (the function's tir_var_upper_bound attribute; memory was planned for at most that)");
}

inline auto copy(const value& x) { return x; }

inline auto null_value() { return value(); }

inline bool read_if_cond(const value& x) {
  if (x.is_bool()) return x.as_bool();
  if (x.is_int()) return x.as_int() != 0;
  if (x.is_tensor()) {
    const tensor t = x.as_tensor();
    if (t.numel() != 1) builtin_fail("read_if_cond", "", "the condition tensor " + describe(t) + " has more than one element");
    return detail::truth_of_element(t);
  }
  builtin_fail("read_if_cond", "", "expected bool, int or a one-element tensor, got " + std::string(name(x.kind())));
}

inline auto alloc_storage(vm_context& vm, const shape_vector& shape, std::int64_t device, std::string_view dtype_name, std::string_view /*scope*/) {
        const dtype t = detail::dtype_named(dtype_name, "alloc_storage");
        const std::int64_t n = runtime::checked_numel(shape, "vm.builtin.alloc_storage");
        std::size_t bytes;
        if (__builtin_mul_overflow(std::size_t(n), size_of(t), &bytes))
          builtin_fail("alloc_storage", "", runtime::shape_to_string(shape) + " elements do not fit in memory");
        return object_ptr<const runtime::storage>(runtime::make_storage(bytes, vm.allocator_for(device)));
      }

inline auto alloc_tensor(object_ptr<const runtime::storage> st, std::int64_t offset, const shape_vector& shape, std::string_view dtype_name) {
  if (offset < 0) builtin_fail("alloc_tensor", "", "negative byte offset " + std::to_string(offset));
  return tensor::from_storage(std::move(st), std::size_t(offset), detail::dtype_named(dtype_name, "alloc_tensor"), shape);
}

inline auto tuple_getitem(std::span<const value> t, std::int64_t i) {
  if (i < 0 || std::size_t(i) >= t.size())
    builtin_fail("tuple_getitem", "", "index " + std::to_string(i) + " is out of range for a tuple of " + std::to_string(t.size()));
  return t[std::size_t(i)];
}

inline auto tuple_size(std::span<const value> t) { return std::int64_t(t.size()); }

inline auto shape_of(tensor t) { return t.shape(); }

inline auto make_closure(const value& f, call_args captured) {
  std::vector<value> bound;
  for (std::size_t i = 0; i < captured.size(); ++i) bound.push_back(captured[i]);
  return bind_last_args(f.as_closure(), std::move(bound));
}

inline auto invoke_closure(vm_context& vm, const value& f, call_args args) { return vm.call(f, args); }

inline auto check_tensor_info(const value& x, std::int64_t ndim, std::string_view dt, std::string_view ctx) {
  if (!x.is_tensor()) builtin_fail("check_tensor_info", ctx, "expected a tensor, got " + std::string(name(x.kind())));
  const tensor t = x.as_tensor();
  if (ndim >= 0 && std::int64_t(t.ndim()) != ndim)
    builtin_fail("check_tensor_info", ctx, "rank is " + std::to_string(t.ndim()) + ", expected " + std::to_string(ndim));
  if (!dt.empty() && name(t.type()) != dt)
    builtin_fail("check_tensor_info", ctx, "dtype is " + std::string(name(t.type())) + ", expected " + std::string(dt));
}

inline auto check_shape_info(const value& x, std::int64_t ndim, std::string_view ctx) {
  if (!x.is_shape()) builtin_fail("check_shape_info", ctx, "expected a shape, got " + std::string(name(x.kind())));
  if (ndim >= 0 && std::int64_t(x.as_shape().size()) != ndim)
    builtin_fail("check_shape_info", ctx, "rank is " + std::to_string(x.as_shape().size()) + ", expected " + std::to_string(ndim));
}

inline auto check_tuple_info(const value& x, std::int64_t size, std::string_view ctx) {
  if (!x.is_tuple()) builtin_fail("check_tuple_info", ctx, "expected a tuple, got " + std::string(name(x.kind())));
  if (std::int64_t(x.as_tuple().size()) != size)
    builtin_fail("check_tuple_info", ctx, "size is " + std::to_string(x.as_tuple().size()) + ", expected " + std::to_string(size));
}

inline value make_tuple(call_args a) {
  std::vector<value> items;
  items.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) items.push_back(a[i]);
  return value::tuple(std::move(items));
}

/// The cache a value holds, or a `value_error` naming the built-in.
inline object_ptr<const runtime::attention_kv_cache> kv_cache_of(const value& v, std::string_view fn) {
  const auto* c = v.holds_object() ? dynamic_cast<const runtime::attention_kv_cache*>(&v.as_object()) : nullptr;
  if (!c) builtin_fail(fn, "", "expected a key/value cache (vm.AttentionKVCache, from attention_kv_cache_create), got " + std::string(name(v.kind())));
  return object_ptr<const runtime::attention_kv_cache>(c);
}

inline value attention_kv_cache_create(call_args a) {
  constexpr std::string_view fn = "attention_kv_cache_create";
  if (a.size() != 3 && a.size() != 4)
    builtin_fail(fn, "", "expects (init, reserve_shape, fill_count[, axis]), got " + std::to_string(a.size()) + " arguments");
  if (!a[0].is_tensor()) builtin_fail(fn, "", "the initial data must be a tensor, got " + std::string(name(a[0].kind())));
  const shape_vector& reserve = detail::shape_of(a[1], fn, "");
  try {
    return value::from_object(runtime::make_object<runtime::attention_kv_cache>(a[0].as_tensor(), reserve, a[2].as_int(), a.size() == 4 ? a[3].as_int() : 0));
  } catch (const usage_error& e) {
    builtin_fail(fn, "", e.what());
  }
}

inline value attention_kv_cache_append(const value& cache, tensor x) {
  try {
    kv_cache_of(cache, "attention_kv_cache_append")->append(x);
  } catch (const usage_error& e) {
    builtin_fail("attention_kv_cache_append", "", e.what());
  }
  return cache;
}

inline tensor attention_kv_cache_view(const value& cache, const value& shape) {
  constexpr std::string_view fn = "attention_kv_cache_view";
  const shape_vector& s = detail::shape_of(shape, fn, "");
  try {
    return kv_cache_of(cache, fn)->view(s);
  } catch (const usage_error& e) {
    builtin_fail(fn, "", e.what());
  }
}

namespace detail {

/// `f(cache)` for each cache of the tuple `a[0]`, after checking them all (a refused call changes none).
template <class F>
value for_each_kv_cache(call_args a, std::size_t arity, std::string_view fn, const char* signature, F&& f) {
  if (a.size() != arity) builtin_fail(fn, "", std::string("expects ") + signature + ", got " + std::to_string(a.size()) + " arguments");
  if (!a[0].is_tuple()) builtin_fail(fn, "", "expected a tuple of key/value caches, got " + std::string(name(a[0].kind())));
  std::vector<object_ptr<const runtime::attention_kv_cache>> caches;
  for (const value& v : a[0].as_tuple()) caches.push_back(kv_cache_of(v, fn));
  try {
    for (const auto& c : caches) f(*c);
  } catch (const usage_error& e) {
    builtin_fail(fn, "", e.what());
  }
  return value();
}

}  // namespace detail

inline value attention_kv_cache_array_popn(call_args a) {
  constexpr std::string_view fn = "attention_kv_cache_array_popn";
  if (a.size() == 2 && !a[1].is_int()) builtin_fail(fn, "", "the count must be an integer, got " + std::string(name(a[1].kind())));
  const std::int64_t n = a.size() == 2 ? a[1].as_int() : 0;
  if (a.size() == 2 && a[0].is_tuple()) {
    // Every cache holds n positions for each time the tuple names it, or none is changed.
    std::map<const runtime::attention_kv_cache*, std::int64_t> times;
    for (const value& v : a[0].as_tuple()) ++times[kv_cache_of(v, fn).get()];
    for (const auto& [cache, k] : times) {
      const std::int64_t have = cache->length();
      if (n < 0 || n > have / k) {
        const std::string repeated = k > 1 ? " " + std::to_string(k) + " times (the tuple holds it " + std::to_string(k) + " times)" : "";
        builtin_fail(fn, "", "cannot pop " + std::to_string(n) + " positions" + repeated + " of a cache holding " + std::to_string(have));
      }
    }
  }
  return detail::for_each_kv_cache(a, 2, fn, "(caches, n)", [n](const runtime::attention_kv_cache& c) { c.pop_n(n); });
}

inline value attention_kv_cache_array_clear(call_args a) {
  return detail::for_each_kv_cache(a, 1, "attention_kv_cache_array_clear", "(caches)", [](const runtime::attention_kv_cache& c) { c.clear(); });
}

}  // namespace builtin

/// Every built-in, for `register_builtins` and code generators: X(name) is "vm.builtin.<name>",
/// the function `builtin::<name>`.
#define KILN_VM_BUILTINS(X) \
  X(alloc_shape_heap) X(match_shape) X(make_shape) X(match_prim_value) X(eval_shape_expr) \
  X(shape_heap_load) X(check_upper_bound) X(copy) X(null_value) X(read_if_cond) X(alloc_storage) \
  X(alloc_tensor) X(tuple_getitem) X(tuple_size) X(shape_of) X(make_closure) X(invoke_closure) \
  X(check_tensor_info) X(check_shape_info) X(check_tuple_info) X(make_tuple) X(attention_kv_cache_create) \
  X(attention_kv_cache_append) X(attention_kv_cache_view) X(attention_kv_cache_array_popn) X(attention_kv_cache_array_clear)

#define KILN_VM_BUILTIN_NAME(name) #name,
/// The names of the built-ins, without the "vm.builtin." prefix.
inline constexpr std::string_view builtin_names[] = {KILN_VM_BUILTINS(KILN_VM_BUILTIN_NAME)};
#undef KILN_VM_BUILTIN_NAME

/// Adds every built-in to `r`.
KILN_DECL void register_builtins(function_registry& r);

/// The process-wide registry VMs resolve names in by default; it starts with the built-ins, and
/// users add their own functions to it (or make a registry of their own).
KILN_DECL function_registry& global_registry();

}  // namespace kiln::vm

#if !defined(KILN_SEPARATE_COMPILATION)
#include <kiln/vm/impl/builtins.ipp>
#endif
