// SPDX-License-Identifier: Apache-2.0
/// \file
/// A model file read without reading its weights: `import_file` maps the file and parses only
/// what is not a large weight, and the weights become constants over the file's own pages
/// (`ir::ndarray::map`). The compiler reads each weight once — to pack it, or to copy it into the
/// executable — and gives its pages back then, so a model's weights are never in memory twice
/// (as ONNX Runtime maps external data, and llama.cpp its models).
///
/// `skeleton_of` walks the protobuf wire format of a `ModelProto` down to the main graph's
/// initializers and writes the model again with each large raw_data replaced by one byte — a
/// placeholder that keeps the tensor valid ONNX for the checker and the version converter — while
/// noting where the real bytes lie. It reads the bytes it is given and nothing else, checks every
/// length against them, and gives up (nothing: parse the file as it is) on anything it does not
/// follow: a malformed varint or length, a group, a tensor that is not plain raw data, two
/// initializers of one name. Parsing the skeleton then gives the model protobuf would have given,
/// each large initializer's raw_data apart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>

namespace kiln::frontend::onnx::detail {

/// The model without its large weights, and where they are.
struct model_skeleton {
  std::string bytes;  ///< a serialized ModelProto
  /// Main-graph initializer name -> its raw_data, within the bytes given to skeleton_of.
  std::map<std::string, std::span<const std::byte>> raw_data;
};

namespace wire {

enum : std::uint32_t { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

/// One field of a message: its number, wire type, payload (a LEN field's bytes; empty for the
/// others) and its whole extent, tag included.
struct field {
  std::uint32_t number = 0, type = 0;
  std::span<const std::byte> payload, whole;
};

/// Reads fields one at a time; `ok()` is false from the first malformed byte on.
class reader {
public:
  explicit reader(std::span<const std::byte> bytes) noexcept : bytes_(bytes) {}
  bool done() const noexcept { return pos_ >= bytes_.size() || !ok_; }
  bool ok() const noexcept { return ok_; }
  /// The next field; call while !done().
  field next() noexcept {
    field f;
    const std::size_t start = pos_;
    const std::uint64_t tag = read_varint();
    f.number = std::uint32_t(tag >> 3);
    f.type = std::uint32_t(tag & 7);
    if (!ok_ || f.number == 0 || tag >> 32) return fail();
    switch (f.type) {
      case varint: read_varint(); break;
      case fixed64: skip(8); break;
      case fixed32: skip(4); break;
      case length_delimited: {
        const std::uint64_t n = read_varint();
        if (!ok_ || n > bytes_.size() - pos_) return fail();
        f.payload = bytes_.subspan(pos_, std::size_t(n));
        pos_ += std::size_t(n);
        break;
      }
      default: return fail();  // groups (3, 4), which ONNX does not use, and the invalid 6, 7
    }
    if (!ok_) return fail();
    f.whole = bytes_.subspan(start, pos_ - start);
    return f;
  }

private:
  std::uint64_t read_varint() noexcept {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) break;
      const auto b = std::to_integer<std::uint64_t>(bytes_[pos_++]);
      v |= (b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok_ = false;
    return 0;
  }
  void skip(std::size_t n) noexcept {
    if (n > bytes_.size() - pos_) ok_ = false;
    else pos_ += n;
  }
  field fail() noexcept {
    ok_ = false;
    return {};
  }

  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

inline void put_varint(std::string& out, std::uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += char((v & 0x7f) | 0x80);
  out += char(v);
}
inline void put_bytes(std::string& out, std::span<const std::byte> b) { out.append(reinterpret_cast<const char*>(b.data()), b.size()); }
inline void put_message(std::string& out, std::uint32_t number, const std::string& payload) {
  put_varint(out, std::uint64_t(number) << 3 | length_delimited);
  put_varint(out, payload.size());
  out += payload;
}

}  // namespace wire

/// The field numbers of onnx.proto this walk follows.
namespace fields {
inline constexpr std::uint32_t model_graph = 7, graph_initializer = 5;
inline constexpr std::uint32_t tensor_segment = 3, tensor_name = 8, tensor_raw_data = 9, tensor_external_data = 13,
                               tensor_data_location = 14;
}  // namespace fields

/// `tensor` (a TensorProto's bytes) written to `out`, its raw_data replaced by one byte when it is
/// plain raw data of at least `min_bytes` (then noted in `raw`); false when malformed.
inline bool skeleton_tensor(std::span<const std::byte> tensor, std::size_t min_bytes, std::string& out,
                            std::map<std::string, std::span<const std::byte>>& raw, bool& duplicate) {
  std::span<const std::byte> data, name;
  int raw_fields = 0;
  bool plain = true;
  for (wire::reader r(tensor); !r.done();) {
    const wire::field f = r.next();
    if (!r.ok()) return false;
    if (f.number == fields::tensor_raw_data) ++raw_fields, data = f.payload, plain &= f.type == wire::length_delimited;
    else if (f.number == fields::tensor_name && f.type == wire::length_delimited) name = f.payload;
    else if (f.number == fields::tensor_segment || f.number == fields::tensor_external_data || f.number == fields::tensor_data_location)
      plain = false;
  }
  if (!plain || raw_fields != 1 || data.size() < min_bytes || name.empty()) {
    wire::put_bytes(out, tensor);
    return true;
  }
  for (wire::reader r(tensor); !r.done();) {
    const wire::field f = r.next();
    if (f.number != fields::tensor_raw_data) {
      wire::put_bytes(out, f.whole);
      continue;
    }
    out += char(fields::tensor_raw_data << 3 | wire::length_delimited);
    out += char(1);
    out += char(0);
  }
  const std::string key(reinterpret_cast<const char*>(name.data()), name.size());
  duplicate |= !raw.emplace(key, data).second;
  return true;
}

/// The skeleton of the ModelProto in `model` (see the file's comment), keeping in place the
/// main graph's initializers whose raw_data has at least `min_bytes`; nothing when the walk gives
/// up or there is no such initializer.
inline std::optional<model_skeleton> skeleton_of(std::span<const std::byte> model, std::size_t min_bytes) {
  model_skeleton s;
  bool duplicate = false;
  for (wire::reader r(model); !r.done();) {
    const wire::field f = r.next();
    if (!r.ok()) return std::nullopt;
    if (f.number != fields::model_graph || f.type != wire::length_delimited) {
      wire::put_bytes(s.bytes, f.whole);
      continue;
    }
    std::string graph;
    for (wire::reader g(f.payload); !g.done();) {
      const wire::field gf = g.next();
      if (!g.ok()) return std::nullopt;
      if (gf.number != fields::graph_initializer || gf.type != wire::length_delimited) {
        wire::put_bytes(graph, gf.whole);
        continue;
      }
      std::string tensor;
      if (!skeleton_tensor(gf.payload, min_bytes, tensor, s.raw_data, duplicate)) return std::nullopt;
      wire::put_message(graph, fields::graph_initializer, tensor);
    }
    wire::put_message(s.bytes, fields::model_graph, graph);
  }
  if (duplicate || s.raw_data.empty()) return std::nullopt;
  return s;
}

}  // namespace kiln::frontend::onnx::detail
