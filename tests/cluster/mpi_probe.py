"""MPI probe for the virtual-cluster tests (mpi4py + stdlib: runs under mpirun on the hosts).

    mpirun ... python mpi_probe.py NBYTES [SECONDS_TO_HANG]

Every rank prints one JSON line: rank, size, hostname, processor name. Rank 0 sends NBYTES
to every other rank and gets them back (so each host's link carries >= 2*NBYTES), then all
meet in a Barrier. With SECONDS_TO_HANG, the ranks then keep exchanging messages for that
long (a running job to inject faults into).
"""

import json
import socket
import sys
import time

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
nbytes = int(sys.argv[1])
hang = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
buf = bytearray(nbytes)
comm.Barrier()
if rank == 0:
    for peer in range(1, size):
        comm.Send([buf, MPI.BYTE], dest=peer)
        comm.Recv([buf, MPI.BYTE], source=peer)
else:
    comm.Recv([buf, MPI.BYTE], source=0)
    comm.Send([buf, MPI.BYTE], dest=0)
comm.Barrier()
print(
    json.dumps(
        {
            "rank": rank,
            "size": size,
            "hostname": socket.gethostname(),
            "processor": MPI.Get_processor_name(),
            "bytes": nbytes,
        }
    ),
    flush=True,
)
end = time.monotonic() + hang
small = bytearray(65536)
while time.monotonic() < end:
    comm.Allreduce(MPI.IN_PLACE, [small, MPI.BYTE], op=MPI.BOR)
comm.Barrier()
