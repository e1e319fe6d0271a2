"""Start a program with environment variables read from stdin: how a peer started over a
remote shell gets its control channel's key without it appearing in any command line.

    ssh HOST 'cd ROOT && exec python -m pytest_hpccomm.peer.stdin_env -- ARGV...' <<< '{"K": "V"}'

Reads one JSON object from stdin, adds it to the environment and runs ARGV, staying beside it
as a watcher that ends it when the remote shell's session goes away (the connection dropped
or the orchestrator's job was stopped). A plain exec with PDEATHSIG cannot: the program's
parent is the remote `timeout`, which sshd's exit does not end (measured: the program ran on
until the timeout, an hour for a TensorFlow task). What does show the session's end is the
program's stdout/stderr, pipes or sockets to the session: the watcher polls them for
POLLERR/POLLHUP, then sends SIGTERM and, 2 s later, SIGKILL. Signals the watcher gets (the
remote `timeout`'s TERM) are passed on; it exits with the program's status (128 + signal when
killed). The program keeps its own PID (the one a peer reports in its hello). Stdlib only.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import stat
import sys
import time
from types import FrameType

PR_SET_PDEATHSIG = 1
POLL_MS = 500
KILL_GRACE = 2.0  # seconds between the watcher's TERM and its KILL
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print(
            "usage: python -m pytest_hpccomm.peer.stdin_env -- ARGV... < env.json", file=sys.stderr
        )
        return 2
    try:
        extra = json.loads(sys.stdin.readline() or "{}")
    except json.JSONDecodeError as exc:
        print(f"stdin_env: the environment on stdin is not JSON: {exc}", file=sys.stderr)
        return 2
    os.environ.update({str(k): str(v) for k, v in extra.items()})
    watcher = os.getpid()
    # an inherited SIG_IGN for SIGCHLD would reap the program behind the watcher's back
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    child = os.fork()
    if child == 0:
        _die_with(watcher)
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            print(f"stdin_env: cannot run {argv[0]}: {exc}", file=sys.stderr)
        os._exit(127)
    return _watch(child)


def _die_with(parent: int) -> None:
    """In the child: the kernel ends it if the watcher dies (SIGKILLed, say)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass  # not Linux: the watcher and the remote `timeout` still bound the program
    if os.getppid() != parent:
        os._exit(1)  # the watcher died before the request took effect


def _session_fds() -> list[int]:
    """stdout/stderr when they lead to the session (pipes, sockets): their error is its end."""
    out = []
    for fd in (1, 2):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            out.append(fd)
    return out


def _watch(child: int) -> int:
    def forward(signum: int, _frame: FrameType | None) -> None:
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for signum in FORWARDED:
        signal.signal(signum, forward)
    poller = select.poll()
    for fd in _session_fds():
        poller.register(fd, select.POLLERR | select.POLLHUP)
    killed_at: float | None = None
    while True:
        try:
            pid, status = os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            return 1  # reaped elsewhere: its status is lost
        if pid == child:
            return (
                os.waitstatus_to_exitcode(status)
                if not os.WIFSIGNALED(status)
                else 128 + os.WTERMSIG(status)
            )
        if killed_at is not None:
            if time.monotonic() - killed_at > KILL_GRACE:
                forward(signal.SIGKILL, None)
            time.sleep(0.05)
            continue
        try:
            events = poller.poll(POLL_MS)
        except InterruptedError:
            continue
        if events:  # the session is gone: nobody reads the program any more
            forward(signal.SIGTERM, None)
            killed_at = time.monotonic()
            for fd, _ in events:
                poller.unregister(fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
