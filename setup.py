"""Builds the `pyroscope` package: the pure-Python API in
bindings/python/pyroscope and its native half, pyroscope._native, compiled
from the shared C core plus the CPython binding sources."""
import glob
import os
import sys

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
os.chdir(HERE)  # source paths below are relative, as setuptools wants

if sys.version_info < (3, 11):
    sys.exit("pyroscope-native supports CPython 3.11, 3.12 and 3.13; this is %d.%d"
             % sys.version_info[:2])

CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror", "-Wshadow",
          "-Wvla", "-fvisibility=hidden"]

# The shared core and the report library, built first as one static
# library with their private include paths. The binding below sees only
# core/include: it cannot reach a core-private header.
core = ("pyroscope_core", {
    "sources": sorted(glob.glob("core/src/*/*.c") + glob.glob("core/report/*.c")
                      + glob.glob("core/gen/**/*.c", recursive=True)),
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

setup(
    name="pyroscope-native",
    version="0.1.0",
    description="Continuous profiler for CPython with a native sampler, "
                "the pyroscope-io API and an OpenTelemetry span processor",
    python_requires=">=3.11",
    package_dir={"": "bindings/python"},
    packages=["pyroscope"],
    libraries=[core],
    ext_modules=[native],
    extras_require={"otel": ["opentelemetry-sdk>=1.20"]},
    entry_points={"console_scripts": ["pyroscope-native=pyroscope.cli:main"]},
)
