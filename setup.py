"""Builds the `pyroscope` package: the pure-Python API in
bindings/python/pyroscope and its native half, pyroscope._native, compiled
from the shared C core plus the CPython binding sources."""
import glob
import os
import sys
import sysconfig
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_clib import build_clib
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
os.chdir(HERE)  # source paths below are relative, as setuptools wants

if sys.version_info < (3, 10):
    sys.exit("pyroscope-native supports CPython 3.10, 3.11, 3.12, 3.13, 3.14 and 3.15; "
             "this is %d.%d" % sys.version_info[:2])

CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow",
          "-Wvla", "-fvisibility=hidden"]

# The shared core and the report library (the sources core/sources.txt
# lists), built first as one static library with their private include
# paths. The binding below sees only core/include: it cannot reach a
# core-private header.
with open("core/sources.txt") as f:
    CORE_SOURCES = ["core/" + line.strip() for line in f if line.strip() and line[0] != "#"]
core = ("pyroscope_core", {
    "sources": CORE_SOURCES,
    "include_dirs": ["core/include", "core/src", "core/report", "core/gen"],
    "cflags": CFLAGS,
})

native = Extension(
    "pyroscope._native",
    sources=sorted(glob.glob("bindings/python/src/*.c")),
    include_dirs=["core/include", "bindings/python/src"],
    # No libcurl: it is dlopen'ed when an HTTP exporter is made
    # (core/src/export/curl_loader.c); its headers are still needed to build.
    libraries=["pyroscope_core", "protobuf-c", "z", "pthread", "m"],
    extra_compile_args=CFLAGS,
    depends=sorted(glob.glob("core/include/*.h") + glob.glob("core/src/*/*.[ch]")
                   + glob.glob("core/report/*.[ch]") + glob.glob("core/gen/**/*.[ch]", recursive=True)
                   + glob.glob("bindings/python/src/*.h")),
)

# Headers the build includes, with the Debian package that has each. A
# missing one otherwise shows up deep in a compiler error that names no
# package, so the build checks first and prints the line that fixes it.
HEADERS = [
    ("Python.h", "python3-dev"),
    ("curl/curl.h", "libcurl4-openssl-dev"),
    ("protobuf-c/protobuf-c.h", "libprotobuf-c-dev"),
    ("zlib.h", "zlib1g-dev"),
]


def missing_packages():
    """Debian packages whose header the C compiler cannot find."""
    from distutils.ccompiler import new_compiler
    from distutils.errors import CompileError
    from distutils.sysconfig import customize_compiler

    cc = new_compiler()
    customize_compiler(cc)
    include = [sysconfig.get_paths()["include"], sysconfig.get_paths()["platinclude"]]
    missing = []
    with tempfile.TemporaryDirectory() as tmp:
        for header, package in HEADERS:
            src = os.path.join(tmp, "check_%d.c" % len(missing))
            with open(src, "w") as f:
                f.write("#include <%s>\nint main(void) { return 0; }\n" % header)
            try:
                cc.compile([src], output_dir=tmp, include_dirs=include)
            except CompileError:
                missing.append(package)
    return missing


def check_build_headers():
    if getattr(check_build_headers, "done", False):
        return
    missing = missing_packages()
    if missing:
        sys.exit("pyroscope-native: C headers are missing; install them with:\n"
                 "    sudo apt-get install %s\n(then run pip install . again)"
                 % " ".join(missing))
    check_build_headers.done = True


class BuildClib(build_clib):
    def run(self):
        check_build_headers()
        super().run()


class BuildExt(build_ext):
    def run(self):
        check_build_headers()
        super().run()


# Build files go under build/setuptools, away from the CMake build's top
# level; a read-only checkout (pip install /read-only/path) builds in a
# temporary folder instead, egg-info included.
if os.access(HERE, os.W_OK):
    BUILD_OPTIONS = {"build": {"build_base": "build/setuptools"}}
else:
    _tmp = tempfile.mkdtemp(prefix="pyroscope-native-build-")
    BUILD_OPTIONS = {"build": {"build_base": os.path.join(_tmp, "build")},
                     "egg_info": {"egg_base": _tmp}}

# PN_PURE_WHEEL=1: the package without its extension, which
# packaging/wheels.py completes with a prebuilt module per CPython.
PURE = os.environ.get("PN_PURE_WHEEL") == "1"

setup(
    name="pyroscope-native",
    version="0.1.0",
    description="Continuous profiler for CPython with a native sampler, "
                "the pyroscope-io API and an OpenTelemetry span processor",
    python_requires=">=3.10",
    classifiers=[
        "Programming Language :: Python :: 3 :: Only",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Programming Language :: Python :: 3.14",
        "Programming Language :: Python :: 3.15",
        "Programming Language :: Python :: Implementation :: CPython",
        # 3.13t: built for the t ABI (cp313t) from the free-threaded
        # interpreter's own headers; the module runs without the GIL.
        "Programming Language :: Python :: Free Threading :: 2 - Beta",
        "Operating System :: POSIX :: Linux",
    ],
    package_dir={"": "bindings/python"},
    packages=["pyroscope"],
    libraries=[] if PURE else [core],
    ext_modules=[] if PURE else [native],
    cmdclass={"build_clib": BuildClib, "build_ext": BuildExt},
    options=BUILD_OPTIONS,
    extras_require={"otel": ["opentelemetry-sdk>=1.20"]},
    entry_points={"console_scripts": ["pyroscope-native=pyroscope.cli:main"]},
)
