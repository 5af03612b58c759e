// SPDX-License-Identifier: Apache-2.0
#include <kiln/vm/value.hpp>

#include "../common/message_of.hpp"

#include <doctest/doctest.h>

using namespace kiln;
using namespace kiln::vm;
using kiln_test::message_of;

TEST_CASE("a value is 16 bytes and holds every kind") {
  static_assert(sizeof(value) == 16);
  CHECK(value().is_null());
  CHECK(value(7).as_int() == 7);
  CHECK(value(std::int64_t(1) << 62).as_int() == std::int64_t(1) << 62);
  CHECK(value(2.5).as_float() == 2.5);
  CHECK(value(3).as_float() == 3.0);  // ints read as floats
  CHECK(value(true).as_bool());
  CHECK(value("text").as_string() == "text");
  CHECK(value::shape({2, 3}).as_shape() == shape_vector{2, 3});
  auto t = tensor::zeros({2}, dtype::float32);
  CHECK(value(t).as_tensor().node() == t.node());
  auto tup = value::tuple({1, "a", value::shape({4})});
  REQUIRE(tup.as_tuple().size() == 3);
  CHECK(tup.as_tuple()[1].as_string() == "a");
  CHECK(value(tensor()).is_null());
}

TEST_CASE("copies share objects through the count, moves do not touch it") {
  auto t = tensor::zeros({2}, dtype::float32);
  const auto* node = t.node();
  CHECK(node->use_count() == 1);
  value a(t);
  CHECK(node->use_count() == 2);
  {
    value b = a;
    CHECK(node->use_count() == 3);
    value c = std::move(b);
    CHECK(node->use_count() == 3);
    CHECK(b.is_null());
  }
  CHECK(node->use_count() == 2);
  a = 5;  // overwriting releases
  CHECK(node->use_count() == 1);
  value d(t);
  const value& alias = d;
  d = alias;  // self-assignment keeps the object
  CHECK(node->use_count() == 2);
  d.reset();
  CHECK(node->use_count() == 1);
}

TEST_CASE("reading the wrong kind names the expected and the actual kind") {
  CHECK(message_of<value_error>([] { value(tensor::zeros({1}, dtype::int32)).as_int(); }) ==
        "kiln::vm::value: expected int, got tensor");
  CHECK(message_of<value_error>([] { value(1.5).as_int(); }) == "kiln::vm::value: expected int, got float");
  CHECK(message_of<value_error>([] { value().as_tensor(); }) == "kiln::vm::value: expected tensor, got null");
  CHECK(message_of<value_error>([] { value(1).as_bool(); }) == "kiln::vm::value: expected bool, got int");
  CHECK(message_of<value_error>([] { value("s").as_shape(); }) == "kiln::vm::value: expected shape, got string");
  CHECK(message_of<value_error>([] { value(1).as_object(); }) == "kiln::vm::value: expected object, got int");
}

namespace {
struct my_cache final : kiln::runtime::object {
  std::string_view type_name() const noexcept override { return "test.Cache"; }
  int hits = 3;
};
}  // namespace

TEST_CASE("users' own objects travel as opaque objects and come back typed") {
  value v = value::from_object(kiln::runtime::make_object<my_cache>());
  CHECK(v.kind() == value_kind::object);
  CHECK(v.as_object<my_cache>()->hits == 3);
  CHECK(to_string(v) == "object(test.Cache)");
  CHECK(message_of<value_error>([&] { v.as_object<kiln::runtime::tensor_node>(); }).find("got object test.Cache") != std::string::npos);
  // Known object types get their own kinds.
  CHECK(value::from_object(kiln::runtime::make_object<shape_obj>(shape_vector{1})).is_shape());
}

TEST_CASE("equal compares contents, to_string renders values for traces") {
  CHECK(equal(value(1), value(1)));
  CHECK_FALSE(equal(value(1), value(1.0)));
  CHECK(equal(value::tuple({1, "x"}), value::tuple({1, "x"})));
  CHECK_FALSE(equal(value::tuple({1}), value::tuple({2})));
  CHECK(equal(value(tensor::from_values<float>({2}, {1, 2})), value(tensor::from_values<float>({2}, {1, 2}))));
  CHECK(to_string(value(2.5)) == "2.5");
  CHECK(to_string(value(3.0)) == "3.0");
  CHECK(to_string(value::tuple({1, "a", value::shape({2, 3}), value(tensor::zeros({4}, dtype::int8))})) ==
        "(1, \"a\", shape(2, 3), int8[4])");
  CHECK(to_string(value(false)) == "false");
}

TEST_CASE("bind_last_args appends its arguments after the caller's and after earlier bindings") {
  closure_obj c;
  c.name = "f";
  c.native.fn = [](const void*, call_args a) {
    std::string s;
    for (std::size_t i = 0; i < a.size(); ++i) s += std::to_string(a[i].as_int());
    return value(s).into_raw();
  };
  value once = bind_last_args(c, {3});
  value twice = bind_last_args(once.as_closure(), {2});
  CHECK(twice.as_closure().bound.size() == 2);
  const value one(1);
  const value* args[] = {&one, &twice.as_closure().bound[0], &twice.as_closure().bound[1]};
  CHECK(twice.as_closure().native(call_args(args, 3)).as_string() == "123");
}
