// SPDX-License-Identifier: Apache-2.0
#include <kiln/support/strings.hpp>

#include <doctest/doctest.h>

using namespace kiln::detail;

TEST_CASE("edit distance counts insertions, deletions and substitutions") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("matmul", "matmull") == 1);
}

TEST_CASE("close matches are ranked by distance and limited") {
  std::vector<std::string> names = {"fold_constant", "fuse_ops", "dead_code_elimination", "legalize_ops", "fuse_tir"};
  auto m = close_matches("fuse_op", names);
  REQUIRE(!m.empty());
  CHECK(m[0] == "fuse_ops");
  CHECK(close_matches("zzzzzzzz", names).empty());
  CHECK(close_matches("fuse", names, 1).size() == 1);
}

TEST_CASE("did_you_mean phrases one or several suggestions") {
  CHECK(did_you_mean("matmull", {"matmul", "add"}) == " (did you mean 'matmul'?)");
  CHECK(did_you_mean("ad", {"add", "and"}) == " (did you mean 'add' or 'and'?)");
  CHECK(did_you_mean("qqqqqq", {"add"}).empty());
  CHECK(join({"a", "b", "c"}) == "a, b, c");
}
