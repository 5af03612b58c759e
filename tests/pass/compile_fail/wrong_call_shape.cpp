// expect: kiln: this pass cannot run on this module type
#include "common.hpp"
struct takes_an_int {
  static constexpr std::string_view name = "takes_an_int";
  int operator()(int x) const { return x; }
};
int main() { (void)kiln::run(takes_an_int{}, toy::module()); }
