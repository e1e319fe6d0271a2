"""MPI_Alltoallw's displacements are in bytes (MPI 4.1, 6.8). On a one-process communicator
Open MPI 5.0.11 (its coll/self component) multiplies them by the datatype's extent: a 4-byte
receive displacement of MPI_INT32_T puts the element at index 4, not 1 (past the end of a
short buffer); `--mca coll ^self` and MPICH put it at 1. Needs mpi4py built against the MPI
under test:

    python open_mpi_self_alltoallw.py      # one process; exit 1: the defect
"""

import sys

import numpy as np
from mpi4py import MPI

library = MPI.Get_library_version().splitlines()[0].strip()
send = np.arange(10, 26, dtype=np.int32)
recv = np.full(16, -1, np.int32)  # room for the misplaced element: nothing outside is written
MPI.COMM_SELF.Alltoallw(
    [send, ([1], [8]), [MPI.INT32_T]],  # element 2 (value 12)
    [recv, ([1], [4]), [MPI.INT32_T]],  # into element 1
)
written = {k: int(v) for k, v in enumerate(recv) if v != -1}
if written != {1: 12}:
    print(f"{library}: Alltoallw on COMM_SELF wrote {written}, not {{1: 12}}", flush=True)
    sys.exit(1)
print(f"{library}: as the standard says", flush=True)
