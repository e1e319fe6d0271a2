"""Partitioned communication with MPI_PROC_NULL as the peer (MPI 4.1, 3.10: MPI_PROC_NULL may
be used wherever a source or destination is required) must complete at once. MPICH 5.0.0 to
5.0.2 (PyPI wheels) end with a segmentation fault in MPI_Precv_init/MPI_Psend_init (4.0.3 to
4.3.2 instead wait in MPI_Wait for ever), and so do
Open MPI 5.0.8 to 5.0.10 (in MPI_Precv_init: pml ob1 starts a receive from rank -2); Open MPI
5.0.11 completes (open-mpi/ompi#14155, backported by #14295), with status source
MPI_PROC_NULL (-2 in Open MPI's mpi.h, -1 in MPICH's). Needs mpi4py built against the MPI
under test:

    python partitioned_proc_null_crash.py      # one process; a crash: the defect
"""

import numpy as np
from mpi4py import MPI

library = MPI.Get_library_version().splitlines()[0].strip()
comm = MPI.COMM_SELF
buf = np.full(6, 7, np.int32)
recv = comm.Precv_init(
    [buf, 2, MPI.INT32_T], 3, MPI.PROC_NULL, 0
)  # MPICH, Open MPI < 5.0.11: SIGSEGV
send = comm.Psend_init([buf, 2, MPI.INT32_T], 3, MPI.PROC_NULL, 0)
MPI.Prequest.Startall([recv, send])
for p in range(3):
    send.Pready(p)
recv.Wait()
send.Wait()
send.Free()
recv.Free()
print(f"{library}: partitioned requests with MPI_PROC_NULL completed", flush=True)
