// expect: this analysis cannot run on this IR unit
#include "common.hpp"

#include <kiln/pass/pass_context.hpp>

#include <memory>
struct no_run {
  static constexpr std::string_view name = "no_run";
  int run(const std::shared_ptr<const long>&) const { return 0; }  // on another unit type
};
int main() {
  kiln::pass_context ctx;
  (void)ctx.analysis<no_run>(std::make_shared<const int>(1));
}
