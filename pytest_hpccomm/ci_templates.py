"""`hpccomm templates [NAME] [--out DIR]`: the CI and batch templates users copy, written from
the installed package (pytest_hpccomm/templates/), so a pip install has them too.

slurm: nightly.sbatch (the quick suites as a SLURM batch job); github: the GitHub Actions
workflow and actionlint's runner labels; gitlab: the GitLab CI pipeline. How they fit
together: docs/how-to/slurm-and-ci.md.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

TEMPLATES: dict[str, tuple[tuple[str, ...], str]] = {  # name -> (files, what they are)
    "slurm": (("nightly.sbatch",), "the quick suites as a SLURM batch job (sbatch --wait)"),
    "github": (
        ("github/hpccomm.yml", "github/actionlint.yaml"),
        "GitHub Actions on a self-hosted cluster runner: nightly and the paired A/B merge gate",
    ),
    "gitlab": (
        ("gitlab/hpccomm.gitlab-ci.yml",),
        "GitLab CI on a cluster runner: nightly and the paired A/B merge gate",
    ),
}
NEXT = {
    "slurm": "set its variables, then from that directory: sbatch --wait nightly.sbatch",
    "github": "hpccomm.yml -> .github/workflows/, actionlint.yaml -> .github/; "
    "needs nightly.sbatch in $HPCCOMM_DIR (hpccomm templates slurm)",
    "gitlab": "hpccomm.gitlab-ci.yml -> .gitlab-ci.yml (or include: it); "
    "needs nightly.sbatch in $HPCCOMM_DIR (hpccomm templates slurm)",
}


def text(relpath: str) -> str:
    """A template's text, read from the installed package."""
    return resources.files("pytest_hpccomm").joinpath("templates", relpath).read_text()


def write(name: str, out: Path, force: bool = False) -> list[Path]:
    """Write template `name`'s files into `out` (made if missing); an existing file is kept
    unless `force` (FileExistsError names it)."""
    files = TEMPLATES[name][0]
    targets = [out / Path(f).name for f in files]
    existing = [t for t in targets if t.exists()]
    if existing and not force:
        raise FileExistsError(f"{', '.join(map(str, existing))} exists (--force to overwrite it)")
    out.mkdir(parents=True, exist_ok=True)
    for f, target in zip(files, targets, strict=True):
        target.write_text(text(f))
        if target.suffix == ".sbatch":
            target.chmod(0o755)
    return targets


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="hpccomm templates", description=__doc__.split("\n")[0])
    ap.add_argument("name", nargs="?", choices=sorted(TEMPLATES), help="the template to write")
    ap.add_argument("--out", type=Path, default=Path("."), help="directory (default: here)")
    ap.add_argument("--force", action="store_true", help="overwrite existing files")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.name is None:
        for name, (files, what) in TEMPLATES.items():
            print(f"{name:7} {what}: {', '.join(Path(f).name for f in files)}")
        return 0
    try:
        written = write(args.name, args.out, args.force)
    except FileExistsError as exc:
        print(f"hpccomm templates: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    print(f"next: {NEXT[args.name]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
