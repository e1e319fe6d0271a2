"""Which stacks can run here, and what they add to the fingerprint.

A probe answers cheaply without starting the stack (imports and PATH only), so collection stays
fast; a stack's driver reports the precise runtime facts (e.g. MPI library version) itself.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
from dataclasses import dataclass
from typing import Protocol


class StackProbe(Protocol):
    @property
    def name(self) -> str: ...

    def unavailable_reason(self) -> str | None:
        """None when the stack can run here, else one line saying what is missing."""

    def versions(self) -> dict[str, str]:
        """Package/library versions for the fingerprint."""


def dist_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class ImportProbe:
    """A stack that is present when its Python modules import and its programs are on PATH."""

    name: str
    modules: tuple[str, ...]
    dists: tuple[str, ...]
    programs: tuple[str, ...] = ()
    install_hint: str = ""

    def unavailable_reason(self) -> str | None:
        missing = [m for m in self.modules if importlib.util.find_spec(m) is None]
        missing += [p for p in self.programs if shutil.which(p) is None]
        if not missing:
            return None
        hint = f" (install: {self.install_hint})" if self.install_hint else ""
        return f"stack {self.name!r} not available: missing {', '.join(missing)}{hint}"

    def versions(self) -> dict[str, str]:
        out = {}
        for dist in self.dists:
            version = dist_version(dist)
            if version:
                out[dist] = version
        return out
