"""The reference probe of each session that updated a baseline set (measure/host_speed.py).

One file per (system, fabric) beside the stack files (BaselineStore.host_file), written under the
same lock discipline (atomic replace, flock of a hidden sibling). A set without it was
recorded before the probe existed: its host speed is unknown.

The rule it serves (judging.py): on a host that runs the probe outside HOST_BAND of the set's
sessions, stored verdicts widen the band on the side that host's speed explains
(verdict.host_band), and --hpc-update-baselines writes nothing (its numbers are another host's:
mixed into the set's sessions they would pass for its spread). Each session keeps the probe's
method (host_speed.METHOD): readings of another method are not compared.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pytest_hpccomm.files import atomic_write, updating
from pytest_hpccomm.measure.host_speed import METHOD, HostSpeed, own_noise, speed_ratio, typical

SCHEMA = "pytest-hpccomm/host-probes"
SCHEMA_VERSION = 1


# How far this host's probe may lie from the set's sessions' (as a ratio, either way) before
# it counts as another host's speed. From the probe's repeatability (benchmarks/RESULTS.md):
# one reading's composite has a log sd of ~3 % on a quiet host, so a reading against the
# median of the set's sessions moves by ~3.5 %, and 10 % is ~3 of those. Outside the band the
# host widens the band of stored verdicts on the side it explains (verdict.host_band).
HOST_BAND = 0.10
# A reading's own noise widens the band to hold this many of its standard errors (own_noise),
# so an unchanged host falls outside it less than 5 % of the time, on a VM whose probe is
# noisier than the one HOST_BAND was set on as well.
NOISE_Z = 1.96


def band_for(probe: HostSpeed) -> float:
    """The band for this session's reading: HOST_BAND, or wider where the reading's own noise
    needs it (NOISE_Z of own_noise's standard error inside it); HOST_BAND for a reading that
    keeps no rounds (a stored one)."""
    noise = own_noise(probe)
    return HOST_BAND if noise is None else max(HOST_BAND, math.expm1(NOISE_Z * noise))


class HostProbesError(Exception):
    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"host probe file {path}: {problem}")


def load(path: Path) -> list[tuple[str, HostSpeed, int]]:
    """(timestamp, probe, probe method) of each recorded session, oldest first; [] without the
    file. A session written before methods were kept is method 1."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HostProbesError(path, f"cannot be read: {exc}") from exc
    if (
        not isinstance(doc, dict)
        or doc.get("schema") != SCHEMA
        or doc.get("schema_version") != SCHEMA_VERSION
    ):
        raise HostProbesError(path, f"is not {SCHEMA} version {SCHEMA_VERSION}")
    try:
        return [
            (str(s["timestamp"]), HostSpeed.from_json(s["rates"]), int(s.get("method", 1)))
            for s in doc["sessions"]
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise HostProbesError(path, f"has a bad session: {exc}") from None


def record(path: Path, probe: HostSpeed, timestamp: str, limit: int) -> None:
    """Append this session's probe, keeping the last `limit`."""
    with updating(path):
        sessions = load(path) + [(timestamp, probe, METHOD)]
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "sessions": [
                {"timestamp": t, "rates": p.to_json(), "method": m} for t, p, m in sessions[-limit:]
            ],
        }
        atomic_write(path, json.dumps(doc, sort_keys=True, indent=2) + "\n", mode=0o644)


def within(probe: HostSpeed, recorded: list[HostSpeed], band: float) -> bool:
    ratio, _ = speed_ratio(probe, typical(recorded))
    return abs(math.log(ratio)) <= math.log(1.0 + band)


def describe(probe: HostSpeed, recorded: list[HostSpeed]) -> str:
    """'0.77x the speed of the set's 5 sessions (python 0.76, ...)'."""
    ratio, parts = speed_ratio(probe, typical(recorded))
    shown = ", ".join(f"{k} {v:.2f}" for k, v in parts.items())
    return (
        f"{ratio:.2f}x the speed of the baseline set's {len(recorded)} session"
        f"{'s' if len(recorded) != 1 else ''} ({shown})"
    )
