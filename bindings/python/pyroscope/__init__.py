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
import threading
import warnings
from enum import Enum

try:
    from . import _native
except ImportError as exc:  # unsupported or free-threaded interpreter: say which
    raise ImportError(str(exc)) from None

from . import _threads

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


# Settings only this package understands; the rest go to the core.
_PY_ONLY_ENV = ("PYROSCOPE_GIL_ONLY", "PYROSCOPE_ENABLE_LOGGING", "PYROSCOPE_LINE_NO")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
DEFAULT_SERVER = "http://localhost:4040"

# Serialises configure/shutdown (any thread may call them).
_lock = threading.RLock()


def _log_sink(level, message):
    LOGGER.log(level, message)


def _check_str(name, value):
    if isinstance(value, os.PathLike) and name == "output_dir":
        value = os.fspath(value)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def _check_bool(name, value):
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise TypeError(f"{name} must be a bool, not {type(value).__name__}")


def _check_number(name, value, integer=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        kind = "an int" if integer else "a number"
        raise TypeError(f"{name} must be {kind}, not {type(value).__name__}")
    if integer and not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if isinstance(value, int):
        return str(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{name} must be a finite number, not {value!r}")
    # Plain decimal notation: the core's parser does not take exponents.
    return ("%.9f" % value).rstrip("0").rstrip(".") or "0"


def _check_pairs(name, value):
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be a dict of str to str, not {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(k, str):
            raise TypeError(f"{name}: keys must be str, not {type(k).__name__}")
        if not isinstance(v, str):
            raise TypeError(f"{name}: the value of {k!r} must be a str, not {type(v).__name__}")
    return dict(value)


def _env_bool(var, default):
    raw = os.environ.get(var)
    if raw is None or raw.strip() == "":
        return default
    low = raw.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"{var}: {raw!r} is not a boolean (use true/false, 1/0, yes/no, on/off)")


def _line_mode(line_no):
    if line_no is None:
        raw = os.environ.get("PYROSCOPE_LINE_NO", "").strip()
        if not raw:
            return LineNo.LastInstruction.value
        for m in LineNo:
            if raw.lower() in (m.name.lower(), str(m.value)):
                return m.value
        raise ValueError(f"PYROSCOPE_LINE_NO: {raw!r} is not one of "
                         "LastInstruction, First, NoLine (or 0, 1, 2)")
    if isinstance(line_no, LineNo):
        return line_no.value
    if isinstance(line_no, int) and not isinstance(line_no, bool) and line_no in (0, 1, 2):
        return line_no
    raise TypeError(f"line_no must be a pyroscope.LineNo, not {line_no!r}")


def _core_env():
    """PYROSCOPE_* variables for the core (ours removed, so it does not warn)."""
    return [f"{k}={v}" for k, v in os.environ.items()
            if k.startswith("PYROSCOPE_") and k not in _PY_ONLY_ENV]


def _env_set(name):
    return bool(os.environ.get("PYROSCOPE_" + name.upper(), "").strip())


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
):
    """Start profiling this process (or restart it with new settings).

    Every setting may also come from a ``PYROSCOPE_<NAME>`` environment
    variable; a keyword given here wins. Bad values raise ``ValueError`` or
    ``TypeError`` naming the setting, and the previous configuration (if
    any) keeps running.
    """
    if app_name is not None:
        warnings.warn("app_name is deprecated, use application_name", DeprecationWarning,
                      stacklevel=2)
        if application_name is None:
            application_name = app_name
    if native is not None:
        warnings.warn("native is not supported and is ignored", DeprecationWarning,
                      stacklevel=2)
    if mem_enabled:
        warnings.warn("mem_enabled: memory profiling is not supported; only CPU/wall "
                      "profiles are collected", UserWarning, stacklevel=2)
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

    settings = {}
    for name, value in (("application_name", application_name),
                        ("server_address", server_address),
                        ("basic_auth_username", basic_auth_username),
                        ("basic_auth_password", basic_auth_password),
                        ("tenant_id", tenant_id), ("output_dir", output_dir)):
        if value is not None:
            settings[name] = _check_str(name, value)
    for name, value in (("sample_rate", sample_rate), ("upload_interval", upload_interval),
                        ("stop_timeout", stop_timeout),
                        ("sampler_cpu_budget", sampler_cpu_budget)):
        if value is not None:
            settings[name] = _check_number(name, value)
    for name, value in (("max_stacks", max_stacks), ("max_depth", max_depth)):
        if value is not None:
            settings[name] = _check_number(name, value, integer=True)
    for name, value in (("oncpu", oncpu), ("report_pid", report_pid),
                        ("report_thread_id", report_thread_id),
                        ("report_thread_name", report_thread_name),
                        ("fault_guard", fault_guard)):
        if value is not None:
            settings[name] = "true" if _check_bool(name, value) else "false"
    if tags is not None:
        settings["tags"] = _check_pairs("tags", tags)
    if http_headers is not None:
        settings["http_headers"] = _check_pairs("http_headers", http_headers)

    gil = _check_bool("gil_only", gil_only) if gil_only is not None else \
        _env_bool("PYROSCOPE_GIL_ONLY", True)
    logs = _check_bool("enable_logging", enable_logging) if enable_logging is not None else \
        _env_bool("PYROSCOPE_ENABLE_LOGGING", False)
    mode = _line_mode(line_no)

    # Log level: an explicit one wins; else what the "pyroscope" logger lets
    # through, and warnings and errors always (they report lost data).
    if log_level is not None:
        if isinstance(log_level, int) and not isinstance(log_level, bool):
            settings["log_level"] = str(log_level)
        else:
            settings["log_level"] = _check_str("log_level", log_level)
    elif not _env_set("log_level"):
        level = LOGGER.getEffectiveLevel()
        settings["log_level"] = str(level if logs else max(level, logging.WARNING))

    # pyroscope-io uploads to localhost:4040 unless told otherwise; with only
    # an output folder we upload nowhere.
    if "server_address" not in settings and not _env_set("server_address") \
            and "output_dir" not in settings and not _env_set("output_dir"):
        settings["server_address"] = DEFAULT_SERVER
    if not _env_set("spy_name"):
        settings["spy_name"] = "pyspy"  # the server's name for Python profiles

    report_names = settings.get("report_thread_name") == "true" or (
        "report_thread_name" not in settings and _env_bool("PYROSCOPE_REPORT_THREAD_NAME", False))
    with _lock:
        _native.set_log_sink(_log_sink)
        if report_names:
            _threads.install()
        _native.start(_core_env(), settings, gil_only=gil, line_mode=mode)
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
    was handled in time."""
    timeout = float(_check_number("timeout", timeout))
    return _native.flush(timeout)


def is_running():
    return _native.running()


def stats():
    """Counters of the sampler, walker and exporters (a dict of ints, and
    ``effective_rate_hz``, the sampling rate after the CPU budget, a float)."""
    return _native.stats()


class tag_wrapper:
    """``with tag_wrapper({"k": "v"}):`` labels this OS thread's samples with
    the tags while the block runs; on exit (exceptions included) the thread's
    labels are exactly what they were before, so nesting restores outer
    values. Works as a decorator too."""

    __slots__ = ("_tags", "_entered")

    def __init__(self, tags):
        self._tags = tags  # checked by the native push, once per entry
        self._entered = []  # (thread ident, depth before) per active entry

    def __enter__(self):
        depth = _native.labels_depth()
        _native.labels_push(self._tags)
        self._entered.append((threading.get_ident(), depth))
        return self

    def __exit__(self, *exc):
        ident, depth = self._entered.pop()
        if ident != threading.get_ident():
            LOGGER.warning("pyroscope: tag_wrapper exited on another thread than it "
                           "entered on; that thread's labels were left alone")
            return False
        # Pops pushes left open inside the block too, so the thread ends up
        # exactly where it was.
        while _native.labels_depth() > depth:
            _native.labels_pop()
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with tag_wrapper(self._tags):
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
    _native.thread_tag_add(key, value)
    return True


def remove_thread_tag(*args):
    """remove_thread_tag(key, value): drop the label if it has this value."""
    key, value = _thread_tag_args(args, "remove_thread_tag")
    _native.thread_tag_remove(key, value)
    return True


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


# The core's one fork path runs inside fork() itself (pthread_atfork), where
# this thread holds the GIL throughout: no other thread can be inside a
# labels call then. Taking the core's locks earlier, in a `before` hook,
# would let another thread take the GIL and then wait for one of those
# locks. The child hook below repeats the path's entry point (a no-op once
# done) and re-creates the Python-level lock.
os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_native.at_exit)
