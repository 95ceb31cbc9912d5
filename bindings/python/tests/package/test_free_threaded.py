"""The free-threaded build (CPython 3.13t, no GIL) and what holds on both
flavours: importing the package leaves the GIL as it was, gil_only has no
meaning without a GIL (treated as False, said once), threads that really run
in parallel are each sampled with their own CPU, and the API may be called
from many threads at once.

On a GIL build these tests check the GIL build's side of the same facts; the
free-threaded lane of `make test` (mk/python-ft.mk) runs them without a GIL.
"""

import json
import os
import re
import sys

import pytest

from conftest import check_run
import pprof_reader

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pythons import FREE_THREADED  # noqa: E402

import pyroscope

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def test_native_module_knows_its_flavour():
    assert pyroscope._native.free_threaded == FREE_THREADED


def test_import_leaves_the_gil_as_it_was():
    # An extension that does not declare Py_MOD_GIL_NOT_USED turns the GIL
    # back on for the whole process when imported (with a RuntimeWarning).
    r = check_run("""
        import sys, warnings
        warnings.simplefilter("error")
        import pyroscope, pyroscope.otel
        print(getattr(sys, "_is_gil_enabled", lambda: True)())
    """)
    assert r.stdout.strip() == str(not FREE_THREADED), r.stderr


GIL_ONLY_LOG = """
import json, logging, os, time
import pyroscope

logging.basicConfig(level=logging.WARNING, format="LOG %(message)s")
kw = {} if os.environ["GIL"] == "default" else {"gil_only": os.environ["GIL"] == "1"}
for _ in range(2):  # said once per process, not at every configure
    pyroscope.configure(application_name="gil", output_dir=os.environ["OUT"],
                        upload_interval=0.5, **kw)
pyroscope.shutdown()
"""


@pytest.mark.parametrize("gil", ["1", "0", "default"])
def test_gil_only_without_a_gil_is_treated_as_false_and_said_once(tmp_path, gil):
    r = check_run(GIL_ONLY_LOG, env={"OUT": str(tmp_path / "p"), "GIL": gil})
    said = re.findall(r"gil_only has no meaning on a free-threaded CPython.*", r.stderr)
    # Only an explicit gil_only=True on a free-threaded build is told (the
    # default there is False).
    assert len(said) == (1 if FREE_THREADED and gil == "1" else 0), r.stderr


# Four threads burn Python CPU at once: without a GIL they run in parallel. Each measures its own CPU (thread_time).
PARALLEL = """
import json, os, threading, time
import pyroscope

N = 4
ids, cpu = {}, {}
start = threading.Barrier(N + 1)


def make(i):
    def burn():
        ids[i] = threading.get_native_id()
        start.wait()
        c0 = time.thread_time()
        end = c0 + 0.5
        while time.thread_time() < end: pass
        cpu[i] = time.thread_time() - c0
    return burn


pyroscope.configure(application_name="parallel", output_dir=os.environ["OUT"],
                    sample_rate=200, upload_interval=0.5, report_thread_id=True,
                    gil_only=os.environ["GIL"] == "1")
threads = [threading.Thread(target=make(i)) for i in range(N)]
for t in threads:
    t.start()
start.wait()
for t in threads:
    t.join()
pyroscope.shutdown()
print(json.dumps({"ids": ids, "cpu": cpu, "stats": pyroscope.stats()}))
"""


def test_parallel_threads_each_carry_their_own_cpu(tmp_path):
    # Free-threaded: gil_only=True, to show it means every thread there; a
    # GIL build needs gil_only=False for per-thread CPU.
    r = check_run(PARALLEL, env={"OUT": str(tmp_path / "p"), "GIL": "1" if FREE_THREADED else "0"},
                  timeout=120)
    truth = json.loads(r.stdout.strip().splitlines()[-1])
    profiles = pprof_reader.load_dir(str(tmp_path / "p"))
    per_thread = {}
    for s in pprof_reader.samples(profiles):
        tid = s["labels"].get("thread_id")
        # 3.10's frames carry the plain name ("burn"), later ones the qualified one.
        if s["stack"] and s["stack"][0][0] in ("make.<locals>.burn", "burn"):
            per_thread[tid] = per_thread.get(tid, 0) + s["values"][0]
    for i, tid in truth["ids"].items():
        got = per_thread.get(str(tid), 0)
        want = truth["cpu"][i] * 1e9
        # Each thread's own CPU clock, charged to its own stack and thread.
        assert 0.7 * want <= got <= 1.3 * want, (i, got, want, per_thread)
    st = truth["stats"]
    assert st["walk_errors"] <= max(5, st["stacks_walked"] // 10), st


# Many threads call into the package at once while one reconfigures and
# shuts down over and over: without a GIL the native module's state is
# kept by its own lock (module_lock.h), labels by their entries' critical
# sections, and tag dicts are copied before use.
HAMMER = """
import os, threading, time
import pyroscope

OUT = os.environ["OUT"]
stop = threading.Event()
errors = []
shared = pyroscope.tag_wrapper({"shared": "yes"})
tags = {"k": "v"}


def guard(fn):
    def run():
        try:
            while not stop.is_set():
                fn()
        except Exception as exc:  # reported below: the test fails on any
            errors.append(repr(exc))
    return run


def labels():
    with shared:
        with pyroscope.tag_wrapper(tags):
            sum(range(200))


def mutate():
    tags["k%d" % (time.monotonic_ns() % 7)] = "v"
    tags.pop("k%d" % (time.monotonic_ns() % 7), None)


def thread_tags():
    pyroscope.add_thread_tag("t", "1")
    pyroscope.remove_thread_tag("t", "1")


def poll():
    pyroscope.stats()
    pyroscope.is_running()
    pyroscope.flush(0.01)


def cycle():
    pyroscope.configure(application_name="hammer", output_dir=OUT, sample_rate=250,
                        upload_interval=0.2, report_thread_name=True)
    time.sleep(0.05)
    pyroscope.shutdown()


threads = [threading.Thread(target=guard(f))
           for f in (labels, labels, mutate, thread_tags, poll, poll, cycle)]
for t in threads:
    t.start()
time.sleep(3)
stop.set()
for t in threads:
    t.join()
pyroscope.shutdown()
assert not errors, errors
print("ok", pyroscope.stats()["stacks_walked"])
"""


def test_api_from_many_threads_at_once(tmp_path):
    r = check_run(HAMMER, env={"OUT": str(tmp_path / "p")}, timeout=120)
    assert r.stdout.startswith("ok"), r.stdout + r.stderr


def test_free_threaded_lane_builds_the_tested_version():
    mk = open(os.path.join(ROOT, "mk", "python-ft.mk"), encoding="utf-8").read()
    assert re.search(r"^PYTHON_FT_VERSION := 3\.13\.\d+$", mk, re.M), mk
    assert re.search(r"^PYTHON_FT_SHA256 := [0-9a-f]{64}$", mk, re.M), mk
    assert re.search(r"^PY_FT_LANE := test-python-3\.13t$", mk, re.M), mk
    # The lane is one of `make test`'s: LANES holds every Python lane.
    make = open(os.path.join(ROOT, "Makefile"), encoding="utf-8").read()
    assert re.search(r"^ALL_PY_LANES = .*\$\(PY_FT_LANE\)", make, re.M), make
    assert re.search(r"^LANES = .*\$\(ALL_PY_LANES\)", make, re.M), make
    if FREE_THREADED:
        assert "%d.%d" % sys.version_info[:2] == "3.13"


def test_free_threaded_requirements_pin_what_the_others_do():
    def pins(name):
        path = os.path.join(ROOT, "bindings", "python", "tests", name)
        with open(path, encoding="utf-8") as f:
            return dict(line.strip().split("==") for line in f
                        if line.strip() and not line.startswith("#"))
    ft, gil = pins("requirements-ft.txt"), pins("requirements.txt")
    assert set(ft) - set(gil) == {"greenlet"} and set(gil) - set(ft) == {"gevent"}, (ft, gil)
    assert all(ft[k] == gil[k] for k in ft if k in gil), (ft, gil)
