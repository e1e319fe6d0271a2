"""Where a hung process is: its threads' stacks, for the message of a test that timed out.

Two views, both taken before the process is ended:
  - Python: a peer that dialed home (PeerClient.from_env) registers faulthandler on
    DUMP_SIGNAL; with STACKS_DIR_VAR set to a StackDumps directory it writes every thread's
    traceback into <dir>/<pid>.txt (ranks under one mpirun share a stderr: a file per process
    tells them apart);
  - native: `gdb -batch -p PID -ex "thread apply all bt"` where gdb is installed (the threads
    of the runtime under test: a collective's progress thread, a transport's poll loop).
Neither changes what the process does next, except for the moment gdb holds it stopped.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from pytest_hpccomm.files import atomic_write
from pytest_hpccomm.peer.channel import DUMP_SIGNAL, STACKS_DIR_VAR
from pytest_hpccomm.proc import proctree
from pytest_hpccomm.proc.jobs import TimeoutHook

GDB_TIMEOUT = 30.0  # seconds per process: attaching to a big process reads its symbols
# faulthandler's block: "Thread 0x... (most recent call first):" / "Current thread ..." and
# its '  File "...", line N in f' lines
_PY_BLOCK = re.compile(
    r"^(?:Thread|Current thread) 0x[0-9a-f]+ \(most recent call first\):\n(?:  .*\n?)*",
    re.MULTILINE,
)
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
_GDB_FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(?P<func>[^ (]+)")


@dataclass(frozen=True)
class Stacks:
    """One process's threads as seen from outside."""

    pid: int
    python: tuple[str, ...]  # faulthandler blocks, one per thread
    native: str  # gdb's text, "" where gdb is absent or could not attach


class StackDumps:
    """A directory for the Python dumps of a set of peers: env() makes it (again, after a
    close) and goes into their environment; take() asks live processes for their stacks;
    close() removes it."""

    def __init__(self) -> None:
        self.dir: Path | None = None

    def env(self) -> dict[str, str]:
        if self.dir is None:
            self.dir = Path(tempfile.mkdtemp(prefix="hpccomm-stacks-"))
        return {STACKS_DIR_VAR: str(self.dir)}

    def take(self, pids: list[int], settle: float = 1.0, python: bool = True) -> list[Stacks]:
        """Each live pid's stacks: the native ones first (gdb stops the process while it
        reads), then the Python dump (faulthandler writes from its signal handler); python=False
        for processes that registered no handler (DUMP_SIGNAL would end them)."""
        natives = {pid: native_stacks(pid) for pid in pids}
        reached = ask_python_stacks(pids) if python else []
        if reached:
            time.sleep(settle)
        return [
            Stacks(pid, tuple(python_stacks(self._read(pid))), natives[pid])
            for pid in pids
            if pid in reached or natives[pid]
        ]

    def take_fatal(self) -> str:
        """What fatal-signal handlers wrote (peer.channel.register_fatal): each dump holding
        "Fatal Python error", from that line on, or "". Those dumps are removed: their
        processes are dead, and a later loss must not show an earlier crash."""
        if self.dir is None:
            return ""
        found = []
        for path in sorted(self.dir.glob("*.txt")):
            text = path.read_text(errors="replace")
            at = text.find("Fatal Python error")
            if at >= 0:
                found.append(f"process {path.stem}: {text[at:].strip()}")
                path.unlink(missing_ok=True)
        return "\n".join(found)

    def _read(self, pid: int) -> str:
        if self.dir is None:
            return ""
        try:
            return (self.dir / f"{pid}.txt").read_text(errors="replace")
        except OSError:
            return ""

    def close(self) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def where_they_wait(
    dumps: StackDumps,
    named: Mapping[str, int],
    keep_in: Path,
    runtime: Sequence[str],
    python: bool = True,
    through: Sequence[str] = (),
) -> list[str]:
    """Lines saying where each named process (label -> pid) waits: its threads' innermost
    Python frames, and its native threads whose frames name the runtime (words such as
    "gloo", lower case), alike ones counted once; all the stacks go into a new file in
    keep_in, named on the last line."""
    label_of = {pid: label for label, pid in named.items()}
    lines: list[str] = []
    full: list[str] = []
    for seen in dumps.take(list(label_of), python=python):
        label = label_of[seen.pid]
        lines += [f"  {label}: {innermost(b)}" for b in seen.python]
        rows = Counter(native_summary(seen.native, words=runtime, through=through))  # alike once
        lines += [f"  {label} native: {row}" + f" (x{k})" * (k > 1) for row, k in rows.items()]
        full += [f"== {label} (pid {seen.pid}), Python\n{b}" for b in seen.python]
        if seen.native:
            full.append(f"== {label} (pid {seen.pid}), native\n{seen.native}")
    if not full:
        return ["  no stacks could be read"]
    keep_in.mkdir(parents=True, exist_ok=True)
    path = keep_in / f"hang-{os.getpid()}-{time.time_ns()}.txt"
    atomic_write(path, "\n\n".join(full) + "\n")
    return [*lines, f"  all stacks: {path}"]


RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")


def on_timeout(
    marker: str, runtime: Sequence[str], keep_in: Path, through: Sequence[str] = ()
) -> TimeoutHook:
    """A job's on_timeout (proc/jobs.py): where each of its processes whose command line holds
    `marker` (the peer's module) and that has a rank its launcher set (RANK_VARS) waits. Native
    stacks only (gdb): a peer without a dump handler would die of DUMP_SIGNAL."""
    needle = marker.encode()

    def where(procs: set[proctree.Proc]) -> str:
        named: dict[str, int] = {}
        for p in sorted(procs, key=lambda p: p.pid):
            if needle not in proctree.cmdline(p.pid):
                continue
            env = proctree.environ(p.pid)
            rank = next((env[v] for v in RANK_VARS if v in env), None)
            if rank is None:  # the launcher, whose command line holds the program's
                continue
            label = f"rank {rank}" if f"rank {rank}" not in named else f"rank {rank} pid {p.pid}"
            named[label] = p.pid
        if not named:
            return f"where they waited: none of the job's processes here runs {marker}"
        lines = where_they_wait(
            StackDumps(), named, keep_in, runtime, python=False, through=through
        )
        return "\n".join([f"where they waited ({', '.join(named)}):", *lines])

    return where


def ask_python_stacks(pids: list[int]) -> list[int]:
    """Send DUMP_SIGNAL to each live pid; the pids it reached."""
    reached = []
    for pid in pids:
        try:
            os.kill(pid, DUMP_SIGNAL)
        except OSError:
            continue
        reached.append(pid)
    return reached


def python_stacks(text: str) -> list[str]:
    """The faulthandler blocks in a dump (or a stderr), oldest first."""
    return [m.group(0).rstrip("\n") for m in _PY_BLOCK.finditer(text)]


def innermost(block: str, limit: int = 3) -> str:
    """A faulthandler block on one line: its innermost `limit` frames as func (file:line)."""
    frames = []
    for line in block.splitlines()[1:]:
        m = _FRAME.match(line)
        if m:
            frames.append(f"{m['func']} ({os.path.basename(m['file'])}:{m['line']})")
    return " < ".join(frames[:limit]) or "no frames"


def native_stacks(pid: int, timeout: float = GDB_TIMEOUT) -> str:
    """gdb's backtrace of every thread of pid; "" where gdb is absent or fails."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return ""
    try:
        done = subprocess.run(
            [gdb, "-batch", "-nx", "-p", str(pid), "-ex", "thread apply all bt 30"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if "Thread " in done.stdout else ""


def native_summary(
    text: str, limit: int = 4, words: Sequence[str] = (), through: Sequence[str] = ()
) -> list[str]:
    """One line per thread of a gdb backtrace: its innermost `limit` named functions (gdb's
    "??", a frame without a symbol, names nothing). With `words` (lower case), only the threads
    with a frame naming one of them, and the line runs on to the innermost such frame: a rank
    polling in libevent shows `epoll_wait < event_base_loop < opal_progress`, whatever depth
    of anonymous frames lies between. `through` (case as written, e.g. "PMPI_"): the line runs
    on to the innermost frame naming one, the API call the thread waits in."""
    rows: list[str] = []
    frames: list[str] = []
    for line in text.splitlines() + ["Thread end"]:
        if line.startswith("Thread "):
            names = [i for i, f in enumerate(frames) if any(w in f.lower() for w in words)]
            calls = [i for i, f in enumerate(frames) if any(w in f for w in through)]
            if frames and (names or not words):
                end = max(limit, names[0] + 1 if names else 0, calls[0] + 1 if calls else 0)
                rows.append(" < ".join(frames[:end]))
            frames = []
            continue
        m = _GDB_FRAME.match(line)
        if m and m["func"] != "??":
            frames.append(m["func"])
    return rows
