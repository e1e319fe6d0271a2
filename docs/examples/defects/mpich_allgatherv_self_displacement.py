"""MPI_Allgatherv puts each process's block at its displacement in the receive buffer (MPI 4.1,
6.7), a one-process communicator too. MPICH 4.0.3 copies the block to the start of the buffer,
its displacement ignored (pmodels/mpich#6374: the early-return local copy "omitted
considering displs"); MPICH 4.1.3 and later, and Open MPI, are right. Needs mpi4py built
against the MPI under test:

    python mpich_allgatherv_self_displacement.py     # one process; exit 1: the defect
"""

import sys

import numpy as np
from mpi4py import MPI

send = np.array([7], np.int8)
recv = np.full(3, -1, np.int8)
MPI.COMM_SELF.Allgatherv(send, [recv, [1], [1], MPI.INT8_T])  # count 1 at displacement 1
library = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()
right = recv.tolist() == [-1, 7, -1]
print(f"{library}: receive buffer {recv.tolist()}" + ("" if right else ", not [-1, 7, -1]"))
sys.exit(0 if right else 1)
