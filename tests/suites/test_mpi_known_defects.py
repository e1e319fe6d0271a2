"""The MPI suites' known-defect keys take exactly the symptom observed, nothing near it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hpccomm_suites.mpi.test_conformance_p2p import mpich_persistent_proc_null

MPICH = "MPICH Version:      5.0.2\nMPICH Release date: Fri Sep 25 20:45:26 UTC 2026"
CONSTANTS = {"PROC_NULL": -1, "ANY_SOURCE": -2, "ANY_TAG": -1}
WANT = [-1, -1, 0, "abc"]


def peer(library: str = MPICH) -> Any:
    return SimpleNamespace(info=SimpleNamespace(library=library, constants=CONSTANTS))


def test_the_observed_mpich_symptom_is_keyed() -> None:
    """The run's values (MPICH 5.0.2, 2 and 3 ranks): Recv_init's status source -2."""
    why = mpich_persistent_proc_null(peer(), {"recv_init": [-2, -1, 0, "abc"]}, WANT)
    assert why is not None and "MPICH 5.0.2 defect" in why and "source -2" in why


def test_anything_else_stays_a_failure() -> None:
    cases: list[tuple[Any, dict[str, list[Any]]]] = [
        (peer("Open MPI v5.0.11"), {"recv_init": [-2, -1, 0, "abc"]}),  # not MPICH
        (peer(), {"recv_init": [-2, -1, 0, "xyz"]}),  # its buffer written too
        (peer(), {"recv_init": [-2, 0, 0, "abc"]}),  # a wrong tag too
        (peer(), {"recv_init": [3, -1, 0, "abc"]}),  # another wrong source
        (peer(), {"recv_init": [-2, -1, 0, "abc"], "irecv": [-2, -1, 0, "abc"]}),  # not alone
        (peer(), {"irecv": [-2, -1, 0, "abc"]}),  # another call
    ]
    for p, bad in cases:
        assert mpich_persistent_proc_null(p, bad, WANT) is None, bad
