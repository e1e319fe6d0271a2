"""The mutation catalogue: realistic defects of the stacks, planted in the peer side.

Each `<stack>.toml` beside this file lists mutants: one exact text replacement in one file of
the package (`find` must occur exactly once). They are applied to scratch copies only
(run.py), never to the checkout or the installed package.
"""

from __future__ import annotations

import py_compile
import shutil
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
STACKS = ("mpi", "grpc", "verbs")
# what a scratch copy holds: the package, the suites and the pytest configuration
COPIED = ("pytest_hpccomm", "hpccomm_suites", "pyproject.toml", "ci")


@dataclass(frozen=True)
class Mutant:
    id: str
    stack: str
    defect: str  # one line, as a bug report would say it
    file: str  # relative to the repo root
    find: str
    replace: str
    select: tuple[str, ...] = field(default=())  # pytest args; () = the stack's default


def load(stacks: tuple[str, ...] = STACKS, directory: Path = HERE) -> list[Mutant]:
    out: list[Mutant] = []
    for stack in stacks:
        path = directory / f"{stack}.toml"
        if not path.is_file():
            continue
        with path.open("rb") as f:
            doc = tomllib.load(f)
        for raw in doc.get("mutant", []):
            out.append(
                Mutant(
                    id=str(raw["id"]),
                    stack=stack,
                    defect=str(raw["defect"]),
                    file=str(raw["file"]),
                    find=str(raw["find"]),
                    replace=str(raw["replace"]),
                    select=tuple(str(a) for a in raw.get("select", ())),
                )
            )
    return out


def problems(mutants: list[Mutant], root: Path = REPO) -> list[str]:
    """Why a mutant cannot be applied as written (empty: all good): unique ids, a peer file
    that exists, `find` exactly once, a change that is a change, Python that still compiles."""
    out: list[str] = []
    seen: set[str] = set()
    for m in mutants:
        if m.id in seen:
            out.append(f"{m.id}: duplicate id")
        seen.add(m.id)
        if not m.id.startswith(f"{m.stack}-"):
            out.append(f"{m.id}: id must start with '{m.stack}-'")
        path = root / m.file
        if not path.is_file():
            out.append(f"{m.id}: no file {m.file}")
            continue
        text = path.read_text()
        n = text.count(m.find)
        if n != 1:
            out.append(f"{m.id}: `find` occurs {n} times in {m.file} (needs exactly 1)")
            continue
        if m.find == m.replace:
            out.append(f"{m.id}: `replace` equals `find`")
        if path.suffix == ".py":
            with tempfile.TemporaryDirectory() as tmp:
                mutated = Path(tmp) / path.name
                mutated.write_text(text.replace(m.find, m.replace))
                try:
                    py_compile.compile(str(mutated), doraise=True)
                except py_compile.PyCompileError as exc:
                    out.append(f"{m.id}: mutated {m.file} does not compile: {exc.msg.strip()}")
    return out


def scratch_copy(dest: Path, mutant: Mutant | None, root: Path = REPO) -> Path:
    """A copy of the tracked files the suites need, with `mutant` applied; returns `dest`."""
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--", *COPIED],
        check=True,
        capture_output=True,
        timeout=60,
    ).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src = root / rel
        if not src.is_file():  # deleted in the work tree
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    if mutant is not None:
        path = dest / mutant.file
        text = path.read_text()
        if text.count(mutant.find) != 1:
            raise ValueError(f"{mutant.id}: `find` is not exactly once in {mutant.file}")
        path.write_text(text.replace(mutant.find, mutant.replace))
    return dest
