"""probes/interrupts.py: a signal that lands in the import system's own callback (its module
locks' weakref callback, run during start-up's imports) is not lost: raised there it would be
printed as "Exception ignored" and the run would go on (a fresh clone's make test saw an
`evlab run` SIGHUP'd in its start-up finish all eight scenarios, status 0)."""

import os
import signal
import sys
import threading
import time

import pytest

from probes.interrupts import _in_import_callback, interrupt_once


def test_a_signal_in_the_import_systems_callback_is_sent_again_once_it_is_done(monkeypatch):
    got: list[tuple[int, bool]] = []   # each signal handled: (its number, inside the callback?)
    sent: list[bool] = []              # each time it was sent again: from the main thread?
    kill = os.kill

    def sending(pid, signum):
        sent.append(threading.current_thread() is threading.main_thread())
        kill(pid, signum)

    monkeypatch.setattr(os, "kill", sending)
    space = {"__name__": "importlib._bootstrap", "interrupt_once": interrupt_once, "sys": sys,
             "signal": signal}
    # the handler called from a frame below `cb` (as when the signal sent again was handled at
    # once, inside the handler itself, still in the callback)
    exec("def cb():\n    def below():\n        interrupt_once(signal.SIGUSR2, sys._getframe())\n"
         "    below()\n", space)

    def handler(signum, frame):
        inside = _in_import_callback(frame)   # where evlab's own handler looks
        got.append((signum, inside))
        if inside:   # still in it (this process waited for a CPU): deferred again, as evlab's
            interrupt_once(signum, frame)

    old = signal.signal(signal.SIGUSR2, handler)
    try:
        try:
            space["cb"]()
        except KeyboardInterrupt:   # probes.interrupts.Interrupted
            pytest.fail("the interrupt was raised inside the import system's callback")
        deadline = time.monotonic() + 10
        while (not got or got[-1][1]) and time.monotonic() < deadline:
            time.sleep(0.01)
        # sent again, and handled once the callback was done (however long a loaded machine
        # kept this process in it: each time it landed there, it was sent again)
        assert got and got[-1] == (signal.SIGUSR2, False), got
        # from another thread, a moment later: sent from the handler itself, it was handled at
        # once, still in the callback
        assert sent and not any(sent), sent
    finally:
        signal.signal(signal.SIGUSR2, old)

