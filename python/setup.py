# SPDX-License-Identifier: MIT
# setup.py - builds the shmtrace Python package: the C extension
# shmtrace._shmtrace (shmtrace/*.c) with libshmtrace's sources (the ring and lib layers,
# libshm/ring/ and libshm/lib/) compiled into it (static:
# no shared library to install or find at run time; docs/DESIGN.md says why).
#   pip install ./python                  (offline: Debian's python3-setuptools
#                                          and python3-wheel build it; there is
#                                          no pyproject.toml on purpose, since
#                                          one makes pip fetch setuptools into
#                                          an isolated build environment)
#   python3 setup.py build_ext --inplace  (what `make python` runs)
import glob
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
# the include paths of the lib layer (Makefile, INC_lib)
INCLUDE = [os.path.join(TOP, d) for d in ("include", "util", "libshm/ring", "libshm/lib")]
# relative paths: setuptools wants sources below setup.py's directory or
# relative to it, and keeps object files inside its build directory
lib_src = sorted(os.path.relpath(p, HERE) for d in ("libshm/ring", "libshm/lib")
                 for p in glob.glob(os.path.join(TOP, d, "*.c")))
if not lib_src:
    raise SystemExit("setup.py: no libshm/ring/*.c next to python/: build from the shmtrace source tree")

os.chdir(HERE)
setup(
    name="shmtrace",
    version="0.1.0",
    description="Python producer for shmtrace, the shared-memory cross-process tracer",
    license="MIT",
    python_requires=">=3.9",
    packages=["shmtrace"],
    package_data={"shmtrace": ["py.typed", "*.pyi"]},
    ext_modules=[
        Extension(
            "shmtrace._shmtrace",
            sources=sorted(glob.glob("shmtrace/*.c")) + lib_src,
            include_dirs=[os.path.relpath(d, HERE) for d in INCLUDE],
            define_macros=[("_GNU_SOURCE", None), ("SHMTRACE_VERSION", '"0.1.0"')],
            extra_compile_args=["-std=gnu11", "-pthread", "-fvisibility=hidden",
                                "-Wall", "-Wextra", "-Werror", "-Wno-missing-field-initializers",
                                "-Wno-cast-function-type"],
            extra_link_args=["-pthread"],
        )
    ],
)
