"""`hpccomm run [PYTEST ARGS]`: the nightly, as an installed package runs it: every suite
(`--pyargs hpccomm_suites`, or the suites, modules or paths named) with the reports a CI
job keeps, in --out (results JSON, HTML report, markdown summary, JUnit XML). Other arguments
go to pytest untouched (--hpc-fabric, --hpc-system, --hpc-baselines, -k, -m, ...); the exit
status is pytest's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

SUITES = "hpccomm_suites"
STACKS = ("mpi", "grpc", "verbs", "horovod", "tf", "fabric")  # its subpackages


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hpccomm run",
        description=__doc__.split("\n\n")[0],
        allow_abbrev=False,
        epilog="Other arguments go to pytest.",
    )
    p.add_argument(
        "--out", type=Path, default=Path("results"), help="where the reports go (default ./results)"
    )
    p.add_argument(
        "--suite",
        action="append",
        default=[],
        metavar="NAME",
        help=f"a suite to run (repeatable): a stack (mpi, grpc, verbs, horovod, tf, "
        f"fabric), {SUITES}.STACK[.MODULE] or a path; default: every suite",
    )
    return p


def command_line(argv: list[str]) -> list[str]:
    """The pytest command line of `hpccomm run ARGV` (without the interpreter)."""
    p = build_parser()
    args, rest = p.parse_known_args(argv)
    targets = [f"{SUITES}.{t}" if t in STACKS else t for t in args.suite] or [SUITES]
    out = args.out
    reports = [
        f"--hpc-results={out / 'results.json'}",
        f"--hpc-report={out / 'report.html'}",
        f"--hpc-markdown={out / 'summary.md'}",
        f"--junitxml={out / 'junit.xml'}",
    ]
    given = {a.split("=", 1)[0] for a in rest if a.startswith("-")}
    reports = [r for r in reports if r.split("=", 1)[0] not in given]
    return [*reports, *rest, "--pyargs", *targets]


def main(argv: list[str] | None = None) -> int:
    import pytest

    return int(pytest.main(command_line(list(sys.argv[1:] if argv is None else argv))))


if __name__ == "__main__":
    raise SystemExit(main())
