"""MPI_Win_create is a collective every MPI provides at every thread level it grants (MPI 4.1,
12.2.1). Open MPI 4.1.7 and 4.1.8 grant MPI_THREAD_MULTIPLE (mpi4py asks for it) and then fail
MPI_Win_create with MPI_ERR_WIN when the job's BTLs are TCP only: the one-sided component left
for them, osc/pt2pt, "does not support MPI_THREAD_MULTIPLE in this release". Open MPI 5.0
(osc/rdma over any BTL) creates the window. Needs mpi4py built against the MPI under test:

    mpirun --mca btl tcp,self -n 2 python open_mpi_41_win_create.py     # exit 1: the defect
    mpirun -n 2 python open_mpi_41_win_create.py     # exit 0: shared memory takes osc/rdma
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
comm.Set_errhandler(MPI.ERRORS_RETURN)
levels = {
    MPI.THREAD_SINGLE: "SINGLE",
    MPI.THREAD_FUNNELED: "FUNNELED",
    MPI.THREAD_SERIALIZED: "SERIALIZED",
    MPI.THREAD_MULTIPLE: "MULTIPLE",
}
granted = levels[MPI.Query_thread()]
window = np.zeros(4, np.int64)
try:
    win = MPI.Win.Create(window, window.itemsize, comm=comm)
except MPI.Exception as e:
    print(
        f"rank {comm.Get_rank()} (granted MPI_THREAD_{granted}): MPI_Win_create: "
        f"{e.Get_error_string()}",
        flush=True,
    )
    sys.exit(1)
win.Free()
print(f"rank {comm.Get_rank()} (granted MPI_THREAD_{granted}): window made", flush=True)
