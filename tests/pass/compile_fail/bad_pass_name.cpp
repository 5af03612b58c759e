// expect: a pass name must be non-empty and use only letters, digits
#include "common.hpp"
struct spaced : ok_pass {
  static constexpr std::string_view name = "fold constant";
};
int main() { (void)kiln::run(spaced{}, toy::module()); }
