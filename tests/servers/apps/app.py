"""Workload for tests/servers: two burner threads under two label sets,
2:1 in CPU, the smaller one inside a real OpenTelemetry root span. The
profiler's settings come from the environment (PYROSCOPE_*, OTEL_*).
Prints one JSON line: each burner's measured thread CPU (ns) and the span."""
import json
import sys
import threading
import time

import pyroscope
from opentelemetry.sdk.trace import TracerProvider
from pyroscope.otel import PyroscopeSpanProcessor

UNIT = float(sys.argv[1])  # CPU seconds of the small burner


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


pyroscope.configure(application_name=sys.argv[2])
provider = TracerProvider()
provider.add_span_processor(PyroscopeSpanProcessor())
tracer = provider.get_tracer("servers")
out = {}
ts = [threading.Thread(target=burn_a, args=(2 * UNIT, out)),
      threading.Thread(target=burn_b, args=(UNIT, out, tracer))]
for t in ts:
    t.start()
for t in ts:
    t.join()
pyroscope.shutdown()
out["stats"] = pyroscope.stats()
print(json.dumps(out))
