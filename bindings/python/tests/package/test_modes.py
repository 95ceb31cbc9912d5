"""Sampling modes through the real package: the CPU split between functions,
oncpu vs wall, gil_only, and the per-sample pid / thread labels.

Every workload measures its own truth (time.thread_time per function or
per thread, time.monotonic around the profiled span) and prints it as
JSON; the tests compare that truth with the decoded profiles.
"""

import json
import os
import sys

import pytest

from conftest import check_run
import pprof_reader

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pythons import FREE_THREADED  # noqa: E402


def run_profiled(code, out, **env):
    """Run the workload with OUT=<profile folder>; returns (truth, profiles)."""
    r = check_run(code, env={"OUT": str(out), **{k: str(v) for k, v in env.items()}},
                  timeout=60)
    truth = json.loads(r.stdout.strip().splitlines()[-1])
    profiles = pprof_reader.load_dir(str(out))
    assert profiles, "no profile was written"
    return truth, profiles


def by_thread(profiles):
    """{thread_id label: (summed value, summed count)}."""
    out = {}
    for s in pprof_reader.samples(profiles):
        tid = s["labels"].get("thread_id")
        v, n = out.get(tid, (0, 0))
        out[tid] = (v + s["values"][0], n + s["values"][1])
    return out


def stack_has(sample, name):
    return any(f[0] == name for f in sample["stack"])


# ---------------------------------------------------------------- CPU split

# Three functions take 50/30/20 % of the CPU, interleaved in rounds of
# 73 ms of CPU time (27 rounds). Each call is timed with thread_time by the
# caller: that is the truth the profile must match. Slices span many ticks
# on purpose: a tick charges the CPU used since the previous one to the
# function running now, so only the ticks straddling a switch misattribute
# (by at most one interval each, in both directions). Slices shorter than
# a tick would leave each tick a coin toss between the functions, whose
# noise over 1000 ticks is already ~1.6 points.
#
# All threads are sampled (gil_only=False), so each tick charges the
# thread's own CPU clock. (In gil_only mode the GIL holder carries the CPU
# of every thread; test_cpu_accounting.py checks those totals beside CPU
# hogs.)
SPLIT = """
import json, os, time
import pyroscope

SHARES = {"split_fifty": 0.5, "split_thirty": 0.3, "split_twenty": 0.2}
ROUND = 0.073
TOTAL = float(os.environ["TOTAL"])


def split_fifty(until):
    while time.thread_time() < until: pass


def split_thirty(until):
    while time.thread_time() < until: pass


def split_twenty(until):
    while time.thread_time() < until: pass


spent = dict.fromkeys(SHARES, 0.0)
pyroscope.configure(application_name="split", output_dir=os.environ["OUT"],
                    sample_rate=500, upload_interval=1, gil_only=False)
start, wall0 = time.thread_time(), time.monotonic()
while time.thread_time() - start < TOTAL:
    for fn in (split_fifty, split_thirty, split_twenty):
        t0 = time.thread_time()
        fn(t0 + ROUND * SHARES[fn.__name__])
        spent[fn.__name__] += time.thread_time() - t0
wall = time.monotonic() - wall0
pyroscope.shutdown()
print(json.dumps({"spent": spent, "wall": wall}))
"""


def test_cpu_split_recovered_within_3_points(tmp_path):
    truth, profiles = run_profiled(SPLIT, tmp_path / "p", TOTAL=2.0)
    spent = truth["spent"]
    leaf = pprof_reader.function_values(profiles)
    names = list(spent)
    truth_total = sum(spent.values())
    prof_total = sum(leaf.get(n, 0) for n in names)
    # The values are CPU nanoseconds: the three functions together are
    # within 25 % of what they measured themselves.
    assert 0.75 * truth_total * 1e9 <= prof_total <= 1.25 * truth_total * 1e9, \
        (prof_total, truth)
    report = {n: (round(100 * spent[n] / truth_total, 2),
                  round(100 * leaf.get(n, 0) / prof_total, 2)) for n in names}
    for n, want in (("split_fifty", 50), ("split_thirty", 30), ("split_twenty", 20)):
        truth_pct, prof_pct = report[n]
        # The workload did what it says (guards the test itself)...
        assert abs(truth_pct - want) <= 2, report
        # ...and the profile recovers it.
        assert abs(prof_pct - truth_pct) <= 3, report


# ------------------------------------------------------------ oncpu vs wall

# Two threads that never wake while profiled (one in Event.wait, one in a
# long time.sleep), started before configure; the main thread burns CPU.
IDLE = """
import json, os, threading, time
import pyroscope

stop = threading.Event()
ids = {}


def idle_wait():
    ids["idle_wait"] = threading.get_native_id()
    stop.wait()


def idle_sleep():
    ids["idle_sleep"] = threading.get_native_id()
    time.sleep(3600)  # daemon thread: dies with the process


def burn(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end: pass


threads = [threading.Thread(target=idle_wait),
           threading.Thread(target=idle_sleep, daemon=True)]
for t in threads:
    t.start()
while len(ids) < 2:
    time.sleep(0.001)
time.sleep(0.05)  # both are blocked by now
ids["main"] = threading.get_native_id()
w0 = time.monotonic()
pyroscope.configure(application_name="idle", output_dir=os.environ["OUT"],
                    sample_rate=200, upload_interval=0.5,
                    oncpu=os.environ["ONCPU"] == "1", gil_only=os.environ["GIL"] == "1",
                    report_thread_id=True)
w1, c1 = time.monotonic(), time.thread_time()
burn(0.6)
w2, c2 = time.monotonic(), time.thread_time()
pyroscope.shutdown()
w3 = time.monotonic()
stop.set()
threads[0].join()
print(json.dumps({"ids": ids, "inner_wall": w2 - w1, "outer_wall": w3 - w0,
                  "cpu": c2 - c1}))
"""


@pytest.fixture(scope="module")
def idle_runs(tmp_path_factory):
    """The IDLE workload in three modes: (oncpu, gil_only) -> (truth, profiles)."""
    runs = {}
    for oncpu, gil in ((1, 0), (0, 0), (0, 1)):
        out = tmp_path_factory.mktemp(f"idle-{oncpu}{gil}")
        runs[(oncpu, gil)] = run_profiled(IDLE, out / "p", ONCPU=oncpu, GIL=gil)
    return runs


def test_cpu_mode_values_are_cpu_nanoseconds(idle_runs):
    truth, profiles = idle_runs[(1, 0)]
    assert all(p["sample_types"][0] == ("cpu", "nanoseconds") for p in profiles)
    main = str(truth["ids"]["main"])
    value, count = by_thread(profiles).get(main, (0, 0))
    cpu_ns = truth["cpu"] * 1e9
    assert 0.75 * cpu_ns <= value <= 1.25 * cpu_ns, (value, cpu_ns)
    assert count >= 0.5 * truth["cpu"] * 200, count


def test_cpu_mode_charges_idle_threads_no_cpu(idle_runs):
    truth, profiles = idle_runs[(1, 0)]
    threads = by_thread(profiles)
    for name in ("idle_wait", "idle_sleep"):
        value, count = threads.get(str(truth["ids"][name]), (0, 0))
        # Blocked the whole time: at most one sample, of less than a tick.
        assert count <= 1 and value < 5_000_000, (name, value, count)


def test_cpu_mode_never_samples_idle_threads(idle_runs):
    truth, profiles = idle_runs[(1, 0)]
    threads = by_thread(profiles)
    for name in ("idle_wait", "idle_sleep"):
        assert str(truth["ids"][name]) not in threads, (name, threads)
        assert not any(stack_has(s, name) for s in pprof_reader.samples(profiles)), name


def test_wall_mode_samples_every_thread_for_the_whole_run(idle_runs):
    truth, profiles = idle_runs[(0, 0)]
    assert all(p["sample_types"][0] == ("wall", "nanoseconds") for p in profiles)
    threads = by_thread(profiles)
    for name in ("main", "idle_wait", "idle_sleep"):
        value, count = threads.get(str(truth["ids"][name]), (0, 0))
        # Each tick charges each live thread one interval of wall time, so
        # a thread alive for the whole run totals about the run's length.
        assert 0.8 * truth["inner_wall"] * 1e9 <= value <= 1.1 * truth["outer_wall"] * 1e9, \
            (name, value, truth)
    idle = [s for s in pprof_reader.samples(profiles)
            if s["labels"].get("thread_id") == str(truth["ids"]["idle_wait"])]
    assert idle and all(stack_has(s, "idle_wait") for s in idle)


def test_gil_only_skips_threads_without_the_gil(idle_runs):
    truth, profiles = idle_runs[(0, 1)]
    if FREE_THREADED:
        # No GIL: gil_only is treated as False, so this is the wall run.
        test_wall_mode_samples_every_thread_for_the_whole_run({(0, 0): (truth, profiles)})
        return
    threads = by_thread(profiles)
    for name in ("idle_wait", "idle_sleep"):
        # Wall mode, but they never hold the GIL, so they are never walked.
        assert str(truth["ids"][name]) not in threads, (name, threads)
        assert not any(stack_has(s, name) for s in pprof_reader.samples(profiles)), name
    # The GIL holder is sampled, one thread per tick: at most the run's length.
    value, _ = threads.get(str(truth["ids"]["main"]), (0, 0))
    total = sum(v for v, _ in threads.values())
    assert value >= 0.5 * truth["inner_wall"] * 1e9, (value, truth)
    assert total <= 1.1 * truth["outer_wall"] * 1e9, (total, truth)


# Two threads burning Python CPU take turns holding the GIL; the main
# thread waits in join (not holding it).
TWO_BURNERS = """
import json, os, threading, time
import pyroscope

ids = {}


def burner_one():
    ids["burner_one"] = threading.get_native_id()
    end = time.thread_time() + 0.4
    while time.thread_time() < end: pass


def burner_two():
    ids["burner_two"] = threading.get_native_id()
    end = time.thread_time() + 0.4
    while time.thread_time() < end: pass


pyroscope.configure(application_name="two", output_dir=os.environ["OUT"],
                    sample_rate=250, upload_interval=0.5,
                    oncpu=os.environ["ONCPU"] == "1", gil_only=os.environ["GIL"] == "1",
                    report_thread_id=True)
w0 = time.monotonic()
threads = [threading.Thread(target=burner_one), threading.Thread(target=burner_two)]
for t in threads:
    t.start()
for t in threads:
    t.join()
w1 = time.monotonic()
pyroscope.shutdown()
w2 = time.monotonic()
ids["main"] = threading.get_native_id()
print(json.dumps({"ids": ids, "inner_wall": w1 - w0, "outer_wall": w2 - w0}))
"""


@pytest.mark.parametrize("oncpu,gil", [(1, 1), (1, 0), (0, 1), (0, 0)],
                         ids=["cpu-gil_only", "cpu-all", "wall-gil_only", "wall-all"])
def test_two_python_threads_both_sampled(tmp_path, oncpu, gil):
    truth, profiles = run_profiled(TWO_BURNERS, tmp_path / "p", ONCPU=oncpu, GIL=gil)
    leaf = pprof_reader.function_values(profiles)
    both = leaf.get("burner_one", 0) + leaf.get("burner_two", 0)
    for name in ("burner_one", "burner_two"):
        # They alternate on the GIL, so each gets a fair part of the samples.
        assert leaf.get(name, 0) >= 0.25 * both, leaf
    threads = by_thread(profiles)
    main, main_count = threads.get(str(truth["ids"]["main"]), (0, 0))
    if gil and FREE_THREADED:
        gil = 0  # no GIL: gil_only is treated as False
    if gil:
        # The main thread holds the GIL only to start the threads and to
        # return from join; it waits without it, so gil_only skips it.
        assert main_count <= 0.1 * sum(n for _, n in threads.values()), threads
    elif not oncpu:
        # Wall mode samples the waiting main thread too, for the whole run.
        assert main >= 0.8 * truth["inner_wall"] * 1e9, (main, truth)


# ------------------------------------------------------ pid / thread labels

LABELS = """
import json, os, threading, time
import pyroscope


def burn(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end: pass


def main_work():
    burn(0.2)


def named_work():
    burn(0.2)


def renamed_work():
    burn(0.2)


def early_work():
    burn(0.2)


go = threading.Event()
info = {"pid": os.getpid(), "main": threading.get_native_id()}


def named():
    info["named"] = threading.get_native_id()
    named_work()


def renamed():
    info["renamed"] = threading.get_native_id()
    go.wait()
    renamed_work()


def early():
    info["early"] = threading.get_native_id()
    go.wait()
    early_work()


# Started before configure: its name must be picked up when profiling starts.
t0 = threading.Thread(target=early, name="early-C")
t0.start()
flags = os.environ["FLAGS"].split(",")
pyroscope.configure(application_name="labels", output_dir=os.environ["OUT"],
                    sample_rate=250, upload_interval=0.5,
                    report_pid="pid" in flags, report_thread_id="tid" in flags,
                    report_thread_name="tname" in flags)
t1 = threading.Thread(target=named, name="wörker-Ä-名")
t2 = threading.Thread(target=renamed, name="before-rename")
t1.start()
t2.start()
while "renamed" not in info:
    time.sleep(0.001)
t2.name = "renamed-B"  # after start: the profile must show the new name
go.set()
main_work()
for t in (t0, t1, t2):
    t.join()
pyroscope.shutdown()
print(json.dumps(info))
"""

THREAD_OF = {"main_work": ("main", "MainThread"), "named_work": ("named", "wörker-Ä-名"),
             "renamed_work": ("renamed", "renamed-B"), "early_work": ("early", "early-C")}


@pytest.mark.parametrize("flags", ["pid,tid,tname", "tname", "pid,tid", ""],
                         ids=["all", "name-only", "pid+tid", "none"])
def test_pid_and_thread_labels(tmp_path, flags):
    info, profiles = run_profiled(LABELS, tmp_path / "p", FLAGS=flags)
    on = set(filter(None, flags.split(",")))
    all_samples = pprof_reader.samples(profiles)
    for func, (who, name) in THREAD_OF.items():
        # burn() is the leaf; the caller names the thread's work.
        found = [s for s in all_samples if stack_has(s, func)]
        assert sum(s["values"][1] for s in found) >= 10, func
        for s in found:
            want = {}
            if "pid" in on:
                want["pid"] = str(info["pid"])
            if "tid" in on:
                want["thread_id"] = str(info[who])
            if "tname" in on:
                want["thread_name"] = name
            assert s["labels"] == want, (func, s["labels"], want)
    if not on:
        assert all(not s["labels"] for s in all_samples)
