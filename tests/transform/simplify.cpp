// SPDX-License-Identifier: Apache-2.0
// The graph-level passes: canonicalize_bindings, dead_code_elimination, eliminate_common_subexpr,
// fold_constant, simplify_ops.
#include <kiln/transform/canonicalize_bindings.hpp>
#include <kiln/transform/default_pipeline.hpp>
#include <kiln/transform/dead_code_elimination.hpp>
#include <kiln/transform/eliminate_common_subexpr.hpp>
#include <kiln/transform/fold_constant.hpp>
#include <kiln/transform/simplify_ops.hpp>

#include "helpers.hpp"

using namespace kiln;
using namespace kiln_test;
namespace t = kiln::transform;

TEST_CASE("canonicalize_bindings drops renamings and casts that prove nothing, but not a dataflow block's output") {
  CHECK(after(t::canonicalize_bindings{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), o: R.Object) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor("float32", ndim=1)):
        with R.dataflow():
            lv: R.Tensor((4,), "float32") = R.exp(x)
            lv1: R.Tensor((4,), "float32") = lv
            lv2: R.Tensor((4,), "float32") = R.match_cast(lv1, R.Tensor((4,), "float32"))
            gv: R.Tensor((4,), "float32") = lv2
            R.output(gv)
        y: R.Tensor((4,), "float32") = gv
        z: R.Tensor((3,), "float32") = R.match_cast(o, R.Tensor((3,), "float32"))
        return (y, z)
)") == R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), o: R.Object) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor("float32", ndim=1)):
        with R.dataflow():
            lv: R.Tensor((4,), "float32") = R.exp(x)
            gv: R.Tensor((4,), "float32") = lv
            R.output(gv)
        z = R.match_cast(o, R.Tensor((3,), "float32"))
        return (gv, z)
)");
}

TEST_CASE("dead_code_elimination removes unused pure bindings, last first, and functions no entry reaches") {
  CHECK(after(t::dead_code_elimination{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        R.func_attr({"global_symbol": "main"})
        a: R.Tensor((4,), "float32") = R.exp(x)
        b: R.Tensor((4,), "float32") = R.log(a)
        c: R.Object = R.call_packed("my.effect", x, sinfo_args=R.Object)
        d: R.Tensor((4,), "float32") = cls.used(x)
        return d

    @R.function
    def used(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return x

    @R.function
    def unused(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return x
)") == R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        R.func_attr({"global_symbol": "main"})
        c: R.Object = R.call_packed("my.effect", x, sinfo_args=R.Object)
        d: R.Tensor((4,), "float32") = cls.used(x)
        return d

    @R.function
    def used(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return x
)");
}

TEST_CASE("eliminate_common_subexpr shares equal values where they are visible, not across a branch's end") {
  const std::string out = after(kiln::sequential<t::eliminate_common_subexpr, t::canonicalize_bindings>{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), c: R.Prim("bool")) -> R.Tensor((4,), "float32"):
        a: R.Tensor((4,), "float32") = R.exp(x)
        b: R.Tensor((4,), "float32") = R.exp(x)
        s: R.Tensor((4,), "float32") = R.add(a, b)
        if c:
            p: R.Tensor((4,), "float32") = R.exp(x)
            q: R.Tensor((4,), "float32") = R.log(x)
            r: R.Tensor((4,), "float32") = R.add(p, q)
        else:
            r: R.Tensor((4,), "float32") = R.log(x)
        t: R.Tensor((4,), "float32") = R.log(x)
        u: R.Tensor((4,), "float32") = R.add(s, R.add(r, t))
        return u
)");
  CHECK(contains(out, "s: R.Tensor((4,), \"float32\") = R.add(a, a)"));
  CHECK(contains(out, "r: R.Tensor((4,), \"float32\") = R.add(a, q)"));  // the branch sees a
  CHECK(contains(out, "t: R.Tensor((4,), \"float32\") = R.log(x)"));    // q is not visible here
}

TEST_CASE("eliminate_common_subexpr shares chains of equal values in one run, and keeps a block's output readable after it") {
  const std::string out = after(t::eliminate_common_subexpr{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tuple(R.Tensor((4,), "float32"), R.Tensor((4,), "float32")):
        with R.dataflow():
            a: R.Tensor((4,), "float32") = R.exp(x)
            b: R.Tensor((4,), "float32") = R.exp(x)
            c: R.Tensor((4,), "float32") = R.log(a)
            d: R.Tensor((4,), "float32") = R.log(b)
            e: R.Tensor((4,), "float32") = R.add(c, d)
            o: R.Tensor((4,), "float32") = R.log(a)
            R.output(e, o)
        return (e, o)
)");
  CHECK(contains(out, "d: R.Tensor((4,), \"float32\") = c"));             // log(b) is log(a) once b reads as a
  CHECK(contains(out, "e: R.Tensor((4,), \"float32\") = R.add(c, c)"));
  CHECK(contains(out, "o: R.Tensor((4,), \"float32\") = c"));             // the output keeps its own name
  CHECK(contains(out, "return (e, o)"));                                      // c is a dataflow variable: not visible here
}

TEST_CASE("eliminate_common_subexpr keeps values over different size variables apart") {
  // Within one function n and m are two lengths: R.shape([n]) is not R.shape([m]), though a
  // function over n equals one over m.
  const std::string out = after(t::eliminate_common_subexpr{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n,), "int64"), s: R.Shape([m])) -> R.Tuple(R.Tensor((m,), "int64"), R.Tensor((n,), "int64"), R.Tensor((m,), "int64")):
        with R.dataflow():
            a: R.Tensor((m,), "int64") = R.broadcast_to(R.const(1, "int64"), R.shape([m]))
            b: R.Tensor((n,), "int64") = R.broadcast_to(R.const(1, "int64"), R.shape([n]))
            c: R.Tensor((m,), "int64") = R.broadcast_to(R.const(1, "int64"), R.shape([m]))
            R.output(a, b, c)
        return (a, b, c)
)");
  CHECK(contains(out, "b: R.Tensor((n,), \"int64\") = R.broadcast_to(R.const(1, \"int64\"), R.shape([n]))"));
  CHECK(contains(out, "c: R.Tensor((m,), \"int64\") = a"));
}

TEST_CASE("fold_constant computes constant calls with the kernels, through chains, and respects its size limit") {
  const std::string out = after(kiln::sequential<t::fold_constant, t::dead_code_elimination>{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        a: R.Tensor((2,), "float32") = R.add(R.const([1.0, 2.0], "float32"), R.const(1.0, "float32"))
        b: R.Tensor((2,), "float32") = R.multiply(a, a)
        c: R.Tensor((2,), "float32") = R.add(x, b)
        return c
)");
  CHECK(contains(out, R"(c: R.Tensor((2,), "float32") = R.add(x, R.const([4.0, 9.0], "float32")))"));
  CHECK(!contains(out, "a: R.Tensor"));

  const char* big = R"(@I.ir_module
class Module:
    @R.function
    def main() -> R.Tensor((100, 100), "float32"):
        a: R.Tensor((100, 100), "float32") = R.broadcast_to(R.const(1.0, "float32"), R.shape([100, 100]))
        return a
)";
  CHECK(!contains(after(t::fold_constant{}, big), "R.broadcast_to"));  // 40 KB: folded
  kiln::pass_context ctx;
  ctx.set_config(t::fold_constant_max_bytes(), std::int64_t{1000});
  kiln::pass_context_scope scope(ctx);
  CHECK(contains(after(t::fold_constant{}, big), "R.broadcast_to(R.const(1.0, \"float32\"), R.shape([100, 100]))"));
}

TEST_CASE("fold_constant leaves a call the kernels reject, with a warning naming it") {
  kiln::pass_context ctx;
  kiln::pass_context_scope scope(ctx);
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main() -> R.Tensor((1,), "int64"):
        a: R.Tensor((1,), "int64") = R.take(R.const([1, 2], "int64"), R.const([5], "int64"), axis=0)
        return a
)");
  CHECK(kiln::run(t::fold_constant{}, m) == m);
  REQUIRE(ctx.diagnostics().size() == 1);
  CHECK(contains(ctx.diagnostics()[0].message, "fold_constant: R.take was not folded"));
  CHECK(ctx.diagnostics()[0].where == "function 'main', binding 'a'");
}

TEST_CASE("the simplification passes count what they did in the context's statistics") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        with R.dataflow():
            c: R.Tensor((3,), "float32") = R.exp(R.const([0.0, 1.0, 2.0], "float32"))
            a: R.Tensor((2, 3), "float32") = R.add(x, c)
            b: R.Tensor((2, 3), "float32") = R.add(x, c)
            d: R.Tensor((2, 3), "float32") = b
            e: R.Tensor((2, 3), "float32") = R.multiply(a, d)
            unused: R.Tensor((2, 3), "float32") = R.nn.relu(e)
            R.output(e)
        return e

    @R.function
    def orphan(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        return x
)");
  pass_context ctx;
  (void)kiln::run(t::simplify{}, m, ctx);
  const auto& s = ctx.statistics();
  CHECK(s.at("fold_constant").at("bindings folded") == 1);
  CHECK(s.at("eliminate_common_subexpr").at("expressions shared") == 1);
  // d = b, and b = a once CSE has shared it: two copies over the two runs of the pass.
  CHECK(s.at("canonicalize_bindings").at("copies removed") == 2);
  CHECK(s.at("dead_code_elimination").at("bindings removed") >= 1);
  CHECK(ctx.statistics_report().find("eliminate_common_subexpr - expressions shared") != std::string::npos);
}

TEST_CASE("simplify_ops removes pads of zero widths and keeps the others") {
  CHECK(after(t::simplify_ops{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 2, 4, 4), "float32")) -> R.Tensor((1, 2, 6, 6), "float32"):
        with R.dataflow():
            a: R.Tensor((1, 2, 4, 4), "float32") = R.nn.pad(x, pad_width=[0, 0, 0, 0, 0, 0, 0, 0])
            b: R.Tensor((1, 2, 4, 4), "float32") = R.nn.relu(a)
            c: R.Tensor((1, 2, 4, 4), "float32") = R.nn.pad(b, pad_width=[0, 0, 0, 0, 0, 0, 0, 0], pad_mode="reflect")
            gv: R.Tensor((1, 2, 6, 6), "float32") = R.nn.pad(c, pad_width=[0, 0, 0, 0, 1, 1, 1, 1])
            R.output(gv)
        return gv
)") == R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 2, 4, 4), "float32")) -> R.Tensor((1, 2, 6, 6), "float32"):
        with R.dataflow():
            b: R.Tensor((1, 2, 4, 4), "float32") = R.nn.relu(x)
            gv: R.Tensor((1, 2, 6, 6), "float32") = R.nn.pad(b, pad_width=[0, 0, 0, 0, 1, 1, 1, 1])
            R.output(gv)
        return gv
)");
}

TEST_CASE("simplify_ops pools a 1x1 convolution's input instead of its output, where that costs less") {
  // DenseNet's transition: 8 channels to 4, then a 2x2 pool of stride 2.
  CHECK(after(t::simplify_ops{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8, 4, 4), "float32"), w: R.Tensor((4, 8, 1, 1), "float32")) -> R.Tensor((1, 4, 2, 2), "float32"):
        with R.dataflow():
            r: R.Tensor((1, 8, 4, 4), "float32") = R.nn.relu(x)
            c: R.Tensor((1, 4, 4, 4), "float32") = R.nn.conv2d(r, w)
            gv: R.Tensor((1, 4, 2, 2), "float32") = R.nn.avg_pool2d(c, pool_size=[2, 2], strides=[2, 2])
            R.output(gv)
        return gv
)") == R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8, 4, 4), "float32"), w: R.Tensor((4, 8, 1, 1), "float32")) -> R.Tensor((1, 4, 2, 2), "float32"):
        with R.dataflow():
            r: R.Tensor((1, 8, 4, 4), "float32") = R.nn.relu(x)
            c_pool: R.Tensor((1, 8, 2, 2), "float32") = R.nn.avg_pool2d(r, pool_size=[2, 2], strides=[2, 2])
            gv: R.Tensor((1, 4, 2, 2), "float32") = R.nn.conv2d(c_pool, w)
            R.output(gv)
        return gv
)");
}

TEST_CASE("simplify_ops leaves a pool after a convolution that is not 1x1, strided, padded, used twice, biased or integer, or when pooling first costs more") {
  const std::string unchanged[] = {
      // a 3x3 window
      R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8, 4, 4), "float32"), w: R.Tensor((4, 8, 3, 3), "float32")) -> R.Tensor((1, 4, 2, 2), "float32"):
        c: R.Tensor((1, 4, 4, 4), "float32") = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])
        gv: R.Tensor((1, 4, 2, 2), "float32") = R.nn.avg_pool2d(c, pool_size=[2, 2], strides=[2, 2])
        return gv
)",
      // a stride
      R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8, 8, 8), "float32"), w: R.Tensor((4, 8, 1, 1), "float32")) -> R.Tensor((1, 4, 2, 2), "float32"):
        c: R.Tensor((1, 4, 4, 4), "float32") = R.nn.conv2d(x, w, strides=[2, 2])
        gv: R.Tensor((1, 4, 2, 2), "float32") = R.nn.avg_pool2d(c, pool_size=[2, 2], strides=[2, 2])
        return gv
)",
      // padding
      R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8, 2, 2), "float32"), w: R.Tensor((4, 8, 1, 1), "float32")) -> R.Tensor((1, 4, 2, 2), "float32"):
        c: R.Tensor((1, 4, 4, 4), "float32") = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])
        gv: R.Tensor((1, 4, 2, 2), "float32") = R.nn.avg_pool2d(c, pool_size=[2, 2], strides=[2, 2])
        return gv
)",
      // the convolution's result used again
      R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8, 4, 4), "float32"), w: R.Tensor((4, 8, 1, 1), "float32")) -> R.Tuple(R.Tensor((1, 4, 2, 2), "float32"), R.Tensor((1, 4, 4, 4), "float32")):
        c: R.Tensor((1, 4, 4, 4), "float32") = R.nn.conv2d(x, w)
        p: R.Tensor((1, 4, 2, 2), "float32") = R.nn.avg_pool2d(c, pool_size=[2, 2], strides=[2, 2])
        return (p, c)
)",
      // a bias between
      R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8, 4, 4), "float32"), w: R.Tensor((4, 8, 1, 1), "float32"), b: R.Tensor((4, 1, 1), "float32")) -> R.Tensor((1, 4, 2, 2), "float32"):
        c: R.Tensor((1, 4, 4, 4), "float32") = R.nn.conv2d(x, w)
        d: R.Tensor((1, 4, 4, 4), "float32") = R.add(c, b)
        gv: R.Tensor((1, 4, 2, 2), "float32") = R.nn.avg_pool2d(d, pool_size=[2, 2], strides=[2, 2])
        return gv
)",
      // integers: the pool rounds
      R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8, 4, 4), "int32"), w: R.Tensor((4, 8, 1, 1), "int32")) -> R.Tensor((1, 4, 2, 2), "int32"):
        c: R.Tensor((1, 4, 4, 4), "int32") = R.nn.conv2d(x, w)
        gv: R.Tensor((1, 4, 2, 2), "int32") = R.nn.avg_pool2d(c, pool_size=[2, 2], strides=[2, 2])
        return gv
)",
      // a 3x3 pool of stride 1 after a convolution to fewer channels: pooling 8 channels first
      // would cost more than the convolution saves (none)
      R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8, 4, 4), "float32"), w: R.Tensor((2, 8, 1, 1), "float32")) -> R.Tensor((1, 2, 4, 4), "float32"):
        c: R.Tensor((1, 2, 4, 4), "float32") = R.nn.conv2d(x, w)
        gv: R.Tensor((1, 2, 4, 4), "float32") = R.nn.avg_pool2d(c, pool_size=[3, 3], padding=[1, 1, 1, 1])
        return gv
)",
  };
  for (const std::string& src : unchanged) {
    CAPTURE(src);
    CHECK(after(t::simplify_ops{}, src) == text_of(ir::parse_module(src)));
  }
}

TEST_CASE("simplify_ops counts what it did in the context's statistics") {
  const ir::ir_module m = ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 8, 4, 4), "float32"), w: R.Tensor((4, 8, 1, 1), "float32")) -> R.Tensor((1, 4, 2, 2), "float32"):
        c: R.Tensor((1, 4, 4, 4), "float32") = R.nn.conv2d(x, w)
        p: R.Tensor((1, 4, 4, 4), "float32") = R.nn.pad(c, pad_width=[0, 0, 0, 0, 0, 0, 0, 0])
        gv: R.Tensor((1, 4, 2, 2), "float32") = R.nn.avg_pool2d(p, pool_size=[2, 2], strides=[2, 2])
        return gv
)");
  pass_context ctx;
  const ir::ir_module out = kiln::run(t::simplify_ops{}, m, ctx);
  const auto& s = ctx.statistics();
  CHECK(s.at("simplify_ops").at("zero pads removed") == 1);
  CHECK(s.at("simplify_ops").at("pools moved before a 1x1 convolution") == 1);
  CHECK(ir::verify(out).empty());
  CHECK(contains(text_of(out), "R.nn.conv2d(c_pool, w)"));
}
