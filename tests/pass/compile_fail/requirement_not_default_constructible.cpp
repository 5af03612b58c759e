// expect: is pulled in as a requirement but is not default-constructible
#include "common.hpp"
struct configured : ok_pass {
  static constexpr std::string_view name = "configured";
  explicit configured(int) {}
};
struct needs_configured : ok_pass {
  static constexpr std::string_view name = "needs_configured";
  using required = kiln::pass_list<configured>;
};
int main() { (void)kiln::sequential<needs_configured>{}(toy::module()); }
