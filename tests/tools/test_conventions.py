# SPDX-License-Identifier: Apache-2.0
"""The command-line tools behave as their peers (mlir-opt, onnxruntime_perf_test, TVM's Python):
TVM's pass names in pipelines, a described pass listing, large constants elided where a person
reads IR, a Graphviz view of a module that `dot` reads, a Chrome trace that loads as JSON, and a
pipeline in the wrong order refused before it runs. Run by CTest with the tools' paths in
KILN_RUN, KILN_OPT and KILN_COMPILE."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent
SMALL = TOOLS / "small.kir"
RUN, OPT, COMPILE = (os.environ.get(k, "") for k in ("KILN_RUN", "KILN_OPT", "KILN_COMPILE"))
pytestmark = pytest.mark.skipif(not (RUN and OPT and COMPILE), reason="KILN_RUN, KILN_OPT and KILN_COMPILE name the tools")

# A model with one constant of 4,096 elements.
WEIGHTS = """@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 64), "float32")) -> R.Tensor((4, 64), "float32"):
        with R.dataflow():
            a: R.Tensor((4, 64), "float32") = R.matmul(x, R.const([%s], "float32", shape=(64, 64)))
            b: R.Tensor((4, 64), "float32") = R.nn.relu(a)
            R.output(b)
        return b
"""


def tool(*args, **kw):
    kw.setdefault("timeout", 300)
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([str(a) for a in args], **kw)


def ok(r):
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    return r.stdout.decode()


@pytest.fixture
def weights(tmp_path):
    path = tmp_path / "weights.kir"
    values = ", ".join("%d.0" % (i % 7) for i in range(64 * 64))
    path.write_text(WEIGHTS % values)
    return path


def test_tvm_pass_names_in_pipeline_text():
    out = ok(tool(OPT, SMALL, "-p", "CanonicalizeBindings,FoldConstant,DeadCodeElimination,FuseOps,LegalizeOps"))
    assert "kernels.matmul_fused" in out
    assert ok(tool(OPT, SMALL, "-p", "kiln.simplify")) == ok(tool(OPT, SMALL, "-p", "CanonicalizeBindings,DeadCodeElimination"))


def test_list_passes_describes_each_pass():
    out = ok(tool(OPT, "--list-passes"))
    assert "  fold_constant (also FoldConstant): module pass, opt level 1\n      Evaluates operators" in out
    assert "  static_plan_block_memory (also StaticPlanBlockMemory): " in out
    assert "      needs: non_dataflow, explicit_outputs\n      establishes: memory_planned\n" in out
    assert "Pipelines:\n" in out and "  kiln.fuse (also FuseOps, FuseTIR): sequential, opt level 1" in out


def test_a_pipeline_in_the_wrong_order_fails_before_it_runs():
    r = tool(OPT, SMALL, "-p", "call_tir_rewrite", "--verify-each")
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert ("kiln-opt: kiln: pipeline 'sequential': pass 'call_tir_rewrite' needs property 'legalized', which no earlier pass "
            "of the pipeline establishes and the input module does not have (function 'main' still calls operator R.matmul") in err
    assert "run 'legalize_ops' before it" in err
    assert r.stdout == b""


def test_printing_for_reading_elides_large_constants(weights, tmp_path):
    # --print-after-all prints for reading: the 4,096-element weight is one line, not 4,096 numbers.
    r = tool(COMPILE, weights, "-o", tmp_path / "w.kx", "--print-after-all")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert 'R.const(meta[0], "float32", shape=(64, 64))' in err
    assert len(err) < 40000, len(err)
    full = tool(COMPILE, weights, "-o", tmp_path / "w.kx", "--print-after-all", "--print-full-constants").stderr.decode()
    assert "meta[" not in full and len(full) > 10 * len(err)
    # kiln-opt's output reads back (every constant), unless asked for the readable form.
    out = ok(tool(OPT, weights, "-p", "kiln.simplify"))
    assert "meta[" not in out
    again = tmp_path / "again.kir"
    again.write_text(out)
    assert ok(tool(OPT, again, "-p", "kiln.simplify")) == out
    elided = ok(tool(OPT, weights, "-p", "kiln.simplify", "--elide-constants"))
    assert 'R.const(meta[0], "float32", shape=(64, 64))' in elided
    (tmp_path / "elided.kir").write_text(elided)
    r = tool(OPT, tmp_path / "elided.kir", "-p", "kiln.simplify")
    assert r.returncode == 1 and b"constants elided: meta[0] stands for a float32 of shape (64, 64) constant" in r.stderr


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_emit_dot_is_a_graph_dot_reads(tmp_path):
    graph = tmp_path / "small.dot"
    out = ok(tool(OPT, SMALL, "-p", "kiln.simplify,FuseOps", "--emit-dot", graph))
    assert out.startswith("# kiln IR")  # the IR still goes to the output
    text = graph.read_text()
    assert text.startswith("digraph kiln {") and 'label="@main"' in text
    assert "subgraph cluster_" in text and 'label="fused: R.call_dps_packed kernels.matmul_fused"' in text
    assert '[shape=plain, fontsize=9, label="relu"]' in text
    rendered = tool("dot", "-Tsvg", graph)
    assert rendered.returncode == 0, rendered.stderr.decode()
    assert b"<svg" in rendered.stdout
    # To standard output alone, of the input as it is (no pipeline).
    alone = ok(tool(OPT, SMALL, "--emit-dot", "-"))
    assert alone.startswith("digraph kiln {") and "R.matmul" in alone
    assert tool("dot", "-Tsvg", input=alone.encode()).returncode == 0


def test_profile_json_is_a_chrome_trace(tmp_path):
    trace = tmp_path / "trace.json"
    r = tool(RUN, SMALL, "--profile-json", trace, "--repeat", "3", "--threads", "1")
    assert r.returncode == 0, r.stderr.decode()
    assert b"wrote a trace of 3 runs" in r.stderr
    data = json.loads(trace.read_text())
    events = data["traceEvents"]
    runs = [e for e in events if e.get("cat") == "run"]
    calls = [e for e in events if e.get("cat") in ("kernel", "vm builtin")]
    assert len(runs) == 3 and calls
    assert {e["ph"] for e in runs + calls} == {"X"}
    first = [e for e in calls if e["ts"] < runs[0]["ts"] + runs[0]["dur"]]
    assert [e["args"]["call"] for e in first] == list(range(len(first)))
    assert any(e["name"].startswith("kernels.") and e["cat"] == "kernel" and "2x4" in e["args"]["shapes"] for e in calls)
    assert any(e["name"].startswith("vm.builtin.") and e["cat"] == "vm builtin" for e in calls)
    for e in calls:
        assert e["dur"] >= 0 and e["pid"] == 1 and e["tid"] == 1
    # Nested in the runs: every call lies within one run.
    for e in calls:
        assert any(r["ts"] <= e["ts"] and e["ts"] + e["dur"] <= r["ts"] + r["dur"] + 1 for r in runs)
    assert data["otherData"]["threads"] == 1


def test_kiln_opt_reads_onnx_and_refuses_executables(tmp_path):
    kx = tmp_path / "small.kx"
    ok(tool(COMPILE, SMALL, "-o", kx))
    r = tool(OPT, kx, "-p", "kiln.simplify")
    assert r.returncode == 1
    assert b"is a compiled executable; kiln-opt reads IR text or an ONNX model (run it with kiln-run)" in r.stderr


def test_disable_pass_and_opt_bisect_limit():
    # TVM's disabled_pass, by either name: the fusion does not happen.
    fused = ok(tool(OPT, SMALL, "-p", "kiln.simplify,kiln.fuse,legalize_ops"))
    assert "kernels.matmul_fused" in fused
    for name in ("fuse_epilogue", "FuseOps"):
        out = ok(tool(OPT, SMALL, "-p", "kiln.simplify,kiln.fuse,legalize_ops", "--disable-pass", name))
        assert "kernels.matmul_fused" not in out and "kernels.matmul" in out
    r = tool(OPT, SMALL, "-p", "kiln.simplify", "--disable-pass", "fuse_epilog")
    assert r.returncode == 1 and b"--disable-pass 'fuse_epilog': no pass is registered as 'fuse_epilog' (did you mean 'fuse_epilogue'?)" in r.stderr
    # LLVM's -opt-bisect-limit: the first pass runs, the rest are skipped, each decision printed.
    r = tool(OPT, SMALL, "-p", "kiln.simplify", "--opt-bisect-limit", "1")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "BISECT: running pass (1) canonicalize_bindings" in err and "BISECT: NOT running pass (2)" in err
