"""Hypothesis strategies of the gRPC conformance properties: iovec layouts and metadata.

A buffer is either literal bytes (small; Hypothesis shrinks their content) or a Pattern (any
size up to several MiB, printed as its size), so a falsifying example stays readable: the
minimal layout of a lost-buffer bug prints as `[b'']`, not as megabytes of bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from hypothesis import strategies as st

from pytest_hpccomm.stacks.grpc.wire import (
    COMPRESS,
    ECHO_INITIAL,
    META_PREFIX,
    STATUS,
    STATUS_MESSAGE,
)

MiB = 1 << 20


@dataclass(frozen=True)
class Pattern:
    size: int
    seed: int = 0

    def __repr__(self) -> str:
        return f"Pattern({self.size}, seed={self.seed})"

    def materialize(self) -> bytes:
        block = _block(self.seed)  # a prime length: block edges never align with buffer edges
        return (block * (self.size // len(block) + 1))[: self.size]


@lru_cache(maxsize=256)
def _block(seed: int) -> bytes:
    return random.Random(seed).randbytes(4099)


Buffer = bytes | Pattern


def materialize(layout: list[Buffer]) -> list[bytes]:
    return [b.materialize() if isinstance(b, Pattern) else b for b in layout]


def total(layout: list[Buffer]) -> int:
    return sum(b.size if isinstance(b, Pattern) else len(b) for b in layout)


def _cap(budget: int) -> object:
    def cap(layout: list[Buffer]) -> list[Buffer]:
        """Keep the layout under the server's limit: drop buffers past the byte budget."""
        out, used = [], 0
        for b in layout:
            n = b.size if isinstance(b, Pattern) else len(b)
            if used + n > budget:
                break
            out.append(b)
            used += n
        return out

    return cap


def buffers(max_size: int = 6 * MiB) -> st.SearchStrategy[Buffer]:
    return st.one_of(
        st.binary(max_size=64),
        st.builds(Pattern, st.integers(0, 64 << 10), st.integers(0, 255)),
        st.builds(Pattern, st.integers(0, max_size), st.integers(0, 255)),
    )


def layouts(
    max_buffers: int = 64, max_buffer: int = 6 * MiB, budget: int = 12 * MiB
) -> st.SearchStrategy[list[Buffer]]:
    """Arbitrary iovec layouts: 0 to max_buffers buffers of 0 B to max_buffer, total <= budget."""
    return st.lists(buffers(max_buffer), max_size=max_buffers).map(_cap(budget))  # type: ignore


# Metadata: keys are lowercase (HTTP/2); text values printable ASCII, no surrounding spaces
# (HTTP/2 implementations may trim them); "-bin" keys carry arbitrary bytes.
_KEY = st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,15}", fullmatch=True).filter(
    lambda k: not k.endswith("-bin")
)
_TEXT = st.from_regex(r"[!-~]([ -~]{0,30}[!-~])?", fullmatch=True)
_ASKS = (COMPRESS, STATUS, STATUS_MESSAGE)  # keys that ask the server for more than an echo


def _echoed_only(key: str, prefix: str) -> bool:
    """A key the server just echoes: none that asks for more, and for the trailing prefix none
    that the initial prefix routes elsewhere."""
    return key not in _ASKS and (prefix == ECHO_INITIAL or not key.startswith(ECHO_INITIAL))


def metadata(prefix: str = META_PREFIX) -> st.SearchStrategy[list[tuple[str, str | bytes]]]:
    """Request metadata whose keys start with `prefix` (META_PREFIX: echoed as trailing
    metadata; ECHO_INITIAL: as initial metadata)."""
    text = st.tuples(_KEY.map(lambda k: f"{prefix}{k}"), _TEXT)
    binary = st.tuples(_KEY.map(lambda k: f"{prefix}{k}-bin"), st.binary(max_size=64))
    pairs = st.lists(
        st.one_of(text, binary).filter(lambda kv: _echoed_only(kv[0], prefix)),
        max_size=6,
        unique_by=lambda kv: kv[0],
    )
    return pairs  # type: ignore[return-value]
