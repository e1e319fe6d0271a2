"""Units as the field prints them: OSU's "Latency (us)" / "Bandwidth (MB/s)", sizes like "4MiB".

Every report formats numbers through here so the terminal, markdown and HTML agree.
"""

from __future__ import annotations

import math

from pytest_hpccomm.measure import link

# Seconds per one unit, for every time-like unit a peer may report.
TIME_UNITS: dict[str, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "usec": 1e-6,
    "ms": 1e-3,
    "msec": 1e-3,
    "s": 1.0,
    "sec": 1.0,
}
# Units whose numerator is a byte count: printed unscaled, like OSU and nccl-tests do.
_BYTE_RATE_PREFIXES = ("b/", "kb/", "mb/", "gb/", "tb/", "kib/", "mib/", "gib/", "gbit/", "mbit/")


def is_time_unit(unit: str) -> bool:
    return unit.strip() in TIME_UNITS


def is_rate_unit(unit: str) -> bool:
    return unit.strip().endswith("/s") and len(unit.strip()) > 2


def to_seconds(value: float, unit: str) -> float:
    return value * TIME_UNITS[unit.strip()]


def time_display_unit(seconds: float) -> tuple[str, float]:
    """(label, seconds per label-unit) for a time: OSU's µs across the usual range, ms/s beyond.

    The switch is at 100 ms (not 1 ms) so a 4 MiB sweep stays in one unit, as OSU prints it.
    """
    a = abs(seconds)
    if a >= 100.0:
        return "s", 1.0
    if a >= 0.1:
        return "ms", 1e-3
    return "us", 1e-6


def pretty_unit(unit: str) -> str:
    """Unit label for HTML/plots (the terminal keeps ASCII "us")."""
    return "µs" if unit in ("us", "usec", "μs") else unit


def fmt_value(
    value: float | None, unit: str, *, ref: float | None = None, ascii_only: bool = True
) -> str:
    """One number with its unit, 2 decimals like OSU. `ref` picks the scale, so a row's
    baseline and current medians share one unit and can be compared by eye. The terminal keeps
    OSU's ASCII "us"; markdown and HTML pass ascii_only=False for "µs"."""
    if value is None or not math.isfinite(value):
        return "-"
    if is_time_unit(unit):
        scale_from = to_seconds(ref if ref is not None else value, unit)
        label, per = time_display_unit(scale_from)
        label = label if ascii_only else pretty_unit(label)
        return f"{to_seconds(value, unit) / per:.2f} {label}"
    if is_rate_unit(unit):
        if unit.lower().startswith(_BYTE_RATE_PREFIXES):
            return f"{value:.2f} {unit}"
        return f"{_si(value, ref)} {unit}"
    return f"{value:.4g} {unit}".rstrip()


def fmt_range(
    lo: float | None,
    hi: float | None,
    unit: str,
    *,
    ref: float | None = None,
    ascii_only: bool = True,
) -> str:
    """ "1.55 – 1.70 µs": both ends on one scale, the unit written once."""
    if lo is None or hi is None:
        return "-"
    a = fmt_value(lo, unit, ref=ref, ascii_only=ascii_only)
    b = fmt_value(hi, unit, ref=ref, ascii_only=ascii_only)
    a_num, _, a_unit = a.partition(" ")
    b_num, _, b_unit = b.partition(" ")
    return f"{a_num} – {b}" if a_unit == b_unit else f"{a} – {b}"


def _si(value: float, ref: float | None) -> str:
    """Message rates span 1e3..1e8: SI prefixes keep them readable ("3.52M msg/s")."""
    a = abs(ref if ref is not None else value)
    for prefix, factor in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= factor:
            return f"{value / factor:.2f}{prefix}"
    return f"{value:.2f}"


def fmt_size(n: float) -> str:
    """Message size in bytes as OSU/nccl-tests users write it: 8B, 64KiB, 4MiB."""
    if not float(n).is_integer():
        return f"{n:g}B"
    i = int(n)
    for label, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if i >= factor and i % factor == 0:
            return f"{i // factor}{label}"
    return f"{i}B"


def fmt_ratio(ratio: float | None) -> str:
    if ratio is None or not math.isfinite(ratio):
        return "-"
    return f"{ratio:.3f}"


def is_byte_rate(unit: str) -> bool:
    return link.gbit_per_s(1.0, unit) is not None


def bytes_per_second(value: float, unit: str) -> float:
    """A data rate in B/s (measure/link.py's units: OSU's and TF-gRPC-Bench's MB/s is 10^6 B/s,
    perftest's records say MiB/s)."""
    gbps = link.gbit_per_s(value, unit)
    if gbps is None:
        raise ValueError(f"not a data rate: {unit!r}")
    return gbps * 1e9 / 8


def link_fraction(bytes_per_s: float, link_gbps: float) -> float:
    """Share of a link's signalling rate (Gbit/s, 10^9 bit/s) a byte rate uses."""
    return bytes_per_s * 8 / (link_gbps * 1e9)


def fmt_seconds(seconds: float | None, *, ascii_only: bool = False) -> str:
    """A latency given in seconds, on its own scale (µs, ms or s; 2 decimals as OSU)."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    return fmt_value(seconds, "s", ascii_only=ascii_only)
