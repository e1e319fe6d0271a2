"""MPI_Accumulate applies its op to the target window whichever process is the origin (MPI 4.1,
12.3.4). Open MPI 5.0.11 (osc/rdma, two processes on one host) leaves the window unchanged for
BAND/BOR/LAND/LOR/LXOR from the other process, and zeroes it for BXOR; from the target's own
process every op is right. Needs mpi4py built against the MPI under test:

    mpirun -n 2 python open_mpi_remote_accumulate.py int64     # exit 1: the defect
"""

import sys

import numpy as np
from mpi4py import MPI

dtype = np.dtype(sys.argv[1] if len(sys.argv) > 1 else "int64")
mpi_type = MPI.Datatype.fromcode(dtype.char)
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
OPS = {
    "SUM": lambda a, b: a + b,
    "MAX": np.maximum,
    "BAND": np.bitwise_and,
    "BOR": np.bitwise_or,
    "BXOR": np.bitwise_xor,
    "LAND": lambda a, b: np.logical_and(a, b).astype(a.dtype),
    "LOR": lambda a, b: np.logical_or(a, b).astype(a.dtype),
    "LXOR": lambda a, b: np.logical_xor(a, b).astype(a.dtype),
}
initial, value = np.array([1000, 0, 7, -3], dtype), np.array([5007, 0, 0, 2], dtype)
wrong = []
for name, fold in OPS.items():
    for origin in (0, 1):  # rank 0 holds the window: origin 0 is local, 1 is remote
        window = initial.copy()
        win = MPI.Win.Create(window, window.itemsize, comm=comm)
        win.Fence()
        if rank == origin:
            win.Accumulate(
                [value, mpi_type], 0, target=[0, len(value), mpi_type], op=getattr(MPI, name)
            )
        win.Fence()
        win.Free()
        want = fold(initial, value)
        if rank == 0 and not np.array_equal(window, want):
            where = "local" if origin == 0 else "remote"
            wrong.append(f"{name} from {where}: {window.tolist()}, want {want.tolist()}")
if rank == 0:
    library = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()
    print(f"{library} {dtype}: " + ("; ".join(wrong) if wrong else "every op right"))
sys.exit(1 if rank == 0 and wrong else 0)
