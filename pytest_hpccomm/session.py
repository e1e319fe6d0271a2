"""What one pytest session knows about its environment: config, fabric, stacks, fingerprint."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_hpccomm import fingerprint as fp
from pytest_hpccomm import retries
from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.config import HpcConfig
from pytest_hpccomm.fabrics import (
    AUTO,
    FabricProbe,
    FabricSelection,
    FabricUnavailable,
    fabric_kinds,
    register_fabric,
    select_fabric,
)
from pytest_hpccomm.fabrics.sysfs import Inventory, read_inventory
from pytest_hpccomm.stack_probes import StackProbe


@dataclass
class HpcSession:
    cfg: HpcConfig
    inventory: Inventory
    selection: FabricSelection | FabricUnavailable
    stacks: dict[str, StackProbe]
    fingerprint: dict[str, Any]
    system: str
    results: list[RunResult] = field(default_factory=list)
    retries_mark: int = field(default_factory=retries.mark)  # counted from here

    @property
    def fabric_kind(self) -> str:
        return self.selection.kind

    @classmethod
    def open(cls, config: pytest.Config, cfg: HpcConfig) -> HpcSession:
        probes: list[FabricProbe] = [
            p for group in config.hook.pytest_hpccomm_fabric_probes(config=config) for p in group
        ]
        for probe in probes:
            try:
                register_fabric(probe)
            except ValueError as exc:  # two plugins claim one kind
                raise pytest.UsageError(f"pytest_hpccomm_fabric_probes: {exc}") from None
        kinds = fabric_kinds()  # only now: a kind added by the hook is a valid choice
        if cfg.fabric != AUTO and cfg.fabric not in kinds:
            raise pytest.UsageError(
                f"--hpc-fabric: invalid value {cfg.fabric!r} (choose from "
                f"{AUTO}, {', '.join(kinds)})"
            )
        try:
            inventory = read_inventory(cfg.sysfs_root)
        except ValueError as exc:
            raise pytest.UsageError(f"--hpc-sysfs-root: {exc}") from None
        selection = select_fabric(inventory, cfg.fabric, cfg.device, cfg.netdev)
        stacks: dict[str, StackProbe] = {}  # each stack's plugin contributes its own probe
        for group in config.hook.pytest_hpccomm_stack_probes(config=config):
            stacks.update({s.name: s for s in group})
        check_paired(
            cfg,
            [s for group in config.hook.pytest_hpccomm_paired_stacks(config=config) for s in group],
        )
        versions = [s.versions() for s in stacks.values()]
        contributed = config.hook.pytest_hpccomm_fingerprint(config=config)
        fingerprint = fp.merge(
            [fp.host_fingerprint(), fp.fabric_fingerprint(selection), *versions, *contributed]
        )
        system = cfg.system or fp.default_system_name(fingerprint)
        fingerprint["system"] = system
        return cls(cfg, inventory, selection, stacks, fingerprint, system)

    def refresh_fabric(self) -> FabricSelection | FabricUnavailable:
        """Re-read the inventory and select again (a stack plugin provisioned a device); the
        fabric's fingerprint keys are replaced, not merged (no stale fabric_available)."""
        for key in fp.fabric_fingerprint(self.selection):
            self.fingerprint.pop(key, None)
        self.inventory = read_inventory(self.cfg.sysfs_root)
        self.selection = select_fabric(
            self.inventory, self.cfg.fabric, self.cfg.device, self.cfg.netdev
        )
        self.fingerprint.update(fp.fabric_fingerprint(self.selection))
        return self.selection


def check_paired(cfg: HpcConfig, pairable: list[str]) -> None:
    """A paired A/B run names only stacks that can swap their implementation."""
    for stack in sorted(cfg.candidate):
        if stack not in pairable:
            known = ", ".join(sorted(pairable)) or "none installed"
            raise pytest.UsageError(
                f"--hpc-candidate/--hpc-base: stack {stack!r} cannot run "
                f"a paired A/B comparison (stacks that can: {known})"
            )


SESSION_KEY = pytest.StashKey[HpcSession]()


def hpc_session_of(config: pytest.Config) -> HpcSession:
    """This pytest session's HpcSession (opened by the core plugin's pytest_configure): how
    stack plugins reach the selected fabric, the options and the judged results."""
    return config.stash[SESSION_KEY]
