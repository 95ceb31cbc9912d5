"""Continuous profiling for CPython, with the API of the pyroscope-io 1.x package.

    import pyroscope
    pyroscope.configure(application_name="my.app", server_address="http://pyroscope:4040")
    with pyroscope.tag_wrapper({"controller": "checkout"}):
        handle()

Sampling runs on a native thread that reads the interpreter's stacks without
taking the GIL; profiles are uploaded (or written to ``output_dir``) by
native threads too. See the README for every setting.
"""

import atexit
import logging
import os
import platform
import sys
import threading
import warnings
from enum import Enum

try:
    from . import _native
except ImportError as exc:  # unsupported or free-threaded interpreter: say which
    raise ImportError(str(exc)) from None

from . import _fault_handlers, _fork_exit, _sender, _threads

__all__ = [
    "LineNo", "ProfilerImplementation", "configure", "shutdown", "flush", "tag_wrapper", "add_thread_tag",
    "remove_thread_tag", "is_running", "stats",
]

LOGGER = logging.getLogger("pyroscope")


class LineNo(Enum):
    """Which line a frame reports (as in pyroscope-io)."""

    LastInstruction = 0  # the line running now
    First = 1            # the function's first line
    NoLine = 2           # no line (0)


class ProfilerImplementation(Enum):
    """Accepted for pyroscope-io compatibility; this package has one sampler."""

    PySpy = 0
    Stack = 1


# The core's settings table: kinds, defaults, variables and each binding's
# keyword. A row with a "python" keyword is a keyword of configure (the first
# spelling; the others are accepted aliases); "external" rows are read here.
SETTINGS = _native.settings()
_KEYWORDS = {kw: row for row in SETTINGS for kw in (row["python"] or "").split("|") if kw}

# Serialises configure/shutdown (any thread may call them).
_lock = threading.RLock()


def _log_sink(level, message, created=None):
    """Called by the native log thread (or an API call) for each core
    message; `created` is the time.time() at which the core logged it."""
    if not LOGGER.isEnabledFor(level):
        return
    record = LOGGER.makeRecord(LOGGER.name, level, "(pyroscope core)", 0, message, None, None)
    if created is not None:
        record.relativeCreated += (created - record.created) * 1000
        record.created = created
        record.msecs = (created - int(created)) * 1000
    LOGGER.handle(record)


def _check_number(name, value, integer=False):
    """A number argument of our own functions (configure's keywords are the
    core's to check)."""
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        kind = "an int" if integer else "a number"
        raise TypeError(f"{name} must be {kind}, not {type(value).__name__}")
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{name} must be a finite number, not {value!r}")
    return value


def _check_bool(name, value):
    if not isinstance(value, int) or value not in (0, 1):  # True, False, 0, 1
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return bool(value)


def _env_bool(var, default):
    raw = os.environ.get(var, "")
    return _native.parse_bool(var, raw) if raw.strip() else default


def _line_name(line_no):
    """line_no for the core (a LineNo, or 0, 1, 2): its spelling there."""
    if isinstance(line_no, LineNo):
        return line_no.name
    if isinstance(line_no, int) and not isinstance(line_no, bool) and line_no in (0, 1, 2):
        return str(line_no)
    raise TypeError(f"line_no must be a pyroscope.LineNo, not {line_no!r}")


def _core_env():
    """PYROSCOPE_* and OTEL_* variables as the process has them (bytes): the
    core applies them under its precedence rule (a keyword given wins; its
    variable is not even read) and names one that is not UTF-8 text."""
    return [k + b"=" + v for k, v in os.environb.items() if k.startswith((b"PYROSCOPE_", b"OTEL_"))]


def _core_args(keywords):
    """configure's keywords -> (settings, defaults) for the core: settings by
    the core's name, as given (the core checks each against its kind);
    defaults are this binding's own values, which a variable beats."""
    if keywords.get("line_no") is not None:
        keywords = {**keywords, "line_no": _line_name(keywords["line_no"])}
    settings = {}
    for kw, row in _KEYWORDS.items():
        if keywords.get(kw) is not None and row["name"] not in settings:
            settings[row["name"]] = keywords[kw]
    defaults = {"runtime_name": sys.implementation.name,
                "runtime_version": platform.python_version(),
                "spy_name": "pyspy",  # the server's name for Python profiles
                # A free-threaded CPython has no GIL: every thread, there.
                "gil_only": "false" if _native.free_threaded else "true"}
    return settings, defaults


def _resolve(**keywords):
    """The core settings configure(**keywords) would start with, as
    {name: str}, without starting (tests and diagnostics)."""
    settings, defaults = _core_args(keywords)
    return _native.resolve(_core_env(), settings, defaults)


def configure(
        app_name=None,
        application_name=None,
        server_address=None,
        basic_auth_username=None,
        basic_auth_password=None,
        enable_logging=None,
        sample_rate=None,
        oncpu=None,
        native=None,
        gil_only=None,
        report_pid=None,
        report_thread_id=None,
        report_thread_name=None,
        tags=None,
        tenant_id=None,
        http_headers=None,
        line_no=None,
        upload_interval=None,
        output_dir=None,
        log_level=None,
        max_stacks=None,
        max_depth=None,
        stop_timeout=None,
        fault_guard=None,
        sampler_cpu_budget=None,
        mem_enabled=None,
        mem_max_nframe=None,
        mem_heap_sample_size=None,
        mem_enable_mem_domain=None,
        cpu_enabled=None,
        cpu_implementation=None,
        otlp_endpoint=None,
        otlp_headers=None,
        otlp_protocol=None,
        resource_attributes=None,
        strict_labels=None,
        memory=None,
        memory_interval=None,
        memory_max_live=None,
):
    """Start profiling this process (or restart it with new settings).

    Every setting may also come from a ``PYROSCOPE_<NAME>`` environment
    variable; a keyword given here wins. Bad values raise ``ValueError`` or
    ``TypeError`` naming the setting, and the previous configuration (if
    any) keeps running.
    """
    keywords = dict(locals())  # first: the arguments only
    if app_name is not None:  # the table's alias of application_name
        warnings.warn("app_name is deprecated, use application_name", DeprecationWarning,
                      stacklevel=2)
    if native is not None:
        warnings.warn("native is not supported and is ignored", DeprecationWarning,
                      stacklevel=2)
    # pyroscope-io's memory keywords are the table's aliases of memory and
    # memory_interval; mem_max_nframe is max_depth's business here.
    for name, value in (("mem_max_nframe", mem_max_nframe),
                        ("mem_heap_sample_size", mem_heap_sample_size)):
        if value is not None:
            _check_number(name, value, integer=True)
    if mem_enable_mem_domain is not None:
        _check_bool("mem_enable_mem_domain", mem_enable_mem_domain)
    if cpu_implementation is not None and not isinstance(cpu_implementation,
                                                         ProfilerImplementation):
        raise TypeError("cpu_implementation must be a pyroscope.ProfilerImplementation, "
                        f"not {cpu_implementation!r}")
    if cpu_enabled is not None and not _check_bool("cpu_enabled", cpu_enabled):
        # Nothing else to collect: stop whatever ran, like a profiler with
        # every profile type off.
        warnings.warn("cpu_enabled=False: no profile type is enabled, so nothing is "
                      "profiled", UserWarning, stacklevel=2)
        shutdown()
        return False

    settings, defaults = _core_args(keywords)
    env = _core_env()
    with _lock:
        _native.set_log_sink(_log_sink)
        core = _native.resolve(env, settings, defaults)  # this binding's settings too
        if core["enable_logging"] == "true":  # pyroscope-io's: the "pyroscope" logger's level
            defaults["log_level"] = str(LOGGER.getEffectiveLevel())
        line = core["line_no"] or "0"
        mode = int(line) if line.isdigit() else LineNo[line].value
        if core["report_thread_name"] == "true":
            _threads.install()
        _fault_handlers.install()
        if core["server_address"] or core["otlp_endpoint"]:
            _sender.ensure()   # only without libcurl: uploads through http.client
        # gil_only=True without a GIL is treated as False (the native side says so once)
        _native.start(env, settings, defaults, gil_only=core["gil_only"] == "true",
                      line_mode=mode)
    return True


def shutdown():
    """Export what was sampled and stop, within ``stop_timeout`` (default 5 s)
    even when the server is down. Safe to call when not running."""
    with _lock:
        if _native.stop():
            LOGGER.info("profiler stopped")
    return True


def flush(timeout=5.0):
    """Export the current period now and wait (at most ``timeout`` seconds)
    until it was uploaded or written. Returns True when everything queued
    was handled in time and no upload failed meanwhile. ``timeout`` must be
    a finite number >= 0 (waits longer than a day are cut to a day)."""
    timeout = _check_number("timeout", timeout)
    # an int beyond a float (10**400) is a long wait too, cut to a day below
    timeout = float(min(timeout, 10**9) if isinstance(timeout, int) else timeout)
    # Uploads that failed or were dropped while it ran make it False too.
    before = _native.stats()
    done = _native.flush(timeout)
    after = _native.stats()
    lost = ("uploads_failed", "uploads_dropped")
    return done and all(after.get(k, 0) <= before.get(k, 0) for k in lost)


def is_running():
    return _native.running()


def stats():
    """Counters of the sampler, walker and exporters (a dict of ints, and
    ``effective_rate_hz``, the sampling rate after the CPU budget, a float)."""
    return _native.stats()


_LOUD_UNMATCHED = 10  # warnings before unmatched exits are logged at debug level
_unmatched = 0


class tag_wrapper:
    """``with tag_wrapper({"k": "v"}):`` labels the samples of the code the
    block runs with the tags, in its execution context (``contextvars``):
    an asyncio task, a greenlet or a thread. Code that runs on the same OS
    thread between two awaits of the block (another task) does not get the
    labels; tasks started inside the block inherit them, as contextvars do.
    On exit (exceptions included) the context's labels are exactly what
    they were before, so nesting restores outer values. One instance may be
    shared by many threads and tasks at once. Works as a decorator of
    functions and ``async def`` functions too.

    Labels given with ``add_thread_tag`` still belong to the OS thread; a
    sample carries the thread's labels and the context's (the context's
    value wins for a key set in both)."""

    __slots__ = ("_tags",)

    def __init__(self, tags):
        self._tags = tags  # checked by the native enter, once per entry

    def __enter__(self):
        try:
            _native.context_enter(self._tags, self)
        except (TypeError, ValueError):  # UnicodeError too
            if _native.labels_strict():
                raise
            _native.context_enter(_fixed_labels(self._tags), self)
        return self

    def __exit__(self, *exc):
        global _unmatched
        try:
            # Closes this instance's newest block in the current context,
            # and any block entered inside it and left open.
            if _native.context_exit(self, True):
                return False
            _unmatched += 1
            LOGGER.log(logging.WARNING if _unmatched <= _LOUD_UNMATCHED else logging.DEBUG,
                       "pyroscope: tag_wrapper exited in a context it did not enter in "
                       "(labels left alone; see stats()['context_exit_unmatched'])")
        except Exception:  # noqa: BLE001 - never raise into the application
            LOGGER.warning("pyroscope: tag_wrapper exit failed", exc_info=True)
        return False

    def __call__(self, fn):
        import functools
        import inspect

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def wrapped_async(*args, **kwargs):
                with self:  # inside the coroutine: the awaiting task's context
                    return await fn(*args, **kwargs)
            return wrapped_async

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapped


def _thread_tag_args(args, what):
    if len(args) == 3:  # the pre-1.0 form: (thread_id, key, value)
        thread_id, key, value = args
        if thread_id not in (threading.get_ident(), threading.get_native_id()):
            raise ValueError(f"{what}: labels act on the calling thread; thread_id "
                             f"{thread_id} is another thread")
        return key, value
    if len(args) == 2:
        return args
    raise TypeError(f"{what}() takes (key, value)")


def add_thread_tag(*args):
    """add_thread_tag(key, value): label the calling OS thread's samples."""
    key, value = _thread_tag_args(args, "add_thread_tag")
    _thread_tag(_native.thread_tag_add, key, value, True)
    return True


def remove_thread_tag(*args):
    """remove_thread_tag(key, value): drop the label if it has this value."""
    key, value = _thread_tag_args(args, "remove_thread_tag")
    _thread_tag(_native.thread_tag_remove, key, value, False)
    return True


def _thread_tag(fn, key, value, count):
    try:
        fn(key, value)
    except (TypeError, ValueError):
        if _native.labels_strict():
            raise
        fixed = _fixed_labels({key: value}, count)
        for k, v in fixed.items():
            fn(k, v)


# Request-time labels never raise (issue 28; unless strict_labels): the
# native call takes str -> str; when it refuses what it was given, the tags
# are made so here and the call is made again, so the common case pays
# nothing. Names and values the server cannot take as str are fixed by the
# core (counted in stats()["labels_coerced"/"labels_dropped"], logged once
# a minute); these are the Python-side fixes, counted the same way.
def _label_text(obj, key, count):
    text = obj if isinstance(obj, str) else str(obj)
    fixed = text
    if "\0" in fixed:
        fixed = fixed.replace("\0", "\ufffd")
    try:
        fixed.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates ("\udcff"): U+FFFD each
        fixed = fixed.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if fixed is not text and count:
        _native.labels_note_fix(False, _shown(key), "made valid UTF-8 (NUL or a lone "
                                "surrogate became U+FFFD)")
    return fixed


def _shown(key):
    try:
        text = str(key)
    except Exception:  # noqa: BLE001
        text = type(key).__name__
    return text.replace("\0", "\\0").encode("utf-8", "backslashreplace").decode("utf-8")[:100]


def _fixed_labels(tags, count=True):
    if not isinstance(tags, dict):
        try:
            tags = dict(tags)
        except Exception:  # noqa: BLE001 - None, a string, ...: no labels
            if count:
                _native.labels_note_fix(True, type(tags).__name__,
                                        "tags given as %s, not a dict: ignored"
                                        % type(tags).__name__)
            return {}
    out = {}
    for k, v in tags.items():
        if k is None or v is None:
            if count:
                _native.labels_note_fix(True, _shown(k), "no name or no value (None): dropped")
            continue
        try:
            key = _label_text(k, k, count)
            out[key] = _label_text(v, k, count)
        except Exception:  # noqa: BLE001 - a __str__ that raises
            if count:
                _native.labels_note_fix(True, _shown(type(k).__name__),
                                        "name or value cannot be made a str: dropped")
    return out


def _deprecated(name, hint="no longer applicable"):
    def fn(*args, **kwargs):
        warnings.warn(f"pyroscope.{name} is deprecated, {hint}", DeprecationWarning,
                      stacklevel=2)
    fn.__name__ = name
    return fn


stop = _deprecated("stop", "use shutdown()")
change_name = _deprecated("change_name")
tag = _deprecated("tag", "use tag_wrapper")
remove_tags = _deprecated("remove_tags")
build_summary = _deprecated("build_summary")
test_logger = _deprecated("test_logger")


def configure_experimental_stack_profiler(**options):
    """pyroscope-io's switch to its alternative sampler. This package has one
    native sampler, so the options do not apply: returns False, as
    pyroscope-io does for a refused call."""
    warnings.warn("configure_experimental_stack_profiler does not apply to "
                  "pyroscope-native (one native sampler); ignored", UserWarning, stacklevel=2)
    return False


def _after_fork_in_child():
    global _lock
    _native.fork_child()
    # A thread inside configure/shutdown may have held the lock at fork():
    # it does not exist here, so the lock would never be released.
    _lock = threading.RLock()
    _threads.after_fork()
    _fork_exit.after_fork_in_child(shutdown)
    _sender.after_fork_in_child()


# The core's one fork path runs inside fork() itself (pthread_atfork), where
# this thread holds the GIL throughout: no other thread can be inside a
# labels call then. Taking the core's locks earlier, in a `before` hook,
# would let another thread take the GIL and then wait for one of those
# locks. For the same reason `_lock` is not taken in a `before` hook: fork()
# would then wait for a shutdown (up to stop_timeout) or for a thread parked
# in configure. The child hook below repeats the path's entry point (a no-op
# once done) and re-creates the Python-level locks instead; the native state
# is consistent wherever configure/shutdown let go of the GIL.
os.register_at_fork(before=_fork_exit.before_fork, after_in_child=_after_fork_in_child)
atexit.register(_native.at_exit)
