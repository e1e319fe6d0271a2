"""The project's cache directory (XDG_CACHE_HOME, else ~/.cache): MPI envs, builds, history;
and the one-maker-at-a-time pattern of its cached builds (Horovod, the TensorFlow venv)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pytest_hpccomm.files import atomic_write, file_lock

P = TypeVar("P")


def cache_dir(
    name: str, env: Mapping[str, str] | None = None, override_var: str | None = None
) -> Path:
    """<cache>/pytest-hpccomm/<name>, or the path in `override_var` when that is set. Without
    HOME, the user's home from the password database: never a shared path such as /tmp, whose
    cached interpreters anyone could have put there and a root CI would then run."""
    env = os.environ if env is None else env
    if override_var and env.get(override_var):
        return Path(env[override_var])
    home = env.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir
    base = env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    return Path(base) / "pytest-hpccomm" / name


READY = "ready.json"  # written last, atomically: a build's directory is whole when it is there
VENV_PYTHON = Path("venv") / "bin" / "python"


def python_in(path: str | os.PathLike[str]) -> Path | None:
    """A Python executable named directly or by its venv/prefix (<dir>/bin/python); None when
    there is none."""
    p = Path(path)
    if p.is_dir():
        p = p / "bin" / "python"
    return p if p.is_file() else None


def probe_named_python(
    python: str | os.PathLike[str],
    option: str,
    probe: Callable[[Path], P],
    error: type[Exception],
) -> tuple[Path, P]:
    """A Python the user named with `option` and what `probe` read of it; `error` naming the
    option when the path is no Python or the probe fails (the path alone does not say which
    option named it)."""
    path = python_in(python)
    if path is None:
        raise error(f"{option}: {python} is not a Python executable")
    try:
        return path, probe(path)
    except error as exc:
        raise error(f"{option}: {exc}") from None


def ready(home: Path, key: str) -> dict[str, Any] | None:
    """The marker of a finished build in `home` for `key` (its venv's python present), or None."""
    try:
        meta: dict[str, Any] = json.loads((home / READY).read_text())
    except (OSError, ValueError):
        return None
    if meta.get("key") != key or not (home / VENV_PYTHON).is_file():
        return None
    return meta


def build_once(
    root: Path,
    key: str,
    make: Callable[[Path, float], dict[str, Any]],
    timeout: float,
    note: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], float]:
    """<root>/<key>'s marker, made first if missing: one maker at a time (a lock beside it;
    LockTimeout past `timeout`), who clears a killed build's leftovers and calls
    make(home, deadline); what make returns is kept in the marker under "probe", `note` beside
    it (what the key hashes, for a reader). Returns
    (marker, seconds the make took: 0 when it was there)."""
    home = root / key
    found = ready(home, key)
    if found is not None:
        return found, 0.0
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / f".{key}.lock", timeout):
        found = ready(home, key)  # another session made it while we waited
        if found is not None:
            return found, 0.0
        t0 = time.monotonic()
        shutil.rmtree(home, ignore_errors=True)  # a killed build's leftovers, never a whole one
        home.mkdir(parents=True)
        info = make(home, t0 + timeout)
        seconds = round(time.monotonic() - t0, 1)
        meta = {"key": key, "probe": info, "seconds": seconds, "built": time.time(), **(note or {})}
        atomic_write(home / READY, json.dumps(meta, indent=1))
    return meta, seconds
