"""The rsocket shim (native/rsocket_compat.c) on a host without RDMA: what it overrides still
does what gRPC needs, so the native peers run through it on kernel TCP. F_GETFD/F_SETFD go to
the kernel, accept4 is accept plus its flags, and gRPC, refused an IPv6 stream socket, listens
and connects over IPv4. Its rpoll wrapper is called directly, as librspreload calls it, on a
pipe: the rdma-core 44 defect it works around (after one rpoll timed out, the next never
returns, data ready or not: upstream a1747742e, rdma-core 63) shows without it. (Over rsocket
it is exercised in the SoftRoCE guest.)"""

from __future__ import annotations

import json
import os
import re
import sys

import pytest

from pytest_hpccomm.proc.jobs import JobResult, run_job
from pytest_hpccomm.stacks.grpc.build import NativeBuild
from pytest_hpccomm.stacks.grpc.driver import BenchSettings, run_p2p, start_server
from pytest_hpccomm.stacks.grpc.env import rspreload_path
from tests.native_grpc import native_build_or_skip

QUICK = BenchSettings(batches=3, batch_seconds=0.01, warmup_seconds=0.01, lifetime=60)


@pytest.fixture(scope="module")
def native() -> NativeBuild:
    return native_build_or_skip()


def test_grpc_runs_through_the_shim_on_kernel_tcp(native: NativeBuild) -> None:
    env = {"LD_PRELOAD": str(native.rsocket_compat), "GRPC_POLL_STRATEGY": "poll"}
    server = start_server("native", native, env=env, lifetime=60)
    try:
        sweep = run_p2p("native", native, server, "raw", [("two", [10, 1 << 20])], QUICK, env=env)
    finally:
        res = server.stop()
    for (bench, name), point in sweep.results.items():
        assert not point["errors"], (bench, name, point["errors"][:3])
        assert sum(point["iterations"]) >= QUICK.batches
    assert "Unable to configure socket" not in res.stderr, res.stderr[-2000:]
    # gRPC fell back to IPv4: its IPv6 probe was refused (or it never tried)
    assert server.address == "127.0.0.1"


def test_a_server_ipv6_address_is_refused_under_the_shim(native: NativeBuild) -> None:
    from pytest_hpccomm.stacks.grpc.driver import GrpcRunError

    env = {"LD_PRELOAD": str(native.rsocket_compat), "GRPC_POLL_STRATEGY": "poll"}
    with pytest.raises(GrpcRunError, match="did not start"):
        start_server("native", native, env=env, lifetime=30, bind="::1")


# rpoll(pipe): a timeout that runs out, data ready, timeout 0, then 50 timeouts of 1 ms (gRPC's
# poller passes a few ms: the leak needs a timeout that runs out after rpoll counted itself
# as blocked), then data ready again
RPOLL_PROBE = """
import ctypes, json, os, time
class PollFd(ctypes.Structure):
    _fields_ = [("fd", ctypes.c_int), ("events", ctypes.c_short), ("revents", ctypes.c_short)]
rpoll = ctypes.CDLL(None).rpoll
r, w = os.pipe()
fds = (PollFd * 1)(PollFd(r, 1, 0))
out = {}
def timed(key, ms):
    t0 = time.monotonic()
    n = rpoll(fds, 1, ms)
    out[key] = [n, fds[0].revents, time.monotonic() - t0]
    print(json.dumps(out), flush=True)
timed("runs_out", 200)
os.write(w, b"x")
timed("ready", 5000)
os.read(r, 1)
timed("zero", 0)
for _ in range(50):
    timed("short", 1)
os.write(w, b"y")
timed("again", 5000)
"""


def rpoll_probe(preload: str, timeout: float = 20) -> JobResult:
    return run_job(
        [sys.executable, "-c", RPOLL_PROBE],
        timeout=timeout,
        label="rpoll probe",
        env={**os.environ, "LD_PRELOAD": preload},
    )


def rdma_core_version() -> int | None:
    """rdma-core's version from librdmacm's file name (librdmacm.so.1.3.44.0: 44)."""
    spreload = rspreload_path()
    if spreload is None:
        return None
    lib = (spreload.parent.parent / "librdmacm.so.1").resolve()
    found = re.fullmatch(r"librdmacm\.so\.1\.\d+\.(\d+)\.\d+", lib.name)
    return int(found.group(1)) if found else None


@pytest.fixture(scope="module")
def rspreload() -> str:
    path = rspreload_path()
    if path is None:
        pytest.skip("librspreload.so not installed (apt-get install librdmacm1)")
    return str(path)


def test_rpoll_keeps_its_timeouts_through_the_shim(native: NativeBuild, rspreload: str) -> None:
    res = rpoll_probe(f"{native.rsocket_compat}:{rspreload}")
    assert res.ok, res.describe()
    got = json.loads(res.stdout.strip().splitlines()[-1])
    n, revents, took = got["runs_out"]
    assert (n, revents) == (0, 0) and 0.19 <= took < 5, got  # ran out, no sooner
    n, revents, took = got["ready"]
    assert (n, revents) == (1, 1) and took < 5, got  # POLLIN at once; the timer not counted
    assert got["zero"][:2] == [0, 0], got
    assert got["short"][:2] == [0, 0] and got["short"][2] >= 0.0009, got
    n, revents, took = got["again"]
    assert (n, revents) == (1, 1) and took < 5, got


def test_bare_rpoll_of_old_rdma_core_hangs_after_short_timeouts(rspreload: str) -> None:
    version = rdma_core_version()
    if version is None or version >= 63:
        pytest.skip(
            f"rdma-core {version or '(version unknown)'} has the fix of rpoll's "
            "timeout (a1747742e, rdma-core 63)"
        )
    res = rpoll_probe(rspreload, timeout=8)  # through the shim the probe takes 0.3 s
    assert res.timed_out, f"rdma-core {version}'s rpoll returned: {res.describe()}"
    assert '"ready": [1, 1' in res.stdout and '"again"' not in res.stdout, res.stdout[-500:]
