# SPDX-License-Identifier: MIT
# setup.py - builds the shmtrace Python package: the C extension
# shmtrace._shmtrace (shmtrace/*.c, which see include/ only) with libshmtrace's
# sources (the ring and lib layers, libshm/ring/ and libshm/lib/, each with
# the include paths of its layer) compiled into it (static:
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
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
# the extension's own sources (shmtrace/*.c) see the public header only,
# as any program does; libshmtrace's sources keep the include paths of the
# lib layer (Makefile, INC_lib) and are compiled apart with them
EXT_INCLUDE = [os.path.join(TOP, "include")]
LIB_INCLUDE = [os.path.join(TOP, d) for d in ("include", "util", "libshm/ring", "libshm/lib")]
# relative paths: setuptools wants sources below setup.py's directory or
# relative to it, and keeps object files inside its build directory
lib_src = sorted(os.path.relpath(p, HERE) for d in ("libshm/ring", "libshm/lib")
                 for p in glob.glob(os.path.join(TOP, d, "*.c")))
LIB_DEPENDS = [os.path.relpath(p, HERE) for d in LIB_INCLUDE for p in glob.glob(os.path.join(d, "*.h"))]
LIB_DEPENDS.append("setup.py")
if not lib_src:
    raise SystemExit("setup.py: no libshm/ring/*.c next to python/: build from the shmtrace source tree")

# the library's thread state in TLS the module takes when it is loaded,
# not the process's static TLS (libshm/lib/core.h, SHMT_TLS)
MACROS = [("_GNU_SOURCE", None), ("SHMTRACE_VERSION", '"0.1.0"'), ("SHMT_TLS_DYNAMIC", None)]
# warnings are errors in the tree's own builds (`make python` sets
# SHMTRACE_WERROR=1), not in a pip install with another Python's flags
CFLAGS = ["-std=gnu11", "-pthread", "-fvisibility=hidden",
          "-Wall", "-Wextra", "-Wno-missing-field-initializers",
          "-Wno-cast-function-type"]
if os.environ.get("SHMTRACE_WERROR") == "1":
    CFLAGS.append("-Werror")


class BuildExt(build_ext):
    """Compiles libshmtrace's sources with their own include paths into
    objects linked into the extension (every one of them, as before)."""

    def build_extension(self, ext):
        # the objects of ../libshm/ go beside build_temp: it must exist
        os.makedirs(self.build_temp, exist_ok=True)
        # compiled again when this file (its macros, its flags) or a header
        # changed, not only when a source did
        objs = self.compiler.compile(lib_src, output_dir=self.build_temp, macros=MACROS,
                                     include_dirs=[os.path.relpath(d, HERE) for d in LIB_INCLUDE],
                                     extra_postargs=CFLAGS, depends=LIB_DEPENDS)
        ext.extra_objects = list(objs)
        super().build_extension(ext)


os.chdir(HERE)
setup(
    name="shmtrace",
    version="0.1.0",
    description="Python producer for shmtrace, the shared-memory cross-process tracer",
    license="MIT",
    python_requires=">=3.10",  # Py_NewRef, PyModule_AddObjectRef
    packages=["shmtrace"],
    package_data={"shmtrace": ["py.typed", "*.pyi"]},
    cmdclass={"build_ext": BuildExt},
    ext_modules=[
        Extension(
            "shmtrace._shmtrace",
            sources=sorted(glob.glob("shmtrace/*.c")),
            depends=lib_src,
            include_dirs=[os.path.relpath(d, HERE) for d in EXT_INCLUDE],
            define_macros=MACROS,
            extra_compile_args=CFLAGS,
            extra_link_args=["-pthread"],
        )
    ],
)
