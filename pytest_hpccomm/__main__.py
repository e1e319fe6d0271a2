"""Command line: ``hpccomm SUBCOMMAND`` (also ``python -m pytest_hpccomm``).

`history` reads the history store (series of run medians, change points, the trends page); the
other subcommands hand their arguments to the tool that does the work (TOOLS), so each keeps
its own options and help: ``hpccomm mpi create openmpi``, ``hpccomm build-grpc [PREFIX]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
from typing import NoReturn, Sequence, TextIO

from pytest_hpccomm.baselines.history import (
    OTAVA_HINT,
    ChangePoint,
    HistoryStore,
    RunRecord,
    SeriesKey,
    change_points,
    default_history_path,
)
from pytest_hpccomm.baselines.ratio_gate import (
    DEFAULT_LAST,
    DEFAULT_MIN_SEGMENT,
    judge_series,
    step_line,
)
from pytest_hpccomm.measure.measurement import param_key
from pytest_hpccomm.report.terminal import text_table


def _params_text(params_key: str) -> str:
    params = json.loads(params_key)
    return " ".join(f"{k}={v}" for k, v in params.items()) or "-"


def _fmt_median(x: float) -> str:
    """Four significant digits, trailing zeros kept so the column lines up."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    return f"{x:.{max(0, 3 - math.floor(math.log10(abs(x))))}f}"


def _history(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.limit is not None and args.html is None:
        err.write("hpccomm history: error: --limit applies to --html only\n")
        return 2
    store = HistoryStore(args.db)
    if not store.path.exists():
        err.write(f"no history database at {store.path}\n")
        return 1
    pkey = None
    if args.params is not None:
        pkey = param_key(args.params)
    keys = store.keys(args.system, args.fabric, args.stack, args.benchmark, pkey)
    if args.gate:
        return _gate(store, keys, args, out, err)
    if args.html is not None:
        return _trends_page(store, keys, args, out, err)
    if not keys:
        out.write(f"no matching series in {store.path}\n")
        return 0
    if args.benchmark is None:
        rows = [["SYSTEM", "FABRIC", "STACK", "BENCHMARK", "PARAMS", "RUNS", "LAST RUN (UTC)"]]
        rows += [
            [
                k.system,
                k.fabric,
                k.stack,
                k.benchmark,
                _params_text(k.params_key),
                str(k.runs),
                k.last.strftime("%Y-%m-%d %H:%M"),
            ]
            for k in keys
        ]
        text_table(rows, out)
        return 0
    status = 0
    for n, key in enumerate(keys):
        if n:
            out.write("\n")
        status = max(status, _one_series(store, key, args, out, err))
    return status


def _filters(args: argparse.Namespace) -> str:
    named = [(k, getattr(args, k)) for k in ("system", "fabric", "stack", "benchmark")]
    text = [f"{k}={v}" for k, v in named if v is not None]
    if args.params is not None:
        text.append(f"params={_params_text(param_key(args.params))}")
    return " ".join(text)


def _trends_page(
    store: HistoryStore,
    keys: Sequence[SeriesKey],
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
) -> int:
    from pytest_hpccomm.report.trends import DEFAULT_LIMIT, write_trends_page  # matplotlib

    try:
        page = write_trends_page(
            args.html,
            store,
            keys,
            limit=args.limit or DEFAULT_LIMIT,
            max_pvalue=args.max_pvalue,
            min_magnitude=args.min_magnitude,
            filters=_filters(args),
        )
    except RuntimeError:
        err.write(OTAVA_HINT + "\n")
        return 1
    except OSError as exc:
        err.write(f"cannot write the trends page {args.html}: {exc.strerror or exc}\n")
        return 1
    out.write(
        f"trends page: {page.path} ({len(page.shown)} of {page.matched} series, "
        f"{page.change_count} change point(s))\n"
    )
    return 0


def _one_series(
    store: HistoryStore, key: SeriesKey, args: argparse.Namespace, out: TextIO, err: TextIO
) -> int:
    points = store.series(key.system, key.fabric, key.stack, key.benchmark, key.params_key)
    unit = points[-1].unit if points else ""
    out.write(
        f"{key.system}/{key.fabric}/{key.stack} {key.benchmark} "
        f"{_params_text(key.params_key)} ({unit}, {len(points)} runs)\n"
    )
    status = 0
    cps: dict[int, ChangePoint] = {}
    try:
        found = change_points(
            [p.median for p in points],
            max_pvalue=args.max_pvalue,
            min_magnitude=args.min_magnitude,
            log_scale=all(p.median > 0 for p in points),
        )
        cps = {cp.index: cp for cp in found}
    except RuntimeError:
        err.write(OTAVA_HINT + "\n")
        status = 1
    commits = store.commits([p.run_id for p in points])
    rows = [["#", "TIME (UTC)", "RUN", "COMMIT", "MEDIAN", "CHANGE"]]
    for i, p in enumerate(points):
        flag = ""
        if i in cps:
            cp = cps[i]
            flag = f"<-- change {cp.rel_change * 100:+.1f}% (p={cp.p_value:.1g})"
        rows.append(
            [
                str(i),
                p.timestamp.strftime("%Y-%m-%d %H:%M:%S"),
                p.run_id,
                (commits.get(p.run_id) or "-")[:12],
                _fmt_median(p.median),
                flag,
            ]
        )
    text_table(rows, out)
    out.write(f"{len(cps)} change point(s) of the raw medians\n")
    paired = store.ratio_records(key.system, key.fabric, key.stack, key.benchmark, key.params_key)
    if paired:
        status = max(status, _ratio_series(paired, args, out, err))
    return status


def _ratio_series(
    paired: Sequence[RunRecord], args: argparse.Namespace, out: TextIO, err: TextIO
) -> int:
    """The paired runs' ratio series with the ratio gate's steps."""
    try:
        gate = judge_series(paired, args.tolerance, args.last, args.min_segment, args.max_pvalue)
    except RuntimeError:
        err.write(OTAVA_HINT + "\n")
        return 1
    at = {s.index: s for s in gate.steps}
    out.write(f"ratio series: {len(paired)} paired runs (candidate / reference, same session)\n")
    rows = [["#", "TIME (UTC)", "RUN", "REFERENCE", "RATIO", "CI", "REF MEDIAN", "STEP"]]
    for i, r in enumerate(paired):
        step = at.get(i)
        rows.append(
            [
                str(i),
                r.timestamp.strftime("%Y-%m-%d %H:%M:%S"),
                r.run_id,
                str((r.base_fingerprint or {}).get("implementation", "-")),
                f"{r.ratio:.3f}" if r.ratio is not None else "-",
                "-"
                if r.ci_low is None or r.ci_high is None
                else f"{r.ci_low:.3f}\N{EN DASH}{r.ci_high:.3f}",
                "-" if r.base_median is None else _fmt_median(r.base_median),
                "" if step is None else f"<-- step {step.step:.3f}",
            ]
        )
    text_table(rows, out)
    for s in gate.steps:
        out.write(("GATE FAILS: " if s in gate.fired else "step: ") + step_line(s) + "\n")
    return 0


def _gate(
    store: HistoryStore,
    keys: Sequence[SeriesKey],
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
) -> int:
    """--gate: the ratio gate over every matching series; 1 when a step fails it."""
    fired = judged = 0
    for key in keys:
        paired = store.ratio_records(
            key.system, key.fabric, key.stack, key.benchmark, key.params_key
        )
        name = (
            f"{key.system}/{key.fabric}/{key.stack} {key.benchmark} {_params_text(key.params_key)}"
        )
        if not paired:
            out.write(f"{name}: raw medians only (no paired run): not gated\n")
            continue
        try:
            gate = judge_series(
                paired, args.tolerance, args.last, args.min_segment, args.max_pvalue
            )
        except RuntimeError:
            err.write(OTAVA_HINT + "\n")
            return 1
        if gate.reason:
            out.write(f"{name}: ratio series not gated: {gate.reason}\n")
            continue
        judged += 1
        fired += bool(gate.fired)
        for s in gate.steps:
            head = "GATE FAILS" if s in gate.fired else "step"
            out.write(f"{name}: {head}: {step_line(s)}\n")
        if not gate.steps:
            out.write(f"{name}: ratio series, {gate.nights} nights: no step\n")
    out.write(
        f"ratio gate: {fired} of {judged} series failed (a step worse than "
        f"{args.tolerance:.0%} in the last {args.last} nights, levels of "
        f"{args.min_segment}+ nights)\n"
    )
    return 1 if fired else 0


def _json_object(text: str) -> dict[str, object]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"size\": 8}'")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


# subcommand -> (module with main(argv) -> int, one line of help)
TOOLS: dict[str, tuple[str, str]] = {
    "doctor": (
        "pytest_hpccomm.doctor",
        "what this machine offers, and what each suite would run or skip, and why",
    ),
    "run": (
        "pytest_hpccomm.nightly",
        "the nightly: every suite (or those named) with its reports in ./results",
    ),
    "setup": (
        "pytest_hpccomm.bootstrap",
        "make the MPI environments, native gRPC peer, Horovod and TensorFlow now",
    ),
    "mpi": (
        "pytest_hpccomm.cluster.mpi",
        "create or list the MPI environments the suites run (openmpi, openmpi4, mpich)",
    ),
    "matrix": (
        "pytest_hpccomm.matrix.cli",
        "conformance over a set of releases (release x property) and A/B between adjacent ones",
    ),
    "build-grpc": (
        "pytest_hpccomm.stacks.grpc.build",
        "build the native gRPC peer now, against the system's gRPC or a PREFIX",
    ),
    "build-horovod": ("pytest_hpccomm.stacks.horovod.env", "build the Horovod environment now"),
    "tf-env": ("pytest_hpccomm.stacks.tf.env", "create the TensorFlow environment now"),
    "probe": ("pytest_hpccomm.measure.host_speed", "this host's reference-probe rates"),
    "snapshot": (
        "pytest_hpccomm.fabrics.snapshot",
        "record this host's RDMA/network sysfs as a fixture tree",
    ),
    "baselines": (
        "pytest_hpccomm.admin",
        "show, diff, promote or prune stored baseline sets",
    ),
    "report": (
        "pytest_hpccomm.report.rerender",
        "the HTML report and markdown summary again, from a results JSON",
    ),
    "templates": (
        "pytest_hpccomm.ci_templates",
        "write the SLURM batch script or the GitHub/GitLab CI template here",
    ),
    "screenshot": ("pytest_hpccomm.report.screenshot", "a PNG of an HTML report's first screen"),
}


def _tool(name: str, argv: list[str], out: TextIO, err: TextIO) -> int:
    """Run TOOLS[name]'s main with the arguments after the subcommand, untouched (its own
    parser reads them: `hpccomm mpi --help` is the MPI tool's help)."""
    import importlib

    module = importlib.import_module(TOOLS[name][0])
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = module.main(argv)
        except SystemExit as exc:  # the tool's own argparse: --help, usage errors
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    return int(code or 0)


class _Parser(argparse.ArgumentParser):
    """A usage error is one line (`prog: error: ...`), not argparse's usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="hpccomm", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="SUBCOMMAND", parser_class=_Parser
    )
    h = sub.add_parser(
        "history",
        help="list recorded series and flag change points",
        description="Without --benchmark: the series in the history store. With it: each "
        "matching series of run medians, oldest first, change points (Apache Otava) flagged. "
        "With --html: the trends page of every matching series instead.",
    )
    h.add_argument("--db", help=f"history database (default: {default_history_path()})")
    h.add_argument("--system")
    h.add_argument("--fabric")
    h.add_argument("--stack")
    h.add_argument("--benchmark", help="show this benchmark's series (else list benchmarks)")
    h.add_argument("--params", type=_json_object, help="parameters as JSON, e.g. '{\"size\": 8}'")
    h.add_argument("--max-pvalue", type=float, default=0.001, help="change point significance")
    h.add_argument(
        "--min-magnitude", type=float, default=0.0, help="ignore relative changes below this"
    )
    h.add_argument(
        "--gate",
        action="store_true",
        help="the ratio gate: exit 1 when a paired series (nightly against a reference) has a "
        "step worse than --tolerance starting in the last --last runs",
    )
    h.add_argument(
        "--tolerance", type=_fraction, default=0.05, help="the ratio gate's band (default 0.05)"
    )
    h.add_argument(
        "--last",
        type=_positive_int,
        default=DEFAULT_LAST,
        metavar="K",
        help=f"a failing step starts in the last K runs (default {DEFAULT_LAST})",
    )
    h.add_argument(
        "--min-segment",
        type=_positive_int,
        default=DEFAULT_MIN_SEGMENT,
        metavar="M",
        help=f"runs each level needs before a step counts (default {DEFAULT_MIN_SEGMENT})",
    )
    h.add_argument(
        "--html", metavar="PATH", help="write the trends page here (self-contained HTML with plots)"
    )
    h.add_argument(
        "--limit",
        type=_positive_int,
        default=None,
        metavar="N",
        help="series on the trends page (default 30): change points first",
    )
    h.set_defaults(func=_history)
    for name, (_, text) in TOOLS.items():  # listed in the help; main() hands them on
        sub.add_parser(
            name,
            help=text,
            description=f"{text} (`hpccomm {name} --help`: its own options)",
            add_help=False,
        )
    return parser


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in and args_in[0] in TOOLS:
        return _tool(args_in[0], args_in[1:], out, err)
    parser = build_parser()
    try:
        # argparse prints to sys.stdout/sys.stderr: send its help and errors where ours go
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(args_in)
    except SystemExit as exc:  # usage errors and --help: return the code instead of exiting
        return int(exc.code or 0)
    result: int = args.func(args, out, err)
    return result


if __name__ == "__main__":
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `... | head`: not an error worth a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    sys.exit(code)
