// expect: kiln::kernel_function_pass: this module type has no kernel functions
#include "common.hpp"
int main() {
  auto k = kiln::kernel_function_pass<"k">([](const auto& f) { return f; });
  (void)kiln::run(k, toy::module());
}
