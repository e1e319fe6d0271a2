"""Unused table entries and odd trees: empty GIDs, class entries that are plain directories,
recordings that find nothing (issue 15, fabric discovery on real recorded host trees)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_hpccomm.fabrics.snapshot import main, snapshot
from pytest_hpccomm.fabrics.sysfs import is_empty_gid, read_inventory
from tests.fabrics._fabric_trees import FIXTURES

MLX5_PORT = "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/infiniband/mlx5_0/ports/1"


@pytest.mark.parametrize(
    ("text", "empty"),
    [
        ("0000:0000:0000:0000:0000:0000:0000:0000", True),
        ("fe80:0000:0000:0000:0000:0000:0000:0000", True),  # mlx4/mlx5 IB: default prefix, no ID
        ("fe80:0000:0000:0000:0c42:a103:0012:3456", False),  # the port GUID as interface ID
        ("5254:0012:3456:0000:0000:0000:0000:0000", False),  # siw: the MAC followed by zeros
        ("0000:0000:0000:0000:0000:ffff:c000:0202", False),  # RoCE v2, IPv4-mapped
        ("not a gid", True),
        ("", True),
    ],
)
def test_empty_gid(text: str, empty: bool) -> None:
    assert is_empty_gid(text) is empty


def connectx3_like(tmp_path: Path) -> Path:
    """The EDR tree with the GID table a ConnectX-3 IB port shows: 128 entries, every one
    after the first fe80:: with a zero interface ID."""
    root = tmp_path / "sys"
    shutil.copytree(FIXTURES / "ib-edr-mlx5" / "sys", root, symlinks=True)
    gids = root / MLX5_PORT / "gids"
    for i in range(1, 128):
        (gids / str(i)).write_text("fe80:0000:0000:0000:0000:0000:0000:0000\n")
    return root


def test_empty_gids_are_not_counted_nor_recorded(tmp_path: Path) -> None:
    root = connectx3_like(tmp_path)
    port = read_inventory(root).rdma[0].ports[0]
    assert [g.index for g in port.gids] == [0]
    out = snapshot(tmp_path / "rec", root)
    assert sorted(p.name for p in (out / "sys" / MLX5_PORT / "gids").iterdir()) == ["0"]


def test_class_entries_that_are_plain_directories_are_recorded(tmp_path: Path) -> None:
    root = tmp_path / "sys"
    eth = root / "class" / "net" / "eth0"  # a directory where the kernel puts a symlink
    eth.mkdir(parents=True)
    for name, value in (
        ("type", "1"),
        ("operstate", "up"),
        ("mtu", "1500"),
        ("address", "52:54:00:12:34:56"),
        ("flags", "0x1003"),
    ):
        (eth / name).write_text(value + "\n")
    out = snapshot(tmp_path / "rec", root)
    assert (out / "sys" / "class" / "net" / "eth0" / "operstate").read_text() == "up\n"
    assert (
        [n.name for n in read_inventory(out / "sys").netdevs]
        == [n.name for n in read_inventory(root).netdevs]
        == ["eth0"]
    )


def test_a_recording_of_nothing_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "sys" / "class" / "net").mkdir(parents=True)
    assert main([str(tmp_path / "rec"), "--sysfs-root", str(tmp_path / "sys")]) == 2
    err = capsys.readouterr()
    assert "nothing to record under" in err.err and "recorded" not in err.out
    assert not (tmp_path / "rec").exists()
