"""The suites users run, installed with pytest-hpccomm beside the plugin (as ReFrame's
hpctestlib beside reframe): one subpackage per stack with its conformance and perf test
modules, run as ``pytest --pyargs hpccomm_suites[.STACK]`` (``hpccomm run``) or by path from a
checkout. Tests only: the fixtures they ask for come from the plugin."""

from pathlib import Path

DIR = Path(__file__).resolve().parent  # where the suites are (tests run them by path)
