// expect: kiln instrument: a member's name is a misspelling of a hook
#include "common.hpp"
// Looks like an instrument (it has run_before_pass), but its second hook is misspelt: it would
// never be called.
struct counter {
  int before = 0, after = 0;
  void run_before_pass(const kiln::pass_info&) { ++before; }
  void run_afterpass(const kiln::pass_info&) { ++after; }
};
int main() {
  kiln::pass_context ctx;
  ctx.set_instruments({counter{}});
}
