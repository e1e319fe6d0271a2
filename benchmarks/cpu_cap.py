"""A CPU cap on a process tree: a new cgroup with a CPU quota (cgroup v2's cpu.max, or v1's
cpu.cfs_quota_us), the host drift the nightly-reference measurement applies to both sides of
a night. Root only; the cgroup is removed on exit, its leftover processes (ours) ended by PID.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PERIOD_US = 1_000  # the shortest period: throttling spreads over a job like a slower CPU
V2 = Path("/sys/fs/cgroup")
V1 = Path("/sys/fs/cgroup/cpu")


def _parent() -> tuple[Path, str]:
    """(where to create the cgroup, its version) on this host."""
    controllers = V2 / "cgroup.controllers"
    if controllers.is_file() and "cpu" in controllers.read_text(errors="replace").split():
        return V2, "v2"
    if (V1 / "cpu.cfs_quota_us").is_file():
        return V1, "v1"
    raise RuntimeError("no cgroup CPU controller here (neither v2 cpu.max nor v1 cpu)")


@contextmanager
def cpu_cap(cpus: float) -> Iterator[list[str]]:
    """A command prefix that runs its command in a new cgroup capped at `cpus` CPUs."""
    if cpus <= 0:
        raise ValueError(f"cpus must be positive, got {cpus}")
    parent, version = _parent()
    group = parent / f"hpccomm-cap-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    quota = int(cpus * PERIOD_US)
    try:
        if version == "v2":
            (group / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")
        else:
            (group / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (group / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        procs = group / "cgroup.procs"
        yield ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "cpu-cap"]
    finally:
        for _ in range(50):
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
            for pid in pids:  # processes this cap started: ended by PID
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
