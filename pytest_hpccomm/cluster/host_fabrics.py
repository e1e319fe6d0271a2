"""The session's RDMA fabric on every host: made where missing, read back, removed at the end.

On softroce / iwarp a link is created where none exists (fabrics/provision.py), here and, over
the remote shell, on each other host of --hpc-hosts (fabrics/on_host.py runs the same discovery
there), so every host's device, GID index and address come from that host. Links this session
created are removed at the end, remote ones first; links that were there stay. On ib / roce
nothing is created: the hosts' own ports are read. Also the traffic counters of any host, the
evidence that bytes crossed between hosts through the RDMA device.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_hpccomm.cluster.remote_shell import RemoteShell, address_of, is_this_host
from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable
from pytest_hpccomm.fabrics import provision as prov
from pytest_hpccomm.fabrics.counters import fabric_counters
from pytest_hpccomm.fabrics.sysfs import Inventory

ON_HOST = "pytest_hpccomm.fabrics.on_host"
REMOTE_TIMEOUT = 60.0  # provisioning waits up to 15 s for the port; ssh under TCG a few more


class FabricNotReady(Exception):
    """One line: why the fabric cannot be had on some host (becomes a skip or a failure)."""


@dataclass(frozen=True)
class HostFabric:
    host: str
    selection: FabricSelection
    local: bool  # this machine: read directly, no remote shell
    created: str | None = None  # a link this session made there (removed at the end)

    @property
    def address(self) -> str:
        """The address peers on other hosts reach this one at (its fabric netdev's)."""
        return self.selection.address or address_of(self.host)


@dataclass
class ClusterFabric:
    """The session's fabric: here, and on each host of --hpc-hosts in their order."""

    local: FabricSelection
    hosts: tuple[HostFabric, ...] = ()
    shell: RemoteShell = field(default_factory=RemoteShell)

    @property
    def spans_hosts(self) -> bool:
        return len(self.hosts) >= 2

    def counters(self, host: HostFabric) -> dict[str, Any]:
        """counters.fabric_counters of host's fabric port, read there."""
        sel = host.selection
        assert sel.device is not None and sel.port is not None
        if host.local:
            return fabric_counters(sel.device, sel.port, sel.netdev)
        argv = ["counters", "--device", sel.device, "--port", str(sel.port)]
        if sel.netdev:
            argv += ["--netdev", sel.netdev]
        return _ask(self.shell, host.host, argv)


def _python_m(argv: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", ON_HOST, *argv]


def _ask(shell: RemoteShell, host: str, argv: Sequence[str]) -> dict[str, Any]:
    got = shell.run(host, _python_m(argv), REMOTE_TIMEOUT, label=f"on_host {argv[0]} on {host}")
    lines = got.stdout.strip().splitlines()
    try:
        out: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        out = {}
    if not got.ok or "error" in out or not out:
        why = out.get("error") or (got.stderr.strip().splitlines() or [got.describe()])[-1]
        raise FabricNotReady(f"{host}: {argv[0]}: {why}")
    return out


def _remote(
    shell: RemoteShell, host: str, kind: str, device: str | None, netdev: str | None
) -> HostFabric:
    argv = ["select", "--fabric", kind]
    argv += ["--device", device] if device else []
    argv += ["--netdev", netdev] if netdev else []
    argv += ["--provision"] if kind in prov.LINK_TYPES else []
    out = _ask(shell, host, argv)
    created = out.pop("created", None)
    fields = {f for f in FabricSelection.__dataclass_fields__}
    return HostFabric(
        host,
        FabricSelection(**{k: v for k, v in out.items() if k in fields}),
        local=False,
        created=created,
    )


@contextmanager
def provisioned(
    kind: str,
    selection: FabricSelection | FabricUnavailable,
    inventory: Inventory,
    refresh: Callable[[], FabricSelection | FabricUnavailable],
    *,
    hosts: Sequence[str] = (),
    rsh_agent: str | None = None,
    device: str | None = None,
    netdev: str | None = None,
    sysfs_root: Path,
    made_here: list[prov.Provisioned],
) -> Iterator[ClusterFabric]:
    """The fabric here (a link created when kind is softroce/iwarp and none exists) and on
    every other host of `hosts`; what was created is removed on leaving, also on errors.
    `made_here` is the session's list of local links (its unconfigure hook is a belt)."""
    made: prov.Provisioned | None = None
    if isinstance(selection, FabricUnavailable) and kind in prov.LINK_TYPES:
        try:
            made = prov.provision(kind, inventory, netdev, sysfs_root)
        except prov.ProvisionError as exc:
            raise FabricNotReady(f"{selection.reason}; cannot create one: {exc}") from None
        made_here.append(made)
        selection = refresh()  # discovery ran before the link existed
    remote: list[HostFabric] = []
    shell = RemoteShell.from_option(rsh_agent)
    try:
        if isinstance(selection, FabricUnavailable):
            raise FabricNotReady(selection.reason)
        placed: list[HostFabric] = []
        for host in hosts:
            if is_this_host(host):
                placed.append(HostFabric(host, selection, local=True))
            else:
                hf = _remote(shell, host, kind, device, netdev)
                remote.append(hf)
                placed.append(hf)
        yield ClusterFabric(selection, tuple(placed), shell)
    finally:
        errors = []
        for hf in reversed(remote):
            if hf.created:
                try:
                    _ask(shell, hf.host, ["unprovision", "--device", hf.created])
                except FabricNotReady as exc:
                    errors.append(str(exc))
        if made is not None and made in made_here:
            made_here.remove(made)
            prov.unprovision(made)
        if errors:
            raise FabricNotReady("; ".join(errors))
