"""OpenTelemetry span processor that links spans to profiles.

    from opentelemetry.sdk.trace import TracerProvider
    from pyroscope.otel import PyroscopeSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(PyroscopeSpanProcessor())

When a *local root* span starts (no parent, or a remote parent), the
processor sets its attribute ``pyroscope.profile.id`` to the span id (16
lowercase hex digits) and labels the samples of the span's code with
``span_id`` (the same value), ``trace_id`` (32 lowercase hex digits: Pyroscope
indexes it, and the OTLP exporter turns the pair into the sample's Link) and
``span_name``. Child spans run under the
root's labels. With ``root_span_only=False`` every span labels with its own
``span_id``/``span_name`` (and gets the attribute); a nested span's end
restores the outer span's labels.

Labels follow the execution context (``contextvars``), as ``tag_wrapper``'s
do: ``on_start`` runs in the context that starts the span, which for
``start_as_current_span`` (and ``use_span``) is the asyncio task, greenlet
or thread that runs the span's code, so its samples carry the span's
labels across every ``await`` and samples of other tasks on the same
thread never do. Tasks started inside the span inherit them, as they
inherit the span itself. When the span ends:

- in the context that started it, with nothing opened after it still open
  there: its labels are removed from that context at once;
- anywhere else (a span started with ``start_span`` and ended in another
  task or thread, or a task that outlives a span it inherited): the span's
  labels end everywhere at once (its entry labels as the one below it);
  a ``tag_wrapper`` block opened inside the span and still open keeps the
  labels it merged with until it exits.

A span started without being made current still labels the context that
started it until it ends, because ``on_start`` cannot tell the two apart.

Errors from the label calls never reach the application: they are logged on
the ``pyroscope`` logger and counted in ``errors``. Labels do not need
``pyroscope.configure``; they are simply unused until the profiler runs.
"""

import logging
import threading

try:
    from opentelemetry.sdk.trace import SpanProcessor
except ImportError as exc:
    raise ImportError("pyroscope.otel needs the OpenTelemetry SDK: "
                      "pip install opentelemetry-sdk") from exc

from . import _native

__all__ = ["PyroscopeSpanProcessor", "PROFILE_ID_ATTRIBUTE"]

PROFILE_ID_ATTRIBUTE = "pyroscope.profile.id"

LOGGER = logging.getLogger("pyroscope")

_MAX_VALUE_BYTES = 2048        # the core's label value limit
_FORBIDDEN = str.maketrans("{},=", "____")  # never allowed in label values
_LOUD_ERRORS = 10              # warnings before errors are logged at debug level


def _is_local_root(span):
    parent = span.parent
    return parent is None or parent.is_remote


def _label_value(text):
    """A span name as a valid label value ('' when nothing usable is left)."""
    raw = str(text).translate(_FORBIDDEN).encode("utf-8", "replace")[:_MAX_VALUE_BYTES]
    return raw.decode("utf-8", "ignore")  # drops a character cut in half


class PyroscopeSpanProcessor(SpanProcessor):
    """Labels profile samples with the span they ran in (see the module doc).

    ``root_span_only`` (default True): label local root spans only; False
    labels every span with its own id and name."""

    def __init__(self, root_span_only=True):
        self._root_only = bool(root_span_only)
        self._lock = threading.Lock()
        self._entries = {}     # (trace_id, span_id) -> context entry, until the span ends
        self._shut = False
        self.errors = 0        # label calls that failed (each one logged)

    def _failed(self, what):
        self.errors += 1
        level = logging.WARNING if self.errors <= _LOUD_ERRORS else logging.DEBUG
        LOGGER.log(level, "pyroscope: span processor %s failed; the span's samples "
                   "may be unlabelled", what, exc_info=True)

    # -- SpanProcessor

    def on_start(self, span, parent_context=None):
        try:
            if self._shut or (self._root_only and not _is_local_root(span)):
                return
            ctx = span.context
            span_id = format(ctx.span_id, "016x")
            labels = {"span_id": span_id, "trace_id": format(ctx.trace_id, "032x")}
            name = _label_value(span.name)
            if name:
                labels["span_name"] = name
            entry = _native.context_enter(labels, None)
            with self._lock:
                self._entries[(ctx.trace_id, ctx.span_id)] = entry
            if entry.applied:  # else a limit dropped them (logged, counted)
                span.set_attribute(PROFILE_ID_ATTRIBUTE, span_id)
        except Exception:  # noqa: BLE001 - the application must never see it
            self._failed("on_start")

    def on_end(self, span):
        try:
            ctx = span.context
            with self._lock:
                entry = self._entries.pop((ctx.trace_id, ctx.span_id), None)
            if entry is None:
                return
            # Closed here when this context opened it and nothing opened
            # later is still open; retired otherwise (and in any case, for
            # the contexts that inherited it), so its labels end now.
            _native.context_exit(entry, False)
            entry.retire()
        except Exception:  # noqa: BLE001
            self._failed("on_end")

    def shutdown(self):
        """Stop labelling new spans; the profiler itself keeps running."""
        self._shut = True

    def force_flush(self, timeout_millis=30000):
        """Export the profiler's current period too, when it runs, so the
        samples of flushed spans can be found."""
        from . import flush, is_running
        try:
            if is_running():
                return bool(flush(max(timeout_millis, 0) / 1000.0))
        except Exception:  # noqa: BLE001
            self._failed("force_flush")
            return False
        return True
