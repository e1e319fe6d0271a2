"""The Python the Python peers (sync and asyncio servers, Python clients of the benchmarks) run:
this interpreter (the default), a Python or venv the user names (`--hpc-grpc-python PATH`),
or a grpcio release from the package index (`--hpc-grpc-python grpcio==1.60.1`), made once
into a venv under the cache on first use.

A release's venv holds that grpcio (binary wheels only: an sdist would compile gRPC's core for
an hour) and this interpreter's protobuf, so the release axis moves grpcio alone. The Python
client of the conformance suite stays this interpreter's grpcio (it runs inside pytest): a
release's servers answer it and the native client, which is the interop the specification
describes. The peers report the grpcio they imported in their READY line and results.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from pytest_hpccomm.cache import VENV_PYTHON, build_once, cache_dir, python_in
from pytest_hpccomm.errors import Broken
from pytest_hpccomm.files import LockTimeout
from pytest_hpccomm.package_index import ask_index
from pytest_hpccomm.proc.jobs import run_job
from pytest_hpccomm.stacks.venv import base_python, make_venv

RELEASE = re.compile(r"^grpcio==([0-9][0-9A-Za-z.+]*)$")
THIS = ""  # the option's default: this interpreter's grpcio
RECIPE = 1  # bump when the steps below change
CACHE_VAR = "HPCCOMM_GRPCIO_CACHE"
CREATE_TIMEOUT = 600.0


class PythonEnvError(Broken):
    """A release's venv could not be made, or a named Python has no usable grpcio."""


def is_release(spec: str) -> bool:
    return RELEASE.match(spec) is not None


def released_versions() -> tuple[str, ...]:
    """grpcio's releases with a wheel for this interpreter on the package index (as pip is
    configured), newest first; () when the index did not answer."""
    return ask_index("grpcio", sys.executable, only_binary=True).versions


def spec_error(spec: str, named: str = "") -> str | None:
    """Why `spec` names no Python for the peers (a usage error), None when it does: a
    release the index lacks is named with the releases it has. `named`: how the user named
    it (default `--hpc-grpc-python SPEC`)."""
    if spec == THIS:
        return None
    option = named or f"--hpc-grpc-python {spec}"
    m = RELEASE.match(spec)
    if m is None:
        if spec.startswith("grpcio"):
            return f"{option}: a release is grpcio==VERSION"
        if python_in(spec) is None:
            return (
                f"{option}: not a Python executable or venv "
                "(a Python with grpcio, its venv, or grpcio==VERSION)"
            )
        return None
    what = f" with a wheel for Python {sys.version_info.major}.{sys.version_info.minor}"
    return ask_index("grpcio", sys.executable, only_binary=True).missing(m.group(1), what, option)


def protobuf_requirement() -> str:
    """This interpreter's protobuf, pinned in every release's venv (the peers' messages)."""
    return f"protobuf=={metadata.version('protobuf')}"


def cache_root() -> Path:
    return cache_dir("grpcio", None, CACHE_VAR)


def cache_key(spec: str) -> str:
    text = json.dumps(
        {
            "recipe": RECIPE,
            "req": spec,
            "protobuf": protobuf_requirement(),
            "python": sys.version.split()[0],
            "base": base_python(),
        },
        sort_keys=True,
    )
    return f"{spec.replace('==', '-')}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


GRPC_VERSION = "import grpc, json; print(json.dumps({'grpcio': grpc.__version__}))"


def probe(python: Path, timeout: float = 60.0) -> dict[str, Any]:
    """The grpcio that Python imports ({"grpcio": "1.60.1"})."""
    res = run_job(
        [str(python), "-c", GRPC_VERSION], dict(os.environ), timeout=timeout, label="grpcio probe"
    )
    if not res.ok:
        tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-6:])
        raise PythonEnvError(f"{python}: importing grpc failed ({res.describe()}):\n{tail}")
    try:
        out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise PythonEnvError(f"{python}: the grpcio probe printed {res.stdout[-200:]!r}") from None
    return out


def _create(spec: str, home: Path, deadline: float) -> dict[str, Any]:
    venv = home / "venv"
    install = ["--only-binary", ":all:", spec, protobuf_requirement()]
    make_venv(venv, deadline, install, spec, PythonEnvError, "grpcio venv")
    return probe(venv / "bin" / "python", max(1.0, deadline - time.monotonic()))


def peer_python(spec: str, timeout: float = CREATE_TIMEOUT) -> tuple[str, str]:
    """(the Python executable, the grpcio it imports) for the option's value; a release's
    venv is made first when missing (one maker at a time)."""
    if spec == THIS:
        return sys.executable, metadata.version("grpcio")
    if is_release(spec):
        key, root = cache_key(spec), cache_root()
        try:
            meta, _ = build_once(
                root,
                key,
                lambda home, deadline: _create(spec, home, deadline),
                timeout,
                {"req": spec, "protobuf": protobuf_requirement()},
            )
        except LockTimeout as exc:
            raise PythonEnvError(f"{spec}: {exc} (another session is making its venv)") from None
        return str(root / key / VENV_PYTHON), str(meta["probe"]["grpcio"])
    path = python_in(spec)
    if path is None:
        raise PythonEnvError(f"{spec} is not a Python executable")
    return str(path), str(probe(path)["grpcio"])
