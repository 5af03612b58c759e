// SPDX-License-Identifier: Apache-2.0
/// \file
/// Rewriting what patterns match (`pattern.hpp`): each rule is a pattern and a function that
/// builds the replacement of a match, and `rewrite_bindings` applies a set of rules to every
/// binding of a module (Relax's `rewrite_bindings`, ONNX Runtime's rewrite rules).
///
/// \code
/// using namespace kiln::transform::patterns;
/// transform::rewrite_rule double_negation{"double_negation", is_op("negative")(is_op("negative")("x")),
///     [](const transform::match_result& m, transform::rewrite_context&) { return m["x"]; }};
/// ir::ir_module out = transform::rewrite_bindings(module, {double_negation});
/// \endcode
///
/// The rewriter visits each block's bindings from the last to the first, so that a rule meets the
/// end of a chain first and matches as much of it as its pattern allows. The first rule that
/// matches a binding and returns a replacement wins: the binding keeps its variable and takes the
/// replacement as its value, and the bindings the match looked through (its intermediates) are
/// removed. A rule returns a null expression to decline. Inside `if` branches each sequence is
/// rewritten on its own (a branch's result, when it is a call, as its last binding — bound to a
/// variable of its own when rewritten): a match never crosses into or out of a branch.
///
/// A rule may grow a match beyond its pattern (a fusion of any size) through the
/// `rewrite_context`: `producer(v)` gives the binding it could look through, `uses(v)` the number
/// of uses, and `absorb(v)` removes that binding along with the rewrite. The rewriter checks that
/// every removed binding is used only inside the rewritten values and that the replacement does
/// not use one; a rule that breaks this is a `usage_error` naming the rule.
#pragma once

#include <kiln/ir/function.hpp>
#include <kiln/ir/module.hpp>
#include <kiln/ir/pass_traits.hpp>
#include <kiln/ir/visitor.hpp>
#include <kiln/pass/pass_context.hpp>
#include <kiln/transform/analyses.hpp>
#include <kiln/transform/detail/rewrite.hpp>
#include <kiln/transform/pattern.hpp>

#include <algorithm>
#include <initializer_list>
#include <map>
#include <span>
#include <unordered_map>
#include <unordered_set>

namespace kiln::transform {

class rewrite_context;

/// A pattern and what a match of it becomes.
struct rewrite_rule {
  std::string name;
  pattern pat;
  /// The replacement value of the matched binding, or a null expression to leave it alone.
  std::function<ir::expr(const match_result&, rewrite_context&)> rewrite;
};

/// What a rule's function may ask about, and do to, the bindings around its match.
class rewrite_context final : public match_scope {
public:
  /// The plain binding before the current one in the same block that defines `v`, not already
  /// removed; null for a parameter, a value from another block or a `match_cast`.
  const ir::binding* producer(const ir::var_node& v) const override {
    auto it = position_.find(&v);
    if (it == position_.end() || it->second >= current_ || removed_[it->second]) return nullptr;
    const ir::binding& b = (*bindings_)[it->second];
    return b.is_match_cast() ? nullptr : &b;
  }
  /// How many times `v` is used in the function (kept up to date as rules rewrite it).
  std::size_t uses(const ir::var_node& v) const override {
    auto it = uses_->find(&v);
    return it == uses_->end() ? 0 : it->second;
  }
  /// Removes the binding of `v` (which `producer` gives) along with the current rewrite.
  void absorb(const ir::var_node& v) {
    if (!producer(v)) throw usage_error("kiln::transform::rewrite_context: '" + v.name_hint + "' has no binding this rewrite can remove");
    if (std::find(absorbed_.begin(), absorbed_.end(), &v) == absorbed_.end()) absorbed_.push_back(&v);
  }
  /// The binding being rewritten, and the function and module it is in.
  const ir::binding& current() const { return (*bindings_)[current_]; }
  const std::string& function_name() const noexcept { return function_; }
  const ir::ir_module& module() const noexcept { return *module_; }

private:
  friend class binding_rewriter;
  const ir::ir_module* module_ = nullptr;
  std::string function_;
  const std::vector<ir::binding>* bindings_ = nullptr;
  std::unordered_map<const ir::var_node*, std::size_t> position_;
  std::vector<bool> removed_;
  std::size_t current_ = 0;
  std::unordered_map<const ir::var_node*, std::size_t>* uses_ = nullptr;
  std::vector<const ir::var_node*> absorbed_;
};

/// How many times each rule applied, by name.
using rewrite_counts = std::map<std::string, std::uint64_t, std::less<>>;

/// Applies `rules` to the bindings of function `f` (named `name` in `m`); see the file comment.
class binding_rewriter {
public:
  binding_rewriter(const ir::ir_module& m, std::span<const rewrite_rule> rules, rewrite_counts* counts = nullptr)
      : module_(m), rules_(rules), counts_(counts) {}

  /// `f` with the rules applied; `uses`, when given, is `f`'s `use_counts` (else counted here).
  ir::function rewrite(const std::string& name, const ir::function& f, const use_counts::result_type* uses = nullptr) {
    uses_ = uses ? *uses : use_counts{}.run(f);
    ctx_.module_ = &module_;
    ctx_.function_ = name;
    ctx_.uses_ = &uses_;
    return detail::with_body(f, rewrite_seq(f->body));
  }

private:
  /// Adds `delta` to the use count of every variable `e` uses.
  void count_uses(const ir::expr& e, int delta) {
    ir::post_order_visit(e, [&](const ir::expr& x) {
      if (auto* v = ir::dyn_cast<ir::var_node>(x)) uses_[v] += std::size_t(delta);
    });
  }
  static std::size_t count_refs(const ir::expr& e, const ir::var_node* v) {
    std::size_t n = 0;
    ir::post_order_visit(e, [&](const ir::expr& x) { n += x.get() == v; });
    return n;
  }

  /// Rewrites a sequence; a result that is a call (an `if` branch's value) is rewritten as if it
  /// were a last binding, named `result_name`.
  ir::expr rewrite_seq(const ir::expr& seq, const std::string& result_name = "result") {
    auto& s = static_cast<const ir::seq_expr_node&>(*seq);
    bool changed = false;
    ir::expr body = s.body;
    std::vector<ir::binding_block> blocks;
    for (std::size_t k = 0; k < s.blocks.size(); ++k) {
      const ir::binding_block& block = s.blocks[k];
      std::vector<ir::binding> bs = block.bindings;
      // Branches first (their own sequences), then the block from its last binding to its first.
      for (ir::binding& b : bs)
        if (auto* i = ir::dyn_cast<ir::if_node>(b.value)) {
          ir::expr t = rewrite_seq(i->then_branch, b.variable->name_hint), e = rewrite_seq(i->else_branch, b.variable->name_hint);
          if (t != i->then_branch || e != i->else_branch) {
            b.value = ir::make_if(i->cond, t, e);
            changed = true;
          }
        }
      const bool result_here = k + 1 == s.blocks.size() && ir::isa<ir::call_node>(s.body);
      if (result_here) bs.push_back({ir::make_var(result_name, s.body->checked_type), s.body, {}});
      std::vector<bool> removed(bs.size(), false);
      ctx_.bindings_ = &bs;
      ctx_.position_.clear();
      for (std::size_t i = 0; i < bs.size(); ++i) ctx_.position_[bs[i].variable.get()] = i;
      for (std::size_t i = bs.size(); i-- > 0;) {
        if (removed[i] || ir::isa<ir::if_node>(bs[i].value)) continue;
        ctx_.removed_ = removed;
        ctx_.current_ = i;
        if (apply_rules(bs, i, removed)) changed = true;
      }
      if (result_here) {
        if (bs.back().value == s.body) {
          bs.pop_back();  // unchanged: the result stays as it was
        } else if (!ir::isa<ir::call_node>(bs.back().value)) {
          body = bs.back().value;  // rewritten to a variable or a constant: that is the result
          bs.pop_back();
        } else {
          body = bs.back().variable;  // rewritten to a call: bound, and the result is its variable
        }
      }
      ir::binding_block out{block.dataflow, {}};
      for (std::size_t i = 0; i < bs.size(); ++i)
        if (!removed[i]) out.bindings.push_back(std::move(bs[i]));
      blocks.push_back(std::move(out));
    }
    if (!changed) return seq;
    return ir::make_seq(std::move(blocks), std::move(body));
  }

  bool apply_rules(std::vector<ir::binding>& bs, std::size_t i, std::vector<bool>& removed) {
    for (const rewrite_rule& rule : rules_) {
      std::optional<match_result> m = rule.pat.match(bs[i].value, ctx_);
      if (!m) continue;
      ctx_.absorbed_.clear();
      for (const ir::binding* b : m->intermediates()) ctx_.absorbed_.push_back(b->variable.get());
      ir::expr replacement = rule.rewrite(*m, ctx_);
      if (!replacement) continue;
      // The removed bindings: used only inside the rewritten values, and not by the replacement.
      std::vector<std::size_t> gone;
      for (const ir::var_node* v : ctx_.absorbed_) gone.push_back(ctx_.position_.at(v));
      for (const ir::var_node* v : ctx_.absorbed_) {
        std::size_t inside = count_refs(bs[i].value, v);
        for (std::size_t g : gone) inside += count_refs(bs[g].value, v);
        if (inside != ctx_.uses(*v))
          throw usage_error("kiln::transform::rewrite_bindings: rule '" + rule.name + "' removes '" + v->name_hint + "', which is used outside the match");
        if (count_refs(replacement, v) != 0)
          throw usage_error("kiln::transform::rewrite_bindings: rule '" + rule.name + "' removes '" + v->name_hint + "' but its replacement uses it");
      }
      count_uses(bs[i].value, -1);
      for (std::size_t g : gone) {
        count_uses(bs[g].value, -1);
        removed[g] = true;
      }
      count_uses(replacement, +1);
      bs[i].value = std::move(replacement);
      if (counts_) ++(*counts_)[rule.name];
      return true;
    }
    return false;
  }

  const ir::ir_module& module_;
  std::span<const rewrite_rule> rules_;
  rewrite_counts* counts_;
  std::unordered_map<const ir::var_node*, std::size_t> uses_;
  rewrite_context ctx_;
};

/// `rules` applied to every graph-level function of `m` (but those marked `SkipOptimization`);
/// `counts`, when given, adds up how often each rule applied; `ctx`, when given, supplies each
/// function's `use_counts` from its analysis cache.
inline ir::ir_module rewrite_bindings(const ir::ir_module& m, std::span<const rewrite_rule> rules, rewrite_counts* counts = nullptr,
                                      pass_context* ctx = nullptr) {
  ir::ir_module out = m;
  binding_rewriter rw(m, rules, counts);
  for (auto& e : m->functions()) {
    auto f = ir::ref_cast<ir::function_node>(e.func);
    if (!f || ir::detail::has_skip_optimization(*f)) continue;
    ir::function g = ctx ? rw.rewrite(e.gv->name, f, ctx->analysis<use_counts>(f).get()) : rw.rewrite(e.gv->name, f);
    if (g != f) out = ir::with_function(out, e.gv->name, g);
  }
  return out;
}
inline ir::ir_module rewrite_bindings(const ir::ir_module& m, std::initializer_list<rewrite_rule> rules, rewrite_counts* counts = nullptr) {
  return rewrite_bindings(m, std::span<const rewrite_rule>(rules.begin(), rules.size()), counts);
}

}  // namespace kiln::transform
