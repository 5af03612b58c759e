// SPDX-License-Identifier: Apache-2.0
// The lowering passes, one behaviour per case: IR text in, expected IR text out.
#include <kiln/pass/pass.hpp>
#include <kiln/transform/default_pipeline.hpp>

#include "helpers.hpp"

using namespace kiln;
using namespace kiln_test;
namespace t = kiln::transform;

namespace {

// The passes up to and including `Last`, as the default pipeline orders them.
using upto_legalize = kiln::sequential<t::legalize_ops>;
using upto_rewrite = kiln::sequential<t::legalize_ops, t::to_non_dataflow, t::call_tir_rewrite>;
using upto_plan = kiln::sequential<t::legalize_ops, t::to_non_dataflow, t::call_tir_rewrite, t::static_plan_block_memory>;
using upto_builtins = kiln::sequential<t::legalize_ops, t::to_non_dataflow, t::call_tir_rewrite, t::static_plan_block_memory, t::vm_builtin_lower>;
using upto_shapes = kiln::sequential<t::legalize_ops, t::to_non_dataflow, t::call_tir_rewrite, t::static_plan_block_memory, t::vm_builtin_lower,
                                     t::vm_shape_lower>;

const char* softmax_module = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((6,), "float32"):
        with R.dataflow():
            lv: R.Tensor((2, 3), "float32") = R.nn.softmax(x, axis=1)
            lv1: R.Tensor((2, 1), "float32") = R.sum(lv, axis=[1], keepdims=True)
            lv2: R.Tensor((2, 3), "float32") = R.divide(lv, lv1)
            gv: R.Tensor((6,), "float32") = R.reshape(lv2, R.shape([-1]))
            R.output(gv)
        return gv
)";

// Tensors of symbolic size: a and c have equal byte sizes, b is dead when c is made, d and e escape.
const char* symbolic_module = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 4), "float32")) -> R.Tuple(R.Tensor((n, 8), "float32"), R.Tensor((4, n), "float32")):
        a: R.Tensor((n, 4), "float32") = R.exp(x)
        b: R.Tensor((n, 4), "float32") = R.exp(a)
        c: R.Tensor((4, n), "float32") = R.permute_dims(b)
        d: R.Tensor((n, 8), "float32") = R.concat((x, x), axis=1)
        e: R.Tensor((4, n), "float32") = R.add(c, c)
        return (d, e)
)";

}  // namespace

TEST_CASE("legalize_ops turns operators into kernel calls, attributes into values, reshape into a view") {
  CHECK(after(upto_legalize{}, softmax_module) == R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((6,), "float32"):
        with R.dataflow():
            lv: R.Tensor((2, 3), "float32") = R.call_dps_packed(R.ExternFunc("kernels.softmax"), (x, R.prim_value(1)), out_sinfo=R.Tensor((2, 3), "float32"))
            lv1: R.Tensor((2, 1), "float32") = R.call_dps_packed(R.ExternFunc("kernels.sum"), (lv, R.shape([1]), R.prim_value(1, "bool")), out_sinfo=R.Tensor((2, 1), "float32"))
            lv2: R.Tensor((2, 3), "float32") = R.call_dps_packed(R.ExternFunc("kernels.divide"), (lv, lv1), out_sinfo=R.Tensor((2, 3), "float32"))
            gv: R.Tensor((6,), "float32") = R.call_packed("kernels.reshape_view", lv2, R.shape([6]), sinfo_args=R.Tensor((6,), "float32"))
            R.output(gv)
        return gv
)");
}

TEST_CASE("legalize_ops lowers optional attributes: an absent axis is null or empty, absent clip bounds are infinite") {
  const std::string out = after(upto_legalize{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32")) -> R.Tuple(R.Tensor((), "int64"), R.Tensor((), "float32"), R.Tensor((2, 3), "float32"), R.Tensor((2, 3), "float32"), R.Tensor((3, 2), "float32"), R.Tensor((2, 3), "float32")):
        a: R.Tensor((), "int64") = R.argmax(x)
        b: R.Tensor((), "float32") = R.max(x)
        c: R.Tensor((2, 3), "float32") = R.clip(x, min=0.0, max=inf)
        d: R.Tensor((2, 3), "float32") = R.sum(x, axis=[])
        e: R.Tensor((3, 2), "float32") = R.permute_dims(x)
        f: R.Tensor((2, 3), "float32") = R.nn.gelu(x, approximate="tanh")
        return (a, b, c, d, e, f)
)");
  CHECK(contains(out, R"(R.call_dps_packed(R.ExternFunc("kernels.argmax"), (x, R.null_value(), R.prim_value(0, "bool")))"));
  CHECK(contains(out, R"(R.call_dps_packed(R.ExternFunc("kernels.max"), (x, R.shape([]), R.prim_value(0, "bool")))"));
  CHECK(contains(out, R"(R.call_dps_packed(R.ExternFunc("kernels.clip"), (x, R.prim_value(0.0, "float64"), R.prim_value(inf, "float64")))"));
  CHECK(contains(out, R"(R.call_dps_packed(R.ExternFunc("kernels.copy"), (x,))"));  // reduces no axis
  CHECK(contains(out, R"(R.call_dps_packed(R.ExternFunc("kernels.permute_dims"), (x, R.shape([])))"));
  CHECK(contains(out, R"(R.call_dps_packed(R.ExternFunc("kernels.gelu_tanh"), (x,))"));
}

TEST_CASE("legalize_ops reports every call it cannot lower at once, with function and binding (nested calls are bound first)") {
  static const ir::op no_kernel = ir::op_registry::global().add(
      {"test.no_kernel", {"x"}, {}, [](const ir::call_context& c) { return c.arg_type(0); }, ir::op_pattern::elemwise, "an operator without a kernel"});
  (void)no_kernel;
  const std::string msg = message_of<kiln::error>([] {
    kiln::run(upto_legalize{}, ir::parse_module(R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor("float32", ndim=2)) -> R.Tuple(R.Tensor((2, 2), "float64"), R.Tensor("float32", ndim=2)):
        a: R.Tensor((2, 3), "float32") = R.test.no_kernel(x)
        b: R.Tensor((2, 2), "float64") = R.matmul(a, R.permute_dims(a), out_dtype="float64")
        c: R.Tensor("float32", ndim=2) = R.exp(y)
        return (b, c)

    @R.function
    def other(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        z: R.Tensor((4,), "float32") = R.test.no_kernel(x)
        return z
)"));
  });
  CHECK(msg == "kiln: pass 'legalize_ops' (in 'sequential') failed: kiln::transform::legalize_ops: 4 calls cannot be lowered to kernels:\n"
               "  R.test.no_kernel in function 'main', binding 'a': no kernel implements operator R.test.no_kernel\n"
               "  R.matmul in function 'main', binding 'b': matmul with out_dtype float64 on float32 operands has no kernel (the kernels compute in the operands' dtype); cast the operands instead\n"
               "  R.exp in function 'main', binding 'c': the result type R.Tensor(\"float32\", ndim=2) does not give the shape and dtype of the output to allocate; add an R.match_cast to a known shape before this call\n"
               "  R.test.no_kernel in function 'other', binding 'z': no kernel implements operator R.test.no_kernel");
}

TEST_CASE("legalize_ops inlines a kernel function's body and calls an external kernel by its global symbol") {
  const std::string out = after(upto_legalize{}, R"(@I.ir_module
class Module:
    @T.prim_func
    def add_relu(a: R.Tensor((m, 4), "float32"), b: R.Tensor((m, 4), "float32"), out: R.Tensor((m, 4), "float32")):
        s: R.Tensor((m, 4), "float32") = R.add(a, b)
        return R.nn.relu(s)

    @T.prim_func
    def ext(p: R.Tensor((8,), "float32"), q: R.Tensor((8,), "float32")):
        T.func_attr({"global_symbol": "my_kernel"})
        pass

    @R.function
    def main(x: R.Tensor((n, 4), "float32"), v: R.Tensor((8,), "float32")) -> R.Tuple(R.Tensor((n, 4), "float32"), R.Tensor((8,), "float32")):
        y: R.Tensor((n, 4), "float32") = R.call_tir(cls.add_relu, (x, x), out_sinfo=R.Tensor((n, 4), "float32"))
        w: R.Tensor((8,), "float32") = R.call_tir(cls.ext, (v,), out_sinfo=R.Tensor((8,), "float32"))
        return (y, w)
)");
  CHECK(contains(out, R"(s: R.Tensor((n, 4), "float32") = R.call_dps_packed(R.ExternFunc("kernels.add"), (x, x), out_sinfo=R.Tensor((n, 4), "float32")))"));
  CHECK(contains(out, R"(y: R.Tensor((n, 4), "float32") = R.call_dps_packed(R.ExternFunc("kernels.relu"), (s,), out_sinfo=R.Tensor((n, 4), "float32")))"));
  CHECK(contains(out, R"(w: R.Tensor((8,), "float32") = R.call_dps_packed(R.ExternFunc("my_kernel"), (v,), out_sinfo=R.Tensor((8,), "float32")))"));
}

TEST_CASE("to_non_dataflow makes blocks and variables ordinary") {
  CHECK(after(t::to_non_dataflow{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        with R.dataflow():
            lv: R.Tensor((4,), "float32") = R.exp(x)
            gv: R.Tensor((4,), "float32") = R.add(lv, x)
            R.output(gv)
        return gv
)") == R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        lv: R.Tensor((4,), "float32") = R.exp(x)
        gv: R.Tensor((4,), "float32") = R.add(lv, x)
        return gv
)");
}

TEST_CASE("call_tir_rewrite allocates each output and passes it last, several outputs go as one tuple") {
  CHECK(after(upto_rewrite{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 6), "float32")) -> R.Tuple(R.Tensor((4, 3), "float32"), R.Tensor((4, 3), "float32")):
        e: R.Tensor((4, 6), "float32") = R.exp(x)
        s: R.Tuple(R.Tensor((4, 3), "float32"), R.Tensor((4, 3), "float32")) = R.split(e, sections=2, axis=1)
        return s
)") == R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 6), "float32")) -> R.Tuple(R.Tensor((4, 3), "float32"), R.Tensor((4, 3), "float32")):
        e: R.Tensor((4, 6), "float32") = R.builtin.alloc_tensor(R.shape([4, 6]), dtype="float32")
        _: R.Tuple() = R.call_packed("kernels.exp", x, e, sinfo_args=R.Tuple())
        s_0: R.Tensor((4, 3), "float32") = R.builtin.alloc_tensor(R.shape([4, 3]), dtype="float32")
        s_1: R.Tensor((4, 3), "float32") = R.builtin.alloc_tensor(R.shape([4, 3]), dtype="float32")
        s: R.Tuple(R.Tensor((4, 3), "float32"), R.Tensor((4, 3), "float32")) = (s_0, s_1)
        _1: R.Tuple() = R.call_packed("kernels.split", e, R.prim_value(1), s, sinfo_args=R.Tuple())
        return s
)");
}

TEST_CASE("static_plan_block_memory places static intermediates in one arena, reusing dead space, and leaves the result alone") {
  const std::string out = after(upto_plan{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((256,), "float32")) -> R.Tensor((256,), "float32"):
        a: R.Tensor((256,), "float32") = R.exp(x)
        b: R.Tensor((256,), "float32") = R.exp(a)
        c: R.Tensor((256,), "float32") = R.exp(b)
        d: R.Tensor((256,), "float32") = R.exp(c)
        e: R.Tensor((256,), "float32") = R.exp(d)
        return e
)");
  // a and c (and b and d) never live at the same time: two 1 KiB slots serve four tensors.
  CHECK(contains(out, R"(R.func_attr({"kiln.live_lower_bound": 2048, "kiln.planned_bytes": 2048, "kiln.unplanned_bytes": 4096}))"));
  CHECK(contains(out, R"(storage: R.Object = R.memory.alloc_storage(R.shape([2048])))"));
  CHECK(contains(out, R"(a: R.Tensor((256,), "float32") = R.memory.alloc_tensor(storage, R.shape([256]), dtype="float32"))"));
  CHECK(contains(out, R"(b: R.Tensor((256,), "float32") = R.memory.alloc_tensor(storage, R.shape([256]), offset=1024, dtype="float32"))"));
  CHECK(contains(out, R"(c: R.Tensor((256,), "float32") = R.memory.alloc_tensor(storage, R.shape([256]), dtype="float32"))"));
  CHECK(contains(out, R"(d: R.Tensor((256,), "float32") = R.memory.alloc_tensor(storage, R.shape([256]), offset=1024, dtype="float32"))"));
  CHECK(contains(out, R"(e: R.Tensor((256,), "float32") = R.builtin.alloc_tensor(R.shape([256]), dtype="float32"))"));  // returned
}

TEST_CASE("static_plan_block_memory keeps a tensor alive while a view of it is, and lets what reaches the result escape") {
  const std::string out = after(upto_plan{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((16, 16), "float32")) -> R.Tuple(R.Tensor((256,), "float32"), R.Tensor((256,), "float32")):
        a: R.Tensor((16, 16), "float32") = R.exp(x)
        v: R.Tensor((256,), "float32") = R.reshape(a, R.shape([256]))
        b: R.Tensor((16, 16), "float32") = R.exp(x)
        vb: R.Tensor((256,), "float32") = R.reshape(b, R.shape([256]))
        w: R.Tensor((256,), "float32") = R.add(v, vb)
        r: R.Tensor((16, 16), "float32") = R.negative(x)
        k: R.Tensor((256,), "float32") = R.reshape(r, R.shape([256]))
        return (w, k)
)");
  // The view v of a is used with b: a and b may not share memory.
  CHECK(contains(out, R"(a: R.Tensor((16, 16), "float32") = R.memory.alloc_tensor(storage, R.shape([16, 16]), dtype="float32"))"));
  CHECK(contains(out, R"(b: R.Tensor((16, 16), "float32") = R.memory.alloc_tensor(storage, R.shape([16, 16]), offset=1024, dtype="float32"))"));
  // r is returned through its view k: it keeps its own allocation.
  CHECK(contains(out, R"(r: R.Tensor((16, 16), "float32") = R.builtin.alloc_tensor(R.shape([16, 16]), dtype="float32"))"));
}

TEST_CASE("static_plan_block_memory gives tensors of symbolic size storage tokens, shared when sizes are provably equal") {
  const std::string out = after(upto_plan{}, symbolic_module);
  CHECK(contains(out, R"("kiln.storage_tokens": 2)"));
  CHECK(contains(out, R"(storage0: R.Object = R.memory.alloc_storage(R.shape([n * 4 * 4])))"));
  CHECK(contains(out, R"(a: R.Tensor((n, 4), "float32") = R.memory.alloc_tensor(storage0, R.shape([n, 4]), dtype="float32"))"));
  CHECK(contains(out, R"(storage1: R.Object = R.memory.alloc_storage(R.shape([n * 4 * 4])))"));
  // c has the same number of bytes as a, which is dead by then (keyed by bytes, not shape).
  CHECK(contains(out, R"(c: R.Tensor((4, n), "float32") = R.memory.alloc_tensor(storage0, R.shape([4, n]), dtype="float32"))"));
}

TEST_CASE("static_plan_block_memory places tensors of bounded symbolic size in the arena at their largest size") {
  const std::string out = after(upto_plan{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 4), "float32")) -> R.Tensor((n * 2, 4), "float32"):
        R.func_attr({"tir_var_upper_bound": {"n": 10}})
        a: R.Tensor((n, 4), "float32") = R.exp(x)
        b: R.Tensor((n, 4), "float32") = R.exp(a)
        c: R.Tensor((n * 2, 4), "float32") = R.concat((a, b), axis=0)
        d: R.Tensor((n * 2, 4), "float32") = R.exp(c)
        return d
)");
  // a, b: 160 bytes at most (aligned to 192), c: 320 at offset 0; all three live at c. d escapes.
  CHECK(contains(out, R"("kiln.planned_bytes": 704)"));
  CHECK(contains(out, R"("kiln.live_lower_bound": 640)"));
  CHECK_FALSE(contains(out, "kiln.storage_tokens"));
  CHECK(contains(out, R"(c: R.Tensor((n * 2, 4), "float32") = R.memory.alloc_tensor(storage, R.shape([n + n, 4]), dtype="float32"))"));
  CHECK(contains(out, R"(R.func_attr({"kiln.live_lower_bound": 640, "kiln.planned_bytes": 704, "kiln.unplanned_bytes": 640, "tir_var_upper_bound": {"n": 10}}))"));

  const std::string checked = after(upto_shapes{}, out);
  CHECK(contains(checked, R"(R.call_packed("vm.builtin.check_upper_bound", shape_heap, R.prim_value(0), R.prim_value(10), R.str("n"), R.str("main: parameter 'x')"));

  CHECK(message_of([] { after(upto_plan{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 4), "float32")) -> R.Tensor((n, 4), "float32"):
        R.func_attr({"tir_var_upper_bound": 10})
        return x
)"); }).find("attribute tir_var_upper_bound must be a dict of int such as {\"n\": 1024}, got int") != std::string::npos);
}

TEST_CASE("upper_bound: interval arithmetic over bounded size variables") {
  const ir::prim_expr n = ir::make_size_var("n"), m = ir::make_size_var("m");
  auto bound = [](const ir::size_var_node& v) -> std::optional<std::int64_t> {
    if (v.name == "n") return 10;
    return std::nullopt;
  };
  CHECK(ir::upper_bound(n * 4 + 2, bound) == 42);
  CHECK(ir::upper_bound(n - 1, bound) == 9);
  CHECK(ir::upper_bound(ir::make_int(20) - n, bound) == 20);
  CHECK(ir::upper_bound(ir::floordiv(n + 1, ir::make_int(4)), bound) == 2);
  CHECK(ir::upper_bound(ir::floormod(n * 7, ir::make_int(4)), bound) == 3);
  CHECK(ir::upper_bound(ir::make_binary(ir::prim_op::min, n * 8, ir::make_int(30)), bound) == 30);
  CHECK_FALSE(ir::upper_bound(n * m, bound));
  CHECK_FALSE(ir::upper_bound(ir::floordiv(ir::make_int(100), n), bound));
  CHECK_FALSE(ir::upper_bound(n * ir::make_int(std::int64_t(1) << 62), bound));
}

TEST_CASE("vm_builtin_lower turns memory operators into VM built-in calls") {
  const std::string out = after(upto_builtins{}, softmax_module);
  CHECK(contains(out, R"(storage: R.Object = R.call_builtin_with_ctx(R.ExternFunc("vm.builtin.alloc_storage"), (R.shape([128]), R.prim_value(0), R.str("uint8"), R.str("global")), type_args=R.Object))"));
  CHECK(contains(out, R"(lv1: R.Tensor((2, 1), "float32") = R.call_packed("vm.builtin.alloc_tensor", storage, R.prim_value(64), R.shape([2, 1]), R.str("float32"), sinfo_args=R.Tensor((2, 1), "float32")))"));
  CHECK(contains(out, R"(lv2_storage: R.Object = R.call_builtin_with_ctx(R.ExternFunc("vm.builtin.alloc_storage"), (R.shape([2, 3]), R.prim_value(0), R.str("float32"), R.str("global")), type_args=R.Object))"));
}

TEST_CASE("vm_shape_lower checks parameters, stores size variables on the heap, computes compound dimensions, builds shapes") {
  const std::string out = after(upto_shapes{}, R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 4), "float32"), y: R.Tensor((n * 2, 2), "float32")) -> R.Tensor((n * 2, 2), "float32"):
        lv: R.Tensor((n * 4,), "float32") = R.reshape(x, R.shape([n * 4]))
        z: R.Tensor((n * 2, 2), "float32") = R.reshape(lv, R.shape([n * 2, 2]))
        w: R.Tensor((n * 2, 2), "float32") = R.add(z, y)
        return w
)");
  const char* ctx_x = R"x(R.str("main: parameter 'x' (R.Tensor((n, 4), \"float32\"))"))x";
  CHECK(contains(out, R"(shape_heap: R.Tensor((3,), "int64") = R.call_builtin_with_ctx(R.ExternFunc("vm.builtin.alloc_shape_heap"), (R.prim_value(3),), type_args=R.Tensor((3,), "int64")))"));
  CHECK(contains(out, std::string(R"(R.call_packed("vm.builtin.check_tensor_info", x, R.prim_value(2), R.str("float32"), )") + ctx_x));
  // n stored in slot 0; 4 compared as an immediate
  CHECK(contains(out, std::string(R"(R.call_packed("vm.builtin.match_shape", x, shape_heap, R.prim_value(2), R.prim_value(1), R.prim_value(0), R.prim_value(0), R.prim_value(4), )") + ctx_x));
  // y's first dimension n * 2 (slot 1) is computed, then compared
  CHECK(contains(out, R"(R.call_packed("vm.builtin.eval_shape_expr", shape_heap, R.prim_value(1), R.prim_value(1), R.prim_value(0), R.prim_value(0), R.prim_value(2), R.prim_value(2), R.prim_value(2), sinfo_args=R.Tuple()))"));
  CHECK(contains(out, R"(R.call_packed("vm.builtin.match_shape", y, shape_heap, R.prim_value(2), R.prim_value(3), R.prim_value(1), R.prim_value(2), R.prim_value(0), )"));
  CHECK(contains(out, R"(shape: R.Shape([n * 4]) = R.call_packed("vm.builtin.make_shape", shape_heap, R.prim_value(1), R.prim_value(1), R.prim_value(2), sinfo_args=R.Shape([n * 4])))"));
  CHECK(t::properties::shapes_lowered::check(ir::parse_module(out)).empty());
}

TEST_CASE("each property's checker finds what its pass would have removed") {
  const ir::ir_module m = ir::parse_module(softmax_module);
  CHECK(t::properties::legalized::check(m) == std::vector<std::string>{"function 'main' still calls operator R.nn.softmax", "function 'main' still calls operator R.sum",
                                                                        "function 'main' still calls operator R.divide", "function 'main' still calls operator R.reshape"});
  CHECK(t::properties::non_dataflow::check(m) == std::vector<std::string>{"function 'main' has a dataflow block"});
  CHECK(t::properties::memory_planned::check(m) == std::vector<std::string>{"function 'main' has no memory plan (no kiln.planned_bytes attribute)"});
  const ir::ir_module lowered = kiln::run(upto_shapes{}, m);
  CHECK(t::properties::legalized::check(lowered).empty());
  CHECK(t::properties::non_dataflow::check(lowered).empty());
  CHECK(t::properties::explicit_outputs::check(lowered).empty());
  CHECK(t::properties::memory_planned::check(lowered).empty());
  CHECK(t::properties::builtins_lowered::check(lowered).empty());
  CHECK(t::properties::shapes_lowered::check(lowered).empty());
  CHECK(t::properties::builtins_lowered::check(kiln::run(upto_plan{}, m)) ==
        std::vector<std::string>{"function 'main' still calls R.memory.alloc_storage", "function 'main' still calls R.memory.alloc_tensor",
                                 "function 'main' still calls R.memory.alloc_tensor", "function 'main' still calls R.builtin.alloc_tensor"});
}

namespace {
/// A pass that claims `legalized` but leaves operators behind: what verify_ir is for.
struct lying_legalize {
  static constexpr std::string_view name = "lying_legalize";
  using establishes = kiln::property_list<t::properties::legalized>;
  ir::ir_module operator()(const ir::ir_module& m) const { return m; }
};
/// A pass that brings operators back after legalization.
struct reintroduce_ops {
  static constexpr std::string_view name = "reintroduce_ops";
  using invalidates = kiln::property_list<t::properties::legalized>;
  ir::ir_module operator()(const ir::ir_module& m) const { return m; }
};
}  // namespace

TEST_CASE("the default pipeline's contract: it needs nothing, and each lowering stage needs what the one before establishes") {
  static_assert(std::is_same_v<kiln::needs_of<t::default_pipeline>, kiln::property_list<>>);
  static_assert(std::is_same_v<kiln::needs_of<t::lower_to_vm>, kiln::property_list<t::properties::legalized>>);
  static_assert(std::is_same_v<kiln::establishes_of<t::lower_to_vm>,
                               kiln::property_list<t::properties::non_dataflow, t::properties::explicit_outputs, t::properties::memory_planned,
                                                   t::properties::builtins_lowered, t::properties::shapes_lowered>>);
  CHECK(t::lower_to_vm::first_unmet_pass == "call_tir_rewrite");
  CHECK(t::lower_to_vm::first_unmet_property == "legalized");
  // kiln::assume lets a pipeline start from IR that already has a property.
  using tail = kiln::sequential<kiln::assume<t::properties::legalized>, t::lower_to_vm>;
  static_assert(std::is_same_v<kiln::needs_of<tail>, kiln::property_list<>>);
  const ir::ir_module legal = kiln::run(t::legalize_ops{}, ir::parse_module(softmax_module));
  CHECK(t::properties::shapes_lowered::check(kiln::run(tail{}, legal)).empty());
}

TEST_CASE("run-time pipelines make the same property check when they are built") {
  t::register_passes();
  auto& reg = kiln::pass_registry<ir::ir_module>::global();
  reg.add<reintroduce_ops>();
  CHECK(message_of<usage_error>([] { kiln::parse_pipeline<ir::ir_module>("legalize_ops,to_non_dataflow,reintroduce_ops,call_tir_rewrite"); }) ==
        "kiln::make_pipeline 'sequential': pass 'call_tir_rewrite' needs property 'legalized', which 'reintroduce_ops' invalidates before it");
  const kiln::pass<ir::ir_module> p = kiln::parse_pipeline<ir::ir_module>("kiln.lower_to_vm");
  REQUIRE(p.info().needs.size() == 1);
  CHECK(p.info().needs[0].name == "legalized");
}

TEST_CASE("verify_ir checks the properties a pass needs before it and establishes after it") {
  kiln::pass_context ctx;
  ctx.set_instruments({kiln::instrument(kiln::verify_ir{})});
  kiln::pass_context_scope scope(ctx);
  const ir::ir_module m = ir::parse_module(softmax_module);
  CHECK(message_of<kiln::error>([&] { kiln::run(kiln::sequential<lying_legalize, t::to_non_dataflow>{}, m); }) ==
        "kiln::verify_ir: pass 'lying_legalize' establishes property 'legalized', which does not hold after it:\n"
        "  function 'main' still calls operator R.nn.softmax\n  function 'main' still calls operator R.sum\n"
        "  function 'main' still calls operator R.divide\n  function 'main' still calls operator R.reshape");
  CHECK(message_of<kiln::error>([&] { kiln::run(t::call_tir_rewrite{}, m); }) ==
        "kiln::verify_ir: pass 'call_tir_rewrite' needs property 'legalized', which does not hold before it:\n"
        "  function 'main' still calls operator R.nn.softmax\n  function 'main' still calls operator R.sum\n"
        "  function 'main' still calls operator R.divide\n  function 'main' still calls operator R.reshape");
  CHECK(t::properties::shapes_lowered::check(kiln::run(upto_shapes{}, m)).empty());  // the real pipeline passes every check
}

TEST_CASE("kill_after_last_use releases a storage right after the last use of anything placed in it, and never what is returned") {
  const std::string out = after(kiln::sequential<t::legalize_ops, t::to_non_dataflow, t::call_tir_rewrite, t::static_plan_block_memory, t::kill_after_last_use>{},
                                symbolic_module);
  // storage1 holds b, last used by the transposition; storage0 holds a and then c, last used by the add.
  CHECK(contains(out, "_2: R.Tuple() = R.call_packed(\"kernels.permute_dims\", b, R.shape([]), c, sinfo_args=R.Tuple())\n"
                      "        _3: R.Tuple() = R.memory.kill_storage(storage1)\n"));
  CHECK(contains(out, "R.call_packed(\"kernels.add\", c, c, e, sinfo_args=R.Tuple())\n        _6: R.Tuple() = R.memory.kill_storage(storage0)\n"));
  CHECK(!contains(out, "kill_tensor(e)"));
  CHECK(!contains(out, "kill_tensor(d)"));
}

TEST_CASE("the lowering passes take liveness from the analysis cache, computed once per function object") {
  kiln::pass_context ctx;
  const ir::ir_module planned = kiln::run(upto_plan{}, ir::parse_module(symbolic_module), ctx);
  const ir::function main = ir::ref_cast<ir::function_node>(planned->lookup("main"));
  REQUIRE(main);
  // static_plan_block_memory asked for liveness of the function it then rewrote: that result went.
  CHECK(ctx.cached_analysis<t::liveness>(main) == nullptr);
  const kiln::analysis_counts before = ctx.analyses().counts();
  CHECK(before.computed == 1);
  CHECK(before.dropped == 1);

  // kill_after_last_use computes liveness of the planned function; the cached result is what the
  // analysis gives directly.
  const ir::ir_module killed = kiln::run(t::kill_after_last_use{}, planned, ctx);
  CHECK(ctx.analyses().counts().computed == 2);
  // It changed main, so main's result went with it, and nothing stays cached.
  CHECK(ctx.analyses().size() == 0);

  // The cached result is the analysis's own; asked again, it is found.
  const ir::function killed_main = ir::ref_cast<ir::function_node>(killed->lookup("main"));
  const auto life = ctx.analysis<t::liveness>(killed_main);
  const t::detail::value_lifetimes direct(killed_main);
  CHECK(life->end == direct.end);
  CHECK(life->escapes == direct.escapes);
  CHECK(ctx.analysis<t::liveness>(killed_main) == life);
  CHECK(ctx.analyses().counts().computed == 3);
  CHECK(ctx.analyses().counts().hits == 1);
}

TEST_CASE("the fusion passes start from use_counts in the analysis cache") {
  kiln::pass_context ctx;
  const ir::ir_module m = ir::parse_module(softmax_module);
  (void)kiln::run(kiln::sequential<t::fuse_epilogue, t::fuse_elementwise>{}, m, ctx);
  CHECK(ctx.analyses().counts().computed >= 1);
  const std::string report = ctx.statistics_report();  // names padded to the longest pass name
  CHECK(contains(report, " analysis cache "));
  CHECK(contains(report, " - results computed\n"));
}
