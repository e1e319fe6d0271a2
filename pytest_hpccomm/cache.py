"""The project's cache directory (XDG_CACHE_HOME, else ~/.cache): MPI envs, builds, history."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def cache_dir(name: str, env: Mapping[str, str] | None = None,
              override_var: str | None = None) -> Path:
    """<cache>/pytest-hpccomm/<name>, or the path in `override_var` when that is set."""
    env = os.environ if env is None else env
    if override_var and env.get(override_var):
        return Path(env[override_var])
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or "/tmp", ".cache")
    return Path(base) / "pytest-hpccomm" / name
