"""The conformance suite catches a planted bug: servers started with --drop-last-buffer lose
the last buffer of every echo. The round-trip property must FAIL, and Hypothesis must shrink
the layout to the minimal one that shows it, `[b'']` (one empty buffer), whichever client
makes the calls (grpcio in pytest, or the native peer's relay); without the bug the same run
passes. Runs the real suite file in a pytest subprocess."""

from __future__ import annotations

import re

import pytest

from hpccomm_suites import DIR as SUITES_DIR
from tests.native_grpc import native_peer_or_skip

SUITE = SUITES_DIR / "grpc" / "test_conformance_grpc.py"

pytest.importorskip("grpc", reason="stack 'grpc' not available: missing grpc")


@pytest.mark.parametrize("peer", ["python", "native"])
def test_dropped_buffer_fails_and_shrinks(
    peer: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    native_peer_or_skip(monkeypatch)  # the native client (relay) runs against either peer
    pytester.copy_example(str(SUITE))
    args = [
        "-p",
        "no:cacheprovider",
        "--import-mode=importlib",
        "--hpc-history=none",
        "--hpc-grpc-peers",
        peer,
        "--hpc-grpc-clients=python,native",
        "-k",
        "test_round_trip_is_byte_exact",
    ]
    bad = pytester.runpytest_subprocess(
        *args, "--hpc-grpc-plant-bug", "drop-last-buffer", timeout=300
    )
    bad.assert_outcomes(failed=4)  # serialized and raw, each by both clients
    out = bad.stdout.str()
    # Hypothesis' report ("Falsifying example" before 6.1xx, "Failing test case" since)
    shrunk = re.findall(
        r"(?:Falsifying example|Failing test case): round_trip\(\n"
        r"(?:E\s+)?layout=(.*),$",
        out,
        re.M,
    )
    assert shrunk == ["[b'']"] * 4, out[-3000:]  # the minimal layout, every mode and client
    bad.stdout.fnmatch_lines(["*1 buffers sent, 0 came back*"])

    good = pytester.runpytest_subprocess(*args, timeout=300)
    good.assert_outcomes(passed=4)
