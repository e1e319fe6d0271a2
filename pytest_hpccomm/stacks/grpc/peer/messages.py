"""The protobuf messages of the serialized mode (native/tensor.proto).

Built from a descriptor written here rather than from generated code: no grpcio-tools at run
time and no coupling between the generator's and the runtime's protobuf versions. A test
compares this descriptor with protoc's compilation of tensor.proto. Peer-side module.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from pytest_hpccomm.stacks.grpc.wire import PACKAGE, SERVICE

_F = descriptor_pb2.FieldDescriptorProto
_MESSAGES: dict[str, list[tuple[str, int, int, int]]] = {  # name, number, type, label
    "Tensors": [
        ("buffers", 1, _F.TYPE_BYTES, _F.LABEL_REPEATED),
        ("seq", 2, _F.TYPE_UINT64, _F.LABEL_OPTIONAL),
        ("want", 3, _F.TYPE_UINT64, _F.LABEL_REPEATED),
        ("delay_ms", 4, _F.TYPE_UINT32, _F.LABEL_OPTIONAL),
    ],
    "Ack": [
        ("bytes", 1, _F.TYPE_UINT64, _F.LABEL_OPTIONAL),
        ("buffers", 2, _F.TYPE_UINT64, _F.LABEL_OPTIONAL),
        ("seq", 3, _F.TYPE_UINT64, _F.LABEL_OPTIONAL),
    ],
    "StatsRequest": [],
    "Stats": [
        ("rpcs", 1, _F.TYPE_UINT64, _F.LABEL_OPTIONAL),
        ("bytes", 2, _F.TYPE_UINT64, _F.LABEL_OPTIONAL),
        ("cancelled", 3, _F.TYPE_UINT64, _F.LABEL_OPTIONAL),
        ("peer", 4, _F.TYPE_STRING, _F.LABEL_OPTIONAL),
        ("grpc_version", 5, _F.TYPE_STRING, _F.LABEL_OPTIONAL),
        ("cancelled_seqs", 6, _F.TYPE_UINT64, _F.LABEL_REPEATED),
    ],
}
# name, request, response, client streaming, server streaming
_METHODS = [
    ("Echo", "Tensors", "Tensors", False, False),
    ("Send", "Tensors", "Ack", False, False),
    ("Pull", "Tensors", "Tensors", False, False),
    ("EchoStream", "Tensors", "Tensors", True, True),
    ("SendStream", "Tensors", "Ack", True, False),
    ("PullStream", "Tensors", "Tensors", False, True),
    ("Delay", "Tensors", "Ack", False, False),
    ("GetStats", "StatsRequest", "Stats", False, False),
]


def file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    """tensor.proto as a descriptor (what protoc --descriptor_set_out would produce)."""
    f = descriptor_pb2.FileDescriptorProto(name="tensor.proto", package=PACKAGE, syntax="proto3")
    for name, fields in _MESSAGES.items():
        m = f.message_type.add(name=name)
        for fname, number, ftype, label in fields:
            m.field.add(name=fname, number=number, type=ftype, label=label)
    svc = f.service.add(name=SERVICE.rsplit(".", 1)[1])
    for name, req, resp, cs, ss in _METHODS:
        svc.method.add(
            name=name,
            input_type=f".{PACKAGE}.{req}",
            output_type=f".{PACKAGE}.{resp}",
            client_streaming=cs,
            server_streaming=ss,
        )
    return f


def _classes() -> dict[str, Any]:
    pool = descriptor_pool.DescriptorPool()  # private: never clashes with other protos
    pool.Add(file_descriptor())
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
        for name in _MESSAGES
    }


_CLASSES = _classes()
Tensors: Any = _CLASSES["Tensors"]
Ack: Any = _CLASSES["Ack"]
StatsRequest: Any = _CLASSES["StatsRequest"]
Stats: Any = _CLASSES["Stats"]
