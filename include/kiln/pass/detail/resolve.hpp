// SPDX-License-Identifier: Apache-2.0
/// \file
/// Dependency resolution for pipelines, written once as a `constexpr` function over integer node
/// ids: `kiln::sequential` runs it at compile time on pass types, the run-time pipeline on names.
///
/// Input: for each node (a distinct pass), the nodes it requires; the user's list of nodes.
/// Output: the plan — the user's passes in order, each preceded by whatever it requires that has
/// not been placed yet (depth first, requirements in the order listed), each such requirement at
/// most once. A user entry for a pass that is already in the plan because an earlier pass required
/// it is not placed again: the earlier step takes the user's instance. Listing a pass twice runs it
/// twice. For each step the plan also records which later steps rely on it (for "pulled-in passes
/// run when a pass that needs them runs"). A cycle stops resolution and is reported as the path
/// `a, b, ..., a`.
///
/// Cost: O(steps + edges) time, O(nodes) stack depth.
#pragma once

#include <vector>

namespace kiln::detail {

struct plan_step {
  int node = 0;
  int user_index = -1;  ///< position in the user's list, or -1 for a pass pulled in as a requirement
};

struct resolution {
  std::vector<plan_step> steps;
  std::vector<std::vector<int>> dependents;  ///< per step: the later steps that required it
  std::vector<int> cycle;                    ///< non-empty on a cycle: the nodes, first == last
};

class resolver {
public:
  constexpr explicit resolver(const std::vector<std::vector<int>>& requires_)
      : requires_(requires_), placed_(requires_.size(), 0), seen_(requires_.size(), 0), last_step_(requires_.size(), -1),
        on_path_(requires_.size(), 0) {}

  constexpr resolution run(const std::vector<int>& user) {
    for (int i = 0; i < static_cast<int>(user.size()); ++i) {
      const int n = user[static_cast<std::size_t>(i)];
      if (placed_[n] > seen_[n]++) {
        // Already placed as an earlier pass's requirement: that step runs the user's instance.
        plan_step& earlier = out_.steps[static_cast<std::size_t>(last_step_[n])];
        if (earlier.user_index < 0) earlier.user_index = i;
        continue;
      }
      if (!enter(n) || !place_requirements(n)) return std::move(out_);
      leave(n);
      emit(n, i);
    }
    return std::move(out_);
  }

private:
  constexpr bool enter(int n) {
    if (on_path_[n]) {
      auto from = path_.begin();
      while (*from != n) ++from;
      out_.cycle.assign(from, path_.end());
      out_.cycle.push_back(n);
      out_.steps.clear();
      return false;
    }
    on_path_[n] = 1;
    path_.push_back(n);
    return true;
  }
  constexpr void leave(int n) {
    on_path_[n] = 0;
    path_.pop_back();
  }
  constexpr bool place_requirements(int n) {
    for (int r : requires_[n]) {
      if (on_path_[r]) return enter(r);  // reports the cycle
      if (placed_[r] > 0) continue;
      if (!enter(r) || !place_requirements(r)) return false;
      leave(r);
      emit(r, -1);
    }
    return true;
  }
  constexpr void emit(int n, int user_index) {
    const int step = static_cast<int>(out_.steps.size());
    out_.steps.push_back({n, user_index});
    out_.dependents.emplace_back();
    for (int r : requires_[n]) out_.dependents[static_cast<std::size_t>(last_step_[r])].push_back(step);
    last_step_[n] = step;
    ++placed_[n];
  }

  const std::vector<std::vector<int>>& requires_;
  std::vector<int> placed_, seen_, last_step_;
  std::vector<char> on_path_;
  std::vector<int> path_;
  resolution out_;
};

/// Resolves `user` against the requirement graph `requires_` (see the file comment).
constexpr resolution resolve(const std::vector<std::vector<int>>& requires_, const std::vector<int>& user) {
  return resolver(requires_).run(user);
}

}  // namespace kiln::detail
