// SPDX-License-Identifier: Apache-2.0
/// \file
/// The executable's binary format: `serialize`, `deserialize`, `save_executable`, `load_executable`.
///
/// Every number is little-endian. `u64`/`i64` are 8 bytes, `u8` one byte; a `string` is a u64
/// length followed by that many bytes (UTF-8, no terminator).
///
///     header      u64 magic 0xD225DE2F4214151E
///                 string version                    "kiln-vm-0.1"
///     globals     u64 count, then per function:
///                 u8 kind (0 native, 1 bytecode, 2 compiled), string name,
///                 i64 start_instr, i64 end_instr, i64 num_args, i64 register_file_size,
///                 u64 count, string param_names[count],
///                 u64 count, signature param_types[count], signature ret_type
///     memory      u64 count, then per entry: i64 constant index, string scope
///     constants   u64 count, then per constant: u8 tag and its payload:
///                 0 null | 1 int: i64 | 2 float: f64 bits as u64 | 3 bool: u8 (0 or 1)
///                 4 string: string | 5 shape: u64 ndim, i64 dims[ndim]
///                 6 tensor: u8 dtype (kiln::dtype's numbering), u64 ndim, i64 dims[ndim],
///                   then numel x element-size bytes in row-major order
///                 7 tuple: u64 count, then `count` constants (nested at most 32 deep)
///     bytecode    u64 count, i64 instr_offset[count], u64 count, i64 instr_data[count]
///
/// A `signature` (`type_signature`) is u8 kind (0 object, 1 tensor, 2 shape, 3 prim, 4 tuple,
/// 5 callable), u8 dtype (0 unknown), i64 ndim (-1 unknown), u8 has_dims, then when has_dims is 1
/// u64 count and that many dimensions, each i64 size (-1 symbolic) and string expression (empty
/// when constant; `validate` checks that count and ndim agree),
/// then u64 count and that many field signatures (tuples; nested at most 32 deep).
///
/// Nothing may follow. `deserialize` reads with bounds checks — a count is compared with the
/// bytes left before anything is allocated — and then runs `validate`, so a byte string either
/// becomes a valid executable or raises a `format_error` that names the section, the byte offset
/// and the problem. Only null, numbers, strings, shapes, tensors and tuples of them are constants.
#pragma once

#include <kiln/support/error.hpp>
#include <kiln/support/strings.hpp>
#include <kiln/support/file.hpp>
#include <kiln/vm/executable.hpp>

#include <bit>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace kiln::vm {

inline constexpr std::uint64_t executable_magic = 0xD225DE2F4214151EULL;
inline constexpr std::string_view executable_version = "kiln-vm-0.2";

namespace detail {

enum class const_tag : std::uint8_t { null = 0, int_ = 1, float_ = 2, bool_ = 3, string = 4, shape = 5, tensor = 6, tuple = 7 };
inline constexpr int max_constant_depth = 32;

class byte_writer {
public:
  void u8(std::uint8_t v) { out.push_back(std::byte(v)); }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(std::byte((v >> (8 * i)) & 0xff));
  }
  void i64(std::int64_t v) { u64(std::uint64_t(v)); }
  void str(std::string_view s) {
    u64(s.size());
    for (char c : s) out.push_back(std::byte(c));
  }
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
  }

  void constant(const value& v, std::size_t index) {
    switch (v.kind()) {
      case value_kind::null: u8(std::uint8_t(const_tag::null)); return;
      case value_kind::int_: u8(std::uint8_t(const_tag::int_)); i64(v.as_int()); return;
      case value_kind::float_: u8(std::uint8_t(const_tag::float_)); u64(std::bit_cast<std::uint64_t>(v.as_float())); return;
      case value_kind::bool_: u8(std::uint8_t(const_tag::bool_)); u8(v.as_bool()); return;
      case value_kind::string: u8(std::uint8_t(const_tag::string)); str(v.as_string()); return;
      case value_kind::shape:
        u8(std::uint8_t(const_tag::shape));
        u64(v.as_shape().size());
        for (auto d : v.as_shape()) i64(d);
        return;
      case value_kind::tensor: {
        const tensor t = v.as_tensor().contiguous();
        u8(std::uint8_t(const_tag::tensor));
        u8(std::uint8_t(t.type()));
        u64(t.ndim());
        for (auto d : t.shape()) i64(d);
        bytes(t.data(), t.nbytes());
        return;
      }
      case value_kind::tuple:
        u8(std::uint8_t(const_tag::tuple));
        u64(v.as_tuple().size());
        for (const auto& item : v.as_tuple()) constant(item, index);
        return;
      case value_kind::vm:
      case value_kind::closure:
      case value_kind::object: break;
    }
    throw usage_error("kiln::vm::serialize: constant " + std::to_string(index) + " is a " + std::string(name(v.kind())) +
                      ", which cannot be serialized (constants are null, numbers, strings, shapes, tensors and tuples)");
  }

  void signature(const type_signature& s) {
    u8(std::uint8_t(s.kind));
    u8(std::uint8_t(s.dt));
    i64(s.ndim);
    u8(s.dims ? 1 : 0);
    if (s.dims) u64(s.dims->size());
    if (s.dims)
      for (const auto& d : *s.dims) {
        i64(d.size);
        str(d.expr);
      }
    u64(s.fields.size());
    for (const auto& f : s.fields) signature(f);
  }

  std::vector<std::byte> out;
};

class byte_reader {
public:
  byte_reader(std::span<const std::byte> b, std::string_view source) : b_(b), source_(source) {}

  [[noreturn]] void fail(const std::string& msg) const {
    throw format_error("kiln::vm: " + std::string(source_) + ": " + msg + " (section '" + section + "', byte " +
                       std::to_string(at_) + ")");
  }
  std::size_t left() const noexcept { return b_.size() - at_; }
  std::size_t offset() const noexcept { return at_; }
  void need(std::size_t n, std::string_view what) const {
    if (n > left())
      fail("truncated: " + std::string(what) + " needs " + std::to_string(n) + " bytes, " + std::to_string(left()) +
           " remain");
  }
  std::uint8_t u8(std::string_view what) {
    need(1, what);
    return std::to_integer<std::uint8_t>(b_[at_++]);
  }
  std::uint64_t u64(std::string_view what) {
    need(8, what);
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t(std::to_integer<std::uint8_t>(b_[at_ + std::size_t(i)])) << (8 * i);
    at_ += 8;
    return v;
  }
  std::int64_t i64(std::string_view what) { return std::int64_t(u64(what)); }
  /// A count of items each at least `min_item_bytes` long, checked against the bytes left.
  std::size_t count(std::string_view what, std::size_t min_item_bytes) {
    const std::uint64_t n = u64(what);
    if (min_item_bytes > 0 && n > left() / min_item_bytes)
      fail(std::string(what) + " is " + std::to_string(n) + ", more than the " + std::to_string(left()) +
           " remaining bytes can hold");
    return std::size_t(n);
  }
  std::string str(std::string_view what, std::size_t max_length = SIZE_MAX) {
    const std::size_t n = count(what, 1);
    if (n > max_length) fail(std::string(what) + " is " + std::to_string(n) + " bytes long, at most " + std::to_string(max_length) + " expected");
    std::string s(reinterpret_cast<const char*>(b_.data() + at_), n);
    at_ += n;
    return s;
  }

  value constant(std::size_t index, int depth) {
    const std::string what = "constant " + std::to_string(index);
    if (depth > max_constant_depth) fail(what + " nests tuples more than " + std::to_string(max_constant_depth) + " deep");
    const std::uint8_t tag = u8(what + " tag");
    switch (const_tag(tag)) {
      case const_tag::null: return value();
      case const_tag::int_: return value(i64(what));
      case const_tag::float_: return value(std::bit_cast<double>(u64(what)));
      case const_tag::bool_: {
        const std::uint8_t b = u8(what);
        if (b > 1) fail(what + " is a bool stored as " + std::to_string(b));
        return value(b == 1);
      }
      case const_tag::string: return value(str(what + " length"));
      case const_tag::shape: {
        shape_vector dims(count(what + " rank", 8));
        for (auto& d : dims) d = i64(what + " dimension");
        return value::shape(std::move(dims));
      }
      case const_tag::tensor: {
        const std::uint8_t t = u8(what + " dtype");
        if (t == 0 || t > std::uint8_t(dtype::float64)) fail(what + " has unknown dtype code " + std::to_string(t));
        shape_vector dims(count(what + " rank", 8));
        for (auto& d : dims) {
          d = i64(what + " dimension");
          if (d < 0) fail(what + " has negative dimension " + std::to_string(d));
        }
        const std::size_t item = size_of(dtype(t));
        std::size_t numel = 1;
        for (auto d : dims)
          if (__builtin_mul_overflow(numel, std::size_t(d), &numel)) fail(what + ": shape " + runtime::shape_to_string(dims) + " overflows");
        try {
          (void)runtime::contiguous_strides(dims);  // (0, 2^32, 2^32): no elements, but no strides either
        } catch (const usage_error&) {
          fail(what + ": shape " + runtime::shape_to_string(dims) + " is too large: its strides overflow int64");
        }
        if (numel > left() / item)
          fail("truncated: " + what + " (" + std::string(name(dtype(t))) + runtime::shape_to_string(dims) + ") needs " +
               std::to_string(numel) + " elements of " + std::to_string(item) + " bytes, " + std::to_string(left()) + " bytes remain");
        tensor out = tensor::empty(std::move(dims), dtype(t));
        if (out.nbytes()) std::memcpy(out.data(), b_.data() + at_, out.nbytes());
        at_ += out.nbytes();
        if (dtype(t) == dtype::bool_)
          for (std::size_t i = 0; i < out.nbytes(); ++i)
            if (static_cast<std::uint8_t*>(out.data())[i] > 1) fail(what + " holds a bool element that is not 0 or 1");
        return value(out);
      }
      case const_tag::tuple: {
        std::vector<value> items(count(what + " tuple size", 1));
        for (auto& item : items) item = constant(index, depth + 1);
        return value::tuple(std::move(items));
      }
    }
    fail(what + " has unknown tag " + std::to_string(tag));
  }

  /// A signature; its shape is checked by `validate` once everything is read.
  type_signature signature(const std::string& what, int depth) {
    if (depth > max_constant_depth) fail(what + " nests tuples more than " + std::to_string(max_constant_depth) + " deep");
    type_signature s;
    const std::uint8_t kind = u8(what + " kind");
    if (kind > std::uint8_t(signature_kind::callable)) fail(what + " has unknown kind " + std::to_string(kind));
    s.kind = signature_kind(kind);
    const std::uint8_t t = u8(what + " dtype");
    if (t > std::uint8_t(dtype::float64)) fail(what + " has unknown dtype code " + std::to_string(t));
    s.dt = dtype(t);
    s.ndim = i64(what + " rank");
    const std::uint8_t has_dims = u8(what + " dimension flag");
    if (has_dims > 1) fail(what + " has dimension flag " + std::to_string(has_dims));
    if (has_dims) {
      s.dims.emplace(count(what + " dimension count", 16));
      for (auto& d : *s.dims) {
        d.size = i64(what + " dimension");
        d.expr = str(what + " dimension expression", 4096);
      }
    }
    s.fields.resize(count(what + " field count", 19));
    for (auto& f : s.fields) f = signature(what + " field", depth + 1);
    return s;
  }

  std::string section = "header";

private:
  std::span<const std::byte> b_;
  std::string_view source_;
  std::size_t at_ = 0;
};

}  // namespace detail

/// The executable as bytes, in the format this header's comment describes.
inline std::vector<std::byte> serialize(const executable& e) {
  detail::byte_writer w;
  w.u64(executable_magic);
  w.str(executable_version);
  w.u64(e.functions.size());
  for (const auto& f : e.functions) {
    w.u8(std::uint8_t(f.kind));
    w.str(f.name);
    w.i64(f.start_instr);
    w.i64(f.end_instr);
    w.i64(f.num_args);
    w.i64(f.register_file_size);
    w.u64(f.param_names.size());
    for (const auto& p : f.param_names) w.str(p);
    w.u64(f.param_types.size());
    for (const auto& t : f.param_types) w.signature(t);
    w.signature(f.ret_type);
  }
  w.u64(e.memory_scopes.size());
  for (const auto& [index, scope] : e.memory_scopes) {
    w.i64(index);
    w.str(scope);
  }
  w.u64(e.constants.size());
  for (std::size_t i = 0; i < e.constants.size(); ++i) w.constant(e.constants[i], i);
  w.u64(e.instr_offset.size());
  for (auto o : e.instr_offset) w.i64(o);
  w.u64(e.instr_data.size());
  for (auto word : e.instr_data) w.i64(word);
  return std::move(w.out);
}

/// An executable from bytes `serialize` wrote; `source` names them in errors.
inline executable deserialize(std::span<const std::byte> bytes, std::string_view source = "executable bytes") {
  detail::byte_reader r(bytes, source);
  const std::uint64_t magic = r.u64("the magic number");
  if (magic != executable_magic) r.fail("not a kiln executable (bad magic number)");
  const std::string version = r.str("the version", 64);
  if (version != executable_version)
    r.fail("the executable was written in format '" + kiln::detail::printable(version) + "'; this kiln reads '" + std::string(executable_version) + "'");

  executable e;
  detail::byte_layout layout;
  r.section = "globals";
  e.functions.resize(r.count("the number of functions", 1 + 8 + 4 * 8 + 8 + 8 + 19));
  for (auto& f : e.functions) {
    layout.functions.push_back(r.offset());
    const std::uint8_t kind = r.u8("a function kind");
    if (kind > 2) r.fail("unknown function kind " + std::to_string(kind));
    f.kind = function_kind(kind);
    f.name = r.str("a function name");
    f.start_instr = r.i64("start_instr");
    f.end_instr = r.i64("end_instr");
    f.num_args = r.i64("num_args");
    f.register_file_size = r.i64("register_file_size");
    f.param_names.resize(r.count("the number of parameter names", 8));
    for (auto& p : f.param_names) p = r.str("a parameter name");
    f.param_types.resize(r.count("the number of parameter types", 19));
    for (auto& t : f.param_types) t = r.signature("the type of a parameter of '" + kiln::detail::printable(f.name) + "'", 0);
    f.ret_type = r.signature("the result type of '" + kiln::detail::printable(f.name) + "'", 0);
  }
  r.section = "memory scopes";
  e.memory_scopes.resize(r.count("the number of memory scopes", 16));
  for (auto& [index, scope] : e.memory_scopes) {
    layout.memory_scopes.push_back(r.offset());
    index = r.i64("a constant index");
    scope = r.str("a memory scope");
  }
  r.section = "constants";
  e.constants.resize(r.count("the number of constants", 1));
  for (std::size_t i = 0; i < e.constants.size(); ++i) e.constants[i] = r.constant(i, 0);
  r.section = "bytecode";
  e.instr_offset.resize(r.count("the number of instructions", 8));
  layout.instr_offsets = r.offset();
  for (auto& o : e.instr_offset) o = r.i64("an instruction offset");
  e.instr_data.resize(r.count("the number of bytecode words", 8));
  layout.instr_data = r.offset();
  for (auto& w : e.instr_data) w = r.i64("a bytecode word");
  if (r.left() != 0) r.fail(std::to_string(r.left()) + " bytes follow the end of the executable");
  validate(e, source, &layout);
  return e;
}

/// Writes `serialize(e)` to a file.
inline void save_executable(const executable& e, const std::filesystem::path& path) {
  kiln::detail::write_file(path, serialize(e), "kiln::vm::save_executable");
}

/// Reads and validates an executable file.
inline executable load_executable(const std::filesystem::path& path) {
  return deserialize(kiln::detail::read_file(path, "kiln::vm::load_executable"), kiln::detail::quote(path.string()));
}

}  // namespace kiln::vm
