"""Launcher command lines per MPI flavor, and MPI detection from `mpirun --version`."""

from __future__ import annotations

import os

import pytest

from pytest_hpccomm.cluster.hosts import Host
from pytest_hpccomm.cluster.launchers import Launcher, LaunchSpec
from pytest_hpccomm.cluster.launchers.local import LocalLauncher
from pytest_hpccomm.cluster.launchers.mpirun import MpirunLauncher, init_failure_diagnosis
from pytest_hpccomm.cluster.launchers.netns import NetnsLauncher
from pytest_hpccomm.cluster.launchers.srun import SrunLauncher
from pytest_hpccomm.cluster.mpi import MpiDetectError, MpiFlavor, detect_mpi, parse_mpirun_version
from pytest_hpccomm.cluster.virtual import VirtualCluster
from tests.cluster.clusterkit import mpi_env

OMPI4 = MpiFlavor("openmpi", (4, 1, 8))
OMPI5 = MpiFlavor("openmpi", (5, 0, 11))
MPICH = MpiFlavor("mpich", (5, 0, 2))
SECRET = "0123456789abcdef" * 4
HOSTS = [Host("node01"), Host("node02")]
BASE = {"PATH": "/usr/bin", "HOME": "/root"}


def spec(**kw: object) -> LaunchSpec:
    args: dict[str, object] = {
        "argv": ["python3", "-m", "peer"],
        "hosts": HOSTS,
        "env": {"HPCCOMM_CONTROL_KEY": SECRET},
    }
    args.update(kw)
    return LaunchSpec(**args)  # type: ignore[arg-type]


# -- detection --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, flavor",
    [
        (
            "mpirun (Open MPI) 4.1.8\n\nReport bugs to http://www.open-mpi.org/community/help/\n",
            OMPI4,
        ),
        (
            "mpirun (Open MPI) 5.0.11\n\nReport bugs to https://www.open-mpi.org/community/help/\n",
            OMPI5,
        ),
        ("prterun (PRRTE) 3.0.6\n", MpiFlavor("openmpi", (3, 0, 6))),
        (
            "HYDRA build details:\n    Version:                                 5.0.2\n"
            "    Release Date:                            Fri Sep 25\n",
            MPICH,
        ),
        (
            "HYDRA build details:\n    Version:                                 4.0.2\n",
            MpiFlavor("mpich", (4, 0, 2)),
        ),
    ],
)
def test_parse_mpirun_version(text: str, flavor: MpiFlavor) -> None:
    assert parse_mpirun_version(text) == flavor


def test_parse_mpirun_version_unknown() -> None:
    with pytest.raises(MpiDetectError, match="Intel"):
        parse_mpirun_version("Intel(R) MPI Library for Linux* OS, Version 2021.10\n")


@pytest.mark.parametrize(
    "name, vendor, major",
    [("openmpi", "openmpi", 5), ("openmpi4", "openmpi", 4), ("mpich", "mpich", 5)],
)
def test_detect_installed_mpi(name: str, vendor: str, major: int) -> None:
    env = mpi_env(name)
    flavor = detect_mpi(env.mpirun)
    assert (flavor.vendor, flavor.major) == (vendor, major)


def test_detect_missing_mpirun(tmp_path: object) -> None:
    with pytest.raises(MpiDetectError, match="exit 127"):
        detect_mpi("/nonexistent/mpirun")


# -- mpirun -----------------------------------------------------------------------------------


def test_openmpi4_command_line() -> None:
    launch = MpirunLauncher(
        "/opt/ompi4/bin/mpirun", OMPI4, rsh_agent="/run/x/agent", as_root=True, base=BASE
    ).command(spec(interface="fab0", tcp_only=True, bind_none=True))
    assert launch.argv == [
        "/opt/ompi4/bin/mpirun",
        "--host",
        "node01:1,node02:1",
        "-np",
        "2",
        "--map-by",
        "ppr:1:node",
        "--bind-to",
        "none",
        "--mca",
        "plm_rsh_agent",
        "/run/x/agent",
        "--mca",
        "pml",
        "ob1",
        "--mca",
        "btl",
        "tcp,self",
        "--mca",
        "btl_tcp_if_include",
        "fab0",
        "--mca",
        "oob_tcp_if_include",
        "fab0",
        "-x",
        "FI_TCP_IFACE",
        "-x",
        "HPCCOMM_CONTROL_KEY",
        "-x",
        "UCX_NET_DEVICES",
        "-x",
        "UCX_TLS",
        "python3",
        "-m",
        "peer",
    ]
    assert (
        launch.env["OMPI_ALLOW_RUN_AS_ROOT"] == launch.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] == "1"
    )
    assert launch.env["HPCCOMM_CONTROL_KEY"] == SECRET
    assert (launch.env["UCX_NET_DEVICES"], launch.env["FI_TCP_IFACE"]) == ("fab0", "fab0")
    assert launch.env["PATH"] == "/opt/ompi4/bin:/usr/bin"


def test_openmpi5_command_line() -> None:
    launch = MpirunLauncher(
        "mpirun", OMPI5, rsh_agent="/run/x/agent", as_root=False, base=BASE
    ).command(spec(hosts=[Host("a"), Host("b"), Host("c")], ranks_per_host=2, interface="eth1"))
    assert launch.argv == [
        "mpirun",
        "--host",
        "a:2,b:2,c:2",
        "-np",
        "6",
        "--map-by",
        "ppr:2:node",
        "--prtemca",
        "plm_ssh_agent",
        "/run/x/agent",
        "--mca",
        "btl_tcp_if_include",
        "eth1",
        "--prtemca",
        "oob_tcp_if_include",
        "eth1",
        "-x",
        "FI_TCP_IFACE",
        "-x",
        "HPCCOMM_CONTROL_KEY",
        "-x",
        "UCX_NET_DEVICES",
        "python3",
        "-m",
        "peer",
    ]
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in launch.env


def test_openmpi_minimal_command_line() -> None:
    launch = MpirunLauncher("mpirun", OMPI5, as_root=False, base=BASE).command(
        LaunchSpec(["./a.out"], [Host("n1")])
    )
    assert launch.argv == [
        "mpirun",
        "--host",
        "n1:1",
        "-np",
        "1",
        "--map-by",
        "ppr:1:node",
        "./a.out",
    ]


def test_hydra_command_line() -> None:
    launch = MpirunLauncher(
        "/opt/mpich/bin/mpiexec", MPICH, rsh_agent="/run/x/agent", as_root=True, base=BASE
    ).command(spec(interface="fab0", tcp_only=True, bind_none=True))
    assert launch.argv == [
        "/opt/mpich/bin/mpiexec",
        "-hosts",
        "node01:1,node02:1",
        "-n",
        "2",
        "-ppn",
        "1",
        "-bind-to",
        "none",
        "-launcher",
        "ssh",
        "-launcher-exec",
        "/run/x/agent",
        "-iface",
        "fab0",
        "-genvlist",
        "FI_PROVIDER,FI_TCP_IFACE,HPCCOMM_CONTROL_KEY,MPIR_CVAR_CH4_NETMOD,"
        "MPIR_CVAR_NOLOCAL,UCX_NET_DEVICES,UCX_TLS",
        "python3",
        "-m",
        "peer",
    ]
    # TCP only: no shared memory between namespaces, libfabric's TCP provider (UCX's TCP for
    # a build with the ucx netmod alone)
    names = ("MPIR_CVAR_NOLOCAL", "MPIR_CVAR_CH4_NETMOD", "FI_PROVIDER", "UCX_TLS")
    assert {k: launch.env[k] for k in names} == {
        "MPIR_CVAR_NOLOCAL": "1",
        "MPIR_CVAR_CH4_NETMOD": "ofi",
        "FI_PROVIDER": "tcp",
        "UCX_TLS": "tcp,self",
    }
    assert "OMPI_ALLOW_RUN_AS_ROOT" not in launch.env


@pytest.mark.parametrize("flavor", [OMPI4, OMPI5, MPICH])
def test_secrets_never_on_the_command_line(flavor: MpiFlavor) -> None:
    launch = MpirunLauncher("mpirun", flavor, base=BASE).command(spec())
    assert not any(SECRET in a for a in launch.argv)


def test_host_names_are_separate_arguments() -> None:
    # no shell ever sees the list: a weird name cannot even be constructed
    with pytest.raises(ValueError):
        Host("a;reboot")


# -- srun, local, netns -----------------------------------------------------------------------


def test_srun_command_line() -> None:
    launch = SrunLauncher(base=BASE).command(
        spec(ranks_per_host=4, bind_none=True, interface="ib0", tcp_only=True)
    )
    assert launch.argv == [
        "srun",
        "--nodes=2",
        "--ntasks=8",
        "--ntasks-per-node=4",
        "--nodelist=node01,node02",
        "--kill-on-bad-exit=1",
        "--export=ALL",
        "--mpi=pmix",
        "--cpu-bind=none",
        "python3",
        "-m",
        "peer",
    ]
    assert launch.env["OMPI_MCA_btl_tcp_if_include"] == "ib0"
    assert launch.env["OMPI_MCA_btl"] == "tcp,self"
    assert launch.env["FI_PROVIDER"] == "tcp"
    assert launch.env["HPCCOMM_CONTROL_KEY"] == SECRET


def test_srun_pmi2_and_extra() -> None:
    launch = SrunLauncher("/usr/bin/srun", mpi="pmi2", extra=["--exclusive"], base=BASE).command(
        spec()
    )
    assert launch.argv[:8] == [
        "/usr/bin/srun",
        "--nodes=2",
        "--ntasks=2",
        "--ntasks-per-node=1",
        "--nodelist=node01,node02",
        "--kill-on-bad-exit=1",
        "--export=ALL",
        "--mpi=pmi2",
    ]
    assert launch.argv[8:] == ["--exclusive", "python3", "-m", "peer"]


def test_local_launcher() -> None:
    launch = LocalLauncher(base=BASE).command(spec(hosts=[Host("localhost")]))
    assert launch.argv == ["python3", "-m", "peer"]
    assert launch.env["HPCCOMM_CONTROL_KEY"] == SECRET
    with pytest.raises(ValueError, match="one process"):
        LocalLauncher().command(spec())
    with pytest.raises(ValueError, match="cannot start"):
        LocalLauncher().command(spec(hosts=[Host("elsewhere")]))


def test_netns_launcher_pins_and_wraps() -> None:
    vc = VirtualCluster(2, prefix="hpcctest", subnet="10.250.1.0/24")  # not started: no root needed
    launcher = NetnsLauncher(vc, "/venv/bin/mpirun", OMPI5)
    launch = launcher.command(spec(hosts=launcher.hosts()))
    assert launch.argv[:11] == [
        "ip" if launch.argv[0] == "ip" else launch.argv[0],
        "netns",
        "exec",
        "hpcctest-h0",
        "unshare",
        "--uts",
        "--",
        "sh",
        "-c",
        'hostname "$0" && exec "$@"',
        "h0",
    ]
    inner = launch.argv[11:]
    assert inner[:8] == [
        "/venv/bin/mpirun",
        "--host",
        "h0:1,h1:1",
        "-np",
        "2",
        "--map-by",
        "ppr:1:node",
        "--bind-to",
    ]
    assert ["--prtemca", "plm_ssh_agent", vc.agent_path] == inner[9:12]
    assert "tcp,self" in inner and "fab0" in inner
    with pytest.raises(KeyError):
        launcher.command(spec(hosts=[Host("h7")]))


@pytest.mark.parametrize(
    ("flavor", "args"),
    [(OMPI5, ["--prtemca", "prte_tmpdir_base"]), (OMPI4, ["--mca", "orte_tmpdir_base"])],
)
def test_open_mpi_on_this_machine_gets_a_session_directory_of_its_own(
    flavor: MpiFlavor, args: list[str]
) -> None:
    first, second = (
        MpirunLauncher("mpirun", flavor, base=BASE, private_session=True).command(
            spec(hosts=[Host("localhost")])
        )
        for _ in range(2)
    )
    assert first.scratch and second.scratch and first.scratch != second.scratch
    at = first.argv.index(args[1])
    assert first.argv[at - 1 : at + 2] == [*args, first.scratch]
    assert first.argv.index(args[1]) < first.argv.index("python3")  # an option, not the program's
    assert not os.path.exists(first.scratch)  # made by the job that runs it, not by the launcher


def test_no_private_session_for_real_hosts_nor_mpich() -> None:
    remote = MpirunLauncher("mpirun", OMPI5, base=BASE).command(spec())
    mpich = MpirunLauncher("mpirun", MPICH, base=BASE, private_session=True).command(spec())
    assert remote.scratch is None and "prte_tmpdir_base" not in remote.argv
    assert mpich.scratch is None


def test_the_netns_launcher_keeps_its_jobs_session_directory() -> None:
    vc = VirtualCluster(2, prefix="hpcctest", subnet="10.250.1.0/24")  # not started
    launch = NetnsLauncher(vc, "/venv/bin/mpirun", OMPI5).command(spec(hosts=[Host("h0")]))
    assert (
        launch.scratch and launch.argv[launch.argv.index("prte_tmpdir_base") + 1] == launch.scratch
    )


def test_every_launcher_meets_the_protocol() -> None:
    assert isinstance(LocalLauncher(), Launcher)
    assert isinstance(SrunLauncher(), Launcher)
    assert isinstance(MpirunLauncher("mpirun", OMPI5), Launcher)


def test_launch_spec_validation() -> None:
    with pytest.raises(ValueError):
        LaunchSpec([], HOSTS)
    with pytest.raises(ValueError):
        LaunchSpec(["x"], [])
    with pytest.raises(ValueError):
        LaunchSpec(["x"], HOSTS, ranks_per_host=0)
    assert os.environ.get("HPCCOMM_CONTROL_KEY") != SECRET


def test_mpich_init_failure_is_named_only_for_the_known_words() -> None:
    """Both wordings of libfabric's tcp provider without a RUNNING interface (MPICH 4.2+ and
    3.4-4.1, as the replay saw them) name the interface; other MPI_Init aborts stay unnamed."""
    new = (
        "MPIDI_OFI_create_vci_context(1058): OFI call ep_enable failed "
        "(default nic=tcp: Bad file descriptor)"
    )
    old = (
        "create_vni_context(998)..: OFI EP enable failed "
        "(ofi_init.c:998:create_vni_context:Bad file descriptor)"
    )
    for words in (new, old):
        assert "FI_TCP_IFACE=fab0 not RUNNING" in init_failure_diagnosis(words, "fab0")
    assert "FI_TCP_IFACE's interface not RUNNING" in init_failure_diagnosis(new)
    other = "OFI call ep_enable failed (default nic=tcp: Address already in use)"
    assert init_failure_diagnosis(other, "fab0") == ""
    assert init_failure_diagnosis("Fatal error in internal_Init_thread: Other MPI error") == ""
