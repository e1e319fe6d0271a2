"""A persistent receive from MPI_PROC_NULL must complete with status source MPI_PROC_NULL, tag
MPI_ANY_TAG and count 0 (MPI 4.1, section 3.10). MPICH 5.0.2 reports source MPI_ANY_SOURCE;
its MPI_Irecv from MPI_PROC_NULL is right. Needs mpi4py built against the MPI under test:

    python mpich_persistent_recv_proc_null.py      # one process is enough; exit 1: the defect
"""

import sys

import numpy as np
from mpi4py import MPI

buf = np.zeros(4, np.int32)
wrong = []
for how in ("Start", "Startall"):
    status = MPI.Status()
    req = MPI.COMM_SELF.Recv_init(buf, source=MPI.PROC_NULL, tag=0)
    req.Start() if how == "Start" else MPI.Prequest.Startall([req])
    req.Wait(status)
    req.Free()
    got = (status.Get_source(), status.Get_tag(), status.Get_count(MPI.INT))
    if got != (MPI.PROC_NULL, MPI.ANY_TAG, 0):
        wrong.append(f"Recv_init + {how}: (source, tag, count) = {got}")
library = MPI.Get_library_version().splitlines()[0].strip()
want = f"(PROC_NULL={MPI.PROC_NULL}, ANY_TAG={MPI.ANY_TAG}, 0; ANY_SOURCE={MPI.ANY_SOURCE})"
print(f"{library}: " + ("; ".join(wrong) + f", not {want}" if wrong else "as the standard says"))
sys.exit(1 if wrong else 0)
