# SPDX-License-Identifier: Apache-2.0
# Shared by the benchmarks' callgrind.sh scripts (sourced): instruction counts that fail loudly.
# Valgrind 3.19 cannot decode AVX-512: build what is measured without it (-DKILN_MARCH= empty, or
# x86-64-v3); on an AVX-512 build valgrind dies, and the script says so and exits 1.

# kiln_callgrind_init BENCH: checks the tools and the binary; makes $kiln_callgrind_tmp.
kiln_callgrind_init() {
  command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed" >&2; exit 1; }
  command -v callgrind_annotate >/dev/null || { echo "callgrind.sh: callgrind_annotate is not installed" >&2; exit 1; }
  [[ -x "$1" ]] || { echo "callgrind.sh: no benchmark binary at '$1'" >&2; exit 1; }
  kiln_callgrind_tmp=$(mktemp -d)
  trap 'rm -rf "$kiln_callgrind_tmp"' EXIT
}

# kiln_callgrind_count TOGGLE BENCH ARGS...: the instructions inside functions matching TOGGLE.
# Prints the count; on any failure prints valgrind's output and exits (the caller's $(...) fails,
# and `set -e` stops the script).
kiln_callgrind_count() {
  local toggle=$1 out=$kiln_callgrind_tmp/out log=$kiln_callgrind_tmp/log n
  shift
  if ! valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$toggle" "$@" >"$log" 2>&1; then
    echo "callgrind.sh: valgrind failed on: $*" >&2
    echo "  (an AVX-512 build? Valgrind 3.19 cannot decode AVX-512.) Its last lines:" >&2
    tail -n 20 "$log" >&2
    exit 1
  fi
  n=$(callgrind_annotate "$out" | awk '/PROGRAM TOTALS/ && !done { gsub(",", "", $1); print $1; done = 1 }')
  if ! [[ "$n" =~ ^[0-9]+$ ]] || (( n == 0 )); then
    echo "callgrind.sh: no instruction count inside '$toggle' for: $*" >&2
    exit 1
  fi
  echo "$n"
}
