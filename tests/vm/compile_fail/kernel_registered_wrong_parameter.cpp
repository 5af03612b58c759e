// expect: a kernel's parameter does not take the kind of argument its signature in kernels/calling_convention.hpp gives at this position
// A registration of softmax that reads its axis as a double.
#define KILN_SEPARATE_COMPILATION
#include <kiln/vm/kernels.hpp>
int main() {
  kiln::vm::function_registry r;
  kiln::vm::add_kernel<kiln::kernels::abi::softmax>(r, [](kiln::runtime::tensor, double, kiln::runtime::tensor) {});
}
