"""The coverage matrix: each cell's state from the markers and the taxonomy (a known answer on
a toy standard), the checks that catch a wrong declaration, and the MPI suites' declarations."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from pytest_hpccomm.coverage import (
    COVERED,
    GAP,
    NOT_APPLICABLE,
    OUT_OF_SCOPE,
    Declared,
    Taxonomy,
    cells,
    declared,
    markdown,
    matrix,
    problems,
)
from pytest_hpccomm.stacks.grpc.coverage import TAXONOMY as GRPC
from pytest_hpccomm.stacks.horovod.coverage import TAXONOMY as HOROVOD
from pytest_hpccomm.stacks.mpi.coverage import TAXONOMY as MPI
from pytest_hpccomm.stacks.tf.coverage import TAXONOMY as TF
from pytest_hpccomm.stacks.verbs.coverage import TAXONOMY as VERBS


def toy(out_of_scope: dict[tuple[str, str], str] | None = None) -> Taxonomy:
    return Taxonomy(
        stack="toy",
        title="Toy",
        families={"send": "Send", "barrier": "Barrier", "cart": "Cart_create"},
        classes={"plain": "ordinary", "zero": "count 0", "null": "PROC_NULL"},
        not_applicable=lambda f, c: "no count" if (f, c) == ("barrier", "zero") else None,
        out_of_scope=out_of_scope or {("cart", "null"): "no cartesian shift here"},
        modules=("toy_suite",),
    )


@pytest.fixture
def toy_suite() -> Iterator[str]:
    """A test module of two declared functions, one unmarked and one helper, importable."""
    mod = types.ModuleType("toy_suite")
    mod.__file__ = "/x/hpccomm_suites/toy/test_toy.py"

    @pytest.mark.covers("toy", *cells(["send"], ["plain", "zero"]))
    def test_send() -> None:
        """Sends arrive.

        More text."""

    @pytest.mark.covers("toy", "barrier:plain")
    @pytest.mark.covers("other", "send:null")  # another stack's cell: not this matrix's
    def test_barrier() -> None: ...

    def test_forgotten() -> None: ...

    def helper() -> None: ...

    for fn in (test_send, test_barrier, test_forgotten, helper):
        fn.__module__ = "toy_suite"
        setattr(mod, fn.__name__, fn)
    sys.modules["toy_suite"] = mod
    yield "toy_suite"
    del sys.modules["toy_suite"]


def test_every_cell_gets_one_state_by_the_rule(toy_suite: str) -> None:
    tests = list(declared("toy", [toy_suite]))
    assert [(t.nodeid.split("::")[1], t.cells, t.marked) for t in tests] == [
        ("test_barrier", (("barrier", "plain"),), True),
        ("test_forgotten", (), False),
        ("test_send", (("send", "plain"), ("send", "zero")), True),
    ]
    assert tests[2].summary == "Sends arrive."
    states = {(c.family, c.cls): c.state for c in matrix(toy(), tests)}
    assert states == {
        ("send", "plain"): COVERED,
        ("send", "zero"): COVERED,
        ("send", "null"): GAP,
        ("barrier", "plain"): COVERED,
        ("barrier", "zero"): NOT_APPLICABLE,
        ("barrier", "null"): GAP,
        ("cart", "plain"): GAP,
        ("cart", "zero"): GAP,
        ("cart", "null"): OUT_OF_SCOPE,
    }
    page = markdown(toy(), tests)
    assert "3 families x 3 argument classes: 3 covered, 1 n/a, 1 out of scope, 4 gap." in page
    assert "- cart:null: no cartesian shift here" in page
    assert "- send: null" in page and "- cart: plain, zero" in page


def test_a_wrong_declaration_is_a_problem(toy_suite: str) -> None:
    tests = list(declared("toy", [toy_suite]))
    assert problems(toy(), tests) == [
        "hpccomm_suites/toy/test_toy.py::test_forgotten: no covers('toy', ...) marker"
    ]
    bad = [
        Declared("t::a", "", (("sned", "plain"),)),
        Declared("t::b", "", (("send", "empty"),)),
        Declared("t::c", "", (("barrier", "zero"),)),
        Declared("t::d", "", (("cart", "null"),)),
    ]
    assert problems(toy(), bad) == [
        "t::a: unknown toy family 'sned'",
        "t::b: unknown argument class 'empty'",
        "t::c: barrier:zero is not applicable (no count)",
        "t::d: cart:null is covered but listed out of scope",
    ]
    assert problems(toy({("cart", "nul"): "typo"}), []) == ["out of scope: unknown cell cart:nul"]


@pytest.mark.parametrize("tax", [MPI, GRPC, HOROVOD, TF, VERBS], ids=lambda t: t.stack)
def test_the_suites_declare_known_applicable_cells(tax: Taxonomy) -> None:
    if tax is GRPC:
        pytest.importorskip("grpc")  # the gRPC suite imports grpcio
    tests = list(declared(tax.stack, tax.modules))
    assert tests, f"no test function found in the {tax.stack} conformance modules"
    assert problems(tax, tests) == []


def test_the_mpi_matrix_names_every_family_the_standard_has() -> None:
    """The rows are the standard's chapters; dropping one would hide its gaps."""
    for family in (
        "persistent",
        "mprobe",
        "alltoallw",
        "reduce_scatter_block",
        "exscan",
        "nonblocking_collectives",
        "persistent_collectives",
        "darray",
        "intercommunicators",
        "error_classes",
        "rma_pscw",
    ):
        assert family in MPI.families
