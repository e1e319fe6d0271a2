"""What discovery needs that sysfs does not hold: the interfaces' addresses (`ip -j addr
show`) and the ports' active MTUs (`ibv_devinfo`; the kernel keeps them in verbs, not sysfs).
Read live for /sys, or from the files recorded beside a tree (fabrics/snapshot.py writes them).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

LIVE_SYSFS = Path("/sys")
IP_ADDR_FILE = "ip-addr.json"  # recorded `ip -j addr show`, next to the tree's sys/
IBV_DEVINFO_FILE = "ibv_devinfo.txt"  # optional recorded `ibv_devinfo` output


def ib_mtu_from_enum(value: int) -> int | None:
    """IB MTU enum 1..5 -> 256..4096 bytes."""
    return 128 << value if 1 <= value <= 5 else None


def _parse_ip_json(text: str) -> dict[str, tuple[str, ...]]:
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    out: dict[str, tuple[str, ...]] = {}
    if not isinstance(data, list):
        return {}
    for link in data:
        if not isinstance(link, dict) or not isinstance(link.get("ifname"), str):
            continue
        addrs = []
        for info in link.get("addr_info") or []:
            if isinstance(info, dict) and isinstance(info.get("local"), str):
                addrs.append(info["local"])
        out[link["ifname"]] = tuple(addrs)
    return out


def tool_output(argv: list[str]) -> str | None:
    """A host tool's stdout (ip, ibv_devinfo; 5 s at most); None when it is missing or fails."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def is_live(root: Path) -> bool:
    """Whether `root` is this host's /sys (not a recorded tree)."""
    try:
        return root.resolve() == LIVE_SYSFS.resolve()
    except OSError:
        return False


def read_addresses(sysfs_root: Path) -> dict[str, tuple[str, ...]] | None:
    """Addresses per interface: recorded ip-addr.json beside the tree, or `ip -j addr show`;
    None when they cannot be known (a tree recorded without the file, no `ip` here)."""
    recorded = sysfs_root.parent / IP_ADDR_FILE
    if recorded.is_file():
        try:
            return _parse_ip_json(recorded.read_text(errors="replace"))
        except OSError:
            return None
    if is_live(sysfs_root):
        out = tool_output(["ip", "-j", "addr", "show"])
        return _parse_ip_json(out) if out else None
    return None


_HCA_RE = re.compile(r"^hca_id:\s*(\S+)")
_PORT_RE = re.compile(r"^\s*port:\s*(\d+)")
_MTU_RE = re.compile(r"^\s*active_mtu:\s*\S+\s*\((\d+)\)")


def parse_ibv_devinfo(text: str) -> dict[tuple[str, int], int]:
    """(device, port) -> active MTU in bytes, from `ibv_devinfo` output (devinfo.c format)."""
    out: dict[tuple[str, int], int] = {}
    dev: str | None = None
    port: int | None = None
    for line in text.splitlines():
        if m := _HCA_RE.match(line):
            dev, port = m.group(1), None
        elif m := _PORT_RE.match(line):
            port = int(m.group(1))
        elif (m := _MTU_RE.match(line)) and dev is not None and port is not None:
            mtu = ib_mtu_from_enum(int(m.group(1)))
            if mtu is not None:
                out[(dev, port)] = mtu
    return out


def read_ibv_devinfo(sysfs_root: Path, have_devices: bool) -> dict[tuple[str, int], int]:
    """Active MTUs are only in verbs (ibv_query_port), not sysfs: use ibv_devinfo if we can."""
    recorded = sysfs_root.parent / IBV_DEVINFO_FILE
    if recorded.is_file():
        try:
            return parse_ibv_devinfo(recorded.read_text(errors="replace"))
        except OSError:
            return {}
    if have_devices and is_live(sysfs_root):
        out = tool_output(["ibv_devinfo"])
        return parse_ibv_devinfo(out) if out else {}
    return {}
