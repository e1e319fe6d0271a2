"""TF-gRPC-Bench over the tensor-transfer service, each (benchmark, payload scheme) its own
judged item, per peer kind, payload mode and placement:

  tf_grpc_p2p_latency    round trip of an echoed payload (us per RPC, lower is better)
  tf_grpc_p2p_bandwidth  payload sent, server acknowledges (MB/s = 10^6 B/s, higher)
  tf_grpc_ps_throughput  W workers x P servers, every worker calls every server in every step
                         (RPC/s over all workers, higher; bytes/s in extra)
  tf_grpc_mimic_step     a training step: pull each variable from the PS holding it, push its
                         gradient back (ms per step, mean over workers, lower)

Samples are per-batch values; echoes and acknowledgements are checked (a wrong byte count or
echo fails the item even when the timing would pass). Python peers' per-RPC cost (~500 us
here) hides the transport: latency verdicts about a runtime should use the native peer, and
the quick profile times only it unless --hpc-grpc-peers names the others (options.py).
What each point records: stacks/grpc/perf.py; sweeps, servers and judging: the `grpc_bench`
fixture (stacks/grpc/plugin.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_hpccomm.stacks.grpc.fixtures import BenchRun
from pytest_hpccomm.stacks.grpc.lab import GrpcLab
from pytest_hpccomm.stacks.grpc.peer.payload import SCHEMES
from pytest_hpccomm.stacks.grpc.perf import BENCHMARKS, bytes_sent

# no fabric marker: stock gRPC needs a TCP fabric (ethernet, ipoib), an RDMA runtime
# (--hpc-grpc-preset) an RDMA one; the grpc_bench fixture says which is missing
# stock gRPC is TCP at every placement and an RDMA runtime skips netns: the quick profile times
# it over loopback only (placement.py)
pytestmark = [pytest.mark.perf, pytest.mark.stack("grpc"), pytest.mark.quick_placements("loopback")]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("bench", list(BENCHMARKS))
def test_tf_grpc_bench(bench: str, scheme: str, grpc_bench: BenchRun) -> None:
    grpc_bench(bench, scheme)


def test_netns_traffic_crosses_the_veth(
    grpc_peer: str, grpc_mode: str, grpc_lab: GrpcLab, hpc_virtual_cluster: Any
) -> None:
    """Across the virtual cluster the server listens on its namespace's fabric address and the
    client's fab0 counters carry at least every byte the bandwidth benchmark sent."""
    sweep, server = grpc_lab.p2p_across(grpc_peer, grpc_mode, hpc_virtual_cluster)
    assert server.address == hpc_virtual_cluster.hosts[0].address
    sent = bytes_sent(sweep, "bandwidth")
    assert sweep.veth, "no counters were read"
    assert sweep.veth["tx"] >= sent, f"client fab0 sent {sweep.veth['tx']} B < payload {sent} B"
