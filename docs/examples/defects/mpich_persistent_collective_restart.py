"""A persistent collective started twice, its receive buffer put back to -1 before each start
(MPI 4.1, 6.13: every MPI_Start of the request performs the operation anew):

    mpirun -n 2 python mpich_persistent_collective_restart.py allgather   # MPI_Allgather_init
    mpirun -n 2 python mpich_persistent_collective_restart.py scatter     # MPI_Scatter_init,
                                                  # MPI_IN_PLACE at root 1 (the last rank)
    mpirun -n 2 python mpich_persistent_collective_restart.py scatter0    # MPI_Scatter_init
                                                  # at root 0, no MPI_IN_PLACE

MPICH 4.0.x's second start of the Allgather leaves rank 1's block as it was before the start;
MPICH 4.0.2-4.3.1's second start of a Scatter, at any root, in place or not, leaves the
non-root's block unwritten. Exit 1 names the start and the blocks left wrong. Needs mpi4py
built against the MPI under test.
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
op = sys.argv[1] if len(sys.argv) > 1 else "allgather"
count, root = 4, size - 1
block = np.arange(count, dtype=np.int32) + 100 * rank
if op == "allgather":
    rbuf = np.full(size * count, -1, np.int32)
    req = comm.Allgather_init([block, MPI.INT32_T], [rbuf, MPI.INT32_T])
    want = np.concatenate([np.arange(count, dtype=np.int32) + 100 * r for r in range(size)])
    fresh = rbuf.copy()
elif op == "scatter0":  # root 0 sends block r to rank r, its own included
    full = np.arange(size * count, dtype=np.int32)
    rbuf = np.full(count, -1, np.int32)
    send = [full, count, MPI.INT32_T] if rank == 0 else None
    req = comm.Scatter_init(send, [rbuf, count, MPI.INT32_T], 0)
    want = full[rank * count : (rank + 1) * count]
    fresh = rbuf.copy()
elif op == "scatter":  # the root's block r goes to rank r; the root's own stays in place
    full = np.arange(size * count, dtype=np.int32)
    if rank == root:
        rbuf = full.copy()
        req = comm.Scatter_init([rbuf, count, MPI.INT32_T], MPI.IN_PLACE, root)
        want = full.copy()
    else:
        rbuf = np.full(count, -1, np.int32)
        req = comm.Scatter_init(None, [rbuf, count, MPI.INT32_T], root)
        want = full[rank * count : (rank + 1) * count]
    fresh = rbuf.copy()
else:
    sys.exit(f"unknown collective {op!r}: allgather, scatter or scatter0")
wrong = []
for start in (1, 2):
    rbuf[...] = fresh
    req.Start()
    req.Wait()
    if not (rbuf == want).all():
        wrong.append(f"start {start}: {rbuf.tolist()}, want {want.tolist()}")
req.Free()
got = comm.gather(wrong, root=0)
if rank == 0:
    library = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()
    bad = "; ".join(f"rank {r}: {', '.join(w)}" for r, w in enumerate(got) if w)
    print(f"{library}, {size} processes, persistent {op} started twice: {bad or 'right'}")
sys.exit(1 if rank == 0 and any(got) else 0)
