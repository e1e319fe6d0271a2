"""Jobs: run a command with a hard timeout and reap everything it started.

Every job runs under the reaper shim (_reaper.py) in a new session. Stopping a job:
SIGTERM to the shim and to every process of the job, SIGKILL after `grace`, then reap. "Every
process of the job" is the union of
  - /proc descendants of the shim (complete: the shim is a child subreaper),
  - processes whose environment carries this job's tag (HPCCOMM_JOB_TAG, inherited by
    mpirun's daemons and ranks, also inside network namespaces),
  - PIDs from netns_pids_hook (e.g. `ip netns pids` of a virtual cluster) that carry the tag,
so a concurrent job in the same namespaces (a session-long peer) is never hit.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterable, Mapping, Sequence

from pytest_hpccomm.proc import proctree
from pytest_hpccomm.proc.cpu_share import CpuMeter, CpuShare
from pytest_hpccomm.proc.outside_cpu import OutsideCpu

TAG_VAR = "HPCCOMM_JOB_TAG"
TIMED_OUT_LINES = 4  # of stderr, in a timed-out job's describe()
_REAPER = str(Path(__file__).with_name("_reaper.py"))

PidsHook = Callable[[], Iterable[int]]
# called once when a job's timeout ends it, before anything is signalled, with its live
# processes: what it returns (e.g. where the ranks wait, proc/stacks.py) is JobResult.hung
TimeoutHook = Callable[[set[proctree.Proc]], str]


@dataclass(frozen=True)
class JobResult:
    argv: tuple[str, ...]
    returncode: int  # negative: killed by that signal (as subprocess reports it)
    stdout: str
    stderr: str
    elapsed: float  # seconds, start to reaped
    timed_out: bool
    label: str = ""  # what the job is, for messages (argv[0] is often just `ip`)
    cpu: CpuShare | None = None  # who used the cores while it ran (cpu_share.py)
    hung: str = ""  # on_timeout's account of a timed-out job (where its processes waited)
    diagnosis: str = ""  # a known cause of the failure, named by the launcher (describe())

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def describe(self) -> str:
        """One line for an assertion message or a skip reason."""
        how = "timed out" if self.timed_out else f"exit {self.returncode}"
        if self.timed_out:  # the last line is what the kill made it say; a hang shows above it
            lines = [line.strip() for line in self.stderr.strip().splitlines() if line.strip()]
            why = " | ".join(lines[-TIMED_OUT_LINES:])[-600:] or last_words(self.stdout)
        else:
            why = last_words(self.stderr) or last_words(self.stdout)
        said = f"{self.label or self.argv[0]} {how} after {self.elapsed:.1f}s: {why}"
        return f"{said} -- {self.diagnosis}" if self.diagnosis else said


def _is_rule(line: str) -> bool:
    return bool(line) and not line.strip(" -=*")


def last_words(text: str, limit: int = 300) -> str:
    """What a failed program said last, on one line: its last line, or the last help block
    Open MPI / PRRTE frame between rules of dashes (whose last line is only the rule)."""
    lines = [line.strip() for line in text.strip().splitlines()]
    while lines and _is_rule(lines[-1]):
        end = len(lines) - 1
        start = max((i for i in range(end) if _is_rule(lines[i])), default=-1)
        block = [line for line in lines[start + 1 : end] if line]
        if block:
            return " ".join(block)[:limit]
        lines = lines[: max(start, 0)]
    return lines[-1][:limit] if lines else ""


class RunningJob:
    """A job started with start_job(); stop() (or leaving the `with` block) ends and reaps it."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None,
        cwd: str | os.PathLike[str] | None,
        timeout: float | None,
        grace: float,
        netns_pids_hook: PidsHook | None,
        on_start: Callable[[int], None] | None,
        label: str = "",
        scratch: str | os.PathLike[str] | None = None,
        stdin: bytes | None = None,
        outside_cpu: bool = False,
        on_timeout: TimeoutHook | None = None,
    ) -> None:
        if not argv:
            raise ValueError("empty argv")
        if stdin is not None and len(stdin) > 4096:
            raise ValueError("stdin: at most 4096 bytes (written into the pipe before start)")
        self._scratch = None if scratch is None else Path(scratch)
        if self._scratch is not None:
            self._scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.argv = tuple(str(a) for a in argv)
        self.label = label
        # owner PID first: tells whose job a stray process belongs to on a shared machine
        self.tag = f"{os.getpid()}.{secrets.token_hex(8)}"
        self.grace = grace
        self._hook = netns_pids_hook
        self._out: IO[bytes] = tempfile.TemporaryFile()
        self._err: IO[bytes] = tempfile.TemporaryFile()
        full_env = dict(os.environ if env is None else env)
        # last, also when a job starts jobs (its own tag is inherited): an MPI_Init hang once
        # put down to the tag's place was not reproduced (docs: the defects catalogue)
        full_env.pop(TAG_VAR, None)
        full_env[TAG_VAR] = self.tag
        rfd, wfd = os.pipe()
        self._status_r = rfd
        self._meter = CpuMeter()
        self._t0 = time.monotonic()
        self._deadline = None if timeout is None else self._t0 + timeout
        # The shim's own deadline is a backstop for a hung orchestrator; the nominal timeout is
        # enforced here, so timed_out is reported, not mistaken for the job's own failure.
        backstop = 0.0 if timeout is None else timeout + grace + 5.0
        # stdin: a few bytes (a remote peer's environment) in a pipe that is closed after them
        in_fd: int | None = None
        if stdin is not None:
            in_fd, in_w = os.pipe()
            os.write(in_w, stdin)  # fits the pipe's buffer (<= 4 KiB): never blocks
            os.close(in_w)
        try:
            self._shim = subprocess.Popen(
                [
                    sys.executable,
                    "-E",
                    "-s",
                    "-S",
                    _REAPER,
                    str(wfd),
                    str(os.getpid()),
                    str(grace),
                    str(backstop),
                    "--",
                    *self.argv,
                ],
                stdin=subprocess.DEVNULL if in_fd is None else in_fd,
                stdout=self._out,
                stderr=self._err,
                env=full_env,
                cwd=cwd,
                pass_fds=(wfd,),
                start_new_session=True,
            )
        except BaseException:
            os.close(rfd)
            self._out.close()
            self._err.close()
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
            raise
        finally:
            os.close(wfd)
            if in_fd is not None:
                os.close(in_fd)
        self.pid = self._shim.pid
        self._outside = (
            OutsideCpu(TAG_VAR, self.tag, os.environ.get("SLURM_JOB_ID")) if outside_cpu else None
        )
        self._shim_proc = proctree.proc_of(self.pid)
        self._result: JobResult | None = None
        self._timed_out = False
        self._on_timeout = on_timeout
        self._hung = ""
        if on_start is not None:
            on_start(self.pid)

    # -- state ---------------------------------------------------------------------------
    def poll(self) -> int | None:
        """The command's return code once the job is over and reaped, else None."""
        if self._result is None and self._shim.poll() is not None:
            self._finish()
        return None if self._result is None else self._result.returncode

    @property
    def done(self) -> bool:
        return self.poll() is not None

    def processes(self) -> set[proctree.Proc]:
        """Every live process of this job (shim excluded)."""
        procs = proctree.with_env(TAG_VAR, self.tag)
        if self._shim.returncode is None:  # once reaped, its PID may already be someone else's
            procs |= proctree.descendants([self.pid])
        if self._hook is not None:
            for pid in self._hook():
                p = proctree.proc_of(pid)
                if p is not None and p not in procs and _has_tag(pid, self.tag):
                    procs.add(p)
        return {p for p in procs if p != self._shim_proc}

    def peek_output(self) -> tuple[str, str]:
        """(stdout, stderr) written so far, e.g. to wait for a peer's "ready" line."""
        if self._result is not None:
            return self._result.stdout, self._result.stderr
        return _peek(self._out), _peek(self._err)

    # -- ending --------------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> JobResult:
        """Wait for the job to end by itself; past timeout (or the job's own deadline) stop it."""
        limit = self._deadline
        if timeout is not None:
            limit = min(limit or float("inf"), time.monotonic() + timeout)
        try:
            self._shim.wait(None if limit is None else max(0.0, limit - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._timed_out = True
            self._hung = self._where_hung()
            return self.stop()
        return self._finish()

    def _where_hung(self) -> str:
        if self._on_timeout is None:
            return ""
        try:
            return self._on_timeout(self.processes())
        except Exception as e:  # an account that fails must not keep the job alive
            return f"(where the job's processes waited could not be read: {e!r})"

    def stop(self, grace: float | None = None) -> JobResult:
        """End the job now: SIGTERM everything, SIGKILL after grace, reap. Idempotent."""
        if self._result is not None:
            return self._result
        grace = self.grace if grace is None else grace
        if self._shim.poll() is None:
            victims = self.processes()
            self._signal_shim(signal.SIGTERM)
            proctree.signal_all(victims, signal.SIGTERM)
            try:
                self._shim.wait(grace)
            except subprocess.TimeoutExpired:
                proctree.signal_all(self.processes(), signal.SIGKILL)
                try:
                    self._shim.wait(2.0)  # the shim reaps what we killed, then exits
                except subprocess.TimeoutExpired:
                    self._signal_shim(signal.SIGKILL)
                    try:
                        os.killpg(self.pid, signal.SIGKILL)
                    except OSError:
                        pass
                    self._shim.wait()
        return self._finish()

    def _signal_shim(self, sig: int) -> None:
        if self._shim.poll() is None:
            try:
                self._shim.send_signal(sig)
            except OSError:
                pass

    def _finish(self) -> JobResult:
        if self._result is not None:
            return self._result
        shim_rc = self._shim.wait()
        # after the reap: the job's CPU time is now our children's; its processes outside
        # this tree (srun's tasks and step daemons here) are added
        cpu = self._meter.stop(self._outside.stop() if self._outside is not None else 0.0)
        # Belt and braces: anything tagged that escaped the shim (it was SIGKILLed) dies here.
        left = self.processes()
        if left:
            proctree.terminate(left, grace=0.5)
        rc = _read_status(self._status_r)
        os.close(self._status_r)
        if self._scratch is not None:  # nothing of the job is alive to use it any more
            shutil.rmtree(self._scratch, ignore_errors=True)
        self._result = JobResult(
            argv=self.argv,
            returncode=shim_rc if rc is None else rc,
            stdout=_read_all(self._out),
            stderr=_read_all(self._err),
            elapsed=time.monotonic() - self._t0,
            timed_out=self._timed_out,
            label=self.label,
            cpu=cpu,
            hung=self._hung,
        )
        return self._result

    def __enter__(self) -> RunningJob:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __del__(self) -> None:  # a forgotten job must not outlive its owner object
        try:
            if getattr(self, "_result", True) is None:
                self.stop(grace=0.5)
        except Exception:
            pass


def _has_tag(pid: int, tag: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{TAG_VAR}={tag}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def _read_status(fd: int) -> int | None:
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, 64)
    except BlockingIOError:
        return None
    try:
        return int(data.split(b"\n")[0])
    except ValueError:
        return None


def _peek(f: IO[bytes]) -> str:
    return os.pread(f.fileno(), 1 << 24, 0).decode("utf-8", errors="replace")


def _read_all(f: IO[bytes]) -> str:
    f.seek(0)
    data = f.read()
    f.close()
    return data.decode("utf-8", errors="replace")


def start_job(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    timeout: float | None = None,
    cwd: str | os.PathLike[str] | None = None,
    grace: float = 2.0,
    netns_pids_hook: PidsHook | None = None,
    on_start: Callable[[int], None] | None = None,
    label: str = "",
    scratch: str | os.PathLike[str] | None = None,
    stdin: bytes | None = None,
    outside_cpu: bool = False,
    on_timeout: TimeoutHook | None = None,
) -> RunningJob:
    """Start a long-lived job (e.g. a session's peers). timeout: hard cap, also enforced by the
    shim (a little later) if this process hangs. The job dies with the THREAD that started it
    (PR_SET_PDEATHSIG): start session jobs from the main thread. env replaces os.environ when
    given. on_start(pid) is called with the shim's PID (e.g. VirtualCluster.register_pid).
    scratch: a directory made for the job (0700) and removed once it is reaped. stdin: up to
    4 KiB the job reads from its standard input, then end of file (default: /dev/null).
    outside_cpu: count the job's processes outside this tree as its own (OutsideCpu).
    on_timeout: see TimeoutHook."""
    return RunningJob(
        argv,
        env=env,
        cwd=cwd,
        timeout=timeout,
        grace=grace,
        netns_pids_hook=netns_pids_hook,
        on_start=on_start,
        label=label,
        outside_cpu=outside_cpu,
        scratch=scratch,
        stdin=stdin,
        on_timeout=on_timeout,
    )


def run_job(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    *,
    timeout: float,
    cwd: str | os.PathLike[str] | None = None,
    grace: float = 2.0,
    netns_pids_hook: PidsHook | None = None,
    on_start: Callable[[int], None] | None = None,
    label: str = "",
    scratch: str | os.PathLike[str] | None = None,
    stdin: bytes | None = None,
    outside_cpu: bool = False,
    on_timeout: TimeoutHook | None = None,
) -> JobResult:
    """Run argv to completion or until timeout; always reaped, never raises for the job's own
    failure (check .ok / .timed_out). Output is captured whole (temp files, no pipe stalls)."""
    job = start_job(
        argv,
        env,
        timeout=timeout,
        cwd=cwd,
        grace=grace,
        netns_pids_hook=netns_pids_hook,
        on_start=on_start,
        label=label,
        scratch=scratch,
        stdin=stdin,
        outside_cpu=outside_cpu,
        on_timeout=on_timeout,
    )
    try:
        return job.wait()
    finally:
        job.stop()
