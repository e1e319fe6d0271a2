"""One Hypothesis rule for every stack (pytest_hpccomm/properties.py): quick runs are
derandomized without a database, full runs random with the default one, no deadline, one shrunk bug with
its blob; each stack's settings follow it and differ only in examples and health checks, and
no other module of the package builds settings with a deadline of its own."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from pytest_hpccomm.properties import property_settings
from pytest_hpccomm.stacks.grpc.conformance import property_settings as grpc_settings
from pytest_hpccomm.stacks.horovod import conformance as hvd
from pytest_hpccomm.stacks.mpi import conformance as mpi
from pytest_hpccomm.stacks.verbs.links import property_settings as verbs_settings

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_hpccomm"


def _grpc(examples: int, quick: bool, plant: str = "") -> settings:
    opts: Any = type("Opts", (), {"examples": examples, "quick": quick, "plant_bug": plant})()
    return grpc_settings(opts)


def _registered(module: Any, profile: str) -> settings:
    try:
        return module.register_settings(profile)  # type: ignore[no-any-return]
    finally:
        module.register_settings("quick")  # the default the suites import with


@pytest.mark.parametrize(
    "make",
    [
        lambda quick: property_settings(10, quick),
        lambda quick: _grpc(10, quick),
        lambda quick: verbs_settings(False, quick),
        lambda quick: _registered(mpi, "quick" if quick else "full"),
        lambda quick: _registered(hvd, "quick" if quick else "full"),
    ],
    ids=["core", "grpc", "verbs", "mpi", "horovod"],
)
def test_every_stack_follows_the_rule(make: Any) -> None:
    quick, full = make(True), make(False)
    for s in (quick, full):
        assert s.deadline is None and s.print_blob and not s.report_multiple_bugs
    assert quick.derandomize and quick.database is None
    # full: random, with the environment's default database (Hypothesis' own `ci` profile,
    # active where CI is set, has none)
    assert not full.derandomize
    assert (full.database is None) == (settings.default.database is None)
    assert full.max_examples >= quick.max_examples


def test_a_planted_bug_run_keeps_no_database() -> None:
    assert _grpc(10, False, plant="unary-drop").database is None


def _builds_settings(path: Path) -> bool:
    """Whether the module calls Hypothesis' settings(...) or register_profile(...) with a
    deadline or derandomize of its own."""
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        if name in ("settings", "register_profile") and any(
            k.arg in ("deadline", "derandomize") for k in node.keywords
        ):
            return True
    return False


def test_no_other_module_builds_its_own_rule() -> None:
    found = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name != "properties.py" and _builds_settings(p)
    ]
    assert found == [], f"Hypothesis settings built outside pytest_hpccomm/properties.py: {found}"
