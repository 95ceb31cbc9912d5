"""Shared helpers for the pyroscope package tests.

Most tests run a short Python program in a fresh interpreter (run_python),
because the profiler is process-wide and some tests fork, crash-test or
time shutdowns; the result is read back from the profiles it wrote.
"""

import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pprof_reader  # noqa: E402


# Child processes sample at the rate they configure: with the default CPU
# budget (1 % of a core) a loaded machine, deep stacks or 250-1000 Hz
# would space the ticks out, and these tests count samples. The budget has
# its own tests (test_cpu_accounting.py), which set it explicitly.
NO_BUDGET = {"PYROSCOPE_SAMPLER_CPU_BUDGET": "0"}


def run_python(code, *, env=None, timeout=120, cwd=None, args=()):
    """Run `code` (dedented) with this interpreter; returns CompletedProcess
    with text stdout/stderr. PYROSCOPE_* variables of the test runner are
    not inherited unless given in env; the CPU budget is off (NO_BUDGET)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PYROSCOPE_")}
    full_env.update(NO_BUDGET)
    full_env["PYTHONPATH"] = HERE + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                          env=full_env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def check_run(code, **kw):
    """run_python that fails the test (showing output) on a non-zero exit."""
    r = run_python(code, **kw)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


@pytest.fixture
def profile_dir(tmp_path):
    d = tmp_path / "profiles"
    return str(d)


@pytest.fixture(autouse=True)
def _no_pyroscope_env(monkeypatch):
    """In-process tests see no PYROSCOPE_* variables of the runner."""
    for k in list(os.environ):
        if k.startswith("PYROSCOPE_"):
            monkeypatch.delenv(k)
