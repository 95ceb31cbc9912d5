"""Tests of the CPython stack walker (bindings/python/src/walker.c) through the
test-only extension _walker_test, built for the running interpreter by
build.sh. Run with each interpreter, e.g.
    $(pyenv root)/versions/3.12.1/bin/python -m pytest bindings/python/tests/walker
"""
import asyncio
import collections
import importlib
import importlib.util
import os
import platform
import subprocess
import sys
import threading
import time
import traceback
import types

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pythons import FREE_THREADED, older_python  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import workloads  # noqa: E402

WL_FILE = workloads.__file__
# 3.10 frames reach only the code object, which has no qualname: the
# walker reports co_name there, as CPython 3.10's own tracebacks do.
HAS_QUALNAME = sys.version_info >= (3, 11)


def reported(qualname):
    return qualname if HAS_QUALNAME else qualname.rsplit(".", 1)[-1]


@pytest.fixture(scope="session")
def wt():
    out = os.path.join(HERE, "build", sys.implementation.cache_tag + sys.abiflags)
    subprocess.run([os.path.join(HERE, "build.sh"), sys.executable, out], check=True,
                   stdout=subprocess.DEVNULL)
    sys.path.insert(0, out)
    try:
        return importlib.import_module("_walker_test")
    finally:
        sys.path.remove(out)


def mark(tag, path=WL_FILE):
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if line.rstrip().endswith("# MARK:" + tag):
                return i
    raise AssertionError("no mark " + tag)


def samples_of(res):
    """(frames, value, count, tid) for every sample that carries a count."""
    return [s for s in res["samples"] if s[2] > 0]


def frame_lines(res, qualname, file=WL_FILE, leaf_only=True):
    """Counter of lines of frames named `qualname` in `file`."""
    c = collections.Counter()
    for frames, _, count, _ in samples_of(res):
        for fr in (frames[:1] if leaf_only else frames):
            if fr[0] == qualname and fr[1] == file:
                c[fr[2]] += count
    return c


def assert_mostly_line(res, qualname, line, file=WL_FILE, leaf_only=True, min_samples=10):
    lines = frame_lines(res, qualname, file, leaf_only)
    total = sum(lines.values())
    assert total >= min_samples, (qualname, lines, res["stats"])
    assert lines[line] >= 0.9 * total, (qualname, line, lines)


def run_sampled(wt, fn, *args, hz=500, oncpu=True, gil_only=False, max_depth=128):
    wt.start(hz=hz, oncpu=oncpu, gil_only=gil_only, max_depth=max_depth)
    try:
        fn(*args)
    finally:
        res = wt.stop()
    return res


# ------------------------------------------------------------- line table

def all_code_objects():
    mods = [workloads, asyncio.events, traceback, threading, collections, importlib.util]
    seen, todo = [], []
    for m in mods:
        for v in vars(m).values():
            for obj in (v, *vars(v).values()) if isinstance(v, type) else (v,):
                # Code objects only: 3.15's traceback holds an object whose
                # every attribute is another such object.
                code = getattr(obj, "__code__", None)
                if isinstance(code, types.CodeType):
                    todo.append(code)
    while todo:
        c = todo.pop()
        seen.append(c)
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return seen


def test_line_table_matches_cpython(wt):
    codes = all_code_objects()
    assert len(codes) > 300
    checked = 0
    for code in codes:
        assert wt.line_of(code, -1) == code.co_firstlineno
        for start, end, line in code.co_lines():
            for off in range(start, end, 2):
                assert wt.line_of(code, off) == (line or 0), (code, off)
                checked += 1
    assert checked > 10000


# ---------------------------------------------------------------- strings

@pytest.mark.parametrize("s", [
    "", "plain_ascii", "café_naïve", "ÿ\xa0\x80latin1", "計算する", "mixed é 計 𠀋 😀",
    "\U0010ffff", "a" * 5000, "é" * 3000, "計" * 2000, "😀" * 1500,
])
def test_decode_compact(wt, s):
    want = s[:1025].encode("utf-8")
    assert wt.decode(s) == want


def test_decode_lone_surrogate_is_replaced(wt):
    assert wt.decode("a\udc80b") == "a\ufffdb".encode()
    assert wt.decode("\ud83d" + "x" * 3) == "\ufffdxxx".encode()


def test_decode_non_compact_subclass(wt):
    class S(str):
        pass
    for s in ("ascii", "café", "計算", "😀x"):
        assert wt.decode(S(s), False) == s.encode()
        assert wt.decode(S(s), True) is None  # the walker takes exact str only


# ------------------------------------------------------ names and lines

def test_known_function_and_exact_line(wt):
    res = run_sampled(wt, workloads.busy_known, 0.5)
    assert_mostly_line(res, "busy_known", mark("busy_known"))
    # The caller frame carries the line of the call, as Python reports it.
    callers = collections.Counter()
    for frames, _, count, _ in samples_of(res):
        if frames[0][0] == "busy_known" and len(frames) > 1:
            callers[frames[1][:2]] += count
    top = callers.most_common(1)[0][0]
    assert top[0] == "run_sampled" and top[1] == __file__
    st = res["stats"]
    assert st["cache_hits"] > st["cache_misses"] > 0
    assert st["walk_errors"] <= st["stacks_walked"] // 20, st


def test_generator(wt):
    res = run_sampled(wt, workloads.drive_gen, 0.5)
    assert_mostly_line(res, "gen_work", mark("gen_work"))
    parents = frame_lines(res, "drive_gen", leaf_only=False)
    assert parents.most_common(1)[0][0] == mark("drive_gen")


def test_coroutine_under_asyncio(wt):
    res = run_sampled(wt, lambda: asyncio.run(workloads.coro_work(0.5)))
    assert_mostly_line(res, "coro_work", mark("coro_work"))
    # Driven by the event loop: its frames are below the coroutine.
    files = {fr[1] for frames, _, _, _ in samples_of(res) if frames[0][0] == "coro_work"
             for fr in frames}
    assert any(f.endswith(os.path.join("asyncio", "events.py")) for f in files), files


def test_lambda(wt):
    res = run_sampled(wt, workloads.spin_lambda, 0.4)
    assert_mostly_line(res, "<lambda>", mark("lambda"), leaf_only=False)
    assert_mostly_line(res, "busy_known", mark("busy_known"))


def test_class_method_qualname(wt):
    res = run_sampled(wt, workloads.Klass().method, 0.4)
    assert_mostly_line(res, reported("Klass.method"), mark("method"))


@pytest.mark.parametrize("fn,tag", [
    (workloads.café_naïve, "latin1"),
    (workloads.計算する, "cjk"),
    (getattr(workloads, "\U0002000b_ext_b"), "astral"),
])
def test_non_ascii_names(wt, fn, tag):
    res = run_sampled(wt, fn, 0.4)
    assert_mostly_line(res, fn.__qualname__, mark(tag))


def test_non_ascii_file_name(wt, tmp_path):
    path = tmp_path / "módulo_日本_😀.py"
    path.write_text("import time\n\n"
                    "def über(seconds):\n"
                    "    stop = time.thread_time() + seconds\n"
                    "    x = 0\n"
                    "    while time.thread_time() < stop: x += 1  # MARK:uber\n",
                    encoding="utf-8")
    spec = importlib.util.spec_from_file_location("modulo_nonascii", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = run_sampled(wt, mod.über, 0.4)
    assert_mostly_line(res, "über", mark("uber", str(path)), file=str(path))


def test_lines_of_a_frame_moving_between_call_sites(wt):
    """The per-code-object instruction cache never hands out another
    line's frame: twelve call sites in one frame, each sampled at its own
    line."""
    res = run_sampled(wt, workloads.many_lines, 0.8)
    sites = {mark(f"site{i}") for i in range(12)}
    lines = frame_lines(res, "many_lines", leaf_only=False)
    callers = collections.Counter()
    for frames, _, count, _ in samples_of(res):
        if frames[0][0] == "tiny" and len(frames) > 1 and frames[1][0] == "many_lines":
            # A call just made may still be at the def line, or returning.
            assert mark("tiny") - 2 <= frames[0][2] <= mark("tiny") + 1, frames[0]
            callers[frames[1][2]] += count
    # The thread runs on while its stack is read leaf first: now and then
    # the caller has already moved on from the call the leaf belonged to.
    others = sum(c for line, c in callers.items() if line not in sites)
    assert others <= 0.03 * sum(callers.values()), callers
    assert len(set(callers) & sites) >= 9, callers
    assert sum(callers.values()) >= 0.8 * sum(lines.values()), (callers, lines)


def test_whole_stack_matches_traceback(wt):
    """A sleeping thread's stack, frame by frame, equals what Python's own
    traceback module reports for it."""
    ready = threading.Event()
    wake = threading.Event()
    t = threading.Thread(target=workloads.sleeper, args=(ready, wake))
    t.start()
    ready.wait()
    time.sleep(0.1)
    want = [(fs.name, fs.filename, fs.lineno)
            for fs in reversed(traceback.extract_stack(sys._current_frames()[t.ident]))]
    res = wt.sample_for(0.2, hz=200, oncpu=False)
    wake.set()
    t.join()
    got = [s for s in samples_of(res) if s[3] == t.native_id]
    assert got, res["stats"]
    # traceback gives plain names; the walker gives qualnames.
    frames = got[0][0]
    assert [(f[0].rsplit(".", 1)[-1], f[1], f[2]) for f in frames] == want
    assert frames[0][0] == reported("Condition.wait")
    assert ("sleeper", WL_FILE, mark("sleeper")) in frames


# ------------------------------------------------------------------ depth

def test_recursion_3000_deep_walks_to_buffer_bound(wt):
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(10000)
    try:
        res = run_sampled(wt, workloads.recurse, 3000, 0.4, max_depth=5000)
        deep = [s for s in samples_of(res) if s[0][0][0] == "busy_known"]
        assert deep, res["stats"]
        # The thread keeps running while its 3000 frames are walked: when it
        # returns (and pushes new frames over the old ones) mid-walk, that
        # stack ends early and counts as a walk error. All others are full.
        short = sum(c for frames, _, c, _ in deep if len(frames) < wt.MAX_FRAMES)
        assert short <= res["stats"]["walk_errors"] <= 3, res["stats"]
        assert sum(c for _, _, c, _ in deep) - short >= 10, res["stats"]
        for frames, _, _, _ in deep:
            assert len(frames) <= wt.MAX_FRAMES
            assert frames[1][0] == "recurse" and frames[-1][0] == "recurse"
            assert frames[1][2] == mark("recurse_base")
            assert {f[2] for f in frames[2:]} == {mark("recurse")}
        assert res["truncated_stacks"] == 0

        res = run_sampled(wt, workloads.recurse, 3000, 0.3, max_depth=128)
        deep = [s for s in samples_of(res) if s[0][0][0] == "busy_known"]
        assert deep and res["truncated_stacks"] > 0
        assert sum(c for frames, _, c, _ in deep
                   if len(frames) == 128 and frames[-1][0] == "[truncated]") >= 10
    finally:
        sys.setrecursionlimit(old)


# --------------------------------------------------------------- threads

@pytest.mark.parametrize("fault_guard", [True, False])
def test_thread_churn_at_1000hz(wt, fault_guard):
    # Thread states are freed while we walk them: both read paths must
    # survive it (the fault guard's plain loads and process_vm_readv).
    # 500 threads and 200 ticks while they come and go (about 0.5 s on an
    # idle machine), at most 60 s on a busy one.
    wt.start(hz=1000, oncpu=False, fault_guard=fault_guard)
    try:
        deadline = time.monotonic() + 60
        started = 0
        while time.monotonic() < deadline and (started < 500 or wt.stats()["ticks"] <= 200):
            batch = [threading.Thread(target=workloads.short_worker, args=(20000,))
                     for _ in range(10)]
            for t in batch:
                t.start()
            for t in batch:
                t.join()
            started += len(batch)
    finally:
        res = wt.stop()
    assert started >= 500
    st = res["stats"]
    assert st["ticks"] > 200, st
    assert frame_lines(res, "short_worker")[mark("short_worker")] > 0, st


def spinner_and_sleeper():
    stop = threading.Event()
    ready = threading.Event()
    spin = threading.Thread(target=workloads.spinner, args=(stop,))
    sleep = threading.Thread(target=workloads.sleeper, args=(ready, stop))
    sleep.start()
    ready.wait()
    spin.start()
    time.sleep(0.2)  # the sleeper is blocked in a lock wait, GIL released
    return stop, spin, sleep


def per_thread(res):
    c = collections.Counter()
    for _, _, count, tid in samples_of(res):
        c[tid] += count
    return c


@pytest.mark.parametrize("oncpu", [False, True])
def test_gil_only_samples_only_the_holder(wt, oncpu):
    stop, spin, sleep = spinner_and_sleeper()
    try:
        cpu0 = thread_cpu(spin)
        only = wt.sample_for(0.6, hz=200, oncpu=oncpu, gil_only=True)
        spin_cpu = thread_cpu(spin) - cpu0
        every = wt.sample_for(0.6, hz=200, oncpu=False, gil_only=False)
    finally:
        stop.set()
        spin.join()
        sleep.join()
    # On-CPU mode samples the spinner only at ticks after it ran, so what it
    # gets follows the CPU it got, not the tick count (8 runnable threads on
    # 2 cores gave it 56 of 150 ticks). Wall mode samples the GIL holder at
    # every tick, ran or not.
    ticks = only["stats"]["ticks"]
    if oncpu:
        ticks = min(ticks, int(spin_cpu * 200))
    c = per_thread(only)
    if FREE_THREADED:
        # No GIL: gil_only is treated as False, every thread is a candidate
        # (wall mode: all three; on-CPU: those whose clock moved).
        assert c[spin.native_id] >= ticks // 2, (c, only["stats"])
        if oncpu:
            assert c[sleep.native_id] <= 1, c
        else:
            assert {spin.native_id, sleep.native_id, threading.get_native_id()} <= set(c), c
        return
    # The sleeper waits on a lock and never holds the GIL: never sampled.
    # The main thread holds it only at the window's edges (starting and
    # stopping the sampler around its GIL-free sleep in sample_for), where a
    # loaded machine can preempt it for a few ticks (3 of 120 seen in CI):
    # it may appear there, the spinner takes the bulk.
    main = threading.get_native_id()
    assert set(c) <= {spin.native_id, main}, (c, spin.native_id, sleep.native_id, main)
    assert c[spin.native_id] >= ticks // 2, (c, only["stats"])
    assert c[main] < c[spin.native_id] // 4, (c, only["stats"])
    assert_mostly_line(only, "spinner", mark("spinner"))
    # Without gil_only in wall mode all three threads are there.
    e = per_thread(every)
    assert {spin.native_id, sleep.native_id, threading.get_native_id()} <= set(e), e
    assert frame_lines(every, "sleeper", leaf_only=False)[mark("sleeper")] > 0


def thread_cpu(t):
    return time.clock_gettime(time.pthread_getcpuclockid(t.ident))


def test_oncpu_skips_sleeping_thread(wt):
    stop, spin, sleep = spinner_and_sleeper()
    try:
        # Sample until the spinner has used 0.3 s of CPU over 60 ticks or
        # more, however long that takes on a loaded machine (at most 60 s):
        # its samples follow the CPU it gets, not the wall time.
        spun = thread_cpu(spin)
        wt.start(hz=200, oncpu=True, gil_only=False)
        try:
            deadline = time.monotonic() + 60
            while (thread_cpu(spin) - spun < 0.3 or wt.stats()["ticks"] < 60) and \
                    time.monotonic() < deadline:
                time.sleep(0.02)
        finally:
            res = wt.stop()
    finally:
        stop.set()
        spin.join()
        sleep.join()
    c = per_thread(res)
    # A thread seen for the first time is charged the CPU it used so far
    # (at most one interval), so an idle thread may show up once.
    assert c[sleep.native_id] <= 1, c
    assert c[spin.native_id] >= 10, (c, res["stats"])
    assert res["stats"]["idle_skipped"] > 0


# ------------------------------------------------------------ unsupported



def test_unsupported_version_fails_clearly(tmp_path):
    old = older_python()
    if old is None:
        pytest.skip("no CPython older than 3.10 to build for")
    subprocess.run([os.path.join(HERE, "build.sh"), old, str(tmp_path)], check=True,
                   stdout=subprocess.DEVNULL)
    r = subprocess.run([old, "-c", "import _walker_test as w; w.start()"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert "is not supported (supported: 3.10, 3.11, 3.12, 3.13, 3.14, 3.15)" in r.stderr


@pytest.mark.skipif(sys.version_info < (3, 11), reason="plays a version after 3.10")
def test_newer_version_than_tested_fails_clearly(tmp_path):
    # Built as if the newest tested version were the one before this: the
    # walker must refuse, naming both, instead of reading an unknown layout.
    older = "%d.%d" % (sys.version_info[0], sys.version_info[1] - 1)
    hexv = "0x%02x%02x0000" % sys.version_info[:2]
    env = dict(os.environ, WALKER_TEST_CFLAGS='-DPNW_NEWEST_TESTED="%s" -DPNW_TOO_NEW_HEX=%s'
               % (older, hexv))
    subprocess.run([os.path.join(HERE, "build.sh"), sys.executable, str(tmp_path)], check=True,
                   stdout=subprocess.DEVNULL, env=env)
    r = subprocess.run([sys.executable, "-c", "import _walker_test as w; w.start()"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert ("CPython %s is newer than CPython %s, the newest version"
            % (platform.python_version(), older)) in r.stderr, r.stderr


# ----------------------------------------------------------------- layout

def test_layout_source(wt):
    want = "debug_offsets" if sys.version_info >= (3, 13) else "headers"
    assert wt.layout_source() == want


@pytest.mark.skipif(sys.version_info < (3, 13), reason="_Py_DebugOffsets is 3.13+")
@pytest.mark.parametrize("how,message", [
    ("", None),
    ("cookie", "no \"xdebugpy\" cookie"),
    ("version", "is for version 0x"),
    ("free_threaded", "free-threaded"),
    ("range", "offsets out of range"),
])
def test_debug_offsets_are_validated(wt, how, message):
    got = wt.debug_offsets(how)
    if message is None:
        assert got is None  # accepted, and equal to the headers' layout
    else:
        assert got is not None and message in got, got
