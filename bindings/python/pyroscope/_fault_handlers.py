"""Announcing SIGSEGV/SIGBUS handler changes to the fault guard.

The sampler reads stacks with plain loads under our SIGSEGV/SIGBUS handler
(the fault guard) only while that handler is the installed one: a handler
installed over it would see the sampler's faults first (faulthandler prints
a fatal error for them). ``faulthandler.enable``/``disable`` and
``signal.signal`` for these signals are wrapped so that no guarded read runs
while they change the handler and the next one checks it again; the wrapped
functions behave exactly as before. Changes made from C are found at the
sampler's next tick.
"""

import faulthandler
import functools
import signal

from . import _native

_FAULTS = (signal.SIGSEGV, signal.SIGBUS)


def _announced(fn, applies):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not applies(*args, **kwargs):
            return fn(*args, **kwargs)
        _native.fault_guard_change(True)
        try:
            return fn(*args, **kwargs)
        finally:
            _native.fault_guard_change(False)
    wrapper._pyroscope_announced = True
    return wrapper


def _any(*args, **kwargs):
    return True


def _fault_signal(signalnum=None, *args, **kwargs):
    return signalnum in _FAULTS


def install():
    """Wrap the functions (once; any thread)."""
    for mod, name, applies in ((faulthandler, "enable", _any), (faulthandler, "disable", _any),
                               (signal, "signal", _fault_signal)):
        fn = getattr(mod, name)
        if not getattr(fn, "_pyroscope_announced", False):
            setattr(mod, name, _announced(fn, applies))
