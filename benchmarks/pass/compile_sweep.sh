#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Compile cost of static pipelines: for N = 8, 32, 64 passes (each requiring the one before it;
# the odd ones listed, the even ones pulled in as requirements), compiles a TU that builds and runs
# kiln::sequential<...> and reports the compiler's wall time and peak memory.
#   usage: benchmarks/pass/compile_sweep.sh [compiler...]   (default: g++ clang++)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
compilers=("$@")
[ ${#compilers[@]} -eq 0 ] && compilers=(g++ clang++)

generate() {  # N -> a translation unit
  local n=$1
  echo '#include "bench_ir.hpp"'
  echo '#include <kiln/pass/sequential.hpp>'
  for ((i = 0; i < n; ++i)); do
    if ((i == 0)); then echo "struct q0 : bench::work_pass<0> {};"
    else echo "struct q$i : bench::work_pass<$i> { using required = kiln::pass_list<q$((i - 1))>; };"; fi
  done
  local listed=""
  for ((i = 1; i < n; i += 2)); do listed+="${listed:+, }q$i"; done
  echo "using pipeline = kiln::sequential<$listed>;"
  echo "static_assert(pipeline::size == $n);"
  echo 'int main() { std::vector<bench::function> f = bench::make_functions(4); kiln::pass_context ctx;'
  echo '  return pipeline{}(bench::module{&f}, ctx).functions->size() == 4 ? 0 : 1; }'
}

printf '%-10s %6s %10s %12s\n' compiler passes seconds "peak MB"
for cxx in "${compilers[@]}"; do
  echo '#include <kiln/pass/pass.hpp>' > "$tmp/include_only.cpp"
  /usr/bin/time -f '%e %M' -o "$tmp/t" "$cxx" -std=c++20 -O2 -I"$root/include" -c "$tmp/include_only.cpp" -o "$tmp/o.o"
  read -r secs kb < "$tmp/t"
  printf '%-10s %6s %10s %12.0f\n' "$cxx" "0*" "$secs" "$(echo "$kb / 1024" | bc -l)"
  for n in 8 32 64; do
    generate "$n" > "$tmp/p$n.cpp"
    /usr/bin/time -f '%e %M' -o "$tmp/t" "$cxx" -std=c++20 -O2 -I"$root/include" -I"$root/benchmarks/pass" -c "$tmp/p$n.cpp" -o "$tmp/o.o"
    read -r secs kb < "$tmp/t"
    printf '%-10s %6d %10s %12.0f\n' "$cxx" "$n" "$secs" "$(echo "$kb / 1024" | bc -l)"
  done
done
echo "0*: including kiln/pass/pass.hpp only"
