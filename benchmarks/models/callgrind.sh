#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The VM's own cost per generated token: a decoder step (kiln_decoder_bench --callgrind) run on the
# VM and as the same kernel calls replayed from a loop, under callgrind; the difference is what the
# VM spends outside the kernels (dispatch, argument conversion, shape computations, tensor views on
# its arena), per step and per kernel call.
#   usage: benchmarks/models/callgrind.sh [path/to/kiln_decoder_bench] [MODEL.onnx] [CASE...]
# The model defaults to scripts/gpt2.py's test size (exported into a temporary directory when not
# given); the cases to decode:32 decode:255 prefill:16. The kernels run at x86-64-v3 (KILN_ISA):
# Valgrind 3.19 cannot decode AVX-512. Fails, with valgrind's own message, when a measurement fails.
set -euo pipefail
bench=${1:-build/bench-default/benchmarks/kiln_decoder_bench}
model=${2:-}
shift $(( $# < 2 ? $# : 2 ))
cases=("$@")
(( ${#cases[@]} )) || cases=(decode:32 decode:255 prefill:16)
reps=${KILN_CALLGRIND_REPS:-5}
source "$(dirname "$0")/../callgrind.bash"
kiln_callgrind_init "$bench"
if [[ -z $model ]]; then
  model=$kiln_callgrind_tmp/gpt2_test.onnx
  /usr/bin/python3 "$(dirname "$0")/../../scripts/gpt2.py" "$model" --size test >/dev/null
fi
export KILN_ISA=x86-64-v3

calls() {  # case -> kernel calls per VM call
  "$bench" "$model" --callgrind "$1" replay 1 2>&1 >/dev/null | awk '/kernel calls per call/ { print $2 }'
}
printf '%-12s %8s %16s %16s %14s %16s\n' case calls "VM ins/step" "replayed ins/step" "VM extra/step" "VM extra/call"
for c in "${cases[@]}"; do
  k=$(calls "$c")
  [[ "$k" =~ ^[0-9]+$ ]] || { echo "callgrind.sh: could not count the kernel calls of $c" >&2; exit 1; }
  vm=$(kiln_callgrind_count kiln_measure "$bench" "$model" --callgrind "$c" vm "$reps")
  replay=$(kiln_callgrind_count kiln_measure "$bench" "$model" --callgrind "$c" replay "$reps")
  awk -v c="$c" -v k="$k" -v r="$reps" -v vm="$vm" -v rp="$replay" 'BEGIN {
    printf "%-12s %8d %16.0f %16.0f %14.0f %16.1f\n", c, k, vm / r, rp / r, (vm - rp) / r, (vm - rp) / r / k }'
done
