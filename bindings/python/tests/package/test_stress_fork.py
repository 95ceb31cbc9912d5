"""Robustness through the real package: thread churn at a high rate, very
deep recursion (the depth cap and its [truncated] marker), os.fork() and
multiprocessing's fork start method while profiling.

Every child run is bounded twice: an alarm kills a wedged workload from
inside (faulthandler prints every thread's traceback first), and
run_python's timeout from outside. Not faulthandler.dump_traceback_later:
its watchdog thread does not survive fork(), and a forked child that
exits normally then waits for it forever (CPython behaviour).
"""

import json
import re

import pytest

from conftest import check_run
import pprof_reader

# If the workload hangs: every thread's traceback, then death by SIGALRM.
# (alarm() is not inherited by forked children; their parents bound them.)
WATCHDOG = ("import faulthandler, signal; "
            "faulthandler.register(signal.SIGALRM, all_threads=True, chain=True); "
            "signal.alarm({})\n")


def run_bounded(code, out, bound, **env):
    """Run `code` (killed from inside after `bound` s); returns (truth, profiles)."""
    r = check_run(WATCHDOG.format(bound) + code,
                  env={"OUT": str(out), **{k: str(v) for k, v in env.items()}},
                  timeout=bound + 30)
    truth = json.loads(r.stdout.strip().splitlines()[-1])
    profiles = pprof_reader.load_dir(str(out))
    assert profiles, "no profile was written"
    return truth, profiles


def stack_has(sample, name):
    return any(f[0] == name for f in sample["stack"])


def count(samples):
    return sum(s["values"][1] for s in samples)


# ------------------------------------------------------------ thread churn

# 500 short threads in waves of 50, each renamed once while it runs, with
# the sampler at 1000 Hz walking every thread (wall mode, no GIL filter).
CHURN = """
import json, os, threading, time
import pyroscope

names = {}  # native id -> the names that thread had
lock = threading.Lock()


def worker_fn(i):
    tid = threading.get_native_id()
    with lock:
        names.setdefault(tid, []).append(f"churn-{i}")
    end = time.thread_time() + 0.002
    while time.thread_time() < end: pass
    threading.current_thread().name = f"churn-{i}-late"
    with lock:
        names[tid].append(f"churn-{i}-late")
    end = time.thread_time() + 0.002
    while time.thread_time() < end: pass


pyroscope.configure(application_name="churn", output_dir=os.environ["OUT"],
                    sample_rate=1000, upload_interval=0.3, oncpu=False, gil_only=False,
                    report_thread_name=True, report_thread_id=True)
t0 = time.monotonic()
for wave in range(10):
    threads = [threading.Thread(target=worker_fn, args=(i,), name=f"churn-{i}")
               for i in range(wave * 50, wave * 50 + 50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
elapsed = time.monotonic() - t0
pyroscope.shutdown()
print(json.dumps({"names": names, "elapsed": elapsed}))
"""


def test_thread_churn_at_1000_hz(tmp_path):
    truth, profiles = run_bounded(CHURN, tmp_path / "p", 60)
    assert len(truth["names"]) >= 2, "threads did not run"
    # ~2 s of CPU in all; the sampler must not slow thread start/exit to a crawl.
    assert truth["elapsed"] < 30, truth["elapsed"]
    work = [s for s in pprof_reader.samples(profiles) if stack_has(s, "worker_fn")]
    assert count(work) >= 20, count(work)
    # A worker's sample carries a name that thread had (never another
    # thread's, never a stale one from a dead thread whose tid came back)
    # or, in the instant before it registered, none.
    named = 0
    for s in work:
        tname = s["labels"].get("thread_name")
        tid = s["labels"]["thread_id"]
        if tname is None:
            continue
        assert re.fullmatch(r"churn-\d+(-late)?", tname), tname
        assert tname in truth["names"].get(tid, []), (tid, tname, truth["names"].get(tid))
        named += s["values"][1]
    assert named >= 0.9 * count(work), (named, count(work))
    assert any(s["labels"].get("thread_name", "").endswith("-late") for s in work)


# --------------------------------------------------------------- recursion

RECURSION = """
import json, os, sys, time
import pyroscope

sys.setrecursionlimit(10000)


def recurse(n):
    if n == 0:
        end = time.thread_time() + 0.5
        while time.thread_time() < end: pass
        return 0
    return recurse(n - 1) + 1


kw = {"max_depth": int(os.environ["MAX_DEPTH"])} if os.environ["MAX_DEPTH"] else {}
pyroscope.configure(application_name="deep", output_dir=os.environ["OUT"],
                    sample_rate=250, upload_interval=0.5, **kw)
depth = recurse(3000)
pyroscope.shutdown()
print(json.dumps({"depth": depth}))
"""


@pytest.mark.parametrize("max_depth,want", [("", 128), ("1000", 1000)],
                         ids=["default-128", "max_depth-1000"])
def test_deep_recursion_is_capped_and_marked(tmp_path, max_depth, want):
    truth, profiles = run_bounded(RECURSION, tmp_path / "p", 60, MAX_DEPTH=max_depth)
    assert truth["depth"] == 3000
    all_samples = pprof_reader.samples(profiles)
    for s in all_samples:
        names = [f[0] for f in s["stack"]]
        assert len(names) <= want, len(names)
        # The marker, when present, is the root end only.
        assert "[truncated]" not in names[:-1], names
    deep = [s for s in all_samples if s["stack"] and s["stack"][0][0] == "recurse"]
    cut = [s for s in deep if s["stack"][-1][0] == "[truncated]"]
    # Nearly all the time is spent 3000 frames deep, so nearly every
    # sample is cut: exactly `want` frames, the leaf-most want-1 of them
    # the recursive function, the last one the marker.
    assert count(deep) >= 50, count(deep)
    assert count(cut) >= 0.9 * count(deep), (count(cut), count(deep))
    for s in cut:
        assert len(s["stack"]) == want
        assert {f[0] for f in s["stack"][:-1]} == {"recurse"}


# -------------------------------------------------------------------- fork

# The parent profiles parent_work, forks; the child runs child_work (under a
# tag) and ends one of two ways; the parent profiles parent_after_fork.
FORK = """
import json, os, sys, time
import pyroscope


def burn(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end: pass


def parent_work():
    burn(0.3)


def parent_after_fork():
    burn(0.3)


def child_work():
    burn(0.4)


pyroscope.configure(application_name="forky", output_dir=os.environ["OUT"],
                    sample_rate=250, upload_interval=0.3,
                    report_pid=os.environ["REPORT_PID"] == "1")
parent_work()
pid = os.fork()
if pid == 0:
    with pyroscope.tag_wrapper({"role": "child"}):
        child_work()
    if os.environ["CHILD_EXIT"] == "_exit":
        pyroscope.shutdown()
        os._exit(0)
    sys.exit(0)  # a normal exit: the atexit hook flushes the child's profiles
parent_after_fork()
# Wait for the child, but never forever.
deadline = time.monotonic() + 20
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    if time.monotonic() > deadline:
        os.kill(pid, 9)
        raise SystemExit("forked child did not finish")
    time.sleep(0.01)
running = pyroscope.is_running()
pyroscope.shutdown()
print(json.dumps({"parent": os.getpid(), "child": pid, "status": status,
                  "running_after_fork": running}))
"""


@pytest.mark.parametrize("report_pid,child_exit", [("1", "_exit"), ("0", "exit")],
                         ids=["report_pid-shutdown-_exit", "no_report_pid-normal-exit"])
def test_fork_child_profiles_itself(tmp_path, report_pid, child_exit):
    truth, profiles = run_bounded(FORK, tmp_path / "p", 60, REPORT_PID=report_pid,
                                  CHILD_EXIT=child_exit)
    assert truth["status"] == 0 and truth["running_after_fork"]
    parent, child = str(truth["parent"]), str(truth["child"])
    all_samples = pprof_reader.samples(profiles)
    child_samples = [s for s in all_samples if s["labels"].get("pid") == child]
    others = [s for s in all_samples if s["labels"].get("pid") != child]

    # The child profiled itself without a new configure, in a fresh store:
    # its own work, under its own tag, and nothing from before the fork.
    work = [s for s in child_samples if stack_has(s, "child_work")]
    assert count(work) >= 20, count(work)
    assert all(s["labels"].get("role") == "child" for s in work)
    assert not any(stack_has(s, "parent_work") for s in child_samples)

    # The parent kept profiling after the fork and never saw child_work.
    # Its samples carry its pid only when report_pid is on; the child's
    # always do, so the two never merge into one series.
    assert count([s for s in others if stack_has(s, "parent_work")]) >= 20
    assert count([s for s in others if stack_has(s, "parent_after_fork")]) >= 20
    assert not any(stack_has(s, "child_work") for s in others)
    for s in others:
        if report_pid == "1":
            assert s["labels"].get("pid") == parent, s["labels"]
        else:
            assert "pid" not in s["labels"], s["labels"]


# Forks (20 times) while two other threads churn labels, thread tags and
# thread names: the locks they take must not be inherited held.
FORK_BUSY = """
import json, os, threading, time
import pyroscope

pyroscope.configure(application_name="forkbusy", output_dir=os.environ["OUT"],
                    sample_rate=500, upload_interval=0.2, report_thread_name=True)
stop = threading.Event()


def label_churn():
    i = 0
    while not stop.is_set():
        with pyroscope.tag_wrapper({"k": str(i % 7)}):
            pyroscope.add_thread_tag("t", str(i % 5))
            pyroscope.remove_thread_tag("t", str(i % 5))
        i += 1


def name_churn():
    i = 0
    while not stop.is_set():
        t = threading.Thread(target=lambda: None, name=f"short-{i}")
        t.start()
        t.join()
        threading.current_thread().name = f"renamer-{i}"
        i += 1


def child_work():
    end = time.thread_time() + 0.05
    while time.thread_time() < end: pass


busy = [threading.Thread(target=label_churn), threading.Thread(target=name_churn)]
for t in busy:
    t.start()
statuses = []
for _ in range(20):
    pid = os.fork()
    if pid == 0:
        with pyroscope.tag_wrapper({"child": "yes"}):
            child_work()
        pyroscope.shutdown()
        os._exit(0)
    deadline = time.monotonic() + 10
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            statuses.append(status)
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            statuses.append("hung")
            break
        time.sleep(0.005)
stop.set()
for t in busy:
    t.join()
pyroscope.shutdown()
print(json.dumps({"statuses": statuses}))
"""


def test_fork_while_other_threads_use_labels_and_names(tmp_path):
    truth, profiles = run_bounded(FORK_BUSY, tmp_path / "p", 90)
    assert truth["statuses"] == [0] * 20, truth["statuses"]
    # The children's profiles were written, with their labels.
    child = [s for s in pprof_reader.samples(profiles) if stack_has(s, "child_work")]
    assert child and all(s["labels"].get("child") == "yes" for s in child)
    assert len({s["labels"]["pid"] for s in child}) >= 5


MP_POOL = """
import json, multiprocessing, os, time
import pyroscope


def pool_task(n):
    end = time.thread_time() + 0.1
    while time.thread_time() < end: pass
    return n * n


if __name__ == "__main__":
    pyroscope.configure(application_name="pool", output_dir=os.environ["OUT"],
                        sample_rate=250, upload_interval=0.2)
    t0 = time.monotonic()
    with multiprocessing.get_context("fork").Pool(2) as pool:
        result = pool.map(pool_task, range(12))
    elapsed = time.monotonic() - t0
    pyroscope.shutdown()
    print(json.dumps({"result": result, "elapsed": elapsed, "pid": os.getpid()}))
"""


def test_multiprocessing_fork_pool(tmp_path):
    truth, profiles = run_bounded(MP_POOL, tmp_path / "p", 60)
    assert truth["result"] == [n * n for n in range(12)]
    # 1.2 s of CPU on two workers: promptly, even on a loaded machine.
    assert truth["elapsed"] < 20, truth["elapsed"]
    # Pool workers end with os._exit (no atexit), so what they sampled
    # reaches the folder through the periodic uploads of their own agents.
    worker = [s for s in pprof_reader.samples(profiles) if stack_has(s, "pool_task")]
    assert count(worker) >= 10
    assert all(s["labels"].get("pid") not in (None, str(truth["pid"])) for s in worker)
