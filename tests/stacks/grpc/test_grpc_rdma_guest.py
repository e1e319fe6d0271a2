"""gRPC over RDMA in the SoftRoCE guest (ci/guest, issue 18): the suite with an rsocket runtime
on rxe0. The native peer is built here (Debian's gRPC 1.51) and staged into the guest, which
has the same libraries (ci/guest/packages.txt). Two boots:
- rsocket: the preload alone (rdma-core 44 in Debian 12) cannot carry gRPC; the suite's item
  must fail where it breaks: fcntl(F_GETFD) on an rsocket, "Operation not supported", while
  its TCP twin passes
- a silent fallback: rsocket-compat with its preload path mistyped, so the peers run on kernel
  TCP while the session believes them on RDMA; the suite's proof of path must fail the item

rsocket-compat itself carries gRPC over rxe (README: 265,310 rxe packets, 2 TCP segments for a
p2p sweep) but not reliably in the emulated guest: of seven sweeps of the peers alone one
stalled (81,356 packets in 150 s against 20 s for the whole sweep), and beside the suite's
orchestrator the client timed out every time; it is no CI test until that is understood.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm.stacks.grpc.build import NativeBuild
from tests.guests import boot, guest_image_or_skip, junit, tail
from tests.native_grpc import native_build_or_skip

pytestmark = [pytest.mark.slow, pytest.mark.needs_root]

SUITE = "suites/grpc/test_perf_tf_grpc_bench.py"
SETTINGS = ("--hpc-grpc-peers=native", "--hpc-grpc-modes=raw", "--hpc-grpc-buffers=1",
            "--hpc-grpc-large=1M")
ONE_ITEM = "test_tf_grpc_bench and loopback and p2p_latency and uniform-medium"


@pytest.fixture(scope="module")
def guest_image() -> str:
    return guest_image_or_skip()


@pytest.fixture(scope="module")
def native() -> NativeBuild:
    return native_build_or_skip()


def run(image: str, native: NativeBuild, results: Path, *args: str) -> Any:
    staged = f"/mnt/job/stage/{native.directory.name}"
    return boot(image, results, "softroce", f"--hpc-grpc-build={staged}", *args,
                targets=SUITE, stage=(native.directory,), job_timeout=1200)


def test_rsocket_alone_breaks_at_fcntl(guest_image: str, native: NativeBuild,
                                       tmp_path: Path) -> None:
    run(guest_image, native, tmp_path, "--hpc-grpc-preset=rsocket", *SETTINGS, "-k", ONE_ITEM)
    got = junit(tmp_path)
    assert len(got["failed"]) == 1 and len(got["passed"]) == 1, (got, tail(tmp_path))
    [(name, message)] = got["failed"].items()
    assert "rsocket-tcp" not in name
    assert "fcntl" in message and "Operation not supported" in message, message[-2000:]


def test_a_silent_fallback_to_tcp_fails_the_proof_of_path(guest_image: str,
                                                          native: NativeBuild,
                                                          tmp_path: Path) -> None:
    # a mistyped preload path: ld.so ignores it and the peers run on kernel TCP
    run(guest_image, native, tmp_path, "--hpc-grpc-preset=rsocket-compat",
        "--hpc-grpc-env=LD_PRELOAD=/usr/lib/rsocket-typo/librspreload.so", *SETTINGS,
        "-k", ONE_ITEM)
    got = junit(tmp_path)
    assert len(got["failed"]) == 1 and len(got["passed"]) == 1, (got, tail(tmp_path))
    [message] = got["failed"].values()
    assert "did not cross the RDMA device" in message, message[-2000:]
