"""Horovod stack: collectives through Horovod's own runtime (MPI and Gloo controllers)."""
