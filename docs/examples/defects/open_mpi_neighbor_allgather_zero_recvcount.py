"""MPI_Neighbor_allgather on a distributed graph: a rank without sources receives nothing, so
its recvcount matches no sender's signature (MPI 4.1, 8.6.1) and 0 is a valid value (mpi4py
infers it from the rank's empty receive buffer). Open MPI 5.0.11 then returns at once on that
rank without sending to its destinations, which wait forever; MPI_Ineighbor_allgather and
MPICH deliver. Needs mpi4py built against the MPI under test:

    mpirun -n 2 python open_mpi_neighbor_allgather_zero_recvcount.py   # exit 1: the defect

The graph is one edge 0 -> 1; rank 1 gives up after WAIT seconds (a watchdog thread, since
the blocking call cannot time out) and the script exits 1.
"""

import os
import sys
import threading

import numpy as np
from mpi4py import MPI

WAIT = 10.0
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
library = MPI.Get_library_version().splitlines()[0].strip()
sources, destinations = ([], [1]) if rank == 0 else ([0], [])
graph = comm.Create_dist_graph_adjacent(sources, destinations, reorder=False)
recv = np.full(3 * len(sources), -1, np.int32)
send = np.full(3, 7 + rank, np.int32)


def hung() -> None:
    print(
        f"{library}: rank 1 got nothing from rank 0 in {WAIT:.0f}s: rank 0 passed recvcount 0 "
        "(it has no sources) and its MPI_Neighbor_allgather skipped its send",
        flush=True,
    )
    os._exit(1)


watchdog = threading.Timer(WAIT, hung) if rank == 1 else None
if watchdog is not None:
    watchdog.start()
# rank 0: recvcount 0, its buffer is empty; rank 1: 3 elements from its one source
graph.Neighbor_allgather([send, 3, MPI.INT32_T], [recv, 0 if rank == 0 else 3, MPI.INT32_T])
if watchdog is not None:
    watchdog.cancel()
graph.Free()
if rank == 1 and recv.tolist() != [7, 7, 7]:
    print(f"{library}: rank 1 received {recv.tolist()}, not [7, 7, 7]", flush=True)
    sys.exit(1)
if rank == 1:
    print(f"{library}: as the standard says", flush=True)
