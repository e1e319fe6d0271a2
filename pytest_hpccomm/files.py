"""Files other processes read or write at the same time: atomic replacement and an flock.

Baselines, reports and the native build cache are shared between concurrent sessions and with
readers (CI artifact upload, a dashboard, git): a reader never sees half a file, and a writer
killed at any point leaves the previous one.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


class LockTimeout(TimeoutError):
    pass


def temp_prefix(path: Path) -> str:
    """Temp files of `path` are hidden siblings `.<name>.*.tmp` (same filesystem: rename works)."""
    return f".{path.name}."


def remove_stale_temps(path: Path) -> None:
    """Temp files a killed writer left; call only while holding the file's lock."""
    for stale in path.parent.glob(temp_prefix(path) + "*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()


def atomic_write(path: str | os.PathLike[str], data: str | bytes, mode: int | None = None) -> Path:
    """Write via a temp file in the same directory, fsync, os.replace, fsync of the directory.

    `mode` defaults to what the umask allows (mkstemp alone would make 0600 files, and these
    are shared artifacts)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(target), suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)
    return target


@contextlib.contextmanager
def file_lock(lock_path: Path, timeout: float | None = None) -> Iterator[None]:
    """An exclusive flock on `lock_path` (created, never removed: unlinking a lock file races
    with its next holder). Released on exit, or by the kernel if the holder dies. With a
    `timeout`, LockTimeout after that many seconds of waiting."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with open(lock_path, "a+b") as fh:
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | (0 if deadline is None else fcntl.LOCK_NB))
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if deadline is not None and time.monotonic() > deadline:
                    raise LockTimeout(
                        f"waited {timeout:.0f}s for {lock_path}: another process holds it"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def updating(path: Path) -> Iterator[None]:
    """Hold `path`'s lock for a read-modify-write: its directory made, an flock of the hidden
    sibling `.<name>.lock` (hidden: baselines live in git), and the temp files of a writer that
    died removed (we hold the lock: any temp file is a dead writer's). Write with atomic_write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path.with_name(f".{path.name}.lock")):
        remove_stale_temps(path)
        yield
