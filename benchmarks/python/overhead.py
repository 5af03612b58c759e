#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What Python costs on top of kiln's C++ core, measured in one run (issue 18's Speed section):

1. a pass written in Python against a C++ pass, per invocation inside a pipeline: a Sequential of
   N identity passes written in Python against N runs of a registered C++ pass on the same
   one-binding module, each less the cost of an empty Sequential;
2. vm["main"](x) from Python against the same call made from C++ (time_evaluator runs the call
   loop in C++), on a function whose work is negligible (a 1-element add), so the difference is
   the boundary: converting arguments (numpy arrays wrapped without copies), releasing the GIL,
   and wrapping the result.

Prints the figures and the CPU model. Exits non-zero if a measurement fails.

    PYTHONPATH=build/python /usr/bin/python3 benchmarks/python/overhead.py [--repeat 15]
"""
import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

import kiln

T = kiln.transform

TINY = '''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1,), "float32"), y: R.Tensor((1,), "float32")) -> R.Tensor((1,), "float32"):
        with R.dataflow():
            z: R.Tensor((1,), "float32") = R.add(x, y)
            R.output(z)
        return z
'''


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    return "unknown CPU"


def median_time(fn, inner, repeat):
    """Median over `repeat` runs of the time per call of fn() called `inner` times."""
    fn()  # warm up
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def pass_overhead(repeat):
    mod = kiln.ir.IRModule.from_text(TINY)
    n = 200

    # n distinct Python identity passes in one pipeline (a pipeline lists each pass once).
    python_seq = T.Sequential([T.module_pass(lambda m, ctx: m, opt_level=0, name="py%d" % i) for i in range(n)])
    # One C++ pass run by itself: its whole cost (the Python call into it included).
    cpp_one = T.get_pass("dead_code_elimination")
    py_one = T.module_pass(lambda m, ctx: m, opt_level=0, name="py_identity")
    empty = T.Sequential([])

    t_empty = median_time(lambda: empty(mod), 200, repeat)
    t_python = median_time(lambda: python_seq(mod), 5, repeat)
    per_python = (t_python - t_empty) / n
    t_cpp = median_time(lambda: cpp_one(mod), 2000, repeat)
    t_py_one = median_time(lambda: py_one(mod), 2000, repeat)
    # kiln's four simplification passes (each walks the module) in one Sequential.
    cpp_names = ["canonicalize_bindings", "fold_constant", "eliminate_common_subexpr", "dead_code_elimination"]
    cpp_seq = T.Sequential([T.get_pass(n) for n in cpp_names])
    per_cpp = (median_time(lambda: cpp_seq(mod), 500, repeat) - t_empty) / len(cpp_names)
    return per_python, t_cpp, t_py_one, t_empty, per_cpp


def call_overhead(repeat):
    ex = kiln.compile(kiln.ir.IRModule.from_text(TINY))
    vm = kiln.runtime.VirtualMachine(ex)
    x, y = np.ones(1, np.float32), np.ones(1, np.float32)
    f = vm["main"]
    out = f(x, y)
    if out.shape != (1,) or float(out[0]) != 2.0:
        raise SystemExit("overhead.py: the measured function computed %r, not [2.0]" % (out,))
    t_python = median_time(lambda: f(x, y), 20000, repeat)
    r = vm.time_evaluator("main", number=20000, repeat=repeat)(x, y)
    return t_python, r.median


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    per_python, t_cpp, t_py_one, t_empty, per_cpp = pass_overhead(args.repeat)
    t_py_call, t_cpp_call = call_overhead(args.repeat)
    for name, v in [("python pass", per_python), ("C++ pass", t_cpp), ("python pass alone", t_py_one), ("C++ passes", per_cpp),
                    ("python call", t_py_call), ("C++ call", t_cpp_call)]:
        if not v > 0:
            raise SystemExit("overhead.py: the %s measurement failed (%r)" % (name, v))
    print("CPU: %s; kiln %s; Python %s" % (cpu_model(), kiln.__version__, sys.version.split()[0]))
    print("passes on a one-binding module (medians of %d):" % args.repeat)
    print("  C++ dead_code_elimination, called from Python   %8.2f us" % (t_cpp * 1e6))
    print("  Python identity pass, called from Python        %8.2f us" % (t_py_one * 1e6))
    print("  Python identity pass inside a Sequential        %8.2f us per pass" % (per_python * 1e6))
    print("  kiln's C++ simplification passes in a Sequential %7.2f us per pass" % (per_cpp * 1e6))
    print("  an empty Sequential, called from Python         %8.2f us" % (t_empty * 1e6))
    print("vm['main'](x, y), a 1-element add:")
    print("  from Python                   %8.3f us" % (t_py_call * 1e6))
    print("  from C++ (time_evaluator)     %8.3f us" % (t_cpp_call * 1e6))
    print("  Python's share                %8.3f us" % ((t_py_call - t_cpp_call) * 1e6))


if __name__ == "__main__":
    main()
