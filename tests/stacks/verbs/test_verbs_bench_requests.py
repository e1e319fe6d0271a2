"""What the orchestrator asks the verbs peers to run (perf.BenchRunner): the canary's factor
travels in every benchmark request, and the session's --hpc-inject-slowdown is the factor.

A recording stand-in for the pair checks only the orchestrator's own logic (which request
goes out); that the peers then stretch their timed work is shown on real rxe/siw devices in the
guests (test_verbs_canary_stretch.py, booted by test_verbs_guest.py).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pytest_hpccomm.config import HpcConfig
from pytest_hpccomm.stacks.verbs.perf import BY_KEY, BenchRunner, BenchSettings


class RecordingPeer:
    def __init__(self, name: str, sent: list[tuple[str, dict[str, Any]]]) -> None:
        self.name, self.sent = name, sent

    def start(self, op: str, **msg: Any) -> int:
        self.sent.append((f"{self.name}.start", msg))
        return 1

    def wait_for(self, rid: int, timeout: float, event: str | None = None) -> None:
        return None

    def call(self, op: str, timeout: float, **msg: Any) -> dict[str, Any]:
        self.sent.append((f"{self.name}.call", msg))
        return {"elapsed_ns": [1_000_000] * int(msg["batches"])}


class RecordingPair:
    restarts = 0

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.a, self.b = RecordingPeer("a", self.sent), RecordingPeer("b", self.sent)

    def connect(self, qp_type: str, **_: Any) -> Any:
        return SimpleNamespace(
            a=SimpleNamespace(peer=self.a, ep=1),
            b=SimpleNamespace(peer=self.b, ep=2),
            close=lambda: None,
        )

    def reg_mr(self, peer: Any, length: int) -> dict[str, Any]:
        return {"mr": 7, "addr": 4096, "rkey": 9}


@pytest.mark.parametrize("factor", [1.0, 1.5])
def test_every_request_carries_the_session_slowdown(factor: float) -> None:
    cfg = HpcConfig(inject_slowdown=factor)
    settings = BenchSettings.for_session(cfg, emulated=True)
    assert settings.slowdown == factor
    pair = RecordingPair()
    BenchRunner(pair, settings, 65536).run(BY_KEY["ib_write_bw"], 65536)  # type: ignore[arg-type]
    assert [who for who, _ in pair.sent] == ["b.start", "a.call"]
    assert all(msg["slowdown"] == factor for _, msg in pair.sent)
    # a stretched batch may take F times as long: the peers' deadline grows with it
    assert all(msg["limit"] == settings.limit * factor for _, msg in pair.sent)
