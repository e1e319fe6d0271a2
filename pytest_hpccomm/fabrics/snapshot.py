"""Record the sysfs subset that fabric discovery reads into a new fixture tree.

    hpccomm snapshot DEST [--sysfs-root /sys]

DEST/sys/... mirrors the kernel's layout (class entries stay relative symlinks into devices/),
DEST/ip-addr.json holds `ip -j addr show`, DEST/ibv_devinfo.txt the output of `ibv_devinfo`
when there are RDMA devices and the tool is installed.  The tree contains this host's MAC
addresses, GUIDs and IP addresses: review it before you contribute it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from pytest_hpccomm.fabrics.not_in_sysfs import (
    IBV_DEVINFO_FILE,
    IP_ADDR_FILE,
    LIVE_SYSFS,
    is_live,
    tool_output,
)
from pytest_hpccomm.fabrics.sysfs import is_empty_gid, listdir

# Only what discovery (sysfs.py) or rdma-core (libibverbs, libibumad) reads.
IB_DEVICE_ATTRS = (
    "node_type",
    "node_guid",
    "sys_image_guid",
    "fw_ver",
    "hca_type",
    "board_id",
    "parent",
)
IB_PORT_ATTRS = (
    "state",
    "phys_state",
    "link_layer",
    "rate",
    "lid",
    "sm_lid",
    "lid_mask_count",
    "sm_sl",
    "cap_mask",
)
PCI_ATTRS = ("vendor", "device", "modalias")
NET_ATTRS = ("type", "operstate", "mtu", "speed", "address", "flags", "dev_port", "mode")


class _Snapshot:
    def __init__(self, root: Path, dest: Path) -> None:
        self.root = root
        self.root_real = root.resolve()
        self.out = dest / "sys"
        self.written = 0  # files and links recorded

    def _rel(self, path: Path) -> Path | None:
        """Path inside the tree of a real (resolved) sysfs path; None if it leaves the root."""
        try:
            return path.relative_to(self.root_real)
        except ValueError:
            return None

    def copy_file(self, path: Path) -> None:
        rel = self._rel(path)
        if rel is None or not path.is_file():
            return
        try:
            data = path.read_bytes()
        except OSError:
            return  # unreadable attributes (EINVAL, EOPNOTSUPP) are left out, as discovery expects
        target = self.out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        self.written += 1

    def copy_link(self, link: Path) -> Path | None:
        """Recreate a symlink with its (relative) target; returns where it resolves to. A
        plain directory where the kernel puts a symlink (trees copied without links, some
        container sysfs views) is recorded as a directory: returns itself."""
        if not link.is_symlink():
            if link.is_dir() and self._rel(link.resolve()) is not None:
                self.written += 1  # its attributes follow; the entry itself is the directory
                return link.resolve()
            return None
        rel = self._rel(link.parent.resolve() / link.name)
        if rel is None:
            return None
        target = os.readlink(link)
        if os.path.isabs(target):
            abs_rel = self._rel(Path(target))
            if abs_rel is None:
                return None
            target = os.path.relpath(self.root_real / abs_rel, (self.root_real / rel).parent)
        dest = self.out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.is_symlink():
            os.symlink(target, dest)
            self.written += 1
        resolved = link.resolve()
        return resolved if self._rel(resolved) is not None else None

    def copy_attrs(self, directory: Path, names: tuple[str, ...]) -> None:
        for name in names:
            self.copy_file(directory / name)

    def copy_netdev(self, name: str) -> None:
        real = self.copy_link(self.root / "class" / "net" / name)
        if real is None or not real.is_dir():
            return
        self.copy_attrs(real, NET_ATTRS)
        device = self.copy_link(real / "device")
        if device is not None:
            self.copy_link(device / "driver")

    def copy_ibdev(self, name: str) -> None:
        real = self.copy_link(self.root / "class" / "infiniband" / name)
        if real is None or not real.is_dir():
            return
        self.copy_attrs(real, IB_DEVICE_ATTRS)
        device = self.copy_link(real / "device")
        if device is not None:
            self.copy_attrs(device, PCI_ATTRS)
            self.copy_link(device / "driver")
        for port in listdir(real / "ports"):
            pdir = real / "ports" / port
            self.copy_attrs(pdir, IB_PORT_ATTRS)
            self.copy_file(pdir / "pkeys" / "0")
            for idx in listdir(pdir / "gids"):
                gid = pdir / "gids" / idx
                try:
                    empty = is_empty_gid(gid.read_text())
                except OSError:
                    empty = False
                if empty:
                    continue  # empty table entries: hundreds of them say nothing
                self.copy_file(gid)
                self.copy_file(pdir / "gid_attrs" / "types" / idx)
                self.copy_file(pdir / "gid_attrs" / "ndevs" / idx)


def snapshot(dest: Path, sysfs_root: Path = LIVE_SYSFS) -> Path:
    """Write a fixture tree for `sysfs_root` into `dest` (which must be new or empty)."""
    root = Path(sysfs_root)
    if not root.is_dir():
        raise ValueError(f"sysfs root {root} does not exist or is not a directory")
    if dest.exists() and any(dest.iterdir()):
        raise ValueError(f"destination {dest} is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    rec = _Snapshot(root, dest)
    rec.out.mkdir()
    ibdevs = listdir(root / "class" / "infiniband")
    if (root / "class" / "infiniband").is_dir():
        (rec.out / "class" / "infiniband").mkdir(parents=True, exist_ok=True)
    for name in ibdevs:
        rec.copy_ibdev(name)
    for name in listdir(root / "class" / "net"):
        rec.copy_netdev(name)
    if rec.written == 0:
        shutil.rmtree(dest)  # an empty recording is no fixture: say so, leave nothing behind
        raise ValueError(
            f"nothing to record under {root}: no readable entry in class/infiniband or class/net"
        )
    live = is_live(root)
    for fname, argv in (
        (IP_ADDR_FILE, ["ip", "-j", "addr", "show"]),
        (IBV_DEVINFO_FILE, ["ibv_devinfo"]),
    ):
        source = root.parent / fname
        if not live and source.is_file():
            shutil.copyfile(source, dest / fname)
        elif live and (fname == IP_ADDR_FILE or ibdevs):
            out = tool_output(argv)
            if out:
                (dest / fname).write_text(out if out.endswith("\n") else out + "\n")
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="hpccomm snapshot",
        description="Record this host's RDMA/network sysfs subset as a fixture tree. "
        "The result holds MAC, GUID and IP addresses: review before sharing.",
    )
    parser.add_argument("dest", type=Path, help="new directory for the tree")
    parser.add_argument("--sysfs-root", type=Path, default=LIVE_SYSFS)
    args = parser.parse_args(argv)
    try:
        out = snapshot(args.dest, args.sysfs_root)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"recorded {args.sysfs_root} into {out}/sys")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
