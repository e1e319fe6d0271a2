"""MPI_Cart_sub with every entry of remain_dims false: each process gets a communicator of its
own with a zero-dimensional Cartesian topology (MPI 4.1, 8.5.6: "If all entries in remain_dims
are false ... then newcomm is associated with a zero-dimensional Cartesian topology"; the
call partitions comm, so every process gets one). MPICH before pmodels/mpich#7837 gives that
communicator to rank 0 only and MPI_COMM_NULL to the others (pmodels/mpich#7832). Needs mpi4py
built against the MPI under test:

    mpirun -n 2 python mpich_cart_sub_zero_dims.py     # exit 1: the defect
"""

import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
cart = comm.Create_cart([size], periods=[False])
sub = cart.Sub([False])
if sub == MPI.COMM_NULL:
    mine = "MPI_COMM_NULL"
else:
    mine = f"size {sub.Get_size()}, topology {sub.Get_topology()}, {sub.Get_dim()} dims"
    ok = sub.Get_size() == 1 and sub.Get_topology() == MPI.CART and sub.Get_dim() == 0
    mine = "right" if ok else mine
    sub.Free()
cart.Free()
got = comm.gather(mine, root=0)
if rank == 0:
    library = MPI.Get_library_version().splitlines()[0].split(",")[0].strip()
    wrong = {r: g for r, g in enumerate(got) if g != "right"}
    print(
        f"{library}, {size} processes, MPI_Cart_sub(remain_dims=[false]): "
        + (f"wrong on ranks {wrong}" if wrong else "a zero-dimensional communicator on every rank")
    )
sys.exit(1 if rank == 0 and any(g != "right" for g in got) else 0)
