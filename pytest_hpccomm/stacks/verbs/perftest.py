"""perftest's own programs (ib_send_lat, ib_write_bw, ...) as a cross-check of the suite.

Server and client run on this host against the selected device, as `ib_write_bw -d DEV` and
`ib_write_bw -d DEV ADDRESS` would by hand; both are jobs with hard timeouts (proc/jobs.py).
Their report line is parsed into perftest's own column names.
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
import signal
import time
from dataclasses import dataclass

from pytest_hpccomm.cluster.remote_shell import RemoteShell
from pytest_hpccomm.fabrics import FabricSelection
from pytest_hpccomm.proc.jobs import JobResult, run_job, start_job

LAT_COLUMNS = (
    "bytes",
    "iterations",
    "t_min",
    "t_max",
    "t_typical",
    "t_avg",
    "t_stdev",
    "t_p99",
    "t_p999",
)
BW_COLUMNS = ("bytes", "iterations", "bw_peak_mb_s", "bw_average_mb_s", "msg_rate_mpps")
LISTENING = "Waiting for client"
_ports = itertools.count(19000 + os.getpid() % 1000)


class PerftestFailed(AssertionError):
    def __init__(self, message: str, hung: bool = False, defect: str = "") -> None:
        super().__init__(message)
        self.hung = hung  # the client or server outlived its timeout
        self.defect = defect  # the symptom of a known perftest defect (known_defect), or ''


@dataclass(frozen=True)
class PerftestRun:
    program: str
    report: dict[str, float]
    client: JobResult
    server: JobResult


def missing(program: str) -> str | None:
    return None if shutil.which(program) else f"{program} not found (install perftest)"


def parse_report(program: str, stdout: str) -> dict[str, float]:
    """The last result row: ints for bytes and iterations, floats (inf allowed) after."""
    columns = LAT_COLUMNS if program.endswith("_lat") else BW_COLUMNS
    for line in reversed(stdout.splitlines()):
        parts = line.split()
        if len(parts) < len(columns) or not (parts[0].isdigit() and parts[1].isdigit()):
            continue
        try:
            values = [float(p) for p in parts[: len(columns)]]
        except ValueError:
            continue
        return dict(zip(columns, values))
    raise PerftestFailed(f"{program} printed no result row:\n{stdout[-1500:]}")


def command(program: str, sel: FabricSelection, size: int, iterations: int, port: int) -> list[str]:
    argv = [
        program,
        "-d",
        str(sel.device),
        "-i",
        str(sel.port or 1),
        "-p",
        str(port),
        "-n",
        str(iterations),
        "-F",
    ]  # -F: no failure on CPU frequency warnings (VMs)
    if "atomic" not in program:
        argv += ["-s", str(size)]
    if sel.kind == "iwarp":
        argv.append("-R")  # iWARP connects through rdma_cm only
    elif sel.link_layer == "Ethernet" and sel.gid_index is not None:
        argv += ["-x", str(sel.gid_index)]
    return argv


def listening(port: int) -> bool:
    """A TCP socket in LISTEN on port: perftest's exchange socket, or (iWARP, -R) the kernel
    socket siw listens on for rdma_cm. perftest's own "Waiting for client" line sits in its
    stdout buffer when that is a file, so it cannot be waited for."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A" and fields[1].endswith(f":{port:04X}"):
                return True
    return False


@dataclass(frozen=True)
class RemoteServer:
    """The server side on another host, as perftest runs across two nodes: started there over
    the remote shell, with that host's device and GID; the client dials its address."""

    shell: RemoteShell
    host: str
    selection: FabricSelection


# perftest's own defect, keyed by what its client shows (fixtures.run_perftest makes it an xfail)
# how an xfail on a known perftest defect begins (then the symptom this run observed)
OBSERVED = "known perftest defect: observed "
REFUSED_CRASH = (
    "perftest before 26.04.17 (linux-rdma/perftest 3d9d8d0) retries an RDMA CM connect "
    "its server rejected and crashes in the retry's teardown (librdmacm state corrupted); "
    "with -R its client can ask for the test's QP before the server listens for it again "
    "(perftest syncs the two over its own channel first, the listen comes after)"
)


def known_defect(client: JobResult) -> str:
    """What a failed client shows of a known perftest defect, or ''."""
    said = client.stdout + client.stderr
    if client.returncode == -signal.SIGSEGV and "Connection refused" in said:
        return "client refused by RDMA CM ('Connection refused'), then killed by SIGSEGV"
    return ""


def _said(job: JobResult, lines: int = 12) -> str:
    """The end of what a program printed, stderr first: the cause is rarely its last line."""
    out = [
        f"{name}: " + "\n  ".join(text.strip().splitlines()[-lines:])
        for name, text in (("stderr", job.stderr), ("stdout", job.stdout))
        if text.strip()
    ]
    return "\n".join(out)


def line_buffered() -> list[str]:
    """The prefix that makes a program's stdout line-buffered (coreutils' stdbuf; [] where it
    is missing): perftest writes to a file, block-buffered, and a side killed on its timeout
    would take its last lines (where it waited) with it."""
    return ["stdbuf", "-oL"] if shutil.which("stdbuf") else []


def run_pair(
    program: str,
    sel: FabricSelection,
    size: int,
    iterations: int,
    timeout: float = 120.0,
    remote: RemoteServer | None = None,
) -> PerftestRun:
    """Server first (here, or on `remote`); once it listens, the client here against the
    server's device address."""
    port = next(_ports)
    argv = command(program, sel, size, iterations, port)
    if remote is None:
        argv = [*line_buffered(), *argv]
        server = start_job(argv, timeout=timeout + 30, label=f"{program} server")
        target = sel.address or "127.0.0.1"
    else:
        # line-buffered: its "Waiting for client" must come back through ssh before it exits
        server = remote.shell.start(
            remote.host,
            ["stdbuf", "-oL", *command(program, remote.selection, size, iterations, port)],
            {},
            timeout=timeout + 30,
            label=f"{program} server on {remote.host}",
        )
        target = remote.selection.address or remote.host
    try:
        deadline = time.monotonic() + timeout
        # a remote server's socket is not ours to see: its banner (streamed back) tells
        while not (remote is None and listening(port)) and LISTENING not in server.peek_output()[0]:
            if server.poll() is not None or time.monotonic() > deadline:
                res = server.stop()
                raise PerftestFailed(f"{program} server did not listen: {res.describe()}")
            time.sleep(0.2)
        # once: a client that failed leaves its server mid-protocol (a second client would
        # meet a server waiting for something else, and fail for that)
        client = run_job([*argv, target], timeout=timeout, label=f"{program} client")
        # the server's own end only when the client finished; else it waits for nobody
        srv = server.wait(timeout=30) if client.ok else server.stop()
    finally:
        server.stop()
    for who, job in (("client", client), ("server", srv)):
        if not job.ok:
            raise PerftestFailed(
                f"{program} {who}: {job.describe()}\n{_said(job)}"
                + (f"\nserver: {_said(srv)}" if who == "client" else ""),
                hung=job.timed_out,
                defect=known_defect(job) if who == "client" else "",
            )
    report = parse_report(program, client.stdout)
    # NaN is unreadable, except perftest's own arithmetic on inf latencies (its cycle counter
    # under emulation): then its t_stdev prints as nan
    if any(math.isnan(v) for v in report.values()) and not any(
        math.isinf(v) for v in report.values()
    ):
        raise PerftestFailed(f"{program}: unreadable numbers {report}")
    return PerftestRun(program, report, client, srv)
