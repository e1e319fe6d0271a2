"""Options of the gRPC stack (each also an ini key): parsed once, validated into GrpcOptions.
A bad value is one line (pytest.UsageError, exit 4), as for the core options."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_hpccomm.measure.sizes import SizeSpecError, parse_size
from pytest_hpccomm.stacks.grpc.driver import PEERS
from pytest_hpccomm.stacks.grpc.env import PRESETS, RuntimeSpec, RuntimeSpecError, spec_of
from pytest_hpccomm.stacks.grpc.peer.payload import SCHEMES, PayloadError, PayloadSpec, layout
from pytest_hpccomm.stacks.grpc.wire import MAX_MESSAGE, MODES

PLANTED_BUGS = ("drop-last-buffer",)
# the peers the quick profile times unless --hpc-grpc-peers names them: a Python peer's
# per-RPC cost (~500 us here) hides the transport, so its sweeps add a nightly's time, not
# evidence about gRPC's core (conformance still runs every peer; the full profile times all)
QUICK_PERF_PEERS = ("native",)
CLIENTS = ("python", "native")  # who makes the conformance suite's calls
# flag, help, default
OPTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "--hpc-grpc-runtime",
        "label of the gRPC runtime under test (e.g. ar-grpc); results and "
        "baselines are keyed by it (default: the preset's name, else 'grpc')",
        "",
    ),
    (
        "--hpc-grpc-preset",
        f"a known runtime's environment for the native peers "
        f"({', '.join(PRESETS)}); see stacks/grpc/env.py",
        "",
    ),
    (
        "--hpc-grpc-prefix",
        "gRPC installation to build the native peer against (pkg-config "
        "files or include/ and lib/ under DIR); default: the system's (libgrpc++-dev)",
        "",
    ),
    (
        "--hpc-grpc-build",
        "a native peer built elsewhere from this checkout (the directory "
        "`hpccomm build-grpc` prints), used without a compiler here",
        "",
    ),
    (
        "--hpc-grpc-python",
        "the Python the Python peers run (sync, aio): a Python or venv with grpcio, or a "
        "release grpcio==VERSION made once into a venv in the cache; default: this "
        "interpreter's grpcio",
        "",
    ),
    ("--hpc-grpc-peers", f"peer kinds, comma-separated ({', '.join(PEERS)})", ",".join(PEERS)),
    (
        "--hpc-grpc-clients",
        "conformance clients, comma-separated: python (grpcio in pytest) "
        "and/or native (the native peer makes the calls, inside the runtime); default: both, "
        "only native under a runtime other than stock gRPC",
        "",
    ),
    (
        "--hpc-grpc-modes",
        "payload modes: serialized (protobuf) and/or raw (no protobuf)",
        ",".join(MODES),
    ),
    ("--hpc-grpc-buffers", "buffers per payload (iovec length)", "10"),
    ("--hpc-grpc-small", "size of a small buffer (< 1 KiB)", "10"),
    ("--hpc-grpc-medium", "size of a medium buffer (1 KiB to < 1 MiB)", "10K"),
    ("--hpc-grpc-large", "size of a large buffer (1 MiB to 10 MiB)", "1M"),
    ("--hpc-grpc-skew", "skew scheme weights in percent: large,medium,small", "60,30,10"),
    ("--hpc-grpc-seed", "seed of the random and skew schemes", "0"),
    ("--hpc-grpc-workers", "parameter-server benchmark: workers", "2"),
    ("--hpc-grpc-ps", "parameter-server benchmark: servers", "2"),
    ("--hpc-grpc-examples", "Hypothesis examples per property (default: 25 quick, 200 full)", ""),
    (
        "--hpc-grpc-plant-bug",
        f"TESTS OF THE SUITE ONLY: servers run with a known bug ({', '.join(PLANTED_BUGS)})",
        "",
    ),
)


@dataclass(frozen=True)
class GrpcOptions:
    runtime: str  # the label of the runtime under test (spec.label)
    spec: RuntimeSpec
    prefix: Path | None
    build: Path | None
    peers: tuple[str, ...]  # the conformance items' peers
    perf_peers: tuple[str, ...]  # the perf items' (QUICK_PERF_PEERS in the quick profile)
    modes: tuple[str, ...]
    clients: tuple[str, ...]
    payload: PayloadSpec
    workers: int
    ps: int
    examples: int
    plant_bug: str
    quick: bool = True  # the quick profile draws the same examples every run (derandomized)
    python: str = ""  # the Python peers' Python (python_env: "" this one, a path, grpcio==V)

    @property
    def layouts(self) -> list[tuple[str, list[int]]]:
        return [(s, layout(s, self.payload)) for s in SCHEMES]

    @property
    def max_message(self) -> int:
        """Servers' receive limit: twice the largest payload, at least 16 MiB (the conformance
        properties send > 4 MiB; the limit property sends one byte more than this)."""
        largest = max(sum(sizes) for _, sizes in self.layouts)
        return max(MAX_MESSAGE, 2 * largest + (1 << 20))


ENV_FLAG = "--hpc-grpc-env"


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("hpccomm")
    for flag, help_, default in OPTIONS:
        dest = flag.lstrip("-").replace("-", "_")
        group.addoption(flag, default=None, dest=dest, help=f"{help_} (default: {default!r})")
        parser.addini(dest, help_, default=None)
    group.addoption(
        ENV_FLAG,
        action="append",
        default=[],
        dest="hpc_grpc_env",
        metavar="KEY=VAL",
        help="environment of the native peers' gRPC runtime, "
        "repeatable, over the preset's; {device} {port} {gid_index} {address} "
        "{netdev} {rspreload} are filled from the session's fabric",
    )
    parser.addini("hpc_grpc_env", "KEY=VAL lines, as --hpc-grpc-env", type="linelist", default=[])


def _value(config: pytest.Config, flag: str, default: str) -> str:
    dest = flag.lstrip("-").replace("-", "_")
    value = config.getoption(dest)
    if value is None:
        value = config.getini(dest)
    return default if value in (None, "") else str(value)


def _list(flag: str, text: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    items = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [x for x in items if x not in allowed]
    if not items or bad:
        raise pytest.UsageError(
            f"{flag}: {', '.join(bad) or 'empty list'}: choose from {', '.join(allowed)}"
        )
    return items


def _num(flag: str, text: str, cast: Callable[[str], Any], lo: float, hi: float) -> Any:
    try:
        value = cast(text)
    except (ValueError, SizeSpecError):
        raise pytest.UsageError(f"{flag}: expected a number, got {text!r}") from None
    if not lo <= value <= hi:
        raise pytest.UsageError(f"{flag}: must be {lo:g}..{hi:g}, got {text}")
    return value


def parse_options(config: pytest.Config) -> GrpcOptions:
    v = {flag: _value(config, flag, default) for flag, _, default in OPTIONS}
    try:
        skew = tuple(float(x) for x in v["--hpc-grpc-skew"].split(","))
    except ValueError:
        raise pytest.UsageError(
            f"--hpc-grpc-skew: expected three numbers, got {v['--hpc-grpc-skew']!r}"
        ) from None
    try:
        spec = PayloadSpec(
            buffers=_num("--hpc-grpc-buffers", v["--hpc-grpc-buffers"], int, 1, 1000),
            small=_num("--hpc-grpc-small", v["--hpc-grpc-small"], parse_size, 0, 1 << 40),
            medium=_num("--hpc-grpc-medium", v["--hpc-grpc-medium"], parse_size, 0, 1 << 40),
            large=_num("--hpc-grpc-large", v["--hpc-grpc-large"], parse_size, 0, 1 << 40),
            skew=skew,  # type: ignore[arg-type]  # length checked by PayloadSpec
            seed=_num("--hpc-grpc-seed", v["--hpc-grpc-seed"], int, 0, 2**63),
        )
    except PayloadError as e:
        raise pytest.UsageError(f"--hpc-grpc payload: {e}") from None
    bug = v["--hpc-grpc-plant-bug"]
    if bug and bug not in PLANTED_BUGS:
        raise pytest.UsageError(
            f"--hpc-grpc-plant-bug: {bug!r}: choose from {', '.join(PLANTED_BUGS)}"
        )
    profile = _value(config, "--hpc-profile", "quick")
    examples = v["--hpc-grpc-examples"] or ("200" if profile == "full" else "25")
    runtime = v["--hpc-grpc-runtime"].strip()
    if runtime and not runtime.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise pytest.UsageError(
            f"--hpc-grpc-runtime: {runtime!r}: letters, digits, '-', '_', '.' only"
        )
    prefix = v["--hpc-grpc-prefix"]
    try:
        rt_spec = spec_of(
            v["--hpc-grpc-preset"].strip(),
            list(config.getini("hpc_grpc_env")) + list(config.getoption("hpc_grpc_env")),
            runtime or None,
        )
    except RuntimeSpecError as e:
        raise pytest.UsageError(str(e)) from None
    if (
        rt_spec.preset is not None
        and rt_spec.preset.needs_prefix
        and not (prefix or v["--hpc-grpc-build"])
    ):
        raise pytest.UsageError(
            f"--hpc-grpc-preset {rt_spec.preset.name}: the runtime is a build "
            "of your own: name its install prefix with --hpc-grpc-prefix"
        )
    peers = _list("--hpc-grpc-peers", v["--hpc-grpc-peers"], PEERS)
    named = _value(config, "--hpc-grpc-peers", "") != ""
    perf_peers = (
        peers if named or profile == "full" else tuple(p for p in peers if p in QUICK_PERF_PEERS)
    )
    return GrpcOptions(
        runtime=rt_spec.label,
        spec=rt_spec,
        prefix=Path(prefix).expanduser() if prefix else None,
        build=Path(v["--hpc-grpc-build"]).expanduser() if v["--hpc-grpc-build"] else None,
        peers=peers,
        perf_peers=perf_peers,
        modes=_list("--hpc-grpc-modes", v["--hpc-grpc-modes"], MODES),
        payload=spec,
        clients=_list(
            "--hpc-grpc-clients",
            v["--hpc-grpc-clients"] or (",".join(CLIENTS) if rt_spec.stock else "native"),
            CLIENTS,
        ),
        workers=_num("--hpc-grpc-workers", v["--hpc-grpc-workers"], int, 1, 64),
        ps=_num("--hpc-grpc-ps", v["--hpc-grpc-ps"], int, 1, 64),
        examples=_num("--hpc-grpc-examples", examples, int, 1, 100000),
        plant_bug=bug,
        quick=profile != "full",
        python=v["--hpc-grpc-python"].strip(),
    )
