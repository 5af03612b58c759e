#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Instruction counts for benchmarks/pass/analysis.cpp: an analysis cache hit and miss, and the
# fixed-point combinator's cost per iteration over the same loop written by hand. Each figure is
# the difference between runs of R and 11R repetitions divided by 10R, so that setting up (the
# context, the module) does not count.
#   usage: benchmarks/pass/callgrind_analysis.sh [path/to/pass_analysis_bench]
set -euo pipefail
bench=${1:-build/bench/benchmarks/pass_analysis_bench}
reps=${KILN_CALLGRIND_REPS:-100}
source "$(dirname "$0")/../callgrind.bash"
kiln_callgrind_init "$bench"

per_rep() {  # variant F -> instructions per repetition
  local lo hi
  lo=$(kiln_callgrind_count '*kiln_measure*' "$bench" --callgrind "$1" "$2" "$reps")
  hi=$(kiln_callgrind_count '*kiln_measure*' "$bench" --callgrind "$1" "$2" $((11 * reps)))
  awk -v lo="$lo" -v hi="$hi" -v r="$reps" 'BEGIN { printf "%.1f", (hi - lo) / (10 * r) }'
}

echo "analysis cache hit:  $(per_rep hit 1) instructions"
echo "analysis cache miss: $(per_rep miss 1) instructions (computing a trivial result and storing it)"
iterations=8
for f in 1 100; do
  a=$(per_rep loop_a $f)
  b=$(per_rep loop_b $f)
  awk -v f=$f -v a="$a" -v b="$b" -v n=$iterations 'BEGIN {
    printf "repeat_until_fixed, 10 passes + 1, F = %d: hand-written %.1f, combinator %.1f instructions per iteration; overhead %.1f per iteration (%.3fx)\n",
           f, a / n, b / n, (b - a) / n, b / a }'
done
