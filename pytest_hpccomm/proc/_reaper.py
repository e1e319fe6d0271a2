"""Reaper shim: runs one job's command and guarantees nothing it started outlives it.

    python -E -s -S _reaper.py STATUS_FD PARENT_PID GRACE TIMEOUT -- ARGV...

Runs by file path with -S (no site, no package imports: starts in ~20 ms), so it is stdlib
only and repeats the few lines of /proc walking it needs.

- It is a child subreaper (prctl): orphans of the job (Open MPI daemons that setsid and
  double-fork, processes started in a namespace) are re-parented here, not to PID 1, which on
  this VM never reaps them. So /proc descendants of the shim are the whole job.
- When the command exits, or on SIGTERM/SIGINT/SIGHUP, or at TIMEOUT, or when the parent dies
  (PDEATHSIG), every descendant gets SIGTERM, then SIGKILL after GRACE seconds; the shim reaps
  them all and exits. The command's own status goes to STATUS_FD as "RC\\n" (-N: signal N).
"""

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rindex(b")") + 2 :].split()
        if fields[0] not in (b"Z", b"X"):
            children.setdefault(int(fields[1]), []).append(int(name))
    out: list[int] = []
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            out.append(pid)
            todo.append(pid)
    return out


def _signal_tree(sig: int) -> None:
    for pid in _descendants(os.getpid()):
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def main() -> int:
    status_fd, parent = int(sys.argv[1]), int(sys.argv[2])
    grace, timeout = float(sys.argv[3]), float(sys.argv[4])
    if sys.argv[5] != "--" or len(sys.argv) < 7:
        print("usage: _reaper.py STATUS_FD PARENT_PID GRACE TIMEOUT -- ARGV...", file=sys.stderr)
        return 2
    argv = sys.argv[6:]
    os.set_inheritable(status_fd, False)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    stop_reason: list[str] = []

    def on_signal(signum: int, _frame: object) -> None:
        stop_reason.append(signal.Signals(signum).name)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    if os.getppid() != parent:  # parent died before PDEATHSIG was armed
        return 1

    pid = os.fork()
    if pid == 0:
        try:
            for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(s, signal.SIG_DFL)  # SIG_IGN would survive exec
            os.execvp(argv[0], argv)
        except OSError as e:
            os.write(2, f"cannot run {argv[0]!r}: {e.strerror}\n".encode())
        os._exit(127)

    deadline = time.monotonic() + timeout if timeout > 0 else None
    main_rc: int | None = None
    kill_at: float | None = None
    nap = 0.005
    while True:
        now = time.monotonic()
        if kill_at is None and (
            main_rc is not None or stop_reason or (deadline and now >= deadline)
        ):
            _signal_tree(signal.SIGTERM)
            kill_at = now + grace
        elif kill_at is not None and now >= kill_at:
            _signal_tree(signal.SIGKILL)
            kill_at = now + 0.5  # repeat: a process may have forked meanwhile
        try:
            got, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if got == 0:
            time.sleep(nap)
            nap = min(nap * 1.5, 0.05)
            continue
        nap = 0.005
        if got == pid:
            main_rc = os.waitstatus_to_exitcode(status)
            os.write(status_fd, f"{main_rc}\n".encode())
    return 0 if main_rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
