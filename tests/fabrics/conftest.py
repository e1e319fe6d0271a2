"""A fixture that copies a recorded sysfs tree so a test can break it on purpose."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fabrics._fabric_trees import FIXTURES


@pytest.fixture
def tree_copy(tmp_path: Path) -> Callable[[str], Path]:
    """Copy a tree (symlinks kept as links) and return its sys/ root."""

    def copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(FIXTURES / name, dest, symlinks=True)
        return dest / "sys"

    return copy
