"""The CPython versions we support agree everywhere they are named, and an
interpreter older than that gets a clear message, never a crash."""

import os
import re
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pythons import older_python  # noqa: E402

import pyroscope

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
SUPPORTED = ["3.10", "3.11", "3.12", "3.13", "3.14", "3.15"]


def _read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def test_running_version_is_supported_and_walks(tmp_path):
    assert f"{sys.version_info[0]}.{sys.version_info[1]}" in SUPPORTED
    pyroscope.configure(application_name="versions", output_dir=str(tmp_path),
                        sample_rate=200, oncpu=False, gil_only=False)
    try:
        deadline = time.monotonic() + 60  # a bound for a loaded machine, not a timing check
        while pyroscope.stats()["stacks_walked"] < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        st = pyroscope.stats()
    finally:
        pyroscope.shutdown()
    assert st["stacks_walked"] >= 20, st
    assert st["walk_errors"] <= st["stacks_walked"] // 10, st


def test_setup_names_the_supported_versions():
    setup = _read("setup.py")
    assert 'python_requires=">=3.10"' in setup
    classifiers = re.findall(r'"Programming Language :: Python :: (3\.\d+)"', setup)
    assert classifiers == SUPPORTED
    assert "supports CPython 3.10, 3.11, 3.12, 3.13, 3.14 and 3.15" in setup


def test_walker_message_names_the_supported_versions():
    layout = _read("bindings", "python", "src", "cpython_layout.h")
    assert '#define PNW_VERSIONS "' + ", ".join(SUPPORTED) + '"' in layout
    assert '#define PNW_NEWEST_TESTED "' + SUPPORTED[-1] + '"' in layout


def test_makefile_tests_every_supported_version():
    # pyenv's on the host, Debian unstable's in its chroot (mk/python-sid.mk).
    m = re.search(r"^PY_VERSIONS := ([\d. ]+)$", _read("Makefile"), re.M)
    sid = re.search(r"^PY_SID_VERSIONS := ([\d. ]+)$", _read("mk", "python-sid.mk"), re.M)
    assert m and sid and m.group(1).split() + sid.group(1).split() == SUPPORTED
    assert "$(PY_SID_LANES)" in _read("Makefile")




def test_setup_refuses_older_python():
    old = older_python()
    if old is None:
        pytest.skip("no CPython older than 3.10 on this machine")
    r = subprocess.run([old, os.path.join(ROOT, "setup.py"), "--name"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0
    assert "3.10, 3.11, 3.12, 3.13, 3.14 and 3.15" in r.stderr
