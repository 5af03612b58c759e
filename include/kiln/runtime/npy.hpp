// SPDX-License-Identifier: Apache-2.0
/// \file
/// Reading and writing NumPy's `.npy` files, the ecosystem's interchange format for arrays.
///
/// Format (numpy.lib.format): the magic `\x93NUMPY`, a major and minor version byte, the header
/// length (little-endian uint16 for version 1, uint32 for versions 2 and 3), then a Python dict
/// literal `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` padded with spaces to a
/// multiple of 64 bytes and ended by a newline, then the raw elements.
///
/// kiln reads versions 1-3 with descriptors b1, i1, u1, i4, i8, f2, f4 and f8 in either byte order
/// (big-endian data is swapped) and C or Fortran order (the result is always a contiguous C-order
/// tensor). It writes version 1.0 (2.0 when the header needs more than 64 KiB) little-endian.
/// Anything else — structured or object dtypes, a truncated header or body, a shape that does not
/// match the data — is a `kiln::format_error` naming the source and the problem.
#pragma once

#include <kiln/runtime/tensor.hpp>
#include <kiln/support/strings.hpp>
#include <kiln/support/error.hpp>
#include <kiln/support/file.hpp>

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

namespace detail {

inline constexpr unsigned char npy_magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

struct npy_header {
  std::string descr;
  bool fortran_order = false;
  shape_vector shape;
  bool has_descr = false, has_order = false, has_shape = false;
};

/// Parser for the header's dict literal; `fail` throws with the column.
class npy_header_parser {
public:
  npy_header_parser(std::string_view text, std::string_view source) : s_(text), source_(source) {}

  npy_header parse() {
    npy_header h;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = quoted();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"')
          fail("a structured dtype (a list of fields) as 'descr' is not supported; kiln reads plain numeric arrays");
        h.descr = quoted();
        h.has_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        h.has_order = true;
      } else if (key == "shape") {
        h.shape = int_tuple();
        h.has_shape = true;
      } else {
        fail("unknown header key '" + key + "' (expected 'descr', 'fortran_order' and 'shape')");
      }
      skip_space();
      if (peek() == ',') ++i_;
      else if (peek() != '}') fail("expected ',' or '}'");
    }
    if (!h.has_descr || !h.has_order || !h.has_shape)
      fail(std::string("the header lacks '") + (!h.has_descr ? "descr" : !h.has_order ? "fortran_order" : "shape") + "'");
    return h;
  }

private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw format_error(std::string(source_) + ": bad .npy header at column " + std::to_string(i_ + 1) + ": " + msg);
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string quoted() {
    skip_space();
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string");
    const std::size_t end = s_.find(q, i_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string r(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return r;
  }
  bool boolean() {
    if (s_.substr(i_, 4) == "True") return i_ += 4, true;
    if (s_.substr(i_, 5) == "False") return i_ += 5, false;
    fail("expected True or False");
  }
  shape_vector int_tuple() {
    expect('(');
    shape_vector dims;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') fail("expected a non-negative integer dimension");
      std::int64_t d = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (__builtin_mul_overflow(d, 10, &d) || __builtin_add_overflow(d, peek() - '0', &d))
          fail("dimension does not fit in 64 bits");
        ++i_;
      }
      if (peek() == 'L') ++i_;  // Python 2 long suffix
      dims.push_back(d);
      skip_space();
      if (peek() == ',') ++i_;
      else if (peek() != ')') fail("expected ',' or ')' in the shape");
    }
    ++i_;
    return dims;
  }

  std::string_view s_, source_;
  std::size_t i_ = 0;
};

/// The dtype and whether bytes must be swapped, for an npy descriptor like "<f4".
inline std::pair<dtype, bool> npy_dtype(const std::string& descr, std::string_view source) {
  auto fail = [&](const std::string& why) -> std::pair<dtype, bool> {
    throw format_error(std::string(source) + ": unsupported .npy dtype '" + descr + "'" + why +
                       "; kiln reads b1, i1, u1, i4, i8, f2, f4 and f8");
  };
  if (descr.size() < 3) return fail("");
  const char order = descr[0];
  const std::string code = descr.substr(1);
  if (order != '<' && order != '>' && order != '|' && order != '=') return fail(" (unknown byte order)");
  static constexpr std::pair<std::string_view, dtype> table[] = {
      {"b1", dtype::bool_},   {"i1", dtype::int8},     {"u1", dtype::uint8},   {"i4", dtype::int32},
      {"i8", dtype::int64},   {"f2", dtype::float16},  {"f4", dtype::float32}, {"f8", dtype::float64}};
  for (auto& [c, t] : table)
    if (c == code) return {t, order == '>' && size_of(t) > 1};
  return fail(code[0] == 'c' ? " (complex)" : code[0] == 'O' ? " (Python objects)" : "");
}

inline std::string npy_descr(dtype t) {
  switch (t) {
    case dtype::bool_: return "|b1";
    case dtype::int8: return "|i1";
    case dtype::uint8: return "|u1";
    case dtype::int32: return "<i4";
    case dtype::int64: return "<i8";
    case dtype::float16: return "<f2";
    case dtype::float32: return "<f4";
    case dtype::float64: return "<f8";
    case dtype::void_: break;
  }
  throw usage_error("kiln::runtime::to_npy: a void tensor cannot be written");
}

inline std::uint32_t read_le(std::span<const std::byte> b, std::size_t at, std::size_t n) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= std::uint32_t(b[at + i]) << (8 * i);
  return v;
}

}  // namespace detail

static_assert(std::endian::native == std::endian::little, "kiln's .npy and executable formats assume a little-endian host");

/// A tensor from the bytes of an `.npy` file; `source` names them in errors.
inline tensor parse_npy(std::span<const std::byte> bytes, std::string_view source = "npy data",
                        allocator& a = default_allocator()) {
  auto fail = [&](const std::string& msg) -> tensor { throw format_error(std::string(source) + ": " + msg); };
  if (bytes.size() < 10) return fail("too short for an .npy file (" + std::to_string(bytes.size()) + " bytes)");
  for (std::size_t i = 0; i < 6; ++i)
    if (std::to_integer<unsigned char>(bytes[i]) != detail::npy_magic[i]) return fail("not an .npy file (bad magic)");
  const unsigned major = std::to_integer<unsigned>(bytes[6]);
  if (major < 1 || major > 3)
    return fail(".npy version " + std::to_string(major) + "." + std::to_string(std::to_integer<unsigned>(bytes[7])) +
                " is not supported (kiln reads 1.x, 2.x and 3.x)");
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + len_bytes) return fail("truncated header length");
  const std::size_t header_len = detail::read_le(bytes, 8, len_bytes);
  const std::size_t data_at = 8 + len_bytes + header_len;
  if (data_at > bytes.size())
    return fail("truncated header: it claims " + std::to_string(header_len) + " bytes, " +
                std::to_string(bytes.size() - 8 - len_bytes) + " remain");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8 + len_bytes, header_len);
  const auto h = detail::npy_header_parser(text, source).parse();
  const auto [type, swap] = detail::npy_dtype(h.descr, source);

  const std::int64_t n = [&] {
    try {
      (void)contiguous_strides(h.shape, "shape");  // (0, 2^32, 2^32) has no elements, but no strides either
      return checked_numel(h.shape, "shape");
    } catch (const usage_error& e) {
      throw format_error(std::string(source) + ": " + e.what());
    }
  }();
  const std::size_t item = size_of(type);
  const std::size_t available = bytes.size() - data_at;
  if (std::size_t(n) > available / item)
    return fail("truncated data: shape " + shape_to_string(h.shape) + " needs " + std::to_string(n) + " " +
                std::string(name(type)) + " elements of " + std::to_string(item) + " bytes, " +
                std::to_string(available) + " bytes remain");

  // Fortran order: the same bytes are the transposed array in C order.
  shape_vector stored = h.shape;
  if (h.fortran_order) std::reverse(stored.begin(), stored.end());
  tensor t = tensor::empty(stored, type, a);
  auto* out = static_cast<std::byte*>(t.data());
  if (t.nbytes()) std::memcpy(out, bytes.data() + data_at, t.nbytes());
  if (swap)
    for (std::size_t i = 0; i < t.nbytes(); i += item) std::reverse(out + i, out + i + item);
  if (type == dtype::bool_)  // numpy writes 0/1; anything else would not be a valid C++ bool
    for (std::size_t i = 0; i < t.nbytes(); ++i) out[i] = std::byte(out[i] != std::byte{0});
  if (!h.fortran_order) return t;
  shape_vector perm(stored.size());
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = std::int64_t(perm.size() - 1 - i);
  return t.permute(perm).clone(a);
}

/// Reads an `.npy` file.
inline tensor load_npy(const std::filesystem::path& path, allocator& a = default_allocator()) {
  return parse_npy(kiln::detail::read_file(path, "kiln::runtime::load_npy"), kiln::detail::quote(path.string()), a);
}

/// The bytes of an `.npy` file holding `t` (version 1.0 or 2.0, little-endian, C order).
inline std::vector<std::byte> to_npy(const tensor& t) {
  if (!t.defined()) throw usage_error("kiln::runtime::to_npy: the tensor is null");
  std::string dims = "(";
  for (std::size_t i = 0; i < t.ndim(); ++i) dims.append(std::to_string(t.shape(i))).append(t.ndim() == 1 || i + 1 < t.ndim() ? "," : "");
  dims.append(")");
  std::string header = "{'descr': '" + detail::npy_descr(t.type()) + "', 'fortran_order': False, 'shape': " + dims + ", }";
  const bool v2 = header.size() + 11 > 65535;
  const std::size_t preamble = v2 ? 12 : 10;
  const std::size_t total = (preamble + header.size() + 1 + 63) / 64 * 64;
  header.append(total - preamble - header.size() - 1, ' ').push_back('\n');
  std::vector<std::byte> out;
  out.reserve(total + t.nbytes());
  for (unsigned char c : detail::npy_magic) out.push_back(std::byte(c));
  out.push_back(std::byte(v2 ? 2 : 1));
  out.push_back(std::byte(0));
  for (std::size_t i = 0; i < preamble - 8; ++i) out.push_back(std::byte((header.size() >> (8 * i)) & 0xff));
  for (char c : header) out.push_back(std::byte(c));
  const tensor c = t.contiguous();
  const auto* p = static_cast<const std::byte*>(c.data());
  out.insert(out.end(), p, p + c.nbytes());
  return out;
}

/// Writes `t` to an `.npy` file.
inline void save_npy(const std::filesystem::path& path, const tensor& t) {
  kiln::detail::write_file(path, to_npy(t), "kiln::runtime::save_npy");
}

}  // namespace kiln::runtime
