"""probes/interrupts.py: a signal that lands in the import system's own callback (its module
locks' weakref callback, run during start-up's imports) is not lost: raised there it would be
printed as "Exception ignored" and the run would go on (a fresh clone's make test saw an
`evlab run` SIGHUP'd in its start-up finish all eight scenarios, status 0)."""

import signal
import sys
import time

import pytest

from probes.interrupts import interrupt_once


def test_a_signal_in_the_import_systems_callback_is_sent_again_once_it_is_done():
    got: list[int] = []
    space = {"__name__": "importlib._bootstrap", "interrupt_once": interrupt_once, "sys": sys,
             "signal": signal}
    # the handler called from a frame below `cb` (as when the signal sent again was handled at
    # once, inside the handler itself, still in the callback)
    exec("def cb():\n    def below():\n        interrupt_once(signal.SIGUSR2, sys._getframe())\n"
         "    below()\n", space)
    old = signal.signal(signal.SIGUSR2, lambda signum, _: got.append(signum))
    try:
        try:
            space["cb"]()
        except KeyboardInterrupt:   # probes.interrupts.Interrupted
            pytest.fail("the interrupt was raised inside the import system's callback")
        assert got == []
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        assert got == [signal.SIGUSR2]   # sent again, once it was done
    finally:
        signal.signal(signal.SIGUSR2, old)
