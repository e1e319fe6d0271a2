"""The link a bandwidth crossed: its rate, where the rate came from, and the fraction of it a
result reached (pure; the report imports `link_fraction`).

A bandwidth record (higher is better, in a byte or bit rate) carries
`extra["link_rate_gbps"]` (float, Gbit/s) and `extra["link_rate_source"]` (e.g. "port rate
mlx5_0/1", "netdev eth0 speed", "tbf fab0 on h1: 1 Gbit/s") when the rate is known, and
neither key when it is not: loopback, a veth or bridge whose `speed` is fiction. A fraction is
never made up from a guessed 100 %.

Unit factors are local on purpose: report/units.py formats rates for display, and measure/
sits below report/ (an import never goes up).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from pytest_hpccomm.measure.measurement import Direction, Measurement

RATE_KEY = "link_rate_gbps"
SOURCE_KEY = "link_rate_source"

# Gbit/s per one unit. Byte rates are decimal where written decimally (OSU's MB/s is 10^6 B/s,
# nccl-tests' GB/s 10^9 B/s) and binary where written binary; "b" is a bit, "B" a byte.
_GBIT_PER_UNIT: dict[str, float] = {
    "B/s": 8e-9,
    "kB/s": 8e-6,
    "KB/s": 8e-6,
    "MB/s": 8e-3,
    "GB/s": 8.0,
    "TB/s": 8e3,
    "KiB/s": 8 * 2**10 / 1e9,
    "MiB/s": 8 * 2**20 / 1e9,
    "GiB/s": 8 * 2**30 / 1e9,
    "bit/s": 1e-9,
    "kbit/s": 1e-6,
    "Mbit/s": 1e-3,
    "Gbit/s": 1.0,
    "Tbit/s": 1e3,
    "kb/s": 1e-6,
    "Mb/s": 1e-3,
    "Gb/s": 1.0,
    "Gbps": 1.0,
    "Mbps": 1e-3,
}


@dataclass(frozen=True)
class LinkRate:
    """The rate of the link a measurement's payload crossed, and who said so."""

    gbps: float
    source: str
    shaped: bool = False  # set by a shaper (the virtual cluster's tbf), not by the hardware

    def __post_init__(self) -> None:
        if not (math.isfinite(self.gbps) and self.gbps > 0):
            raise ValueError(f"link rate must be > 0 Gbit/s, got {self.gbps!r}")

    def as_extra(self) -> dict[str, Any]:
        return {RATE_KEY: self.gbps, SOURCE_KEY: self.source}


def gbit_per_s(value: float, unit: str) -> float | None:
    """`value` in `unit` as Gbit/s; None when the unit is not a byte or bit rate (msg/s,
    rpc/s, us)."""
    factor = _GBIT_PER_UNIT.get(unit.strip())
    return None if factor is None else value * factor


def link_fraction(value: float, unit: str, rate_gbps: float | None) -> float | None:
    """The fraction of the link a bandwidth reached (0.95 = 95 %); None when the link rate is
    unknown or the unit is no data rate. A bidirectional result (osu_bibw) may exceed 1: it
    counts both directions of a full-duplex link."""
    if rate_gbps is None or not (math.isfinite(rate_gbps) and rate_gbps > 0):
        return None
    got = gbit_per_s(value, unit)
    if got is None or not math.isfinite(got):
        return None
    return got / rate_gbps


def is_bandwidth(m: Measurement) -> bool:
    """Records a link rate belongs to: higher is better, in a data rate."""
    return m.direction is Direction.HIGHER_IS_BETTER and gbit_per_s(1.0, m.unit) is not None


def with_link_rate(m: Measurement, link: LinkRate | None) -> Measurement:
    """`m` carrying the link's rate when it is a bandwidth and the rate is known; otherwise
    `m` itself (no key at all: "link rate unknown")."""
    if link is None or not is_bandwidth(m):
        return m
    return dataclasses.replace(m, extra={**m.extra, **link.as_extra()})


def shaped_fingerprint(link: LinkRate | None) -> dict[str, Any]:
    """What a runtime fingerprint adds for a shaped link: a result shaped to 1 Gbit/s judged
    against an unshaped baseline then says why it differs ("baseline fingerprint differs")."""
    return {"vlink_rate_gbps": link.gbps} if link is not None and link.shaped else {}


def link_of(extra: Mapping[str, Any]) -> LinkRate | None:
    """The link rate a record carries (None: unknown)."""
    rate = extra.get(RATE_KEY)
    if rate is None:
        return None
    return LinkRate(float(rate), str(extra.get(SOURCE_KEY, "")))


# -- rates in bit/s as tc and users write them --------------------------------------------------

_RATE = re.compile(
    r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGtT]?)"
    r"(?:bit|b)?(?:/s)?\s*$"
)
_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
MIN_BIT_S, MAX_BIT_S = 1e6, 4e11  # 1 Mbit/s .. 400 Gbit/s


class RateError(ValueError):
    pass


def parse_bit_rate(text: str) -> float:
    """ "1G", "100M", "2.5Gbit", "1gbit/s", "1e9" -> bit/s (decimal prefixes, as tc's). Byte
    rates ("1GB", tc's "1gbps": gigabytes) are refused rather than guessed."""
    match = _RATE.match(text)
    if match is None or "B" in text:
        raise RateError(f"expected a bit rate such as 1G, 100M or 2.5Gbit, got {text!r}")
    value = float(match.group(1)) * _PREFIX[match.group(2).lower()]
    if not MIN_BIT_S <= value <= MAX_BIT_S:
        raise RateError(f"{text!r} is {format_bit_rate(value)}: must be 1 Mbit/s to 400 Gbit/s")
    return value


def format_bit_rate(bit_s: float) -> str:
    """1e9 -> "1 Gbit/s", 2.5e8 -> "250 Mbit/s"."""
    for prefix, factor in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if bit_s >= factor:
            return f"{bit_s / factor:g} {prefix}bit/s"
    return f"{bit_s:g} bit/s"
