"""The environment fingerprint attached to every result and stored with every baseline.

A baseline is only comparable to a run on the same hardware and software; the fingerprint is
what lets a verdict say "baseline taken on another firmware / MPI version" instead of guessing.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
from pathlib import Path
from typing import Any, Iterable

from pytest_hpccomm import __version__
from pytest_hpccomm.fabrics import FabricSelection, FabricUnavailable

# What makes a machine type: a baseline taken where one of these differs measured other hardware,
# so its verdicts are informational (judging.py). Versions (kernel, MPI, ...) are
# compared and noted, not exempted: a new version on the same hardware is what a gate checks.
MACHINE_TYPE_FIELDS = ("cpu_model", "cpu_cores", "arch")


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_fingerprint() -> dict[str, Any]:
    return {
        "kernel": platform.release(),
        "os": _os_release(),
        "arch": platform.machine(),
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count() or 0,
        "python": platform.python_version(),
        "pytest_hpccomm": __version__,
    }


def fabric_fingerprint(selection: FabricSelection | FabricUnavailable) -> dict[str, Any]:
    if isinstance(selection, FabricUnavailable):
        return {"fabric": selection.kind, "fabric_available": False}
    mode = {"ipoib_mode": selection.ipoib_mode} if selection.ipoib_mode else {}
    return {
        **mode,  # only where there is one: other fabrics' fingerprints keep their keys
        "fabric": selection.kind,
        "device": selection.device,
        "driver": selection.driver,
        "firmware": selection.firmware,
        "link_layer": selection.link_layer,
        "link_rate_gbps": selection.rate_gbps,
        "mtu": selection.mtu,
        "netdev": selection.netdev,
        "gid_index": selection.gid_index,
    }


def default_system_name(fp: dict[str, Any]) -> str:
    """Readable and stable for one kind of machine: '<cpu>-<cores>c-<hash of hardware>'."""
    cpu = re.sub(r"\(r\)|\(tm\)|cpu|processor|@.*$", "", str(fp.get("cpu_model", "")), flags=re.I)
    slug = re.sub(r"[^a-z0-9]+", "-", cpu.lower()).strip("-")[:32] or "host"
    # Only what changes performance belongs in the hash; versions are compared, not keyed.
    basis = "|".join(
        str(fp.get(k)) for k in ("cpu_model", "cpu_cores", "arch", "driver", "link_rate_gbps")
    )
    return f"{slug}-{fp.get('cpu_cores')}c-{hashlib.sha1(basis.encode()).hexdigest()[:6]}"


def merge(parts: Iterable[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in parts:
        out.update({k: v for k, v in part.items() if v is not None})
    return dict(sorted(out.items()))


def _os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.system()
