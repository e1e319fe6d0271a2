"""Options → HpcConfig. Every option is also an ini key; the command line wins over the ini.

Values are validated here rather than by argparse `choices`, so a bad value is ONE line
(pytest's UsageError, exit 4) instead of argparse's usage dump.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import pytest

from pytest_hpccomm.baselines.adaptive import SCOPES as REPEAT_SCOPES
from pytest_hpccomm.baselines.history import default_history_path
from pytest_hpccomm.cluster.hosts import (
    Host,
    HostSpecError,
    hosts_from_slurm,
    parse_host_list,
    parse_hostfile,
)
from pytest_hpccomm.measure.link import RateError, parse_bit_rate
from pytest_hpccomm.measure.sizes import SizeSpecError, parse_size_spec

LAUNCHER_CHOICES = ("auto", "local", "netns", "mpirun", "srun")
BIND_CHOICES = ("auto", "none")
PROFILE_CHOICES = ("quick", "full")
UPDATE_CHOICES = ("none", "new", "all")
MAX_REPEATS = 50  # jobs of one sweep: beyond, a point that is still undecided stays so


@dataclass(frozen=True)
class OptionSpec:
    flag: str  # "--hpc-fabric"
    help: str
    default: Any = None
    kind: str = "str"  # str | bool | path | float | int | update
    choices: tuple[str, ...] = ()

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")  # also the ini key


OPTIONS: tuple[OptionSpec, ...] = (
    # checked by HpcSession.open against the registered kinds: plugins add kinds by a hook
    OptionSpec(
        "--hpc-fabric",
        "fabric to test on: auto (best present), ib, roce, softroce, "
        "iwarp, ipoib, ethernet, or a kind a plugin registers",
        "auto",
    ),
    OptionSpec("--hpc-device", "RDMA device to use (e.g. mlx5_0); default: chosen from the fabric"),
    OptionSpec(
        "--hpc-netdev", "network interface to use (e.g. ib0, eth0); default: from the fabric"
    ),
    OptionSpec("--hpc-hosts", "comma-separated hosts, optionally host:slots (a,b:2,c)"),
    OptionSpec("--hpc-hostfile", "Open MPI or MPICH hostfile", kind="path"),
    OptionSpec(
        "--hpc-launcher",
        "how peers are started: auto, local, netns (virtual cluster of "
        "network namespaces), mpirun, srun",
        "auto",
        choices=LAUNCHER_CHOICES,
    ),
    OptionSpec(
        "--hpc-rsh-agent",
        "remote shell mpirun uses to reach --hpc-hosts (default ssh), "
        "e.g. a wrapper running `ssh -F my_config`",
    ),
    OptionSpec(
        "--hpc-bind",
        "binding of ranks on --hpc-hosts: auto (the MPI's default) or none "
        "(hosts that share cores, e.g. containers on one machine); loopback and the "
        "virtual cluster never bind",
        "auto",
        choices=BIND_CHOICES,
    ),
    OptionSpec(
        "--hpc-vhosts",
        "number of hosts of the virtual cluster (--hpc-launcher=netns)",
        2,
        kind="int",
    ),
    OptionSpec(
        "--hpc-vlink-rate",
        "shape every virtual host's link to this bit rate (tbf), "
        "e.g. 1G or 100M: bandwidths then show a known fraction of the link",
    ),
    OptionSpec(
        "--hpc-profile",
        "quick (CI: 1 B-4 MiB in powers of 4, short runs, TCP-only "
        "stacks timed at loopback only, adaptive repeats for potential changes only) or "
        "full (1 B-64 MiB in powers of 2, every placement, every undecided point "
        "repeated)",
        "quick",
        choices=PROFILE_CHOICES,
    ),
    OptionSpec(
        "--hpc-sizes",
        "message sizes overriding the profile: MIN:MAX (powers of two) "
        "and/or a list, e.g. 1:4M or 0,8,1K,1M",
    ),
    OptionSpec("--hpc-system", "name of the baseline set (default: derived from the fingerprint)"),
    OptionSpec("--hpc-baselines", "baseline directory", "baselines", kind="path"),
    OptionSpec(
        "--hpc-update-baselines",
        "write baselines: 'new' (default when given: new and "
        "passing results) or 'all' (everything, incl. regressions)",
        kind="update",
        choices=UPDATE_CHOICES,
    ),
    OptionSpec(
        "--hpc-tolerance",
        "relative effect that counts as a change (default 0.05 = 5 %%)",
        0.05,
        kind="float",
    ),
    OptionSpec(
        "--hpc-strict", "inconclusive (too noisy) verdicts fail the test", False, kind="bool"
    ),
    OptionSpec(
        "--hpc-require-armed",
        "fail the session when fewer than this fraction of its "
        "performance points could claim a slowdown of twice the tolerance (the gate "
        "status line says why not); 0 (default) only reports it",
        0.0,
        kind="float",
    ),
    OptionSpec(
        "--hpc-repeats",
        "independent jobs per benchmark sweep, their batches pooled, so "
        "the verdict sees run-to-run variance (default 3)",
        3,
        kind="int",
    ),
    OptionSpec(
        "--hpc-max-repeats",
        "adaptive repeats: a sweep with a point its jobs cannot "
        "decide (inconclusive, or an interval reaching beyond the tolerance; which of "
        "them: --hpc-repeat-for) gets one more job at a time, up to this many (default "
        "2 x --hpc-repeats; equal to --hpc-repeats: off)",
        0,
        kind="int",
    ),
    OptionSpec(
        "--hpc-repeat-for",
        "which points adaptive repeats grow: 'changes' (a claimed "
        "regression/improvement or a point ratio beyond the tolerance; the quick "
        "profile's default) or 'undecided' (also a pass whose interval reaches beyond "
        "the tolerance and a too-noisy point inside it; the full profile's)",
        choices=REPEAT_SCOPES,
    ),
    OptionSpec(
        "--hpc-inject-slowdown",
        "canary: peers stretch every timed operation by this "
        "factor (>= 1.0) to prove the gate catches a regression of that size",
        1.0,
        kind="float",
    ),
    # paired A/B: checked by HpcSession.open against the stacks that can swap implementations
    OptionSpec(
        "--hpc-base",
        "paired A/B run, base side: STACK=IMPL, e.g. mpi=openmpi4 or "
        "grpc=/opt/grpc-1.60 (repeat per stack); every point is judged candidate vs base "
        "from this session's jobs, no stored baseline",
        kind="assign",
    ),
    OptionSpec(
        "--hpc-candidate",
        "paired A/B run, candidate side: STACK=IMPL (see --hpc-base)",
        kind="assign",
    ),
    OptionSpec(
        "--hpc-reference",
        "the nightly against a reference build: STACK=IMPL, e.g. mpi=/opt/ompi-ref/bin/mpirun "
        "(repeat per stack); each point is measured in paired rounds against it (the base "
        "side; the candidate is what the run tests, or --hpc-candidate), and the history "
        "records the paired ratio: host drift cancels in it",
        kind="assign",
    ),
    OptionSpec(
        "--hpc-ratio-gate",
        "with --hpc-reference: fail the run when a ratio series of its points has a step "
        "worse than the tolerance that started in the last K runs (change points, levels of "
        "3+ runs); 0: off",
        0,
        kind="int",
    ),
    OptionSpec(
        "--hpc-ab-rounds",
        "rounds of a paired A/B run: one job of each side per round, "
        "adjacent, which side first drawn at random, each side first in half the rounds "
        "(default 20)",
        20,
        kind="int",
    ),
    OptionSpec("--hpc-results", "write every measurement and verdict as JSON here", kind="path"),
    OptionSpec("--hpc-report", "write an HTML report with plots here", kind="path"),
    OptionSpec(
        "--hpc-screenshots",
        "beside the HTML report: the history's trends page "
        "(trends.html) and a checked headless-Chromium screenshot of each (.png)",
        False,
        kind="bool",
    ),
    OptionSpec(
        "--hpc-markdown",
        "write a markdown summary here (default: $GITHUB_STEP_SUMMARY when set)",
        kind="path",
    ),
    OptionSpec(
        "--hpc-history",
        "SQLite history store (default ~/.cache/pytest-hpccomm/history.sqlite; 'none' disables)",
        kind="str",
    ),
    OptionSpec(
        "--hpc-sysfs-root",
        "read fabric state from this sysfs tree (recorded trees in fixtures/sysfs/*/sys)",
        "/sys",
        kind="path",
    ),
)


@dataclass(frozen=True)
class HpcConfig:
    fabric: str = "auto"
    device: str | None = None
    netdev: str | None = None
    hosts: str | None = None
    hostfile: Path | None = None
    launcher: str = "auto"
    rsh_agent: str | None = None
    bind: str = "auto"
    vhosts: int = 2
    vlink_rate: float | None = None  # bit/s every virtual host's link is shaped to
    profile: str = "quick"
    sizes: tuple[int, ...] | None = None
    system: str | None = None
    baselines: Path = Path("baselines")
    update_baselines: str = "none"
    tolerance: float = 0.05
    strict: bool = False
    require_armed: float = 0.0
    inject_slowdown: float = 1.0
    repeats: int = 3
    max_repeats: int = 0  # 0: 2 x repeats (repeat_limit)
    repeat_for: str | None = None  # None: by profile (repeat_scope)
    results: Path | None = None
    report: Path | None = None
    screenshots: bool = False
    markdown: Path | None = None
    history: Path | None = None
    sysfs_root: Path = Path("/sys")
    base: dict[str, str] = field(default_factory=dict)  # stack -> implementation (A/B)
    candidate: dict[str, str] = field(default_factory=dict)
    reference: dict[str, str] = field(default_factory=dict)  # stack -> the nightly's reference
    ratio_gate: int = 0  # nights a failing ratio step may start in (0: off)
    ab_rounds: int = 20
    host_list: tuple[Host, ...] = ()  # resolved: --hpc-hosts, else hostfile, else SLURM
    extra: dict[str, Any] = field(default_factory=dict)

    def tested_by_option(self, stack: str, value: object) -> bool:
        """Whether a nightly against a reference tests `value`, the stack's own implementation
        option, as its candidate (not a third implementation beside the two sides)."""
        return stack in self.reference and self.candidate.get(stack) == str(value)

    @property
    def message_sizes(self) -> tuple[int, ...]:
        """Profile sweep unless --hpc-sizes overrides it: quick 1 B .. 4 MiB in powers of 4
        (nccl-tests' -f 4; the sizes the TF and Horovod sweeps take, so every stack meets at
        each size), full 1 B .. 64 MiB in powers of 2 (OSU's sweep)."""
        if self.sizes is not None:
            return self.sizes
        if self.profile == "quick":
            return tuple(4**k for k in range(12))
        return tuple(parse_size_spec(f"1:{64 << 20}"))

    @property
    def session_job_timeout(self) -> float:
        """Hard cap (s) of a session-long conformance job (a stack's peers kept for every
        conformance item): 20 min in the quick profile, 2 h in the full one."""
        return 1200.0 if self.profile == "quick" else 7200.0

    @property
    def repeat_limit(self) -> int:
        """Jobs a sweep may grow to for an undecided verdict (--hpc-max-repeats)."""
        return self.max_repeats or min(2 * self.repeats, MAX_REPEATS)

    @property
    def repeat_scope(self) -> str:
        """Which points adaptive repeats grow (--hpc-repeat-for; adaptive.SCOPES): quick
        spends jobs only on potential changes, full on every undecided point."""
        return self.repeat_for or ("changes" if self.profile == "quick" else "undecided")

    def paired(self, stack: str) -> tuple[str, str] | None:
        """(base, candidate) implementations when this is a paired A/B run of `stack`."""
        if stack in self.candidate:
            return self.base[stack], self.candidate[stack]
        return None


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("hpccomm", "HPC communication stacks (pytest-hpccomm)")
    for spec in OPTIONS:
        if spec.kind == "bool":
            group.addoption(
                spec.flag, action="store_true", default=None, dest=spec.dest, help=spec.help
            )
            parser.addini(spec.dest, spec.help, type="bool", default=spec.default)
        elif spec.kind == "assign":
            group.addoption(
                spec.flag,
                action="append",
                default=None,
                dest=spec.dest,
                metavar="STACK=IMPL",
                help=spec.help,
            )
            parser.addini(spec.dest, spec.help, type="linelist", default=[])
        elif spec.kind == "update":
            group.addoption(
                spec.flag,
                nargs="?",
                const="new",
                default=None,
                dest=spec.dest,
                metavar="new|all",
                help=spec.help,
            )
            parser.addini(spec.dest, spec.help, default="none")
        else:
            group.addoption(spec.flag, default=None, dest=spec.dest, help=spec.help)
            parser.addini(spec.dest, spec.help, default=None)


def _raw_value(config: pytest.Config, spec: OptionSpec) -> Any:
    value = config.getoption(spec.dest)
    if value is None:
        value = config.getini(spec.dest)
    if value is None or value == "" or value == []:
        return spec.default
    return value


def _number(spec: OptionSpec, value: Any, cast: Callable[[str], Any]) -> Any:
    try:
        return cast(str(value))
    except ValueError:
        raise pytest.UsageError(f"{spec.flag}: expected a number, got {value!r}") from None


def build_config(config: pytest.Config) -> HpcConfig:
    """Read and validate every option; any problem is a one-line pytest.UsageError."""
    values: dict[str, Any] = {}
    for spec in OPTIONS:
        value = _raw_value(config, spec)
        if spec.choices and value is not None and str(value) not in spec.choices:
            raise pytest.UsageError(
                f"{spec.flag}: invalid value {value!r} (choose from {', '.join(spec.choices)})"
            )
        if spec.kind == "float" and value is not None:
            value = _number(spec, value, float)
        elif spec.kind == "int" and value is not None:
            value = _number(spec, value, int)
        elif spec.kind == "path" and value is not None:
            value = Path(str(value))
        values[spec.dest.removeprefix("hpc_")] = value

    try:
        sizes = values["sizes"] and tuple(parse_size_spec(str(values["sizes"])))
    except SizeSpecError as exc:
        raise pytest.UsageError(f"--hpc-sizes: {exc}") from None
    values["sizes"] = sizes or None
    if values["vlink_rate"] is not None:
        try:
            values["vlink_rate"] = parse_bit_rate(str(values["vlink_rate"]))
        except RateError as exc:
            raise pytest.UsageError(f"--hpc-vlink-rate: {exc}") from None
    _check_ranges(values)
    hostfile: Path | None = values["hostfile"]
    if hostfile is not None and not os.access(hostfile, os.R_OK):
        raise pytest.UsageError(f"--hpc-hostfile: cannot read {str(hostfile)!r}")
    history = values["history"]
    values["history"] = None if history in (None, "none") else Path(os.path.expanduser(history))
    if history is None:
        values["history"] = default_history_path()
    values["update_baselines"] = values["update_baselines"] or "none"
    values["reference"] = assignments("--hpc-reference", values["reference"])
    values["base"], values["candidate"] = _paired_sides(
        values["base"], values["candidate"], values["reference"], config
    )
    if values["ratio_gate"] and not values["reference"]:
        raise pytest.UsageError(
            "--hpc-ratio-gate judges the ratio series of a nightly against a reference: "
            "give --hpc-reference STACK=IMPL"
        )
    if values["ratio_gate"] and values["history"] is None:
        raise pytest.UsageError("--hpc-ratio-gate reads the history: --hpc-history is 'none'")
    if values["candidate"] and values["update_baselines"] != "none":
        raise pytest.UsageError(
            "--hpc-base/--hpc-candidate judge two builds against each "
            "other: they cannot be combined with --hpc-update-baselines"
        )
    values["host_list"] = resolve_hosts(values["hosts"], hostfile, os.environ)
    return HpcConfig(**values)


def resolve_hosts(
    hosts: str | None, hostfile: Path | None, env: Mapping[str, str]
) -> tuple[Host, ...]:
    """Explicit hosts win over a hostfile, which wins over the SLURM allocation."""
    try:
        if hosts:
            return tuple(parse_host_list(hosts))
        if hostfile is not None:
            return tuple(parse_hostfile(hostfile))
        if env.get("SLURM_JOB_NODELIST"):
            return tuple(hosts_from_slurm(env))
    except HostSpecError as exc:
        flag = "--hpc-hosts" if hosts else "--hpc-hostfile" if hostfile else "SLURM_JOB_NODELIST"
        raise pytest.UsageError(f"{flag}: {exc}") from None
    return ()


def assignments(flag: str, items: list[str] | None) -> dict[str, str]:
    """STACK=IMPL values of --hpc-base or --hpc-candidate, stack -> implementation (a
    malformed or repeated one is a usage error naming `flag`)."""
    out: dict[str, str] = {}
    for item in items or []:
        stack, sep, impl = str(item).partition("=")
        stack, impl = stack.strip(), impl.strip()
        if not sep or not stack or not impl:
            raise pytest.UsageError(
                f"{flag}: expected STACK=IMPL (e.g. mpi=openmpi4), got {item!r}"
            )
        if stack in out:
            raise pytest.UsageError(f"{flag}: stack {stack!r} given twice")
        out[stack] = impl
    return out


def _paired_sides(
    base: list[str] | None,
    candidate: list[str] | None,
    reference: dict[str, str],
    config: pytest.Config,
) -> tuple[dict[str, str], dict[str, str]]:
    """--hpc-base and --hpc-candidate must name the same stacks (one side alone compares
    nothing). A stack of --hpc-reference is a base side whose candidate is --hpc-candidate's
    or, unnamed, what the run tests for it (the stacks' pytest_hpccomm_under_test)."""
    b, c = assignments("--hpc-base", base), assignments("--hpc-candidate", candidate)
    for stack, impl in sorted(reference.items()):
        if stack in b:
            raise pytest.UsageError(
                f"--hpc-reference and --hpc-base both name stack {stack!r}: the reference is "
                f"the base side of the nightly's pairs"
            )
        b[stack] = impl
        if stack not in c:
            tested = config.hook.pytest_hpccomm_under_test(config=config, stack=stack)
            if tested is None:
                raise pytest.UsageError(
                    f"--hpc-reference {stack}={impl}: which {stack} is under test is not one "
                    f"implementation here; name it with --hpc-candidate {stack}=IMPL"
                )
            c[stack] = str(tested)
    lone = sorted(set(b) ^ set(c))
    if lone:
        side = "--hpc-base" if lone[0] in b else "--hpc-candidate"
        other = "--hpc-candidate" if side == "--hpc-base" else "--hpc-base"
        raise pytest.UsageError(
            f"{side} names stack {lone[0]!r} but {other} does not: a paired "
            f"A/B run needs both sides"
        )
    return b, c


def _check_ranges(values: dict[str, Any]) -> None:
    if not 0 < values["tolerance"] < 1:  # 0 leaves no band: every verdict would raise
        raise pytest.UsageError(
            f"--hpc-tolerance: must be in (0, 1) (0.05 = 5 %), got {values['tolerance']}"
        )
    if not 0 <= values["require_armed"] <= 1:
        raise pytest.UsageError(
            f"--hpc-require-armed: a fraction in [0, 1], got {values['require_armed']}"
        )
    if values["inject_slowdown"] < 1.0:
        raise pytest.UsageError(
            f"--hpc-inject-slowdown: must be >= 1.0, got {values['inject_slowdown']}"
        )
    if not 2 <= values["vhosts"] <= 16:
        raise pytest.UsageError(f"--hpc-vhosts: must be 2..16, got {values['vhosts']}")
    if not 3 <= values["ab_rounds"] <= 100:
        raise pytest.UsageError(f"--hpc-ab-rounds: must be 3..100, got {values['ab_rounds']}")
    if not 1 <= values["repeats"] <= 20:
        raise pytest.UsageError(f"--hpc-repeats: must be 1..20, got {values['repeats']}")
    if values["max_repeats"] and not values["repeats"] <= values["max_repeats"] <= MAX_REPEATS:
        raise pytest.UsageError(
            f"--hpc-max-repeats: must be --hpc-repeats "
            f"({values['repeats']})..{MAX_REPEATS}, got "
            f"{values['max_repeats']}"
        )
