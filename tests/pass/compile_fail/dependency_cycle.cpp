// expect: kiln::sequential: the passes' requirements form a cycle
// expect: cyc_a
// expect: cyc_b
#include "common.hpp"
struct cyc_b;
struct cyc_a : ok_pass {
  static constexpr std::string_view name = "cyc_a";
  using required = kiln::pass_list<cyc_b>;
};
struct cyc_b : ok_pass {
  static constexpr std::string_view name = "cyc_b";
  using required = kiln::pass_list<cyc_a>;
};
int main() { (void)kiln::sequential<ok_pass, cyc_a>{}(toy::module()); }
