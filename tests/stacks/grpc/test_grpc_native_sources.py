"""The native peer's sources: every file is built and keyed, none keeps its own copy of a
constant the Python side defines (they come from the generated wire.h), none grows too large."""

from __future__ import annotations

import re

import pytest

from pytest_hpccomm.peer import framing
from pytest_hpccomm.stacks.grpc import build, wire
from pytest_hpccomm.stacks.grpc.peer import payload

CXX = [n for n in build.SOURCES if n.endswith((".cc", ".h"))]


def _header_values(text: str) -> dict[str, object]:
    values: dict[str, object] = {}
    for name, value in re.findall(r'^constexpr char (k\w+)\[\] = "([^"]*)";$', text, re.M):
        values[name] = value
    for name, value in re.findall(r"^constexpr [\w:]+ (k\w+) = (\d+);$", text, re.M):
        values[name] = int(value)
    return values


def test_generated_header_carries_the_python_values() -> None:
    got = _header_values(build.constants_header())
    assert got == {
        "kResultBegin": framing.BEGIN,
        "kResultEnd": framing.END,
        "kReady": wire.READY,
        "kMetaPrefix": wire.META_PREFIX,
        "kEchoInitial": wire.ECHO_INITIAL,
        "kCompress": wire.COMPRESS,
        "kStatus": wire.STATUS,
        "kStatusMessage": wire.STATUS_MESSAGE,
        "kModeSerialized": "serialized",
        "kModeRaw": "raw",
        "kRawEcho": wire.method("Echo", "raw"),
        "kRawSend": wire.method("Send", "raw"),
        "kRawPull": wire.method("Pull", "raw"),
        "kRawEchoStream": wire.method("EchoStream", "raw"),
        "kRawSendStream": wire.method("SendStream", "raw"),
        "kRawPullStream": wire.method("PullStream", "raw"),
        "kWant": wire.WANT,
        "kHeaderSize": wire.HEADER_SIZE,
        "kAckSize": wire.ACK_SIZE,
        "kPool": payload.POOL_SIZE,
        "kMaxMessage": wire.MAX_MESSAGE,
        "kCancelledSeqs": wire.CANCELLED_SEQS,
    }


def test_frame_layout_is_what_frame_h_encodes() -> None:
    """frame.h writes the fields one by one: u32 count, u32 flags, u64 seq; the ack 3 x u64."""
    assert wire._FIXED.format == "<IIQ" and wire._ACK.format == "<QQQ"


@pytest.mark.parametrize("name", CXX)
def test_no_hand_kept_copy_of_a_wire_constant(name: str) -> None:
    text = (build.NATIVE_DIR / name).read_text()
    for value in (framing.BEGIN, framing.END, wire.READY, wire.META_PREFIX, wire.RAW_SERVICE):
        assert f'"{value}' not in text and f'"/{value}' not in text, (name, value)
    for number in (str(payload.POOL_SIZE), "16u << 20", "16 << 20"):
        assert number not in text, (name, number)


def test_every_native_file_is_compiled_and_keyed() -> None:
    on_disk = {p.name for p in build.NATIVE_DIR.iterdir() if p.is_file()}
    assert on_disk == set(build.SOURCES)  # so no checked-in wire.h shadows the generated one
    assert build.GENERATED not in on_disk
    compiled = {src for src, generated in build.UNITS.values() if not generated}
    assert compiled == {n for n in build.SOURCES if n.endswith(".cc")}
    linked = {o for objs in build.BINARIES.values() for o in objs}
    assert linked == set(build.UNITS)


@pytest.mark.parametrize("name", CXX)
def test_no_native_source_is_too_large(name: str) -> None:
    assert len((build.NATIVE_DIR / name).read_text().splitlines()) <= 450


def test_a_constant_that_needs_escaping_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "READY", 'HPCCOMM "READY"')
    with pytest.raises(ValueError, match="needs escaping"):
        build.constants_header()
