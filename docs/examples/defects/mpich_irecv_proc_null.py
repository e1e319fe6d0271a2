"""A receive from MPI_PROC_NULL completes with status source MPI_PROC_NULL, tag MPI_ANY_TAG
and count 0 (MPI 4.1, 3.10), a nonblocking one too. MPICH 4.0.3's MPI_Irecv returns a request
that is already complete with its status never set (source and tag read 0):
pmodels/mpich#6805, fixed by #6819; 3.4.3, 4.1.3 and later are right. Needs mpi4py built
against the MPI under test:

    python mpich_irecv_proc_null.py     # one process is enough; exit 1: the defect
"""

import sys

import numpy as np
from mpi4py import MPI

status = MPI.Status()
buf = np.zeros(4, np.int32)
MPI.COMM_SELF.Irecv(buf, source=MPI.PROC_NULL, tag=3).Wait(status)
got = (status.Get_source(), status.Get_tag(), status.Get_count(MPI.INT))
want = (MPI.PROC_NULL, MPI.ANY_TAG, 0)
library = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()
print(
    f"{library}: Irecv from MPI_PROC_NULL: (source, tag, count) = {got}"
    + ("" if got == want else f", not {want}")
)
sys.exit(0 if got == want else 1)
