"""Every stack's folder names its modules by the same roles (docs/explanation/architecture.md,
"Role names"): a plugin, the implementation (env), the driver, the measured points (perf), the
names both sides share (wire) and the host side (peer/, its program peer/__main__.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

STACKS = Path(__file__).resolve().parents[2] / "pytest_hpccomm" / "stacks"
ROLES = ("plugin", "env", "driver", "perf", "wire", "peer/__main__")


@pytest.mark.parametrize("stack", ["grpc", "horovod", "mpi", "tf", "verbs"])
def test_the_stack_has_every_role(stack: str) -> None:
    missing = [r for r in ROLES if not (STACKS / stack / f"{r}.py").is_file()]
    assert missing == [], f"stacks/{stack} lacks {missing} (architecture.md, Role names)"


def test_every_stack_folder_is_listed() -> None:
    found = sorted(p.name for p in STACKS.iterdir() if (p / "plugin.py").is_file())
    assert found == ["grpc", "horovod", "mpi", "tf", "verbs"]
