"""Message-size specs as users of OSU (-m MIN:MAX) and nccl-tests (-b/-e) write them.

Accepted: a range "MIN:MAX" (powers of two from MIN to MAX, OSU style) and/or a comma list
("0,8,1K,64KiB,1M"). Suffixes are binary (K = KiB = 1024), as in OSU and nccl-tests.
"""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
}
_SIZE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


class SizeSpecError(ValueError):
    pass


def parse_size(text: str) -> int:
    m = _SIZE.match(text)
    if not m or m.group(2).lower() not in _UNITS:
        raise SizeSpecError(f"bad message size {text!r} (expected e.g. 8, 64K, 4MiB)")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def powers_of_two(lo: int, hi: int) -> list[int]:
    """OSU's sweep: 0 or 1 first if asked, then every power of two up to hi."""
    if lo > hi:
        raise SizeSpecError(f"bad size range {lo}:{hi}: min is larger than max")
    out = [0] if lo == 0 else []
    size = max(lo, 1)
    # OSU starts at the given minimum and doubles; a non-power-of-two minimum doubles from itself
    while size <= hi:
        out.append(size)
        size *= 2
    return out


def parse_size_spec(spec: str) -> list[int]:
    """ "1:4M" -> [1, 2, 4, ..., 4194304]; "0,8,1K" -> [0, 8, 1024]; mixtures allowed."""
    sizes: set[int] = set()
    parts = [p for p in spec.split(",")]
    if not spec.strip() or any(not p.strip() for p in parts):
        raise SizeSpecError(f"bad size spec {spec!r}: empty element")
    for part in parts:
        if ":" in part:
            lo_text, _, hi_text = part.partition(":")
            sizes.update(powers_of_two(parse_size(lo_text), parse_size(hi_text)))
        else:
            sizes.add(parse_size(part))
    return sorted(sizes)


def format_size(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor}{unit}"
    return f"{n}B"
