"""One release's conformance run, read from its JUnit XML: each item as (property, case,
outcome, detail), the release's own token taken out of the case so rows line up across
releases."""

from __future__ import annotations

import re
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Outcome = Literal["pass", "fail", "known", "skip"]  # known: an xfail (a documented defect)

_E_PREFIX = re.compile(r"^E {1,3}")


@dataclass(frozen=True)
class Case:
    prop: str  # "test_conformance_p2p::test_proc_null_completes_at_once_with_the_standard_status"
    case: str  # the parametrization without the release: "loopback"
    outcome: Outcome
    detail: str = ""  # fail: first line (+ the shrunk example); known/skip: the reason


EXAMPLE_HEADS = ("Falsifying example", "Failing test case")  # Hypothesis' words, old and new


def shrunk_example(text: str) -> str:
    """Hypothesis's shrunk example from a failure's text, as printed (pytest's "E   " prefixes
    taken off): its "Failing test case: f(...)" (older: "Falsifying example") call, and the
    "Draw N (label): ..." values of a property that draws with st.data(); "" when none."""
    lines = [_E_PREFIX.sub("", line).rstrip() for line in text.splitlines()]
    for i, line in enumerate(lines):
        if line.lstrip().startswith(EXAMPLE_HEADS):
            out: list[str] = []
            depth = 0
            for nxt in lines[i:]:
                if depth <= 0 and out and not nxt.lstrip().startswith("Draw "):
                    break
                out.append(nxt)
                depth += sum(nxt.count(c) for c in "([{") - sum(nxt.count(c) for c in ")]}")
            return textwrap.dedent("\n".join(out)).strip()
    return ""


def _split(name: str, release: str) -> tuple[str, str]:
    func, _, rest = name.partition("[")
    params = rest[:-1] if rest.endswith("]") else rest
    tokens = params.split("-") if params else []
    if release in tokens:
        tokens.remove(release)
        return func, "-".join(tokens)
    return func, params.replace(release, "").strip("-")


def read_cases(path: Path, release: str) -> list[Case]:
    """The items of a JUnit XML file written by pytest (xunit1 or xunit2)."""
    out = []
    for tc in ET.parse(path).getroot().iter("testcase"):
        module = tc.get("classname", "").rsplit(".", 1)[-1]
        func, case = _split(tc.get("name", ""), release)
        prop = f"{module}::{func}" if module else func
        failed = tc.find("failure")
        if failed is None:
            failed = tc.find("error")
        skipped = tc.find("skipped")
        if failed is not None:
            msg = (failed.get("message") or "").strip().splitlines()
            first = msg[0] if msg else "failed"
            # the stacks' messages name the case they ran ("case: {...}"): kept with the example
            named = [ln.strip() for ln in msg[1:] if ln.strip().startswith("case: ")][:1]
            example = shrunk_example(failed.text or "")
            detail = "\n".join([first, *named, *([example] if example else [])])
            out.append(Case(prop, case, "fail", detail))
        elif skipped is not None and skipped.get("type") == "pytest.xfail":
            out.append(Case(prop, case, "known", (skipped.get("message") or "").strip()))
        elif skipped is not None:
            reason = (skipped.get("message") or "").strip()
            out.append(Case(prop, case, "skip", reason))
        else:
            out.append(Case(prop, case, "pass"))
    return out
