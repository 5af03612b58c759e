// expect: a kernel call with more or fewer arguments than its signature in kernels/calling_convention.hpp gives
// A lowering of conv2d that forgets the groups.
#include <kiln/transform/kernel_lowering.hpp>
int main() {
  using namespace kiln::transform;
  const kiln::ir::expr x = lower::null(), w = lower::null();
  (void)lower::call<kiln::kernels::abi::conv2d>(x, w, lower::null(), lower::ints({1, 1}), lower::ints({0, 0}), lower::ints({1, 1}));
}
