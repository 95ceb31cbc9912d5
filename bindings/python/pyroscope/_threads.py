"""Thread names for ``report_thread_name``.

The sampler must not touch Python objects, so each thread's name is copied
into the native table (keyed by the kernel thread id) when the thread
starts, when it is renamed, and for threads already running when profiling
is configured.
"""

import threading

from . import _native

_installed = False
_lock = threading.Lock()
_orig_bootstrap_inner = threading.Thread._bootstrap_inner
_name_prop = threading.Thread.name


def _set(native_id, name):
    try:
        _native.thread_name_set(native_id, name)
    except (ValueError, TypeError):
        pass  # table full or odd name: that thread goes unnamed


def _register_running():
    for t in threading.enumerate():
        if t.native_id:
            _set(t.native_id, t.name)


def _bootstrap_inner(self):
    """Thread start as threading does it, with the name registered around it."""
    tid = threading.get_native_id()
    _set(tid, self.name)
    try:
        _orig_bootstrap_inner(self)
    finally:
        _set(tid, None)


def _set_name(self, value):
    _name_prop.fset(self, value)
    if self.native_id and self.is_alive():
        _set(self.native_id, self.name)


def install():
    """Patch threading.Thread once so new threads and renames are seen."""
    global _installed
    with _lock:
        if not _installed:
            threading.Thread._bootstrap_inner = _bootstrap_inner
            threading.Thread.name = property(_name_prop.fget, _set_name, doc=_name_prop.__doc__)
            _installed = True
    _register_running()


def after_fork():
    """In a forked child only the forking thread lives on (and a lock held
    by another thread in install() would never be released here)."""
    global _lock
    _lock = threading.Lock()
    _native.thread_names_clear()
    if _installed:
        t = threading.current_thread()
        _set(threading.get_native_id(), t.name)
