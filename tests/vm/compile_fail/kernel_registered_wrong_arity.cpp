// expect: a kernel registered with more or fewer parameters than its signature in kernels/calling_convention.hpp lists
// A registration of matmul without its transpose flags.
#define KILN_SEPARATE_COMPILATION
#include <kiln/vm/kernels.hpp>
int main() {
  kiln::vm::function_registry r;
  kiln::vm::add_kernel<kiln::kernels::abi::matmul>(r, [](kiln::runtime::tensor, kiln::runtime::tensor, kiln::runtime::tensor) {});
}
