"""The environment a peer program starts with, for every stack.

Peers run `python -m pytest_hpccomm.stacks.<stack>.<peer>` from Pythons that did not install
this project (the per-MPI venvs, a virtual host's shell, a copy of the checkout): the project
root goes first on PYTHONPATH. PYTHONDONTWRITEBYTECODE: peers leave no __pycache__ in the
checkout. Caller extras (the control channel's address and key, MPI tuning) come last, in the
order given: keep the order a driver produces (launchers forward the names sorted, but the
environment block itself is passed on as built).

inherit=True starts from os.environ (keeping an inherited PYTHONPATH after the root): for jobs
started directly, since start_job replaces the environment with the one it is given. MPI jobs
use inherit=False: their launchers lay these variables over os.environ themselves
(launchers/spec.base_env), and an inherited PYTHONPATH would reach a Python of another venv.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def peer_env(
    extra: Mapping[str, str] | None = None, *, inherit: bool = False, own_python: bool = False
) -> dict[str, str]:
    """PYTHONPATH, PYTHONDONTWRITEBYTECODE, then `extra`; over os.environ when `inherit`.
    own_python: the peers run this very interpreter (a system mpirun with this Python's
    mpi4py), so the PYTHONPATH it was given names its modules and is kept after the root."""
    if not inherit:
        path = [str(PROJECT_ROOT)]
        if own_python and os.environ.get("PYTHONPATH"):
            path.append(os.environ["PYTHONPATH"])
        return {
            "PYTHONPATH": os.pathsep.join(path),
            "PYTHONDONTWRITEBYTECODE": "1",
            **(extra or {}),
        }
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra or {})
    return env
