"""A neighbour on a shared runner: a busy loop that is NOT our descendant (its parent shell
exits, so it is reparented), as another user's process is; ended by PID afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

BUSY = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < {s}: pass"


@contextmanager
def busy_neighbour(seconds: float = 60.0) -> Iterator[int]:
    """Its PID while it spins (bounded by itself too: $! is the loop's own PID)."""
    loop = BUSY.format(s=seconds)
    out = subprocess.run(
        ["sh", "-c", f"{sys.executable} -c '{loop}' >/dev/null 2>&1 & echo $!"],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    pid = int(out.stdout.split()[0])
    time.sleep(0.3)
    try:
        yield pid
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
