"""`hpccomm doctor [PYTEST ARGS]`: what this machine offers (fabrics, devices, stacks and their
versions, MPI environments, permissions for namespaces and guests) and, for each suite, how
many items would run and which would skip and why, without running a test.

The skip reasons are the suites' own: doctor is a pytest session of the suites that collects
only (`--collect-only`), with this module as a plugin reading each item's skip as the plugin
marked it at collection (fabric, stack, root), what each stack foresees of its fixtures' skips
(pytest_hpccomm_foreseen_skip: undefined points, placements the fabric cannot take), and the
virtual cluster's reason for the items placed on it. What a fixture finds only when it
starts (a build that fails, a peer that dies, an RDMA device's attributes) shows in a real
run."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm.nightly import STACKS, SUITES


def suite_of(item: pytest.Item) -> str:
    """The suite (stack folder) an item is in: its module's package below the suites."""
    module = getattr(item, "module", None)
    name = getattr(module, "__name__", "") or ""
    if name.startswith(f"{SUITES}.") and name.count(".") >= 2:
        return name.split(".")[1]
    return Path(str(item.path)).parent.name


def item_skip(item: pytest.Item) -> str | None:
    """Why the item would skip before its test runs: the plugin's collection-time skip, else
    what its stack foresees of its fixtures' skips (pytest_hpccomm_foreseen_skip), else the
    virtual cluster's reason for an item placed on it."""
    mark = item.get_closest_marker("skip")
    if mark is not None:
        return str(mark.kwargs.get("reason", mark.args[0] if mark.args else "skipped"))
    foreseen = item.config.hook.pytest_hpccomm_foreseen_skip(item=item)
    if foreseen:
        return str(foreseen)
    callspec = getattr(item, "callspec", None)
    if callspec is not None and callspec.params.get("hpc_placement") == "netns":
        from pytest_hpccomm.cluster.virtual import unavailable_reason

        reason = unavailable_reason()
        if reason:
            return f"virtual cluster unavailable: {reason}"
    return None


class Doctor:
    """The doctor's pytest plugin (an object handed to pytest.main: nothing to import)."""

    def __init__(self) -> None:
        self.runs: Counter[str] = Counter()
        self.skips: dict[str, Counter[str]] = defaultdict(Counter)
        self.config: pytest.Config | None = None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # after every plugin's pytest_collection_modifyitems: their skips are all marked
        self.config = session.config
        for item in session.items:
            suite, reason = suite_of(item), item_skip(item)
            if reason is None:
                self.runs[suite] += 1
            else:
                self.skips[suite][reason] += 1

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        tr = terminalreporter
        tr.write_sep("=", "hpccomm doctor: this machine")
        for line in machine_lines(config):
            tr.write_line(line)
        tr.write_sep("=", "hpccomm doctor: the suites")
        for suite in sorted(set(self.runs) | set(self.skips)):
            skips = self.skips.get(suite, Counter())
            tr.write_line(
                f"{suite}: {self.runs.get(suite, 0)} would run, {sum(skips.values())} would skip"
            )
            for reason, n in skips.most_common():
                tr.write_line(f"  skip {n:4d}: {reason}")
        if not self.runs and not self.skips:
            tr.write_line("nothing collected")


def machine_lines(config: pytest.Config) -> list[str]:
    """Fabrics, devices, stacks, MPI environments, permissions: one line each."""
    from pytest_hpccomm.cluster.mpi import MPI_ENVS, mpirun_path
    from pytest_hpccomm.cluster.virtual import unavailable_reason
    from pytest_hpccomm.fabrics import FabricSelection, probes
    from pytest_hpccomm.session import hpc_session_of

    hpc = hpc_session_of(config)
    inv = hpc.inventory
    out = [
        f"session fabric: {hpc.fabric_kind}: "
        + (
            hpc.selection.description
            if isinstance(hpc.selection, FabricSelection)
            else hpc.selection.reason
        )
    ]
    out.append(
        "RDMA devices: " + (", ".join(f"{d.name} ({d.driver or '?'})" for d in inv.rdma) or "none")
    )
    out.append("network interfaces: " + (", ".join(n.name for n in inv.netdevs) or "none"))
    for probe in probes():
        got = probe.select(inv, hpc.cfg.device, hpc.cfg.netdev)
        out.append(
            f"fabric {probe.kind}: "
            + (got.description if isinstance(got, FabricSelection) else got.reason)
        )
    for name, stack in sorted(hpc.stacks.items()):
        why = stack.unavailable_reason()
        versions = ", ".join(f"{k} {v}" for k, v in sorted(stack.versions().items()))
        out.append(
            f"stack {name}: " + (why or "available" + (f" ({versions})" if versions else ""))
        )
    for name in MPI_ENVS:
        path = mpirun_path(name)
        out.append(
            f"MPI environment {name}: "
            + (str(path) if path else f"missing (hpccomm setup mpi-{name})")
        )
    out.append(f"user: uid {os.geteuid()}" + (" (root)" if os.geteuid() == 0 else ""))
    out.append("network namespaces (virtual cluster): " + (unavailable_reason() or "available"))
    qemu = shutil.which("qemu-system-x86_64")
    out.append(
        "RDMA guests (a checkout's ci/guest, TCG unless --accel kvm): "
        + (f"QEMU {qemu}" if qemu else "no qemu-system-x86_64 on PATH")
    )
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hpccomm doctor",
        description=__doc__.split("\n\n")[0],
        allow_abbrev=False,
        epilog="Other arguments go to pytest (e.g. --hpc-fabric, --hpc-mpi, -m).",
    )
    p.add_argument(
        "--suite",
        action="append",
        default=[],
        metavar="NAME",
        help="a suite to look at (repeatable; a stack or a module); default: all",
    )
    return p


def command_line(argv: list[str]) -> list[str]:
    """The pytest command line of `hpccomm doctor ARGV` (without the interpreter)."""
    p = build_parser()
    args, rest = p.parse_known_args(argv)
    targets = [f"{SUITES}.{t}" if t in STACKS else t for t in args.suite] or [SUITES]
    return ["--collect-only", "-qq", "-p", "no:cacheprovider", *rest, "--pyargs", *targets]


def main(argv: list[str] | None = None) -> int:
    code = int(
        pytest.main(command_line(list(sys.argv[1:] if argv is None else argv)), plugins=[Doctor()])
    )
    return 0 if code == pytest.ExitCode.NO_TESTS_COLLECTED else code


if __name__ == "__main__":
    raise SystemExit(main())
