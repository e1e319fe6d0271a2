"""`hpccomm report RESULTS.json`: the HTML report and the markdown summary again, from a
results JSON a session wrote (--hpc-results), e.g. one a CI job kept as an artifact. The same
renderers as at session end; nothing is re-judged: each verdict is the one the session gave."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pytest_hpccomm.files import atomic_write
from pytest_hpccomm.report.html import write_html_report
from pytest_hpccomm.report.markdown import markdown_summary
from pytest_hpccomm.report.results_json import load_results


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hpccomm report", description=__doc__.split("\n\n")[0])
    p.add_argument("results", type=Path, help="a results JSON written by --hpc-results")
    p.add_argument("--html", type=Path, metavar="PATH", help="write the HTML report here")
    p.add_argument(
        "--markdown",
        type=Path,
        metavar="PATH",
        help="write the markdown summary here ('-': print it)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.html is None and args.markdown is None:
        print("hpccomm report: error: name at least one of --html, --markdown", file=sys.stderr)
        return 2
    try:
        results, session = load_results(args.results)
    except (OSError, ValueError, KeyError) as exc:
        print(f"hpccomm report: error: {args.results}: {exc}", file=sys.stderr)
        return 2
    if args.html is not None:
        print(f"HTML report: {write_html_report(args.html, results, session)}")
    if args.markdown is not None:
        text = markdown_summary(results, session)
        if str(args.markdown) == "-":
            sys.stdout.write(text)
        else:
            print(f"markdown summary: {atomic_write(args.markdown, text)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
