"""Horovod (PyTorch binding): collectives conformance, allreduce and synthetic training perf
points (docs/stacks/horovod.md)."""
