// SPDX-License-Identifier: Apache-2.0
// Writes docs/onnx-operators.md, the table of the ONNX operators kiln imports, from the importer's
// own converter table; with --check FILE, fails when FILE differs from it (a CTest test), so the
// page cannot fall behind the code.
//
//   build/tests/onnx_operators > docs/onnx-operators.md
#include <kiln/frontend/onnx/import.hpp>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

std::string table() {
  const auto& converters = kiln::frontend::onnx::converter_table::builtin();
  const auto ops = converters.op_types();
  std::ostringstream s;
  s << "# ONNX operators\n\n"
    << "The operators of the default ONNX domain that kiln's importer converts, and the opsets from\n"
    << "which each of its converters applies: a model at opset 17 uses, for each operator, the converter\n"
    << "with the largest version not above 17. A node older than an operator's first converter is\n"
    << "brought up by ONNX's version converter first (see [the importer](onnx.md)). What each operator\n"
    << "becomes, and its limits, are in [the importer's page](onnx.md); converters of your own are\n"
    << "added to a `converter_table`.\n\n"
    << "This page is written by `tests/docs/onnx_operators.cpp` from the importer's converter table,\n"
    << "and a test fails when they differ: " << ops.size() << " operators.\n\n"
    << "| operator | converters from opset |\n|---|---|\n";
  for (const std::string& op : ops) {
    s << "| " << op << " | ";
    const auto since = converters.since_opsets(op);
    for (std::size_t i = 0; i < since.size(); ++i) s << (i ? ", " : "") << since[i];
    s << " |\n";
  }
  return s.str();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string text = table();
  if (argc == 3 && std::string(argv[1]) == "--check") {
    std::ifstream in(argv[2], std::ios::binary);
    std::ostringstream have;
    have << in.rdbuf();
    if (!in || have.str() != text) {
      std::cerr << "onnx_operators: " << argv[2] << " differs from the importer's converter table; write it anew with "
                << argv[0] << " > " << argv[2] << "\n";
      return 1;
    }
    std::cout << "onnx_operators: " << argv[2] << " lists the importer's operators\n";
    return 0;
  }
  if (argc != 1) {
    std::cerr << "usage: " << argv[0] << " [--check FILE]\n";
    return 2;
  }
  std::cout << text;
  return 0;
}
