// SPDX-License-Identifier: Apache-2.0
// The ONNX backend test suite through kiln: every case of Debian's libonnx-testdata (a model,
// its inputs and expected outputs as protobufs) imported, compiled, run on the VM and compared at
// the suite's tolerances (rtol 1e-3, atol 1e-7), and classified:
//   pass        the outputs match
//   fail        wrong numbers, shapes or dtypes
//   error       imported, but compiling or running it raised an error
//   unsupported the importer rejected the model (an operator, attribute or type kiln lacks)
// Many node tests give what a real model holds in initializers — a shape, axes, pads — as graph
// inputs. When the importer says such an input must be known at import, the case is imported
// again with its integer inputs (then all inputs but the first) bound to the test data's values
// (`import_options::constant_inputs`, as a user specializing such a model would); the table
// counts those passes separately ("bound").
// A crash is a bug and ends the run. Prints a table per operator and the totals.
//
//   onnx_conformance DATA_DIR [--suite node] [--filter substring] [--verbose] [--min-pass N]
//
// Exits non-zero when fewer than N cases pass (`--min-pass`), or when an exception that is not a
// kiln::error escapes (a bug in kiln's error handling).
#include <kiln/compile.hpp>
#include <kiln/frontend/onnx/import.hpp>
#include <kiln/runtime/compare.hpp>
#include <kiln/vm/vm.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace fs = std::filesystem;
using namespace kiln;
namespace kx = kiln::frontend::onnx;

namespace {

enum class outcome { pass, fail, error, unsupported };
const char* name(outcome o) {
  switch (o) {
    case outcome::pass: return "pass";
    case outcome::fail: return "fail";
    case outcome::error: return "error";
    case outcome::unsupported: return "unsupported";
  }
  return "?";
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(p);
  }
  return out;
}

struct result {
  outcome what;
  std::string detail;
  bool bound = false;  ///< imported with some inputs bound to the test data's values
};

/// The graph inputs that are not initializers, in order.
std::vector<const ::onnx::ValueInfoProto*> graph_inputs(const ::onnx::ModelProto& model) {
  std::set<std::string> inits;
  for (auto& t : model.graph().initializer()) inits.insert(t.name());
  std::vector<const ::onnx::ValueInfoProto*> out;
  for (auto& in : model.graph().input())
    if (!inits.count(in.name())) out.push_back(&in);
  return out;
}

result run_case(const fs::path& dir) {
  ::onnx::ModelProto model;
  if (!model.ParseFromString(read_all(dir / "model.onnx"))) return {outcome::unsupported, "the model does not parse"};
  const auto inputs = graph_inputs(model);
  const auto data_sets = [&] {
    std::vector<fs::path> out;
    for (auto& entry : fs::directory_iterator(dir))
      if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0) out.push_back(entry.path());
    std::sort(out.begin(), out.end());
    return out;
  }();
  if (data_sets.empty()) return {outcome::unsupported, "no test data"};
  const auto first_inputs = numbered(data_sets[0], "input_");

  ir::ir_module m;
  std::set<std::size_t> bound;  // indices into `inputs`
  for (int attempt = 0;; ++attempt) {
    kx::import_options options;
    for (auto i : bound)
      options.constant_inputs[inputs[i]->name()] =
          kx::to_ndarray(kx::parse_tensor(read_all(first_inputs.at(i)), first_inputs[i].string()), first_inputs[i].string());
    try {
      m = kx::import_model(model, options);
      break;
    } catch (const kx::import_error& e) {
      const bool needs_values = std::string(e.what()).find("must be known when the model is imported") != std::string::npos;
      if (!needs_values || attempt == 2 || data_sets.size() != 1 || first_inputs.size() != inputs.size())
        return {outcome::unsupported, e.what()};
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        const int type = inputs[i]->type().tensor_type().elem_type();
        const bool integer = type == ::onnx::TensorProto::INT64 || type == ::onnx::TensorProto::INT32;
        if (attempt == 0 ? integer : i > 0) bound.insert(i);
      }
    }
  }
  vm::executable ex;
  try {
    ex = kiln::compile(m);
  } catch (const kiln::error& e) {
    return {outcome::error, std::string("compile: ") + e.what()};
  }
  vm::virtual_machine machine(ex, {}, vm::kernel_registry());
  for (auto& set : data_sets) {
    std::vector<vm::value> args;
    const auto files = numbered(set, "input_");
    for (std::size_t i = 0; i < files.size(); ++i)
      if (!bound.count(i)) args.emplace_back(kx::to_tensor(kx::parse_tensor(read_all(files[i]), files[i].string()), files[i].string()));
    std::vector<runtime::tensor> want;
    for (auto& p : numbered(set, "output_")) want.push_back(kx::to_tensor(kx::parse_tensor(read_all(p), p.string()), p.string()));
    vm::value got;
    try {
      got = machine.invoke_span("main", args);
    } catch (const kiln::error& e) {
      return {outcome::error, std::string("run: ") + e.what()};
    }
    std::vector<vm::value> outs;
    if (want.size() == 1) outs.push_back(got);
    else if (got.is_tuple()) outs.assign(got.as_tuple().begin(), got.as_tuple().end());
    if (outs.size() != want.size()) return {outcome::fail, std::to_string(outs.size()) + " outputs, expected " + std::to_string(want.size())};
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (!outs[i].is_tensor()) return {outcome::fail, "output " + std::to_string(i) + " is not a tensor"};
      if (const auto c = runtime::compare_close(outs[i].as_tensor(), want[i], 1e-3, 1e-7); !c.ok())
        return {outcome::fail, set.filename().string() + " output " + std::to_string(i) + ": " + c.describe()};
    }
  }
  return {outcome::pass, {}, !bound.empty()};
}

/// The operator a node test is about: its one node's type; "(several nodes)" for the tests of
/// functions written out (`_expanded`) and other multi-node graphs.
std::string operator_of(const fs::path& dir) {
  ::onnx::ModelProto model;
  const std::string bytes = read_all(dir / "model.onnx");
  if (!model.ParseFromString(bytes) || model.graph().node_size() == 0) return "(unreadable)";
  if (model.graph().node_size() > 1) return "(several nodes)";
  return model.graph().node(0).op_type();
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage = "usage: onnx_conformance DATA_DIR [--suite node] [--filter substring] [--verbose] [--min-pass N]\n";
  if (argc < 2 || std::string_view(argv[1]).starts_with("-")) {
    std::cerr << usage;
    return 2;
  }
  const fs::path root = argv[1];
  std::string suite = "node", filter;
  bool verbose = false;
  long min_pass = 0;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--suite" && i + 1 < argc) suite = argv[++i];
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--verbose") verbose = true;
    else if (a == "--min-pass" && i + 1 < argc) {
      char* end = nullptr;
      min_pass = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || min_pass < 0) {
        std::cerr << "onnx_conformance: --min-pass takes a count, not '" << argv[i] << "'\n";
        return 2;
      }
    }
    else {
      std::cerr << "onnx_conformance: unknown argument '" << a << "'\n";
      return 2;
    }
  }
  std::vector<fs::path> cases;
  std::error_code ec;
  if (!fs::is_directory(root / suite, ec)) {
    std::cerr << "onnx_conformance: " << (root / suite) << " is not a directory (DATA_DIR is ONNX's backend test data, e.g. "
              << "/usr/include/onnx/backend/test/data from libonnx-testdata)\n";
    return 2;
  }
  for (auto& e : fs::directory_iterator(root / suite))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx") && e.path().filename().string().find(filter) != std::string::npos)
      cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  if (cases.empty()) {
    std::cerr << "onnx_conformance: no test cases under " << (root / suite) << "\n";
    return 2;
  }

  std::map<std::string, std::map<outcome, int>> by_op;
  std::map<outcome, int> total;
  int bound_passes = 0;
  for (auto& dir : cases) {
    result r;
    try {
      r = run_case(dir);
    } catch (const kiln::error& e) {
      r = {outcome::error, e.what()};
    } catch (const std::exception& e) {
      std::cerr << "onnx_conformance: " << dir.filename().string() << ": an exception that is not a kiln::error escaped: " << e.what() << "\n";
      return 1;
    }
    ++by_op[operator_of(dir)][r.what];
    ++total[r.what];
    if (r.what == outcome::pass && r.bound) ++bound_passes;
    if (verbose || (r.what != outcome::pass && r.what != outcome::unsupported))
      std::cout << name(r.what) << "  " << dir.filename().string() << (r.detail.empty() ? "" : ": " + r.detail.substr(0, 400)) << "\n";
  }
  std::printf("\n%-28s %6s %6s %6s %12s\n", "operator", "pass", "fail", "error", "unsupported");
  for (auto& entry : by_op) {  // not a structured binding: Clang 14 cannot capture one in a lambda
    const std::string& op = entry.first;
    const auto& counts = entry.second;
    auto get = [&](outcome o) { return counts.count(o) ? counts.at(o) : 0; };
    std::printf("%-28s %6d %6d %6d %12d\n", op.c_str(), get(outcome::pass), get(outcome::fail), get(outcome::error), get(outcome::unsupported));
  }
  auto get = [&](outcome o) { return total.count(o) ? total.at(o) : 0; };
  std::printf("\n%zu cases: %d pass (%d of them with inputs bound at import), %d fail, %d error, %d unsupported (%.1f%% pass)\n", cases.size(),
              get(outcome::pass), bound_passes, get(outcome::fail), get(outcome::error), get(outcome::unsupported),
              100.0 * get(outcome::pass) / double(cases.size()));
  if (get(outcome::pass) < min_pass) {
    std::printf("onnx_conformance: %d cases pass, fewer than the %ld expected (--min-pass)\n", get(outcome::pass), min_pass);
    return 1;
  }
  return 0;
}
