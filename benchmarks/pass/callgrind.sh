#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Instruction counts of the pass-overhead variants (see overhead.cpp), repeatable where timings on a
# noisy 2-core machine are not. Prints, per K and F, instructions per pass per function for each
# variant and its ratio to hand-written code.
#   usage: benchmarks/pass/callgrind.sh [path/to/pass_overhead_bench]
set -euo pipefail
bench=${1:-build/bench/benchmarks/pass_overhead_bench}
reps=${KILN_CALLGRIND_REPS:-20}
source "$(dirname "$0")/../callgrind.bash"
kiln_callgrind_init "$bench"

instructions() {  # variant K F -> instructions inside kiln_measure
  kiln_callgrind_count '*kiln_measure*' "$bench" --callgrind "$1" "$2" "$3" "$reps"
}

printf '%-4s %-5s %14s %14s %8s %14s %8s %14s %8s\n' K F "a ins/pass/fn" "b ins/pass/fn" "b/a" "c ins/pass/fn" "c/a" "d ins/pass/fn" "d/a"
for k in 1 10 50; do
  for f in 1 100 1000; do
    declare -A ins=()
    for v in a b c d; do ins[$v]=$(instructions $v $k $f); done
    awk -v k=$k -v f=$f -v r=$reps -v a="${ins[a]}" -v b="${ins[b]}" -v c="${ins[c]}" -v d="${ins[d]}" 'BEGIN {
      n = k * f * r
      printf "%-4d %-5d %14.1f %14.1f %8.4f %14.1f %8.3f %14.1f %8.4f\n", k, f, a/n, b/n, b/a, c/n, c/a, d/n, d/a }'
  done
done
