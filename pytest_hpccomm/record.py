"""The recorder a test gets as `hpc_record`: judges a measurement (against its stored
baseline, or against the base build's in a paired A/B run), puts the numbers into JUnit
properties and fails the test on a regression. Its own module so stack plugins type it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.judging import BaselineJudge
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.session import HpcSession

JUDGE_KEY = pytest.StashKey[BaselineJudge]()


class Record:
    """record(measurement, runtime_fingerprint=None, base=None) -> RunResult: what the
    `hpc_record` fixture gives a test; record.all(measurements, ...) records several and fails
    once at the end; record.undecided(measurement, runtime_fingerprint)
    says whether more jobs could decide its verdict (adaptive repeats), recording nothing
    (stacks/contract.judge_point does both for a point of a pooled sweep)."""

    def __init__(
        self,
        request: pytest.FixtureRequest,
        hpc_session: HpcSession,
        record_property: Callable[[str, object], None],
    ) -> None:
        self.request, self.hpc_session, self.record_property = (
            request,
            hpc_session,
            record_property,
        )
        self.judge: BaselineJudge = request.config.stash[JUDGE_KEY]

    def __call__(
        self,
        m: Measurement,
        runtime_fingerprint: Mapping[str, Any] | None = None,
        base: Measurement | None = None,
    ) -> RunResult:
        from pytest_hpccomm.report.junit import junit_properties

        with _baseline_file_errors_fail():
            result = self.judge.judge(self.request.node.nodeid, m, runtime_fingerprint, base)
        for name, value in junit_properties(result):
            self.record_property(name, value)
        outcome = result.verdict.outcome
        if outcome is Outcome.REGRESSION:
            pytest.fail(result.verdict.message, pytrace=False)
        if outcome is Outcome.INCONCLUSIVE and self.hpc_session.cfg.strict:
            pytest.fail(f"{result.verdict.message} (--hpc-strict)", pytrace=False)
        return result

    def functional(
        self,
        m: Measurement,
        why: str,
        runtime_fingerprint: Mapping[str, Any] | None = None,
        base: Measurement | None = None,
    ) -> RunResult:
        """Report `m` without judging it (why: e.g. an emulated device); never a baseline.
        `base`: a paired run's base side of the same point, reported beside it."""
        from pytest_hpccomm.report.junit import junit_properties

        result = self.judge.functional(self.request.node.nodeid, m, why, runtime_fingerprint, base)
        for name, value in junit_properties(result):
            self.record_property(name, value)
        return result

    def all(
        self,
        ms: Sequence[Measurement],
        runtime_fingerprint: Mapping[str, Any] | None = None,
        bases: Sequence[Measurement | None] | None = None,
    ) -> None:
        """Record every measurement (each against its base, in a paired run); a regression in
        one fails the item only once all are recorded, naming every failed one."""
        failures = []
        for m, b in zip(ms, bases if bases is not None else [None] * len(ms), strict=True):
            try:
                self(m, runtime_fingerprint, b)
            except pytest.fail.Exception as exc:
                failures.append(str(exc))
        if failures:
            pytest.fail("\n".join(failures), pytrace=False)

    def undecided(
        self, m: Measurement, runtime_fingerprint: Mapping[str, Any] | None = None
    ) -> bool:
        with _baseline_file_errors_fail():
            return self.judge.undecided(m, runtime_fingerprint)


@contextmanager
def _baseline_file_errors_fail() -> Iterator[None]:
    from pytest_hpccomm.baselines.store import BaselineFileError

    try:
        yield
    except BaselineFileError as exc:
        pytest.fail(str(exc), pytrace=False)
