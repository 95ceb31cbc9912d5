"""The last period of a forked child that ends without interpreter exit.

multiprocessing ends its fork children with ``os._exit()`` (as billiard,
Celery's prefork pool and many job runners do), and ``Pool.terminate()``
(also ``with Pool(...)``) kills its workers with SIGTERM: neither runs the
exit-time export, so the child's last period was lost. In a forked child
that profiles, ``os._exit`` is wrapped to stop the profiler first (bounded
by ``stop_timeout``); in a multiprocessing child whose SIGTERM is not
handled, a SIGTERM handler stops it and then dies of SIGTERM as before (and
if the main thread never runs that handler, a thread of ours ends the
process by SIGTERM after stop_timeout + 2 s: term_deadline.c).
"""

import functools
import os
import signal
import sys
import threading

from . import _native

_real_exit = os._exit
_stop = None            # the package's shutdown(), set by after_fork_in_child


def _flush_quietly():
    # Never raise into the exiting application.
    try:
        if _stop is not None and _native.running():
            _stop()
    except BaseException:
        pass


@functools.wraps(_real_exit)
def _exit(status):
    _flush_quietly()
    _real_exit(status)


def _on_sigterm(signum, frame):
    # Ignored while the last period is exported (bounded by stop_timeout;
    # term_deadline.c re-sends SIGTERM until this handler ran), then the
    # default action ends the process as it would have without us.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _flush_quietly()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


class _Token:
    """Keeps the multiprocessing after-fork registration alive (its registry
    holds weak references)."""


_token = _Token()
_mp_registered = False


def _mp_child(_obj):
    # multiprocessing's own after-fork hook, in its child: only while we
    # profile there, on the main thread, and when nobody handles SIGTERM.
    try:
        if _native.running() and threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
            # A Python handler can miss a SIGTERM that lands just before
            # the main thread blocks; the default action never did.
            _native.term_deadline()
    except (ValueError, OSError):
        pass


def before_fork():
    """os.register_at_fork(before=...): hook multiprocessing's children once
    it has been imported."""
    global _mp_registered
    util = sys.modules.get("multiprocessing.util")
    if not _mp_registered and util is not None:
        util.register_after_fork(_token, _mp_child)
        _mp_registered = True


def after_fork_in_child(stop):
    """In any forked child: export the last period at os._exit()."""
    global _stop
    _stop = stop
    if _native.running() and os._exit is not _exit:
        os._exit = _exit
