"""Fabric -> MPI transport, from the recorded sysfs trees, down to the mpirun/srun command.

What these check is the orchestrator's own logic (which variables and flags a job gets on each
fabric); that those reach a real MPI over a real link is test_hosts_placement.py's job
(Ethernet, over ssh) and the real-MPI loopback tests'.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.hosts import Host
from pytest_hpccomm.cluster.mpi import MpiFlavor
from pytest_hpccomm.cluster.peer_env import peer_env
from pytest_hpccomm.fabrics import FabricSelection, select_fabric
from pytest_hpccomm.stacks.mpi.driver import SweepTarget, hosts_launch, loopback_launch
from pytest_hpccomm.stacks.mpi.env import MpiRuntime
from pytest_hpccomm.stacks.mpi.transport import NoTransport, transport_for
from tests.fabrics._fabric_trees import inventory

OMPI5 = MpiRuntime(
    "openmpi",
    Path("/opt/ompi/bin/mpirun"),
    Path("/usr/bin/python3"),
    MpiFlavor("openmpi", (5, 0, 11)),
)
MPICH = MpiRuntime(
    "mpich", Path("/opt/mpich/bin/mpirun"), Path("/usr/bin/python3"), MpiFlavor("mpich", (5, 0, 2))
)
HOSTS = (Host("n1"), Host("n2"))


def selection(tree: str, kind: str) -> FabricSelection:
    got = select_fabric(inventory(tree), kind)
    assert isinstance(got, FabricSelection), got
    return got


@pytest.mark.parametrize(
    ("tree", "kind", "vendor", "summary", "env"),
    [
        ("ethernet-plain", "ethernet", "openmpi", "tcp over eth0", {}),
        ("ib-edr-mlx5", "ipoib", "mpich", "tcp over ib0", {}),
        (
            "ib-edr-mlx5",
            "ib",
            "openmpi",
            "ucx on mlx5_0:1",
            {"OMPI_MCA_pml": "ucx", "UCX_NET_DEVICES": "mlx5_0:1", "UCX_TLS": "rc,ud,self"},
        ),
        (
            "ib-edr-mlx5",
            "ib",
            "mpich",
            "ucx on mlx5_0:1",
            {
                "MPIR_CVAR_CH4_NETMOD": "ucx",
                "MPIR_CVAR_NOLOCAL": "1",
                "UCX_NET_DEVICES": "mlx5_0:1",
                "UCX_TLS": "rc,ud,self",
            },
        ),
        (
            "roce-v2-mlx5",
            "roce",
            "openmpi",
            "ucx on mlx5_0:1",
            {
                "OMPI_MCA_pml": "ucx",
                "UCX_NET_DEVICES": "mlx5_0:1",
                "UCX_TLS": "rc,ud,self",
                "UCX_IB_GID_INDEX": "3",
            },
        ),
        (
            "softroce-rxe",
            "softroce",
            "mpich",
            "ucx on rxe0:1",
            {
                "MPIR_CVAR_CH4_NETMOD": "ucx",
                "MPIR_CVAR_NOLOCAL": "1",
                "UCX_NET_DEVICES": "rxe0:1",
                "UCX_TLS": "rc,ud,self",
                "UCX_IB_GID_INDEX": "3",
                "UCX_UD_ETH_DGID_CHECK": "n",
            },
        ),
        (
            "iwarp-siw",
            "iwarp",
            "openmpi",
            "ofi verbs;ofi_rxm on siw0:1",
            {
                "OMPI_MCA_pml": "cm",
                "OMPI_MCA_mtl": "ofi",
                "FI_PROVIDER": "verbs;ofi_rxm",
                "FI_VERBS_IFACE": "eth0",
            },
        ),
        (
            "iwarp-siw",
            "iwarp",
            "mpich",
            "ofi verbs;ofi_rxm on siw0:1",
            {
                "MPIR_CVAR_CH4_NETMOD": "ofi",
                "MPIR_CVAR_NOLOCAL": "1",
                "FI_PROVIDER": "verbs;ofi_rxm",
                "FI_VERBS_IFACE": "eth0",
            },
        ),
    ],
)
def test_each_fabric_maps_to_its_transport(
    tree: str, kind: str, vendor: str, summary: str, env: dict[str, str]
) -> None:
    t = transport_for(selection(tree, kind), vendor)
    assert (t.summary, dict(t.env)) == (summary, env)
    assert t.tcp_only == (kind in ("ethernet", "ipoib"))
    assert t.interface == (selection(tree, kind).netdev if t.tcp_only else None)


def test_only_rxe_turns_off_the_ud_destination_check() -> None:
    """UCX's UD drops every packet between two rxe hosts with the check on (found in the
    two-guest cluster); a real RoCE HCA keeps it."""
    assert (
        "UCX_UD_ETH_DGID_CHECK"
        not in transport_for(selection("roce-v2-mlx5", "roce"), "openmpi").env
    )


def _unresolvable(*_: object) -> None:
    raise socket.gaierror(-3, "Temporary failure in name resolution")


def test_libfabric_without_a_verbs_endpoint_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What Debian 12's libfabric 1.17 printed in the guests while their root filesystem had no
    /etc/hosts (so "localhost" did not resolve, which the reason then names), and a working one."""
    from pytest_hpccomm.stacks.mpi import libfabric

    fi_info = tmp_path / "fi_info"
    fi_info.write_text(
        "#!/bin/sh\necho 'libfabric:1:2::verbs:fabric:vrb_get_rdmacm_rai():128"
        "<warn> rdma_getaddrinfo: Resource temporarily unavailable (11)' >&2\n"
        "echo 'fi_getinfo: -61'\nexit 1\n"
    )
    fi_info.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    libfabric.verbs_provider_reason.cache_clear()
    try:
        reason = libfabric.verbs_provider_reason()
        assert reason is not None and "rdma_getaddrinfo: Resource temporarily" in reason
        assert "verbs;ofi_rxm" in reason and "localhost" not in reason  # it resolves here
        libfabric.verbs_provider_reason.cache_clear()
        with monkeypatch.context() as m:
            m.setattr(libfabric.socket, "getaddrinfo", _unresolvable)
            reason = libfabric.verbs_provider_reason()
        assert reason is not None and '"localhost" does not resolve here' in reason
        fi_info.write_text("#!/bin/sh\nprintf 'provider: verbs;ofi_rxm\\n'\n")
        libfabric.verbs_provider_reason.cache_clear()
        assert libfabric.verbs_provider_reason() is None
    finally:
        libfabric.verbs_provider_reason.cache_clear()


def test_ib_uses_no_gid_index() -> None:
    """IB addresses by LID: UCX_IB_GID_INDEX is a RoCE knob."""
    assert "UCX_IB_GID_INDEX" not in transport_for(selection("ib-edr-mlx5", "ib"), "openmpi").env


def test_a_fabric_without_what_it_needs_has_no_transport() -> None:
    broken = FabricSelection(
        "roce",
        None,
        None,
        None,
        None,
        "eth0",
        None,
        None,
        None,
        None,
        None,
        None,
        "eth0 (no RDMA device)",
    )
    with pytest.raises(NoTransport, match="roce fabric without an RDMA device"):
        transport_for(broken, "openmpi")


def test_hosts_launch_over_ethernet_pins_tcp_to_the_netdev() -> None:
    t = transport_for(selection("ethernet-plain", "ethernet"), "openmpi")
    target = SweepTarget("hosts", hosts=HOSTS, transport=t, rsh_agent="/x/agent")
    launch = hosts_launch(OMPI5, ["peer"], {"A": "1"}, list(HOSTS), target)
    argv = launch.argv
    assert argv[:3] == ["/opt/ompi/bin/mpirun", "--host", "n1:1,n2:1"]
    assert argv[argv.index("--prefix") + 1] == "/opt/ompi"  # daemons found over ssh
    assert argv[argv.index("plm_ssh_agent") + 1] == "/x/agent"
    assert argv[argv.index("btl") + 1] == "tcp,self"
    assert argv[argv.index("btl_tcp_if_include") + 1] == "eth0"
    assert argv[argv.index("oob_tcp_if_include") + 1] == "eth0"
    assert argv[-1] == "peer" and launch.env["A"] == "1"


def test_hosts_launch_over_ib_with_mpich_and_srun() -> None:
    t = transport_for(selection("ib-edr-mlx5", "ib"), "mpich")
    target = SweepTarget("hosts", hosts=HOSTS, transport=t)
    hydra = hosts_launch(MPICH, ["peer"], {}, list(HOSTS), target)
    assert hydra.argv[:5] == ["/opt/mpich/bin/mpirun", "-hosts", "n1:1,n2:1", "-n", "2"]
    assert "-iface" not in hydra.argv  # no TCP pinning on an RDMA fabric
    forwarded = hydra.argv[hydra.argv.index("-genvlist") + 1].split(",")
    assert {"UCX_NET_DEVICES", "UCX_TLS", "MPIR_CVAR_CH4_NETMOD"} <= set(forwarded)
    assert hydra.env["UCX_NET_DEVICES"] == "mlx5_0:1"
    srun = hosts_launch(
        MPICH,
        ["peer"],
        {},
        list(HOSTS),
        SweepTarget("hosts", hosts=HOSTS, transport=t, launcher="srun"),
    )
    assert srun.argv[0] == "srun" and "--nodelist=n1,n2" in srun.argv
    assert srun.env["MPIR_CVAR_CH4_NETMOD"] == "ucx" and "FI_PROVIDER" not in srun.env


def test_loopback_on_an_rdma_fabric_goes_through_the_hca() -> None:
    t = transport_for(selection("roce-v2-mlx5", "roce"), "openmpi")
    launch = loopback_launch(OMPI5, ["peer"], {}, t)
    assert "btl" not in launch.argv and launch.env["OMPI_MCA_pml"] == "ucx"
    assert "OMPI_MCA_btl_tcp_if_include" not in launch.env
    tcp = loopback_launch(OMPI5, ["peer"], {})
    assert tcp.env["OMPI_MCA_btl_tcp_if_include"] == "lo"
    assert tcp.argv[tcp.argv.index("btl") + 1] == "tcp,self"


def test_hosts_launch_keeps_the_peer_variables_before_the_transports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The order the environment reaches mpirun (and ssh) in: the peer's own variables, then
    the transport's, then the launcher's pins."""
    t = transport_for(selection("ib-edr-mlx5", "ib"), "mpich")
    for name in [*peer_env(), *t.env]:
        monkeypatch.delenv(name, raising=False)
    env = hosts_launch(
        MPICH, ["peer"], peer_env(), list(HOSTS), SweepTarget("hosts", hosts=HOSTS, transport=t)
    ).env
    new = [k for k in env if k not in os.environ and k != "PATH"]
    assert new == [*peer_env(), *t.env]


def test_every_rdma_kind_has_a_transport() -> None:
    from pytest_hpccomm.fabrics import RDMA_KINDS
    from pytest_hpccomm.stacks.mpi.transport import OFI_VERBS_FABRICS, UCX_FABRICS

    assert sorted(UCX_FABRICS + OFI_VERBS_FABRICS) == sorted(RDMA_KINDS)
