// SPDX-License-Identifier: Apache-2.0
// kiln's main demo: a model in the text format is compiled with the default pipeline (printed,
// with per-pass timing), its memory plan and bytecode are shown, it runs on the VM and the CPU
// kernels, its result is checked against the reference evaluator, and the time per run printed.
//
// The model: an MLP 784-512-512-10 with a dynamic batch size n and random weights.
#include <kiln/kiln.hpp>

#include <cstdio>
#include <iostream>
#include <random>

namespace {

const char* model = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 784), "float32"), w1: R.Tensor((784, 512), "float32"), b1: R.Tensor((512,), "float32"),
             w2: R.Tensor((512, 512), "float32"), b2: R.Tensor((512,), "float32"), w3: R.Tensor((512, 10), "float32"),
             b3: R.Tensor((10,), "float32")) -> R.Tensor((n, 10), "float32"):
        R.func_attr({"global_symbol": "main"})
        with R.dataflow():
            h1: R.Tensor((n, 512), "float32") = R.nn.relu(R.add(R.matmul(x, w1), b1))
            h2: R.Tensor((n, 512), "float32") = R.nn.relu(R.add(R.matmul(h1, w2), b2))
            logits: R.Tensor((n, 10), "float32") = R.add(R.matmul(h2, w3), b3)
            probs: R.Tensor((n, 10), "float32") = R.nn.softmax(logits, axis=-1)
            R.output(probs)
        return probs
)";

kiln::runtime::tensor random_tensor(kiln::runtime::shape_vector shape, float scale, std::mt19937& gen) {
  std::normal_distribution<float> d(0.f, scale);
  kiln::runtime::tensor t = kiln::runtime::tensor::empty(std::move(shape), kiln::dtype::float32);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(gen);
  return t;
}

}  // namespace

int main() {
  namespace ir = kiln::ir;
  namespace vm = kiln::vm;
  const ir::ir_module m = ir::parse_module(model);

  std::cout << "== the pipeline ==\n" << kiln::transform::default_pipeline::element_text() << "\n\n";

  // Compile under a context whose instrument times every pass.
  kiln::pass_context ctx(2);
  ctx.set_instruments({kiln::instrument(kiln::pass_timing{})});
  ir::ir_module lowered;
  vm::executable ex;
  {
    kiln::pass_context_scope scope(ctx);
    ex = kiln::compile(m, {.lowered = &lowered});
  }
  std::cout << "== per-pass timing ==\n" << ctx.instruments()[0].target<kiln::pass_timing>()->table() << '\n';

  const auto plan = kiln::transform::memory_plan_of(lowered->lookup("main"));
  std::cout << "== memory plan of main ==\n"
            << "  intermediates of symbolic size share " << plan.storage_tokens << " storages (sized per batch at run time)\n\n";

  std::cout << "== bytecode ==\n" << ex.as_text() << '\n';

  // Run on a batch of 8 with random weights.
  std::mt19937 gen(42);
  const std::int64_t batch = 8;
  const std::vector<vm::value> args{random_tensor({batch, 784}, 1.f, gen),  random_tensor({784, 512}, 0.05f, gen), random_tensor({512}, 0.1f, gen),
                                    random_tensor({512, 512}, 0.05f, gen), random_tensor({512}, 0.1f, gen),      random_tensor({512, 10}, 0.05f, gen),
                                    random_tensor({10}, 0.1f, gen)};
  vm::virtual_machine machine(ex, {}, kiln::vm::kernel_registry());
  const kiln::runtime::tensor probs = machine.invoke_span("main", args).as_tensor();

  // The reference evaluator walks the IR itself, one kernel per operator: the oracle.
  kiln::interpreter::reference_evaluator eval(m);
  const kiln::runtime::tensor want = eval.call("main", args).as_tensor();
  const std::vector<float> a = probs.to_vector<float>(), b = want.to_vector<float>();
  double diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff = std::max(diff, double(std::abs(a[i] - b[i])));
  std::cout << "== run ==\n  output " << kiln::runtime::shape_to_string(probs.shape()) << ", first row:";
  for (int j = 0; j < 10; ++j) std::printf(" %.4f", double(a[std::size_t(j)]));
  std::cout << "\n  largest difference from the reference evaluator: " << diff << '\n';

  const vm::timing_result t = machine.time_evaluator("main", 20, 5)(args);
  std::printf("  time per run (batch %lld): median %.1f us, min %.1f us over %zu repeats of %d runs\n", static_cast<long long>(batch),
              t.median() * 1e6, t.min() * 1e6, t.results.size(), t.number);
  return diff == 0 ? 0 : 1;
}
