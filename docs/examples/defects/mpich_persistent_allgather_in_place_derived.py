"""A persistent MPI_Allgather_init with MPI_IN_PLACE over a derived datatype (a resized
vector), started twice and freed, then the datatype freed. MPICH 4.0.x aborts in that
MPI_Type_free with "Assertion failed in file src/mpi/datatype/datatype_impl.c ...
ref_count >= 0": the freed request released a reference to the datatype it never took.
Needs mpi4py built against the MPI under test:

    mpirun -n 2 python mpich_persistent_allgather_in_place_derived.py   # exit != 0 after
                                                # "freeing the datatype": the defect
"""

import sys
import time

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
# elements 0 and 2 of every 4 int32
vector = MPI.INT32_T.Create_vector(2, 1, 2)
t = vector.Create_resized(0, 4 * 4)
t.Commit()
vector.Free()
count = 3
rbuf = np.full(size * count * 4, -1, np.int32)
for i in range(count):
    rbuf[(rank * count + i) * 4 + 0] = rank * 100 + 2 * i
    rbuf[(rank * count + i) * 4 + 2] = rank * 100 + 2 * i + 1
req = comm.Allgather_init(MPI.IN_PLACE, [rbuf, count, t])
for _ in range(2):
    req.Start()
    req.Wait()
req.Free()
print(f"rank {rank}: request freed, freeing the datatype", flush=True)
time.sleep(2)  # let the launcher forward that line: the abort below may cut its output short
t.Free()
print(f"rank {rank}: datatype freed", flush=True)
want = np.full(size * count * 4, -1, np.int32)
for r in range(size):
    for i in range(count):
        want[(r * count + i) * 4 + 0] = r * 100 + 2 * i
        want[(r * count + i) * 4 + 2] = r * 100 + 2 * i + 1
right = bool((rbuf == want).all())
got = comm.gather(right, root=0)
if rank == 0:
    library = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()
    print(
        f"{library}, {size} processes, persistent Allgather IN_PLACE of a resized vector: "
        + (
            "right"
            if all(got)
            else f"wrong blocks on ranks {[r for r, g in enumerate(got) if not g]}"
        )
    )
sys.exit(0 if rank != 0 or all(got) else 1)
