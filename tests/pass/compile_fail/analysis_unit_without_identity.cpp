// expect: this unit type has no identity
#include "common.hpp"

#include <kiln/pass/pass_context.hpp>
struct value_of {  // the toy IR's functions are plain values: nothing to key a cached result on
  static constexpr std::string_view name = "value_of";
  long run(const toy::function& f) const { return f.value; }
};
int main() {
  kiln::pass_context ctx;
  (void)ctx.analysis<value_of>(toy::function{});
}
