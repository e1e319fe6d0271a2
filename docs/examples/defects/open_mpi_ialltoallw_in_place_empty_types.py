"""MPI_Ialltoallw with MPI_IN_PLACE, 2 processes: rank 0 exchanges 1 element with itself; every
other block (0 <-> 1, and rank 1 with itself) is count 1 of an empty vector, a zero-size type
map, which moves nothing, like count 0. Open MPI 5.0.11: rank 0's request never completes
(rank 1's does); MPI_Alltoallw, or count 0 of MPI_INT in those blocks, completes; MPICH
completes. Needs mpi4py built against the MPI under test:

    mpirun -n 2 python open_mpi_ialltoallw_in_place_empty_types.py   # exit 1: the defect
"""

import sys
import time

import numpy as np
from mpi4py import MPI

WAIT = 10.0
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
library = MPI.Get_library_version().splitlines()[0].strip()
empty = MPI.INT.Create_vector(0, 1, 2).Commit()
one = MPI.INT.Create_vector(1, 1, 2).Commit()
buf = np.arange(4, dtype=np.intc) + 100 * rank
types = [one, empty] if rank == 0 else [empty, empty]  # rank 0's own block: 1 element
req = comm.Ialltoallw(MPI.IN_PLACE, [buf, ([1, 1], [0, 8]), types])
start = time.monotonic()
while not req.Test():
    if time.monotonic() - start > WAIT:
        print(
            f"{library}: rank {rank}: MPI_Ialltoallw (MPI_IN_PLACE) incomplete after {WAIT:.0f}s",
            flush=True,
        )
        sys.stdout.flush()
        MPI.COMM_WORLD.Abort(1)
if buf.tolist() != [100 * rank + k for k in range(4)]:
    print(f"{library}: rank {rank}: buffer {buf.tolist()} changed", flush=True)
    MPI.COMM_WORLD.Abort(1)
comm.Barrier()
empty.Free()
one.Free()
if rank == 0:
    print(f"{library}: as the standard says", flush=True)
