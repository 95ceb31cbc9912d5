"""Labels follow the execution context (contextvars), not the OS thread.

In-process tests read a context's labels back with
pyroscope._native.context_labels() (no profiler needed). The end-to-end
tests profile a fresh interpreter running interleaved asyncio tasks (and
greenlets, when gevent is installed) and check, in the written pprof, that
every sample of one kind of handler carries that handler's labels only.
Under per-thread labels most of those samples carried the other kind's.
"""

import asyncio
import json
import os
import sys
import threading

import pytest

import pprof_reader
import pyroscope
from conftest import check_run
from pyroscope import _native

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pythons import FREE_THREADED  # noqa: E402


def ctx():
    return _native.context_labels()


@pytest.fixture(autouse=True)
def expect_counts():
    """Each test must leave this thread's context and slot unlabelled, and
    count no unmatched exit or dropped labels unless it says so in the
    yielded dict."""
    names = ("context_exit_unmatched", "context_label_drops", "labels_dropped")
    before = {k: _native.stats()[k] for k in names}
    expected = dict.fromkeys(names, 0)
    yield expected
    assert ctx() == {}
    assert _native.labels_current() == {}
    after = _native.stats()
    assert {k: after[k] - before[k] for k in names} == expected


def run(coro):
    return asyncio.run(coro)


# ------------------------------------------------------------ semantics


def test_interleaved_tasks_keep_their_own_labels():
    seen = {"a": [], "b": []}

    async def handler(kind):
        with pyroscope.tag_wrapper({"route": kind}):
            for _ in range(50):
                seen[kind].append(ctx())
                await asyncio.sleep(0)
        seen[kind].append(ctx())

    async def main():
        await asyncio.gather(handler("a"), handler("b"))
        return ctx()

    assert run(main()) == {}
    for kind in "ab":
        assert seen[kind][:-1] == [{"route": kind}] * 50
        assert seen[kind][-1] == {}
    # The thread itself was never labelled.
    assert _native.labels_current() == {}


def test_child_tasks_inherit_and_do_not_leak_back():
    async def child(n):
        inherited = ctx()
        with pyroscope.tag_wrapper({"child": str(n)}):
            await asyncio.sleep(0)
            mine = ctx()
        return inherited, mine, ctx()

    async def main():
        with pyroscope.tag_wrapper({"request": "r1"}):
            results = await asyncio.gather(*(child(n) for n in range(5)))
            assert ctx() == {"request": "r1"}
        return results, ctx()

    results, after = run(main())
    assert after == {}
    for n, (inherited, mine, left) in enumerate(results):
        assert inherited == {"request": "r1"}
        assert mine == {"request": "r1", "child": str(n)}
        assert left == {"request": "r1"}


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.TaskGroup is 3.11+")
def test_task_group():
    async def worker(n, results):
        with pyroscope.tag_wrapper({"worker": str(n)}):
            for _ in range(3):
                await asyncio.sleep(0)
            results[n] = ctx()

    async def main():
        results = {}
        with pyroscope.tag_wrapper({"group": "g"}):
            async with asyncio.TaskGroup() as tg:
                for n in range(4):
                    tg.create_task(worker(n, results))
        return results, ctx()

    results, after = run(main())
    assert after == {}
    assert results == {n: {"group": "g", "worker": str(n)} for n in range(4)}


def test_to_thread_carries_the_context():
    def blocking():
        return ctx(), _native.labels_current(), threading.get_ident()

    async def main():
        with pyroscope.tag_wrapper({"route": "/export"}):
            inside = await asyncio.to_thread(blocking)
        return inside, ctx()

    (labels, thread_labels, ident), after = run(main())
    assert ident != threading.get_ident()
    assert labels == {"route": "/export"}
    assert thread_labels == {}  # the worker thread itself stays unlabelled
    assert after == {}


def test_cancellation_inside_a_block():
    state = {}

    async def victim(started):
        with pyroscope.tag_wrapper({"route": "/slow"}):
            started.set()
            try:
                await asyncio.sleep(60)
            finally:
                state["in_finally"] = ctx()
        state["after"] = ctx()  # never reached: the cancel propagates

    async def main():
        started = asyncio.Event()
        with pyroscope.tag_wrapper({"outer": "main"}):
            task = asyncio.create_task(victim(started))
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return ctx()

    assert run(main()) == {"outer": "main"}
    assert state == {"in_finally": {"outer": "main", "route": "/slow"}}


def test_ten_thousand_tasks_inside_tag_wrapper():
    n = 10_000

    async def handler(i, release, wrong):
        with pyroscope.tag_wrapper({"task": str(i)}):
            await release.wait()  # every task is inside its block now
            if ctx() != {"task": str(i)}:
                wrong.append(i)
        if ctx() != {}:
            wrong.append(-i)

    async def main():
        release, wrong = asyncio.Event(), []
        tasks = [asyncio.create_task(handler(i, release, wrong)) for i in range(n)]
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(*tasks)
        return wrong

    assert run(main()) == []


def test_shared_instance_across_threads():
    shared = pyroscope.tag_wrapper({"job": "shared"})
    inside = threading.Barrier(8, timeout=30)
    results = [None] * 8
    errors = []

    def worker(i):
        try:
            with shared:
                with shared:  # re-entered: nesting of one instance
                    inside.wait()  # all 8 threads are inside at once
                    during = ctx()
                inside.wait()
            # Leave in reverse order of arrival, so exits interleave.
            results[i] = (during, ctx(), _native.labels_current())
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert results == [({"job": "shared"}, {}, {})] * 8


def test_threads_are_isolated():
    inside = threading.Barrier(2, timeout=10)
    seen = {}

    def worker():
        with pyroscope.tag_wrapper({"who": "worker"}):
            inside.wait()
            seen["worker"] = ctx()
            inside.wait()

    t = threading.Thread(target=worker)
    t.start()
    with pyroscope.tag_wrapper({"who": "main"}):
        inside.wait()
        seen["main"] = ctx()
        inside.wait()
    t.join(10)
    assert seen == {"main": {"who": "main"}, "worker": {"who": "worker"}}


def test_async_decorator():
    @pyroscope.tag_wrapper({"job": "async"})
    async def job(x):
        await asyncio.sleep(0)
        return x, ctx()

    @pyroscope.tag_wrapper({"job": "sync"})
    def sync_job():
        return ctx()

    async def main():
        return await asyncio.gather(job(1), job(2)), sync_job(), ctx()

    assert asyncio.iscoroutinefunction(job)
    assert job.__name__ == "job"
    got, sync_seen, after = run(main())
    assert got == [(1, {"job": "async"}), (2, {"job": "async"})]
    assert sync_seen == {"job": "sync"}
    assert after == {}


def test_exit_in_another_context_is_counted_not_raised(caplog, expect_counts):
    import contextvars

    wrapper = pyroscope.tag_wrapper({"k": "v"})
    copy = contextvars.copy_context()
    copy.run(wrapper.__enter__)  # entered in a copy, exited here
    with caplog.at_level("WARNING", logger="pyroscope"):
        assert wrapper.__exit__(None, None, None) is False
    assert "did not enter" in caplog.text
    assert copy.run(ctx) == {"k": "v"}  # the copy's block is still open
    assert copy.run(wrapper.__exit__, None, None, None) is False
    assert copy.run(ctx) == {}
    expect_counts["context_exit_unmatched"] = 1


def test_blocks_never_exited_are_freed_without_recursion():
    import contextvars

    def leak():
        for _ in range(100_000):
            pyroscope.tag_wrapper({"depth": "x"}).__enter__()
        return ctx()

    copy = contextvars.copy_context()
    assert copy.run(leak) == {"depth": "x"}
    del copy  # releases a chain of 100 000 entries: must not recurse


def test_label_limit_is_counted(expect_counts):
    hundred = {f"k{i}": "v" for i in range(100)}
    with pyroscope.tag_wrapper(hundred):
        with pyroscope.tag_wrapper({"extra": "v"}):
            assert ctx() == hundred  # the block runs, without its label
        assert ctx() == hundred
        with pyroscope.tag_wrapper({"k0": "other"}):  # an override: allowed
            assert ctx()["k0"] == "other"
    # Counted (stats()["labels_dropped"]); logged at most once a minute, so
    # the text is checked in test_labels.py::test_fix_warning_names_the_label.
    expect_counts["labels_dropped"] = 1


def test_fork_inside_a_block(profile_dir):
    # The child inherits the forking task's context: its samples carry the
    # block's labels, and leaving the block works there as in the parent.
    code = '''
import os, sys, time
import pyroscope
from pyroscope import _native

def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

def child_work():
    spin(0.3)

pyroscope.configure(application_name="ctx.fork", output_dir=sys.argv[1],
                    sample_rate=200, upload_interval=0.5)
with pyroscope.tag_wrapper({"route": "/fork"}):
    pid = os.fork()
    if pid == 0:
        ok = _native.context_labels() == {"route": "/fork"}
        child_work()
if pid == 0:
    ok = ok and _native.context_labels() == {}
    pyroscope.shutdown()
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
pyroscope.shutdown()
sys.exit(os.waitstatus_to_exitcode(status))
'''
    check_run(code, args=(profile_dir,), timeout=120)
    seen = label_of_work(profile_dir, "route", ["child_work"])
    assert_own(seen, {"child_work": "/fork"})


def test_context_and_thread_labels_both_reach_samples(profile_dir):
    # A thread tag and a context label on the same samples; the context's
    # value wins for a key set in both.
    code = '''
import sys, time
import pyroscope

def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

pyroscope.configure(application_name="ctx.merge", output_dir=sys.argv[1],
                    sample_rate=200, upload_interval=0.5, gil_only=False)
pyroscope.add_thread_tag("host", "h1")
pyroscope.add_thread_tag("route", "thread")
with pyroscope.tag_wrapper({"route": "/ctx"}):
    spin(0.4)
pyroscope.shutdown()
'''
    check_run(code, args=(profile_dir,), timeout=60)
    samples = [s for s in pprof_reader.samples(pprof_reader.load_dir(profile_dir))
               if "spin" in {f[0] for f in s["stack"]}]
    assert sum(s["values"][1] for s in samples) >= 20
    for s in samples:
        assert s["labels"] == {"host": "h1", "route": "/ctx"}, s["labels"]


# ------------------------------------------------------------- profiles

# Handlers of each kind spin on the CPU in their own function for ~2 ms,
# then yield to the other kinds' handlers on the same OS thread.
WORKLOAD = '''
import json, sys, time
import pyroscope

def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass

def work_a():
    spin(0.002)

def work_b():
    spin(0.002)

def work_c():
    spin(0.004)

def work_after():
    spin(0.15)

WORK = {"a": work_a, "b": work_b, "c": work_c}
ROUNDS = 60

pyroscope.configure(application_name="ctx.e2e", output_dir=sys.argv[1],
                    sample_rate=200, upload_interval=0.5)
'''


def label_of_work(profile_dir, key, funcs):
    """{function: [label value of each sample whose stack holds it]}."""
    out = {f: [] for f in funcs}
    for s in pprof_reader.samples(pprof_reader.load_dir(profile_dir)):
        names = {f[0] for f in s["stack"]}
        for f in funcs:
            if f in names:
                out[f] += [s["labels"].get(key)] * s["values"][1]
    return out


def assert_own(seen, want, minimum=15):
    """Every kind's samples carry its own value, never another's. A sample
    whose task switched while the sampler read it goes unlabelled (counted
    in stats()["context_switched"]): allowed for 3 % of samples. Per-thread
    labels put the other kind's labels on about half of them."""
    for func, values in seen.items():
        assert len(values) >= minimum, (func, len(values))
        wrong = [v for v in values if v != want[func] and v is not None]
        assert wrong == [], (func, len(values), wrong[:20])
        unlabelled = [v for v in values if v != want[func]]
        assert len(unlabelled) <= max(2, len(values) * 0.03), (func, len(values))


# Two tasks (or greenlets) take turns on one thread at 1 000 Hz, each in
# its own function for ~0.1 ms: a task switch every few samples, so a
# sampler that reads the stack and the context a moment apart pairs one
# task's stack with the other's labels (issue 31: 1-4 % of samples).
SWITCHING = {
    "asyncio": '''
import asyncio
async def task(name, fn):
    with pyroscope.tag_wrapper({"task": name}):
        while time.monotonic() < END:
            fn()
            await asyncio.sleep(0)
async def main():
    await asyncio.gather(task("a", burn_a), task("b", burn_b))
asyncio.run(main())
''',
    "gevent": '''
import gevent
def task(name, fn):
    with pyroscope.tag_wrapper({"task": name}):
        while time.monotonic() < END:
            fn()
            gevent.sleep(0)
gevent.joinall([gevent.spawn(task, "a", burn_a), gevent.spawn(task, "b", burn_b)])
'''}


@pytest.mark.parametrize("kind", sorted(SWITCHING))
def test_task_switches_never_carry_the_other_tasks_labels(profile_dir, kind):
    if kind == "gevent":
        pytest.importorskip("gevent")
    code = '''
import json, sys, time
import pyroscope
pyroscope.configure(application_name="ctx.switch", output_dir=sys.argv[1],
                    sample_rate=1000, upload_interval=2)
def burn_a():
    x = 0
    for i in range(3000): x += i
def burn_b():
    x = 0
    for i in range(3000): x += i
END = time.monotonic() + 6
''' + SWITCHING[kind] + '''
print(json.dumps(pyroscope.stats()))
pyroscope.shutdown()
'''
    r = check_run(code, args=(profile_dir,), timeout=120)
    stats = json.loads(r.stdout.strip().splitlines()[-1])
    seen = label_of_work(profile_dir, "task", ["burn_a", "burn_b"])
    assert_own(seen, {"burn_a": "a", "burn_b": "b"}, minimum=200)
    assert stats["context_switched"] <= 0.03 * stats["stacks_walked"], stats


def test_interleaved_asyncio_handlers_profile(profile_dir):
    code = WORKLOAD + '''
import asyncio

async def handler(kind):
    with pyroscope.tag_wrapper({"route": "/" + kind}):
        for _ in range(ROUNDS):
            if kind == "c":
                await asyncio.to_thread(work_c)   # labels go along to the thread
            else:
                WORK[kind]()
            await asyncio.sleep(0)

async def main():
    await asyncio.gather(*(handler(k) for _ in range(3) for k in "abc"))

asyncio.run(main())
work_after()
pyroscope.shutdown()
'''
    check_run(code, args=(profile_dir,), timeout=120)
    seen = label_of_work(profile_dir, "route", ["work_a", "work_b", "work_c", "work_after"])
    assert_own(seen, {"work_a": "/a", "work_b": "/b", "work_c": "/c", "work_after": None},
               minimum=15)


def test_otel_spans_label_their_own_tasks(profile_dir):
    code = WORKLOAD + '''
import asyncio
from opentelemetry.sdk.trace import TracerProvider
from pyroscope.otel import PyroscopeSpanProcessor

provider = TracerProvider()
provider.add_span_processor(PyroscopeSpanProcessor())
tracer = provider.get_tracer("ctx")
ids = {}

async def handler(kind):
    with tracer.start_as_current_span("GET /" + kind) as span:
        ids[format(span.get_span_context().span_id, "016x")] = kind
        for _ in range(ROUNDS):
            WORK[kind]()
            await asyncio.sleep(0)

async def main():
    await asyncio.gather(*(handler(k) for _ in range(4) for k in "ab"))

asyncio.run(main())
work_after()
pyroscope.shutdown()
print(json.dumps(ids))
'''
    r = check_run(code, args=(profile_dir,), timeout=120)
    ids = json.loads(r.stdout.strip().splitlines()[-1])
    assert sorted(ids.values()) == ["a"] * 4 + ["b"] * 4
    seen = label_of_work(profile_dir, "span_id", ["work_a", "work_b", "work_after"])
    kinds = {f: [ids.get(v) for v in values] for f, values in seen.items()}
    assert_own(kinds, {"work_a": "a", "work_b": "b", "work_after": None})
    names = label_of_work(profile_dir, "span_name", ["work_a", "work_b"])
    assert_own(names, {"work_a": "GET /a", "work_b": "GET /b"})


def test_gevent_greenlets_profile(profile_dir):
    if FREE_THREADED:
        pytest.skip("gevent publishes no free-threaded (cp313t) wheel: greenlets are "
                    "checked by test_greenlets_profile there")
    pytest.importorskip("gevent")
    code = '''
from gevent import monkey
monkey.patch_all()
import gevent
''' + WORKLOAD + '''

def handler(kind):
    with pyroscope.tag_wrapper({"route": "/" + kind}):
        for _ in range(ROUNDS):
            WORK[kind]()
            gevent.sleep(0)

gevent.joinall([gevent.spawn(handler, k) for _ in range(4) for k in "ab"])
work_after()
pyroscope.shutdown()
'''
    check_run(code, args=(profile_dir,), timeout=120)
    seen = label_of_work(profile_dir, "route", ["work_a", "work_b", "work_after"])
    assert_own(seen, {"work_a": "/a", "work_b": "/b", "work_after": None})


def test_greenlets_profile(profile_dir):
    # greenlet itself (gevent's base; the free-threaded lane has greenlet
    # without gevent, which publishes no cp313t wheel): each greenlet runs
    # its own context, switched round-robin on one thread.
    code = '''
import greenlet
''' + WORKLOAD + '''

def handler(kind):
    with pyroscope.tag_wrapper({"route": "/" + kind}):
        for _ in range(ROUNDS):
            WORK[kind]()
            main.switch()

main = greenlet.getcurrent()
running = [(greenlet.greenlet(handler), k) for _ in range(4) for k in "ab"]
while running:
    for g, kind in running:
        g.switch(kind)  # starts handler(kind), later resumes its main.switch()
    running = [(g, kind) for g, kind in running if not g.dead]
work_after()
pyroscope.shutdown()
'''
    check_run(code, args=(profile_dir,), timeout=120)
    seen = label_of_work(profile_dir, "route", ["work_a", "work_b", "work_after"])
    assert_own(seen, {"work_a": "/a", "work_b": "/b", "work_after": None})
