"""Undoing a virtual cluster (virtual.py): the manifest it writes before creating anything,
the teardown that deletes exactly what a manifest lists, and cleanup of the leftovers of
sessions that were killed before they could tear down.

Also the short management commands (ip/tc/nft) both sides run, with their error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from pytest_hpccomm.files import atomic_write
from pytest_hpccomm.proc import proctree

NETNS_RUN = Path("/run/netns")
NETNS_ETC = Path("/etc/netns")
_CMD_TIMEOUT = 30.0


class ClusterError(RuntimeError):
    """A command that manages the virtual cluster failed."""


def default_state_dir() -> Path:
    if os.geteuid() == 0:
        return Path("/run/pytest-hpccomm")
    return Path(f"/tmp/pytest-hpccomm-{os.getuid()}")


def run_command(argv: Sequence[str], *, input: str | None = None, check: bool = True) -> str:
    """One short management command (ip/tc/nft) with a timeout; raises ClusterError."""
    try:
        res = subprocess.run(
            list(argv), input=input, capture_output=True, text=True, timeout=_CMD_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise ClusterError(f"{' '.join(argv)}: no answer in {_CMD_TIMEOUT:.0f}s") from None
    if check and res.returncode != 0:
        raise ClusterError(f"{' '.join(argv)}: {res.stderr.strip() or res.returncode}")
    return res.stdout


def _netns_inode(ns: str) -> int | None:
    try:
        return (NETNS_RUN / ns).stat().st_ino
    except OSError:
        return None


def pids_in_netns(namespaces: Iterable[str]) -> list[int]:
    """PIDs living in the named namespaces (what `ip netns pids` prints, without a process
    per namespace: /proc/PID/ns/net names the namespace's inode)."""
    inodes = {i for i in (_netns_inode(ns) for ns in namespaces) if i is not None}
    if not inodes:
        return []
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}/ns/net").st_ino in inodes:
                    out.append(int(name))
            except OSError:
                pass
    return out


# -- manifest and teardown --------------------------------------------------------------------


def write_manifest(path: Path, data: Mapping[str, Any]) -> None:
    """Whole or not at all: a half-written manifest would leave its namespaces to nobody."""
    atomic_write(path, json.dumps(data, indent=1))


def teardown_manifest(m: Mapping[str, Any], grace: float = 1.0) -> list[str]:
    """Undo what manifest m lists, in order: processes, links, bridge, namespaces, files.
    Every step tolerates things already gone; returns the problems met (empty if clean)."""
    problems: list[str] = []
    namespaces: list[str] = list(m.get("netns", []))
    # 1. processes: those registered (job shims, which reap their own) and all in our netns
    procs = {proctree.Proc(pid, start) for pid, start in m.get("pids", [])}
    procs = {p for p in procs if proctree.alive(p)}
    for pid in pids_in_netns(namespaces):
        p = proctree.proc_of(pid)
        if p is not None:
            procs.add(p)
    if procs:
        left = proctree.terminate(procs, grace=grace)
        if left:
            problems.append(f"processes would not die: {sorted(p.pid for p in left)}")
    existing = set(run_command(["ip", "netns", "list"], check=False).split())
    # 2. links (deleting one veth end deletes its peer), then the bridge
    for ns, link in m.get("links", []):
        if ns in existing:
            run_command(["ip", "-n", ns, "link", "del", link], check=False)
    bridge: list[str] = m.get("bridge") or []
    if bridge and bridge[0] in existing:
        run_command(["ip", "-n", bridge[0], "link", "del", bridge[1]], check=False)
    # 3. namespaces
    for ns in namespaces:
        if ns in existing or (NETNS_RUN / ns).exists():
            try:
                run_command(["ip", "netns", "del", ns])
            except ClusterError as e:
                problems.append(str(e))
    # 4. files: /etc/netns/NS (our hosts table), the agent dir; the manifest last
    for ns in namespaces:
        d = NETNS_ETC / ns
        if d.is_dir():
            shutil.rmtree(d, ignore_errors=True)
    if m.get("created_netns_etc"):
        try:
            NETNS_ETC.rmdir()  # only if empty: another cluster may be using it
        except OSError:
            pass
    work = m.get("workdir")
    if work:
        shutil.rmtree(work, ignore_errors=True)
    return problems


def _owner_alive(m: Mapping[str, Any]) -> bool:
    owner: list[int] = m.get("owner") or []
    return bool(owner) and proctree.alive(proctree.Proc(int(owner[0]), int(owner[1])))


def cleanup_leftovers(state_dir: str | os.PathLike[str] | None = None) -> list[str]:
    """Tear down clusters whose owning process is gone (a killed earlier run), from their
    manifests in state_dir; touches nothing a manifest does not list. Returns their prefixes."""
    d = Path(state_dir) if state_dir is not None else default_state_dir()
    cleaned = []
    for path in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            m = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if m.get("kind") != "pytest-hpccomm-virtual-cluster" or _owner_alive(m):
            continue
        teardown_manifest(m)
        path.unlink(missing_ok=True)
        cleaned.append(str(m.get("prefix")))
    return cleaned
