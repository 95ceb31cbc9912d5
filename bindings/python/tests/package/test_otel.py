"""pyroscope.otel.PyroscopeSpanProcessor with the real opentelemetry-sdk.

In-process tests check the labels of the calling thread (the native label
stack works without a running profiler); the end-to-end test profiles a
fresh interpreter and reads the span labels back from the written pprof.
"""

import json
import logging
import threading

import pytest

from conftest import check_run
import pprof_reader

from opentelemetry import trace as trace_api
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import pyroscope
from pyroscope import _native
from pyroscope.otel import PROFILE_ID_ATTRIBUTE, PyroscopeSpanProcessor


def hex_id(span):
    return format(span.context.span_id, "016x")


def span_labels(span, name):
    """The labels the processor pushes for span: its span and trace ids, its name."""
    return {"span_id": hex_id(span), "trace_id": format(span.context.trace_id, "032x"),
            "span_name": name}


@pytest.fixture(autouse=True)
def clean_labels():
    """Every test starts and must end with this thread's labels empty."""
    assert _native.labels_depth() == 0 and _native.labels_current() == {}
    yield
    depth, current = _native.labels_depth(), _native.labels_current()
    while _native.labels_depth():  # do not let one failure spoil the next tests
        _native.labels_pop()
    assert (depth, current) == (0, {}), "labels left behind"


class SmallIds(IdGenerator):
    """Span ids with leading zero digits, to check the 16-digit padding."""

    def __init__(self):
        self.next = 0x41

    def generate_span_id(self):
        self.next += 1
        return self.next

    def generate_trace_id(self):
        return 0x5EED


def make(id_generator=None, **kw):
    """(tracer, processor, exporter) on a provider of their own."""
    provider = TracerProvider(id_generator=id_generator)
    proc = PyroscopeSpanProcessor(**kw)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(proc)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), proc, exporter


def finished(exporter, name):
    (span,) = [s for s in exporter.get_finished_spans() if s.name == name]
    return span


def test_is_a_span_processor_and_needs_no_profiler():
    assert isinstance(PyroscopeSpanProcessor(), SpanProcessor)
    assert not pyroscope.is_running()


def test_root_span_labels_thread_and_sets_profile_id():
    tracer, proc, exporter = make()
    with tracer.start_as_current_span("checkout") as root:
        rid = hex_id(root)
        assert _native.labels_current() == span_labels(root, "checkout")
        with tracer.start_as_current_span("db") as child:
            # a local child runs under the root's labels
            assert _native.labels_current() == span_labels(root, "checkout")
            assert hex_id(child) != rid
        assert _native.labels_current() == span_labels(root, "checkout")
    assert _native.labels_current() == {} and _native.labels_depth() == 0

    root_done = finished(exporter, "checkout")
    assert root_done.attributes[PROFILE_ID_ATTRIBUTE] == rid
    assert rid == format(root_done.context.span_id, "016x") and len(rid) == 16
    assert PROFILE_ID_ATTRIBUTE not in finished(exporter, "db").attributes
    assert proc.errors == 0


def test_span_id_is_16_lowercase_hex_digits():
    tracer, _, exporter = make(id_generator=SmallIds())
    with tracer.start_as_current_span("small"):
        assert _native.labels_current()["span_id"] == "0000000000000042"
        assert _native.labels_current()["trace_id"] == "0" * 28 + "5eed"
    assert finished(exporter, "small").attributes[PROFILE_ID_ATTRIBUTE] == "0000000000000042"


def test_outer_tag_wrapper_labels_restored():
    tracer, proc, _ = make()
    with pyroscope.tag_wrapper({"team": "payments"}):
        with tracer.start_as_current_span("checkout") as root:
            assert _native.labels_current() == dict(span_labels(root, "checkout"),
                                                    team="payments")
        assert _native.labels_current() == {"team": "payments"}
        assert _native.labels_depth() == 1
    assert proc.errors == 0


def test_remote_parent_makes_a_local_root():
    tracer, _, exporter = make()
    remote = trace_api.SpanContext(trace_id=0x1234, span_id=0xABCD, is_remote=True,
                                   trace_flags=trace_api.TraceFlags(trace_api.TraceFlags.SAMPLED))
    ctx = trace_api.set_span_in_context(trace_api.NonRecordingSpan(remote))
    with tracer.start_as_current_span("server", context=ctx) as span:
        assert span.parent.span_id == 0xABCD  # really a child of the remote span
        sid = hex_id(span)
        assert sid != format(0xABCD, "016x")
        assert _native.labels_current() == span_labels(span, "server")
    assert _native.labels_current() == {}
    assert finished(exporter, "server").attributes[PROFILE_ID_ATTRIBUTE] == sid


def test_label_every_span_option():
    tracer, proc, exporter = make(root_span_only=False)
    with tracer.start_as_current_span("outer") as outer:
        with tracer.start_as_current_span("inner") as inner:
            assert _native.labels_current() == span_labels(inner, "inner")
        assert _native.labels_current() == span_labels(outer, "outer")
    assert _native.labels_current() == {}
    assert finished(exporter, "inner").attributes[PROFILE_ID_ATTRIBUTE] == hex_id(inner)
    assert finished(exporter, "outer").attributes[PROFILE_ID_ATTRIBUTE] == hex_id(outer)
    assert proc.errors == 0


def test_exception_inside_spans_restores_labels():
    tracer, proc, _ = make(root_span_only=False)
    with pyroscope.tag_wrapper({"k": "v"}):
        with pytest.raises(KeyError):
            with tracer.start_as_current_span("root"):
                with tracer.start_as_current_span("child"):
                    raise KeyError("boom")
        assert _native.labels_current() == {"k": "v"}
    assert proc.errors == 0


def test_span_name_made_a_valid_label_value():
    tracer, proc, _ = make()
    with tracer.start_as_current_span("GET /a?b=c,{x}"):
        assert _native.labels_current()["span_name"] == "GET /a?b_c__x_"
    with tracer.start_as_current_span("é" * 3000):  # over the 2048-byte value limit
        name = _native.labels_current()["span_name"]
        assert name == "é" * 1024 and len(name.encode()) == 2048
    assert proc.errors == 0


def run_in_thread(fn):
    out = {}

    def body():
        try:
            out["result"] = fn()
        except BaseException as exc:  # reported to the test below
            out["error"] = exc
    t = threading.Thread(target=body)
    t.start()
    t.join(10)
    assert not t.is_alive()
    if "error" in out:
        raise out["error"]
    return out.get("result")


def test_span_ended_on_another_thread():
    tracer, proc, _ = make()
    span = tracer.start_span("job")
    labels = span_labels(span, "job")
    assert _native.labels_current() == labels

    def end_elsewhere():
        with pyroscope.tag_wrapper({"worker": "1"}):
            span.end()
            # the ending thread's labels are its own, untouched
            seen = (_native.labels_current(), _native.labels_depth())
        return seen, (_native.labels_current(), _native.labels_depth())
    inside, after = run_in_thread(end_elsewhere)
    assert inside == ({"worker": "1"}, 1)
    assert after == ({}, 0)

    # Documented limit: the starting thread keeps the labels until it next
    # calls the processor; then the ended push is popped.
    assert _native.labels_current() == labels and _native.labels_depth() == 1
    with tracer.start_as_current_span("next") as nxt:
        assert _native.labels_current() == span_labels(nxt, "next")
        assert _native.labels_depth() == 1
    assert _native.labels_current() == {} and _native.labels_depth() == 0
    assert proc.errors == 0


@pytest.mark.parametrize("poke_at_depth_0", [True, False])
def test_span_ended_elsewhere_inside_starting_threads_tag_wrapper(poke_at_depth_0):
    tracer, proc, _ = make()
    with pyroscope.tag_wrapper({"a": "1"}):
        span = tracer.start_span("job")
        run_in_thread(span.end)
        assert _native.labels_current() == dict(span_labels(span, "job"), a="1")
    # tag_wrapper restored its own starting point, which undid the span push
    # too; the processor must notice and not pop anything more.
    assert _native.labels_current() == {} and _native.labels_depth() == 0
    if poke_at_depth_0:
        tracer.start_span("poke").end()
        assert proc._thread_pushes() == []  # the undone push is forgotten, not kept
    # Two pushes of others now sit where the span's was: still not ours.
    with pyroscope.tag_wrapper({"b": "2"}), pyroscope.tag_wrapper({"c": "3"}):
        with tracer.start_as_current_span("next"):
            pass
        assert _native.labels_current() == {"b": "2", "c": "3"}
        assert _native.labels_depth() == 2
    assert proc.errors == 0


def test_span_ended_under_a_later_push_on_same_thread():
    tracer, proc, _ = make()
    span = tracer.start_span("job")
    labels = span_labels(span, "job")
    with pyroscope.tag_wrapper({"inner": "x"}):
        span.end()  # popping now would undo the tag_wrapper's push
        assert _native.labels_current() == dict(labels, inner="x")
        assert _native.labels_depth() == 2
    assert _native.labels_current() == labels  # tag_wrapper restored its start
    with tracer.start_as_current_span("next") as nxt:  # next call cleans up
        assert _native.labels_current() == span_labels(nxt, "next")
    assert _native.labels_current() == {} and _native.labels_depth() == 0
    assert proc.errors == 0


def test_ending_thread_with_its_own_span_labels_is_not_disturbed():
    tracer, proc, _ = make()
    span = tracer.start_span("job")

    def other():
        with tracer.start_as_current_span("own") as own:
            span.end()
            mine = _native.labels_current()
        return mine, span_labels(own, "own"), _native.labels_depth()
    mine, own_labels, depth_after = run_in_thread(other)
    assert mine == own_labels
    assert depth_after == 0
    tracer.start_span("poke").end()  # the starting thread cleans up here
    assert _native.labels_current() == {} and _native.labels_depth() == 0
    assert proc.errors == 0


def test_native_errors_are_logged_not_raised(caplog):
    tracer, proc, exporter = make()
    # 99 labels + span_id + trace_id + span_name exceed the 100-labels-per-set limit.
    with pyroscope.tag_wrapper({f"k{i}": "v" for i in range(99)}):
        before = _native.labels_current()
        with caplog.at_level(logging.WARNING, logger="pyroscope"):
            with tracer.start_as_current_span("big"):
                assert _native.labels_current() == before
        assert _native.labels_current() == before
    assert proc.errors == 1
    assert any(r.name == "pyroscope" and "on_start" in r.getMessage() for r in caplog.records)
    # the span itself is fine; it gets no profile id, as no samples carry it
    assert PROFILE_ID_ATTRIBUTE not in finished(exporter, "big").attributes


def test_shutdown_and_force_flush():
    tracer, proc, exporter = make()
    assert proc.force_flush(1000) is True  # profiler not running: nothing to do
    proc.shutdown()
    with tracer.start_as_current_span("late"):
        assert _native.labels_current() == {}
    assert PROFILE_ID_ATTRIBUTE not in finished(exporter, "late").attributes


def test_import_without_and_with_opentelemetry():
    r = check_run("""
        import sys
        import pyroscope
        assert not [m for m in sys.modules if m.startswith("opentelemetry")], "imported otel"
        sys.modules["opentelemetry"] = None  # as if it were not installed
        try:
            import pyroscope.otel
        except ImportError as exc:
            print(exc)
        else:
            raise SystemExit("pyroscope.otel imported without opentelemetry")
    """)
    assert "pip install opentelemetry-sdk" in r.stdout


def test_end_to_end_samples_carry_span_labels(profile_dir):
    r = check_run("""
        import json, sys, time
        import pyroscope
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import \\
            InMemorySpanExporter
        from pyroscope.otel import PyroscopeSpanProcessor

        def burn_inside_span(seconds):
            t = time.thread_time()
            while time.thread_time() - t < seconds:
                pass

        def burn_outside_span(seconds):
            t = time.thread_time()
            while time.thread_time() - t < seconds:
                pass

        pyroscope.configure(application_name="otel.test", output_dir=sys.argv[1],
                            upload_interval=0.3, sample_rate=200)
        provider = TracerProvider()
        provider.add_span_processor(PyroscopeSpanProcessor())
        exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("e2e")
        with tracer.start_as_current_span("checkout"):
            burn_inside_span(0.5)
        burn_outside_span(0.5)
        pyroscope.shutdown()
        (span,) = exporter.get_finished_spans()
        print(json.dumps({"span_id": format(span.context.span_id, "016x"),
                          "trace_id": format(span.context.trace_id, "032x"),
                          "attr": span.attributes.get("pyroscope.profile.id")}))
    """, args=(profile_dir,), timeout=60)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["attr"] == out["span_id"]

    smp = pprof_reader.samples(pprof_reader.load_dir(profile_dir))
    inside = [s for s in smp if any(f[0] == "burn_inside_span" for f in s["stack"])]
    outside = [s for s in smp if any(f[0] == "burn_outside_span" for f in s["stack"])]
    # 0.5 s of CPU at 200 Hz is ~100 samples (5 ms each); ask for a fifth.
    assert sum(s["values"][0] for s in inside) >= 0.1e9, inside
    assert sum(s["values"][0] for s in outside) >= 0.1e9, outside
    for s in inside:
        assert s["labels"].get("span_id") == out["span_id"], s["labels"]
        assert s["labels"].get("trace_id") == out["trace_id"], s["labels"]
        assert s["labels"].get("span_name") == "checkout", s["labels"]
    for s in outside:
        assert not {"span_id", "trace_id", "span_name"} & set(s["labels"]), s["labels"]
