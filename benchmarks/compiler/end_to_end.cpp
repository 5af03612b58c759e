// SPDX-License-Identifier: Apache-2.0
// The cost of the VM around the kernels, and what fusion gains: each model compiled by
// kiln::compile and run on the VM — with operator fusion off (`*_vm_unfused`: the same kernels as
// the hand-written form) and on (`*_vm`, the default: matmul / conv2d epilogues and fused
// elementwise groups), in the bytecode mode and in the compiled mode (`*_compiled*`: generated
// C++ built by export_library and loaded by load_module) — beside the unfused kernels called in
// the same order from hand-written C++ with buffers allocated once. Random weights, static shapes
// (so memory planning uses one arena per function).
//
//   mlp/<batch>      784-512-512-10 with relu, softmax at the end
//   cnn              two ResNet basic blocks (32 channels, 28 x 28) and a classifier
//   encoder          a transformer encoder layer: d = 256, 4 heads, sequence 128, batch 1
//
// Counters: kernel calls per run; for the compiled forms, the arena bytes, the bytes one buffer
// per intermediate would take, and the largest live set (a lower bound for any plan).
//
//   --callgrind <model> <vm|vm_fused|compiled|compiled_fused|hand> <reps>
//                                          runs one form `reps` times inside kiln_measure
//                                          (for benchmarks/compiler/callgrind.sh); vm is compiled
//                                          without fusion, so that it runs the hand-written kernels
//   --generated-source <model>             prints the compiled mode's C++ for the model (fused)
//                                          (models: mlp, cnn, encoder, gelu)
//   --compile-time                         prints compile() times of the encoder layer and a
//                                          12-layer stack
#include <kiln/kiln.hpp>

#include <benchmark/benchmark.h>

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <sstream>

namespace {

namespace ir = kiln::ir;
namespace vm = kiln::vm;
namespace k = kiln::kernels;
using kiln::dtype;
using kiln::runtime::shape_vector;
using kiln::runtime::tensor;

tensor random_tensor(shape_vector shape, float scale, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.f, scale);
  tensor t = tensor::empty(std::move(shape), dtype::float32);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(gen);
  return t;
}
tensor empty(shape_vector shape) { return tensor::empty(std::move(shape), dtype::float32); }

// ---- the models, as IR text and as hand-written kernel sequences ------------------------------------

std::string mlp_text(std::int64_t n) {
  const std::string b = std::to_string(n);
  return R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(()" + b + R"(, 784), "float32"), w1: R.Tensor((784, 512), "float32"), b1: R.Tensor((512,), "float32"),
             w2: R.Tensor((512, 512), "float32"), b2: R.Tensor((512,), "float32"), w3: R.Tensor((512, 10), "float32"),
             b3: R.Tensor((10,), "float32")) -> R.Tensor(()" + b + R"(, 10), "float32"):
        with R.dataflow():
            h1: R.Tensor(()" + b + R"(, 512), "float32") = R.nn.relu(R.add(R.matmul(x, w1), b1))
            h2: R.Tensor(()" + b + R"(, 512), "float32") = R.nn.relu(R.add(R.matmul(h1, w2), b2))
            o: R.Tensor(()" + b + R"(, 10), "float32") = R.nn.softmax(R.add(R.matmul(h2, w3), b3), axis=-1)
            R.output(o)
        return o
)";
}

struct mlp_hand {
  tensor t[8];
  explicit mlp_hand(std::int64_t n) {
    for (int i : {0, 1, 2, 3, 4, 5}) t[i] = empty({n, 512});
    t[6] = empty({n, 10}), t[7] = empty({n, 10});
  }
  tensor run(const std::vector<vm::value>& a) {
    k::matmul(a[0].as_tensor(), a[1].as_tensor(), t[0]);
    k::add(t[0], a[2].as_tensor(), t[1]);
    k::relu(t[1], t[2]);
    k::matmul(t[2], a[3].as_tensor(), t[3]);
    k::add(t[3], a[4].as_tensor(), t[4]);
    k::relu(t[4], t[5]);
    k::matmul(t[5], a[5].as_tensor(), t[6]);
    k::add(t[6], a[6].as_tensor(), t[7]);
    tensor out = empty(t[7].shape());  // the compiled program allocates its result too
    k::softmax(t[7], -1, out);
    return out;
  }
  static constexpr int kernel_calls = 9;
};

std::vector<vm::value> mlp_args(std::int64_t n) {
  return {random_tensor({n, 784}, 1, 1),     random_tensor({784, 512}, 0.05f, 2), random_tensor({512}, 0.1f, 3), random_tensor({512, 512}, 0.05f, 4),
          random_tensor({512}, 0.1f, 5),     random_tensor({512, 10}, 0.05f, 6),  random_tensor({10}, 0.1f, 7)};
}

const char* cnn_text = R"(@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 32, 28, 28), "float32"), w1: R.Tensor((32, 32, 3, 3), "float32"), w2: R.Tensor((32, 32, 3, 3), "float32"),
             w3: R.Tensor((32, 32, 3, 3), "float32"), w4: R.Tensor((32, 32, 3, 3), "float32"), fc: R.Tensor((32, 10), "float32")) -> R.Tensor((1, 10), "float32"):
        with R.dataflow():
            a1: R.Tensor((1, 32, 28, 28), "float32") = R.nn.relu(R.nn.conv2d(x, w1, padding=[1]))
            a2: R.Tensor((1, 32, 28, 28), "float32") = R.nn.relu(R.add(R.nn.conv2d(a1, w2, padding=[1]), x))
            a3: R.Tensor((1, 32, 28, 28), "float32") = R.nn.relu(R.nn.conv2d(a2, w3, padding=[1]))
            a4: R.Tensor((1, 32, 28, 28), "float32") = R.nn.relu(R.add(R.nn.conv2d(a3, w4, padding=[1]), a2))
            p: R.Tensor((1, 32, 1, 1), "float32") = R.nn.global_avg_pool2d(a4)
            f: R.Tensor((1, 32), "float32") = R.reshape(p, R.shape([1, 32]))
            o: R.Tensor((1, 10), "float32") = R.matmul(f, fc)
            R.output(o)
        return o
)";

struct cnn_hand {
  tensor c[10], pooled;
  kiln::kernels::conv2d_params p;
  cnn_hand() {
    for (auto& t : c) t = empty({1, 32, 28, 28});
    pooled = empty({1, 32, 1, 1});
    p.padding = {1, 1, 1, 1};
  }
  tensor run(const std::vector<vm::value>& a) {
    const tensor x = a[0].as_tensor();
    k::conv2d(x, a[1].as_tensor(), tensor(), p, c[0]);
    k::relu(c[0], c[1]);
    k::conv2d(c[1], a[2].as_tensor(), tensor(), p, c[2]);
    k::add(c[2], x, c[3]);
    k::relu(c[3], c[4]);
    k::conv2d(c[4], a[3].as_tensor(), tensor(), p, c[5]);
    k::relu(c[5], c[6]);
    k::conv2d(c[6], a[4].as_tensor(), tensor(), p, c[7]);
    k::add(c[7], c[4], c[8]);
    k::relu(c[8], c[9]);
    k::global_avg_pool2d(c[9], pooled);
    const tensor f = k::reshape(pooled, {1, 32});
    tensor out = empty({1, 10});
    k::matmul(f, a[5].as_tensor(), out);
    return out;
  }
  static constexpr int kernel_calls = 13;
};

std::vector<vm::value> cnn_args() {
  return {random_tensor({1, 32, 28, 28}, 1, 1), random_tensor({32, 32, 3, 3}, 0.06f, 2), random_tensor({32, 32, 3, 3}, 0.06f, 3),
          random_tensor({32, 32, 3, 3}, 0.06f, 4), random_tensor({32, 32, 3, 3}, 0.06f, 5), random_tensor({32, 10}, 0.2f, 6)};
}

// d = 256, 4 heads of 64, sequence 128, ffn 1024; post-norm as in the original transformer.
std::string encoder_function(const std::string& name) {
  return R"(    @R.function
    def )" + name + R"((x: R.Tensor((1, 128, 256), "float32"), wqkv: R.Tensor((256, 768), "float32"), wo: R.Tensor((256, 256), "float32"),
             g1: R.Tensor((256,), "float32"), be1: R.Tensor((256,), "float32"), w1: R.Tensor((256, 1024), "float32"),
             w2: R.Tensor((1024, 256), "float32"), g2: R.Tensor((256,), "float32"), be2: R.Tensor((256,), "float32")) -> R.Tensor((1, 128, 256), "float32"):
        with R.dataflow():
            qkv: R.Tensor((1, 128, 768), "float32") = R.matmul(x, wqkv)
            parts: R.Tuple(R.Tensor((1, 128, 256), "float32"), R.Tensor((1, 128, 256), "float32"), R.Tensor((1, 128, 256), "float32")) = R.split(qkv, sections=3, axis=-1)
            q: R.Tensor((1, 4, 128, 64), "float32") = R.permute_dims(R.reshape(parts[0], R.shape([1, 128, 4, 64])), axes=[0, 2, 1, 3])
            kt: R.Tensor((1, 4, 64, 128), "float32") = R.permute_dims(R.reshape(parts[1], R.shape([1, 128, 4, 64])), axes=[0, 2, 3, 1])
            v: R.Tensor((1, 4, 128, 64), "float32") = R.permute_dims(R.reshape(parts[2], R.shape([1, 128, 4, 64])), axes=[0, 2, 1, 3])
            s: R.Tensor((1, 4, 128, 128), "float32") = R.multiply(R.matmul(q, kt), R.const(0.125, "float32"))
            p: R.Tensor((1, 4, 128, 128), "float32") = R.nn.softmax(s, axis=-1)
            c: R.Tensor((1, 128, 256), "float32") = R.reshape(R.permute_dims(R.matmul(p, v), axes=[0, 2, 1, 3]), R.shape([1, 128, 256]))
            h: R.Tensor((1, 128, 256), "float32") = R.nn.layer_norm(R.add(x, R.matmul(c, wo)), g1, be1)
            f: R.Tensor((1, 128, 256), "float32") = R.matmul(R.nn.gelu(R.matmul(h, w1)), w2)
            o: R.Tensor((1, 128, 256), "float32") = R.nn.layer_norm(R.add(h, f), g2, be2)
            R.output(o)
        return o
)";
}
std::string encoder_text() { return "@I.ir_module\nclass Module:\n" + encoder_function("main"); }

/// `layers` encoder layers in one module: main calls layer0 .. layer{n-1} in turn.
std::string encoder_stack_text(int layers) {
  std::string s = "@I.ir_module\nclass Module:\n";
  for (int i = 0; i < layers; ++i) s += encoder_function("layer" + std::to_string(i)) + "\n";
  s += R"(    @R.function
    def main(x: R.Tensor((1, 128, 256), "float32"), wqkv: R.Tensor((256, 768), "float32"), wo: R.Tensor((256, 256), "float32"),
             g1: R.Tensor((256,), "float32"), be1: R.Tensor((256,), "float32"), w1: R.Tensor((256, 1024), "float32"),
             w2: R.Tensor((1024, 256), "float32"), g2: R.Tensor((256,), "float32"), be2: R.Tensor((256,), "float32")) -> R.Tensor((1, 128, 256), "float32"):
        y0: R.Tensor((1, 128, 256), "float32") = x
)";
  for (int i = 0; i < layers; ++i)
    s += "        y" + std::to_string(i + 1) + ": R.Tensor((1, 128, 256), \"float32\") = cls.layer" + std::to_string(i) + "(y" + std::to_string(i) +
         ", wqkv, wo, g1, be1, w1, w2, g2, be2)\n";
  return s + "        return y" + std::to_string(layers) + "\n";
}

struct encoder_hand {
  tensor qkv = empty({1, 128, 768}), q = empty({1, 4, 128, 64}), kt = empty({1, 4, 64, 128}), v = empty({1, 4, 128, 64});
  tensor parts[3] = {empty({1, 128, 256}), empty({1, 128, 256}), empty({1, 128, 256})};
  tensor s = empty({1, 4, 128, 128}), s2 = empty({1, 4, 128, 128}), p = empty({1, 4, 128, 128}), pv = empty({1, 4, 128, 64}),
         pvt = empty({1, 128, 4, 64}), att = empty({1, 128, 256}), res = empty({1, 128, 256}), h = empty({1, 128, 256}), f1 = empty({1, 128, 1024}),
         f2 = empty({1, 128, 1024}), f = empty({1, 128, 256}), res2 = empty({1, 128, 256});
  tensor scale = tensor::from_values<float>({}, {0.125f});
  const std::int64_t to_heads[4] = {0, 2, 1, 3}, to_keys[4] = {0, 2, 3, 1};
  tensor run(const std::vector<vm::value>& a) {
    const tensor x = a[0].as_tensor();
    k::matmul(x, a[1].as_tensor(), qkv);
    k::split(qkv, -1, std::vector<tensor>{parts[0], parts[1], parts[2]});
    k::permute_dims(k::reshape(parts[0], {1, 128, 4, 64}), to_heads, q);
    k::permute_dims(k::reshape(parts[1], {1, 128, 4, 64}), to_keys, kt);
    k::permute_dims(k::reshape(parts[2], {1, 128, 4, 64}), to_heads, v);
    k::matmul(q, kt, s);
    k::multiply(s, scale, s2);
    k::softmax(s2, -1, p);
    k::matmul(p, v, pv);
    k::permute_dims(pv, to_heads, pvt);
    const tensor c = k::reshape(pvt, {1, 128, 256});
    k::matmul(c, a[2].as_tensor(), att);
    k::add(x, att, res);
    const std::int64_t last[1] = {-1};
    k::layer_norm(res, a[3].as_tensor(), a[4].as_tensor(), last, 1e-5, h);
    k::matmul(h, a[5].as_tensor(), f1);
    k::gelu(f1, f2);
    k::matmul(f2, a[6].as_tensor(), f);
    k::add(h, f, res2);
    tensor out = empty({1, 128, 256});
    k::layer_norm(res2, a[7].as_tensor(), a[8].as_tensor(), last, 1e-5, out);
    return out;
  }
  static constexpr int kernel_calls = 21;
};

std::vector<vm::value> encoder_args() {
  return {random_tensor({1, 128, 256}, 1, 1),     random_tensor({256, 768}, 0.06f, 2), random_tensor({256, 256}, 0.06f, 3),
          random_tensor({256}, 0.1f, 4),          random_tensor({256}, 0.1f, 5),       random_tensor({256, 1024}, 0.06f, 6),
          random_tensor({1024, 256}, 0.03f, 7),   random_tensor({256}, 0.1f, 8),       random_tensor({256}, 0.1f, 9)};
}

/// GPT-2's GELU written out, as exported models have it, and a residual: one fused elementwise
/// group of two inputs. The bytecode runs it with the fused_expr interpreter, the compiled mode as
/// an inlined fx:: expression, which is what the hand-written form calls.
std::string gelu_text(std::int64_t n) {
  const std::string t = "R.Tensor((" + std::to_string(n) + ", 1024), \"float32\")";
  return R"(@I.ir_module
class Module:
    @R.function
    def main(x: )" + t + R"(, r: )" + t + R"() -> )" + t + R"(:
        with R.dataflow():
            c: )" + t + R"( = R.multiply(R.multiply(x, x), x)
            i: )" + t + R"( = R.add(x, R.multiply(c, R.const(0.044715, "float32")))
            h: )" + t + R"( = R.tanh(R.multiply(i, R.const(0.7978845608, "float32")))
            g: )" + t + R"( = R.multiply(R.multiply(x, R.const(0.5, "float32")), R.add(h, R.const(1.0, "float32")))
            o: )" + t + R"( = R.add(g, r)
            R.output(o)
        return o
)";
}

struct gelu_hand {
  static constexpr auto x = k::fx::arg<0>{};
  static constexpr auto expr = x * 0.5 * (k::fx::tanh((x + x * x * x * 0.044715) * 0.7978845608) + 1.0) + k::fx::arg<1>{};
  tensor run(const std::vector<vm::value>& a) {
    const tensor in[] = {a[0].as_tensor(), a[1].as_tensor()};
    tensor out = empty(in[0].shape());  // the compiled program allocates its result too
    k::run_fused(expr, in, out);
    return out;
  }
  static constexpr int kernel_calls = 1;
};

std::vector<vm::value> gelu_args(std::int64_t n) { return {random_tensor({n, 1024}, 1, 1), random_tensor({n, 1024}, 1, 2)}; }

// ---- one model, both forms ---------------------------------------------------------------------------

struct compiled {
  ir::ir_module lowered;
  vm::executable ex;
  std::unique_ptr<vm::virtual_machine> machine;
  double build_seconds = 0, build_max_rss_mb = 0;  ///< export_library (compiled mode)
  explicit compiled(const std::string& text, bool fuse = true, kiln::exec_mode mode = kiln::exec_mode::bytecode) {
    kiln::pass_context ctx;  // opt level 2, as kiln::compile's default
    if (!fuse) ctx.disable("kiln.fuse");
    kiln::pass_context_scope scope(ctx);
    ex = kiln::compile(ir::parse_module(text), {.mode = mode, .lowered = &lowered});
    if (mode == kiln::exec_mode::compiled) {
      static int builds = 0;
      const auto lib = std::filesystem::temp_directory_path() / ("kiln-bench-" + std::to_string(::getpid()) + "-" + std::to_string(++builds) + ".so");
      vm::export_options opts;
      opts.flags = {"-O3"};  // export_library's default level; -march as the benchmark itself
      if (std::strlen(KILN_BENCH_MARCH) != 0) opts.flags.push_back(std::string("-march=") + KILN_BENCH_MARCH);
      if (const char* flags = std::getenv("KILN_BENCH_LIBRARY_FLAGS")) {  // e.g. "-O3 -march=native"
        opts.flags.clear();
        std::istringstream words(flags);
        for (std::string w; words >> w;) opts.flags.push_back(w);
      }
      const auto t0 = std::chrono::steady_clock::now();
      vm::export_library(ex, lib, opts);
      build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      rusage children{};
      ::getrusage(RUSAGE_CHILDREN, &children);
      build_max_rss_mb = double(children.ru_maxrss) / 1024;  // the largest child so far, in MB
      ex = vm::load_module(lib);
      std::filesystem::remove(lib);
    }
    machine = std::make_unique<vm::virtual_machine>(ex, vm::vm_options{}, kiln::vm::kernel_registry());
  }
  /// Kernel calls of `main` (one per call of a registered kernel in the lowered IR).
  int kernel_calls() const {
    int n = 0;
    ir::post_order_visit(ir::ref_cast<ir::function_node>(lowered->lookup("main"))->body, [&](const ir::expr& e) {
      if (auto* x = ir::dyn_cast<ir::extern_func_node>(e)) n += x->symbol.rfind("kernels.", 0) == 0;
    });
    return n;
  }
  void counters(benchmark::State& state) const {
    const auto plan = kiln::transform::memory_plan_of(lowered->lookup("main"));
    state.counters["arena_bytes"] = double(plan.planned_bytes);
    state.counters["unplanned_bytes"] = double(plan.unplanned_bytes);
    state.counters["live_lower_bound"] = double(plan.live_lower_bound);
    state.counters["kernel_calls"] = kernel_calls();
    if (build_seconds > 0) {
      state.counters["library_build_s"] = build_seconds;
      state.counters["compiler_max_rss_MB"] = build_max_rss_mb;
    }
  }
};

/// The unfused program runs the hand-written kernels: equal bit for bit. The fused one applies
/// the same operators per element, so it is checked to a rounding (softmax and layer_norm
/// normalise what they are given).
void check_same(const vm::value& a, const tensor& b, double tolerance = 0) {
  const auto x = a.as_tensor().to_vector<float>(), y = b.to_vector<float>();
  if (x.size() != y.size()) throw std::runtime_error("the compiled program and the hand-written sequence disagree in size");
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!(std::abs(x[i] - y[i]) <= tolerance * (1 + std::abs(y[i]))))
      throw std::runtime_error("the compiled program and the hand-written sequence disagree at element " + std::to_string(i) + ": " +
                               std::to_string(x[i]) + " and " + std::to_string(y[i]));
}

void BM_mlp_vm(benchmark::State& state, bool fuse, kiln::exec_mode mode) {
  const std::int64_t n = state.range(0);
  compiled c(mlp_text(n), fuse, mode);
  const auto args = mlp_args(n);
  mlp_hand hand(n);
  check_same(c.machine->invoke_span("main", args), hand.run(args), fuse ? 1e-6 : 0);
  for (auto _ : state) benchmark::DoNotOptimize(c.machine->invoke_span("main", args));
  c.counters(state);
}
void BM_mlp_hand(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const auto args = mlp_args(n);
  mlp_hand hand(n);
  for (auto _ : state) benchmark::DoNotOptimize(hand.run(args));
  state.counters["kernel_calls"] = mlp_hand::kernel_calls;
}
void BM_cnn_vm(benchmark::State& state, bool fuse, kiln::exec_mode mode) {
  compiled c(cnn_text, fuse, mode);
  const auto args = cnn_args();
  cnn_hand hand;
  check_same(c.machine->invoke_span("main", args), hand.run(args), fuse ? 1e-5 : 0);
  for (auto _ : state) benchmark::DoNotOptimize(c.machine->invoke_span("main", args));
  c.counters(state);
}
void BM_cnn_hand(benchmark::State& state) {
  const auto args = cnn_args();
  cnn_hand hand;
  for (auto _ : state) benchmark::DoNotOptimize(hand.run(args));
  state.counters["kernel_calls"] = cnn_hand::kernel_calls;
}
void BM_encoder_vm(benchmark::State& state, bool fuse, kiln::exec_mode mode) {
  compiled c(encoder_text(), fuse, mode);
  const auto args = encoder_args();
  encoder_hand hand;
  check_same(c.machine->invoke_span("main", args), hand.run(args), fuse ? 1e-5 : 0);
  for (auto _ : state) benchmark::DoNotOptimize(c.machine->invoke_span("main", args));
  c.counters(state);
}
void BM_encoder_hand(benchmark::State& state) {
  const auto args = encoder_args();
  encoder_hand hand;
  for (auto _ : state) benchmark::DoNotOptimize(hand.run(args));
  state.counters["kernel_calls"] = encoder_hand::kernel_calls;
}

void BM_gelu_vm(benchmark::State& state, bool fuse, kiln::exec_mode mode) {
  const std::int64_t n = state.range(0);
  compiled c(gelu_text(n), fuse, mode);
  const auto args = gelu_args(n);
  gelu_hand hand;
  check_same(c.machine->invoke_span("main", args), hand.run(args), 1e-5);
  for (auto _ : state) benchmark::DoNotOptimize(c.machine->invoke_span("main", args));
  c.counters(state);
}
void BM_gelu_hand(benchmark::State& state) {
  const auto args = gelu_args(state.range(0));
  gelu_hand hand;
  for (auto _ : state) benchmark::DoNotOptimize(hand.run(args));
  state.counters["kernel_calls"] = gelu_hand::kernel_calls;
}

constexpr auto bytecode = kiln::exec_mode::bytecode;
constexpr auto compiled_mode = kiln::exec_mode::compiled;
BENCHMARK_CAPTURE(BM_mlp_vm, unfused, false, bytecode)->Name("BM_mlp_vm_unfused")->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_mlp_vm, fused, true, bytecode)->Name("BM_mlp_vm")->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_mlp_vm, compiled_unfused, false, compiled_mode)->Name("BM_mlp_compiled_unfused")->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_mlp_vm, compiled, true, compiled_mode)->Name("BM_mlp_compiled")->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_mlp_hand)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_cnn_vm, unfused, false, bytecode)->Name("BM_cnn_vm_unfused")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_cnn_vm, fused, true, bytecode)->Name("BM_cnn_vm")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_cnn_vm, compiled_unfused, false, compiled_mode)->Name("BM_cnn_compiled_unfused")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_cnn_vm, compiled, true, compiled_mode)->Name("BM_cnn_compiled")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_cnn_hand)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_encoder_vm, unfused, false, bytecode)->Name("BM_encoder_vm_unfused")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_encoder_vm, fused, true, bytecode)->Name("BM_encoder_vm")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_encoder_vm, compiled_unfused, false, compiled_mode)->Name("BM_encoder_compiled_unfused")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_encoder_vm, compiled, true, compiled_mode)->Name("BM_encoder_compiled")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_encoder_hand)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_gelu_vm, unfused, false, bytecode)->Name("BM_gelu_vm_unfused")->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_gelu_vm, fused, true, bytecode)->Name("BM_gelu_vm")->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_gelu_vm, compiled, true, compiled_mode)->Name("BM_gelu_compiled")->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_gelu_hand)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);

// ---- callgrind and compile-time entry points ---------------------------------------------------------

extern "C" __attribute__((noinline)) void kiln_measure(const std::function<void()>& f, int reps) {
  for (int i = 0; i < reps; ++i) f();
}

int callgrind(const std::string& model, const std::string& form, int reps) {
  std::function<void()> f;
  std::vector<vm::value> args;
  std::unique_ptr<compiled> c;
  std::unique_ptr<mlp_hand> mh;
  std::unique_ptr<cnn_hand> ch;
  std::unique_ptr<encoder_hand> eh;
  std::unique_ptr<gelu_hand> gh;
  if (form != "vm" && form != "vm_fused" && form != "compiled" && form != "compiled_fused" && form != "hand") {
    std::cerr << "unknown form " << form << " (vm, vm_fused, compiled, compiled_fused, hand)\n";
    return 2;
  }
  const bool hand = form == "hand", fused = form.ends_with("_fused");
  const auto mode = form.starts_with("compiled") ? kiln::exec_mode::compiled : kiln::exec_mode::bytecode;
  if (model == "mlp") {
    args = mlp_args(1);
    if (!hand) c = std::make_unique<compiled>(mlp_text(1), fused, mode);
    else mh = std::make_unique<mlp_hand>(1);
  } else if (model == "cnn") {
    args = cnn_args();
    if (!hand) c = std::make_unique<compiled>(cnn_text, fused, mode);
    else ch = std::make_unique<cnn_hand>();
  } else if (model == "encoder") {
    args = encoder_args();
    if (!hand) c = std::make_unique<compiled>(encoder_text(), fused, mode);
    else eh = std::make_unique<encoder_hand>();
  } else if (model == "gelu") {
    args = gelu_args(1);
    if (!hand) c = std::make_unique<compiled>(gelu_text(1), fused, mode);
    else gh = std::make_unique<gelu_hand>();
  } else {
    std::cerr << "unknown model " << model << '\n';
    return 2;
  }
  if (c) f = [&] { c->machine->invoke_span("main", args); };
  else if (mh) f = [&] { mh->run(args); };
  else if (ch) f = [&] { ch->run(args); };
  else if (eh) f = [&] { eh->run(args); };
  else f = [&] { gh->run(args); };
  f();  // warm up: pools filled, caches of parsed descriptions made
  kiln_measure(f, reps);
  return 0;
}

int compile_time() {
  auto time = [](const std::string& text, int reps) {
    const ir::ir_module m = ir::parse_module(text);
    double best = 1e30;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      const vm::executable ex = kiln::compile(m);
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      benchmark::DoNotOptimize(ex.num_instructions());
    }
    return best;
  };
  std::printf("compile() of the encoder layer: %.2f ms (best of 5)\n", time(encoder_text(), 5));
  std::printf("compile() of a 12-layer encoder stack: %.2f ms (best of 3)\n", time(encoder_stack_text(12), 3));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 5 && std::strcmp(argv[1], "--callgrind") == 0) return callgrind(argv[2], argv[3], std::atoi(argv[4]));
  if (argc >= 2 && std::strcmp(argv[1], "--compile-time") == 0) return compile_time();
  if (argc >= 3 && std::strcmp(argv[1], "--generated-source") == 0) {
    const std::string model = argv[2];
    const std::string text = model == "mlp" ? mlp_text(1) : model == "cnn" ? std::string(cnn_text) : model == "gelu" ? gelu_text(1) : encoder_text();
    std::cout << kiln::compile(ir::parse_module(text), {.mode = kiln::exec_mode::compiled}).generated_source;
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
