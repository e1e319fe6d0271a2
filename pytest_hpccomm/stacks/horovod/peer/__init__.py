"""The horovod stack's host side: the peer programs that run on the hosts (`__main__`: `python -m
pytest_hpccomm.stacks.horovod.peer`) and what only they import. The peer rule holds here: nothing
of pytest, Hypothesis or the orchestrator (docs/explanation/architecture.md, "Two sides")."""
