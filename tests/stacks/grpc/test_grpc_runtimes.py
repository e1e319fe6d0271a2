"""Runtime presets and --hpc-grpc-env: parsing, placeholders filled from the fabric, the TCP
twin, and what a session without the fabric's pieces says (env.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from pytest_hpccomm.fabrics import FabricSelection
from pytest_hpccomm.stacks.grpc.driver import grpc_cause
from pytest_hpccomm.stacks.grpc.env import (
    PRESETS,
    RuntimeSpecError,
    RuntimeUnavailable,
    labels,
    resolve,
    rspreload_path,
    spec_of,
)

RXE = FabricSelection(
    kind="softroce",
    device="rxe0",
    port=1,
    gid_index=1,
    gid="::ffff:10.77.0.1",
    netdev="hpc0",
    address="10.77.0.1",
    rate_gbps=None,
    mtu=1024,
    firmware=None,
    driver="rxe",
    link_layer="Ethernet",
    description="rxe0 port 1",
)
PRELOAD = Path("/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so")


def test_stock_by_default() -> None:
    spec = spec_of("", [], None)
    assert spec.stock and spec.label == "grpc" and labels(spec) == ["grpc"]
    [rt] = resolve(spec, None, "ethernet")
    assert rt.env == {} and not rt.rdma


def test_rr_compound_fills_the_device_port_and_gid_and_has_a_tcp_twin() -> None:
    spec = spec_of("rr-compound-bp", ["GRPC_RDMA_RING_BUFFER_SIZE_KB=1024"], None)
    assert labels(spec) == ["rr-compound-bp-tcp", "rr-compound-bp"]
    twin, main = resolve(spec, RXE, "softroce")
    assert (
        main.env
        == {
            "GRPC_PLATFORM_TYPE": "RDMA_BP",
            "GRPC_RDMA_DEVICE_NAME": "rxe0",
            "GRPC_RDMA_PORT_NUM": "1",
            "GRPC_RDMA_GID_INDEX": "1",
            "GRPC_RDMA_RING_BUFFER_SIZE_KB": "1024",
        }
        and main.rdma
    )
    # the twin keeps the user's tuning, but runs the TCP platform and proves nothing
    assert twin.env == {"GRPC_PLATFORM_TYPE": "TCP", "GRPC_RDMA_RING_BUFFER_SIZE_KB": "1024"}
    assert not twin.rdma and twin.twin_of == "rr-compound-bp"


def test_env_overrides_the_preset_and_the_label_is_the_users() -> None:
    spec = spec_of("rr-compound-bpev", ["GRPC_RDMA_DEVICE_NAME=mlx5_1", "X={netdev}"], "rrc")
    _, main = resolve(spec, RXE, "softroce")
    assert main.label == "rrc" and main.env["GRPC_RDMA_DEVICE_NAME"] == "mlx5_1"
    assert main.env["X"] == "hpc0"


def test_rsocket_preloads_the_library_and_polls() -> None:
    twin, main = resolve(spec_of("rsocket", [], None), RXE, "softroce", rspreload=PRELOAD)
    assert main.env == {"LD_PRELOAD": str(PRELOAD), "GRPC_POLL_STRATEGY": "poll"}
    assert twin.env == {"GRPC_POLL_STRATEGY": "poll"} and twin.label == "rsocket-tcp"


def test_an_rdma_runtime_without_an_rdma_device_is_unavailable() -> None:
    eth = FabricSelection(
        kind="ethernet",
        device=None,
        port=None,
        gid_index=None,
        gid=None,
        netdev="eth0",
        address="192.0.2.1",
        rate_gbps=None,
        mtu=1500,
        firmware=None,
        driver=None,
        link_layer=None,
        description="eth0",
    )
    with pytest.raises(
        RuntimeUnavailable,
        match="RDMA device; the session's fabric "
        r"\(ethernet\) has none",
    ):
        resolve(spec_of("rsocket", [], None), eth, "ethernet")


def test_a_placeholder_the_fabric_cannot_fill_is_unavailable() -> None:
    spec = spec_of("", ["DEV={device}"], "mine")
    with pytest.raises(RuntimeUnavailable, match="DEV needs an RDMA device"):
        resolve(spec, None, "ethernet")


@pytest.mark.parametrize(
    "item,message",
    [
        ("NOEQUALS", "expected KEY=VALUE"),
        ("1BAD=x", "expected KEY=VALUE"),
        ("K={devcie}", "unknown placeholder {devcie}"),
        ("K={device", "write {{ and }} for braces"),
    ],
)
def test_malformed_env_is_one_line(item: str, message: str) -> None:
    with pytest.raises(RuntimeSpecError, match=message):
        spec_of("", [item], None)


def test_unknown_preset_names_the_known_ones() -> None:
    with pytest.raises(RuntimeSpecError, match="choose from " + ", ".join(PRESETS)):
        spec_of("ar-grpc", [], None)


def test_rspreload_is_found_where_librdmacm_puts_it(tmp_path: Path) -> None:
    assert rspreload_path([tmp_path]) is None
    lib = tmp_path / "rsocket" / "librspreload.so"
    lib.parent.mkdir()
    lib.write_bytes(b"")
    assert rspreload_path([tmp_path]) == lib


# recorded in the SoftRoCE guest: the native server under rdma-core 44's rsocket preload alone
# (fcntl), and with a shim that let AF_INET6 through (bind of an IPv4-mapped address)
REUSEPORT = (
    "E1124 01:31:54.167155630     253 socket_utils_common_posix.cc:223]     check for "
    'SO_REUSEPORT: UNKNOWN:Operation not supported {syscall:"setsockopt(SO_REUSEPORT)", '
    'os_error:"Operation not supported", errno:95}'
)
FCNTL = (
    "E1124 01:31:54.313018030     253 chttp2_server.cc:1045]                UNKNOWN:No "
    "address added out of total 1 resolved for '10.77.0.1:0' {file_line:960, children:["
    "UNKNOWN:Unable to configure socket {fd:4, file_line:219, children:[UNKNOWN:Operation "
    'not supported {file_line:156, errno:95, os_error:"Operation not supported", '
    'syscall:"fcntl"}]}]}'
)
BIND = (
    "E1124 01:33:46.261611710    1132 chttp2_server.cc:1045]                UNKNOWN:No "
    "address added out of total 1 resolved for '10.77.0.1:0' {children:[UNKNOWN:Unable to "
    "configure socket {fd:4, children:[UNKNOWN:Cannot assign requested address {errno:99, "
    'os_error:"Cannot assign requested address", syscall:"bind"}]}]}'
)


@pytest.mark.parametrize(
    "stderr,cause",
    [
        (
            f"{REUSEPORT}\n{FCNTL}\nhpcc_grpc_peer: cannot listen on 10.77.0.1:0",
            "; gRPC: fcntl: Operation not supported (errno 95)",
        ),
        (
            f"{REUSEPORT}\n{BIND}\nhpcc_grpc_peer: cannot listen on 10.77.0.1:0",
            "; gRPC: bind: Cannot assign requested address (errno 99)",
        ),
        (f"{REUSEPORT}\nhpcc_grpc_peer: cannot listen", ""),
        ("", ""),
    ],
)
def test_a_servers_failure_names_grpcs_innermost_cause(stderr: str, cause: str) -> None:
    assert grpc_cause(stderr) == cause


SUITE = SUITES_DIR / "grpc" / "test_perf_tf_grpc_bench.py"


# items: 2 placements (loopback, the virtual cluster) x the runtimes (rsocket has a TCP twin)
# the quick profile times gRPC over loopback only (cluster/placement.py): one placement
@pytest.mark.parametrize(
    "args,items,reason",
    [
        (
            ["--hpc-grpc-preset=rsocket", "--hpc-grpc-peers=native"],
            2,
            "*gRPC runtime rsocket runs over an RDMA device; the session's fabric (ethernet) has none*",
        ),
        (
            ["--hpc-grpc-env=X=1", "--hpc-grpc-peers=python"],
            1,
            "*gRPC runtime grpc-env runs in the native peers only: the python peer runs grpcio*",
        ),
    ],
)
def test_a_runtime_the_session_cannot_run_skips_saying_why(
    pytester: pytest.Pytester, args: list[str], items: int, reason: str
) -> None:
    r = pytester.runpytest(
        str(SUITE),
        "-p",
        "no:cacheprovider",
        "--hpc-fabric=ethernet",
        "--hpc-history=none",
        "-rs",
        "--hpc-grpc-modes=raw",
        *args,
        "-k",
        "tf_grpc_p2p_latency and uniform-small",
    )
    r.assert_outcomes(skipped=items)
    r.stdout.fnmatch_lines([reason])
