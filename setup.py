# SPDX-License-Identifier: Apache-2.0
"""The build of the Python package's extension module, kiln._kiln, by kiln's own CMake build
(pyproject.toml has the package's metadata). Besides the module, the wheel carries kiln's
headers (kiln/include), which Executable.export_library gives the C++ compiler it runs."""
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    text = open(os.path.join(ROOT, "include", "kiln", "version.hpp"), encoding="utf-8").read()
    return ".".join(re.search(r"#define KILN_VERSION_%s (\d+)" % part, text).group(1) for part in ("MAJOR", "MINOR", "PATCH"))


class CMakeBuild(build_ext):
    """Configures (unless already configured) and builds the CMake target kiln_python, then copies
    the module and kiln's headers into the package."""

    def build_extension(self, ext):
        build_dir = os.environ.get("KILN_CMAKE_BUILD_DIR") or os.path.join(os.path.abspath(self.build_temp), "cmake")
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            self.run_command_line(["cmake", "-S", ROOT, "-B", build_dir, *generator, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DKILN_BUILD_PYTHON=ON", "-DKILN_BUILD_TESTS=OFF", "-DKILN_BUILD_EXAMPLES=OFF",
                                   "-DKILN_BUILD_TOOLS=OFF", "-DPython_EXECUTABLE=" + sys.executable,
                                   *os.environ.get("KILN_CMAKE_ARGS", "").split()])
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        self.run_command_line(["cmake", "--build", build_dir, "--target", "kiln_python", "--parallel", jobs])
        built = os.path.join(build_dir, "python", "kiln")
        modules = [f for f in os.listdir(built) if f.startswith("_kiln.") and f.endswith(".so")]
        if len(modules) != 1:
            raise RuntimeError("kiln: expected one extension module in %s, found %s" % (built, modules or "none"))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(built, modules[0]), target)
        headers = os.path.join(os.path.dirname(target), "include")
        shutil.rmtree(headers, ignore_errors=True)
        shutil.copytree(os.path.join(ROOT, "include"), headers)

    def run_command_line(self, argv):
        print("kiln: " + " ".join(argv), flush=True)
        subprocess.check_call(argv)


os.makedirs(os.path.join("build", "python-wheel"), exist_ok=True)
setup(
    version=version(),
    ext_modules=[Extension("kiln._kiln", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # Build products under build/python-wheel (not setuptools' build/ and python/kiln.egg-info).
    options={"build": {"build_base": os.path.join("build", "python-wheel")},
             "egg_info": {"egg_base": os.path.join("build", "python-wheel")}},
)
