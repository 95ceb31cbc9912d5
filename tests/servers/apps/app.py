"""Workload for tests/servers: two burner threads under two label sets,
2:1 in CPU, the smaller one inside a real OpenTelemetry root span. The
profiler's settings come from the environment (PYROSCOPE_*, OTEL_*).
Prints one JSON line: each burner's measured thread CPU (ns) and the span.

    app.py UNIT APP       the CPU workload (UNIT: CPU seconds of the small burner)
    app.py memory APP     the memory workload: alloc_churn makes and frees
                          CHURN bytes objects under worker=a and a span,
                          alloc_keep keeps KEEP under worker=b and another
                          span, alive until shutdown (one period: the
                          in-use snapshot at shutdown holds them); the
                          truth in bytes (sys.getsizeof: the one allocation
                          bytes(n) makes) and the spans.
    app.py memory-periods APP   the same, then the kept ones held for two
                          more periods (from "kept_at", wall time), freed
                          ("freed_at"), and two periods more with a few
                          objects kept under worker=c."""
import itertools
import json
import sys
import threading
import time

import pyroscope
from opentelemetry.sdk.trace import TracerProvider
from pyroscope.otel import PyroscopeSpanProcessor


def burn_a(seconds, out):
    with pyroscope.tag_wrapper({"worker": "a"}):
        t = time.thread_time()
        while time.thread_time() - t < seconds:
            pass
        out["a"] = int((time.thread_time() - t) * 1e9)


def burn_b(seconds, out, tracer):
    with tracer.start_as_current_span("burn-b-root") as span:
        with pyroscope.tag_wrapper({"worker": "b"}):
            t = time.thread_time()
            while time.thread_time() - t < seconds:
                pass
            out["b"] = int((time.thread_time() - t) * 1e9)
    out["span_id"] = format(span.context.span_id, "016x")
    out["trace_id"] = format(span.context.trace_id, "032x")


def cpu_workload(unit, tracer, out):
    ts = [threading.Thread(target=burn_a, args=(2 * unit, out)),
          threading.Thread(target=burn_b, args=(unit, out, tracer))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


SIZE, CHURN, KEEP = 65536, 4096, 1024  # 256 MiB made and freed, 64 MiB kept
kept = [None] * KEEP
slots = list(range(KEEP))  # ints made now, not in the loop


# Loops that allocate nothing else (no int objects, no list growth), so the
# bytes objects are all they allocate.
def alloc_churn(n):
    for _ in itertools.repeat(None, n):
        b = bytes(SIZE)
        del b


def alloc_keep(n):
    for i in slots[:n]:
        kept[i] = bytes(SIZE)


def memory_workload(tracer, out):
    with tracer.start_as_current_span("churn") as s1, pyroscope.tag_wrapper({"worker": "a"}):
        alloc_churn(CHURN)
    with tracer.start_as_current_span("keep") as s2, pyroscope.tag_wrapper({"worker": "b"}):
        alloc_keep(KEEP)
    size = sys.getsizeof(bytes(SIZE))
    out.update(churn_bytes=CHURN * size, keep_bytes=KEEP * size,
               span_a=format(s1.get_span_context().span_id, "016x"),
               span_b=format(s2.get_span_context().span_id, "016x"))


def wait_periods(n):
    """Until the profiler has cut n more periods (their pace, not a sleep:
    a loaded machine's run late), at most a minute."""
    end, deadline = pyroscope.stats()["periods"] + n, time.time() + 60
    while pyroscope.stats()["periods"] < end and time.time() < deadline:
        time.sleep(0.05)


def hold_then_free(out):
    out["kept_at"] = time.time()
    wait_periods(2)
    kept[:] = [None] * KEEP
    out["freed_at"] = time.time()
    with pyroscope.tag_wrapper({"worker": "c"}):  # in use after the free
        out["late"] = [bytes(SIZE) for _ in range(64)]
    wait_periods(2)
    out["late"] = len(out["late"])


pyroscope.configure(application_name=sys.argv[2])
provider = TracerProvider()
provider.add_span_processor(PyroscopeSpanProcessor())
tracer = provider.get_tracer("servers")
out = {}
if sys.argv[1].startswith("memory"):
    memory_workload(tracer, out)
    if sys.argv[1] == "memory-periods":
        hold_then_free(out)
else:
    cpu_workload(float(sys.argv[1]), tracer, out)
pyroscope.shutdown()
out["stats"] = pyroscope.stats()
print(json.dumps(out))
