#!/usr/bin/env bash
# `pip install .` as a user runs it (ctest: python_pip_install): a venv made with
# --system-site-packages (numpy from the system), an offline install without build isolation,
# then `import conveyor` from the venv (not the build tree) and a read through an in-process
# dispatcher and worker on 127.0.0.1.
#   scripts/check_pip_install.sh PYTHON [BUILD_DIR]
# BUILD_DIR (a configured CMake build) is reused via CONVEYOR_BUILD_DIR: only its `_conveyor`
# target is built. Exit 77 (ctest: skipped) where PYTHON lacks venv/ensurepip or pip.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
python=${1:?usage: check_pip_install.sh PYTHON [BUILD_DIR]}
build=${2:-}

if ! "$python" -c "import venv, ensurepip" >/dev/null 2>&1; then
  echo "SKIPPED: $python has no venv/ensurepip (Debian: python3-venv); pip install . not checked"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/conveyor-pip.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$python" -m venv --system-site-packages "$work/venv"
if ! "$work/venv/bin/python" -m pip --version >/dev/null 2>&1; then
  echo "SKIPPED: the venv has no pip (Debian: python3-pip); pip install . not checked"
  exit 77
fi

echo "== pip install --no-build-isolation $root"
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
if [ -n "$build" ]; then export CONVEYOR_BUILD_DIR=$build; fi
"$work/venv/bin/python" -m pip install --no-build-isolation "$root"

echo "== import conveyor from the venv, read through an in-process cluster"
cd "$work" # not the source tree: `conveyor` must come from the venv
env -u PYTHONPATH "$work/venv/bin/python" - "$work/venv" "${build:-$root/build/pip-cmake}" <<'PY'
import os
import sys

import conveyor

venv = os.path.realpath(sys.argv[1])
where = os.path.realpath(conveyor.__file__)
assert where.startswith(venv + os.sep), f"conveyor imported from {where}, not from the venv {venv}"
# The pool processes' allocator is packaged next to `_conveyor` when the build made it.
built_alloc = os.path.join(sys.argv[2], "python", "conveyor", "conveyor_pool_alloc.so")
if os.path.exists(built_alloc):
    assert os.path.exists(os.path.join(os.path.dirname(where), "conveyor_pool_alloc.so")), \
        "conveyor_pool_alloc.so was not packaged next to _conveyor"
dispatcher = conveyor.DispatchServer()
worker = conveyor.WorkerServer(dispatcher_address=dispatcher.target)
ds = conveyor.Dataset.range(10).map("square")
got = sorted(int(x) for x in conveyor.distribute(ds, dispatcher.target, "distributed_epoch"))
assert got == [i * i for i in range(10)], got
batches = [b.tolist() for b in conveyor.distribute(conveyor.Dataset.range(4), dispatcher.target,
                                                   "distributed_epoch").batch(2)]
assert sorted(sum(batches, [])) == [0, 1, 2, 3], batches
worker.stop()
dispatcher.stop()
print(f"pip install: conveyor imported from {where}; read {got}")
PY

echo "== pip uninstall"
"$work/venv/bin/python" -m pip uninstall -y conveyor >/dev/null
echo "OK"
