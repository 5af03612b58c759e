// SPDX-License-Identifier: Apache-2.0
// GPT-2 written in kiln's IR with the block builder, its key/value caches kept as the program's
// state (TVM's vm.builtin.attention_kv_cache_*), as Relax models of decoders are written.
//
// The module has two functions:
//
//   create_kv_cache() -> R.Tuple(R.Object, ...)
//       one cache per layer for the keys and one for the values, each [heads, positions, head size],
//       empty, with room for n_positions positions (appends past it still work: the buffer grows).
//
//   forward(input_ids: R.Tensor((1, n), "int64"), all_seq_len: R.Shape([m]),
//           kv_cache: R.Tuple(R.Object, ...)) -> R.Tuple(R.Tensor((1, 1, vocab), "float32"), R.Tuple(R.Object, ...))
//       appends the n new positions to the caches and returns the logits of the last one and the
//       caches: m is the length after the append. A prefill passes the prompt (n = its length,
//       m = n), a decode step one token (n = 1, m = the length so far plus one). Both lengths are
//       symbolic and bounded by n_positions (`tir_var_upper_bound`), so one executable serves every
//       length and memory is planned once.
//
// The weights come from a directory that scripts/gpt2.py --weights writes: config.json (Hugging
// Face's GPT2Config names) and one NAME.npy per parameter, by PyTorch's state_dict names and
// layouts. They become the module's constants.
#pragma once

#include <kiln/kiln.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace gpt2_ir {

namespace ir = kiln::ir;
namespace vm = kiln::vm;
using kiln::dtype;

/// The model's shape: Hugging Face's GPT2Config fields of the same names.
struct config {
  std::int64_t n_layer = 0, n_embd = 0, n_head = 0, vocab_size = 0, n_positions = 0;
  double layer_norm_epsilon = 1e-5;
};

namespace detail {

/// A reader of the JSON in config.json: an object whose numbers it keeps; strings, booleans,
/// null, lists and nested objects (Hugging Face's config.json has them all) are skipped.
class json_numbers {
public:
  json_numbers(std::string text, std::string where) : text_(std::move(text)), where_(std::move(where)) {}

  std::map<std::string, double> object() {
    std::map<std::string, double> fields;
    expect('{');
    if (peek() == '}') { ++at_; return fields; }
    for (;;) {
      const std::string name = string();
      expect(':');
      if (at_number()) fields[name] = number();
      else skip_value();
      if (peek() == '}') { ++at_; return fields; }
      expect(',');
    }
  }

private:
  [[noreturn]] void fail(const std::string& what) const {
    throw kiln::error(where_ + ": " + what + " at byte " + std::to_string(at_));
  }
  char peek() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
    if (at_ == text_.size()) fail("unexpected end");
    return text_[at_];
  }
  void expect(char ch) {
    if (peek() != ch) fail(std::string("expected '") + ch + "'");
    ++at_;
  }
  std::string string() {
    expect('"');
    std::string s;
    while (at_ < text_.size() && text_[at_] != '"') {
      if (text_[at_] == '\\') ++at_;  // an escaped character is kept as it is: names here are plain
      if (at_ < text_.size()) s += text_[at_++];
    }
    if (at_ == text_.size()) fail("unterminated string");
    ++at_;
    return s;
  }
  bool at_number() {
    const char ch = peek();
    return ch == '-' || (ch >= '0' && ch <= '9');
  }
  double number() {
    char* end = nullptr;
    const double v = std::strtod(text_.c_str() + at_, &end);
    if (end == text_.c_str() + at_) fail("expected a number");
    at_ = std::size_t(end - text_.c_str());
    return v;
  }
  void skip_value() {
    const char ch = peek();
    if (at_number()) {
      number();
    } else if (ch == '"') {
      string();
    } else if (ch == '{' || ch == '[') {
      const char close = ch == '{' ? '}' : ']';
      ++at_;
      if (peek() == close) { ++at_; return; }
      for (;;) {
        if (close == '}') {
          string();
          expect(':');
        }
        skip_value();
        if (peek() == close) { ++at_; return; }
        expect(',');
      }
    } else if (text_.compare(at_, 4, "true") == 0 || text_.compare(at_, 4, "null") == 0) {
      at_ += 4;
    } else if (text_.compare(at_, 5, "false") == 0) {
      at_ += 5;
    } else {
      fail("expected a JSON value");
    }
  }

  std::string text_, where_;
  std::size_t at_ = 0;
};

}  // namespace detail

/// The configuration in `file` (config.json). The five sizes are required; fields kiln does not
/// use are skipped.
inline config read_config(const std::filesystem::path& file) {
  const std::string where = "gpt2_ir: '" + file.string() + "'";
  std::ifstream in(file);
  if (!in) throw kiln::error(where + ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::map<std::string, double> fields = detail::json_numbers(ss.str(), where).object();
  config c;
  auto size = [&](const char* name, std::int64_t& out) {
    const auto it = fields.find(name);
    if (it == fields.end()) throw kiln::error(where + ": no number '" + name + "'");
    if (!(it->second >= 1 && it->second <= 1e9 && it->second == std::floor(it->second)))
      throw kiln::error(where + ": '" + name + "' must be a positive integer, not " + std::to_string(it->second));
    out = std::int64_t(it->second);
  };
  size("n_layer", c.n_layer);
  size("n_embd", c.n_embd);
  size("n_head", c.n_head);
  size("vocab_size", c.vocab_size);
  size("n_positions", c.n_positions);
  if (const auto it = fields.find("layer_norm_epsilon"); it != fields.end()) c.layer_norm_epsilon = it->second;
  if (c.n_embd % c.n_head != 0)
    throw kiln::error(where + ": n_embd " + std::to_string(c.n_embd) + " is not a multiple of n_head " + std::to_string(c.n_head));
  return c;
}

/// A directory of weights: its config.json and, on demand, its NAME.npy files. It keeps the
/// constants it made (as the module built from it does): drop both once compiled, and only the
/// executable's copies of the weights stay.
class weights {
public:
  explicit weights(std::filesystem::path dir) : dir_(std::move(dir)), config_(read_config(dir_ / "config.json")) {}

  const config& cfg() const noexcept { return config_; }

  /// Parameter `name` (NAME.npy) as an IR constant, checked to be float32 of shape `shape`. A
  /// parameter used twice (the token embedding is also the LM head) is one constant.
  ir::expr constant(const std::string& name, std::vector<std::int64_t> shape) const {
    if (const auto it = loaded_.find(name); it != loaded_.end()) return it->second;
    const std::filesystem::path file = dir_ / (name + ".npy");
    kiln::runtime::tensor t = kiln::runtime::load_npy(file);
    const std::vector<std::int64_t> got(t.shape().begin(), t.shape().end());
    if (t.type() != dtype::float32 || got != shape)
      throw kiln::error("gpt2_ir: '" + file.string() + "' holds " + std::string(kiln::name(t.type())) + kiln::runtime::shape_to_string(got) +
                        ", expected float32" + kiln::runtime::shape_to_string(shape) + " (by config.json)");
    return loaded_[name] = ir::make_constant(kiln::transform::to_ndarray(t));
  }

private:
  std::filesystem::path dir_;
  config config_;
  mutable std::map<std::string, ir::expr> loaded_;
};

namespace detail {

/// Emits into a builder; one call per operator, named as the IR names them.
struct emitter {
  ir::block_builder& bb;

  ir::var op(const std::string& name, std::vector<ir::expr> args, const ir::attr_map& attrs = {}, std::string hint = {}) {
    return bb.emit(ir::call_op(name, std::move(args), attrs), std::move(hint));
  }
  /// nn.Linear: x @ weight^T + bias, with weight [out, in] as PyTorch keeps it (the transpose of
  /// a constant is folded at compile time).
  ir::var linear(const ir::expr& x, const weights& w, const std::string& name, std::int64_t in, std::int64_t out) {
    const ir::var weight = op("permute_dims", {w.constant(name + ".weight", {out, in})}, {{"axes", ir::int_array{1, 0}}});
    const ir::var y = op("matmul", {x, weight});
    return op("add", {y, w.constant(name + ".bias", {out})});
  }
  ir::var layer_norm(const ir::expr& x, const weights& w, const std::string& name) {
    const std::int64_t d = w.cfg().n_embd;
    return op("nn.layer_norm", {x, w.constant(name + ".weight", {d}), w.constant(name + ".bias", {d})},
              {{"axes", ir::int_array{-1}}, {"epsilon", w.cfg().layer_norm_epsilon}});
  }
  /// `len` ones, int64 [len].
  ir::var ones(const ir::prim_expr& len) { return op("broadcast_to", {ir::make_constant(1.0, dtype::int64), ir::make_shape_expr({len})}); }
  /// 0, 1, ..., len - 1 from `len` ones (their exclusive prefix sum).
  ir::var arange(const ir::var& ones) { return op("cumsum", {ones}, {{"axis", std::int64_t{0}}, {"exclusive", true}}); }
};

}  // namespace detail

/// The module described at the top of this file, over the weights in `w`.
inline ir::ir_module build(const weights& w) {
  const config& c = w.cfg();
  const std::int64_t d = c.n_embd, heads = c.n_head, hd = d / heads, caches = 2 * c.n_layer;
  const ir::prim_expr h_ = ir::make_int(heads), hd_ = ir::make_int(hd), d_ = ir::make_int(d);
  ir::block_builder bb;
  detail::emitter e{bb};
  const ir::type caches_t = ir::tuple_type(std::vector<ir::type>(std::size_t(caches), ir::object_type()));

  // create_kv_cache(): empty caches [heads, 0, head size] with room for n_positions positions,
  // appended to along axis 1.
  bb.function(
      "create_kv_cache", {},
      [&] {
        const ir::var empty = e.op("broadcast_to", {ir::make_constant(0.0, dtype::float32), ir::make_shape_expr({h_, ir::make_int(0), hd_})}, {}, "empty");
        std::vector<ir::expr> made;
        for (std::int64_t i = 0; i < caches; ++i)
          made.push_back(bb.emit(ir::call_extern("vm.builtin.attention_kv_cache_create",
                                                 {empty, ir::make_shape_expr({h_, ir::make_int(c.n_positions), hd_}), ir::make_prim_value(0),
                                                  ir::make_prim_value(1)},
                                                 ir::object_type()),
                                 "cache"));
        return ir::make_tuple(std::move(made));
      },
      {{ir::attr::global_symbol, std::string("create_kv_cache")}});

  const ir::size_var n = ir::make_size_var("n"), m = ir::make_size_var("m");
  const ir::var input_ids = ir::make_var("input_ids", ir::tensor_type({ir::make_int(1), n}, dtype::int64));
  const ir::var all_seq_len = ir::make_var("all_seq_len", ir::shape_type({m}));
  const ir::var kv_cache = ir::make_var("kv_cache", caches_t);
  const double lowest = double(std::numeric_limits<float>::lowest());  // PyTorch's fill for masked scores
  bb.function(
      "forward", {input_ids, all_seq_len, kv_cache},
      [&] {
        // Embeddings, the causal mask and the index of the last position, once for all layers.
        ir::var x, mask, last;
        bb.dataflow([&] {
          const ir::var ones_m = e.ones(m), ones_n = e.ones(n);
          const ir::var key_pos = e.arange(ones_m);  // [m]
          const ir::var new_idx = e.arange(ones_n);  // [n]
          const ir::var past_len = e.op("subtract", {e.op("sum", {ones_m}), e.op("sum", {ones_n})});  // m - n, 0-d
          const ir::var query_pos = e.op("add", {new_idx, past_len}, {}, "positions");                // [n]
          const ir::var ids = e.op("reshape", {input_ids, ir::make_shape_expr({n})});
          const ir::var tok = e.op("take", {w.constant("wte.weight", {c.vocab_size, d}), ids}, {{"axis", std::int64_t{0}}});
          const ir::var pos = e.op("take", {w.constant("wpe.weight", {c.n_positions, d}), query_pos}, {{"axis", std::int64_t{0}}});
          // position j is seen from query i when j <= i's position: [n, m]
          const ir::var keys_row = e.op("reshape", {key_pos, ir::make_shape_expr({ir::make_int(1), m})});
          const ir::var queries_col = e.op("reshape", {query_pos, ir::make_shape_expr({n, ir::make_int(1)})});
          const ir::var count = e.op("sum", {ones_n}, {{"keepdims", true}});                           // [1]: n
          x = bb.emit_output(ir::call_op("add", {tok, pos}), "x");
          mask = bb.emit_output(ir::call_op("less_equal", {keys_row, queries_col}), "causal");
          last = bb.emit_output(ir::call_op("subtract", {count, ir::make_constant(1.0, dtype::int64)}), "last");
        });
        std::vector<ir::expr> updated;
        for (std::int64_t layer = 0; layer < c.n_layer; ++layer) {
          const std::string p = "h." + std::to_string(layer) + ".";
          // q, k and v of the new positions, each [heads, n, head size]
          ir::var q, k, v;
          bb.dataflow([&] {
            const ir::var qkv = e.linear(e.layer_norm(x, w, p + "ln_1"), w, p + "attn.c_attn", d, 3 * d);  // [n, 3d]
            const ir::var parts = e.op("split", {qkv}, {{"sections", std::int64_t{3}}, {"axis", std::int64_t{-1}}});
            auto heads_of = [&](int i, const char* name) {
              const ir::var r = e.op("reshape", {ir::make_tuple_get_item(parts, i), ir::make_shape_expr({n, h_, hd_})});
              return bb.emit_output(ir::call_op("permute_dims", {r}, {{"axes", ir::int_array{1, 0, 2}}}), name);
            };
            q = heads_of(0, "q");
            k = heads_of(1, "k");
            v = heads_of(2, "v");
          });
          // The caches: append the new positions in place, view all m of them.
          const ir::type view_t = ir::tensor_type({h_, m, hd_}, dtype::float32);
          std::vector<ir::var> views;
          for (int kind = 0; kind < 2; ++kind) {
            const ir::expr cache = ir::make_tuple_get_item(kv_cache, int(2 * layer + kind));
            const ir::var appended = bb.emit(ir::call_extern("vm.builtin.attention_kv_cache_append", {cache, kind == 0 ? k : v}, ir::object_type()),
                                             kind == 0 ? "kc" : "vc");
            updated.push_back(appended);
            views.push_back(bb.emit(ir::call_extern("vm.builtin.attention_kv_cache_view", {appended, ir::make_shape_expr({h_, m, hd_})}, view_t),
                                    kind == 0 ? "keys" : "values"));
          }
          // Attention (one fused kernel after fuse_attention), the projection and the MLP.
          x = bb.dataflow([&] {
            const ir::var kt = e.op("permute_dims", {views[0]}, {{"axes", ir::int_array{0, 2, 1}}});
            ir::var s = e.op("matmul", {q, kt});                                                     // [heads, n, m]
            s = e.op("divide", {s, ir::make_constant(std::sqrt(double(hd)), dtype::float32)});
            s = e.op("where", {mask, s, ir::make_constant(lowest, dtype::float32)});
            s = e.op("nn.softmax", {s}, {{"axis", std::int64_t{-1}}});
            ir::var y = e.op("matmul", {s, views[1]});                                             // [heads, n, hd]
            y = e.op("permute_dims", {y}, {{"axes", ir::int_array{1, 0, 2}}});
            y = e.op("reshape", {y, ir::make_shape_expr({n, d_})});
            const ir::var h1 = e.op("add", {x, e.linear(y, w, p + "attn.c_proj", d, d)});
            ir::var f = e.linear(e.layer_norm(h1, w, p + "ln_2"), w, p + "c_fc", d, 4 * d);
            f = e.op("nn.gelu", {f}, {{"approximate", std::string("tanh")}});
            return bb.emit_output(ir::call_op("add", {h1, e.linear(f, w, p + "c_proj", 4 * d, d)}), "x");
          });
        }
        // The LM head (tied to the token embedding) on the last position only.
        const ir::var logits = bb.dataflow([&] {
          const ir::var h = e.layer_norm(e.op("take", {x, last}, {{"axis", std::int64_t{0}}}), w, "ln_f");  // [1, d]
          const ir::var wte_t = e.op("permute_dims", {w.constant("wte.weight", {c.vocab_size, d})}, {{"axes", ir::int_array{1, 0}}});
          const ir::var l = e.op("matmul", {h, wte_t});
          return bb.emit_output(ir::call_op("reshape", {l, ir::make_shape_expr({ir::make_int(1), ir::make_int(1), ir::make_int(c.vocab_size)})}),
                                "logits");
        });
        return ir::make_tuple({logits, ir::make_tuple(std::move(updated))});
      },
      {{ir::attr::global_symbol, std::string("forward")},
       {kiln::transform::properties::upper_bound_attr, ir::int_dict{{"n", c.n_positions}, {"m", c.n_positions}}}});
  return bb.module();
}

/// A sequence being decoded: its caches (the VM's state between calls) and its length.
class sequence {
public:
  explicit sequence(vm::virtual_machine& machine)
      : forward_(machine.get_function("forward")), caches_(machine.invoke_span("create_kv_cache", std::span<const vm::value>{})) {}

  /// Appends `ids` (the prompt, or the one token chosen last) and returns the logits of the last
  /// position, float32 [1, 1, vocab].
  kiln::runtime::tensor step(std::span<const std::int64_t> ids) {
    const auto n = std::int64_t(ids.size());
    const vm::value args[] = {vm::value(kiln::runtime::tensor::from_values<std::int64_t>({1, n}, ids)), vm::value::shape({length_ + n}), caches_};
    const vm::value result = forward_.call(args);
    length_ += n;
    caches_ = result.as_tuple()[1];
    return result.as_tuple()[0].as_tensor();
  }

  /// Drops the last `n` positions (as TVM's vm.builtin.attention_kv_cache_array_popn does), so
  /// that decoding resumes from an earlier position; the next step appends where they were.
  void pop(std::int64_t n) {
    if (n < 0 || n > length_)
      throw kiln::error("gpt2_ir::sequence::pop: cannot drop " + std::to_string(n) + " of " + std::to_string(length_) + " positions");
    for (const vm::value& c : caches_.as_tuple()) c.as_object<kiln::runtime::attention_kv_cache>()->pop_n(n);
    length_ -= n;
  }

  /// Positions in the caches.
  std::int64_t length() const noexcept { return length_; }
  /// The caches, a tuple of vm.AttentionKVCache objects (keys and values of each layer).
  const vm::value& caches() const noexcept { return caches_; }

private:
  vm::function_handle forward_;
  vm::value caches_;
  std::int64_t length_ = 0;
};

/// The index of the largest of `logits`' last `vocab` elements (greedy decoding).
inline std::int64_t argmax(const kiln::runtime::tensor& logits) {
  const kiln::runtime::tensor t = logits.contiguous();
  const std::int64_t vocab = t.shape().back();
  const float* p = t.data<float>() + (t.numel() - vocab);
  return std::int64_t(std::max_element(p, p + vocab) - p);
}

}  // namespace gpt2_ir
