"""Skip semantics: a test that needs what is absent SKIPS with one precise reason, never ERRORs."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.placement import HOSTS, LOOPBACK, NETNS
from pytest_hpccomm.fabrics import FabricUnavailable, fabric_kinds, provision
from pytest_hpccomm.session import HpcSession

MARKERS = (
    "conformance: correctness test of a stack's semantics (property-based where possible)",
    "perf: performance benchmark judged against the stored baseline",
    "stack(name): exercises the named stack (as its plugin registers it); skipped when it "
    "is not installed here",
    "fabric(*kinds): runs only on these fabric kinds (ib, roce, softroce, iwarp, ipoib, "
    "ethernet); skipped with what was found otherwise (why=: the stack's reason, first; "
    "made=True: a softroce/iwarp link the session's hpc_rdma_fabric creates counts)",
    "needs_root: needs root (network namespaces, rdma links); skipped otherwise",
    "slow: takes minutes; deselect with -m 'not slow'",
    "quick_placements(*placements): in the quick profile, when both loopback and netns would "
    "run, run this item at these placements only (its stack's code path is the same at "
    "each); the full profile runs every placement",
    "placements(*placements): runs at these placements only (loopback, netns, hosts); at "
    "the others skipped at collection, saying so",
    "covers(stack, *cells): the cells of the stack's standard this test exercises, each "
    "'family:argument_class' (docs/reference/coverage.md is drawn from them)",
    "needs_hosts: runs across two hosts of --hpc-hosts (or a hostfile, or a SLURM "
    "allocation); skipped otherwise",
)
NEEDS_HOSTS = (
    "needs two hosts (--hpc-hosts a,b, a hostfile or a SLURM allocation); this session's "
    "peers share one host"
)


def check_marker_args(nodeid: str, markers: Iterable[pytest.Mark], session: HpcSession) -> None:
    """Typos in markers are usage errors: a misspelt stack must not silently skip forever."""
    for mark in markers:
        if mark.name == "stack":
            if len(mark.args) != 1 or mark.args[0] not in session.stacks:
                raise pytest.UsageError(
                    f"{nodeid}: @pytest.mark.stack{mark.args!r}: expected one "
                    f"of {', '.join(sorted(session.stacks))}"
                )
        elif mark.name == "quick_placements":
            if not mark.args or any(p not in (LOOPBACK, NETNS) for p in mark.args):
                raise pytest.UsageError(
                    f"{nodeid}: @pytest.mark.quick_placements{mark.args!r}: "
                    f"placements are {LOOPBACK}, {NETNS}"
                )
        elif mark.name == "placements":
            if not mark.args or any(p not in (LOOPBACK, NETNS, HOSTS) for p in mark.args):
                raise pytest.UsageError(
                    f"{nodeid}: @pytest.mark.placements{mark.args!r}: "
                    f"placements are {LOOPBACK}, {NETNS}, {HOSTS}"
                )
        elif mark.name == "fabric":
            kinds = fabric_kinds()  # built-in and registered through the fabric hook
            if not mark.args or any(k not in kinds for k in mark.args):
                raise pytest.UsageError(
                    f"{nodeid}: @pytest.mark.fabric{mark.args!r}: kinds are {', '.join(kinds)}"
                )


def skip_reason(
    markers: Iterable[pytest.Mark], session: HpcSession, placement: str | None = None
) -> str | None:
    """The first unmet requirement of a test (at `placement`, its hpc_placement), as one
    line, or None when it can run."""
    for mark in markers:
        if mark.name == "placements" and placement is not None and placement not in mark.args:
            return placement_reason(mark.args, placement)
        if mark.name == "needs_hosts" and len(session.cfg.host_list) < 2:
            return NEEDS_HOSTS
        if mark.name == "needs_root" and os.geteuid() != 0:
            return f"needs root (network namespaces / RDMA links); running as uid {os.geteuid()}"
        if mark.name == "fabric":
            reason = fabric_reason(mark.args, session, made=bool(mark.kwargs.get("made")))
            if reason:  # why=: the stack's own word on other fabrics, first
                return f"{mark.kwargs['why']} ({reason})" if mark.kwargs.get("why") else reason
        if mark.name == "stack":
            reason = session.stacks[mark.args[0]].unavailable_reason()
            if reason:
                return reason
    return None


def fabric_reason(kinds: tuple[str, ...], session: HpcSession, *, made: bool = False) -> str | None:
    """Why the session's fabric is none of `kinds` (None: it is); `made`: a softroce/iwarp
    link that hpc_rdma_fabric will create counts as there, unless it cannot be created."""
    selection = session.selection
    if isinstance(selection, FabricUnavailable):
        if made and selection.kind in kinds and selection.kind in provision.LINK_TYPES:
            cfg = session.cfg
            why = provision.unavailable_reason(
                selection.kind, session.inventory, cfg.netdev, Path(cfg.sysfs_root)
            )
            return f"{selection.reason}; cannot create one: {why}" if why else None
        if selection.kind in kinds or not kinds:
            return selection.reason
        return (
            f"needs fabric {'|'.join(kinds)}; session fabric {selection.kind} is absent: "
            f"{selection.reason}"
        )
    if selection.kind not in kinds:
        return (
            f"needs fabric {'|'.join(kinds)}; this session runs on {selection.kind} "
            f"({selection.description})"
        )
    return None


def placement_reason(placements: tuple[str, ...], placement: str) -> str:
    """Why an item of `placements` (its placements marker) skips at `placement`."""
    if placements == (HOSTS,):
        return f"runs across hosts (--hpc-hosts); placement {placement}"
    return f"runs at placement {'|'.join(placements)}; placement {placement}"
