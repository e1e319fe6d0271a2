"""Helpers for the cluster tests: per-MPI environments, leak snapshots (imported by tests)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_hpccomm.cluster.mpi import mpi_prefix, mpirun_path
from pytest_hpccomm.cluster.virtual import NETNS_ETC, default_state_dir
from pytest_hpccomm.proc.jobs import TAG_VAR

HERE = Path(__file__).parent


@dataclass(frozen=True)
class MpiEnv:
    name: str
    mpirun: str
    python: str


def mpi_env(name: str) -> MpiEnv:
    path = mpirun_path(name)
    if path is None:
        pytest.skip(
            f"no {name} environment at {mpi_prefix(name)}: "
            f"python -m pytest_hpccomm mpi create {name}"
        )
    return MpiEnv(name, str(path), str(mpi_prefix(name) / "bin" / "python"))


# -- leaks ------------------------------------------------------------------------------------


def _lines(argv: list[str]) -> set[str]:
    return set(subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.split())


def live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def tagged_processes() -> set[int]:
    """Live processes started by jobs of this test process (their HPCCOMM_JOB_TAG starts with
    our PID; other sessions on the machine may run jobs of their own meanwhile)."""
    out = set()
    needle = f"{TAG_VAR}={os.getpid()}.".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if any(v.startswith(needle) for v in f.read().split(b"\0")) and live(int(name)):
                    out.add(int(name))
        except OSError:
            pass
    return out


def our_zombies() -> set[int]:
    out = set()
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                rest = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if rest[0] == b"Z" and int(rest[1]) == os.getpid():
            out.add(int(name))
    return out


@dataclass(frozen=True)
class Snapshot:
    netns: frozenset[str]
    root_links: frozenset[str]
    etc_netns: frozenset[str]
    manifests: frozenset[str]

    @staticmethod
    def take() -> Snapshot:
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, timeout=30)
        state = default_state_dir()
        return Snapshot(
            netns=frozenset(_lines(["ip", "netns", "list"])),
            root_links=frozenset(line.split(":")[1].strip() for line in links.stdout.splitlines()),
            etc_netns=frozenset(os.listdir(NETNS_ETC)) if NETNS_ETC.is_dir() else frozenset(),
            manifests=frozenset(os.listdir(state)) if state.is_dir() else frozenset(),
        )

    def leaks_since(self, before: Snapshot) -> list[str]:
        out = []
        mine = f"hpcc{os.getpid():x}-"  # session_prefix(): other sessions may build clusters too
        for field in ("netns", "etc_netns", "manifests"):
            new = {n for n in getattr(self, field) - getattr(before, field) if n.startswith(mine)}
            if new:
                out.append(f"{field}: {sorted(new)}")
        if self.root_links != before.root_links:
            out.append(f"root links changed: {sorted(self.root_links ^ before.root_links)}")
        procs = tagged_processes()
        if procs:
            out.append(f"job processes alive: {sorted(procs)}")
        zombies = our_zombies()
        if zombies:
            out.append(f"unreaped children: {sorted(zombies)}")
        return out
