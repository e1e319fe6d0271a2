"""What the kernel's RDMA drivers logged since a mark: the other half of a dead link's story.

A siw connection that is torn down says why only in the kernel log ("siw: got TERMINATE. layer
1, type 1, code 1", "rresp len: 338 != 0"); the completion queue just stays empty. The verbs
plugin marks the log when an item starts and a dead-link failure quotes what came after.

Read from /dev/kmsg (one record per read(2); needs CAP_SYSLOG or a permissive
kernel.dmesg_restrict, as root in the CI guest): a non-blocking descriptor seeked to the end
at mark(), read to EAGAIN by since(). Where the log is unreadable, since() says so in one
line instead of failing: the log is evidence, not a requirement.
"""

from __future__ import annotations

import errno
import os
import re

KMSG = "/dev/kmsg"
# the drivers and the core code a verbs failure runs through
RDMA_LINES = re.compile(
    r"\b(siw|rxe|rdma_rxe|infiniband|ib_core|ib_uverbs|iw_cm|rdma_cm|ucma)\b"
    r"|\bmlx[45]_",
    re.IGNORECASE,
)
MAX_LINES = 20  # a flood (every packet of a dead QP) is cut: the first lines say why


class KernelLog:
    def __init__(self, path: str = KMSG, pattern: re.Pattern[str] = RDMA_LINES) -> None:
        self.path, self.pattern = path, pattern
        self._fd: int | None = None
        self._why: str | None = None

    def mark(self) -> None:
        """Start a new window: since() returns only records logged after this call."""
        self.close()
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            self._why = f"kernel log unreadable ({self.path}: {exc.strerror})"
            return
        try:
            os.lseek(fd, 0, os.SEEK_END)
        except OSError as exc:
            os.close(fd)
            self._why = f"kernel log unreadable ({self.path}: {exc.strerror})"
            return
        self._fd, self._why = fd, None

    def since(self) -> list[str]:
        """RDMA lines logged since mark() ("[seconds] text"), consumed: a second call returns
        only newer ones. One explanatory line where the log cannot be read."""
        if self._fd is None:
            return [self._why or "kernel log not marked"]
        out: list[str] = []
        while True:
            try:
                record = os.read(self._fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten while we read: go on
                    continue
                out.append(f"kernel log read failed: {exc.strerror}")
                break
            if not record:
                break
            line = parse_record(record.decode(errors="replace"))
            if line is not None and self.pattern.search(line):
                out.append(line)
        if len(out) > MAX_LINES:
            out = out[:MAX_LINES] + [f"... {len(out) - MAX_LINES} more lines"]
        return out

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def parse_record(record: str) -> str | None:
    """/dev/kmsg's "prio,seq,usec,flags;text\\n KEY=value..." as "[seconds] text"."""
    head, sep, rest = record.partition(";")
    if not sep:
        return None
    text = rest.split("\n", 1)[0].strip()
    fields = head.split(",")
    try:
        seconds = int(fields[2]) / 1e6
    except (IndexError, ValueError):
        return text
    return f"[{seconds:.3f}] {text}"
