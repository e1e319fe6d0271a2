"""MPI 4.0 partitioned send of a datatype whose extent exceeds its size: partition p starts
p * count extents into the buffer (MPI 4.1, 4.2.2: the partitions are consecutive, each of
count elements of the datatype). Open MPI 5.0.11 starts it p * count * size bytes in (the
type's size, not its extent): with a vector taking elements 0 and 2 of every 4 int32, the
receiver gets [0, 2, 2, 4, 4, 6] instead of [0, 2, 4, 6, 8, 10]; Open MPI 5.0.8 to 5.0.10
deliver only the first half ([0, 2, 4, -1, -1, -1]); MPICH is right. Needs
mpi4py built against the MPI under test:

    mpirun -n 2 python open_mpi_partitioned_derived_offsets.py   # exit 1: the defect
"""

import sys

import numpy as np
from mpi4py import MPI

PARTS = 3
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
library = MPI.Get_library_version().splitlines()[0].strip()
vec = MPI.INT32_T.Create_vector(2, 1, 2)
every_other = vec.Create_resized(0, 4 * MPI.INT32_T.Get_size()).Commit()
vec.Free()
if rank == 0:
    data = np.arange(4 * PARTS, dtype=np.int32)
    req = comm.Psend_init([data, 1, every_other], PARTS, 1, 0)  # 1 element per partition
    req.Start()
    for p in range(PARTS):
        req.Pready(p)
    req.Wait()
    req.Free()
    status = 0
else:
    got = np.full(2 * PARTS, -1, np.int32)
    req = comm.Precv_init([got, 2, MPI.INT32_T], PARTS, 0, 0)
    req.Start()
    req.Wait()
    req.Free()
    want = np.arange(4 * PARTS).reshape(-1, 4)[:, [0, 2]].ravel().tolist()
    status = int(got.tolist() != want)
    verdict = f"received {got.tolist()}, not {want}" if status else "as the standard says"
    print(f"{library}: {verdict}", flush=True)
every_other.Free()
status = comm.allreduce(status)
sys.exit(status)
