"""Processes seen through /proc: descendants, environment tags, kill-by-PID.

Why /proc and not just the process group: Open MPI's daemons call setsid() and leave the
group, and processes inside network namespaces are still in our PID namespace, so /proc sees
them all. A process is named by (pid, start time) so a recycled PID is never killed by mistake.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import Iterable, Mapping

PROC = "/proc"


@dataclass(frozen=True, order=True)
class Proc:
    pid: int
    start: int  # clock ticks since boot (/proc/PID/stat field 22): tells a reused PID apart


def _fields(pid: int) -> list[bytes] | None:
    """/proc/PID/stat from field 3 (state) on, or None if pid is gone."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # comm may hold spaces and parentheses: the fields start after the LAST ')'
    return data[data.rindex(b")") + 2 :].split()


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(ppid, start, state) of pid, or None if it is gone."""
    rest = _fields(pid)
    return None if rest is None else (int(rest[1]), int(rest[19]), rest[0].decode())


def self_ticks_of(p: Proc) -> int | None:
    """utime + stime of p itself (not its reaped children's) while its PID is still that
    process (a zombie keeps its times until reaped); None once it is gone or the PID was
    reused."""
    rest = _fields(p.pid)
    if rest is None or int(rest[19]) != p.start:
        return None
    return int(rest[11]) + int(rest[12])


@dataclass(frozen=True)
class Row:
    """One process as /proc/PID/stat shows it at one moment."""

    ppid: int
    state: str
    self_ticks: int  # utime + stime
    cpu_ticks: int  # and its reaped children's (cutime + cstime)


def table() -> dict[Proc, Row]:
    """Every process there is now, by Proc (one pass over /proc)."""
    out: dict[Proc, Row] = {}
    for pid in _pids():
        rest = _fields(pid)
        if rest is not None:
            user, system, cuser, csystem = (int(rest[i]) for i in (11, 12, 13, 14))
            out[Proc(pid, int(rest[19]))] = Row(
                int(rest[1]), rest[0].decode(), user + system, user + system + cuser + csystem
            )
    return out


def _pids() -> list[int]:
    return [int(n) for n in os.listdir(PROC) if n.isdigit()]


def proc_of(pid: int) -> Proc | None:
    st = _stat(pid)
    return None if st is None else Proc(pid, st[1])


def alive(p: Proc) -> bool:
    """True if p still runs (a zombie has finished: it only waits to be reaped)."""
    st = _stat(p.pid)
    return st is not None and st[1] == p.start and st[2] not in ("Z", "X")


def descendants(
    roots: Iterable[int], zombies: bool = False, rows: Mapping[Proc, Row] | None = None
) -> set[Proc]:
    """Every live process below the given PIDs (not the roots themselves); with `zombies`,
    also those that ended and wait to be reaped (they still hold their CPU times). `rows`: a
    table() already read (else /proc is read now)."""
    gone = ("X",) if zombies else ("Z", "X")
    children: dict[int, list[Proc]] = {}
    for p, row in (table() if rows is None else rows).items():
        if row.state not in gone:
            children.setdefault(row.ppid, []).append(p)
    out: set[Proc] = set()
    todo = list(roots)
    while todo:
        for p in children.get(todo.pop(), ()):
            if p not in out:
                out.add(p)
                todo.append(p.pid)
    return out


def with_env(name: str, value: str) -> set[Proc]:
    """Live processes whose initial environment holds name=value (our job tag)."""
    needle = f"{name}={value}".encode()
    out: set[Proc] = set()
    for pid in _pids():
        if needle in _environ_items(pid):
            p = proc_of(pid)
            if p is not None and alive(p):
                out.add(p)
    return out


def _environ_items(pid: int) -> list[bytes]:
    """pid's initial environment as NAME=VALUE items; [] once it is gone or not ours to read."""
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as f:
            return [item for item in f.read().split(b"\0") if item]
    except OSError:
        return []


def environ(pid: int) -> dict[str, str]:
    """pid's initial environment; {} once it is gone or not ours to read."""
    pairs = (item.decode(errors="replace").partition("=") for item in _environ_items(pid))
    return {k: v for k, _, v in pairs}


def cmdline(pid: int) -> bytes:
    """pid's command line as the kernel shows it (a daemon may have rewritten it as a title:
    "slurmstepd: [12.0]"), NUL-separated; b"" once it is gone."""
    try:
        with open(f"{PROC}/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def name(pid: int) -> str:
    """pid's command line on one line, or [its comm] for a kernel thread (which has none)."""
    line = cmdline(pid).replace(b"\0", b" ").decode(errors="replace").strip()
    if line:
        return line
    try:
        with open(f"{PROC}/{pid}/comm") as f:
            return f"[{f.read().strip()}]"
    except OSError:
        return "[gone]"


def with_cmdline_prefix(prefix: bytes) -> set[Proc]:
    """Live processes whose command line starts with `prefix`."""
    out: set[Proc] = set()
    for pid in _pids():
        if cmdline(pid).startswith(prefix):
            p = proc_of(pid)
            if p is not None and alive(p):
                out.add(p)
    return out


def signal_all(procs: Iterable[Proc], sig: int) -> None:
    for p in procs:
        if alive(p):  # re-checked right before: narrows the PID-reuse window to microseconds
            try:
                os.kill(p.pid, sig)
            except OSError:
                pass


def wait_gone(procs: Iterable[Proc], timeout: float) -> set[Proc]:
    """Wait until none of procs runs; return those still running at the deadline."""
    left = set(procs)
    deadline = time.monotonic() + timeout
    while True:
        left = {p for p in left if alive(p)}
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


def terminate(procs: Iterable[Proc], grace: float = 2.0) -> set[Proc]:
    """SIGTERM, wait up to grace, then SIGKILL; return any that survived SIGKILL (D state)."""
    procs = set(procs)
    signal_all(procs, signal.SIGTERM)
    left = wait_gone(procs, grace)
    signal_all(left, signal.SIGKILL)
    return wait_gone(left, 2.0)
