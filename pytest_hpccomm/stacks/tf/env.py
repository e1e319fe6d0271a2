"""The TensorFlow to test: a venv of its own under the project's cache, a release's, or the
user's.

TensorFlow pins its own numpy and protobuf, so it never goes into the project's venv: the
bootstrap (`hpccomm tf-env`) makes `<cache>/tf/<key>/venv` with
tensorflow-cpu pinned, keyed by the requirement and the interpreter (~70 s, 1.6 GB cold; a
later run reads a marker and takes milliseconds). `--hpc-tf-python tensorflow-cpu==2.20.0`
names a release of the package index's wheel instead: its venv is made once on first use
beside it, `<cache>/tf/tensorflow-cpu-2.20.0-<key>/venv` (binary wheels only, pip resolving its
dependencies: TF_PINS are what 2.21.0 resolved to, and would contradict another release's
requirements), what pip resolved kept in its marker (`pip freeze --all`, the probe's
"freeze"); TF_REQ's own release is the pinned venv. `--hpc-tf-python PATH` names a cluster's
TensorFlow. TensorFlow links gRPC statically, so its gRPC cannot be swapped at run time;
the probe records the version compiled in (the fingerprint's `tensorflow_grpc`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from packaging.version import InvalidVersion, Version

from pytest_hpccomm.cache import VENV_PYTHON, build_once, cache_dir, probe_named_python, ready
from pytest_hpccomm.errors import Broken, build_main
from pytest_hpccomm.files import LockTimeout
from pytest_hpccomm.package_index import ask_index
from pytest_hpccomm.proc.jobs import JobResult, run_job
from pytest_hpccomm.stacks.venv import base_python, make_venv

TF_REQ = "tensorflow-cpu==2.21.0"  # current for Python 3.11; a new release is a new cache key
# What tensorflow-cpu 2.21.0 resolved to, pinned: a new protobuf, keras or numpy
# release must not change (or break) what a cached venv means, nor a cold one's import.
TF_PINS = (
    "absl-py==2.5.1",
    "astunparse==1.6.3",
    "certifi==2026.10.18",
    "charset-normalizer==3.5.2",
    "flatbuffers==25.12.19",
    "gast==0.7.0",
    "google-pasta==0.2.0",
    "grpcio==1.85.1",
    "h5py==3.14.0",
    "idna==3.20",
    "keras==3.15.1",
    "libclang==18.1.1",
    "markdown-it-py==4.3.0",
    "mdurl==0.1.2",
    "ml-dtypes==0.6.0",
    "namex==0.1.0",
    "numpy==2.4.6",
    "opt-einsum==3.4.0",
    "optree==0.20.0",
    "packaging==26.3",
    "protobuf==7.36.2",
    "pygments==2.21.0",
    "requests==2.34.2",
    "rich==15.0.0",
    "setuptools==84.2.1",
    "six==1.17.0",
    "termcolor==3.3.0",
    "typing-extensions==4.16.0",
    "urllib3==2.8.0",
    "wheel==0.48.0",
    "wrapt==2.5.2",
)
RECIPE = 2  # bump when the steps below change (or the probe)
RELEASE_RECIPE = 1  # bump when a release's steps change (a release's key has RECIPE too)
CACHE_VAR = "HPCCOMM_TF_CACHE"
CREATE_TIMEOUT = 1500.0

PACKAGE = "tensorflow-cpu"  # the wheel a release names: the CPU build, as TF_REQ is
RELEASE_FORM = f"{PACKAGE}==VERSION"
RELEASE = re.compile(rf"^{PACKAGE}==(\S+)$")
# written as a requirement (a release or a mistyped one), never a path: NAME then an operator
REQUIREMENT = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*\s*(\[[^\]]*\])?\s*(===|==|~=|!=|>=|<=|<|>|@)"
)


class TfEnvError(Broken):
    """Creating the venv (or importing the user's TensorFlow) failed: a failure."""


@dataclass(frozen=True)
class TfEnv:
    """A Python with TensorFlow, and the fingerprint's facts about it."""

    python: Path
    version: str
    git: str  # tf.version.GIT_VERSION
    grpc: str  # the gRPC compiled into TensorFlow ("" when the probe could not tell)
    origin: str  # "built" (this cache's pinned venv), "release" (a release's venv) or "user"
    seconds: float = 0.0  # time to create the venv; 0 when cached

    def fingerprint(self) -> dict[str, Any]:
        return {
            "tensorflow": self.version,
            "tensorflow_git": self.git,
            "tensorflow_grpc": self.grpc,
            "tensorflow_origin": self.origin,
        }


# What a Python with TensorFlow reports about itself (one JSON line). The gRPC compiled into it
# exports no version symbol, so the probe asks TensorFlow itself: it points TensorFlow's eager
# client at a grpcio server on loopback (grpcio comes with TensorFlow) and reads the user agent
# of the first RPC, "grpc-c++/1.74.0 grpc-c/49.0.0 (linux; chttp2)" for TensorFlow 2.21.0.
PROBE_SCRIPT = r"""
import json, os, re
from concurrent import futures
import grpc
agents = []
class Seen(grpc.GenericRpcHandler):
    def service(self, details):
        agents.append(dict(details.invocation_metadata).get("user-agent", ""))
        return None  # UNIMPLEMENTED: TensorFlow raises, the agent is read
server = grpc.server(futures.ThreadPoolExecutor(1), handlers=[Seen()])
port = server.add_insecure_port("127.0.0.1:0")
server.start()
import tensorflow as tf
error = ""
try:
    tf.config.experimental_connect_to_host(f"127.0.0.1:{port}")
    with tf.device("/job:worker/replica:0/task:0/device:CPU:0"):
        (tf.constant(1) + 1).numpy()
except Exception as exc:  # expected: the server answers UNIMPLEMENTED
    error = f"{type(exc).__name__}: {exc}"[:300]
server.stop(0)
m = re.search(r"grpc-c\+\+/(\S+)", agents[0] if agents else "")
print(json.dumps({"tensorflow": tf.__version__, "git": tf.version.GIT_VERSION,
                  "grpc": m.group(1) if m else "", "agents": agents[:1], "error": error}))
"""


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    return cache_dir("tf", env, CACHE_VAR)


def cache_key(python: str | None = None, base: str | None = None) -> str:
    """The pinned venv's key (`build`): the recipe, the requirement and its pins, and the
    interpreter (`python`: its version, `base`: its real path; this one's when None)."""
    text = json.dumps(
        {
            "recipe": RECIPE,
            "req": TF_REQ,
            "pins": TF_PINS,
            "python": sys.version.split()[0] if python is None else python,
            "base": base_python() if base is None else base,
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def release_key(spec: str, python: str | None = None, base: str | None = None) -> str:
    """A release's key: its directory named by the release ("tensorflow-cpu-2.20.0-<hash>"),
    the hash over the recipes, the requirement and the interpreter, as cache_key's."""
    text = json.dumps(
        {
            "recipe": RECIPE,
            "release_recipe": RELEASE_RECIPE,
            "req": spec,
            "python": sys.version.split()[0] if python is None else python,
            "base": base_python() if base is None else base,
        },
        sort_keys=True,
    )
    return f"{spec.replace('==', '-')}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def release_version(spec: str) -> str | None:
    """The version a release names ("tensorflow-cpu==2.20.0" -> "2.20.0"); None for a name
    that is no well-formed release."""
    m = RELEASE.match(spec)
    if m is None:
        return None
    try:
        Version(m.group(1))
    except InvalidVersion:
        return None
    return m.group(1)


def is_release(spec: str) -> bool:
    return release_version(spec) is not None


def written_as_release(spec: str) -> bool:
    """Whether `spec` is written as a requirement (NAME==VERSION, NAME>=..., NAME@URL): a
    release, or a mistake in one (spec_error says which), never a path to a Python."""
    return REQUIREMENT.match(spec.strip()) is not None


def spec_error(spec: str) -> str | None:
    """Why a spec written as a requirement is no release (one line; a usage error), None for
    a well-formed one (tensorflow-cpu==VERSION) or for a spec not written as one. Cheap: the
    index is not asked (release_error asks it)."""
    if not written_as_release(spec) or is_release(spec):
        return None
    m = RELEASE.match(spec)
    if m is not None:
        return f"{spec}: {m.group(1)!r} is not a version (a release is {RELEASE_FORM})"
    if spec.startswith(f"{PACKAGE}=="):
        return f"{spec}: no version (a release is {RELEASE_FORM}, e.g. {TF_REQ})"
    name = REQUIREMENT.match(spec.strip())
    package = spec.strip()[: name.start(2)].strip() if name else spec
    if package.split("[")[0].strip().lower().replace("_", "-") == PACKAGE:
        return f"{spec}: a release is written {RELEASE_FORM} (one version exactly, no extras)"
    return (
        f"{spec}: a release is {RELEASE_FORM} (the CPU wheel, as the default `build` venv's; "
        f"{package.split('[')[0].strip()!r} is not taken)"
    )


def release_built(spec: str, cache: Path | None = None) -> bool:
    """Whether the release's venv is in the cache already (then the index need not be asked)."""
    root = cache if cache is not None else cache_root()
    key = cache_key() if spec == TF_REQ else release_key(spec)
    return ready(root / key, key) is not None


def release_error(spec: str, python: str = sys.executable) -> str | None:
    """Why `spec` cannot be a release (a usage error: malformed, a version without a wheel for
    this Python on the package index, an index that does not answer), naming what exists;
    None for a release whose venv is made already or that the index has, and for a spec that
    is not written as a release."""
    malformed = spec_error(spec)
    version = release_version(spec)
    if malformed or version is None:
        return malformed
    if release_built(spec):
        return None
    what = f" with a wheel for Python {sys.version_info.major}.{sys.version_info.minor}"
    return ask_index(PACKAGE, python, only_binary=True).missing(version, what)


def _tail(res: JobResult, lines: int = 12) -> str:
    return "\n".join((res.stdout + res.stderr).strip().splitlines()[-lines:])


def probe(python: Path, timeout: float = 300.0) -> dict[str, Any]:
    """PROBE_SCRIPT's answer in that Python (TensorFlow's import takes seconds)."""
    res = run_job(
        [str(python), "-c", PROBE_SCRIPT],
        dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        timeout=timeout,
        label="tensorflow probe",
    )
    if not res.ok:
        raise TfEnvError(f"{python}: importing tensorflow failed:\n{_tail(res, 8)}")
    try:
        out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise TfEnvError(f"{python}: the TensorFlow probe printed {res.stdout[-200:]!r}") from None
    if not out.get("grpc"):  # the fingerprint would not show a change of TensorFlow's gRPC
        seen = out.get("agents") or ["no RPC"]
        raise TfEnvError(
            f"{python}: TensorFlow's gRPC version is unknown: its client sent "
            f"the probe's loopback server {seen[0]!r} "
            f"(TensorFlow said: {out.get('error') or 'nothing'})"
        )
    return out


def env_from_probe(
    python: Path, info: Mapping[str, Any], origin: str, seconds: float = 0.0
) -> TfEnv:
    return TfEnv(
        python,
        str(info.get("tensorflow", "")),
        str(info.get("git", "")),
        str(info.get("grpc", "")),
        origin,
        seconds,
    )


def user_env(python: str | os.PathLike[str]) -> TfEnv:
    """The user's TensorFlow (a cluster's): TfEnvError when it does not import."""
    path, info = probe_named_python(python, "--hpc-tf-python", probe, TfEnvError)
    return env_from_probe(path, info, "user")


def ensure_env(
    cache: Path | None = None, timeout: float = CREATE_TIMEOUT, log: Any = None
) -> TfEnv:
    """The cached TensorFlow venv, created first if missing (cache.build_once: one creator at
    a time; a killed creation's leftovers are removed, a finished venv never is)."""
    key = cache_key()
    root = cache if cache is not None else cache_root()
    try:
        meta, seconds = build_once(
            root,
            key,
            lambda home, deadline: _create(home, deadline, log),
            timeout,
            {"req": TF_REQ, "pins": TF_PINS},
        )
    except LockTimeout as exc:
        raise TfEnvError(f"{exc} (another session is creating the TensorFlow venv)") from None
    return env_from_probe(root / key / VENV_PYTHON, meta["probe"], "built", seconds)


def release_env(
    spec: str, cache: Path | None = None, timeout: float = CREATE_TIMEOUT, log: Any = None
) -> TfEnv:
    """A release's TensorFlow venv (`tensorflow-cpu==2.20.0`), made first if missing (as
    ensure_env's); TF_REQ's release is the pinned venv itself. TfEnvError for no release."""
    version = release_version(spec)
    if version is None:
        raise TfEnvError(spec_error(spec) or f"{spec}: a release is {RELEASE_FORM}")
    if spec == TF_REQ:
        return replace(ensure_env(cache, timeout, log), origin="release")
    key = release_key(spec)
    root = cache if cache is not None else cache_root()
    try:
        meta, seconds = build_once(
            root,
            key,
            lambda home, deadline: _create_release(spec, home, deadline, log),
            timeout,
            {"req": spec, "resolved": "by pip, binary wheels only (the probe's freeze)"},
        )
    except LockTimeout as exc:
        raise TfEnvError(f"{exc} (another session is creating the {spec} venv)") from None
    return env_from_probe(root / key / VENV_PYTHON, meta["probe"], "release", seconds)


def _create(home: Path, deadline: float, log: Any) -> dict[str, Any]:
    venv = home / "venv"
    if log is not None:
        print(f"tensorflow: creating {venv} with {TF_REQ}", file=log, flush=True)
    make_venv(venv, deadline, [TF_REQ, *TF_PINS], "TensorFlow venv", TfEnvError, "tensorflow venv")
    return probe(venv / "bin" / "python", max(1.0, deadline - time.monotonic()))


def _create_release(spec: str, home: Path, deadline: float, log: Any) -> dict[str, Any]:
    """A release's venv: its wheel and what pip resolves for it (binary wheels only: an sdist
    of a dependency would build for minutes, or fail), then what it resolved, pinned in the
    marker (`pip freeze --all`: pip, setuptools and wheel are TensorFlow's too)."""
    venv = home / "venv"
    if log is not None:
        print(f"tensorflow: creating {venv} with {spec}", file=log, flush=True)
    make_venv(
        venv,
        deadline,
        ["--only-binary", ":all:", spec],
        f"TensorFlow venv of {spec}",
        TfEnvError,
        "tensorflow venv",
    )
    python = venv / "bin" / "python"
    freeze = run_job(
        [str(python), "-m", "pip", "freeze", "--all", "--disable-pip-version-check"],
        dict(os.environ),
        timeout=max(1.0, min(120.0, deadline - time.monotonic())),
        label="tensorflow venv freeze",
    )
    if not freeze.ok:
        raise TfEnvError(f"TensorFlow venv of {spec}: pip freeze failed:\n{_tail(freeze)}")
    info = probe(python, max(1.0, deadline - time.monotonic()))
    return {**info, "freeze": freeze.stdout.split()}


def main(argv: Sequence[str] | None = None) -> int:
    """Create the venv now (CI bootstrap), so the first session does not pay for it."""
    if list(sys.argv[1:] if argv is None else argv):
        print("usage: hpccomm tf-env", file=sys.stderr)
        return 2

    def build() -> str:
        env = ensure_env(log=sys.stdout)
        how = f"created in {env.seconds:.0f}s" if env.seconds else "cached"
        return f"TensorFlow {env.version} (gRPC {env.grpc or 'unknown'}; {how}): {env.python}"

    return build_main(build)


if __name__ == "__main__":
    raise SystemExit(main())
