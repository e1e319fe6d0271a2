"""Time per group of the test command (setup + call + teardown of every item, summed by
directory: tests/<area>, tests/stacks/<stack>, hpccomm_suites/<stack>), printed at the end as the
main
job prints its time per stack, so a CI log shows where its budget goes."""

from __future__ import annotations

from collections import Counter

import pytest


def group_of(nodeid: str) -> str:
    parts = nodeid.split("::", 1)[0].split("/")
    depth = 3 if parts[:2] == ["tests", "stacks"] else 2
    return "/".join(parts[:depth]) if len(parts) > depth else "/".join(parts[:-1]) or parts[0]


class GroupTimes:
    def __init__(self) -> None:
        self.seconds: Counter[str] = Counter()
        self.items: Counter[str] = Counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        group = group_of(report.nodeid)
        self.seconds[group] += report.duration
        if report.when == "call" or (report.when == "setup" and report.skipped):
            self.items[group] += 1

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if len(self.seconds) < 2:
            return
        terminalreporter.write_sep("=", "test time per group (setup + call + teardown)")
        for group, secs in self.seconds.most_common():
            terminalreporter.write_line(
                f"{secs / 60:7.1f} min  {self.items[group]:5d} items  {group}"
            )


def register(config: pytest.Config) -> None:
    config.pluginmanager.register(GroupTimes(), "hpccomm-group-times")
