"""The process runner, the bottom layer: jobs with a timeout under a reaper shim (jobs.py,
_reaper.py), the process tree (proctree.py) and CPU accounting (cpu_share.py, outside_cpu.py:
the contention guard). It imports nothing of the package but the retry ledger."""
