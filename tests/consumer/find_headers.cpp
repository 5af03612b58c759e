// SPDX-License-Identifier: Apache-2.0
// Prints where export_library would find kiln's headers. Built by hand with a relative -I and run
// from another folder (tests/consumer/run.cmake), where the header's own __FILE__ is no help.
#include <kiln/vm/library.hpp>

#include <iostream>

int main() {
  std::cout << "consumer: kiln headers at " << kiln::vm::detail::find_kiln_include_dir({}).string() << "\n";
  return 0;
}
