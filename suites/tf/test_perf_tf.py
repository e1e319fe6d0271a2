"""TensorFlow's gRPC runtime, point to point: RecvTensor latency and bandwidth vs tensor size
(TF-gRPC-Bench's definitions), a variable on the ps task read by the worker through a
tf.function, per placement. The `tf_recv_tensor` fixture (stacks/tf/plugin.py) pools
independent jobs on the session's tasks, validates and judges; perf.py holds the definitions.
Sizes: the session's sizes that are powers of 4 (quick: 1 B - 4 MiB, 12 points).
"""

from __future__ import annotations

import pytest

from pytest_hpccomm.stacks.tf.plugin import TCP_ONLY, RecvRun

pytestmark = [pytest.mark.perf, pytest.mark.stack("tf"),
              pytest.mark.fabric("ethernet", "ipoib", why=TCP_ONLY)]


def test_tf_recv_tensor(tf_size: int, tf_recv_tensor: RecvRun) -> None:
    tf_recv_tensor(tf_size)
