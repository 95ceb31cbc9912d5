"""pyroscope.otel.PyroscopeSpanProcessor with the real opentelemetry-sdk.

In-process tests check the labels a sample of the calling thread would
carry: its slot under its execution context's labels (both work without a
running profiler); the end-to-end test profiles a fresh interpreter and
reads the span labels back from the written pprof. Spans in interleaved
asyncio tasks are in test_context_labels.py.
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


def current():
    """What a sample of this thread carries now, without ``trace_id`` (which
    every span label set has: see test_trace_id_is_the_span_trace)."""
    labels = current_with_trace()
    labels.pop("trace_id", None)
    return labels


def current_with_trace():
    return {**_native.labels_current(), **_native.context_labels()}


@pytest.fixture(autouse=True)
def clean_labels():
    """Every test starts and must end with this thread's labels empty, and
    with no tag_wrapper exit that missed its block."""
    assert current() == {}
    unmatched = _native.stats()["context_exit_unmatched"]
    yield
    assert current() == {}, "labels left behind"
    assert _native.stats()["context_exit_unmatched"] == unmatched


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
        assert current() == {"span_id": rid, "span_name": "checkout"}
        with tracer.start_as_current_span("db") as child:
            # a local child runs under the root's labels
            assert current() == {"span_id": rid, "span_name": "checkout"}
            assert hex_id(child) != rid
        assert current() == {"span_id": rid, "span_name": "checkout"}
    assert current() == {}

    root_done = finished(exporter, "checkout")
    assert root_done.attributes[PROFILE_ID_ATTRIBUTE] == rid
    assert rid == format(root_done.context.span_id, "016x") and len(rid) == 16
    assert PROFILE_ID_ATTRIBUTE not in finished(exporter, "db").attributes
    assert proc.errors == 0


def test_span_id_is_16_lowercase_hex_digits():
    tracer, _, exporter = make(id_generator=SmallIds())
    with tracer.start_as_current_span("small"):
        assert current()["span_id"] == "0000000000000042"
        assert current_with_trace()["trace_id"] == "0" * 28 + "5eed"
    assert finished(exporter, "small").attributes[PROFILE_ID_ATTRIBUTE] == "0000000000000042"


def test_trace_id_is_the_span_trace():
    tracer, proc, _ = make()
    with tracer.start_as_current_span("checkout") as root:
        with tracer.start_as_current_span("db"):
            labels = current_with_trace()
    assert labels == {"span_id": hex_id(root), "span_name": "checkout",
                      "trace_id": format(root.context.trace_id, "032x")}
    assert current_with_trace() == {}
    assert proc.errors == 0


def test_outer_tag_wrapper_labels_restored():
    tracer, proc, _ = make()
    with pyroscope.tag_wrapper({"team": "payments"}):
        with tracer.start_as_current_span("checkout") as root:
            assert current() == {
                "team": "payments", "span_id": hex_id(root), "span_name": "checkout"}
        assert current() == {"team": "payments"}
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
        assert current() == {"span_id": sid, "span_name": "server"}
    assert current() == {}
    assert finished(exporter, "server").attributes[PROFILE_ID_ATTRIBUTE] == sid


def test_label_every_span_option():
    tracer, proc, exporter = make(root_span_only=False)
    with tracer.start_as_current_span("outer") as outer:
        with tracer.start_as_current_span("inner") as inner:
            assert current() == {"span_id": hex_id(inner), "span_name": "inner"}
        assert current() == {"span_id": hex_id(outer), "span_name": "outer"}
    assert current() == {}
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
        assert current() == {"k": "v"}
    assert proc.errors == 0


def test_span_name_made_a_valid_label_value():
    tracer, proc, _ = make()
    with tracer.start_as_current_span("GET /a?b=c,{x}"):
        assert current()["span_name"] == "GET /a?b_c__x_"
    with tracer.start_as_current_span("é" * 3000):  # over the 2048-byte value limit
        name = current()["span_name"]
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
    span = tracer.start_span("job")  # not made current: labels this context anyway
    labels = {"span_id": hex_id(span), "span_name": "job"}
    assert current() == labels

    def end_elsewhere():
        with pyroscope.tag_wrapper({"worker": "1"}):
            span.end()
            # the ending thread's labels are its own, untouched
            seen = current()
        return seen, current()
    inside, after = run_in_thread(end_elsewhere)
    assert inside == {"worker": "1"}
    assert after == {}
    # The span's labels ended in the starting context too, at once.
    assert current() == {}
    with tracer.start_as_current_span("next") as nxt:
        assert current() == {"span_id": hex_id(nxt), "span_name": "next"}
    assert current() == {}
    assert proc.errors == 0


def test_span_ended_elsewhere_inside_starting_threads_tag_wrapper():
    tracer, proc, _ = make()
    with pyroscope.tag_wrapper({"a": "1"}):
        span = tracer.start_span("job")
        assert current() == {"a": "1", "span_id": hex_id(span), "span_name": "job"}
        run_in_thread(span.end)
        assert current() == {"a": "1"}  # the tag_wrapper's labels stay
        with pyroscope.tag_wrapper({"b": "2"}):
            assert current() == {"a": "1", "b": "2"}
        assert current() == {"a": "1"}
    assert current() == {}
    assert proc.errors == 0


def test_span_ended_under_a_later_block_on_same_context():
    tracer, proc, _ = make()
    span = tracer.start_span("job")
    labels = {"span_id": hex_id(span), "span_name": "job"}
    with pyroscope.tag_wrapper({"inner": "x"}):
        span.end()
        # Documented limit: a block opened inside the span keeps the labels
        # it merged with until it exits.
        assert current() == dict(labels, inner="x")
    assert current() == {}  # the span's entry went when the block closed
    with tracer.start_as_current_span("next") as nxt:
        assert current() == {"span_id": hex_id(nxt), "span_name": "next"}
    assert current() == {}
    assert proc.errors == 0


def test_ending_thread_with_its_own_span_labels_is_not_disturbed():
    tracer, proc, _ = make()
    span = tracer.start_span("job")

    def other():
        with tracer.start_as_current_span("own") as own:
            span.end()
            mine = current()
        return mine, hex_id(own), current()
    mine, own_id, after = run_in_thread(other)
    assert mine == {"span_id": own_id, "span_name": "own"}
    assert after == {}
    assert current() == {}
    assert proc.errors == 0


def test_child_task_outliving_the_span_loses_its_labels():
    import asyncio

    tracer, proc, _ = make()

    async def main():
        release = asyncio.Event()
        seen = []

        async def child():
            seen.append(current())
            await release.wait()
            seen.append(current())

        with tracer.start_as_current_span("request") as span:
            task = asyncio.create_task(child())
            await asyncio.sleep(0)
        release.set()
        await task
        return seen, hex_id(span)

    seen, sid = asyncio.run(main())
    assert seen == [{"span_id": sid, "span_name": "request"}, {}]
    assert proc.errors == 0


def test_label_limit_is_logged_not_raised(caplog, capfd):
    tracer, proc, exporter = make()
    drops = _native.stats()["labels_dropped"]
    # 99 labels + span_id + span_name exceed the 100-labels-per-set limit:
    # the span's labels are all left out, never some of them.
    with pyroscope.tag_wrapper({f"k{i}": "v" for i in range(99)}):
        before = current()
        with caplog.at_level(logging.WARNING, logger="pyroscope"):
            with tracer.start_as_current_span("big"):
                assert current() == before
        assert current() == before
    assert proc.errors == 0
    assert _native.stats()["labels_dropped"] == drops + 3  # logged once a minute at most
    # the span itself is fine; it gets no profile id, as no samples carry it
    assert PROFILE_ID_ATTRIBUTE not in finished(exporter, "big").attributes


def test_processor_errors_are_logged_not_raised(caplog, monkeypatch):
    tracer, proc, _ = make()

    def broken(*args):
        raise RuntimeError("native failure")
    monkeypatch.setattr(_native, "context_enter", broken)
    with caplog.at_level(logging.WARNING, logger="pyroscope"):
        with tracer.start_as_current_span("x"):
            pass
    assert proc.errors == 1
    assert any(r.name == "pyroscope" and "on_start" in r.getMessage() for r in caplog.records)


def test_shutdown_and_force_flush():
    tracer, proc, exporter = make()
    assert proc.force_flush(1000) is True  # profiler not running: nothing to do
    proc.shutdown()
    with tracer.start_as_current_span("late"):
        assert current() == {}
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
        assert s["labels"].get("span_name") == "checkout", s["labels"]
    for s in outside:
        assert "span_id" not in s["labels"] and "span_name" not in s["labels"], s["labels"]
