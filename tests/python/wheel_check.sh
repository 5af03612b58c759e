#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Run by CTest: builds the wheel the Python ecosystem's way (pyproject.toml, offline, reusing this
# build directory's extension module), installs it into a new virtual environment, and runs a
# model from there, in another folder and without PYTHONPATH, including a library exported with
# the headers the wheel carries.
#   wheel_check.sh SOURCE_DIR BUILD_DIR WORK_DIR PYTHON
set -eu
src=$1 build=$2 work=$3 py=$4
rm -rf "$work"
mkdir -p "$work"
cd "$src"
if ! KILN_CMAKE_BUILD_DIR="$build" "$py" -m pip wheel --no-build-isolation --no-deps --no-index -w "$work/dist" "$src" > "$work/pip-wheel.log" 2>&1; then
  cat "$work/pip-wheel.log"
  echo "wheel_check: pip wheel failed" >&2
  exit 1
fi
wheel=$(ls "$work"/dist/kiln-*.whl)
"$py" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/python" -m pip install --no-deps --no-index "$wheel" > "$work/pip-install.log" 2>&1 || { cat "$work/pip-install.log"; exit 1; }
site=$("$work/venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['platlib'])")
for f in kiln/__init__.py kiln/py.typed kiln/_kiln/__init__.pyi kiln/_kiln/ir.pyi kiln/include/kiln/vm/compiled.hpp; do
  [ -f "$site/$f" ] || { echo "wheel_check: the wheel did not install $f" >&2; exit 1; }
done
cd /
env -u PYTHONPATH "$work/venv/bin/python" "$src/tests/python/installed_check.py" "$site/kiln" --export "$work/model.so"
