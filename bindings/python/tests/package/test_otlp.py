"""OTLP profiles export with the real opentelemetry-sdk: a span's samples,
received by a loopback OTLP/HTTP receiver, carry a Link to the span's trace
and span id; beside Pyroscope, the pprof samples carry trace_id too."""

import json
import platform
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import check_run
from ingest_server import IngestServer
import otlp_reader
import pprof_reader

import pyroscope


class OtlpReceiver:
    """POST /v1development/profiles on 127.0.0.1: records (path, headers,
    body) and answers 200 with an empty ExportProfilesServiceResponse."""

    def __init__(self):
        self.requests = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._lock:
                    receiver.requests.append(
                        (self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                ok = self.path == "/v1development/profiles"
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    @property
    def url(self):
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"


APP = """
import json, os, sys, time
import pyroscope
from opentelemetry.sdk.trace import TracerProvider
from pyroscope.otel import PyroscopeSpanProcessor

def burn_inside_span(seconds):
    t = time.thread_time()
    while time.thread_time() - t < seconds:
        pass

def burn_outside_span(seconds):
    t = time.thread_time()
    while time.thread_time() - t < seconds:
        pass

pyroscope.configure(application_name="otlp.py", upload_interval=0.3, sample_rate=200,
                    **json.loads(sys.argv[1]))
provider = TracerProvider()
provider.add_span_processor(PyroscopeSpanProcessor())
tracer = provider.get_tracer("otlp")
with tracer.start_as_current_span("checkout") as span:
    burn_inside_span(0.5)
burn_outside_span(0.5)
pyroscope.shutdown()
print(json.dumps({"span_id": format(span.context.span_id, "016x"),
                  "trace_id": format(span.context.trace_id, "032x"),
                  "pid": os.getpid(), "stats": pyroscope.stats()}))
"""


def run_app(settings, env=None):
    r = check_run(APP, args=(json.dumps(settings),), env=env, timeout=60)
    return json.loads(r.stdout.strip().splitlines()[-1])


def check_otlp(rx, out, auth):
    assert rx.requests, "the OTLP receiver got nothing"
    inside = outside = 0
    for path, headers, body in rx.requests:
        assert path == "/v1development/profiles"
        assert headers["content-type"] == "application/x-protobuf"
        assert headers["content-encoding"] == "gzip"
        assert headers.get("authorization") == auth
        msg = otlp_reader.decode(body)
        res = msg["resource"]
        assert res["service.name"] == "otlp.py"
        assert res["process.pid"] == out["pid"]
        assert res["process.runtime.name"] == "cpython"
        assert res["process.runtime.version"] == platform.python_version()
        assert res["telemetry.sdk.language"] == "python"
        # On-CPU: one Profile, samples/count x period 1 ns of cpu: the
        # measured CPU (what Pyroscope shows as process_cpu).
        (cpu,) = msg["profiles"]
        assert (cpu["type"], cpu["unit"]) == ("samples", "count")
        for s in cpu["samples"]:
            if "burn_inside_span" in s["stack"]:
                inside += s["value"]
                assert s["link"] == (out["trace_id"], out["span_id"]), s
                assert s["attrs"].get("span_name") == "checkout", s
                # the ids are in the link, not repeated as attributes
                assert not {"span_id", "trace_id"} & set(s["attrs"]), s
            elif "burn_outside_span" in s["stack"]:
                outside += s["value"]
                assert s["link"] is None, s
                assert "span_name" not in s["attrs"], s
    # 0.5 s of CPU at 200 Hz is ~100 samples (5 ms each); ask for a fifth.
    assert inside >= 0.1e9 and outside >= 0.1e9, (inside, outside)
    return msg


def test_span_samples_link_to_their_span_over_otlp():
    with OtlpReceiver() as rx:
        out = run_app({"otlp_endpoint": rx.url, "otlp_headers": {"Authorization": "Bearer t0k"}})
    check_otlp(rx, out, "Bearer t0k")
    st = out["stats"]
    assert st["otlp_sent"] == len(rx.requests) and st["otlp_failed"] == 0
    assert st["otlp_bytes_sent"] > 0
    # OTLP alone: no Pyroscope exporter was made (no default server).
    assert "http_sent" not in st


def test_otlp_beside_pyroscope_from_otel_variables():
    with OtlpReceiver() as rx, IngestServer() as pyro:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url,
               "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Basic%20dTpw",
               "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test"}
        out = run_app({"server_address": pyro.url}, env=env)
        msg = check_otlp(rx, out, "Basic dTpw")
        assert msg["resource"]["deployment.environment"] == "test"
        st = out["stats"]
        assert st["otlp_sent"] == len(rx.requests) and st["http_sent"] == len(pyro.requests)
        # Pyroscope gets trace_id as a label beside span_id.
        smp = pprof_reader.samples([pprof_reader.decode(q.profile) for q in pyro.requests])
        inside = [s for s in smp if any(f[0] == "burn_inside_span" for f in s["stack"])]
        assert inside
        for s in inside:
            assert s["labels"].get("span_id") == out["span_id"], s["labels"]
            assert s["labels"].get("trace_id") == out["trace_id"], s["labels"]


def test_otel_endpoint_alone_means_otlp_only():
    # Only OTEL_EXPORTER_OTLP_ENDPOINT: no upload to localhost:4040 beside it.
    with OtlpReceiver() as rx:
        out = run_app({}, env={"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url})
    st = out["stats"]
    assert st["otlp_sent"] == len(rx.requests) > 0
    assert not any(k.startswith("http_") for k in st), st


def test_bad_otlp_settings_name_the_setting():
    with pytest.raises(ValueError, match="otlp_endpoint"):
        pyroscope.configure(application_name="otlp.bad", otlp_endpoint="ftp://x")
    with pytest.raises(ValueError, match="otlp_headers"):
        pyroscope.configure(application_name="otlp.bad", otlp_endpoint="http://127.0.0.1:9",
                            otlp_headers={"Bad Name": "1"})
    with pytest.raises(TypeError, match="otlp_endpoint"):
        pyroscope.configure(application_name="otlp.bad", otlp_endpoint=5)
    assert not pyroscope.is_running()
