"""Writes docs/reference/options.md from pytest_hpccomm.config.OPTIONS and
docs/reference/retries.md from pytest_hpccomm.retries.CAUSES, so those pages are the code's own
lists, never copies that drift.

    .venv/bin/python docs/gen_reference.py           # rewrite the page
    .venv/bin/python docs/gen_reference.py --check   # exit 1 when the committed page differs
"""

from __future__ import annotations

import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent / "reference" / "options.md"
RETRIES_PAGE = Path(__file__).resolve().parent / "reference" / "retries.md"

RETRIES_HEADER = """# Retries

Generated from `pytest_hpccomm.retries.CAUSES` by `docs/gen_reference.py`: do not edit by hand.

The suite retries only for a named transient cause that the code detects by its signature,
bounded, and counted: each session's count per cause is in the terminal summary
(`hpccomm retries: ...`), the markdown summary, the results JSON (`session.retries`) and
JUnit's global properties (`hpccomm_retries`, `hpccomm_retries_<cause>`). Nothing else is
tried again: a hang, a wrong answer, a false alarm or a missed canary fails the first time.

| cause | JUnit property | how it is detected, why it is transient, its bound |
|---|---|---|
"""

HEADER = """# Options

Generated from `pytest_hpccomm.config.OPTIONS` by `docs/gen_reference.py`: do not edit by hand
(`tests/docs/test_docs_build.py` fails when this page and the code differ).

Every option is also an ini key (`hpc_fabric = ib` in `pytest.ini`: the name without the
leading dashes, dashes as underscores); the command line wins. A bad value is a one-line usage
error (exit status 4). The stacks' own options (`--hpc-mpi`, `--hpc-grpc-*`, `--hpc-horovod-*`,
`--hpc-tf-python`, `--hpc-verbs-*`) are described on their pages under Stacks; `pytest --help`
lists them all.

| option | help | default |
|---|---|---|
"""


def _cell(text: str) -> str:
    # argparse escapes % as %%; a table cell must not contain a bare |
    return text.replace("%%", "%").replace("|", "\\|").replace("\n", " ")


def _default(spec: object) -> str:
    default = getattr(spec, "default")
    kind = getattr(spec, "kind")
    if default is None:
        return "none" if kind == "update" else "—"
    return f"`{_cell(str(default))}`"


def render() -> str:
    from pytest_hpccomm.config import OPTIONS

    rows = []
    for spec in OPTIONS:
        name = f"`{spec.flag}`"
        if spec.choices:
            name += " {" + ",".join(spec.choices) + "}"
        rows.append(f"| {name} | {_cell(spec.help)} | {_default(spec)} |\n")
    return HEADER + "".join(rows)


def render_retries() -> str:
    from pytest_hpccomm.retries import CAUSES, property_name

    return RETRIES_HEADER + "".join(f"| {cause} | `{property_name(cause)}` | {_cell(why)} |\n"
                                    for cause, why in CAUSES.items())


def main(argv: list[str]) -> int:
    pages = {PAGE: render(), RETRIES_PAGE: render_retries()}
    if "--check" in argv:
        stale = [p for p, text in pages.items() if not p.is_file() or p.read_text() != text]
        for page in stale:
            print(f"{page} differs from the code: run {Path(__file__).name}", file=sys.stderr)
        return 1 if stale else 0
    for page, text in pages.items():
        page.write_text(text)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    raise SystemExit(main(sys.argv[1:]))
