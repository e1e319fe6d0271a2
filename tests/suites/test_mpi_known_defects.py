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


OPEN_MPI = "Open MPI v5.0.11, package: Open MPI user@localhost Distribution, ident: 5.0.11"


def test_the_observed_open_mpi_accumulate_symptoms_are_keyed() -> None:
    """The run's values: BOR from the other process left [1000, 0, 7, -3]; BXOR zeroed it."""
    from hpccomm_suites.mpi.test_conformance_rma import INITIAL, open_mpi_remote_accumulate

    p = peer(OPEN_MPI)
    why = open_mpi_remote_accumulate(p, "BOR", "remote", list(INITIAL))
    assert why is not None and why.startswith("Open MPI v5.0.11 defect") and "unchanged" in why
    zeroed = open_mpi_remote_accumulate(p, "BXOR", "remote", [0, 0, 0, 0])
    assert zeroed is not None and "zeroed" in zeroed


def test_other_accumulate_failures_stay_failures() -> None:
    from hpccomm_suites.mpi.test_conformance_rma import INITIAL, open_mpi_remote_accumulate

    p = peer(OPEN_MPI)
    assert open_mpi_remote_accumulate(peer(), "BOR", "remote", list(INITIAL)) is None  # MPICH
    assert open_mpi_remote_accumulate(p, "BOR", "local", list(INITIAL)) is None  # own process
    assert open_mpi_remote_accumulate(p, "SUM", "remote", list(INITIAL)) is None  # arithmetic
    assert open_mpi_remote_accumulate(p, "BOR", "remote", [1000, 0, 7, 1]) is None  # other value
