// expect: can be called as more than one kind of pass
#include "common.hpp"
struct anything_goes {
  static constexpr std::string_view name = "anything_goes";
  toy::module operator()(const toy::module& m) const { return m; }
  toy::function operator()(const toy::function& f) const { return f; }
};
int main() { (void)kiln::run(anything_goes{}, toy::module()); }
