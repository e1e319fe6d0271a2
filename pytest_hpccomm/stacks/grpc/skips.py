"""Why gRPC items skip, one text per cause, given both by the fixtures when they start and by
the forecast (the plugin's pytest_hpccomm_foreseen_skip, read by `hpccomm doctor`), so the
two say the same; and the `grpc_runtime(kind, why=...)` marker, applied at collection."""

from __future__ import annotations

from pytest_hpccomm.cluster.placement import HOSTS, LOOPBACK, NETNS
from pytest_hpccomm.fabrics import TCP_FABRICS
from pytest_hpccomm.session import HpcSession
from pytest_hpccomm.skips import fabric_reason
from pytest_hpccomm.stacks.grpc.env import RuntimeSpec

RUNTIME_MARK = "grpc_runtime"
RUNTIME_MARK_LINE = (
    f"{RUNTIME_MARK}(kind, why=...): runs only under a gRPC runtime of this kind ('rdma': an "
    "RDMA preset; 'tcp': kernel TCP); under the other skipped at collection with `why` "
    "({runtime}: the runtime's label)"
)
KINDS = ("rdma", "tcp")


def runtime_kind_reason(kind: str, why: str, spec: RuntimeSpec) -> str | None:
    """The grpc_runtime marker's skip for the session's runtime, or None."""
    if kind not in KINDS:
        raise ValueError(f"@pytest.mark.{RUNTIME_MARK}({kind!r}): kinds are {', '.join(KINDS)}")
    if (kind == "rdma") == spec.rdma:
        return None
    return why.format(runtime=spec.label)


def on_tcp_reason(spec: RuntimeSpec, session: HpcSession) -> str | None:
    """Stock gRPC (no RDMA preset) runs over kernel TCP: off a TCP fabric its items skip."""
    if spec.rdma:
        return None
    reason = fabric_reason(TCP_FABRICS, session)
    if reason is None:
        return None
    return f"gRPC over kernel TCP (no RDMA runtime: --hpc-grpc-preset) ({reason})"


def netns_reason(spec: RuntimeSpec, label: str, placement: str) -> str | None:
    """An RDMA runtime (and its twin: a pair or none) runs over RDMA devices: this host's or
    the real hosts', never the virtual cluster's veths."""
    if spec.rdma and placement == NETNS:
        return (
            f"gRPC runtime {label} runs over RDMA devices (placements {LOOPBACK} and "
            f"{HOSTS}); the virtual cluster's hosts have none"
        )
    return None


def python_peer_reason(label: str, peer: str) -> str:
    """A runtime with its own environment runs in the native peers only."""
    return (
        f"gRPC runtime {label} runs in the native peers only: the {peer} peer runs grpcio's "
        "bundled core"
    )


def python_client_reason(spec: RuntimeSpec) -> str | None:
    """The python client is grpcio in pytest, outside any runtime but stock gRPC."""
    if spec.stock:
        return None
    return (
        f"the python client is grpcio's bundled core in pytest, outside gRPC runtime "
        f"{spec.label}: the native client (--hpc-grpc-clients=native) makes its calls inside it"
    )
