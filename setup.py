"""The build step of `pip install .` (pyproject.toml has the metadata): builds the `_conveyor`
extension with the project's CMake, for the interpreter running pip, and puts it in the wheel.

CONVEYOR_BUILD_DIR: a CMake build directory to use; one already configured is only built (its
`_conveyor` target), so `CONVEYOR_BUILD_DIR=build pip install .` reuses the development build.
Unset: build/pip-cmake, configured here (Release, without tests and simulator).
CMAKE_BUILD_PARALLEL_LEVEL: the build's jobs (default 2).
"""

import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
# setuptools' own scratch space (build/lib..., egg-info) under build/, not in the source folders.
SCRATCH = os.path.join(ROOT, "build", "pip-setuptools")


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.path.abspath(os.environ.get("CONVEYOR_BUILD_DIR") or
                                    os.path.join(ROOT, "build", "pip-cmake"))
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
            args = ["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                    "-DCONVEYOR_BUILD_TESTS=OFF", "-DCONVEYOR_SIM=OFF", "-DCONVEYOR_BUILD_PYTHON=ON",
                    f"-DCONVEYOR_PYTHON={sys.executable}"]
            if shutil.which("ninja"):
                args += ["-G", "Ninja"]
            if shutil.which("ccache"):
                args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
            subprocess.check_call(args)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_conveyor", "-j", jobs])
        name = "_conveyor" + sysconfig.get_config_var("EXT_SUFFIX")
        built = os.path.join(build_dir, "python", "conveyor", name)
        if not os.path.exists(built):
            sys.exit(f"setup.py: {build_dir} built no {name} (the extension for {sys.executable}); "
                     "is it configured for another Python (CONVEYOR_PYTHON) or with "
                     "CONVEYOR_BUILD_PYTHON=OFF?")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built, dest)
        # The pool processes' numpy allocator, next to `_conveyor` (where the pool looks for it);
        # absent when the build found no numpy headers (the pool then copies its results).
        alloc = os.path.join(build_dir, "python", "conveyor", "conveyor_pool_alloc.so")
        if os.path.exists(alloc):
            shutil.copyfile(alloc, os.path.join(os.path.dirname(dest), "conveyor_pool_alloc.so"))


os.makedirs(SCRATCH, exist_ok=True)
setup(
    # Here rather than in pyproject.toml's [tool.setuptools], which Debian's setuptools 66 calls beta.
    package_dir={"": "python"},
    packages=["conveyor"],
    ext_modules=[Extension("conveyor._conveyor", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": SCRATCH}, "egg_info": {"egg_base": SCRATCH}},
)
