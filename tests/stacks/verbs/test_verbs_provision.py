"""SoftRoCE / siw link provisioning against a fake sysfs and fake `rdma` / `modprobe` tools.

The fake `rdma link add` writes what the kernel would (class/infiniband/<dev> with `parent`,
port state and GIDs), so provision() and unprovision() run their real code paths, commands
and waits without a kernel module.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pytest_hpccomm.fabrics import provision as prov
from pytest_hpccomm.fabrics.sysfs import ARPHRD_ETHER, IFF_UP, Inventory, NetDev

FAKE_RDMA = r"""#!/bin/sh
# fake `rdma link add NAME type T netdev IF` / `rdma link delete NAME` over $FAKE_SYSFS
echo "rdma $*" >> "$FAKE_SYSFS/../commands.log"
[ "$1" = link ] || exit 2
dev="$FAKE_SYSFS/class/infiniband/$3"
case $2 in
  add)
    mkdir -p "$dev/ports/1/gids" "$dev/ports/1/gid_attrs/ndevs"
    echo "$7" > "$dev/parent"
    echo "4: ACTIVE" > "$dev/ports/1/state"
    echo "fe80:0000:0000:0000:5054:00ff:fe12:3456" > "$dev/ports/1/gids/0"
    [ -n "$FAKE_NO_GID" ] || echo "0000:0000:0000:0000:0000:ffff:c000:020f" > "$dev/ports/1/gids/1"
    ;;
  delete) rm -rf "$dev" ;;
  *) exit 2 ;;
esac
"""
FAKE_MODPROBE = r"""#!/bin/sh
echo "modprobe $*" >> "$FAKE_SYSFS/../commands.log"
[ -z "$FAKE_NO_MODULE" ]
"""


def netdev(name: str, addresses: tuple[str, ...] = ("192.0.2.15",), up: bool = True) -> NetDev:
    return NetDev(
        name=name,
        type=ARPHRD_ETHER,
        operstate="up" if up else "down",
        mtu=1500,
        speed_mbps=None,
        addresses=addresses,
        driver="virtio_net",
        flags=IFF_UP if up else 0,
    )


INV = Inventory(rdma=(), netdevs=(netdev("eth0"),))


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake live sysfs with fake tools on PATH, as root; returns the sysfs root."""
    sysfs = tmp_path / "sys"
    (sysfs / "class" / "infiniband").mkdir(parents=True)
    (sysfs / "module").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("rdma", FAKE_RDMA), ("modprobe", FAKE_MODPROBE)):
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SYSFS", str(sysfs))
    monkeypatch.setattr(prov, "LIVE_SYSFS", sysfs)
    monkeypatch.setattr(prov.os, "geteuid", lambda: 0)
    monkeypatch.setattr(prov, "READY_TIMEOUT", 1.0)
    return sysfs


def commands(sysfs: Path) -> list[str]:
    log = sysfs.parent / "commands.log"
    return log.read_text().splitlines() if log.exists() else []


def test_creates_the_link_and_removes_it(host: Path) -> None:
    made = prov.provision("softroce", INV, sysfs_root=host)
    assert made == prov.Provisioned("softroce", "rxe0", "eth0", created=True)
    assert "rdma link add rxe0 type rxe netdev eth0" in commands(host)
    assert (host / "class" / "infiniband" / "rxe0").is_dir()
    prov.unprovision(made)
    assert "rdma link delete rxe0" in commands(host)
    assert not (host / "class" / "infiniband" / "rxe0").exists()


def test_iwarp_creates_siw(host: Path) -> None:
    made = prov.provision("iwarp", INV, sysfs_root=host)
    assert (made.device, made.created) == ("siw0", True)
    assert "modprobe siw" in commands(host)
    assert "rdma link add siw0 type siw netdev eth0" in commands(host)


def test_an_existing_link_is_used_and_left_alone(host: Path) -> None:
    first = prov.provision("softroce", INV, sysfs_root=host)
    again = prov.provision("softroce", INV, sysfs_root=host)
    assert (again.device, again.created) == ("rxe0", False)
    prov.unprovision(again)
    assert (host / "class" / "infiniband" / "rxe0").is_dir(), "found link must stay"
    prov.unprovision(first)


def test_next_free_name_when_rxe0_is_taken(host: Path) -> None:
    (host / "class" / "infiniband" / "rxe0").mkdir()
    (host / "class" / "infiniband" / "rxe0" / "parent").write_text("eth9\n")
    made = prov.provision("softroce", INV, sysfs_root=host)
    assert made.device == "rxe1"


def test_link_without_a_roce_v2_ipv4_gid_is_removed_again(
    host: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NO_GID", "1")
    with pytest.raises(prov.ProvisionError, match="IPv4-mapped GID absent"):
        prov.provision("softroce", INV, sysfs_root=host)
    assert "rdma link delete rxe0" in commands(host)


def test_reasons_without_side_effects(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert prov.unavailable_reason("softroce", INV, sysfs_root=host) is None
    assert "hardware" in str(prov.unavailable_reason("ib", INV, sysfs_root=host))
    no_ip = Inventory(rdma=(), netdevs=(netdev("eth0", addresses=()),))
    assert "IPv4" in str(prov.unavailable_reason("softroce", no_ip, sysfs_root=host))
    assert "eth1" in str(prov.unavailable_reason("softroce", INV, "eth1", sysfs_root=host))
    monkeypatch.setenv("FAKE_NO_MODULE", "1")
    assert "rdma_rxe" in str(prov.unavailable_reason("softroce", INV, sysfs_root=host))
    (host / "module" / "rdma_rxe").mkdir()  # loaded: no modprobe needed
    assert prov.unavailable_reason("softroce", INV, sysfs_root=host) is None
    assert all(not c.startswith("rdma") for c in commands(host)), "a reason must not act"


def test_not_root_and_recorded_trees_are_reasons(
    host: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "recorded sysfs tree" in str(
        prov.unavailable_reason("softroce", INV, sysfs_root=tmp_path)
    )
    monkeypatch.setattr(prov.os, "geteuid", lambda: 1000)
    assert "needs root" in str(prov.unavailable_reason("softroce", INV, sysfs_root=host))
    with pytest.raises(prov.ProvisionError, match="needs root"):
        prov.provision("softroce", INV, sysfs_root=host)


def test_missing_rdma_tool_is_a_reason(host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prov.shutil, "which", lambda name: None)
    assert "rdma tool" in str(prov.unavailable_reason("iwarp", INV, sysfs_root=host))
