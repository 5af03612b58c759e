// SPDX-License-Identifier: Apache-2.0
// kiln's compiler passes by name: kiln's names and TVM's, get_pipeline, the listing, and the
// check a run-time pipeline makes of its input before any pass runs.
#include <kiln/pass/pass.hpp>
#include <kiln/transform/default_pipeline.hpp>

#include "helpers.hpp"

using namespace kiln;
using namespace kiln_test;

namespace {

using ir_pass = kiln::pass<ir::ir_module>;

const char* small_module = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 4), "float32"), w: R.Tensor((4, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        with R.dataflow():
            a: R.Tensor((2, 3), "float32") = R.matmul(x, w)
            c: R.Tensor((2, 3), "float32") = R.nn.relu(a)
            R.output(c)
        return c
)";

void registered() { transform::register_passes(); }

struct pass_names {
  static constexpr std::string_view name = "pass_names";
  std::shared_ptr<std::vector<std::string>> seen = std::make_shared<std::vector<std::string>>();
  void run_before_pass(const module_view&, const pass_info& info) { seen->emplace_back(info.name); }
};

}  // namespace

TEST_CASE("every compiler pass is found under TVM's name too, and keeps kiln's") {
  registered();
  const std::pair<const char*, const char*> names[] = {
      {"CanonicalizeBindings", "canonicalize_bindings"},
      {"FoldConstant", "fold_constant"},
      {"EliminateCommonSubexpr", "eliminate_common_subexpr"},
      {"DeadCodeElimination", "dead_code_elimination"},
      {"FuseOps", "kiln.fuse"},
      {"FuseTIR", "kiln.fuse"},
      {"LegalizeOps", "legalize_ops"},
      {"ToNonDataflow", "to_non_dataflow"},
      {"CallTIRRewrite", "call_tir_rewrite"},
      {"StaticPlanBlockMemory", "static_plan_block_memory"},
      {"KillAfterLastUse", "kill_after_last_use"},
      {"VMBuiltinLower", "vm_builtin_lower"},
      {"LowerRuntimeBuiltin", "vm_builtin_lower"},
      {"VMShapeLower", "vm_shape_lower"},
  };
  for (const auto& entry : names) {  // (Clang 14 cannot capture a structured binding, as CAPTURE does)
    const char* tvm = entry.first;
    CAPTURE(tvm);
    CHECK(get_pass<ir::ir_module>(tvm).name() == entry.second);
  }
  // In pipeline text, and in the same pipeline as kiln's names.
  const ir_pass p = parse_pipeline<ir::ir_module>("FoldConstant,dead_code_elimination,LegalizeOps");
  std::vector<std::string> steps;
  for (const pipeline_step& s : p.steps()) steps.emplace_back(s.name);
  CHECK(steps == std::vector<std::string>{"fold_constant", "dead_code_elimination", "legalize_ops"});
  // A misspelt TVM name is suggested like any other.
  CHECK(message_of<usage_error>([] { (void)get_pass<ir::ir_module>("FoldConstants"); }).find("did you mean 'FoldConstant'") != std::string::npos);
}

TEST_CASE("an alias cannot take a registered name, nor be moved to another pass") {
  pass_registry<ir::ir_module> r;
  r.add<transform::fold_constant>().add<transform::dead_code_elimination>();
  r.add_alias("Fold", "fold_constant");
  r.add_alias("Fold", "fold_constant");  // the same again: nothing
  CHECK(r.create("Fold").name() == "fold_constant");
  CHECK(r.contains("Fold"));
  CHECK(r.names() == std::vector<std::string>{"dead_code_elimination", "fold_constant"});
  CHECK(message_of<usage_error>([&] { r.add_alias("Fold", "dead_code_elimination"); }) ==
        "kiln::pass_registry::add_alias: 'Fold' already names 'fold_constant', not 'dead_code_elimination'");
  CHECK(message_of<usage_error>([&] { r.add_alias("fold_constant", "dead_code_elimination"); }) ==
        "kiln::pass_registry::add_alias: a pass is already registered as 'fold_constant'");
  CHECK(message_of<usage_error>([&] { r.add_alias("no good", "fold_constant"); }).find("not a valid pass name") != std::string::npos);
  CHECK(message_of<usage_error>([&] { r.add("Fold", [] { return ir_pass(transform::fold_constant{}); }); }) ==
        "kiln::pass_registry::add: 'Fold' is already an alias of 'fold_constant'");
  // An alias of a pass not registered yet finds nothing until it is.
  r.add_alias("Later", "legalize_ops");
  CHECK_FALSE(r.contains("Later"));
  r.add<transform::legalize_ops>();
  CHECK(r.create("Later").name() == "legalize_ops");
}

TEST_CASE("get_pipeline gives TVM's named pipelines, and lists them for another name") {
  CHECK(transform::get_pipeline("default").name() == "kiln.default");
  CHECK(transform::get_pipeline("default").text() == transform::default_pipeline::element_text());
  CHECK(transform::get_pipeline("zero").name() == "zero");
  CHECK(transform::get_pipeline("default_build").name() == "default_build");
  const std::string msg = message_of<usage_error>([] { (void)transform::get_pipeline("O3"); });
  CHECK(msg.starts_with("kiln::transform::get_pipeline: no pipeline is named 'O3' (kiln has 'default'"));
  CHECK(msg.find("'zero'") != std::string::npos);
  // Each runs to a module the VM code generator takes.
  for (const char* name : {"default", "zero", "default_build"}) {
    CAPTURE(name);
    const ir::ir_module out = transform::get_pipeline(name)(ir::parse_module(small_module));
    CHECK(transform::properties::shapes_lowered::check(out).empty());
    CHECK(transform::properties::memory_planned::check(out).empty());
  }
}

TEST_CASE("the listing gives each pass its other names, description, opt level and properties") {
  registered();
  const std::string text = describe_passes<ir::ir_module>();
  CHECK(text.starts_with("Passes:\n"));
  CHECK(text.find("  fold_constant (also FoldConstant): module pass, opt level") != std::string::npos);
  CHECK(text.find("      Evaluates operators whose inputs are all constants") != std::string::npos);
  CHECK(text.find("  legalize_ops (also LegalizeOps): module pass, opt level 0\n      Lowers every operator call") != std::string::npos);
  CHECK(text.find("  call_tir_rewrite (also CallTIRRewrite): ") != std::string::npos);
  CHECK(text.find("      needs: legalized, non_dataflow\n      establishes: explicit_outputs\n") != std::string::npos);
  CHECK(text.find("\nPipelines:\n") != std::string::npos);
  CHECK(text.find("  kiln.fuse (also FuseOps, FuseTIR): sequential, opt level 1\n      kiln.fuse<1>(fuse_attention,fuse_epilogue,fuse_elementwise)") !=
        std::string::npos);
  // Every compiler pass says what it does.
  pass_registry<ir::ir_module> own;  // kiln's passes only (the global registry also has the tests')
  transform::register_passes(own);
  for (const std::string& name : own.names()) {
    const ir_pass p = own.create(name);
    if (p.info().kind == pass_kind::sequential || name == "PrintIR") continue;
    CAPTURE(name);
    CHECK_FALSE(p.info().description.empty());
  }
}

TEST_CASE("a run-time pipeline checks its input before any pass runs, and names the pass that is missing") {
  registered();
  const ir::ir_module m = ir::parse_module(small_module);
  // A pass alone, on IR nobody legalized (kiln-opt small.kir -p call_tir_rewrite).
  const ir_pass rewrite = parse_pipeline<ir::ir_module>("call_tir_rewrite");
  CHECK(message_of<usage_error>([&] { (void)rewrite(m); }) ==
        "kiln: pipeline 'sequential': pass 'call_tir_rewrite' needs property 'legalized', which no earlier pass of the pipeline "
        "establishes and the input module does not have (function 'main' still calls operator R.matmul, and 1 more); run "
        "'legalize_ops' before it");
  // The static pipeline kiln.lower_to_vm, by name (Python's lower_to_vm on IR never legalized).
  CHECK(message_of<usage_error>([&] { (void)get_pass<ir::ir_module>("kiln.lower_to_vm")(m); })
            .starts_with("kiln: pipeline 'kiln.lower_to_vm': pass 'call_tir_rewrite' needs property 'legalized'"));
  // A single pass.
  CHECK(message_of<usage_error>([&] { (void)get_pass<ir::ir_module>("kill_after_last_use")(m); }) ==
        "kiln: pass 'kill_after_last_use' needs property 'memory_planned', which the input module does not have (function 'main' "
        "has no memory plan (no kiln.planned_bytes attribute)); run 'static_plan_block_memory' before it");
  // Nothing ran: instruments saw no pass.
  pass_context ctx;
  pass_names names;
  ctx.set_instruments({instrument(names)});
  CHECK_THROWS_AS((void)rewrite(m, ctx), usage_error);
  CHECK(names.seen->empty());
  // With the pass that establishes the property first, or on input that has it, it runs.
  CHECK_NOTHROW((void)parse_pipeline<ir::ir_module>("legalize_ops,to_non_dataflow,call_tir_rewrite")(m));
  const ir::ir_module legal = parse_pipeline<ir::ir_module>("legalize_ops,to_non_dataflow")(m);
  CHECK_NOTHROW((void)rewrite(legal));
}
