"""Where the project's cache lives (cache.cache_dir): never a shared path chosen for the user."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from pytest_hpccomm.cache import cache_dir


def test_without_home_the_cache_is_the_users_own_not_tmp() -> None:
    home = pwd.getpwuid(os.getuid()).pw_dir
    got = cache_dir("mpi", env={})
    assert got == Path(home) / ".cache" / "pytest-hpccomm" / "mpi"
    assert not str(got).startswith("/tmp/")


def test_xdg_and_home_and_the_override_win_in_that_order() -> None:
    assert cache_dir("mpi", env={"HOME": "/h"}) == Path("/h/.cache/pytest-hpccomm/mpi")
    assert cache_dir("mpi", env={"HOME": "/h", "XDG_CACHE_HOME": "/x"}) == Path(
        "/x/pytest-hpccomm/mpi"
    )
    assert cache_dir("mpi", env={"HOME": "/h", "V": "/o"}, override_var="V") == Path("/o")
