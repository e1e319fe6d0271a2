"""MPI_SUM over uint8 with Open MPI's op/avx component saturates at 255 instead of wrapping
modulo 256 as C's unsigned arithmetic (and MPICH, and Open MPI's own base ops) do: the
component's vector loops add with saturating instructions (open-mpi/ompi#8045, closed
"wontfix": MPI leaves integer overflow undefined). Short buffers take the component's scalar
tail, which wraps, so the script sums several lengths. Needs mpi4py built against the MPI
under test, on an x86-64 CPU with SSE4.1 or later:

    mpirun -n 2 python open_mpi_avx_unsigned_sum.py     # exit 1: the sums saturated
    mpirun --mca op ^avx -n 2 python open_mpi_avx_unsigned_sum.py     # exit 0
"""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
each = 200  # every rank's value: any sum of two or more passes 255
want = (each * size) % 256
saturated = []
for count in (1, 8, 16, 32, 64, 256):
    got = np.zeros(count, np.uint8)
    comm.Allreduce(np.full(count, each, np.uint8), got, op=MPI.SUM)
    if (got == 255).any() and want != 255:
        saturated.append(f"{count} elements: {int((got == 255).sum())} saturated")
if rank == 0:
    library = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()
    print(
        f"{library}, {size} processes, uint8 SUM of {each} each, want {want}: "
        + ("; ".join(saturated) + " at 255" if saturated else "wrapped")
    )
sys.exit(1 if rank == 0 and saturated else 0)
