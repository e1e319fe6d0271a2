"""MPI_Mprobe(MPI_ANY_SOURCE) matches a message whatever its size (MPI 4.1, 3.8.2). MPICH
3.4.3's ch4 device, over libfabric's tcp provider with shared memory between the ranks turned
off, aborts the job instead when the message is past the eager limit: "Assertion failed in
file src/mpid/common/genq/mpidu_genq_shmem_queue.h at line 260: 0 && "Invalid GenQ flag"". A
named source, MPI_Probe, or shared memory allowed, and MPICH 4.0.3 and later, are right (the
3.4.3.post1 wheel is the ch3 device). Needs mpi4py built against the MPI under test:

    FI_PROVIDER=tcp MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 mpirun -n 2 \\
        -genvlist FI_PROVIDER,MPIR_CVAR_CH4_NETMOD,MPIR_CVAR_NOLOCAL \\
        python mpich_wildcard_mprobe_abort.py     # the job aborts: the defect
"""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
n = 65536  # bytes: past the eager limit
if comm.Get_rank() == 1:
    comm.Send(np.ones(n, np.uint8), dest=0, tag=5)
elif comm.Get_rank() == 0:
    status = MPI.Status()
    msg = comm.Mprobe(MPI.ANY_SOURCE, MPI.ANY_TAG, status)
    buf = np.zeros(status.Get_count(MPI.BYTE), np.uint8)
    msg.Recv(buf)
    library = MPI.Get_library_version().splitlines()[0].strip()
    print(f"{library}: Mprobe(ANY_SOURCE) matched {buf.size} bytes", flush=True)
