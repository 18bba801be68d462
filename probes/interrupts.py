"""Interrupts that must not be lost inside C callbacks.

Python runs a signal handler in the main thread at its next bytecode, wherever that is: inside
BCC's ring-buffer callback (Python called from C through ctypes), an exception the handler
raises is swallowed ("Exception ignored on calling ctypes callback function") and the run goes
on after Ctrl-C or SIGTERM. Holding signals with pthread_sigmask does not help: the kernel then
hands them to another thread and the handler still runs in the main one.

    with deferred():                 # around the C call that calls back into Python
        bpf.ring_buffer_poll(0)
    ...
    def on_signal(signum, frame):    # the handler
        raise_or_defer(KeyboardInterrupt())

A deferred interrupt is raised when the outermost `deferred` block ends.
"""

import contextlib
import os
import signal
import threading

_state = threading.local()


def _depth() -> int:
    return getattr(_state, "depth", 0)


@contextlib.contextmanager
def deferred():
    _state.depth = _depth() + 1
    try:
        yield
    finally:
        _state.depth -= 1
        pending = getattr(_state, "pending", None)
        if _state.depth == 0 and pending is not None:
            _state.pending = None
            raise pending


def raise_or_defer(exc: BaseException) -> None:
    """For a signal handler: raise now, or when the current `deferred` block ends."""
    if _depth():
        _state.pending = getattr(_state, "pending", None) or exc
        return
    raise exc


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP, as interrupt_once raises it."""


SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def interrupt_once(signum, frame) -> None:
    """A signal handler: the first of SIGNALS interrupts (raise_or_defer); the rest are then
    ignored, so they cannot cut the teardown that the first one started.

    Landing in a callback the interpreter runs for itself (the import system's module-lock
    weakref callback, during start-up's imports), an exception would be printed as "ignored"
    and the interrupt lost: the signal is sent again a moment later, from a thread, to be
    handled once the callback is done (sent from here, it was handled at once, still in it)."""
    if _in_import_callback(frame):
        threading.Timer(0.005, os.kill, (os.getpid(), signum)).start()
        return
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise_or_defer(Interrupted())


def _in_import_callback(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_name == "cb" and \
                frame.f_globals.get("__name__") == "importlib._bootstrap":
            return True
        frame = frame.f_back
    return False
