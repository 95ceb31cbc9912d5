"""Interpreters we do not support get a clear message, never a crash: the
extension built for CPython 3.10 refuses to import, naming the version,
and setup.py refuses to build for it."""

import glob
import os
import shutil
import subprocess
import sysconfig

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def _python310():
    for root in (os.environ.get("PYENV_ROOT"), os.path.expanduser("~/.pyenv")):
        if root:
            found = sorted(glob.glob(os.path.join(root, "versions", "3.10.*", "bin", "python")))
            if found:
                return found[-1]
    return shutil.which("python3.10")


PY310 = _python310()
needs_310 = pytest.mark.skipif(PY310 is None, reason="no CPython 3.10 on this machine")


@needs_310
def test_import_on_310_names_the_version(tmp_path):
    info = subprocess.run(
        [PY310, "-c", "import sysconfig; print(sysconfig.get_paths()['include']); "
         "print(sysconfig.get_config_var('EXT_SUFFIX'))"],
        capture_output=True, text=True, check=True).stdout.split("\n")
    include, suffix = info[0], info[1]
    pkg = tmp_path / "pyroscope"
    shutil.copytree(os.path.join(ROOT, "bindings", "python", "pyroscope"), pkg)
    sources = sorted(glob.glob(os.path.join(ROOT, "core", "src", "*", "*.c"))
                     + glob.glob(os.path.join(ROOT, "core", "report", "*.c"))
                     + glob.glob(os.path.join(ROOT, "core", "gen", "**", "*.c"), recursive=True)
                     + glob.glob(os.path.join(ROOT, "bindings", "python", "src", "*.c")))
    cc = sysconfig.get_config_var("CC").split()[0] if sysconfig.get_config_var("CC") else "gcc"
    subprocess.run(
        [cc, "-std=c11", "-D_GNU_SOURCE", "-O0", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror",
         "-I" + include, "-I" + os.path.join(ROOT, "core", "include"),
         "-I" + os.path.join(ROOT, "core", "src"), "-I" + os.path.join(ROOT, "core", "report"),
         "-I" + os.path.join(ROOT, "core", "gen"),
         "-I" + os.path.join(ROOT, "bindings", "python", "src"), *sources,
         "-lprotobuf-c", "-lz", "-lpthread", "-lm",
         "-o", str(pkg / ("_native" + suffix))], check=True)
    r = subprocess.run([PY310, "-c", "import pyroscope"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert "ImportError" in r.stderr
    assert "3.10" in r.stderr and "not supported" in r.stderr, r.stderr


@needs_310
def test_setup_refuses_310():
    r = subprocess.run([PY310, os.path.join(ROOT, "setup.py"), "--name"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0
    assert "3.11, 3.12 and 3.13" in r.stderr and "3.10" in r.stderr
