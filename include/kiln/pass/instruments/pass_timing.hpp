// SPDX-License-Identifier: Apache-2.0
/// \file
/// `pass_timing`: the design's PassTimingInstrument. Records wall time per pass as a tree that
/// mirrors the nesting of pipelines, merging repeated runs of a pass at the same place (call
/// counts), and prints it as an aligned table or a tree.
///
/// Works as a run-time instrument (`ctx.set_instruments({timer})` with a shared_ptr) and as a
/// compile-time policy (`kiln::run(pipeline, m, ctx, timer)`).
#pragma once

#include <kiln/pass/instrument.hpp>
#include <kiln/pass/pass_info.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

/// One pass at one place in the pipeline tree.
struct pass_timing_node {
  std::string name;
  pass_kind kind = pass_kind::module;
  std::size_t calls = 0;
  std::chrono::nanoseconds total{0};
  std::size_t failures = 0;
  std::vector<pass_timing_node> children;

  /// Time spent in this pass itself, outside the passes nested in it.
  std::chrono::nanoseconds self() const {
    auto t = total;
    for (const auto& c : children) t -= c.total;
    return t;
  }
};

/// Times passes; read `report()` after the run (or `table()` / `tree()`).
class pass_timing {
public:
  static constexpr std::string_view name = "pass_timing";

  void run_before_pass(const pass_info& info) {
    std::vector<pass_timing_node>& siblings = open_.empty() ? roots_ : open_.back().node->children;
    pass_timing_node* node = nullptr;
    for (auto& n : siblings)
      if (n.name == info.name) node = &n;
    if (!node) {
      siblings.push_back({std::string(info.name), info.kind, 0, {}, 0, {}});
      node = &siblings.back();
    }
    ++node->calls;
    open_.push_back({node, std::chrono::steady_clock::now()});
  }
  void run_after_pass(const pass_info&) { close(false); }
  void run_after_pass_failed(const pass_info&, const pass_error&) { close(true); }

  /// The passes timed so far, outermost first.
  const std::vector<pass_timing_node>& report() const noexcept { return roots_; }
  /// The time of the outermost passes together.
  std::chrono::nanoseconds total() const {
    std::chrono::nanoseconds t{0};
    for (const auto& r : roots_) t += r.total;
    return t;
  }
  void reset() {
    roots_.clear();
    open_.clear();
  }

  /// An aligned table: one row per pass (indented by nesting), calls, total ms, self ms, share of
  /// the total.
  std::string table() const {
    std::size_t width = 4;
    walk(roots_, 0, [&](const pass_timing_node& n, int depth) { width = std::max(width, n.name.size() + 2 * std::size_t(depth)); });
    std::string out;
    char line[256];
    std::snprintf(line, sizeof line, "%-*s %7s %12s %12s %7s\n", int(width), "pass", "calls", "total ms", "self ms", "share");
    out += line;
    const double all = static_cast<double>(total().count());
    walk(roots_, 0, [&](const pass_timing_node& n, int depth) {
      std::string label(std::size_t(depth) * 2, ' ');
      label += n.name;
      std::snprintf(line, sizeof line, "%-*s %7zu %12.3f %12.3f %6.1f%%%s\n", int(width), label.c_str(), n.calls,
                    ms(n.total), ms(n.self()), all > 0 ? 100.0 * static_cast<double>(n.total.count()) / all : 0.0,
                    n.failures ? " (failed)" : "");
      out += line;
    });
    return out;
  }

  /// TVM's form (`PassTimingInstrument.render()`): `name: total [self] (share of total; share of
  /// parent)`, each level of nesting indented by one tab.
  std::string tree() const {
    std::string out;
    const double all = static_cast<double>(total().count());
    walk_with_parent(roots_, 0, all, [&](const pass_timing_node& n, int depth, double parent) {
      char line[256];
      out.append(std::size_t(depth), '\t');
      std::snprintf(line, sizeof line, "%s: %.0fus [%.0fus] (%.2f%%; %.2f%%)\n", n.name.c_str(),
                    us(n.total), us(n.self()), all > 0 ? 100.0 * static_cast<double>(n.total.count()) / all : 0.0,
                    parent > 0 ? 100.0 * static_cast<double>(n.total.count()) / parent : 0.0);
      out += line;
    });
    return out;
  }

private:
  struct open_pass {
    pass_timing_node* node;
    std::chrono::steady_clock::time_point start;
  };

  void close(bool failed) {
    if (open_.empty()) return;  // a pass that started before this instrument was installed
    open_pass o = open_.back();
    open_.pop_back();
    o.node->total += std::chrono::steady_clock::now() - o.start;
    if (failed) ++o.node->failures;
  }

  static double ms(std::chrono::nanoseconds t) { return static_cast<double>(t.count()) / 1e6; }
  static double us(std::chrono::nanoseconds t) { return static_cast<double>(t.count()) / 1e3; }

  template <class F>
  static void walk(const std::vector<pass_timing_node>& nodes, int depth, F&& f) {
    for (const auto& n : nodes) {
      f(n, depth);
      walk(n.children, depth + 1, f);
    }
  }
  template <class F>
  static void walk_with_parent(const std::vector<pass_timing_node>& nodes, int depth, double parent, F&& f) {
    for (const auto& n : nodes) {
      f(n, depth, parent);
      walk_with_parent(n.children, depth + 1, static_cast<double>(n.total.count()), f);
    }
  }

  std::vector<pass_timing_node> roots_;
  std::vector<open_pass> open_;  // pointers stay valid: a node's siblings only grow before it opens
};

}  // namespace kiln
