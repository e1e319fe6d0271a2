"""Fixtures of the verbs conformance tests (in the style of rdma-core's tests/).

The pair of peers lives for the session (stacks/verbs/plugin.py); a test that expects an error
takes a fresh connection (`fresh_rc`), because an RC error moves both QPs to ERR. Tests that
expect success share one long-lived connection and its MRs (`rc`), re-made if it broke.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_hpccomm.stacks.verbs.driver import ALL_ACCESS, VerbsPair
from suites.verbs._links import Link, examples, make_link

_shared: dict[int, Link] = {}


@pytest.fixture
def rc(verbs_pair: VerbsPair) -> Link:
    """The session's long-lived RC link (re-made when a failed test left it in ERR)."""
    link = _shared.get(id(verbs_pair))
    if link is None or not link.healthy():
        if link is not None:
            link.close()
        link = _shared[id(verbs_pair)] = make_link(verbs_pair)
    return link


@pytest.fixture
def fresh_rc(verbs_pair: VerbsPair) -> Iterator[Any]:
    """make(b_access=...) -> a new Link that the test may break; closed afterwards."""
    made: list[Link] = []

    def make(b_access: tuple[str, ...] = ALL_ACCESS, length: int = 1 << 16) -> Link:
        link = make_link(verbs_pair, b_access, length)
        made.append(link)
        return link

    yield make
    for link in made:
        link.close()


@pytest.fixture
def verbs_examples(verbs_emulated: bool) -> int:
    return examples(verbs_emulated)
