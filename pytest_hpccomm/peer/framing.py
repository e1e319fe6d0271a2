"""How a peer program hands its result documents to the orchestrator through stdout.

Standard library only: every peer program (MPI ranks, gRPC clients, the native C++ peer, whose
bench.h prints the same markers) frames each JSON document between two marker lines, so
chatter of the runtime around it (MPI warnings, gRPC logs) never breaks parsing, and a job that
dies mid-document loses only that one.
"""

from __future__ import annotations

import json
from typing import Any

BEGIN, END = "@@HPCCOMM-RESULT-BEGIN@@", "@@HPCCOMM-RESULT-END@@"


def frame(doc: Any) -> str:
    """The text a peer writes (then flushes) for one document."""
    return f"\n{BEGIN}\n{json.dumps(doc)}\n{END}\n"


def parse_all(stdout: str) -> list[dict[str, Any]]:
    """Every complete document, in order; a cut-off last one is ignored. ValueError on a
    complete document that is not JSON."""
    docs: list[dict[str, Any]] = []
    pos = 0
    while (start := stdout.find(BEGIN, pos)) >= 0:
        end = stdout.find(END, start)
        if end < 0:
            break
        docs.append(json.loads(stdout[start + len(BEGIN) : end]))
        pos = end + len(END)
    return docs


def parse_last(stdout: str) -> dict[str, Any]:
    """The last complete document; ValueError when there is none."""
    start = stdout.rfind(BEGIN)
    end = stdout.find(END, start) if start >= 0 else -1
    if end < 0:  # the last one was cut off: fall back to the one before it
        docs = parse_all(stdout)
        if not docs:
            raise ValueError("peer printed no result document")
        return docs[-1]
    doc: dict[str, Any] = json.loads(stdout[start + len(BEGIN) : end])
    return doc
