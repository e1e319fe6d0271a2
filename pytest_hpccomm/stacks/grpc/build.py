"""Build the native peer (and the hello-world reference pair) once, into a cache outside the
repository: ~/.cache/pytest-hpccomm/grpc/<key>, key = hash of the sources, the build recipe and
the toolchain (compiler, protoc, gRPC flags, --hpc-grpc-prefix). A build is published by an
atomic rename of a finished directory, under a file lock, so concurrent sessions build once.
The constants the C++ sources share with Python (result markers, READY, raw method paths,
frame sizes, the pool) are not copied by hand: the build writes them into wire.h from wire.py
(constants_header()), and the header is part of the key.

No toolchain or headers -> NativeUnavailable (a skip reason naming what is missing and the
package to install). A toolchain that fails to compile our sources -> NativeBuildError (a
failure: it may be exactly the incompatibility a user wants to know about).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from pytest_hpccomm.cache import cache_dir
from pytest_hpccomm.errors import Broken, Unavailable, build_main
from pytest_hpccomm.files import LockTimeout, file_lock
from pytest_hpccomm.peer import framing
from pytest_hpccomm.proc.jobs import JobResult, RunningJob, run_job, start_job
from pytest_hpccomm.stacks.grpc import wire
from pytest_hpccomm.stacks.grpc.peer import payload

NATIVE_DIR = Path(__file__).with_name("native")
SOURCES = (
    "tensor.proto",
    "hello.proto",
    "peer.h",
    "peer.cc",
    "server.cc",
    "client.cc",
    "relay.cc",
    "startup.h",
    "startup.cc",
    "hello.cc",
    "bench.h",
    "frame.h",
    "rsocket_compat.c",
)
GENERATED = "wire.h"  # written next to the sources at build time: constants_header()
RECIPE = 4  # bump when the compile or link commands below (or build.json) change
CACHE_VAR = "HPCCOMM_GRPC_CACHE"
UNITS = {  # object -> (source, is generated)
    "peer.o": ("peer.cc", False),
    "server.o": ("server.cc", False),
    "client.o": ("client.cc", False),
    "relay.o": ("relay.cc", False),
    "startup.o": ("startup.cc", False),
    "tensor.pb.o": ("tensor.pb.cc", True),
    "tensor.grpc.pb.o": ("tensor.grpc.pb.cc", True),
    "hello.o": ("hello.cc", False),
    "hello.pb.o": ("hello.pb.cc", True),
    "hello.grpc.pb.o": ("hello.grpc.pb.cc", True),
}
BINARIES = {
    "hpcc_grpc_peer": (
        "peer.o",
        "server.o",
        "client.o",
        "relay.o",
        "startup.o",
        "tensor.pb.o",
        "tensor.grpc.pb.o",
    ),
    "hpcc_grpc_hello": ("hello.o", "startup.o", "hello.pb.o", "hello.grpc.pb.o"),
}
RSOCKET_COMPAT = "librsocket_compat.so"  # a C preload, not linked with gRPC (rsocket_compat.c)
_PROBE_TIMEOUT = 30.0


class NativeUnavailable(Unavailable):
    """No compiler, gRPC headers or code generator here: one line, a skip reason (a failure
    when an option named this gRPC: GrpcLab.named)."""


class NativeBuildError(Broken):
    """The toolchain is present but building our sources failed."""


@dataclass(frozen=True)
class Toolchain:
    cxx: str
    protoc: str
    plugin: str  # grpc_cpp_plugin
    cflags: tuple[str, ...]
    libs: tuple[str, ...]
    prefix: str | None
    versions: tuple[str, ...]  # first lines of `cxx --version`, `protoc --version`


@dataclass(frozen=True)
class NativeBuild:
    directory: Path
    key: str
    grpc_version: str
    seconds: float  # build time; 0 when found in the cache
    cached: bool

    @property
    def peer(self) -> Path:
        return self.directory / "hpcc_grpc_peer"

    @property
    def hello(self) -> Path:
        return self.directory / "hpcc_grpc_hello"

    @property
    def rsocket_compat(self) -> Path:
        return self.directory / RSOCKET_COMPAT


def cache_root(env: Mapping[str, str] | None = None) -> Path:
    return cache_dir("grpc", env, CACHE_VAR)


def _run(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> JobResult:
    """Compiler and friends: a job (hard timeout, the whole process tree reaped)."""
    return run_job(
        argv, dict(env) if env is not None else None, timeout=timeout, label=Path(argv[0]).name
    )


def _probe(*argvs: Sequence[str], env: Mapping[str, str] | None = None) -> list[JobResult]:
    """Quick queries (pkg-config, --version) that start no children, run side by side: plain
    subprocesses with a timeout, since a job's reaper costs ~0.5 s and pkg-config ~1 s (it
    reads abseil's many .pc files), and these run on every session."""
    t0 = time.monotonic()
    procs: list[subprocess.Popen[str] | OSError] = []
    for argv in argvs:
        try:
            procs.append(
                subprocess.Popen(
                    list(argv),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    stdin=subprocess.DEVNULL,
                    text=True,
                    env=env,
                    start_new_session=True,
                )
            )
        except OSError as e:
            procs.append(e)
    out = []
    for argv, proc in zip(argvs, procs):
        if isinstance(proc, OSError):
            out.append(JobResult(tuple(argv), 127, "", str(proc), 0.0, False))
            continue
        try:
            stdout, stderr = proc.communicate(
                timeout=max(0.1, t0 + _PROBE_TIMEOUT - time.monotonic())
            )
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            timed_out = True
        out.append(
            JobResult(
                tuple(argv), proc.returncode, stdout, stderr, time.monotonic() - t0, timed_out
            )
        )
    return out


def _first_line(argv: Sequence[str]) -> str:
    res = _probe(argv)[0]
    return (res.stdout or res.stderr).strip().splitlines()[0] if res.ok else ""


def _pc_dirs(prefix: Path) -> list[Path]:
    return [
        d
        for d in (
            prefix / "lib" / "pkgconfig",
            prefix / "lib64" / "pkgconfig",
            prefix / "lib" / "x86_64-linux-gnu" / "pkgconfig",
            prefix / "share" / "pkgconfig",
        )
        if d.is_dir()
    ]


def prefix_error(prefix: Path) -> str | None:
    """Why `prefix` cannot be a gRPC installation (one line), else None. Cheap (no compiler,
    no pkg-config run): a prefix the user names is checked before any test runs, since a typo
    there would otherwise skip every native item."""
    if not prefix.is_dir():
        return "not a directory"
    if (prefix / "include" / "grpcpp" / "grpcpp.h").is_file():
        return None
    if any((d / "grpc++.pc").is_file() for d in _pc_dirs(prefix)):
        return None
    return (
        "no gRPC installation there (neither include/grpcpp/grpcpp.h nor a grpc++.pc under "
        "lib/pkgconfig, lib64/pkgconfig or share/pkgconfig)"
    )


def find_toolchain(prefix: Path | None = None) -> Toolchain:
    """What builds the native peer here; NativeUnavailable says precisely what is missing."""
    cxx = (
        os.environ.get("CXX")
        or shutil.which("c++")
        or shutil.which("g++")
        or shutil.which("clang++")
    )
    if not cxx:
        raise NativeUnavailable("native gRPC peer: no C++ compiler on PATH (apt-get install g++)")
    bins = [prefix / "bin"] if prefix is not None else []
    if prefix is not None and not prefix.is_dir():
        raise NativeUnavailable(f"native gRPC peer: --hpc-grpc-prefix {prefix} is not a directory")

    def tool(name: str, package: str) -> str:
        for d in bins:
            if (d / name).is_file():
                return str(d / name)
        found = shutil.which(name)
        if not found:
            where = f" in {prefix}/bin or" if prefix is not None else ""
            raise NativeUnavailable(
                f"native gRPC peer: {name} not found{where} on PATH (apt-get install {package})"
            )
        return found

    protoc = tool("protoc", "protobuf-compiler")
    plugin = tool("grpc_cpp_plugin", "protobuf-compiler-grpc")
    cflags, libs = _flags(prefix)
    versions = (_first_line([cxx, "--version"]), _first_line([protoc, "--version"]))
    return Toolchain(cxx, protoc, plugin, cflags, libs, str(prefix) if prefix else None, versions)


def _flags(prefix: Path | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Compile and link flags: pkg-config (the prefix's .pc files first), else, for a prefix
    without .pc files, its include/ and lib/ directly."""
    pc_dirs = _pc_dirs(prefix) if prefix is not None else []
    has_pc = any((d / "grpc++.pc").is_file() for d in pc_dirs)
    rpath: tuple[str, ...] = ()
    if prefix is not None:  # the prefix's shared libraries at run time, without LD_LIBRARY_PATH
        rpath = tuple(f"-Wl,-rpath,{d}" for d in (prefix / "lib", prefix / "lib64") if d.is_dir())
    if prefix is None or has_pc:
        if not shutil.which("pkg-config"):
            raise NativeUnavailable(
                "native gRPC peer: pkg-config not found (apt-get install pkg-config)"
            )
        env = dict(os.environ)
        if pc_dirs:
            env["PKG_CONFIG_PATH"] = os.pathsep.join(
                [str(d) for d in pc_dirs] + [p for p in [env.get("PKG_CONFIG_PATH", "")] if p]
            )
        cf, lf = _probe(
            ["pkg-config", "--cflags", "grpc++", "protobuf"],
            ["pkg-config", "--libs", "grpc++", "protobuf"],
            env=env,
        )
        if not (cf.ok and lf.ok):
            raise NativeUnavailable(
                "native gRPC peer: pkg-config finds no grpc++/protobuf "
                f"({(cf.stderr or lf.stderr).strip()[:160]}) (apt-get install libgrpc++-dev "
                "libprotobuf-dev, or --hpc-grpc-prefix DIR)"
            )
        return tuple(cf.stdout.split()), tuple(lf.stdout.split()) + rpath
    include = prefix / "include"
    if not (include / "grpcpp" / "grpcpp.h").is_file():
        raise NativeUnavailable(
            f"native gRPC peer: {include}/grpcpp/grpcpp.h not found and no grpc++.pc under {prefix}"
        )
    libdirs = tuple(f"-L{d}" for d in (prefix / "lib", prefix / "lib64") if d.is_dir())
    libs = libdirs + ("-lgrpc++", "-lgrpc", "-lgpr", "-lprotobuf", "-lpthread") + rpath
    return (f"-I{include}",), libs


def _c_string(value: str) -> str:
    if not (value.isascii() and value.isprintable()) or '"' in value or "\\" in value:
        raise ValueError(f"{value!r} needs escaping in C++; keep wire constants plain")
    return f'"{value}"'


def constants_header() -> str:
    """wire.h: the constants the C++ sources share with the Python peers and the orchestrator,
    generated from the Python modules that define them, so no copy is kept by hand."""
    serialized, raw = wire.MODES
    strings = {
        "kResultBegin": framing.BEGIN,
        "kResultEnd": framing.END,
        "kReady": wire.READY,
        "kMetaPrefix": wire.META_PREFIX,
        "kEchoInitial": wire.ECHO_INITIAL,
        "kCompress": wire.COMPRESS,
        "kStatus": wire.STATUS,
        "kStatusMessage": wire.STATUS_MESSAGE,
        "kModeSerialized": serialized,
        "kModeRaw": raw,
        **{f"kRaw{name}": wire.method(name, raw) for name in wire.RAW_METHODS},
    }
    numbers = {
        "kWant": ("std::uint32_t", wire.WANT),
        "kHeaderSize": ("std::size_t", wire.HEADER_SIZE),
        "kAckSize": ("std::size_t", wire.ACK_SIZE),
        "kPool": ("std::size_t", payload.POOL_SIZE),
        "kMaxMessage": ("int", wire.MAX_MESSAGE),
        "kCancelledSeqs": ("std::size_t", wire.CANCELLED_SEQS),
    }
    lines = [
        "// Generated by pytest_hpccomm/stacks/grpc/build.py from wire.py, peer/framing.py",
        "// and peer/payload.py: edit those, not this file.",
        "#pragma once",
        "",
        "#include <cstddef>",
        "#include <cstdint>",
        "",
        "namespace wire {",
        "",
    ]
    # arrays, not pointers: static storage whose address gRPC may keep (method names)
    lines += [f"constexpr char {k}[] = {_c_string(v)};" for k, v in strings.items()]
    lines += [f"constexpr {t} {k} = {v};" for k, (t, v) in numbers.items()]
    return "\n".join(lines + ["", "}  // namespace wire", ""])


def source_digest() -> str:
    h = hashlib.sha256()
    for name in SOURCES:
        h.update(name.encode() + b"\0" + (NATIVE_DIR / name).read_bytes() + b"\0")
    h.update(GENERATED.encode() + b"\0" + constants_header().encode() + b"\0")
    return h.hexdigest()


def cache_key(tc: Toolchain) -> str:
    h = hashlib.sha256()
    h.update(source_digest().encode())
    h.update(json.dumps({"recipe": RECIPE, **asdict(tc)}, sort_keys=True).encode())
    return h.hexdigest()[:20]


def _cached(directory: Path, key: str) -> NativeBuild | None:
    try:
        meta = json.loads((directory / "build.json").read_text())
    except (OSError, ValueError):
        return None
    if meta.get("key") != key or not all(
        (directory / b).is_file() for b in (*BINARIES, RSOCKET_COMPAT)
    ):
        return None
    return NativeBuild(directory, key, str(meta.get("grpc_version", "")), 0.0, True)


def ensure_built(
    prefix: Path | None = None, cache: Path | None = None, timeout: float = 900.0
) -> NativeBuild:
    """The built peer for this toolchain and these sources, building it if it is not cached."""
    tc = find_toolchain(prefix)
    key = cache_key(tc)
    root = cache if cache is not None else cache_root()
    final = root / key
    found = _cached(final, key)
    if found is not None:
        return found
    root.mkdir(parents=True, exist_ok=True)
    with _build_lock(root / f".{key}.lock", timeout):
        found = _cached(final, key)  # built by another session while we waited
        if found is not None:
            return found
        tmp = root / f".{key}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        t0 = time.monotonic()
        try:
            version = _build(tc, tmp, time.monotonic() + timeout)
            (tmp / "build.json").write_text(
                json.dumps(
                    {
                        "key": key,
                        "sources": source_digest(),
                        "grpc_version": version,
                        "toolchain": asdict(tc),
                        "seconds": round(time.monotonic() - t0, 1),
                        "built": time.time(),
                    },
                    indent=1,
                )
            )
            shutil.rmtree(final, ignore_errors=True)  # an incomplete leftover, never a build
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return NativeBuild(final, key, version, time.monotonic() - t0, False)


def prebuilt(directory: Path) -> NativeBuild:
    """A peer built elsewhere (--hpc-grpc-build: e.g. on a login node for compute nodes
    without a compiler, or on the host for the CI guests), used as it is: it must have been
    built from this checkout's sources, else its wire constants may differ."""
    try:
        meta = json.loads((directory / "build.json").read_text())
    except (OSError, ValueError) as e:
        raise NativeBuildError(
            f"native gRPC peer: --hpc-grpc-build {directory}: no readable build.json ({e})"
        ) from None
    if meta.get("sources") != source_digest():
        raise NativeBuildError(
            f"native gRPC peer: --hpc-grpc-build {directory} was built from "
            "other sources than this checkout's: rebuild it "
            "(hpccomm build-grpc)"
        )
    missing = [b for b in (*BINARIES, RSOCKET_COMPAT) if not (directory / b).is_file()]
    if missing:
        raise NativeBuildError(
            f"native gRPC peer: --hpc-grpc-build {directory} lacks {', '.join(missing)}"
        )
    return NativeBuild(directory, str(meta["key"]), str(meta.get("grpc_version", "")), 0.0, True)


def _check(res: JobResult, what: str) -> None:
    if not res.ok:
        tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-15:])
        how = "timed out" if res.timed_out else f"exit {res.returncode}"
        raise NativeBuildError(f"native gRPC peer: {what} failed ({how}):\n{tail}")


def _build(tc: Toolchain, out: Path, deadline: float) -> str:
    def left() -> float:
        return max(1.0, deadline - time.monotonic())

    for name in SOURCES:
        shutil.copy2(NATIVE_DIR / name, out / name)  # the cache holds what it was built from
    (out / GENERATED).write_text(constants_header())
    _check(
        _run(
            [
                tc.protoc,
                f"-I{out}",
                f"--cpp_out={out}",
                f"--grpc_out={out}",
                f"--plugin=protoc-gen-grpc={tc.plugin}",
                str(out / "tensor.proto"),
                str(out / "hello.proto"),
            ],
            timeout=left(),
        ),
        "protoc",
    )
    base = [tc.cxx, "-O2", "-std=c++17", "-pthread", f"-I{out}", *tc.cflags]
    pending = list(UNITS.items())
    running: list[tuple[str, RunningJob]] = []
    width = max(1, os.cpu_count() or 1)
    try:
        while pending or running:
            while pending and len(running) < width:
                obj, (src, _) = pending.pop(0)
                running.append(
                    (
                        obj,
                        start_job(
                            base + ["-c", str(out / src), "-o", str(out / obj)],
                            timeout=left(),
                            label=f"c++ {src}",
                        ),
                    )
                )
            obj, job = running.pop(0)
            _check(job.wait(), f"compiling {UNITS[obj][0]}")
    finally:
        for _, job in running:
            job.stop()
    for binary, objs in BINARIES.items():
        _check(
            _run(
                [
                    tc.cxx,
                    "-pthread",
                    "-o",
                    str(out / binary),
                    *(str(out / o) for o in objs),
                    *tc.libs,
                ],
                timeout=left(),
            ),
            f"linking {binary}",
        )
    _check(
        _run(
            [
                tc.cxx,
                "-x",
                "c",
                "-O2",
                "-Wall",
                "-shared",
                "-fPIC",
                "-o",
                str(out / RSOCKET_COMPAT),
                str(out / "rsocket_compat.c"),
                "-ldl",
            ],
            timeout=left(),
        ),
        f"compiling {RSOCKET_COMPAT}",
    )
    res = _run([str(out / "hpcc_grpc_peer"), "version"], timeout=_PROBE_TIMEOUT)
    _check(res, "running the built peer")
    return res.stdout.strip()


@contextmanager
def _build_lock(path: Path, timeout: float) -> Iterator[None]:
    """Another session may be building the same key: wait for it at most `timeout`."""
    try:
        with file_lock(path, timeout):
            yield
    except LockTimeout as exc:
        raise NativeBuildError(f"{exc} (a native build)") from None


def main(argv: list[str] | None = None) -> int:
    """`hpccomm build-grpc [PREFIX]`: build now (e.g. in CI bootstrap), so the first session
    does not pay for it. No toolchain is not an error: it says why."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) > 1 or any(a.startswith("-") for a in args):
        print("usage: hpccomm build-grpc [PREFIX]", file=sys.stderr)
        return 2
    prefix = Path(args[0]) if args else None

    def build() -> str:
        b = ensure_built(prefix)
        how = "cached" if b.cached else f"built in {b.seconds:.0f}s"
        return f"native gRPC peer ({b.grpc_version}, {how}): {b.directory}"

    return build_main(build)


if __name__ == "__main__":
    raise SystemExit(main())
