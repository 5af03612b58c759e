// SPDX-License-Identifier: Apache-2.0
/// \file
/// Pipelines assembled at run time: `make_pipeline` from a list of `kiln::pass` values, and
/// `parse_pipeline` from text such as `"fold_constant,dead_code_elimination"`.
///
/// Requirements are resolved exactly as in `kiln::sequential` (the same `detail::resolve`), by
/// name: a required pass that is not in the list is created from the registry.
///
/// The textual form, which a static `sequential<...>::text()` prints and `parse_pipeline` reads:
///
/// \code
/// pipeline := [ element { "," element } ]
/// element  := name                              a registered pass
///           | name [ "<" opt_level ">" ] "(" pipeline ")"   a nested pipeline with that name
/// name     := [A-Za-z0-9_.-]+
/// \endcode
#pragma once

#include <kiln/pass/detail/resolve.hpp>
#include <kiln/pass/erased_pass.hpp>
#include <kiln/pass/registry.hpp>
#include <kiln/pass/run.hpp>
#include <kiln/pass/sequential.hpp>

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

namespace detail {

/// A pipeline whose passes are `kiln::pass` values, resolved when it is made.
template <class Module>
class runtime_sequential_model final : public erased_pass_model<Module> {
public:
  runtime_sequential_model(std::vector<pass<Module>> listed, std::string name, int opt_level,
                           const pass_registry<Module>& registry)
      : name_(std::move(name)), listed_(std::move(listed)) {
    if (!is_valid_pass_name(name_))
      throw usage_error("kiln::make_pipeline: '" + name_ + "' is not a valid pipeline name (letters, digits, '_', '.' and '-')");
    if (opt_level < 0) throw usage_error("kiln::make_pipeline: opt_level must be 0 or more, not " + std::to_string(opt_level));
    info_ = {name_, opt_level, {}, pass_kind::sequential};
    resolve_steps(registry);
  }

  const pass_info& info() const noexcept override { return info_; }

  Module run(const Module& m, pass_context& ctx, skip_reason gate) override {
    return run_protocol_with<true>(info_, [&]() -> Module { return run_steps(m, ctx); }, m, ctx, gate);
  }
  Module run_direct(const Module& m, pass_context& ctx) override {
    auto body = [&]() -> Module { return run_steps(m, ctx); };
    return run_body<true>(info_, body, m, ctx);
  }
  void invalidate_after_direct(const Module&, const Module&, pass_context&) override {}  // the steps did

  std::string text() const override {
    std::string s = name_;  // appends throughout: GCC 12 -O3 warns falsely (-Wrestrict) on "x" + string
    if (info_.opt_level) s.append("<").append(std::to_string(info_.opt_level)).append(">");
    return s.append("(").append(contents_text()).append(")");
  }
  std::string contents_text() const {
    std::string s;
    for (const pass<Module>& p : listed_) s.append(s.empty() ? "" : ",").append(p.text());
    return s;
  }
  std::vector<pipeline_step> steps() const override {
    std::vector<pipeline_step> out;
    for (const step& s : steps_) out.push_back({s.p.name(), s.pulled_in});
    return out;
  }
  const std::type_info& type() const noexcept override { return typeid(void); }
  std::string needed_by(std::string_view property) const override {
    for (const auto& [prop, by] : needed_by_)
      if (prop == property) return by;
    return name_;
  }

private:
  struct step {
    pass<Module> p;
    bool pulled_in;
    std::vector<int> dependents;
  };

  void resolve_steps(const pass_registry<Module>& registry) {
    // Nodes are pass names: the listed passes first, then whatever they require, found in the
    // registry.
    std::vector<pass<Module>> node_pass;
    std::map<std::string, int, std::less<>> index;
    auto node_of = [&](const pass<Module>& p) {
      auto [it, added] = index.try_emplace(std::string(p.name()), static_cast<int>(node_pass.size()));
      if (added) node_pass.push_back(p);
      return it->second;
    };
    std::vector<int> user;
    for (const pass<Module>& p : listed_) user.push_back(node_of(p));
    std::vector<std::vector<int>> graph;
    for (std::size_t n = 0; n < node_pass.size(); ++n) {
      std::vector<int> req;
      for (std::string_view r : node_pass[n].info().required) {
        auto it = index.find(r);
        if (it == index.end()) {
          if (!registry.contains(r))
            throw usage_error("kiln::make_pipeline '" + name_ + "': pass '" + std::string(node_pass[n].name()) +
                              "' requires '" + std::string(r) + "', but " + registry.unknown_pass_message(r));
          req.push_back(node_of(registry.create(r)));
        } else {
          req.push_back(it->second);
        }
      }
      graph.push_back(std::move(req));  // node_pass may have grown; the loop reaches the new nodes
    }
    resolution r = resolve(graph, user);
    if (!r.cycle.empty()) {
      std::string msg = "kiln::make_pipeline '" + name_ + "': ";
      for (std::size_t i = 0; i < r.cycle.size(); ++i)
        msg.append(i == 0 ? "'" : i == 1 ? " requires '" : ", which requires '")
            .append(node_pass[static_cast<std::size_t>(r.cycle[i])].name())
            .append("'");
      throw usage_error(msg + " (cycle)");
    }
    for (std::size_t s = 0; s < r.steps.size(); ++s) {
      const plan_step& ps = r.steps[s];
      pass<Module> p = ps.user_index >= 0 ? listed_[static_cast<std::size_t>(ps.user_index)] : node_pass[static_cast<std::size_t>(ps.node)];
      max_opt_level_ = std::max(max_opt_level_, p.info().opt_level);
      steps_.push_back({std::move(p), ps.user_index < 0, std::move(r.dependents[s])});
    }
    walk_properties();
  }

  /// The same walk as `kiln::sequential`'s, by name: a step needing what an earlier step
  /// invalidated is an error; the pipeline needs what no step establishes before it is needed.
  void walk_properties() {
    struct state {
      property_check check;
      bool held = false, needed = false, established = false, invalidated = false;
      std::string_view invalidated_by;
    };
    std::vector<state> props;
    auto at = [&](const property_check& c) -> state& {
      for (auto& p : props)
        if (p.check.name == c.name) return p;
      state fresh;
      fresh.check = c;
      return props.emplace_back(fresh);
    };
    for (const step& st : steps_) {
      const pass_info& info = st.p.info();
      for (const property_check& n : info.needs) {
        state& p = at(n);
        if (p.held) continue;
        if (!p.invalidated_by.empty())
          throw usage_error("kiln::make_pipeline '" + name_ + "': pass '" + std::string(info.name) + "' needs property '" + std::string(n.name) +
                            "', which '" + std::string(p.invalidated_by) + "' invalidates before it");
        if (!p.needed) needed_by_.emplace_back(std::string(n.name), st.p.needed_by(n.name));
        p.needed = true;
      }
      for (const property_check& i : info.invalidates) {
        state& p = at(i);
        p.held = false, p.established = false, p.invalidated = true, p.invalidated_by = info.name;
      }
      for (const property_check& e : info.establishes) {
        state& p = at(e);
        p.held = true, p.established = true, p.invalidated = false, p.invalidated_by = {};
      }
    }
    for (const state& p : props) {
      if (p.needed) needs_.push_back(p.check);
      if (p.established) establishes_.push_back(p.check);
      if (p.invalidated) invalidates_.push_back(p.check);
    }
    info_.needs = needs_;
    info_.establishes = establishes_;
    info_.invalidates = invalidates_;
  }

  Module direct_step(std::size_t s, const Module& in, pass_context& ctx) {
    Module out = steps_[s].p.run_direct(in, ctx);
    if (!ctx.analyses().empty()) [[unlikely]]
      steps_[s].p.invalidate_after_direct(in, out, ctx);
    return out;
  }

  Module run_steps(const Module& m, pass_context& ctx) {
    if (steps_.empty()) return m;
    if (ctx.runs_everything_up_to(max_opt_level_)) [[likely]] {  // as in kiln::sequential
      Module cur = direct_step(0, m, ctx);
      for (std::size_t s = 1; s < steps_.size(); ++s) cur = direct_step(s, cur, ctx);
      return cur;
    }
    gate_.resize(steps_.size());
    decide_gates(
        name_, ctx, std::span<skip_reason>(gate_), [&](std::size_t s) -> const pass_info& { return steps_[s].p.info(); },
        [&](std::size_t s) { return !steps_[s].pulled_in; },
        [&](std::size_t s) { return std::span<const int>(steps_[s].dependents); });
    Module cur = steps_[0].p.run_gated(m, ctx, gate_[0]);
    for (std::size_t s = 1; s < steps_.size(); ++s) replace_module(cur, steps_[s].p.run_gated(cur, ctx, gate_[s]), ctx);
    return cur;
  }

  std::string name_;
  pass_info info_;
  std::vector<property_check> needs_, establishes_, invalidates_;
  std::vector<std::pair<std::string, std::string>> needed_by_;  // property -> the innermost step needing it first
  std::vector<pass<Module>> listed_;
  std::vector<step> steps_;
  int max_opt_level_ = 0;
  std::vector<skip_reason> gate_;  // reused between runs (a pipeline is not run re-entrantly)
};

}  // namespace detail

/// A pipeline of `passes`, named `name`, skipped as a whole below `opt_level`. Requirements that
/// are not listed are created from `registry`; unknown requirements and cycles are `usage_error`s.
template <module_like Module>
pass<Module> make_pipeline(std::vector<pass<Module>> passes, std::string name = "sequential", int opt_level = 0,
                           const pass_registry<Module>& registry = pass_registry<Module>::global()) {
  return pass<Module>(std::make_shared<detail::runtime_sequential_model<Module>>(std::move(passes), std::move(name),
                                                                                 opt_level, registry));
}

/// A textual pipeline that cannot be read: says what was expected or which pass is unknown, and
/// where (a 1-based column), and shows the text with a caret under the problem.
class pipeline_parse_error : public usage_error {
public:
  pipeline_parse_error(std::string_view text, std::size_t offset, std::size_t length, const std::string& message)
      : usage_error(format(text, offset, length, message)), column_(offset + 1), message_(message) {}
  std::size_t column() const noexcept { return column_; }
  const std::string& message() const noexcept { return message_; }

private:
  static std::string format(std::string_view text, std::size_t offset, std::size_t length, const std::string& message) {
    std::string s = "kiln::parse_pipeline: " + message + " at column " + std::to_string(offset + 1) + "\n  ";
    s.append(text).append("\n  ").append(offset, ' ').append("^");
    if (length > 1) s.append(length - 1, '~');
    return s;
  }
  std::size_t column_;
  std::string message_;
};

namespace detail {

template <class Module>
class pipeline_parser {
public:
  pipeline_parser(std::string_view text, const pass_registry<Module>& registry) : text_(text), registry_(registry) {}

  std::vector<pass<Module>> parse() {
    std::vector<pass<Module>> passes = list();
    skip_space();
    if (at_ < text_.size()) {
      if (text_[at_] == ')') fail(at_, 1, "unbalanced ')'");
      fail(at_, 1, "expected ',' between passes");
    }
    return passes;
  }

private:
  std::vector<pass<Module>> list() {
    std::vector<pass<Module>> out;
    skip_space();
    if (at_ == text_.size() || text_[at_] == ')') return out;  // an empty (sub)pipeline
    for (;;) {
      out.push_back(element());
      skip_space();
      if (at_ < text_.size() && text_[at_] == ',') {
        ++at_;
        continue;
      }
      return out;
    }
  }

  pass<Module> element() {
    skip_space();
    const std::size_t start = at_;
    while (at_ < text_.size() && is_valid_pass_name(text_.substr(at_, 1))) ++at_;
    const std::string_view name = text_.substr(start, at_ - start);
    if (name.empty()) fail(start, 1, "expected a pass name");
    skip_space();
    int level = 0;
    if (at_ < text_.size() && text_[at_] == '<') {
      const std::size_t open = at_++;
      const std::size_t digits = at_;
      while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') ++at_;
      auto [end, ec] = std::from_chars(text_.data() + digits, text_.data() + at_, level);
      if (ec != std::errc() || end == text_.data() + digits || at_ >= text_.size() || text_[at_] != '>')
        fail(open, at_ - open + 1, "expected an opt level such as <2> after pipeline name '" + std::string(name) + "'");
      ++at_;
      skip_space();
      if (at_ >= text_.size() || text_[at_] != '(') fail(at_, 1, "expected '(' after the opt level of '" + std::string(name) + "'");
    }
    if (at_ < text_.size() && text_[at_] == '(') {
      const std::size_t open = at_++;
      if (++depth_ > max_depth)  // deep text must not overflow the stack
        fail(open, 1, "pipelines nested too deeply (limit " + std::to_string(max_depth) + ")");
      std::vector<pass<Module>> inner = list();
      --depth_;
      skip_space();
      if (at_ >= text_.size() || text_[at_] != ')') fail(open, 1, "this '(' is not closed");
      ++at_;
      return make_pipeline<Module>(std::move(inner), std::string(name), level, registry_);
    }
    if (!registry_.contains(name)) fail(start, name.size(), "unknown pass '" + std::string(name) + "'" + registry_.suggest(name));
    return registry_.create(name);
  }

  void skip_space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n')) ++at_;
  }
  static constexpr int max_depth = 64;
  int depth_ = 0;
  [[noreturn]] void fail(std::size_t offset, std::size_t length, const std::string& message) const {
    throw pipeline_parse_error(text_, offset, length, message);
  }

  std::string_view text_;
  const pass_registry<Module>& registry_;
  std::size_t at_ = 0;
};

}  // namespace detail

/// Parses a textual pipeline (see the file comment) into a run-time pipeline named `name`; the
/// passes come from `registry`. A `pipeline_parse_error` points at the problem.
template <module_like Module>
pass<Module> parse_pipeline(std::string_view text, const pass_registry<Module>& registry = pass_registry<Module>::global(),
                            std::string name = "sequential") {
  return make_pipeline<Module>(detail::pipeline_parser<Module>(text, registry).parse(), std::move(name), 0, registry);
}

}  // namespace kiln
