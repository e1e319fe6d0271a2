"""`hpccomm baselines show|diff|promote|prune`: look after a baseline directory by hand, through
the store's one interface (locked, atomic rewrites: a session updating the same file at the
same time loses nothing).

show: the sets, or one set's entries with their sessions and medians; diff: two systems' sets
point by point (ratio of medians); promote: copy a system's sets (and host probes) under
another system name, e.g. a set taken on a new node type into the name the nightly judges
against; prune: drop old sessions of each entry, or entries by key or last session date."""

from __future__ import annotations

import argparse
import fnmatch
import functools
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable, TextIO

from pytest_hpccomm.baselines.store import (
    BaselineEntry,
    BaselineFileError,
    BaselineStore,
    JsonBaselineStore,
)
from pytest_hpccomm.baselines.verdict import between_sessions_sd
from pytest_hpccomm.files import atomic_write, updating
from pytest_hpccomm.report.terminal import text_table


def _num(x: float) -> str:
    return f"{x:.4g}"


def _spread(e: BaselineEntry) -> str:
    """The spread between sessions the verdicts use (verdict.between_sessions_sd: the sd of the
    sessions' log medians), '-' below the MIN_SESSIONS it needs."""
    sd = between_sessions_sd(e.session_medians)
    return "-" if sd is None else f"{sd * 100:.1f}%"


def _selected(
    store: BaselineStore, args: argparse.Namespace, system: str | None = None
) -> list[tuple[str, str, str]]:
    want = system if system is not None else args.system
    return [
        s
        for s in store.sets()
        if (want is None or s[0] == want)
        and (args.fabric is None or s[1] == args.fabric)
        and (args.stack is None or s[2] == args.stack)
    ]


def show(store: BaselineStore, args: argparse.Namespace, out: TextIO) -> int:
    sets = _selected(store, args)
    if not sets:
        out.write(f"no baseline set matches under {args.root}\n")
        return 1
    if len(sets) > 1 or not args.entries:
        rows = [["SYSTEM", "FABRIC", "STACK", "ENTRIES", "SESSIONS", "LAST SESSION (UTC)"]]
        for system, fabric, stack in sets:
            entries = store.load(system, fabric, stack).values()
            counts = sorted(len(e.levels) for e in entries)
            last = max((e.levels[-1][0] for e in entries), default="-")
            rows.append(
                [
                    system,
                    fabric,
                    stack,
                    str(len(counts)),
                    f"{counts[0]}-{counts[-1]}"
                    if counts and counts[0] != counts[-1]
                    else str(counts[0] if counts else 0),
                    last,
                ]
            )
        text_table(rows, out)
        if args.entries and len(sets) > 1:
            out.write("--entries lists one set: name --system, --fabric and --stack\n")
        return 0
    system, fabric, stack = sets[0]
    rows = [["KEY", "SESSIONS", "MEDIAN", "UNIT", "SPREAD", "LAST SESSION (UTC)"]]
    for key, e in sorted(store.load(system, fabric, stack).items()):
        rows.append([key, str(len(e.levels)), _num(e.median), e.unit, _spread(e), e.levels[-1][0]])
    text_table(rows, out)
    return 0


def diff(store: BaselineStore, args: argparse.Namespace, out: TextIO) -> int:
    """B over A per key of the sets both systems hold (fabric, stack); keys of one only."""
    a_sets = {s[1:] for s in _selected(store, args, args.a)}
    b_sets = {s[1:] for s in _selected(store, args, args.b)}
    rows = [["FABRIC", "STACK", "KEY", f"{args.a} MEDIAN", f"{args.b} MEDIAN", "B/A"]]
    only: list[str] = []
    for fabric, stack in sorted(a_sets | b_sets):
        a = store.load(args.a, fabric, stack) if (fabric, stack) in a_sets else {}
        b = store.load(args.b, fabric, stack) if (fabric, stack) in b_sets else {}
        only += [f"only in {args.a}: {fabric}/{stack} {k}" for k in sorted(a.keys() - b.keys())]
        only += [f"only in {args.b}: {fabric}/{stack} {k}" for k in sorted(b.keys() - a.keys())]
        for key in sorted(a.keys() & b.keys()):
            ea, eb = a[key], b[key]
            ratio = eb.median / ea.median if ea.median else math.nan
            rows.append(
                [
                    fabric,
                    stack,
                    key,
                    f"{_num(ea.median)} {ea.unit}",
                    f"{_num(eb.median)} {eb.unit}",
                    f"{ratio:.3f}",
                ]
            )
    if len(rows) == 1 and not only:
        out.write(f"neither {args.a} nor {args.b} has a matching set under {args.root}\n")
        return 1
    if len(rows) > 1:
        text_table(rows, out)
    for line in only:
        out.write(line + "\n")
    return 0


def _replacing(
    entries: dict[str, BaselineEntry],
) -> Callable[[dict[str, BaselineEntry]], dict[str, BaselineEntry]]:
    return lambda _old: dict(entries)


def promote(store: JsonBaselineStore, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Copy FROM's sets under TO (entries as they are; each file rewritten with TO's name)."""
    sets = _selected(store, args, args.source)
    if not sets:
        err.write(
            f"hpccomm baselines: error: no set of system {args.source!r} matches under "
            f"{args.root}\n"
        )
        return 2
    taken = [s for s in sets if store.path(args.target, s[1], s[2]).exists()]
    if taken and not args.force:
        err.write(
            "hpccomm baselines: error: "
            + ", ".join(str(store.path(args.target, f, st)) for _, f, st in taken)
            + " exist (--force replaces them)\n"
        )
        return 2
    for _, fabric, stack in sets:
        entries = store.load(args.source, fabric, stack)
        store.rewrite(args.target, fabric, stack, _replacing(entries))
        out.write(
            f"{store.path(args.source, fabric, stack)} -> "
            f"{store.path(args.target, fabric, stack)} ({len(entries)} entries)\n"
        )
    for fabric in sorted({f for _, f, _ in sets}):
        src, dst = store.host_file(args.source, fabric), store.host_file(args.target, fabric)
        if src.exists():
            with updating(dst):
                atomic_write(dst, src.read_text(encoding="utf-8"), mode=0o644)
            out.write(f"{src} -> {dst}\n")
    return 0


def prune(store: BaselineStore, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.sessions is None and args.before is None and args.key is None:
        err.write("hpccomm baselines: error: prune needs --sessions, --before or --key\n")
        return 2
    sets = _selected(store, args)
    if not sets:
        out.write(f"no set of system {args.system!r} matches under {args.root}\n")
        return 1
    for system, fabric, stack in sets:
        notes: list[str] = []
        store.rewrite(system, fabric, stack, functools.partial(_pruned, args=args, notes=notes))
        head = f"{store.path(system, fabric, stack)}"
        for note in notes:
            out.write(f"{head}: {'would have ' if args.dry_run else ''}{note}\n")
    return 0


def _pruned(
    entries: dict[str, BaselineEntry], args: argparse.Namespace, notes: list[str]
) -> dict[str, BaselineEntry]:
    """What prune leaves of a set (all of it on --dry-run), each change said in `notes`."""
    kept: dict[str, BaselineEntry] = {}
    for key, e in entries.items():
        if args.key is not None and fnmatch.fnmatchcase(key, args.key):
            notes.append(f"removed {key} (matches {args.key})")
        elif args.before is not None and e.levels[-1][0] < args.before:
            notes.append(f"removed {key} (last session {e.levels[-1][0]})")
        elif args.sessions is not None and len(e.sessions) > args.sessions:
            notes.append(f"{key}: kept the last {args.sessions} of {len(e.sessions)} sessions")
            kept[key] = replace(e, sessions=e.sessions[-args.sessions :])
        else:
            kept[key] = e
    return entries if args.dry_run else kept


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hpccomm baselines", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--root",
        type=Path,
        default=Path("baselines"),
        help="the baseline directory (--hpc-baselines; default ./baselines)",
    )
    sub = p.add_subparsers(dest="verb", required=True)

    def scoped(q: argparse.ArgumentParser, system: bool = True) -> None:
        if system:
            q.add_argument("--system")
        q.add_argument("--fabric")
        q.add_argument("--stack")

    s = sub.add_parser("show", help="the sets, or one set's entries (--entries)")
    scoped(s)
    s.add_argument("--entries", action="store_true", help="list the entries of the one set")
    d = sub.add_parser("diff", help="two systems' sets point by point (B/A of the medians)")
    d.add_argument("a", metavar="SYSTEM_A")
    d.add_argument("b", metavar="SYSTEM_B")
    scoped(d, system=False)
    m = sub.add_parser("promote", help="copy a system's sets under another system name")
    m.add_argument("source", metavar="FROM")
    m.add_argument("target", metavar="TO")
    m.add_argument("--force", action="store_true", help="replace TO's sets that exist")
    scoped(m, system=False)
    r = sub.add_parser("prune", help="drop old sessions, or entries by key or date")
    scoped(r)
    r.add_argument(
        "--sessions",
        type=int,
        metavar="N",
        help="keep the last N sessions of each entry (a set claims nothing below 3)",
    )
    r.add_argument(
        "--before",
        metavar="DATE",
        help="remove entries whose last session is older (ISO date, UTC)",
    )
    r.add_argument("--key", metavar="GLOB", help="remove entries whose key matches")
    r.add_argument("--dry-run", action="store_true", help="say what would change")
    return p


def main(
    argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if getattr(args, "sessions", None) is not None and args.sessions < 1:
        err.write("hpccomm baselines: error: --sessions must be at least 1\n")
        return 2
    if not args.root.is_dir():
        err.write(f"hpccomm baselines: error: no baseline directory {args.root}\n")
        return 2
    store = JsonBaselineStore(args.root)
    try:
        if args.verb == "show":
            return show(store, args, out)
        if args.verb == "diff":
            return diff(store, args, out)
        if args.verb == "promote":
            return promote(store, args, out, err)
        return prune(store, args, out, err)
    except (BaselineFileError, ValueError) as exc:
        err.write(f"hpccomm baselines: error: {exc}\n")
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
