"""Synthetic RunResults for the report tests: verdicts are constructed directly (fakes of the
verdict engine), because the reports only present what the engine decided."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from pytest_hpccomm.baselines.result import RunResult
from tests.builders import make_result
from tests.report.demo import demo_results, demo_session

MakeResult = Callable[..., RunResult]


@pytest.fixture
def result() -> MakeResult:
    return make_result


@pytest.fixture(scope="session")
def demo() -> list[RunResult]:
    return demo_results()


@pytest.fixture
def session() -> dict[str, Any]:
    return demo_session()
