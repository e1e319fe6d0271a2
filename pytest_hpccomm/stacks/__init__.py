"""Stacks under test: one folder each (peer program + orchestrator-side driver).

Imports nothing: peers run as `python -m pytest_hpccomm.stacks.<stack>.peer` and must not pull
orchestrator code in through this package (peer rule). Each stack's plugin registers
its own probe (hook pytest_hpccomm_stack_probes); no list of stacks lives in the core.
"""
