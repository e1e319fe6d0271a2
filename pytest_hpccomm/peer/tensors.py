"""Tensors on the control channel (standard library only): {"dtype", "shape", "data": base64
of the C-order bytes}. The orchestrator draws every input and keeps the reference; peers only
run the stack and report what they hold. Nothing is pickled."""

from __future__ import annotations

import base64
from typing import Any


def encode(dtype: str, shape: list[int] | tuple[int, ...], data: bytes) -> dict[str, Any]:
    return {"dtype": dtype, "shape": list(shape), "data": base64.b64encode(data).decode()}


def decode(obj: dict[str, Any]) -> tuple[str, list[int], bytes]:
    return str(obj["dtype"]), [int(x) for x in obj["shape"]], base64.b64decode(obj["data"])
