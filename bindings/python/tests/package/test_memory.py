"""The memory profile (memory=True): sampled allocations and the sampled live
heap, attributed to functions, labels and spans, decoded from the pprof
files a fresh interpreter writes (and by ``go tool pprof`` where Go is).

Truth comes from objects of a known size (``sys.getsizeof(bytes(n))`` is the
one allocation bytes(n) makes). The interval is 64 KiB here, so that a few
hundred MiB give thousands of samples and the 10 % bound holds every run;
the core's C test checks unbiasedness at the default 512 KiB.
"""

import json
import os
import shutil
import subprocess

import pytest

from conftest import check_run
import pprof_reader

import pyroscope
from pyroscope import _native

# Free-threaded builds refuse memory=True (test_free_threaded_refuses_it).
needs_gil = pytest.mark.skipif(_native.free_threaded,
                               reason="memory profiles need a GIL build for now")

GO = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go")
                            else None)
TYPES = [("alloc_objects", "count"), ("alloc_space", "bytes"),
         ("inuse_objects", "count"), ("inuse_space", "bytes")]


def sums(profiles, leaf):
    """Summed values of the samples whose leaf frame is `leaf`, and their
    label sets."""
    total = [0, 0, 0, 0]
    labels = []
    for p in profiles:
        assert p["sample_types"] == TYPES
        assert p["period_type"] == ("space", "bytes")
        for s in p["samples"]:
            if s["stack"] and s["stack"][0][0] == leaf:
                total = [a + b for a, b in zip(total, s["values"])]
                labels.append(s["labels"])
    return total, labels


def memory_profiles(path):
    return [p for p in pprof_reader.load_dir(path)
            if p["sample_types"] and p["sample_types"][0][0] == "alloc_objects"]


@needs_gil
def test_allocations_and_live_heap_by_label_and_span(tmp_path):
    out = tmp_path / "out"
    r = check_run("""
        import itertools, json, os, shutil, sys
        import pyroscope
        from opentelemetry.sdk.trace import TracerProvider
        from pyroscope.otel import PyroscopeSpanProcessor

        out = sys.argv[1]
        pyroscope.configure(application_name="mem.test", output_dir=out + "/all",
                            upload_interval=3600, memory=True, memory_interval=65536,
                            oncpu=False)
        provider = TracerProvider()
        provider.add_span_processor(PyroscopeSpanProcessor())
        tracer = provider.get_tracer("mem")

        # Loops that allocate nothing else (no int objects, no list growth),
        # so that the objects counted are the bytes objects alone.
        def alloc_freed(n):
            for _ in itertools.repeat(None, n):
                b = bytes(65536)
                del b

        kept = [None] * 2048
        slots = list(range(2048))          # ints made now, not in the loop
        def alloc_keep(n):
            for i in slots[:n]:
                kept[i] = bytes(65536)

        FREED, KEPT = 4096, 2048           # 256 MiB allocated and freed, 128 MiB kept
        with tracer.start_as_current_span("freeing") as s1, pyroscope.tag_wrapper({"req": "a"}):
            alloc_freed(FREED)
        with tracer.start_as_current_span("keeping") as s2, pyroscope.tag_wrapper({"req": "b"}):
            alloc_keep(KEPT)

        def phase(name):
            assert pyroscope.flush(30)
            os.rename(out + "/all", out + "/" + name)
            os.mkdir(out + "/all")

        phase("p1")
        phase("p2")                        # still alive, nothing allocated
        kept[:] = [None] * len(kept)
        phase("p3")                        # freed
        st = pyroscope.stats()
        pyroscope.shutdown()
        print(json.dumps({"size": sys.getsizeof(bytes(65536)), "freed": FREED, "kept": KEPT,
                          "span1": format(s1.get_span_context().span_id, "016x"),
                          "span2": format(s2.get_span_context().span_id, "016x"),
                          "stats": {k: v for k, v in st.items() if k.startswith("memory")}}))
    """, args=(str(out),), timeout=120)
    info = json.loads(r.stdout.strip().splitlines()[-1])
    size = info["size"]
    assert info["stats"]["memory_table_full"] == 0, info

    p1 = memory_profiles(out / "p1")
    assert p1, os.listdir(out / "p1")
    freed, freed_labels = sums(p1, "alloc_freed")
    kept, kept_labels = sums(p1, "alloc_keep")
    want_freed, want_kept = info["freed"] * size, info["kept"] * size
    assert abs(freed[1] - want_freed) <= 0.10 * want_freed, (freed, want_freed)
    assert abs(freed[0] - info["freed"]) <= 0.10 * info["freed"], freed
    assert freed[3] == 0 and freed[2] == 0, freed          # nothing of it alive
    assert abs(kept[1] - want_kept) <= 0.10 * want_kept, (kept, want_kept)
    assert abs(kept[3] - want_kept) <= 0.10 * want_kept, (kept, want_kept)
    assert abs(kept[2] - info["kept"]) <= 0.10 * info["kept"], kept
    for lb in freed_labels:
        assert lb.get("req") == "a" and lb.get("span_name") == "freeing", lb
        assert lb.get("span_id") == info["span1"], lb
    for lb in kept_labels:
        assert lb.get("req") == "b" and lb.get("span_name") == "keeping", lb
        assert lb.get("span_id") == info["span2"], lb

    # Next period: still alive (in-use again), no new allocations.
    kept2, _ = sums(memory_profiles(out / "p2"), "alloc_keep")
    assert kept2[1] == 0 and abs(kept2[3] - want_kept) <= 0.10 * want_kept, kept2
    # Freed: gone from in-use.
    kept3, _ = sums(memory_profiles(out / "p3"), "alloc_keep")
    assert kept3[3] == 0 and kept3[2] == 0, kept3

    if GO:
        (path,) = [os.path.join(out / "p1", n) for n in os.listdir(out / "p1") if "-memory-" in n]
        top = subprocess.run([GO, "tool", "pprof", "-top", "-sample_index=inuse_space", path],
                             capture_output=True, text=True, timeout=120)
        assert top.returncode == 0, top.stderr
        assert "alloc_keep" in top.stdout, top.stdout
        assert "inuse_space" in top.stdout or "Type: inuse_space" in top.stdout, top.stdout


def test_memory_is_off_by_default_and_keywords_check(tmp_path):
    r = check_run("""
        import json, sys
        import pyroscope
        pyroscope.configure(application_name="mem.off", output_dir=sys.argv[1],
                            upload_interval=3600)
        x = [bytes(1000) for _ in range(10000)]
        pyroscope.shutdown()
        print(json.dumps(pyroscope.stats()["memory_sampled"]))
    """, args=(str(tmp_path),))
    assert json.loads(r.stdout.strip().splitlines()[-1]) == 0
    assert not [n for n in os.listdir(tmp_path) if "-memory-" in n]
    with pytest.raises(ValueError, match="memory_interval"):
        pyroscope.configure(application_name="x", output_dir=str(tmp_path),
                            memory=True, memory_interval=0)


@needs_gil
def test_anchor_keywords_turn_it_on(tmp_path):
    check_run("""
        import sys, warnings
        warnings.simplefilter("error")
        import pyroscope
        pyroscope.configure(application_name="mem.anchor", output_dir=sys.argv[1],
                            upload_interval=3600, mem_enabled=True,
                            mem_heap_sample_size=4096)
        x = [bytes(1000) for _ in range(1000)]
        assert pyroscope.stats()["memory_sampled"] > 0
        pyroscope.shutdown()
    """, args=(str(tmp_path),))


@needs_gil
def test_hostile_threads_fork_and_shutdown_while_allocating(tmp_path):
    """Eight threads allocate without pause while the process forks (each
    child allocates, flushes and exits), shuts the profiler down, keeps
    allocating with the hooks gone, and starts it again: no crash, no
    deadlock, every sampled object accounted for."""
    check_run("""
        import os, sys, threading, time
        import pyroscope
        out = sys.argv[1]
        def start():
            pyroscope.configure(application_name="mem.storm", output_dir=out,
                                upload_interval=0.2, memory=True, memory_interval=4096)
        start()
        stop = threading.Event()
        def storm(i):
            keep = []
            while not stop.is_set():
                with pyroscope.tag_wrapper({"worker": str(i)}):
                    keep.append([{"k": j} for j in range(50)])
                    if len(keep) > 200:
                        del keep[:100]
        threads = [threading.Thread(target=storm, args=(i,), daemon=True) for i in range(8)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                x = [bytes(2000) for _ in range(5000)]
                pyroscope.flush(10)
                os._exit(0 if pyroscope.stats()["memory_sampled"] > 0 else 3)
            _, status = os.waitpid(pid, 0)
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        pyroscope.shutdown()               # while the threads allocate
        time.sleep(0.2)
        start()
        time.sleep(0.3)
        st = pyroscope.stats()
        assert st["memory_sampled"] > 0, st
        stop.set()
        for t in threads:
            t.join()
        pyroscope.shutdown()
    """, args=(str(tmp_path),), timeout=120)
    assert [n for n in os.listdir(tmp_path) if "-memory-" in n]


@needs_gil
def test_tracemalloc_before_and_after_our_hooks(tmp_path):
    """Allocator hooks chain: tracemalloc started after ours keeps working
    when we stop (ours stays as a pass-through under it) and sees its own
    stop; started before ours, it is wrapped and goes on counting."""
    check_run("""
        import sys, tracemalloc
        import pyroscope
        def start():
            pyroscope.configure(application_name="mem.tm", output_dir=sys.argv[1],
                                upload_interval=3600, memory=True, memory_interval=4096)
        start()
        tracemalloc.start()
        x = [bytes(100) for _ in range(10000)]
        pyroscope.shutdown()                      # ours stays, passing calls on
        y = [bytes(100) for _ in range(10000)]
        cur, _ = tracemalloc.get_traced_memory()
        assert cur > 2 * 10000 * 100, cur
        del x, y
        tracemalloc.stop()
        start()                                   # reuses the hooks still in the chain
        z = [bytes(100) for _ in range(10000)]
        assert pyroscope.stats()["memory_sampled"] > 0
        pyroscope.shutdown()
        tracemalloc.start()                       # before ours this time
        start()
        w = [bytes(100) for _ in range(10000)]
        assert pyroscope.stats()["memory_sampled"] > 0
        assert tracemalloc.get_traced_memory()[0] > 10000 * 100
        pyroscope.shutdown()
        tracemalloc.stop()
    """, args=(str(tmp_path),))


@pytest.mark.skipif(not _native.free_threaded, reason="a free-threaded build's answer")
def test_free_threaded_refuses_it(tmp_path):
    with pytest.raises(ValueError, match="free-threaded"):
        pyroscope.configure(application_name="x", output_dir=str(tmp_path), memory=True)
    assert not pyroscope.is_running()
