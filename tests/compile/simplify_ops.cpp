// SPDX-License-Identifier: Apache-2.0
// simplify_ops in the compiler: a DenseNet transition (batch norm and ReLU, a 1x1 convolution, a
// pad of zero widths, a 2x2 average pool) and pools with padding, ceil_mode and groups compute
// what the reference evaluator computes once the pool runs before the convolution (the transition
// also in compiled mode); the pass does what its statistics say.
#include <kiln/compile.hpp>
#include <kiln/ir/ir.hpp>
#include <kiln/vm/kernels.hpp>

#include "helpers.hpp"

using namespace kiln_test;

namespace {

/// relu(x * 0.5 + 0.1), a 1x1 convolution of `groups` groups from `c` to `o` channels, a pad of
/// zero widths, then an average pool `pool` (its attributes as IR text) giving `out` positions.
std::string transition(int b, int c, int o, int hw, int groups, const std::string& pool, int out, const std::string& dt = "float32") {
  auto t4 = [&](int ch, int s) {
    return "R.Tensor((" + std::to_string(b) + ", " + std::to_string(ch) + ", " + std::to_string(s) + ", " + std::to_string(s) + "), \"" + dt + "\")";
  };
  const std::string w = "R.Tensor((" + std::to_string(o) + ", " + std::to_string(c / groups) + ", 1, 1), \"" + dt + "\")";
  return R"(@I.ir_module
class Module:
    @R.function
    def main(x: )" + t4(c, hw) + ", w: " + w + ") -> " + t4(o, out) + R"(:
        with R.dataflow():
            s: )" + t4(c, hw) + R"( = R.multiply(x, R.const(0.5, ")" + dt + R"("))
            a: )" + t4(c, hw) + R"( = R.add(s, R.const(0.1, ")" + dt + R"("))
            r: )" + t4(c, hw) + R"( = R.nn.relu(a)
            y: )" + t4(o, hw) + " = R.nn.conv2d(r, w, groups=" + std::to_string(groups) + R"()
            p: )" + t4(o, hw) + R"( = R.nn.pad(y, pad_width=[0, 0, 0, 0, 0, 0, 0, 0])
            gv: )" + t4(o, out) + " = R.nn.avg_pool2d(p, " + pool + R"()
            R.output(gv)
        return gv
)";
}

/// What simplify_ops did when `m` was compiled at opt level 2.
struct simplify_counts {
  std::uint64_t zero_pads_removed, pools_moved;
};
simplify_counts statistics(const ir::ir_module& m) {
  kiln::pass_context ctx(2);
  kiln::pass_context_scope scope(ctx);
  (void)kiln::compile(m);
  return {ctx.statistic("simplify_ops", "zero pads removed"), ctx.statistic("simplify_ops", "pools moved before a 1x1 convolution")};
}

}  // namespace

TEST_CASE("simplify_ops: a DenseNet transition pools before its 1x1 convolution and computes what the evaluator does") {
  const ir::ir_module m = ir::parse_module(transition(1, 16, 8, 8, 1, "pool_size=[2, 2], strides=[2, 2]", 4));
  const simplify_counts done = statistics(m);
  CHECK(done.zero_pads_removed == 1);
  CHECK(done.pools_moved == 1);
  const std::vector<vm::value> args = arguments_for(m, "main", {}, 3);
  for (int opt : {0, 2}) check_against_evaluator(m, "main", args, opt, 1e-5);
}

TEST_CASE("simplify_ops: pools with padding, count_include_pad, ceil_mode, dilation, groups, batch 2 and float64 compute what the evaluator does") {
  struct case_ {
    int b, c, o, hw, groups;
    std::string pool;
    int out;
    std::string dt = "float32";
  };
  const case_ cases[] = {
      {1, 12, 6, 9, 1, "pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1]", 5},
      {1, 12, 6, 9, 1, "pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1], count_include_pad=True", 5},
      {2, 12, 6, 9, 1, "pool_size=[2, 2], strides=[2, 2], ceil_mode=True", 5},
      {1, 12, 6, 9, 1, "pool_size=[2, 2], strides=[2, 2], dilation=[2, 2]", 4},
      {1, 12, 6, 8, 3, "pool_size=[2, 2], strides=[2, 2]", 4},
      {1, 12, 6, 8, 1, "pool_size=[2, 2], strides=[2, 2]", 4, "float64"},
  };
  for (const case_& k : cases) {
    CAPTURE(k.pool);
    CAPTURE(k.dt);
    const ir::ir_module m = ir::parse_module(transition(k.b, k.c, k.o, k.hw, k.groups, k.pool, k.out, k.dt));
    CHECK(statistics(m).pools_moved == 1);
    check_against_evaluator(m, "main", arguments_for(m, "main", {}, 5), 2, 1e-5, modes::bytecode);
  }
}
