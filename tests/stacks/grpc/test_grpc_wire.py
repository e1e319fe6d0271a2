"""What gRPC peers exchange: raw frames (non-serialized mode) and the protobuf messages, whose
descriptor must be what protoc makes of native/tensor.proto (the C++ peer's definition)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_hpccomm.stacks.grpc import wire
from pytest_hpccomm.stacks.grpc.build import NATIVE_DIR

pb = pytest.importorskip(
    "pytest_hpccomm.stacks.grpc.peer.messages",
    reason="protobuf not installed (pip install 'pytest-hpccomm[grpc]')",
)

buffer_lists = st.lists(st.binary(max_size=300), max_size=40)
u64 = st.integers(0, 2**64 - 1)


@given(bufs=buffer_lists, seq=u64)
def test_frame_round_trip(bufs: list[bytes], seq: int) -> None:
    f = wire.decode_frame(wire.encode_frame(bufs, seq))
    assert [bytes(b) for b in f.buffers] == bufs and f.seq == seq and f.flags == 0


@given(sizes=st.lists(u64, max_size=40), seq=u64)
def test_want_frame_round_trip(sizes: list[int], seq: int) -> None:
    f = wire.decode_frame(wire.encode_want(sizes, seq))
    assert list(f.lengths) == sizes and f.flags == wire.WANT and f.buffers == [] and f.seq == seq


@given(n=u64, b=u64, seq=u64)
def test_ack_round_trip(n: int, b: int, seq: int) -> None:
    assert wire.decode_ack(wire.encode_ack(n, b, seq)) == (n, b, seq)


@pytest.mark.parametrize(
    "data, why",
    [
        (b"", "header"),
        (wire.encode_frame([b"abc"])[:-1], "length does not match"),
        (wire.encode_frame([b"abc"]) + b"x", "length does not match"),
        (wire.encode_frame([b"abc", b"de"])[:20], "length table"),
        (wire.encode_want([5]) + b"x", "WANT frame carries data"),
    ],
)
def test_malformed_frames_are_rejected(data: bytes, why: str) -> None:
    with pytest.raises(wire.FrameError, match=why):
        wire.decode_frame(data)


@given(bufs=buffer_lists, seq=u64, want=st.lists(u64, max_size=10), delay=st.integers(0, 2**32 - 1))
def test_tensors_proto_round_trip(bufs: list[bytes], seq: int, want: list[int], delay: int) -> None:
    msg = pb.Tensors(buffers=bufs, seq=seq, want=want, delay_ms=delay)
    back = pb.Tensors.FromString(msg.SerializeToString())
    assert list(back.buffers) == bufs and back.seq == seq and list(back.want) == want
    assert back.delay_ms == delay


def test_empty_buffers_survive_serialization() -> None:
    """repeated bytes keeps empty elements: [b''] is not []: the planted-bug test relies on it."""
    assert list(pb.Tensors.FromString(pb.Tensors(buffers=[b""]).SerializeToString()).buffers) == [
        b""
    ]


def _protoc_descriptor(tmp_path: Path) -> bytes:
    out = tmp_path / "tensor.desc"
    args = [f"-I{NATIVE_DIR}", f"--descriptor_set_out={out}", str(NATIVE_DIR / "tensor.proto")]
    try:
        from grpc_tools import protoc  # grpcio-tools: the grpc extra

        if protoc.main(["protoc", *args]) != 0:
            pytest.fail("grpc_tools.protoc failed on tensor.proto")
    except ImportError:
        if shutil.which("protoc") is None:
            pytest.skip("neither grpcio-tools nor protoc is installed")
        subprocess.run(["protoc", *args], check=True, timeout=60)
    return out.read_bytes()


def _shape(fd: object) -> object:
    """What the wire format depends on: names, numbers, types, labels, method signatures."""
    return (
        {
            m.name: sorted((f.name, f.number, f.type, f.label) for f in m.field)
            for m in fd.message_type
        },  # type: ignore[attr-defined]
        {
            s.name: sorted(
                (x.name, x.input_type, x.output_type, x.client_streaming, x.server_streaming)
                for x in s.method
            )
            for s in fd.service
        },  # type: ignore[attr-defined]
        fd.package,
    )  # type: ignore[attr-defined]


def test_descriptor_matches_protoc(tmp_path: Path) -> None:
    from google.protobuf import descriptor_pb2

    fds = descriptor_pb2.FileDescriptorSet.FromString(_protoc_descriptor(tmp_path))
    (compiled,) = fds.file
    assert _shape(compiled) == _shape(pb.file_descriptor())


def test_raw_methods_mirror_the_serialized_ones() -> None:
    """RawTensorTransfer (no protobuf, so no descriptor) offers TensorTransfer's data methods."""
    (service,) = pb.file_descriptor().service
    assert set(wire.RAW_METHODS) <= {m.name for m in service.method}
