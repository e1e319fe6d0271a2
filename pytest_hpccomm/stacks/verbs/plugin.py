"""pytest plugin of the verbs stack (pytest11: hpccomm_verbs): provisioning, peers, skips.

Tests marked `stack("verbs")` ask for:
  verbs_fabric    the selected RDMA port; on softroce/iwarp a missing rxe/siw link is created
                  first (fabrics/provision.py) and removed at session end
  verbs_pair      two long-lived peers on that device (the conformance tests' counterpart)
  verbs_bench     perftest's benchmark set over the pair, cached per session
  verbs_emulated  True on rxe/siw: benchmarks run as a functional pass without verdicts

Skips: the core skips by the stack marker alone and only at collection, before any link could
be provisioned. For verbs items this plugin decides first (tryfirst) and names everything that
is missing in one reason: the stack (pyverbs) and the fabric (what was found instead, and why no
link can be created) — a provisionable fabric is not a reason to skip.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable, select_fabric
from pytest_hpccomm.fabrics import provision as prov
from pytest_hpccomm.fabrics.sysfs import read_inventory
from pytest_hpccomm.stacks.registry import ImportProbe, StackProbe

RDMA_KINDS = ("ib", "roce", "softroce", "iwarp")
SOFTWARE_DRIVERS = ("rxe", "siw")
PLANT_HELP = ("test-only: start the verbs peers with a planted bug, to prove the conformance "
              "suite catches it (mr-no-remote-write: MRs are registered without REMOTE_WRITE "
              "even when it is asked for)")

PROVISIONED_KEY = pytest.StashKey[list[prov.Provisioned]]()
EMULATED_KEY = pytest.StashKey[list[str]]()


@pytest.hookimpl(optionalhook=True)  # the core plugin declares it; `-p no:hpccomm` does not
def pytest_hpccomm_stack_probes(config: pytest.Config) -> list[StackProbe]:
    return [ImportProbe("verbs", ("pyverbs",), ("pyverbs",), (),
                        "apt-get install python3-pyverbs (rdma-core)")]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hpccomm")
    group.addoption("--hpc-verbs-plant", default=None, dest="hpc_verbs_plant",
                    choices=("mr-no-remote-write",), help=PLANT_HELP)


def pytest_configure(config: pytest.Config) -> None:
    config.stash[PROVISIONED_KEY] = []
    config.stash[EMULATED_KEY] = []


def _hpc(config: pytest.Config) -> Any:
    from pytest_hpccomm.plugin import hpc_session_of

    return hpc_session_of(config)


def _is_verbs(item: pytest.Item) -> bool:
    return any(m.args[:1] == ("verbs",) for m in item.iter_markers("stack"))


def fabric_reason(hpc: Any) -> str | None:
    """Why the session's fabric cannot carry verbs tests (None: it can, or can be created)."""
    sel, cfg = hpc.selection, hpc.cfg
    if isinstance(sel, FabricSelection):
        if sel.kind in RDMA_KINDS:
            return None
        return (f"verbs needs an RDMA fabric ({', '.join(RDMA_KINDS)}); this session runs on "
                f"{sel.kind} ({sel.description})")
    if sel.kind in prov.LINK_TYPES:
        why = prov.unavailable_reason(sel.kind, hpc.inventory, cfg.netdev, Path(cfg.sysfs_root))
        return f"{sel.reason}; cannot create one: {why}" if why else None
    return sel.reason


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    verbs = [item for item in items if _is_verbs(item)]
    if not verbs:
        return
    hpc = _hpc(config)
    reasons = []
    probe = hpc.stacks.get("verbs")
    stack = probe.unavailable_reason() if probe is not None else "stack 'verbs' not registered"
    if stack:
        reasons.append(stack)
    fabric = fabric_reason(hpc)
    if fabric:
        reasons.append(f"fabric {hpc.cfg.fabric}: {fabric}")
    if reasons:
        mark = pytest.mark.skip(reason="; ".join(reasons))
        for item in verbs:
            item.add_marker(mark)


def refresh_selection(hpc: Any) -> FabricSelection | FabricUnavailable:
    """Re-read the inventory after provisioning and select again. The core discovers fabrics
    once at configure time; HpcSession.refresh_fabric() does this once it exists."""
    refresh = getattr(hpc, "refresh_fabric", None)
    if callable(refresh):
        got: FabricSelection | FabricUnavailable = refresh()
        return got
    from pytest_hpccomm import fingerprint as fp

    cfg = hpc.cfg
    hpc.inventory = read_inventory(cfg.sysfs_root)
    hpc.selection = select_fabric(hpc.inventory, cfg.fabric, cfg.device, cfg.netdev)
    hpc.fingerprint.update(fp.fabric_fingerprint(hpc.selection))
    return hpc.selection  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def verbs_fabric(pytestconfig: pytest.Config) -> Iterator[FabricSelection]:
    """The RDMA port under test; on softroce/iwarp, a link is created when none exists."""
    hpc = _hpc(pytestconfig)
    made: prov.Provisioned | None = None
    sel = hpc.selection
    if isinstance(sel, FabricUnavailable) and sel.kind in prov.LINK_TYPES:
        try:
            made = prov.provision(sel.kind, hpc.inventory, hpc.cfg.netdev,
                                  Path(hpc.cfg.sysfs_root))
        except prov.ProvisionError as exc:
            pytest.skip(f"{sel.reason}; cannot create one: {exc}")
        pytestconfig.stash[PROVISIONED_KEY].append(made)
        sel = refresh_selection(hpc)
    if isinstance(sel, FabricUnavailable):
        pytest.skip(sel.reason)
    if sel.kind not in RDMA_KINDS:
        pytest.skip(f"verbs needs an RDMA fabric; this session runs on {sel.kind}")
    try:
        yield sel
    finally:
        if made is not None:
            _unprovision(pytestconfig, made)


def _unprovision(config: pytest.Config, made: prov.Provisioned) -> None:
    stash = config.stash[PROVISIONED_KEY]
    if made in stash:
        stash.remove(made)
        prov.unprovision(made)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Belt and braces: a session torn down without fixture teardown still removes its link."""
    if PROVISIONED_KEY not in config.stash:
        return
    stash: list[prov.Provisioned] = config.stash[PROVISIONED_KEY]
    for made in stash[:]:
        try:
            _unprovision(config, made)
        except prov.ProvisionError:
            pass


@pytest.fixture(scope="session")
def verbs_emulated(verbs_fabric: FabricSelection) -> bool:
    """rxe and siw are software: their timings say nothing about a fabric."""
    return verbs_fabric.driver in SOFTWARE_DRIVERS


@pytest.fixture(scope="session")
def verbs_pair(verbs_fabric: FabricSelection, pytestconfig: pytest.Config) -> Iterator[Any]:
    from pytest_hpccomm.stacks.verbs.driver import PeerError, PeerOptions, VerbsPair, start_peers

    opts = PeerOptions.from_selection(verbs_fabric, pytestconfig.getoption("hpc_verbs_plant"))
    try:
        a, b = start_peers(opts, 2)
    except PeerError as exc:
        pytest.fail(f"verbs peers on {verbs_fabric.description}: {exc}", pytrace=False)
    pair = VerbsPair(a, b, verbs_fabric, opts)
    try:
        yield pair
    finally:
        pair.close()


@pytest.fixture(scope="session")
def verbs_bench(verbs_pair: Any, verbs_emulated: bool,
                pytestconfig: pytest.Config) -> Iterator[Any]:
    from pytest_hpccomm.stacks.verbs.perf import BenchRunner, BenchSettings

    cfg = _hpc(pytestconfig).cfg
    settings = BenchSettings.for_profile(cfg.profile, verbs_emulated)
    runner = BenchRunner(verbs_pair, settings, max(cfg.message_sizes))
    yield runner


def note_emulated(config: pytest.Config, nodeid: str) -> None:
    config.stash[EMULATED_KEY].append(nodeid)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    ran = config.stash[EMULATED_KEY] if EMULATED_KEY in config.stash else []
    if ran:
        sel = _hpc(config).selection
        where = sel.description if isinstance(sel, FabricSelection) else sel.kind
        terminalreporter.write_sep("=", "hpccomm verbs")
        terminalreporter.write_line(
            f"{len(ran)} benchmark points ran as a functional pass on an emulated device "
            f"({where}): performance verdicts disabled, timings are not judged or stored")
