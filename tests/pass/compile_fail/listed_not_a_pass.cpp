// expect: kiln::sequential: every template argument must be a pass
#include "common.hpp"
struct widget {};
int main() { (void)kiln::sequential<ok_pass, widget>{}; }
