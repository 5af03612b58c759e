// expect: kiln::run: a pass of this pipeline needs an IR property that no earlier pass establishes
// expect: plan_memory
// expect: lowered
#include "common.hpp"
struct lowered {
  static constexpr std::string_view name = "lowered";
};
struct lower : ok_pass {
  static constexpr std::string_view name = "lower";
  using establishes = kiln::property_list<lowered>;
};
struct plan_memory : ok_pass {
  static constexpr std::string_view name = "plan_memory";
  using needs = kiln::property_list<lowered>;
};
// lower comes after the pass that needs what it establishes
int main() { (void)kiln::run(kiln::sequential<ok_pass, plan_memory, lower>{}, toy::module()); }
