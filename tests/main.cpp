// SPDX-License-Identifier: Apache-2.0
// The test executables' main: doctest's, except that a run whose test-case filter selects no test
// case fails. ctest runs each test case by name (doctest_discover_tests); a name the filter cannot
// match — CMake once cut names at a ';' — would otherwise "pass" without running anything.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string_view>

namespace {

int selected = -1;  // test cases that passed the filters, once a run has ended

struct selection_listener : doctest::IReporter {
  explicit selection_listener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& s) override { selected = int(s.numTestCasesPassingFilters); }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("kiln_selection", 1, selection_listener);

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit() || result != 0) return result;
  bool filtered = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    filtered |= a.starts_with("--test-case=") || a.starts_with("-tc=");
  }
  if (filtered && selected == 0) {
    std::fprintf(stderr, "kiln tests: the test-case filter selected no test case (a name ctest cut short?)\n");
    return 1;
  }
  return result;
}
