// SPDX-License-Identifier: Apache-2.0
/// \file
/// `static_plan_block_memory`: places a function's intermediate tensors in planned storage
/// (Relax's StaticPlanBlockMemory, planned over the whole function as XLA's buffer assignment
/// does).
///
/// Every `R.builtin.alloc_tensor` bound at the top level of a function is a candidate. Its
/// lifetime runs from its binding to the last use of it *or of anything that may alias it*: a
/// view (`kernels.reshape_view`), a tuple holding it, the result of a call it was passed to, an
/// `if` whose branches use it. A tensor that may reach the function's result, or that a closure
/// captures, escapes: it keeps its own allocation, since the caller holds it after the function
/// returns.
///
/// - **Static sizes** share one arena per function: the tensors are placed greedily in decreasing
///   size, each at the best-fitting gap among the tensors whose lifetimes overlap its own (XLA's
///   GlobalDecreasingSizeBestFitHeap), at 64-byte aligned offsets. The arena is one
///   `R.memory.alloc_storage` at the start of the function; each tensor an `R.memory.alloc_tensor`
///   at a fixed offset.
/// - **Symbolic sizes with upper bounds**: when the function bounds its size variables
///   (`R.func_attr({"tir_var_upper_bound": {"n": 1024}})`, TVM's attribute), a tensor whose size
///   in bytes has a bound (by interval arithmetic over the bounds) joins the arena at its largest
///   size; `vm_shape_lower` checks every bound where its variable is defined, so a larger input is
///   a clean error, never an overlap.
/// - **Concatenations in place**: a `kernels.concat` whose inputs and result are all tensors of
///   static size planned here, whose slices along the axis are contiguous (every dimension before
///   the axis is 1: NCHW channels at batch 1), is not run: its inputs are placed in the slices of
///   its result, so that the kernels producing them write into the concatenation (ONNX Runtime's
///   and XLA's concat-in-place buffers). Concatenations that share inputs share one block:
///   DenseNet's `concat(f0, ..., fk)` of a block are all prefixes of the block's last one, each
///   feature written once where every later concatenation reads it. A concatenation stays a copy
///   when the placement would contradict one made before (the same input at two places, or two
///   inputs over the same bytes).
/// - **Symbolic sizes** otherwise get storage tokens: a tensor reuses the storage of an earlier one
///   whose lifetime has ended when their sizes in bytes are provably equal (keyed by bytes, not
///   dtype), else it gets a storage of its own, allocated where it is first needed.
///
/// The function records its plan in attributes: `kiln.planned_bytes` (the arena), `kiln.unplanned_bytes`
/// (the sum of the planned tensors' sizes, what one allocation per tensor would take),
/// `kiln.live_lower_bound` (the largest sum of sizes live at one point, which no plan can beat)
/// and `kiln.storage_tokens` (symbolic storages).
///
/// Allocations inside `if` branches are left as they are.
#pragma once

#include <kiln/ir/module.hpp>
#include <kiln/kernels/calling_convention.hpp>
#include <kiln/pass/pass_config.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/pass/property.hpp>
#include <kiln/transform/analyses.hpp>
#include <kiln/transform/detail/lifetimes.hpp>
#include <kiln/transform/detail/rewrite.hpp>
#include <kiln/transform/properties.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace kiln::transform {

/// What `static_plan_block_memory` decided for one function (also recorded as its attributes).
struct memory_plan_stats {
  std::int64_t planned_bytes = 0;     ///< the arena's size
  std::int64_t unplanned_bytes = 0;   ///< sum of the sizes of the tensors placed in the arena
  std::int64_t live_lower_bound = 0;  ///< the largest sum of sizes live at once
  std::int64_t storage_tokens = 0;    ///< storages for tensors of symbolic size
};

/// The stats recorded on function `f` by the planner (zeros when it was not planned).
inline memory_plan_stats memory_plan_of(const ir::base_func& f) {
  memory_plan_stats s;
  s.planned_bytes = f->attrs.get_or<std::int64_t>(properties::planned_bytes_attr, 0);
  s.unplanned_bytes = f->attrs.get_or<std::int64_t>("kiln.unplanned_bytes", 0);
  s.live_lower_bound = f->attrs.get_or<std::int64_t>("kiln.live_lower_bound", 0);
  s.storage_tokens = f->attrs.get_or<std::int64_t>("kiln.storage_tokens", 0);
  return s;
}

/// Whether `static_plan_block_memory` runs concatenations in place (default true); false keeps
/// every concatenation a copy.
inline const pass_config_option<bool>& concat_in_place_option() {
  static const pass_config_option<bool> option{"kiln.static_plan_block_memory.concat_in_place",
                                               "static_plan_block_memory places a concatenation's inputs in its slices instead of copying them; default true"};
  return option;
}

struct static_plan_block_memory {
  static constexpr std::string_view name = "static_plan_block_memory";
  static constexpr std::string_view description =
      "Plans tensor storage statically: reuses storage between tensors whose lifetimes do not overlap, sized by upper bounds for symbolic shapes.";
  static constexpr int opt_level = 0;
  using needs = property_list<properties::non_dataflow, properties::explicit_outputs>;
  using establishes = property_list<properties::memory_planned>;

  static constexpr std::int64_t alignment = 64;
  /// The largest tensor (in bytes, 2^48) placed in the arena.
  static constexpr std::int64_t max_planned_bytes = std::int64_t(1) << 48;

  /// Statistics: "arena bytes" (the arenas' sizes, summed over functions), "tensor bytes placed"
  /// (what the tensors in them would take unshared) and "storages of symbolic size".
  ir::function operator()(const ir::function& f, const ir::ir_module&, pass_context& ctx) const {
    analysis a(f, *ctx.analysis<liveness>(f), ctx.config(concat_in_place_option(), true));
    ir::function out = a.rewrite();
    const memory_plan_stats s = memory_plan_of(out);
    if (s.planned_bytes) ctx.statistic(name, "arena bytes") += static_cast<std::uint64_t>(s.planned_bytes);
    if (s.unplanned_bytes) ctx.statistic(name, "tensor bytes placed") += static_cast<std::uint64_t>(s.unplanned_bytes);
    if (s.storage_tokens) ctx.statistic(name, "storages of symbolic size") += static_cast<std::uint64_t>(s.storage_tokens);
    return out;
  }

private:
  struct candidate {
    const ir::var_node* var;
    ir::prim_expr bytes;  ///< size in bytes
    std::int64_t size = -1;  ///< the size, or its upper bound; -1 when neither is known
    std::int64_t begin = 0, end = 0;
    std::int64_t offset = -1;  ///< static: offset in the arena
    int token = -1;            ///< symbolic: storage token
    const ir::shape_expr_node* shape = nullptr;
    int block = -1;            ///< a concatenation block it is part of, or -1
    std::int64_t at = 0;       ///< its offset in that block
    bool covered = false;      ///< the result of a concatenation run in place: its inputs write its bytes
  };

  /// Tensors placed together by concatenations run in place; placed in the arena as one tensor.
  struct concat_block {
    std::vector<candidate*> members;
    candidate whole{nullptr, {}, 0};  ///< its size and lifetime, for the arena
  };

  class analysis {
  public:
    analysis(const ir::function& f, const detail::value_lifetimes& life, bool concat_in_place) : f_(f) {
      auto& body = static_cast<const ir::seq_expr_node&>(*f->body);
      for (auto& block : body.blocks)
        for (auto& b : block.bindings) bindings_.push_back(&b);
      result_pos_ = std::int64_t(bindings_.size());
      if (auto* ub = f->attrs.find(properties::upper_bound_attr)) {
        bounds_ = ub->get_if<ir::int_dict>();
        if (!bounds_)
          throw error(std::string("kiln::transform::static_plan_block_memory: attribute ") + properties::upper_bound_attr +
                      " must be a dict of int such as {\"n\": 1024}, got " + ir::name(ub->kind()));
        for (auto& [var, bound] : *bounds_)
          if (bound < 0)
            throw error(std::string("kiln::transform::static_plan_block_memory: attribute ") + properties::upper_bound_attr +
                        " bounds " + var + " by " + std::to_string(bound) + ", which no size can meet");
      }
      collect();
      escapes_ = life.escapes;
      for (auto& c : cands_) c.end = life.end.at(c.var);
      if (concat_in_place) place_concats();
    }

    ir::function rewrite() {
      std::vector<candidate*> fixed, symbolic;
      for (auto& c : cands_) {
        if (escapes_.count(c.var)) continue;  // the caller holds it after the return: its own allocation
        if (c.size >= 0) stats_.unplanned_bytes += c.size;
        if (c.block >= 0) continue;  // placed with its block
        (c.size >= 0 ? fixed : symbolic).push_back(&c);
      }
      std::vector<candidate*> arena_tensors = fixed;
      for (concat_block& b : blocks_)
        if (!b.members.empty()) arena_tensors.push_back(&b.whole);
      place_static(arena_tensors);
      place_symbolic(symbolic);
      for (concat_block& b : blocks_)
        for (candidate* m : b.members) {
          m->offset = b.whole.offset + m->at;
          fixed.push_back(m);
        }

      ir::var arena;
      if (!arena_tensors.empty())
        arena = ir::make_var("storage", ir::object_type());
      std::unordered_map<const ir::var_node*, const candidate*> plan;
      for (auto* c : fixed) plan[c->var] = c;
      for (auto* c : symbolic) plan[c->var] = c;
      std::vector<ir::var> token_vars(std::size_t(stats_.storage_tokens));
      auto on_body = [](const ir::expr& e) { return e; };
      auto on_binding = [&](const ir::binding& b, std::vector<ir::binding>& out) {
        if (in_place_.count(b.variable.get())) return;  // a concatenation its inputs wrote
        auto it = plan.find(b.variable.get());
        if (it == plan.end()) return out.push_back(b);
        const candidate& c = *it->second;
        auto& call = static_cast<const ir::call_node&>(*b.value);
        const dtype dt = call.attrs.find("dtype")->as<dtype>();
        ir::var st = arena;
        std::int64_t offset = c.offset;
        if (c.token >= 0) {
          ir::var& tv = token_vars[std::size_t(c.token)];
          if (!tv) {
            tv = ir::make_var("storage" + std::to_string(c.token), ir::object_type());
            out.push_back({tv, storage(token_bytes_[std::size_t(c.token)]), {}});
          }
          st = tv;
          offset = 0;
        }
        out.push_back({b.variable, ir::call_op("memory.alloc_tensor", {st, call.args[0]}, {{"offset", offset}, {"dtype", dt}}), b.cast_type});
      };
      ir::expr body = detail::rewrite_seq(f_->body, on_binding, on_body);
      if (arena) {  // the arena comes first, before anything can use it
        auto& s = static_cast<const ir::seq_expr_node&>(*body);
        std::vector<ir::binding_block> blocks = s.blocks;
        blocks.insert(blocks.begin(), ir::binding_block{false, {{arena, storage(ir::make_int(stats_.planned_bytes)), {}}}});
        body = ir::make_seq(std::move(blocks), s.body);
      }
      ir::attr_map attrs = f_->attrs;
      attrs.set(properties::planned_bytes_attr, stats_.planned_bytes);
      attrs.set("kiln.unplanned_bytes", stats_.unplanned_bytes);
      attrs.set("kiln.live_lower_bound", stats_.live_lower_bound);
      if (stats_.storage_tokens) attrs.set("kiln.storage_tokens", stats_.storage_tokens);
      return ir::make_ref<ir::function_node>(f_->params, std::move(body), f_->ret_type, std::move(attrs));
    }

  private:
    static ir::expr storage(const ir::prim_expr& bytes) { return ir::call_op("memory.alloc_storage", {ir::make_shape_expr({bytes})}); }

    void collect() {
      for (std::int64_t p = 0; p < std::int64_t(bindings_.size()); ++p) {
        const ir::binding& b = *bindings_[std::size_t(p)];
        if (!detail::is_op_call(b.value, "builtin.alloc_tensor")) continue;
        auto& call = static_cast<const ir::call_node&>(*b.value);
        auto* shape = ir::dyn_cast<ir::shape_expr_node>(call.args[0]);
        if (!shape) continue;
        ir::prim_expr bytes = ir::make_int(std::int64_t(size_of(call.attrs.find("dtype")->as<dtype>())));
        for (auto& d : shape->values) bytes = bytes * d;
        // The size, else its upper bound, else -1. (Kept in a plain integer: GCC 12 at -O1 warns
        // that an optional's value "may be used uninitialized" when it is copied out here.)
        std::int64_t size = -1;
        if (const std::optional<std::int64_t> known = ir::as_int(bytes)) size = *known;
        else if (bounds_) {
          const std::optional<std::int64_t> bound = ir::upper_bound(bytes, [&](const ir::size_var_node& v) -> std::optional<std::int64_t> {
            auto it = bounds_->find(v.name);
            if (it == bounds_->end()) return std::nullopt;
            return it->second;
          });
          if (bound) size = *bound;
        }
        // A tensor past max_planned_bytes is left to be allocated on its own at run time (where
        // an impossible size is a clean allocation error), so the plan's sums cannot overflow.
        if (size > max_planned_bytes) size = -1;
        cands_.push_back({b.variable.get(), bytes, size, p, p});
        cands_.back().shape = shape;
      }
    }

    /// Groups the inputs and results of the concatenations that can run in place into blocks
    /// (see the file comment), in program order; records the concatenation calls to drop.
    void place_concats() {
      std::unordered_map<const ir::var_node*, candidate*> by_var;
      for (auto& c : cands_) by_var[c.var] = &c;
      // A tensor of static size, planned here.
      auto planned = [&](const ir::expr& e) -> candidate* {
        auto* v = ir::dyn_cast<ir::var_node>(e);
        auto it = v ? by_var.find(v) : by_var.end();
        if (it == by_var.end() || escapes_.count(v) || !ir::as_int(it->second->bytes)) return nullptr;
        return it->second;
      };
      for (const ir::binding* b : bindings_) {
        if (detail::extern_symbol(b->value) != kernels::abi::concat::name) continue;
        auto& call = static_cast<const ir::call_node&>(*b->value);
        if (call.args.size() != 3) continue;
        auto* inputs = ir::dyn_cast<ir::tuple_node>(call.args[0]);
        auto* axis_value = ir::dyn_cast<ir::prim_value_node>(call.args[1]);
        candidate* result = planned(call.args[2]);
        if (!inputs || inputs->fields.empty() || !axis_value || !axis_value->int_value || !result) continue;
        const std::optional<std::int64_t> axis_given = ir::as_int(axis_value->int_value);
        const std::int64_t rank = std::int64_t(result->shape->values.size());
        if (!axis_given || *axis_given < -rank || *axis_given >= rank) continue;
        const std::int64_t axis = *axis_given < 0 ? *axis_given + rank : *axis_given;
        bool contiguous = true;  // the slices along the axis: every dimension before it is 1
        for (std::int64_t d = 0; d < axis; ++d) contiguous = contiguous && ir::as_int(result->shape->values[std::size_t(d)]) == 1;
        if (!contiguous) continue;
        // Where each tensor of the concatenation lies, from the start of its result.
        std::vector<std::pair<candidate*, std::int64_t>> wanted{{result, 0}};
        std::int64_t at = 0;
        for (const ir::expr& e : inputs->fields) {
          candidate* in = planned(e);
          if (!in) break;
          wanted.emplace_back(in, at);
          at += *ir::as_int(in->bytes);
        }
        if (wanted.size() != inputs->fields.size() + 1 || at != *ir::as_int(result->bytes)) continue;
        if (join(wanted)) in_place_.insert(b->variable.get());
      }
      // Each block's size and lifetime, from offset 0.
      for (concat_block& blk : blocks_) {
        if (blk.members.empty()) continue;
        std::int64_t lo = blk.members.front()->at, hi = lo, begin = blk.members.front()->begin, end = blk.members.front()->end;
        for (candidate* m : blk.members) {
          lo = std::min(lo, m->at);
          hi = std::max(hi, m->at + m->size);
          begin = std::min(begin, m->begin);
          end = std::max(end, m->end);
        }
        for (candidate* m : blk.members) m->at -= lo;
        blk.whole.size = hi - lo;
        blk.whole.begin = begin;
        blk.whole.end = end;
      }
    }

    /// Places the tensors of one concatenation (its result first, each at its offset from it),
    /// merging the blocks they are already part of; false, changing nothing, when that
    /// contradicts a placement made before.
    bool join(const std::vector<std::pair<candidate*, std::int64_t>>& wanted) {
      std::map<int, std::int64_t> shift;  // block -> what its offsets gain in the concatenation's frame
      if (wanted.front().first->block >= 0) return false;  // the result is written here, by its inputs
      std::unordered_set<const candidate*> seen;
      for (auto& [c, at] : wanted) {
        if (!seen.insert(c).second) return false;  // one tensor at two places
        if (c->block < 0) continue;
        auto [it, fresh] = shift.emplace(c->block, at - c->at);
        if (!fresh && it->second != at - c->at) return false;
      }
      // What the kernels write, and where: no two of them may share a byte.
      std::vector<std::pair<std::int64_t, std::int64_t>> written;
      for (auto& [c, at] : wanted)
        if (c->block < 0 && c != wanted.front().first) written.emplace_back(at, at + c->size);
      for (auto& [blk, by] : shift)
        for (candidate* m : blocks_[std::size_t(blk)].members)
          if (!m->covered) written.emplace_back(m->at + by, m->at + by + m->size);
      std::sort(written.begin(), written.end());
      for (std::size_t i = 1; i < written.size(); ++i)
        if (written[i].first < written[i - 1].second) return false;
      // Merge into one block, in the concatenation's frame.
      const int into = int(blocks_.size());
      blocks_.emplace_back();
      concat_block& merged = blocks_.back();
      for (auto& [blk, by] : shift) {
        for (candidate* m : blocks_[std::size_t(blk)].members) {
          m->at += by;
          m->block = into;
          merged.members.push_back(m);
        }
        blocks_[std::size_t(blk)].members.clear();
      }
      for (auto& [c, at] : wanted)
        if (c->block < 0) {
          c->block = into;
          c->at = at;
          merged.members.push_back(c);
        }
      wanted.front().first->covered = true;
      return true;
    }

    static std::int64_t align(std::int64_t n) { return (n + alignment - 1) / alignment * alignment; }

    void place_static(std::vector<candidate*>& fixed) {
      const std::size_t positions = std::size_t(result_pos_) + 1;
      auto first = [&](const candidate* c) { return std::size_t(std::clamp<std::int64_t>(c->begin, 0, result_pos_)); };
      auto last = [&](const candidate* c) { return std::size_t(std::clamp<std::int64_t>(c->end, 0, result_pos_)); };
      // The live-set lower bound: the largest sum of sizes live at one position (a sweep over
      // the changes at each position).
      std::vector<std::int64_t> change(positions + 1, 0);
      for (auto* c : fixed) {
        change[first(c)] += c->size;
        change[last(c) + 1] -= c->size;
      }
      std::int64_t live = 0;
      for (std::size_t p = 0; p < positions; ++p) stats_.live_lower_bound = std::max(stats_.live_lower_bound, live += change[p]);
      // Greedy by size: the largest first, each at the offset of the smallest gap it fits between
      // the tensors placed so far whose lifetimes overlap its own. Placed tensors are indexed by
      // the spans of positions they are live in, so a program of many short lifetimes is planned
      // in about linear time, not quadratic.
      constexpr std::size_t span = 64;
      std::vector<std::vector<std::size_t>> live_in(positions / span + 1);
      std::vector<const candidate*> placed;
      std::vector<std::size_t> seen_by;  // per placed tensor: 1 + the last candidate that looked at it
      std::vector<candidate*> order = fixed;
      std::stable_sort(order.begin(), order.end(), [](const candidate* a, const candidate* b) { return a->size > b->size; });
      std::vector<std::pair<std::int64_t, std::int64_t>> busy;  // [offset, end) of overlapping placed tensors
      for (std::size_t i = 0; i < order.size(); ++i) {
        candidate* c = order[i];
        const std::int64_t size = align(c->size);
        busy.clear();
        for (std::size_t s = first(c) / span; s <= last(c) / span; ++s)
          for (std::size_t k : live_in[s]) {
            const candidate* q = placed[k];
            if (seen_by[k] == i + 1) continue;
            seen_by[k] = i + 1;
            if (q->begin <= c->end && c->begin <= q->end) busy.emplace_back(q->offset, q->offset + align(q->size));
          }
        std::sort(busy.begin(), busy.end());
        std::int64_t best = -1, best_gap = 0, at = 0;
        for (auto& [lo, hi] : busy) {
          if (lo - at >= size && (best < 0 || lo - at < best_gap)) best = at, best_gap = lo - at;
          at = std::max(at, hi);
        }
        c->offset = best >= 0 ? best : at;
        stats_.planned_bytes = std::max(stats_.planned_bytes, c->offset + size);
        placed.push_back(c);
        seen_by.push_back(0);
        for (std::size_t s = first(c) / span; s <= last(c) / span; ++s) live_in[s].push_back(placed.size() - 1);
      }
    }

    void place_symbolic(std::vector<candidate*>& symbolic) {
      struct token {
        ir::prim_expr bytes;
        std::int64_t end;
      };
      std::vector<token> tokens;
      for (auto* c : symbolic) {  // in program order
        int chosen = -1;
        for (std::size_t t = 0; t < tokens.size(); ++t)
          if (tokens[t].end < c->begin && ir::prove_equal(tokens[t].bytes, c->bytes)) {
            chosen = int(t);
            break;
          }
        if (chosen < 0) {
          tokens.push_back({c->bytes, c->end});
          token_bytes_.push_back(c->bytes);
          chosen = int(tokens.size() - 1);
        }
        tokens[std::size_t(chosen)].end = c->end;
        c->token = chosen;
      }
      stats_.storage_tokens = std::int64_t(tokens.size());
    }

    ir::function f_;
    std::vector<const ir::binding*> bindings_;
    std::int64_t result_pos_ = 0;
    std::vector<candidate> cands_;
    std::deque<concat_block> blocks_;  // emptied when merged into another
    std::unordered_set<const ir::var_node*> in_place_;  // the bindings of the concatenations not run
    std::unordered_set<const ir::var_node*> escapes_;
    std::vector<ir::prim_expr> token_bytes_;
    const ir::int_dict* bounds_ = nullptr;
    memory_plan_stats stats_;
  };
};

}  // namespace kiln::transform
