"""Writes docs/reference/options.md from pytest_hpccomm.config.OPTIONS, so the options page
is the code's own list (name, help, default), never a copy that drifts.

    .venv/bin/python docs/gen_reference.py           # rewrite the page
    .venv/bin/python docs/gen_reference.py --check   # exit 1 when the committed page differs
"""

from __future__ import annotations

import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent / "reference" / "options.md"

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


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if PAGE.read_text() != text:
            print(f"{PAGE} differs from the code: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    raise SystemExit(main(sys.argv[1:]))
