"""MPI stack (mpi4py over Open MPI or MPICH): OSU-style benchmarks and conformance."""
