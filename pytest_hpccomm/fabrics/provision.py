"""Provisioning of software RDMA links: SoftRoCE (rdma_rxe) and software iWARP (siw).

`--hpc-fabric=softroce` (or `iwarp`) on a host whose kernel has the module, with no such
device yet, creates one on a suitable netdev, as an operator would:

    rdma link add rxe0 type rxe netdev eth0        # siw0 type siw for iwarp

and removes what it created at the end of the session. `unavailable_reason()` answers, without
side effects, whether that is possible here: so collection can skip with the reason (no
module, not root, no `rdma` tool, no netdev with an IPv4 address) before anything is touched.

The verbs stack's session fixture calls these (stacks/verbs/plugin.py); nothing here imports
pytest. Every command runs as a job with a hard timeout (proc/jobs.py).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from pytest_hpccomm.fabrics.not_in_sysfs import LIVE_SYSFS
from pytest_hpccomm.fabrics.sysfs import ARPHRD_ETHER, Inventory, NetDev, read_attr
from pytest_hpccomm.proc.jobs import run_job


@dataclass(frozen=True)
class LinkType:
    kind: str  # fabric kind
    type: str  # `rdma link add ... type <type>`
    module: str  # kernel module that provides it
    prefix: str  # device names: rxe0, siw0, ...


LINK_TYPES = {
    "softroce": LinkType("softroce", "rxe", "rdma_rxe", "rxe"),
    "iwarp": LinkType("iwarp", "siw", "siw", "siw"),
}
COMMAND_TIMEOUT = 30.0
READY_TIMEOUT = 15.0  # the port turns ACTIVE and the GID table fills a moment after `link add`


class ProvisionError(Exception):
    """Creating the link failed; the message says which command and why."""


@dataclass(frozen=True)
class Provisioned:
    kind: str
    device: str  # "rxe0"
    netdev: str
    created: bool  # False: it existed already (and is left alone at the end)

    def describe(self) -> str:
        how = "created" if self.created else "found"
        return f"{how} {self.device} on {self.netdev}"


def _uname_release() -> str:
    return os.uname().release


def module_reason(module: str, sysfs_root: Path = LIVE_SYSFS) -> str | None:
    """None when `module` is loaded, built in, or loadable; else why not (one line)."""
    if (sysfs_root / "module" / module).exists():
        return None
    if shutil.which("modprobe") is None:
        return f"kernel module {module} is not loaded and modprobe is missing (install kmod)"
    job = run_job(["modprobe", "-n", "-q", module], timeout=COMMAND_TIMEOUT, label="modprobe -n")
    if job.ok:
        return None
    where = f"/lib/modules/{_uname_release()}"
    if not Path(where).is_dir():
        return f"kernel {_uname_release()} has no {module} module (no {where})"
    return f"kernel {_uname_release()} has no {module} module (modprobe -n {module} failed)"


def candidate_netdev(inv: Inventory, netdev: str | None) -> NetDev | str:
    """The netdev to put the link on, or why there is none: the one named, else the first
    Ethernet interface that is up with an IPv4 address (RoCE v2 and iWARP address by IP)."""
    if netdev is not None:
        nd = inv.netdev(netdev)
        if nd is None:
            return f"no network interface named {netdev}"
        if nd.type != ARPHRD_ETHER:
            return f"{netdev} is not an Ethernet interface"
        if not nd.is_up:
            return f"{netdev} is {nd.operstate}"
        return nd
    usable = [nd for nd in inv.netdevs if nd.type == ARPHRD_ETHER and nd.is_up and nd.ipv4]
    if not usable:
        return "no Ethernet interface is up with an IPv4 address"
    return usable[0]


def unavailable_reason(
    kind: str, inv: Inventory, netdev: str | None = None, sysfs_root: Path = LIVE_SYSFS
) -> str | None:
    """Why a `kind` link cannot be created here (None: provision() should work)."""
    link = LINK_TYPES.get(kind)
    if link is None:
        return f"{kind} devices are hardware: they cannot be created"
    if Path(sysfs_root).resolve() != LIVE_SYSFS.resolve():
        return f"reading a recorded sysfs tree ({sysfs_root}): nothing to create"
    if os.geteuid() != 0:
        return f"creating an rdma link needs root (running as uid {os.geteuid()})"
    if shutil.which("rdma") is None:
        return "the rdma tool is missing (install iproute2)"
    reason = module_reason(link.module, Path(sysfs_root))
    if reason:
        return reason
    nd = candidate_netdev(inv, netdev)
    return nd if isinstance(nd, str) else None


def _existing(link: LinkType, netdev: str, sysfs_root: Path) -> str | None:
    """A link of this type already on netdev (rxe names its netdev in `parent`)."""
    base = sysfs_root / "class" / "infiniband"
    for dev in sorted(os.listdir(base)) if base.is_dir() else []:
        if not dev.startswith(link.prefix):
            continue
        parent = read_attr(base / dev / "parent")
        ndevs = base / dev / "ports" / "1" / "gid_attrs" / "ndevs"
        names = {read_attr(ndevs / g) for g in os.listdir(ndevs)} if ndevs.is_dir() else set()
        if parent == netdev or netdev in names:
            return dev
    return None


def _free_name(link: LinkType, sysfs_root: Path) -> str:
    base = sysfs_root / "class" / "infiniband"
    taken = set(os.listdir(base)) if base.is_dir() else set()
    return next(f"{link.prefix}{i}" for i in range(1000) if f"{link.prefix}{i}" not in taken)


def _run(argv: list[str], what: str) -> None:
    job = run_job(argv, timeout=COMMAND_TIMEOUT, label=" ".join(argv[:3]))
    if not job.ok:
        raise ProvisionError(f"{what}: {job.describe()}")


def _wait_ready(device: str, kind: str, sysfs_root: Path) -> None:
    """Port 1 ACTIVE and (SoftRoCE) an IPv4-mapped GID: rdma_rxe fills its GID table from the
    netdev's addresses asynchronously, and a test started before that picks no RoCE v2 GID."""
    port = sysfs_root / "class" / "infiniband" / device / "ports" / "1"
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        active = (read_attr(port / "state") or "").endswith("ACTIVE")
        gids = [read_attr(p) or "" for p in (port / "gids").glob("*")] if active else []
        mapped = any(g.startswith("0000:0000:0000:0000:0000:ffff:") for g in gids)
        if active and (kind != "softroce" or mapped):
            return
        if time.monotonic() > deadline:
            state = read_attr(port / "state")
            raise ProvisionError(
                f"{device} not ready after {READY_TIMEOUT:g}s: port 1 state "
                f"{state}, IPv4-mapped GID {'present' if mapped else 'absent'}"
            )
        time.sleep(0.1)


def provision(
    kind: str, inv: Inventory, netdev: str | None = None, sysfs_root: Path = LIVE_SYSFS
) -> Provisioned:
    """Create a `kind` link (or find the one already there) on the chosen netdev."""
    reason = unavailable_reason(kind, inv, netdev, sysfs_root)
    if reason:
        raise ProvisionError(reason)
    link = LINK_TYPES[kind]
    nd = candidate_netdev(inv, netdev)
    assert not isinstance(nd, str)
    found = _existing(link, nd.name, sysfs_root)
    if found:
        return Provisioned(kind, found, nd.name, created=False)
    _run(["modprobe", link.module], f"modprobe {link.module}")
    # userspace verbs and rdma_cm need these; udev loads them on a normal boot
    for module in ("ib_uverbs", "rdma_ucm"):
        run_job(["modprobe", module], timeout=COMMAND_TIMEOUT, label=f"modprobe {module}")
    name = _free_name(link, sysfs_root)
    _run(
        ["rdma", "link", "add", name, "type", link.type, "netdev", nd.name],
        f"rdma link add {name} type {link.type} netdev {nd.name}",
    )
    made = Provisioned(kind, name, nd.name, created=True)
    try:
        _wait_ready(name, kind, sysfs_root)
    except ProvisionError:
        unprovision(made)
        raise
    return made


def unprovision(made: Provisioned) -> None:
    """Remove a link this session created; one it found stays."""
    if made.created:
        _run(["rdma", "link", "delete", made.device], f"rdma link delete {made.device}")
