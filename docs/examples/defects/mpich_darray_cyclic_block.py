"""MPI_Type_create_darray with a cyclic(2) dimension over a block one (MPI 4.1, 5.1.4): on a
2 x 2 process grid, process 3 (coordinates (1, 1)) of a 6 x 5 int32 array in C order owns rows
2-3 (row blocks of 2 dealt round the 2 process rows) and columns 3-4 (blocks of 3), so its type
selects elements 13, 14, 18 and 19 of the array, in that order. The mpich 3.4.3.post1 wheel
(the ch3 device) selects others; the 3.4.3 wheel (ch4) and later releases are right. Needs
mpi4py built against the MPI under test:

    python mpich_darray_cyclic_block.py     # one process; exit 1: the defect
"""

import sys

import numpy as np
from mpi4py import MPI

t = MPI.INT32_T.Create_darray(
    4,
    3,
    [6, 5],
    [MPI.DISTRIBUTE_CYCLIC, MPI.DISTRIBUTE_BLOCK],
    [2, MPI.DISTRIBUTE_DFLT_DARG],
    [2, 2],
    MPI.ORDER_C,
).Commit()
array = np.arange(30, dtype=np.int32)
n = t.Get_size() // 4
got = np.full(n, -1, np.int32)
MPI.COMM_SELF.Sendrecv([array, 1, t], 0, 0, [got, n, MPI.INT32_T], 0, 0)
t.Free()
want = [13, 14, 18, 19]
library = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()
print(f"{library}: darray cyclic(2) x block, process 3 of 2 x 2: took {got.tolist()}, want {want}")
sys.exit(0 if got.tolist() == want else 1)
