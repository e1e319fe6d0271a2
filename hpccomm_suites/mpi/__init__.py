"""MPI: conformance properties of mpi4py peers and the OSU benchmarks as perf points
(docs/stacks/mpi.md)."""
