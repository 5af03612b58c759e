#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Instruction counts of the VM dispatch workloads (see dispatch.cpp) against their hand-written
# twins: per Call for (a) and (c), per loop iteration for (b), per invocation for (d).
#   usage: benchmarks/vm/callgrind.sh [path/to/vm_dispatch_bench]
set -euo pipefail
bench=${1:-build/bench/benchmarks/vm_dispatch_bench}
reps=${KILN_CALLGRIND_REPS:-20}
source "$(dirname "$0")/../callgrind.bash"
kiln_callgrind_init "$bench"

instructions() {  # workload variant -> instructions inside kiln_measure
  kiln_callgrind_count '*kiln_measure*' "$bench" --callgrind "$1" "$2" "$reps"
}

printf '%-10s %12s %12s %8s\n' workload "vm ins/unit" "hand ins/unit" "vm/hand"
for w in a b c d; do
  units=1000
  [[ $w == d ]] && units=1
  vm=$(instructions $w vm)
  hand=$(instructions $w hand)
  awk -v w=$w -v u=$units -v r=$reps -v vm="$vm" -v hand="$hand" 'BEGIN {
    n = u * r; printf "%-10s %12.1f %12.1f %8.2f\n", w, vm/n, hand/n, vm/hand }'
done
