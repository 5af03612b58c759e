// expect: kiln instrument: run_before_pass must take
#include "common.hpp"
struct typo {
  void run_before_pass(const std::string& pass_name) { (void)pass_name; }
};
int main() {
  kiln::pass_context ctx;
  ctx.set_instruments({typo{}});
}
