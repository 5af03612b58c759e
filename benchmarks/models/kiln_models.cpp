// SPDX-License-Identifier: Apache-2.0
// kiln's side of the end-to-end comparison with ONNX Runtime and PyTorch (benchmarks/models/compare):
// each MODEL.onnx in a directory is imported, compiled with the default pipeline and run on the
// VM with the kernels on 1 and 2 threads.
//
//     kiln_models_bench DIR|MODEL.onnx [Google Benchmark flags]
//
// Before timing, each model's output on DIR/MODEL.input.npy is compared with PyTorch's
// (DIR/MODEL.output.npy, from scripts/export_models.py) at atol = rtol = 1e-4; a model that does
// not match, or fails to import or compile, ends the program with an error — no figure is printed
// for a model that does not give the right answer.
//
// Protocol (the same in ort_bench.js and torch_bench.py): repetitions of at least 50 ms each; the
// figures are the median and the minimum over repetitions of the mean time per run. The CPU time
// is the process's (all threads), so that compare can show how many cores each engine kept busy.
#include <kiln/compile.hpp>
#include <kiln/frontend/onnx/import.hpp>
#include <kiln/kernels/isa.hpp>
#include <kiln/kernels/kernels.hpp>
#include <kiln/runtime/compare.hpp>
#include <kiln/runtime/npy.hpp>
#include <kiln/vm/vm.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using kiln::runtime::tensor;

struct model {
  kiln::vm::executable ex;
  tensor input;
};

model load(const fs::path& onnx) {
  model m;
  m.ex = kiln::compile(kiln::frontend::onnx::import_file(onnx.string()));
  fs::path in = onnx, out = onnx;
  in.replace_extension(".input.npy");
  out.replace_extension(".output.npy");
  m.input = kiln::runtime::load_npy(in);
  kiln::vm::virtual_machine machine(m.ex, {}, kiln::vm::kernel_registry());
  const kiln::vm::value y = machine.invoke("main", m.input);
  const kiln::runtime::closeness c = kiln::runtime::compare_close(y.as_tensor(), kiln::runtime::load_npy(out), 1e-4, 1e-4);
  if (!c.ok()) throw std::runtime_error(onnx.filename().string() + ": kiln's output differs from PyTorch's: " + c.describe());
  return m;
}

void run(benchmark::State& state, std::shared_ptr<model> m, std::size_t threads) {
  kiln::kernels::set_num_threads(threads);
  kiln::vm::virtual_machine machine(m->ex, {}, kiln::vm::kernel_registry());
  for (int i = 0; i < 3; ++i) benchmark::DoNotOptimize(machine.invoke("main", m->input));  // warm-up: the arena, the caches
  for (auto _ : state) benchmark::DoNotOptimize(machine.invoke("main", m->input));
  kiln::kernels::set_num_threads(1);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("kiln kernels", kiln::kernels::isa_report());
  std::error_code ec;
  if (argc != 2 || !(fs::is_directory(argv[1], ec) || fs::path(argv[1]).extension() == ".onnx")) {
    std::cerr << "usage: kiln_models_bench DIR|MODEL.onnx [Google Benchmark flags]  (beside each MODEL.onnx: MODEL.input.npy, MODEL.output.npy)\n";
    return 2;
  }
  std::vector<fs::path> files;
  if (fs::is_directory(argv[1], ec)) {
    for (const auto& e : fs::directory_iterator(argv[1]))
      if (e.path().extension() == ".onnx") files.push_back(e.path());
  } else {
    files.push_back(argv[1]);
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::cerr << "kiln_models_bench: no .onnx files in '" << argv[1] << "'\n";
    return 2;
  }
  try {
    for (const fs::path& f : files) {
      auto m = std::make_shared<model>(load(f));
      for (std::size_t threads : {1, 2})
        benchmark::RegisterBenchmark(("kiln/" + f.stem().string() + "/threads:" + std::to_string(threads)).c_str(), run, m, threads)
            ->Unit(benchmark::kMicrosecond)
            ->MinTime(0.05)
            ->Repetitions(15)
            ->ComputeStatistics("min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); })
            ->ReportAggregatesOnly(true)
            ->MeasureProcessCPUTime()  // the pool's workers too: compare reports CPU time over wall time
            ->UseRealTime();
    }
  } catch (const std::exception& e) {
    std::cerr << "kiln_models_bench: " << e.what() << "\n";
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
