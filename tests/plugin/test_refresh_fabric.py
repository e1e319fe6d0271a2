"""HpcSession.refresh_fabric: after a stack plugin created a device (an rxe link), the session
selects it, and the fingerprint holds the new fabric's keys without the stale ones."""

from __future__ import annotations

import shutil
from pathlib import Path

from pytest_hpccomm import fingerprint as fp
from pytest_hpccomm.config import HpcConfig
from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable, select_fabric
from pytest_hpccomm.fabrics.sysfs import read_inventory
from pytest_hpccomm.session import HpcSession
from tests.fabrics._fabric_trees import FIXTURES


def test_refresh_selects_the_provisioned_device(tmp_path: Path) -> None:
    root = tmp_path / "sys"
    shutil.copytree(FIXTURES / "ethernet-plain" / "sys", root, symlinks=True)
    cfg = HpcConfig(fabric="softroce", sysfs_root=root)
    inventory = read_inventory(root)
    before = select_fabric(inventory, "softroce")
    assert isinstance(before, FabricUnavailable)
    hpc = HpcSession(
        cfg, inventory, before, {}, {"cpu_cores": 2, **fp.fabric_fingerprint(before)}, "box"
    )

    shutil.rmtree(root)  # the plugin provisioned an rxe link: sysfs now shows it
    shutil.copytree(FIXTURES / "softroce-rxe" / "sys", root, symlinks=True)
    after = hpc.refresh_fabric()

    assert isinstance(after, FabricSelection) and after.driver == "rxe"
    assert hpc.selection is after and hpc.fabric_kind == "softroce"
    assert "fabric_available" not in hpc.fingerprint
    assert hpc.fingerprint["driver"] == "rxe" and hpc.fingerprint["cpu_cores"] == 2
