"""MPI_Scatter_init with MPI_IN_PLACE at the root (MPI 4.1, 6.13 and 6.6: the root keeps its
own block where it is and sends the others). MPICH 4.0.3 fails at the root's MPI_Start or
MPI_Wait ("truncation: intype=..., outtype_size=0": the in-place receive taken as a
zero-size type) and never sends, so the other processes wait forever; the blocking and
nonblocking forms are right, and so is 4.1.3. Needs mpi4py built against the MPI under test:

    mpirun -n 2 python mpich_persistent_scatter_in_place.py   # exit 1: the defect
"""

import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
root, count = size - 1, 4
send = np.arange(size * count, dtype=np.int32)
recv = np.full(count, -1, np.int32)
if rank == root:
    req = comm.Scatter_init([send, count, MPI.INT32_T], MPI.IN_PLACE, root=root)
else:
    req = comm.Scatter_init(None, [recv, count, MPI.INT32_T], root=root)
outcome = "right"
try:
    for start in (1, 2):  # a persistent request is started again and again
        req.Start()
        deadline = time.monotonic() + 10
        while not req.Test():
            if time.monotonic() > deadline:
                outcome = f"start {start} incomplete after 10 s"
                break
            time.sleep(0.001)
        if outcome != "right":
            break
except MPI.Exception as e:
    outcome = "failed: " + " ".join(e.Get_error_string().split())[-200:]
if (
    outcome == "right"
    and rank != root
    and recv.tolist() != send[rank * count : (rank + 1) * count].tolist()
):
    outcome = f"received {recv.tolist()}"
library = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()
print(
    f"{library}, rank {rank}: persistent Scatter with MPI_IN_PLACE at the root: {outcome}",
    flush=True,
)
if outcome != "right":
    # a peer may be stuck: end the job, after giving the launcher time to forward the line
    # above (Hydra ends the job at MPI_Abort and may drop output not forwarded by then)
    time.sleep(2)
    comm.Abort(1)
req.Free()
