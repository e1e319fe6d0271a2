"""Host lists: --hpc-hosts, MPI hostfiles, and the SLURM allocation.

Every parser raises HostSpecError with one line naming the input and what is wrong; the plugin
turns it into a usage error (exit 4). A host named twice gets its slots added, as in an Open
MPI or Hydra hostfile.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

MAX_HOSTS = 65536  # a typo such as node[1-9999999] must fail, not eat the memory

# RFC 1123 names (also IPv4 addresses); "_" is tolerated because real clusters use it.
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?\Z")


class HostSpecError(ValueError):
    """A malformed host list, hostfile or SLURM variable (message: one line)."""


@dataclass(frozen=True)
class Host:
    name: str
    slots: int = 1

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise HostSpecError(f"host name {self.name!r}: not a valid host name")
        if self.slots < 1:
            raise HostSpecError(f"host {self.name!r}: slots must be >= 1, not {self.slots}")


def _merge(pairs: Iterable[tuple[str, int]]) -> list[Host]:
    slots: dict[str, int] = {}
    for name, n in pairs:
        slots[name] = slots.get(name, 0) + n
    return [Host(name, n) for name, n in slots.items()]


def _slots(text: str, where: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise HostSpecError(f"{where}: slot count {text!r} is not a positive integer")
    return int(text)


def _name(text: str, where: str) -> str:
    if not _NAME.match(text):
        raise HostSpecError(f"{where}: {text!r} is not a valid host name")
    return text


def parse_host_list(spec: str) -> list[Host]:
    """ "a,b:2,c" -> [Host(a,1), Host(b,2), Host(c,1)] (the --hpc-hosts form, as Hydra's -hosts)."""
    where = f"host list {spec!r}"
    if not spec.strip():
        raise HostSpecError(f"{where}: empty")
    pairs = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            raise HostSpecError(f"{where}: empty entry (doubled or trailing comma)")
        name, sep, n = item.partition(":")
        pairs.append((_name(name, where), _slots(n, where) if sep else 1))
    return _merge(pairs)


_OMPI_KEYS = {"slots", "max_slots", "max-slots", "slot", "cpu", "count"}


def parse_hostfile(path: str | os.PathLike[str]) -> list[Host]:
    """Open MPI (`node1 slots=4 max_slots=8`) and MPICH/Hydra (`node1:4`) hostfiles; `#`
    comments and blank lines are skipped. slots default to 1 (Open MPI's default is the core
    count of the remote node, which we cannot know without logging in)."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise HostSpecError(f"hostfile {os.fspath(path)}: cannot read: {e}") from None
    pairs = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"hostfile {os.fspath(path)}, line {lineno}"
        words = line.split()
        name, colon, n = words[0].partition(":")
        name = _name(name, where)
        slots = _slots(n, where) if colon else None
        max_slots = None
        for word in words[1:]:
            key, eq, value = word.partition("=")
            if not eq or key not in _OMPI_KEYS:
                raise HostSpecError(
                    f"{where}: unknown field {word!r} (expected slots=N or max_slots=N)"
                )
            if key in ("max_slots", "max-slots"):
                max_slots = _slots(value, where)
            elif slots is not None:
                raise HostSpecError(f"{where}: slot count given twice")
            else:
                slots = _slots(value, where)
        if max_slots is not None and slots is not None and slots > max_slots:
            raise HostSpecError(f"{where}: slots={slots} exceeds max_slots={max_slots}")
        pairs.append((name, slots or 1))
    if not pairs:
        raise HostSpecError(f"hostfile {os.fspath(path)}: no hosts in it")
    return _merge(pairs)


# -- SLURM ------------------------------------------------------------------------------------


def _split_top(text: str, where: str) -> list[str]:
    """Split on commas that are not inside [...]."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostSpecError(f"{where}: nested '['")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostSpecError(f"{where}: ']' without '['")
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise HostSpecError(f"{where}: '[' without ']'")
    out.append(cur)
    return out


def _expand_ranges(body: str, where: str) -> list[str]:
    """'01-04,07' -> ['01','02','03','04','07']; width of the low end is kept (zero padding)."""
    out: list[str] = []
    for part in body.split(","):
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise HostSpecError(f"{where}: bad range {part!r} in [{body}]")
        if not dash:
            out.append(lo)
            continue
        a, b = int(lo), int(hi)
        if a > b:
            raise HostSpecError(f"{where}: range {part!r} runs backwards")
        if b - a >= MAX_HOSTS:
            raise HostSpecError(f"{where}: range {part!r} is larger than {MAX_HOSTS} hosts")
        out.extend(f"{i:0{len(lo)}d}" for i in range(a, b + 1))
    return out


def expand_slurm_nodelist(nodelist: str) -> list[str]:
    """ "node[01-04,07],gpu-a[1-2],login" -> node01..node04, node07, gpu-a1, gpu-a2, login.
    Several bracket groups in one name expand as a product: "r[1-2]n[1-2]" -> r1n1, r1n2, ..."""
    where = f"SLURM node list {nodelist!r}"
    if not nodelist.strip():
        raise HostSpecError(f"{where}: empty")
    names: list[str] = []
    for item in _split_top(nodelist.strip(), where):
        if not item:
            raise HostSpecError(f"{where}: empty entry (doubled or trailing comma)")
        expanded = [""]
        # re.split with a group: even indices are literal text, odd ones bracket bodies
        for i, part in enumerate(re.split(r"\[([^\]]*)\]", item)):
            if i % 2 and not part:
                raise HostSpecError(f"{where}: empty brackets in {item!r}")
            choices = _expand_ranges(part, where) if i % 2 else [part]
            expanded = [e + c for e in expanded for c in choices]
            if len(expanded) + len(names) > MAX_HOSTS:
                raise HostSpecError(f"{where}: expands to more than {MAX_HOSTS} hosts")
        names.extend(_name(n, where) for n in expanded)
    return names


def _expand_tasks(spec: str, count: int, where: str) -> list[int]:
    """SLURM_TASKS_PER_NODE "2(x3),1" -> [2, 2, 2, 1]."""
    out: list[int] = []
    for part in spec.split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if not m:
            raise HostSpecError(f"{where}: bad entry {part!r} (expected N or N(xM))")
        out.extend([_slots(m.group(1), where)] * int(m.group(2) or 1))
    if len(out) != count:
        raise HostSpecError(f"{where}: gives {len(out)} nodes but the node list has {count}")
    return out


def hosts_from_slurm(env: Mapping[str, str] | None = None) -> list[Host]:
    """Hosts of the current SLURM allocation: SLURM_JOB_NODELIST, slots from
    SLURM_NTASKS_PER_NODE (one number for all) or SLURM_TASKS_PER_NODE ("2(x3),1"), else 1."""
    env = os.environ if env is None else env
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if not nodelist:
        raise HostSpecError("SLURM_JOB_NODELIST is not set: not inside a SLURM allocation")
    names = expand_slurm_nodelist(nodelist)
    if len(set(names)) != len(names):
        raise HostSpecError(f"SLURM node list {nodelist!r}: names a node twice")
    per_node = env.get("SLURM_NTASKS_PER_NODE")
    if per_node:
        n = _slots(per_node.strip(), f"SLURM_NTASKS_PER_NODE={per_node!r}")
        slots = [n] * len(names)
    elif env.get("SLURM_TASKS_PER_NODE"):
        spec = env["SLURM_TASKS_PER_NODE"]
        slots = _expand_tasks(spec, len(names), f"SLURM_TASKS_PER_NODE={spec!r}")
    else:
        slots = [1] * len(names)
    return [Host(name, n) for name, n in zip(names, slots)]
