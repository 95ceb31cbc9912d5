"""OpenTelemetry span processor that links spans to profiles.

    from opentelemetry.sdk.trace import TracerProvider
    from pyroscope.otel import PyroscopeSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(PyroscopeSpanProcessor())

When a *local root* span starts (no parent, or a remote parent), the
processor sets its attribute ``pyroscope.profile.id`` to the span id (16
lowercase hex digits) and labels the calling OS thread's samples with
``span_id`` (the same value), ``trace_id`` (32 lowercase hex digits: Pyroscope
indexes it, and the OTLP exporter turns the pair into the sample's Link) and
``span_name``. Child spans started on that
thread run under the root's labels. With ``root_span_only=False`` every span
pushes its own ``span_id``/``span_name`` (and gets the attribute); a nested
span's end restores the outer span's labels.

Labels are a stack per OS thread (the same one ``tag_wrapper`` uses). When a
span ends, its push is popped, restoring the thread's previous labels
exactly, but only when that is safe:

- ended on the thread that started it, with its push on top of the stack:
  popped at once;
- ended on that thread while pushes made after it are still open (say the
  span ended inside a ``tag_wrapper`` block that began inside the span):
  left in place, since popping would undo someone else's labels;
- ended on another thread: neither thread's labels are touched (a thread
  can only change its own labels).

In the last two cases the span's labels stay on the starting thread until
that thread next calls the processor (starts or ends a span) with the
pushes above the span's own gone; it pops them then. If the pushes above are
popped by code that also pops ours (``tag_wrapper`` restores its own
starting point exactly), nothing is left to do. So the limit is: a span that
ends elsewhere keeps labelling the starting thread's samples until that
thread next enters the processor or unwinds below the span's push.
Likewise, asyncio tasks that interleave on one thread share its labels:
while another task's span is open on top, its labels apply.

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


class _Push:
    """One labels push made for a span on its starting thread."""

    __slots__ = ("span_id", "depth", "ended")

    def __init__(self, span_id, depth):
        self.span_id = span_id
        self.depth = depth     # labels_depth() before the push
        self.ended = False


class PyroscopeSpanProcessor(SpanProcessor):
    """Labels profile samples with the span they ran in (see the module doc).

    ``root_span_only`` (default True): label local root spans only; False
    labels every span with its own id and name."""

    def __init__(self, root_span_only=True):
        self._root_only = bool(root_span_only)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._pushes = {}      # (trace_id, span_id) -> _Push, until the span ends
        self._shut = False
        self.errors = 0        # label calls that failed (each one logged)

    # -- per thread bookkeeping

    def _thread_pushes(self):
        """This thread's pushes still on its stack, in push order (a
        thread-local list, so it goes away with the thread)."""
        pushes = getattr(self._local, "pushes", None)
        if pushes is None:
            pushes = self._local.pushes = []
        return pushes

    def _settle(self, pushes):
        """Pop this thread's ended pushes that are on top of its label stack;
        forget pushes that someone else already popped."""
        while pushes:
            top = pushes[-1]
            depth = _native.labels_depth()
            if depth <= top.depth:
                pushes.pop()  # undone already (an enclosing tag_wrapper exited)
                continue
            if depth == top.depth + 1 and \
                    _native.labels_current().get("span_id") != top.span_id:
                pushes.pop()  # undone and another push now sits at its level
                continue
            if not top.ended or depth != top.depth + 1:
                return        # still running, or pushes of others above it
            _native.labels_pop()
            pushes.pop()

    def _failed(self, what):
        self.errors += 1
        level = logging.WARNING if self.errors <= _LOUD_ERRORS else logging.DEBUG
        LOGGER.log(level, "pyroscope: span processor %s failed; labels of this thread "
                   "may be incomplete", what, exc_info=True)

    # -- SpanProcessor

    def on_start(self, span, parent_context=None):
        try:
            pushes = self._thread_pushes()
            self._settle(pushes)
            if self._shut or (self._root_only and not _is_local_root(span)):
                return
            ctx = span.context
            span_id = format(ctx.span_id, "016x")
            labels = {"span_id": span_id, "trace_id": format(ctx.trace_id, "032x")}
            name = _label_value(span.name)
            if name:
                labels["span_name"] = name
            depth = _native.labels_depth()
            _native.labels_push(labels)
            push = _Push(span_id, depth)
            pushes.append(push)
            with self._lock:
                self._pushes[(ctx.trace_id, ctx.span_id)] = push
            span.set_attribute(PROFILE_ID_ATTRIBUTE, span_id)
        except Exception:  # noqa: BLE001 - the application must never see it
            self._failed("on_start")

    def on_end(self, span):
        try:
            ctx = span.context
            with self._lock:
                push = self._pushes.pop((ctx.trace_id, ctx.span_id), None)
            if push is not None:
                # The starting thread pops it (now, or at its next call here);
                # any other thread must leave label stacks alone.
                push.ended = True
            pushes = self._thread_pushes()
            self._settle(pushes)
        except Exception:  # noqa: BLE001
            self._failed("on_end")

    def shutdown(self):
        """Stop labelling new spans; the profiler itself keeps running."""
        self._shut = True
        try:
            self._settle(self._thread_pushes())
        except Exception:  # noqa: BLE001
            self._failed("shutdown")

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
