# SPDX-License-Identifier: Apache-2.0
"""The command-line tools on careless and hostile input: writes that fail leave the old file and no
other behind, files that are not models are named as such, sizes too large for memory are named,
ONNX external data is read from the model's folder and nowhere else, and names from a file reach
the terminal escaped. Run by CTest with the tools' paths in KILN_RUN, KILN_OPT and KILN_COMPILE."""
import os
import re
import resource
import subprocess
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent
SMALL = TOOLS / "small.kir"
RUN, OPT, COMPILE = (os.environ.get(k, "") for k in ("KILN_RUN", "KILN_OPT", "KILN_COMPILE"))
pytestmark = pytest.mark.skipif(not (RUN and OPT and COMPILE), reason="KILN_RUN, KILN_OPT and KILN_COMPILE name the tools")


def tool(*args, **kw):
    kw.setdefault("timeout", 120)
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([str(a) for a in args], **kw)


def failed(r, message):
    """The tool failed with exit status 1, and its message says `message`."""
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, (r.returncode, err)
    assert message in err, err
    return err


def leftovers(folder):
    return sorted(p.name for p in Path(folder).iterdir() if ".kiln-" in p.name)


# ---- writes ---------------------------------------------------------------------------------------

@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_a_full_disk_is_an_error_not_a_success():
    failed(tool(RUN, SMALL, "-o", "/dev/full"), "kiln-run: cannot write '/dev/full': No space left on device")
    failed(tool(OPT, SMALL, "-p", "kiln.simplify", "-o", "/dev/full"), "kiln-opt: cannot write '/dev/full': No space left on device")
    with open("/dev/full", "wb") as full:
        r = tool(OPT, SMALL, "-p", "kiln.simplify", stdout=full, stderr=subprocess.PIPE)
    failed(r, "kiln-opt: cannot write to standard output")


def test_a_write_cut_short_keeps_the_old_file(tmp_path):
    out = tmp_path / "small.kx"
    assert tool(COMPILE, SMALL, "-o", out).returncode == 0
    good = out.read_bytes()
    header = tmp_path / "small.hpp"
    # A file-size limit below the header's size: the write fails part-way.
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    r = tool(COMPILE, SMALL, "--emit-cpp", header, "-o", out, preexec_fn=limit)
    failed(r, "kiln-compile: cannot write '")
    assert out.read_bytes() == good  # the executable written before is intact: neither file was replaced
    assert not header.exists()
    assert leftovers(tmp_path) == []


def test_a_command_writing_two_files_writes_neither_when_one_cannot_be_written(tmp_path):
    out = tmp_path / "out.kx"
    r = tool(COMPILE, SMALL, "--emit-cpp", tmp_path / "no" / "such" / "dir" / "x.hpp", "-o", out)
    failed(r, "x.hpp': No such file or directory")
    assert not out.exists()
    assert leftovers(tmp_path) == []


def test_outputs_replace_files_and_follow_links(tmp_path):
    target = tmp_path / "real.kir"
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "link.kir"
    link.symlink_to(target)
    assert tool(OPT, SMALL, "-p", "kiln.simplify", "-o", link).returncode == 0
    assert link.is_symlink() and "R.nn.relu" in target.read_text()
    assert (target.stat().st_mode & 0o777) == 0o640  # the replaced file keeps its permissions
    assert leftovers(tmp_path) == []


# ---- reads ----------------------------------------------------------------------------------------

def test_devices_and_fifos_are_refused_at_once(tmp_path):
    failed(tool(RUN, "/dev/zero", timeout=20), "kiln-run: '/dev/zero' is not a regular file (a device, a FIFO or a socket)")
    fifo = tmp_path / "model.kir"
    os.mkfifo(fifo)
    failed(tool(RUN, fifo, timeout=20), "is not a regular file")
    failed(tool(RUN, SMALL, "--input", "x=/dev/zero", timeout=20), "'/dev/zero' is not a regular file")


def test_files_of_the_wrong_kind_are_named(tmp_path):
    npy = tmp_path / "x.npy"
    npy.write_bytes(b"\x93NUMPY\x01\x00" + b"\x00" * 64)
    failed(tool(RUN, npy), "is a .npy array, not a model (give arrays with --input NAME=FILE.npy)")
    elf = tmp_path / "model.kx"
    elf.write_bytes(Path("/bin/true").read_bytes()[:4096])
    failed(tool(RUN, elf), "is an ELF file; a shared library is loaded only from a file named *.so (loading a library runs its code")
    fake = tmp_path / "model.so"
    fake.write_text("not a library")
    failed(tool(RUN, fake), "is named as a shared library but is not one (no ELF header)")


def test_a_shape_too_large_for_memory_names_the_parameter_and_its_size(tmp_path):
    huge = tmp_path / "huge.kir"
    huge.write_text(SMALL.read_text().replace("(2, 4)", "(1099511627776, 4)").replace("(2, 3)", "(1099511627776, 3)"))
    err = failed(tool(RUN, huge), "kiln-run: parameter 'x' (")
    assert "is too large for random data: 4398046511104 elements, 35184372088832 bytes or more, against this machine" in err
    assert "bad_alloc" not in err


# ---- ONNX: external data and names from the file ---------------------------------------------------

def have_onnx():
    try:
        import onnx  # noqa: F401
    except ImportError:
        return False
    return os.environ.get("KILN_TOOLS_ONNX") == "1"


needs_onnx = pytest.mark.skipif(not have_onnx(), reason="the tools were built without the ONNX importer, or python3 lacks onnx")


def add_model(folder, location=None, op_type="Add"):
    """y = x + w, w = [1, 2, 3, 4] stored in `location` beside the model when it is given."""
    import numpy as np
    from onnx import TensorProto, helper

    w = helper.make_tensor("w", TensorProto.FLOAT, [4], [1, 2, 3, 4])
    if location is not None:
        data = np.array([1, 2, 3, 4], np.float32).tobytes()
        w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4], data_location=TensorProto.EXTERNAL)
        for k, v in (("location", location), ("offset", "0"), ("length", str(len(data)))):
            w.external_data.add(key=k, value=v)
        target = folder / location
        if not target.is_symlink() and not target.exists():
            target.write_bytes(data)
    graph = helper.make_graph([helper.make_node(op_type, ["x", "w"], ["y"], name="n0")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@needs_onnx
def test_the_tools_read_external_data_from_the_models_folder(tmp_path):
    model = add_model(tmp_path, "weights.bin")
    import numpy as np

    np.save(tmp_path / "x.npy", np.zeros(4, np.float32))
    r = tool(RUN, model, "--input", f"x={tmp_path / 'x.npy'}", "-o", tmp_path / "y.npy")
    assert r.returncode == 0, r.stderr.decode()
    assert np.load(tmp_path / "y.npy").tolist() == [1, 2, 3, 4]
    assert tool(COMPILE, model, "-o", tmp_path / "m.kx").returncode == 0


@needs_onnx
def test_external_data_through_a_link_out_of_the_folder_is_refused(tmp_path):
    (tmp_path / "passwd.bin").symlink_to("/etc/passwd")
    model = add_model(tmp_path, "passwd.bin")
    failed(tool(RUN, model), "external data location 'passwd.bin' is a link to '/etc/passwd', outside the model's folder")
    model = add_model(tmp_path, ".")
    failed(tool(RUN, model), "external data location '.' names a directory")


@needs_onnx
def test_control_characters_from_a_model_are_shown_escaped(tmp_path):
    model = add_model(tmp_path, op_type="\x1b[2JEvil\x07")
    r = tool(RUN, model)
    err = failed(r, "\\x1b[2JEvil\\x07")
    assert "\x1b" not in err and "\x07" not in err


# ---- conventions: exit statuses, --version, warm-up --------------------------------------------------

@pytest.mark.parametrize("exe", ["RUN", "OPT", "COMPILE"])
def test_every_argument_error_exits_1_and_help_and_version_exit_0(exe):
    path = {"RUN": RUN, "OPT": OPT, "COMPILE": COMPILE}[exe]
    name = Path(path).name
    assert tool(path, "--frobnicate").returncode == 1
    if exe != "OPT":  # kiln-opt reads standard input without a file
        r = tool(path)
        assert r.returncode == 1 and b"required" in r.stderr, r.stderr
    assert tool(path, "--help").returncode == 0
    r = tool(path, "--version")
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert out.startswith(f"{name} ") and "(kiln " in out and "; kernels x86-64" in out, out
    # The level the kernels run at, and how it was chosen (kernels/isa.hpp).
    assert re.search(r"kernels x86-64(-v[34])? \((SSE2|AVX2|AVX-512)\), (chosen at run time among|forced by KILN_ISA|compiled in)", out), out


def test_repeat_warms_up_first():
    r = tool(RUN, SMALL, "--repeat", "3", "--warmup", "2", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert b"3 runs (after 2 warm-up), 1 thread: median" in r.stdout, r.stdout
