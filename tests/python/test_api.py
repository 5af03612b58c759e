# SPDX-License-Identifier: Apache-2.0
"""The public API as an editor and a newcomer see it: the type stubs match the compiled module,
each module's __all__ is what it exports, and every public class, function, method and property
has a docstring that says more than its signature."""
import inspect
import os
import re
import subprocess
import sys

import kiln

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES = [kiln, kiln.ir, kiln.transform, kiln.instrument, kiln.runtime, kiln.dpl] + ([kiln.onnx] if kiln.has_onnx else [])


def test_stubs_match_the_module():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "stubgen.py"), "--check"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(kiln.__file__))))
    assert r.returncode == 0, r.stdout.decode()


def described(obj, name):
    """The docstring without pybind11's signature lines."""
    doc = (getattr(obj, "__doc__", None) or "").strip()
    sig = re.compile(r"^(\d+\. )?" + re.escape(name) + r"\(.*\)( -> .*)?$")
    return "\n".join(l for l in doc.split("\n") if l.strip() and not sig.match(l.strip()) and l.strip() != "Overloaded function.")


def undocumented():
    missing = []
    for mod in MODULES:
        if not (mod.__doc__ or "").strip():
            missing.append(mod.__name__)
        for name in mod.__all__:
            value = getattr(mod, name)
            path = mod.__name__ + "." + name
            if inspect.ismodule(value):
                continue
            if inspect.isclass(value):
                if not (value.__doc__ or "").strip():
                    missing.append(path)
                if issubclass(value, BaseException):
                    continue
                for attr, member in vars(value).items():
                    if attr.startswith("_"):
                        continue
                    if isinstance(member, property):
                        doc = (member.__doc__ or "").strip()
                        if doc.startswith("("):  # pybind11: "(self: X) -> T" then the text
                            doc = "\n".join(doc.split("\n")[1:]).strip()
                        if not doc:
                            missing.append(path + "." + attr)
                    elif callable(member) or isinstance(member, (staticmethod, classmethod)):
                        f = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
                        if not described(f, attr):
                            missing.append(path + "." + attr)
            elif callable(value) and not described(value, name):
                missing.append(path)
    return missing


def test_every_public_name_has_a_docstring():
    assert undocumented() == []


def test_all_lists_what_each_module_exports():
    for mod in MODULES:
        for name in mod.__all__:
            assert hasattr(mod, name), (mod.__name__, name)
        public = {n for n in vars(mod) if not n.startswith("_") and not inspect.ismodule(getattr(mod, n))}
        assert public <= set(mod.__all__), (mod.__name__, sorted(public - set(mod.__all__)))
