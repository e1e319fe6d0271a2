"""The two ways a part a test needs can be missing, shared by every stack and the core.

    Unavailable  absent here (a toolchain, a package, a device): an item that did not ask
                 for it skips with the reason; one that named it fails
    Broken       there, or named, and it does not work (a build that fails, a Python that
                 cannot import it): the item fails with the reason

The stack contract's resolver (stacks/contract.Implementations) tells them apart by these
bases, and so do the `hpccomm build-*` commands (exit 0 saying why for Unavailable, 1 for
Broken). Each stack names its own subclasses, e.g. MpiUnavailable(Unavailable)."""

from __future__ import annotations

import sys
from collections.abc import Callable


class Unavailable(Exception):
    """Absent here: a skip where nothing asked for it."""


class Broken(Exception):
    """There (or named) and not working: a failure."""


def build_main(build: Callable[[], str]) -> int:
    """A `hpccomm build-*` command's end: print what `build()` made and return 0; Unavailable
    is not an error here (it says why, the items then skip with that reason): 0; Broken: the
    reason on stderr, 1."""
    try:
        made = build()
    except Unavailable as e:
        print(f"skipped: {e}")
        return 0
    except Broken as e:
        print(e, file=sys.stderr)
        return 1
    print(made)
    return 0


class KnownDefect(BaseException):
    """A documented defect of the stack under test, recognised by the symptom this run showed:
    the plugin makes the test an xfail with this reason. A BaseException, and not pytest.xfail's
    own, so that Hypothesis neither shrinks nor replays it: each replay of a defect that kills
    the peer costs a restart, and an intermittent one would be reported as flaky."""
