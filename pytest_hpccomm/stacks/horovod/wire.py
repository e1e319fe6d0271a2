"""What the Horovod peer and the orchestrator share (standard library only).

Tensors travel as peer/tensors.py encodes them: the orchestrator draws every rank's input and
keeps the reference; the peer only runs Horovod and reports what it received.
"""

from __future__ import annotations

from collections.abc import Mapping

# re-exported: the Horovod peer and tests take them from here
from pytest_hpccomm.peer.tensors import decode as decode
from pytest_hpccomm.peer.tensors import encode as encode

CONTROLLERS = ("mpi", "gloo")
OPS = ("sum", "average", "min", "max", "product")
DTYPES = ("int32", "int64", "float16", "float32", "float64")
INT_DTYPES = ("int32", "int64")
# what the ops that only move values (allgather, broadcast, alltoall) also take, as upstream's
# tests give them (torch's Byte, Char and Short tensors)
MOVE_DTYPES = (*DTYPES, "uint8", "int8", "int16")
PLANT_VAR = "HPCCOMM_HOROVOD_PLANT"
# corrupt-allreduce: the peer adds 1 to the last element of every allreduce result with more
# than PLANT_THRESHOLD elements (the suite's own validation: the property must catch and
# shrink it to a tensor just over the threshold)
PLANTS = ("corrupt-allreduce",)
PLANT_THRESHOLD = 8
SIZE_VAR = "HPCCOMM_HOROVOD_SIZE"  # ranks in the job: static process sets are made at init
# Ranks that share this host's cores each get one of them: rank r runs on cpus[r % len(cpus)].
# Unpinned, each rank's compute thread and Horovod's background thread make 4 runnable threads
# on 2 cores, and the scheduler now and then puts both compute threads on one core and both
# background threads on the other, where it stays: every training request runs at half speed.
CPUS_VAR = "HPCCOMM_HOROVOD_CPUS"
# How a rank waits for an op: "spin" is Horovod's own (torch's synchronize() loops on
# sched_yield with the GIL released), "sleep" polls the handle with a short sleep. With more
# ranks than cores the spinning main threads starve the background threads that do the work:
# an op then stalls for seconds (up to 18 s seen) with no rank doing anything useful.
WAIT_VAR = "HPCCOMM_HOROVOD_WAIT"
WAITS = ("spin", "sleep")
SLEEP_POLL_S = 0.0005
# where a rank finds its world rank before hvd.init(): our Gloo launch, Open MPI, MPICH's Hydra
RANK_VARS = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
SIZE_VARS = ("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


def rank_cpu(env: Mapping[str, str]) -> int | None:
    """The CPU this rank is to run on (CPUS_VAR and its rank), or None: not pinned."""
    cpus = [int(c) for c in env.get(CPUS_VAR, "").split(",") if c.strip()]
    rank = next((env[v] for v in RANK_VARS if env.get(v, "").isdigit()), None)
    if not cpus or rank is None:
        return None
    return cpus[int(rank) % len(cpus)]


# Horovod's own variables the orchestrator sets (launching without horovodrun)
CONTROLLER_ENV = {
    "mpi": {"HOROVOD_CONTROLLER": "mpi", "HOROVOD_CPU_OPERATIONS": "mpi"},
    "gloo": {"HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo"},
}


def static_process_sets(size: int) -> list[list[int]]:
    """The process sets every peer registers at init (static sets must be known then): two
    that partition the ranks, the first half and the rest, e.g. [[0], [1]] for 2 ranks,
    [[0, 1], [2]] for 3. A case in a process set runs on every rank, each in the set it belongs
    to (upstream's even/odd sets do the same): ranks never skip an op, so they all make the
    same number of ops, and Horovod's unnamed ops (every autograd backward), named by the
    rank's own op count, still match across ranks."""
    if size < 2:
        return []
    half = (size + 1) // 2
    return [list(range(half)), list(range(half, size))]


PARTITION = "partition"  # a case's process_set: each rank runs it in the static set it is in
