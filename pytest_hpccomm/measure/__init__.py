"""Samples, statistics and the field's metric definitions (OSU, nccl-tests, perftest)."""
