"""The one peer-environment builder: what a peer starts with, and in which order."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import pytest_hpccomm
from pytest_hpccomm.cluster.peer_env import PROJECT_ROOT, peer_env

ROOT = str(Path(pytest_hpccomm.__file__).resolve().parents[1])


def test_project_root_is_the_checkout() -> None:
    assert str(PROJECT_ROOT) == ROOT and (PROJECT_ROOT / "pytest_hpccomm").is_dir()


def test_without_inherit_only_the_peer_variables_then_extras_in_order() -> None:
    """What MPI launchers get (they lay it over os.environ themselves)."""
    got = peer_env({"B": "2", "A": "1"})
    assert list(got.items()) == [
        ("PYTHONPATH", ROOT),
        ("PYTHONDONTWRITEBYTECODE", "1"),
        ("B", "2"),
        ("A", "1"),
    ]
    assert peer_env() == {"PYTHONPATH": ROOT, "PYTHONDONTWRITEBYTECODE": "1"}


def test_inherit_keeps_the_environment_and_puts_the_root_first_on_pythonpath(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setenv("HPCCOMM_TEST_KEPT", "yes")
    got = peer_env({"HPCCOMM_CONTROL_X": "1"}, inherit=True)
    assert got["PYTHONPATH"] == os.pathsep.join([ROOT, "/elsewhere"])
    assert got["HPCCOMM_TEST_KEPT"] == "yes" and got["PYTHONDONTWRITEBYTECODE"] == "1"
    assert list(got)[-1] == "HPCCOMM_CONTROL_X"  # extras last
    monkeypatch.delenv("PYTHONPATH")
    assert peer_env(inherit=True)["PYTHONPATH"] == ROOT
