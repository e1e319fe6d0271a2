"""Paths and helpers for the recorded sysfs trees in fixtures/sysfs."""

from __future__ import annotations

from pathlib import Path

from pytest_hpccomm.fabrics.sysfs import Inventory, read_inventory

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
TREES = sorted(p.name for p in FIXTURES.iterdir() if (p / "sys").is_dir())


def inventory(name: str) -> Inventory:
    return read_inventory(FIXTURES / name / "sys")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink():
        path.unlink()
    path.write_text(text)
