"""pytest-hpccomm: correctness and performance-regression tests for HPC communication stacks."""

__version__ = "0.1.0"
