// expect: kiln::sequential: a pass needs an IR property that an earlier pass of the pipeline invalidates
// expect: plan_memory
// expect: lowered
// expect: add_ops
#include "common.hpp"
struct lowered {
  static constexpr std::string_view name = "lowered";
};
struct lower : ok_pass {
  static constexpr std::string_view name = "lower";
  using establishes = kiln::property_list<lowered>;
};
struct add_ops : ok_pass {  // brings back what `lower` removed
  static constexpr std::string_view name = "add_ops";
  using invalidates = kiln::property_list<lowered>;
};
struct plan_memory : ok_pass {
  static constexpr std::string_view name = "plan_memory";
  using needs = kiln::property_list<lowered>;
};
// Nested: the inner pipeline needs `lowered` from the outer one, where add_ops has undone it.
using inner = kiln::named_sequential<"inner", 0, ok_pass, plan_memory>;
int main() { (void)kiln::sequential<lower, add_ops, inner>{}(toy::module()); }
