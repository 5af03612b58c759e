#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Instructions the VM spends outside the kernels: each model of end_to_end.cpp run compiled on the
# VM (bytecode, and the compiled mode's generated C++) and as the hand-written kernel sequence,
# under callgrind; the difference divided by the number of kernel calls is the cost per kernel
# call (dispatch, argument checks, allocation of tensor views on the arena, shape checks).
#   usage: benchmarks/compiler/callgrind.sh [path/to/compiler_end_to_end_bench]
# Build the benchmark without AVX-512 (-DKILN_MARCH= or a CPU without it): Valgrind 3.19 cannot
# decode it. Fails, with valgrind's own message, when a measurement fails.
set -euo pipefail
bench=${1:-build/bench/benchmarks/compiler_end_to_end_bench}
reps=${KILN_CALLGRIND_REPS:-10}
source "$(dirname "$0")/../callgrind.bash"
kiln_callgrind_init "$bench"

instructions() {  # model form -> instructions inside kiln_measure
  kiln_callgrind_count kiln_measure "$bench" --callgrind "$1" "$2" "$reps"
}

declare -A calls=([mlp]=9 [cnn]=13 [encoder]=21)
printf '%-8s %14s %14s %14s %16s %16s\n' model "vm ins/run" "compiled" "hand ins/run" "vm extra/call" "compiled extra/call"
for model in mlp cnn encoder; do
  vm=$(instructions "$model" vm)
  comp=$(instructions "$model" compiled)
  hand=$(instructions "$model" hand)
  awk -v m="$model" -v r="$reps" -v vm="$vm" -v c="$comp" -v hand="$hand" -v k="${calls[$model]}" 'BEGIN {
    printf "%-8s %14.0f %14.0f %14.0f %16.1f %16.1f\n", m, vm / r, c / r, hand / r, (vm - hand) / r / k, (c - hand) / r / k }'
done

# With fusion on (the default pipeline): fused elementwise groups run in the bytecode through the
# fused_expr interpreter, in the compiled mode as inlined fx:: expressions. Both forms run the same
# GEMM and convolution kernels, so the difference is the groups and the calls around them. The
# hand-written form of gelu (one fused group, nothing else) is kernels::run_fused on the same fx::
# expression; the hand-written forms of the other models are unfused, so they have none here.
printf '\n%-8s %16s %16s %16s %12s %12s\n' model "vm fused ins/run" "compiled fused" "hand-written" "compiled/vm" "compiled/hand"
for model in mlp cnn encoder gelu; do
  vm=$(instructions "$model" vm_fused)
  comp=$(instructions "$model" compiled_fused)
  if [[ $model == gelu ]]; then hand=$(instructions "$model" hand); else hand=0; fi
  awk -v m="$model" -v r="$reps" -v vm="$vm" -v c="$comp" -v hand="$hand" 'BEGIN {
    if (hand > 0) printf "%-8s %16.0f %16.0f %16.0f %12.4f %12.4f\n", m, vm / r, c / r, hand / r, c / vm, c / hand
    else printf "%-8s %16.0f %16.0f %16s %12.4f %12s\n", m, vm / r, c / r, "-", c / vm, "-" }'
done
