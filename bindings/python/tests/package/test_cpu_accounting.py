"""A CPU profile reports the CPU the threads used, also when the process
competes for its core; and the sampler's CPU budget lowers its rate while
keeping the totals right.

The workloads pin themselves to one CPU beside two CPU hogs pinned to the
same one, so they get about a third of it: wall time is about three times
their CPU. Every workload measures its truth itself (time.thread_time per
thread) and prints it as JSON. The bounds are generous (sampling error,
the first and last interval of the run), but charging wall time as CPU,
as gil_only did before, reports about three times the truth.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import check_run
import pprof_reader

CPU = min(os.sched_getaffinity(0))


@pytest.fixture(scope="module")
def hogs():
    """Two busy processes pinned to CPU, for the module's tests."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        for p in procs:
            os.sched_setaffinity(p.pid, {CPU})
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def run_profiled(code, out, **env):
    r = check_run(code, env={"OUT": str(out), "CPU": str(CPU),
                             **{k: str(v) for k, v in env.items()}}, timeout=120)
    truth = json.loads(r.stdout.strip().splitlines()[-1])
    profiles = pprof_reader.load_dir(str(out))
    assert profiles, "no profile was written"
    return truth, profiles


def total(profiles, thread_id=None):
    return sum(s["values"][0] for s in pprof_reader.samples(profiles)
               if thread_id is None or s["labels"].get("thread_id") == str(thread_id))


# One thread burning Python CPU for 0.5 s of its own clock.
SINGLE = """
import json, os, time
import pyroscope

os.sched_setaffinity(0, {int(os.environ["CPU"])})


def burn_loop(until):
    while time.thread_time() < until: pass


pyroscope.configure(application_name="contended", output_dir=os.environ["OUT"],
                    sample_rate=100, upload_interval=1, oncpu=os.environ["ONCPU"] == "1",
                    gil_only=os.environ["GIL"] == "1", report_thread_id=True)
c0, w0 = time.thread_time(), time.monotonic()
burn_loop(c0 + 0.5)
c1, w1 = time.thread_time(), time.monotonic()
pyroscope.shutdown()
w2 = time.monotonic()
print(json.dumps({"cpu": c1 - c0, "wall": w1 - w0, "outer_wall": w2 - w0}))
"""


@pytest.mark.parametrize("gil", [1, 0], ids=["gil_only", "all_threads"])
def test_contended_cpu_total_is_the_cpu_used(hogs, tmp_path, gil):
    truth, profiles = run_profiled(SINGLE, tmp_path / "p", ONCPU=1, GIL=gil)
    # The premise: the hogs took most of the core.
    assert truth["wall"] >= 1.5 * truth["cpu"], truth
    got, cpu_ns = total(profiles), truth["cpu"] * 1e9
    assert 0.75 * cpu_ns <= got <= 1.3 * cpu_ns, (got / 1e9, truth)
    leaf = pprof_reader.function_values(profiles)
    assert leaf.get("burn_loop", 0) >= 0.9 * got, leaf


def test_contended_wall_mode_still_reports_wall_time(hogs, tmp_path):
    truth, profiles = run_profiled(SINGLE, tmp_path / "p", ONCPU=0, GIL=0)
    got = total(profiles)
    # Wall time, waiting for the core included: about three times the CPU.
    assert 0.8 * truth["wall"] * 1e9 <= got <= 1.1 * truth["outer_wall"] * 1e9, \
        (got / 1e9, truth)


# Two threads burn 0.25 s of CPU each, two wake every 5 ms for a little
# work, the main thread waits in join. Each thread reports its own CPU.
THREADED = """
import json, os, threading, time
import pyroscope

os.sched_setaffinity(0, {int(os.environ["CPU"])})
stop = threading.Event()
used = {}


def burner(name):
    c0 = time.thread_time()
    while time.thread_time() < c0 + 0.25: pass
    used[name] = time.thread_time() - c0


def sleeper(name):
    c0 = time.thread_time()
    while not stop.is_set():
        time.sleep(0.005)
        sum(range(2000))
    used[name] = time.thread_time() - c0


pyroscope.configure(application_name="threaded", output_dir=os.environ["OUT"],
                    sample_rate=100, upload_interval=1, gil_only=os.environ["GIL"] == "1")
c0, w0 = time.thread_time(), time.monotonic()
burners = [threading.Thread(target=burner, args=(f"burner{i}",)) for i in range(2)]
sleepers = [threading.Thread(target=sleeper, args=(f"sleeper{i}",)) for i in range(2)]
for t in burners + sleepers:
    t.start()
for t in burners:
    t.join()
stop.set()
for t in sleepers:
    t.join()
used["main"] = time.thread_time() - c0
w1 = time.monotonic()
pyroscope.shutdown()
print(json.dumps({"used": used, "wall": w1 - w0}))
"""


@pytest.mark.parametrize("gil", [1, 0], ids=["gil_only", "all_threads"])
def test_contended_threads_total_is_their_cpu(hogs, tmp_path, gil):
    truth, profiles = run_profiled(THREADED, tmp_path / "p", GIL=gil)
    cpu = sum(truth["used"].values())
    assert truth["wall"] >= 1.5 * cpu, truth
    got = total(profiles)
    assert 0.75 * cpu * 1e9 <= got <= 1.3 * cpu * 1e9, (got / 1e9, truth)
    # The burners did most of the work and get most of the CPU.
    leaf = pprof_reader.function_values(profiles)
    assert leaf.get("burner", 0) >= 0.5 * got, leaf


# ------------------------------------------------------------ CPU budget

# 50 threads parked in Event.wait, all walked every tick in wall mode at
# 1000 Hz: far over a budget of 0.2 % of a core, so ticks are spaced out.
BUDGET = """
import json, os, threading, time
import pyroscope

stop = threading.Event()
threads = [threading.Thread(target=stop.wait) for _ in range(50)]
for t in threads:
    t.start()
ids = {"main": threading.get_native_id()}
pyroscope.configure(application_name="budget", output_dir=os.environ["OUT"],
                    sample_rate=1000, upload_interval=0.5, oncpu=False, gil_only=False,
                    report_thread_id=True)
w0 = time.monotonic()
while pyroscope.stats()["ticks"] < 10:
    time.sleep(0.05)
w1 = time.monotonic()
st = pyroscope.stats()
pyroscope.shutdown()
w2 = time.monotonic()
stop.set()
for t in threads:
    t.join()
print(json.dumps({"ids": ids, "stats": st, "inner_wall": w1 - w0, "outer_wall": w2 - w0}))
"""


def test_budget_lowers_the_rate_and_keeps_wall_totals(tmp_path):
    truth, profiles = run_profiled(BUDGET, tmp_path / "p", PYROSCOPE_SAMPLER_CPU_BUDGET="0.2")
    st = truth["stats"]
    assert st["budget_throttled_ticks"] > 0, st
    assert st["effective_rate_hz"] < 1000, st
    # Each tick stands for the longer interval: the main thread, alive the
    # whole run, still totals the run's wall time.
    got = total(profiles, truth["ids"]["main"])
    assert 0.8 * truth["inner_wall"] * 1e9 <= got <= 1.1 * truth["outer_wall"] * 1e9, \
        (got / 1e9, truth)
    # The profiles say the rate they were taken at: ticks further apart
    # than the configured 1 ms.
    assert all(p["period"] > 1_000_000 for p in profiles), [p["period"] for p in profiles]


def test_no_budget_keeps_the_configured_rate(tmp_path):
    truth, profiles = run_profiled(BUDGET, tmp_path / "p", PYROSCOPE_SAMPLER_CPU_BUDGET="0")
    st = truth["stats"]
    assert st["budget_throttled_ticks"] == 0 and st["effective_rate_hz"] == 1000, st
    assert all(p["period"] == 1_000_000 for p in profiles), [p["period"] for p in profiles]


def test_budget_setting_is_checked(tmp_path):
    import pyroscope
    with pytest.raises(ValueError, match="sampler_cpu_budget"):
        pyroscope.configure(application_name="x", output_dir=str(tmp_path),
                            sampler_cpu_budget=150)
    with pytest.raises(TypeError, match="sampler_cpu_budget"):
        pyroscope.configure(application_name="x", output_dir=str(tmp_path),
                            sampler_cpu_budget="1")
    assert not pyroscope.is_running()
