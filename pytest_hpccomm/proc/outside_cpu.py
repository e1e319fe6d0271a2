"""CPU time of a job's processes that run outside this process tree, for the contention guard.

srun's tasks are children of slurmstepd, not of pytest, and a rank a remote shell started on a
virtual host is sshd's: both share this machine's cores with the job, yet cpu_share's own time
(this process tree) misses them, so they read as a neighbour's load: every srun job would be
"disturbed" and every verdict inconclusive (docs/explanation/contention-guard.md). The job's
tagged processes count as its own, and so do the step daemons of this SLURM job (slurmstepd:
[JOBID.STEP], which start the tasks and forward their output): that is what srun costs, as
mpirun's daemons are part of an mpirun job.

More: docs/explanation/internals.md (pytest_hpccomm.proc.outside_cpu).
"""

from __future__ import annotations

import os
import threading
import time

from pytest_hpccomm.proc import proctree

_TICK = float(os.sysconf("SC_CLK_TCK"))


def _step_daemons(job_id: str) -> set[proctree.Proc]:
    """slurmstepd processes of SLURM job `job_id` on this node (their title names the step)."""
    return proctree.with_cmdline_prefix(f"slurmstepd: [{job_id}.".encode())


class OutsideCpu:
    """Samples from construction until stop(); stop() returns the CPU seconds used meanwhile by
    processes tagged `tag` (jobs.TAG_VAR) outside this process tree and, inside a SLURM job,
    by that job's step daemons."""

    def __init__(
        self,
        tag_var: str,
        tag: str,
        slurm_job: str | None = None,
        period: float = 0.02,
        scan: float = 0.25,
        settled_scan: float = 2.0,
    ) -> None:
        self.tag_var, self.tag, self.slurm_job = tag_var, tag, slurm_job
        self.period, self.scan, self.settled_scan = period, scan, settled_scan
        self._ticks: dict[proctree.Proc, int] = {}  # last reading
        self._base: dict[proctree.Proc, int] = {}  # reading at first sight, if before the job
        self._skip: set[proctree.Proc] = set()  # inside this tree: cpu_share counts them
        self._done = threading.Event()
        self._discover(first=True)
        self._thread = threading.Thread(target=self._loop, name="outside-cpu", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        next_scan = time.monotonic() + self.scan
        while not self._done.wait(self.period):
            if time.monotonic() >= next_scan:
                self._discover()
                next_scan = time.monotonic() + (self.settled_scan if self._ticks else self.scan)
            self._sample()

    def _discover(self, first: bool = False) -> None:
        found = proctree.with_env(self.tag_var, self.tag)
        if self.slurm_job:
            found |= _step_daemons(self.slurm_job)
        new = [p for p in found if p not in self._ticks and p not in self._skip]
        if not new:
            return
        ours = proctree.descendants([os.getpid()], zombies=True)
        for p in new:
            if p in ours:
                self._skip.add(p)
                continue
            now = proctree.self_ticks_of(p)
            if now is None:
                continue
            self._ticks[p] = now
            self._base[p] = now if first else 0

    def _sample(self) -> None:
        for p, seen in self._ticks.items():
            now = proctree.self_ticks_of(p)
            if now is not None and now > seen:
                self._ticks[p] = now

    def stop(self) -> float:
        """Stop sampling: the CPU seconds those processes used since construction."""
        if not self._done.is_set():
            self._done.set()
            self._thread.join(5.0)
            self._sample()
        return sum(t - self._base[p] for p, t in self._ticks.items()) / _TICK
