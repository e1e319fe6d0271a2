"""The rsocket shim (native/rsocket_compat.c) on a host without RDMA: what it overrides still
does what gRPC needs, so the native peers run through it on kernel TCP. F_GETFD/F_SETFD go to
the kernel, accept4 is accept plus its flags, and gRPC, refused an IPv6 stream socket, listens
and connects over IPv4. (Over rsocket it is exercised in the SoftRoCE guest.)"""

from __future__ import annotations

import pytest

from pytest_hpccomm.stacks.grpc.build import NativeBuild
from pytest_hpccomm.stacks.grpc.driver import BenchSettings, run_p2p, start_server
from tests.native_grpc import native_build_or_skip

QUICK = BenchSettings(batches=3, batch_seconds=0.01, warmup_seconds=0.01, lifetime=60)


@pytest.fixture(scope="module")
def native() -> NativeBuild:
    return native_build_or_skip()


def test_grpc_runs_through_the_shim_on_kernel_tcp(native: NativeBuild) -> None:
    env = {"LD_PRELOAD": str(native.rsocket_compat), "GRPC_POLL_STRATEGY": "poll"}
    server = start_server("native", native, env=env, lifetime=60)
    try:
        sweep = run_p2p("native", native, server, "raw", [("two", [10, 1 << 20])], QUICK,
                        env=env)
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
