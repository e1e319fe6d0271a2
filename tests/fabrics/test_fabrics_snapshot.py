"""Recording a host's sysfs subset and reading it back gives the same inventory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_hpccomm.fabrics import FabricSelection, select_fabric
from pytest_hpccomm.fabrics.snapshot import main, snapshot
from pytest_hpccomm.fabrics.sysfs import read_inventory
from tests.fabrics._fabric_trees import FIXTURES, TREES


def test_snapshot_live_sysfs_round_trips(tmp_path: Path) -> None:
    out = snapshot(tmp_path / "live")
    assert (out / "sys" / "class" / "net" / "lo").is_symlink()
    assert read_inventory(out / "sys") == read_inventory()
    if shutil.which("ip"):
        assert (out / "ip-addr.json").is_file()
    sel = select_fabric(read_inventory(out / "sys"), "ethernet")
    assert isinstance(sel, FabricSelection)
    for dirpath, dirnames, filenames in os.walk(out):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                assert not os.path.isabs(os.readlink(path)), path  # never into the live /sys


@pytest.mark.parametrize("tree", TREES)
def test_snapshot_of_a_recorded_tree_round_trips(tmp_path: Path, tree: str) -> None:
    out = snapshot(tmp_path / tree, FIXTURES / tree / "sys")
    assert read_inventory(out / "sys") == read_inventory(FIXTURES / tree / "sys")
    recorded = FIXTURES / tree / "ip-addr.json"
    if recorded.exists():
        assert (out / "ip-addr.json").read_bytes() == recorded.read_bytes()
    else:  # addresses unknown stay unknown: nothing is made up
        assert not (out / "ip-addr.json").exists()


def test_snapshot_refuses_a_non_empty_destination(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("keep me")
    with pytest.raises(ValueError, match="not empty"):
        snapshot(tmp_path)


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "bad"), "--sysfs-root", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_hpccomm.fabrics.snapshot",
            str(tmp_path / "t"),
            "--sysfs-root",
            str(FIXTURES / "softroce-rxe" / "sys"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert read_inventory(tmp_path / "t" / "sys").rdma[0].driver == "rxe"
