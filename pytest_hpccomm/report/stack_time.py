"""The suite's own cost per stack: pytest's --durations, grouped by the stack an item checks.

An item's time is its setup, call and teardown, so a session fixture (a virtual cluster, a
pooled sweep run by the first item that needs it) counts for the stack whose item paid it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

OTHER = "other"  # items with no stack marker (the fabric suite, the plugin's own tests)


def stack_of(markers: Iterable[Any], params: Mapping[str, Any]) -> str:
    """`mpi (openmpi)`: the stack marker's name, and for MPI the implementation, since each
    MPI is a stack of its own to the user (its own build, its own sweeps)."""
    for mark in markers:
        if mark.name == "stack" and mark.args:
            name = str(mark.args[0])
            impl = params.get("mpi_name")
            return f"{name} ({impl})" if impl and name == "mpi" else name
    return OTHER


@dataclass
class StackTimes:
    """Accumulates (stack, item, seconds, outcome); pure, so the plugin feeds it reports."""

    items: dict[str, dict[str, float]] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)

    def add(self, stack: str, nodeid: str, seconds: float, skipped: bool = False) -> None:
        per_item = self.items.setdefault(stack, {})
        per_item[nodeid] = per_item.get(nodeid, 0.0) + seconds
        if skipped:
            self.skipped[stack] = self.skipped.get(stack, 0) + 1

    def total(self, stack: str) -> float:
        return sum(self.items.get(stack, {}).values())

    def slowest(self, stack: str, n: int) -> list[tuple[str, float]]:
        """The `n` most expensive items of `stack`: (node id, seconds)."""
        return sorted(self.items[stack].items(), key=lambda kv: -kv[1])[:n]

    def stacks(self) -> list[str]:
        """Most expensive first."""
        return sorted(self.items, key=lambda s: (-self.total(s), s))

    def as_dict(self, slowest: int = 3) -> dict[str, Any]:
        """For results JSON: seconds, item counts and the slowest items of each stack."""
        out: dict[str, Any] = {}
        for stack in self.stacks():
            out[stack] = {
                "seconds": round(self.total(stack), 2),
                "items": len(self.items[stack]),
                "skipped": self.skipped.get(stack, 0),
                "slowest": [
                    {"item": k, "seconds": round(v, 2)} for k, v in self.slowest(stack, slowest)
                ],
            }
        return out

    def lines(self, wall: float | None = None, slowest: int = 1) -> list[str]:
        """Terminal lines: one per stack (seconds, share of the items' time, item count) and
        its slowest item, then what the items add up to against the session's wall time."""
        whole = sum(self.total(s) for s in self.items)
        if not whole:
            return []
        width = max(len(s) for s in self.items)
        out = []
        for stack in self.stacks():
            per_item = self.items[stack]
            skipped = self.skipped.get(stack, 0)
            out.append(
                f"{stack:<{width}}  {_clock(self.total(stack)):>8}  "
                f"{100 * self.total(stack) / whole:5.1f} %  {_items(len(per_item))}"
                + (f" ({skipped} skipped)" if skipped else "")
            )
            for nodeid, secs in self.slowest(stack, slowest):
                out.append(f"{'':<{width}}  {_clock(secs):>8}  slowest: {nodeid}")
        tail = f"items {_clock(whole)}"
        if wall is not None:
            tail += f", session wall {_clock(wall)} (collection, reports and start-up: the rest)"
        return out + [tail]


def _items(n: int) -> str:
    return f"{n} item" if n == 1 else f"{n} items"


def _clock(seconds: float) -> str:
    """`7.3 s` below a minute, `4:05` (min:s) above."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}:{secs:02d}"
