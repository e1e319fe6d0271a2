"""Helpers of the gRPC conformance properties: their Hypothesis settings (behind the
`grpc_settings` fixture) and waiting for a server-side effect."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from hypothesis import HealthCheck, settings

from pytest_hpccomm.stacks.grpc.options import GrpcOptions


def property_settings(opts: GrpcOptions, cap: int | None = None) -> settings:
    """The profile's example budget (--hpc-grpc-examples), at most `cap` for slow properties;
    no deadline: every example is RPCs against a live server on shared cores."""
    kw: dict[str, Any] = {"max_examples": min(opts.examples, cap) if cap else opts.examples,
                          "deadline": None,
                          "suppress_health_check": [HealthCheck.too_slow,
                                                    HealthCheck.data_too_large]}
    if opts.plant_bug:  # a planted-bug run must not leave its failures in the example database
        kw["database"] = None
    return settings(**kw)


class SettingsFactory(Protocol):
    """What the `grpc_settings` fixture is: settings for a property, at most `cap` examples."""

    def __call__(self, cap: int | None = None) -> settings: ...


def eventually(cond: Callable[[], bool], timeout: float = 3.0) -> bool:
    """Whether `cond` holds within `timeout` s (a server notices a cancellation asynchronously)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False
