"""The verbs stack under test: a Python whose pyverbs (and so whose rdma-core) the peers use.

`--hpc-verbs-python PY` names one (a venv or an interpreter, e.g. an rdma-core build's), and a
paired A/B run names two (`--hpc-base verbs=PY --hpc-candidate verbs=PY`). The default is this
Python. The probe imports pyverbs in that Python and reads which libibverbs it loaded: the
library's file name carries rdma-core's version (libibverbs.so.1.14.44.0: rdma-core 44).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_hpccomm.cache import python_in
from pytest_hpccomm.errors import Broken, Unavailable
from pytest_hpccomm.proc.jobs import run_job

THIS, NONE = "this", "none"  # this Python; no verbs
OPTION = "--hpc-verbs-python"
PROBE_TIMEOUT = 120.0  # importing pyverbs takes ~10 s under TCG emulation
PROBE = """
import json, os, sys
import pyverbs.device
libs = sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libibverbs.so' in l})
print(json.dumps({'python': sys.executable, 'prefix': sys.prefix,
                  'pyverbs': os.path.dirname(pyverbs.__file__), 'libibverbs': libs}))
"""


class VerbsUnavailable(Unavailable):
    """This Python has no pyverbs: absent, and not asked for (a skip, unless a side named it)."""


class VerbsEnvError(Broken):
    """A Python the user named has no working pyverbs: a failure naming it."""


@dataclass(frozen=True)
class VerbsEnv:
    """A Python with pyverbs, and the fingerprint's facts about it."""

    python: str
    prefix: str
    pyverbs: str
    libibverbs: str  # the real path of the libibverbs it loaded

    @property
    def rdma_core(self) -> str:
        """rdma-core's version from libibverbs' file name (libibverbs.so.1.14.44.0 -> 44)."""
        parts = Path(self.libibverbs).name.split(".so.")[-1].split(".")
        return parts[2] if len(parts) >= 3 else ""

    def fingerprint(self) -> dict[str, Any]:
        return {
            "verbs_python": self.python,
            "verbs_prefix": self.prefix,
            "libibverbs": self.libibverbs,
            "rdma_core": self.rdma_core,
        }


def resolve(spec: str) -> VerbsEnv:
    """`this` (this Python: VerbsUnavailable without pyverbs) or a Python/venv the user named
    (VerbsEnvError when it is none or its pyverbs does not import)."""
    if spec == NONE:
        raise VerbsUnavailable(f"verbs opted out ({OPTION}={NONE})")
    named = spec != THIS
    python = Path(sys.executable) if not named else python_in(spec)
    if python is None:
        raise VerbsEnvError(
            f"{spec} is not a Python executable (a Python with pyverbs or its venv)"
        )
    got = run_job([str(python), "-c", PROBE], timeout=PROBE_TIMEOUT, label="pyverbs probe")
    if not got.ok:
        why = f"pyverbs does not import in {python}: {got.describe()}"
        if named:
            raise VerbsEnvError(why)
        raise VerbsUnavailable(f"{why} (apt-get install python3-pyverbs)")
    info = json.loads(got.stdout.strip().splitlines()[-1])
    libs = [str(Path(p).resolve()) for p in info["libibverbs"]]
    return VerbsEnv(
        python=str(python),
        prefix=str(info["prefix"]),
        pyverbs=str(info["pyverbs"]),
        libibverbs=libs[0] if libs else "",
    )
