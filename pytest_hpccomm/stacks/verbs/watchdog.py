"""A deadline per verbs item that Hypothesis cannot swallow.

pytest-timeout's signal method fails an item by raising pytest's `Failed` from SIGALRM.
Inside a Hypothesis property that is one more failing example: Hypothesis catches it and
goes on shrinking, and the one-shot timer never fires again (issue 11: a siw item hung until
the guest's job timeout). This watchdog raises ItemDeadline, a BaseException outside what
Hypothesis catches, so the item ends when its deadline passes, wherever it is.

It cannot share SIGALRM (pytest-timeout owns the process's one ITIMER_REAL): a timer thread
sends SIGUSR2 to the main thread, whose Python handler raises there. The handler stays
installed for the session and only raises while the item that armed it is running, so a
signal arriving late is ignored rather than killing the process.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

SIGNAL = signal.SIGUSR2


class ItemDeadline(BaseException):
    """The item ran past its verbs deadline (see the module docstring for why not Exception)."""


@dataclass
class _Armed:
    what: str
    seconds: float
    started: float
    fired: bool = False


_current: _Armed | None = None
_installed = False


def install() -> bool:
    """Install the handler (main thread, once); False when SIGUSR2 belongs to someone else."""
    global _installed
    if _installed:
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(SIGNAL) not in (signal.SIG_DFL, None):
        return False
    signal.signal(SIGNAL, _on_signal)
    _installed = True
    return True


def _on_signal(signum: int, frame: FrameType | None) -> None:
    armed = _current
    if armed is None or not armed.fired:
        return  # late: its item is over
    took = time.monotonic() - armed.started
    raise ItemDeadline(
        f"{armed.what}: still running after {took:.0f} s, past its verbs "
        f"deadline of {armed.seconds:g} s (--hpc-verbs-deadline)"
    )


@contextmanager
def deadline(seconds: float, what: str) -> Iterator[_Armed | None]:
    """Raise ItemDeadline in this (the main) thread once `seconds` have passed; yields the
    arming (its .fired says whether it went off) or None when disabled or not installable."""
    global _current
    if seconds <= 0 or not install():
        yield None
        return
    armed = _Armed(what, seconds, time.monotonic())
    main = threading.main_thread().ident
    assert main is not None

    def fire() -> None:
        armed.fired = True
        signal.pthread_kill(main, SIGNAL)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    _current = armed
    timer.start()
    try:
        yield armed
    finally:
        timer.cancel()
        _current = None
