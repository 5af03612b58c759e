// expect: a pass's `required` list names a type that is not a pass
// expect: needs_a_widget
#include "common.hpp"
struct widget {};
struct needs_a_widget : ok_pass {
  static constexpr std::string_view name = "needs_a_widget";
  using required = kiln::pass_list<widget>;
};
int main() { (void)kiln::sequential<needs_a_widget>{}(toy::module()); }
