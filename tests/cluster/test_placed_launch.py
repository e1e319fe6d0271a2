"""Placement -> launch (cluster/placed_launch.py): the command each placement becomes, built
without running anything (a VirtualCluster that was never started only names things)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping

import pytest

from pytest_hpccomm.cluster.hosts import Host
from pytest_hpccomm.cluster.mpi import MpiFlavor
from pytest_hpccomm.cluster.placed_launch import (
    LOOPBACK_TCP_ENV,
    PlacementError,
    RemoteTarget,
    mpi_launch,
    process_launch,
)
from pytest_hpccomm.cluster.remote_shell import RemoteShell
from pytest_hpccomm.cluster.virtual import VirtualCluster

OMPI5 = MpiFlavor("openmpi", (5, 0, 11))
MPICH = MpiFlavor("mpich", (5, 0, 2))
MPIRUN = "/opt/mpi/bin/mpirun"
ENV = {"PYTHONPATH": "/src", "PYTHONDONTWRITEBYTECODE": "1", "HPCCOMM_X": "1"}


@dataclass(frozen=True)
class Pins:
    env: Mapping[str, str] = field(default_factory=dict)
    interface: str | None = None
    tcp_only: bool = False


def added(env: Mapping[str, str], base: Mapping[str, str]) -> list[str]:
    """The variables a launch added to its base environment, in order."""
    return [k for k in env if k not in base]


def test_loopback_is_tcp_over_lo_after_the_callers_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [*ENV, *LOOPBACK_TCP_ENV, "UCX_TLS"]:
        monkeypatch.delenv(name, raising=False)
    placed = mpi_launch("loopback", ["peer"], ENV, MPIRUN, OMPI5, loopback_ranks=3)
    argv, env = placed.launch.argv, placed.launch.env
    assert argv[:5] == [MPIRUN, "--host", "localhost:3", "-np", "3"]
    assert argv[argv.index("--bind-to") + 1] == "none" and argv[argv.index("btl") + 1] == "tcp,self"
    assert added(env, os.environ)[-6:] == [*ENV, *LOOPBACK_TCP_ENV, "UCX_TLS"]
    assert placed.ranks == 3 and placed.hooks() == {
        "netns_pids_hook": None,
        "on_start": None,
        "on_timeout": None,
    }
    assert placed.label == "Open MPI 5.0.11 job on localhost"


def test_loopback_on_rdma_pins_goes_through_the_hca() -> None:
    pins = Pins(env={"OMPI_MCA_pml": "ucx"})
    launch = mpi_launch("loopback", ["peer"], ENV, MPIRUN, OMPI5, pins=pins).launch
    assert "btl" not in launch.argv and launch.env["OMPI_MCA_pml"] == "ucx"
    assert "OMPI_MCA_btl_tcp_if_include" not in launch.env


def test_hosts_needs_pins_and_uses_mpirun_with_prefix_or_srun() -> None:
    hosts = [Host("n1"), Host("n2")]
    with pytest.raises(PlacementError, match="needs the fabric's transport"):
        mpi_launch("hosts", ["peer"], ENV, MPIRUN, MPICH, hosts=hosts)
    pins = Pins(env={"HPCCOMM_PIN": "1"}, interface="eth0", tcp_only=True)
    ompi = mpi_launch(
        "hosts", ["peer"], ENV, MPIRUN, OMPI5, hosts=hosts, pins=pins, rsh_agent="/x/agent"
    )
    assert ompi.ranks == 2 and "--prefix" in ompi.launch.argv
    assert ompi.launch.argv[ompi.launch.argv.index("plm_ssh_agent") + 1] == "/x/agent"
    srun = mpi_launch(
        "hosts", ["peer"], ENV, MPIRUN, MPICH, hosts=hosts, pins=pins, launcher="srun"
    )
    assert srun.launch.argv[0] == "srun" and srun.launch.env["HPCCOMM_PIN"] == "1"
    assert "--mpi=pmi2" in srun.launch.argv  # MPICH: pmi2 (under pmix it aborts in MPI_Init)
    srun = mpi_launch(
        "hosts", ["peer"], ENV, MPIRUN, OMPI5, hosts=hosts, pins=pins, launcher="srun"
    )
    assert "--mpi=pmix" in srun.launch.argv  # Open MPI: pmix (under pmi2, 5 runs singletons)


def test_netns_runs_mpirun_on_the_first_host_with_the_clusters_hooks() -> None:
    vc = VirtualCluster(3, prefix="hpcctest-x")
    with pytest.raises(PlacementError, match="needs a virtual cluster"):
        mpi_launch("netns", ["peer"], ENV, MPIRUN, OMPI5)
    every = mpi_launch("netns", ["peer"], ENV, MPIRUN, OMPI5, cluster=vc)
    assert every.ranks == 3 and every.label == "Open MPI 5.0.11 job on h0,h1,h2"
    assert every.launch.argv[every.launch.argv.index("exec") + 1] == "hpcctest-x-h0"
    assert every.hooks() == {
        "netns_pids_hook": vc.pids,
        "on_start": vc.register_pid,
        "on_timeout": None,
    }
    pair = mpi_launch(
        "netns", ["peer"], ENV, MPIRUN, OMPI5, cluster=vc, hosts=[Host("h0"), Host("h1")]
    )
    assert pair.ranks == 2 and "h0:1,h1:1" in pair.launch.argv


def test_mpirun_args_go_right_after_mpirun() -> None:
    vc = VirtualCluster(2, prefix="hpcctest-y")
    for placed in (
        mpi_launch("loopback", ["peer"], ENV, MPIRUN, OMPI5, mpirun_args=("--with-ft", "ulfm")),
        mpi_launch(
            "netns", ["peer"], ENV, MPIRUN, OMPI5, cluster=vc, mpirun_args=("--with-ft", "ulfm")
        ),
    ):
        argv = placed.launch.argv
        at = argv.index(MPIRUN)
        assert argv[at + 1 : at + 3] == ["--with-ft", "ulfm"] and argv[-1] == "peer"


def test_unknown_placement_is_refused() -> None:
    with pytest.raises(PlacementError, match="unknown placement 'moon'"):
        mpi_launch("moon", ["peer"], ENV, MPIRUN, OMPI5)
    with pytest.raises(PlacementError, match="one process runs on loopback, netns or hosts"):
        process_launch("moon", ["peer"], ENV)
    with pytest.raises(PlacementError, match="hosts placement needs the hosts"):
        process_launch("hosts", ["peer"], ENV)


def test_one_process_on_a_host_here_or_over_the_remote_shell() -> None:
    """This machine's entry runs here; another host's over the shell, its environment on
    stdin (never in the command line)."""
    shell = RemoteShell(("my-ssh",))
    here = process_launch("hosts", ["srv"], ENV, hosts=["localhost", "n1"], host=2, shell=shell)
    assert here.remote is None and here.launch.argv == ["srv"] and here.launch.env == ENV
    there = process_launch(
        "hosts", ["srv"], ENV, hosts=["localhost", "n1"], host=1, shell=shell, label="task 1"
    )
    assert there.remote == RemoteTarget(shell, "n1") and there.label == "task 1"


def test_one_process_here_or_on_a_virtual_host() -> None:
    here = process_launch("loopback", ["srv"], ENV, label="server")
    assert (here.launch.argv, here.launch.env, here.label) == (["srv"], ENV, "server")
    vc = VirtualCluster(2, prefix="hpcctest-z")
    there = process_launch("netns", ["srv"], ENV, cluster=vc, host=1)
    assert there.launch.argv == vc.exec_argv(1, ["srv"]) and there.launch.env == ENV
    assert there.hooks()["on_start"] == vc.register_pid
