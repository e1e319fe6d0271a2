"""Fixtures for the cluster tests: root/iproute2 check and leak check."""

from __future__ import annotations

from typing import Iterator

import pytest

from pytest_hpccomm.cluster.virtual import unavailable_reason
from tests.cluster.clusterkit import Snapshot


@pytest.fixture
def cluster_ok() -> None:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def no_leaks(cluster_ok: None) -> Iterator[Snapshot]:
    """Fails the test if it leaves namespaces, links, files, job processes or zombies."""
    before = Snapshot.take()
    yield before
    leaks = Snapshot.take().leaks_since(before)
    assert not leaks, "; ".join(leaks)
