"""What the package index has of a package, as pip lists it: the releases a stack's release
axis may name, and what a usage error names when a release is not there. Every stack asks
here (MPI's wheels, grpcio and TensorFlow releases with a wheel for the Python that runs them).

pip lists what every source it is configured with has (the index, an extra index, a
`find-links` directory), so an index that does not answer still leaves a listing of the local
sources' versions: `Listing.problem` keeps what pip said of the index, so that a version
missing from such a listing is said to be unknown because the index did not answer, not
because it has no such release.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

INDEX_TIMEOUT = 120.0
# what pip says (-vv) of a source that did not answer: refused, timed out, a bad certificate
UNANSWERED = re.compile(r"^Could not fetch URL (\S+?):? (.*?)(?: - skipping)?$", re.M)
ERRNO = re.compile(r"\[Errno -?\d+\] [^'\")]+|Read timed out|CERTIFICATE_VERIFY_FAILED")


_FROM_VERSIONS = re.compile(r"\(from versions: ([^)]*)\)")


def wheel_versions(pip_output: str) -> list[str]:
    """The versions pip's resolver could use, oldest first, from its answer to a requirement no
    release meets ("... (from versions: 1.49.0, 1.49.1, ...)")."""
    m = _FROM_VERSIONS.search(pip_output)
    listed = [v.strip() for v in m.group(1).split(",") if v.strip()] if m else []
    return [] if listed == ["none"] else listed


def index_versions(pip_output: str) -> list[str]:
    """The versions `pip index versions` lists ("Available versions: 5.0.11, 5.0.10, ...")."""
    m = re.search(r"^Available versions: (.+)$", pip_output, re.M)
    return [v.strip() for v in m.group(1).split(",")] if m else []


@dataclass(frozen=True)
class Listing:
    """A package's versions on the index, newest first, and why the listing may be short."""

    package: str
    versions: tuple[str, ...]
    problem: str = ""  # the index did not answer (what pip said), or could not be asked

    def missing(self, version: str, what: str = "", named: str = "") -> str | None:
        """Why `version` cannot be installed from the index (one line naming the versions it
        has), None when it is listed. `what`: the listing's qualifier for the message
        ("with a wheel for Python 3.11"); `named`: how the user named it (default
        PACKAGE==VERSION), the line's first words."""
        if version in self.versions:
            return None
        said = named or f"{self.package}=={version}"
        if self.problem:
            have = f" (the other sources list {', '.join(self.versions)})" if self.versions else ""
            return f"{said}: the package index did not answer: {self.problem}{have}"
        if not self.versions:
            return f"{said}: the package index has no release of {self.package}{what}"
        return (
            f"{said}: {self.package} has no release {version}{what} on the "
            f"package index: it has {', '.join(self.versions)}"
        )


_LISTINGS: dict[tuple[str, str, bool], Listing] = {}


def ask_index(
    package: str,
    python: str = sys.executable,
    only_binary: bool = False,
    timeout: float = INDEX_TIMEOUT,
) -> Listing:
    """PACKAGE's releases on the index as pip in `python` sees them, newest first: `pip index
    versions`, or with `only_binary` only the releases with a wheel `python` can install. The
    one way every stack asks the index. A whole answer is kept for the process; one with a
    problem is asked again next time."""
    key = (package, python, only_binary)
    if key in _LISTINGS:
        return _LISTINGS[key]
    pip = [python, "-m", "pip", "--disable-pip-version-check", "-vv"]
    if only_binary:
        # `pip index versions` also lists a release whose only file this Python can use is an
        # sdist (grpcio 1.48.2 for 3.11); the resolver's answer to a requirement no release
        # meets names exactly those with a wheel for it
        argv = [*pip, "install", "--dry-run", "--no-deps", "--ignore-installed"]
        argv += ["--only-binary", ":all:", f"{package}<0"]
        asked = f"`pip install --dry-run {package}<0`"
    else:
        argv, asked = [*pip, "index", "versions", package], f"`pip index versions {package}`"
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Listing(package, (), f"{asked} took over {timeout:.0f} s")
    except OSError as exc:
        return Listing(package, (), f"{asked} could not run: {exc}")
    if only_binary:  # as `pip index versions` lists them: final releases, newest first
        versions = tuple(
            v for v in reversed(wheel_versions(proc.stdout + proc.stderr)) if _final(v)
        )
    else:
        versions = tuple(index_versions(proc.stdout))
    unanswered = [
        (url, why) for url, why in UNANSWERED.findall(proc.stdout + proc.stderr) if "404" not in why
    ]
    if unanswered:
        url, why = unanswered[-1]
        short = ERRNO.search(why)
        problem = f"{url}: {short.group(0) if short else why[:200]}"
    elif not versions and proc.returncode != 0:
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("ERROR")]
        problem = errors[-1] if errors else f"pip exited {proc.returncode}"
        if "No matching distribution" in problem:
            problem = ""  # the index answered: it has no such package
    else:
        problem = ""
    listing = Listing(package, versions, problem)
    if not problem:
        _LISTINGS[key] = listing
    return listing


def _final(text: str) -> bool:
    try:
        v = Version(text)
    except InvalidVersion:
        return False
    return not (v.is_prerelease or v.is_devrelease)


def newest_patches(versions: list[str] | tuple[str, ...]) -> list[str]:
    """The newest release of each major.minor, oldest first (pre-releases left out), each as
    the index spells it."""
    newest: dict[tuple[int, int], tuple[Version, str]] = {}
    for text in versions:
        try:
            v = Version(text)
        except InvalidVersion:
            continue
        if v.is_prerelease or v.is_devrelease:
            continue
        minor = (v.major, v.minor)
        if minor not in newest or v > newest[minor][0]:
            newest[minor] = (v, text)
    return [newest[m][1] for m in sorted(newest)]
