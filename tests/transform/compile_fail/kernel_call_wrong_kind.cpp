// expect: does not have the kind its signature in kernels/calling_convention.hpp gives at this position
// A lowering that passes softmax's axis as a bool: the signature wants an integer.
#include <kiln/transform/kernel_lowering.hpp>
int main() {
  using namespace kiln::transform;
  const kiln::ir::expr x = lower::null();
  (void)lower::call<kiln::kernels::abi::softmax>(x, lower::boolean(true));
}
