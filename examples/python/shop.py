"""A tiny shop backend to profile: what `make demo` runs.

    python -m pyroscope run examples/python/shop.py [--seconds N]

Two worker threads serve requests for two endpoints (/checkout and /cart).
Each request runs three steps that burn a fixed amount of their thread's
CPU time, so the profile has a known shape (self CPU):

    parse_order     ~50 %
    price_cart      ~30 %
    render_receipt  ~20 %

Samples carry the tag endpoint=/checkout or /cart (about half each, from
pyroscope.tag_wrapper), and with the OpenTelemetry SDK installed every
request is a span whose id is on its samples (span_id, span_name), through
pyroscope.otel.PyroscopeSpanProcessor.

The run lasts --seconds (default: $SHOP_SECONDS, else 5) of wall time.
"""

import argparse
import contextlib
import os
import sys
import threading
import time

import pyroscope

# CPU seconds each step burns per request: the 50/30/20 split above.
PARSE_S, PRICE_S, RENDER_S = 0.005, 0.003, 0.002

ORDER = "sku:A-100,qty:2,sku:B-220,qty:1,sku:C-310,qty:5,coupon:SPRING,ship:express"

# Each step loops on its own (no shared helper) so that its CPU time is
# the step's own "self" time in the profile, not a helper's.


def parse_order(cpu_s):
    """Split the order text into fields, again and again."""
    deadline = time.thread_time() + cpu_s
    fields = 0
    while time.thread_time() < deadline:
        for token in ORDER.split(","):
            key, _, value = token.partition(":")
            if key and value:
                fields += 1
    return fields


def price_cart(cpu_s):
    """Arithmetic on prices and discounts."""
    deadline = time.thread_time() + cpu_s
    total = 0.0
    while time.thread_time() < deadline:
        for cents in range(100, 400, 3):
            total += cents * 1.2 - (cents % 7) * 0.05
    return total


def render_receipt(cpu_s):
    """Format receipt lines."""
    deadline = time.thread_time() + cpu_s
    size = 0
    while time.thread_time() < deadline:
        for n in range(10):
            size += len("%3d x item-%03d %8.2f\n" % (n, n * 7, n * 1.25))
    return size


def handle_request(tracer, endpoint):
    # The span is a local root: the processor labels this thread's samples
    # with its span_id until it ends. tag_wrapper adds the endpoint.
    with tracer.start_as_current_span("POST " + endpoint):
        with pyroscope.tag_wrapper({"endpoint": endpoint}):
            parse_order(PARSE_S)
            with tracer.start_as_current_span("price"):  # a child: keeps the root's labels
                price_cart(PRICE_S)
            render_receipt(RENDER_S)


def serve(tracer, endpoint, deadline, served):
    count = 0
    while time.monotonic() < deadline:
        handle_request(tracer, endpoint)
        count += 1
    served[endpoint] = count


class _NoTracer:
    """Stands in for an OpenTelemetry tracer when the SDK is not installed."""

    def start_as_current_span(self, name):
        return contextlib.nullcontext()


def make_tracer():
    """(tracer, provider or None): spans linked to profiles when the
    OpenTelemetry SDK is there, no spans otherwise."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from pyroscope.otel import PyroscopeSpanProcessor
    except ImportError as exc:
        print(f"shop: no OpenTelemetry spans ({exc})", file=sys.stderr)
        return _NoTracer(), None
    provider = TracerProvider()
    provider.add_span_processor(PyroscopeSpanProcessor())
    return provider.get_tracer("shop"), provider


def main(argv=None):
    parser = argparse.ArgumentParser(description="A small shop backend to profile.")
    parser.add_argument("--seconds", type=float,
                        default=float(os.environ.get("SHOP_SECONDS", "5")),
                        help="how long to serve requests (default: $SHOP_SECONDS or 5)")
    args = parser.parse_args(argv)
    if not pyroscope.is_running():
        print("shop: the profiler is off; run me as "
              "`python -m pyroscope run examples/python/shop.py`", file=sys.stderr)

    tracer, provider = make_tracer()
    deadline = time.monotonic() + args.seconds
    served = {}
    workers = [threading.Thread(target=serve, args=(tracer, endpoint, deadline, served),
                                name=endpoint.strip("/") + "-worker")
               for endpoint in ("/checkout", "/cart")]
    started = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if provider is not None:
        provider.shutdown()
    total = sum(served.values())
    print(f"shop: served {total} requests in {time.monotonic() - started:.1f} s "
          f"({', '.join(f'{k}: {v}' for k, v in sorted(served.items()))})")


if __name__ == "__main__":
    main()
