"""MPI_MIN and MPI_MAX over unsigned integers compare them as unsigned (MPI 4.1, 6.9.2): the
minimum of 0 and 128 as uint8 is 0. Debian 12's MPICH 4.0.2 (ch4:ucx) compares every
unsigned type as signed, and Debian 12's Open MPI 4.1.4 does so for MPI_UNSIGNED_LONG (which
mpi4py uses for NumPy's uint64) with three processes; the MPICH 4.0.3 and Open MPI 4.1.7 wheels
are right. The same for MPI_Accumulate with MPI_MAX over uint16 into another process's
window on Debian's MPICH. Needs mpi4py built against the MPI under test:

    mpirun -n 3 python unsigned_min_max_as_signed.py     # exit 1: the defect
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
wrong = []
for dtype in ("uint8", "uint16", "uint32", "uint64"):
    high = np.iinfo(dtype).max // 2 + 1  # the top bit alone: negative if read as signed
    mine = np.array([high if rank == size - 1 else 0], dtype)
    for name, want in (("MIN", 0), ("MAX", high)):
        got = np.zeros(1, dtype)
        comm.Allreduce(mine, got, op=getattr(MPI, name))
        if int(got[0]) != int(want):
            mpi_type = MPI.Datatype.fromcode(np.dtype(dtype).char).Get_name()
            wrong.append(
                f"{name} over {dtype} ({mpi_type}) = {int(got[0])}, want {int(want)}: "
                "compared as signed"
            )
# MPI_Accumulate with MPI_MAX into a window of one uint16 holding 0 (MPI 4.1, 12.3.4: the
# predefined operation as in MPI_Reduce): the last process's 0x8000 must win
# (skipped where no window can be made: Open MPI 4.1 under MPI_THREAD_MULTIPLE over TCP)
window = np.zeros(1, np.uint16)
try:
    win = MPI.Win.Create(window, disp_unit=2, comm=comm)
except MPI.Exception:
    window[0] = 0x8000
else:
    win.Fence()
    if rank == size - 1:
        win.Accumulate(np.array([0x8000], np.uint16), 0, op=MPI.MAX)
    win.Fence()
    win.Free()
if rank == 0 and int(window[0]) != 0x8000:
    wrong.append(f"Accumulate MAX over uint16 = {int(window[0])}, want 32768: compared as signed")
if rank == 0:
    library = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()
    print(f"{library}, {size} processes: " + ("; ".join(wrong) if wrong else "all right"))
sys.exit(1 if rank == 0 and wrong else 0)
