"""What the package index has of a package, as `pip index versions` lists it: the releases a
stack's release axis may name, and what a usage error names when a release is not there.

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

    def missing(self, version: str, what: str = "") -> str | None:
        """Why `version` cannot be installed from the index (one line naming the versions it
        has), None when it is listed. `what`: the listing's qualifier for the message
        ("with a wheel for Python 3.11")."""
        if version in self.versions:
            return None
        if self.problem:
            have = f" (the other sources list {', '.join(self.versions)})" if self.versions else ""
            return (
                f"{self.package}=={version}: the package index did not answer: {self.problem}{have}"
            )
        if not self.versions:
            return f"{self.package}=={version}: the package index has no release of {self.package}"
        return (
            f"{self.package}=={version}: {self.package} has no release {version}{what} on the "
            f"package index: it has {', '.join(self.versions)}"
        )


_LISTINGS: dict[tuple[str, str, bool], Listing] = {}


def ask_index(
    package: str,
    python: str = sys.executable,
    only_binary: bool = False,
    timeout: float = INDEX_TIMEOUT,
) -> Listing:
    """`pip index versions PACKAGE` in `python` (its tags choose the wheels that count;
    `only_binary`: releases without a wheel for it are not listed). A whole answer is kept for
    the process; one with a problem is asked again next time."""
    key = (package, python, only_binary)
    if key in _LISTINGS:
        return _LISTINGS[key]
    argv = [python, "-m", "pip", "index", "versions", package, "--disable-pip-version-check", "-vv"]
    argv += ["--only-binary", ":all:"] if only_binary else []
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Listing(package, (), f"`pip index versions {package}` took over {timeout:.0f} s")
    except OSError as exc:
        return Listing(package, (), f"`pip index versions {package}` could not run: {exc}")
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
