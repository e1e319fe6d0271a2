"""Proof of path from counter readings: the payload on the RDMA port, not on kernel TCP."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_hpccomm.fabrics import FabricSelection, select_fabric
from pytest_hpccomm.fabrics.counters import port_counters
from pytest_hpccomm.fabrics.path_proof import MAX_SEGMENT, Crossing, PathProbe, Reading, read
from pytest_hpccomm.fabrics.sysfs import read_inventory
from pytest_hpccomm.fabrics.tcp_owners import TcpBytes
from tests.fabrics._fabric_trees import write

KiB, MiB = 1 << 10, 1 << 20


def crossing(
    port_before: tuple[int, int] | None,
    port_after: tuple[int, int] | None,
    tcp: tuple[int, int],
    payload: int,
    packets: bool = True,
) -> Crossing:
    return Crossing.between(
        "rxe0", Reading(port_before, packets, tcp[0]), Reading(port_after, packets, tcp[1]), payload
    )


def test_payload_in_rxe_packets_and_little_tcp_is_proven() -> None:
    c = crossing((100, 100), (100 + 2600, 100 + 2600), (50, 58), 8 * MiB)
    assert c.problem() is None and c.rdma_sent == 2600 and c.tcp_segments == 8
    assert "8388608 B payload; rxe0: 2600 packets sent" in c.describe()


def test_a_silent_fallback_to_tcp_is_caught() -> None:
    # the port did not move; TCP carried it all
    c = crossing((100, 100), (102, 102), (50, 50 + 8 * MiB // 1448), 8 * MiB)
    assert "did not cross the RDMA device" in str(c.problem())


def test_tcp_carrying_the_payload_beside_rdma_traffic_is_caught() -> None:
    c = crossing((0, 0), (4096, 4096), (0, 200), 8 * MiB)
    assert "may have gone over TCP, not rxe0" in str(c.problem())
    assert "unprovable" in str(c.problem())


def test_rxe_packets_are_expected_at_the_ports_active_mtu(tree_copy: Callable[[str], Path]) -> None:
    """A recorded rxe port whose active MTU is 1024 (1500-byte eth0), its probe built as the
    gRPC plugin builds it: 8 MiB takes at least 8192 packets of 1024 B, so 4000 (enough at
    4096 B a packet) is under half of the payload, not proof of it."""
    root = tree_copy("softroce-rxe")
    sel = select_fabric(read_inventory(root), "softroce")
    assert isinstance(sel, FabricSelection) and sel.device is not None and sel.port is not None
    assert sel.mtu == 1024  # the port's active MTU, from the inventory
    device, port = sel.device, sel.port
    hw = root / "class" / "infiniband" / device / "ports" / str(port) / "hw_counters"

    def count(packets: int) -> None:
        write(hw / "sent_pkts", f"{packets}\n")
        write(hw / "rcvd_pkts", f"{packets}\n")

    # the port read from the tree; TCP held at 0, since this host's live count is not the job's
    probe = PathProbe(device, lambda: Reading.of(port_counters(device, port, root), 0), sel.mtu)
    count(0)
    before = probe.read()
    count(4000)
    short = probe.crossing(before, 8 * MiB)
    assert (short.rdma_sent, short.mtu, short.least) == (4000, 1024, 8192)
    problem = str(short.problem())
    assert (
        "did not cross" in problem
        and "at least 8192 expected one way at the port's active MTU 1024" in problem
    )
    count(8192)
    ok = probe.crossing(before, 8 * MiB)
    assert ok.problem() is None and Crossing(**ok.as_dict()) == ok  # as the plugin records it
    assert "(at least 8192 at the port's active MTU 1024)" in ok.describe()


def test_an_unknown_mtu_expects_the_fewest_packets_and_says_so() -> None:
    c = crossing((0, 0), (2047, 2047), (0, 0), 8 * MiB)
    assert c.mtu is None and c.least == 2048
    assert "at the largest path MTU 4096: the port's active MTU is not known" in str(c.problem())
    assert crossing((0, 0), (2048, 2048), (0, 0), 8 * MiB).problem() is None


SIZES = (1, 1000, 4 * KiB, 64 * KiB, 64 * KiB + 1, 256 * KiB, MiB - 1, MiB, 8 * MiB)


@pytest.mark.parametrize("payload", SIZES)
def test_tcp_carrying_the_payload_is_caught_at_every_size(payload: int) -> None:
    """The fewest segments a TCP carriage of the payload counts (each at most MAX_SEGMENT
    bytes) fail the proof, however small the payload, while the port shows enough packets;
    one segment fewer cannot be a TCP carriage of it, and passes."""
    need = -(-payload // MAX_SEGMENT)
    port = -(-payload // 4096)  # the fewest packets at the largest path MTU
    fallback = crossing((0, 0), (port, port), (7, 7 + need), payload)
    assert "may have gone over TCP, not rxe0" in str(fallback.problem())
    assert f"at least {need} of at most {MAX_SEGMENT} B" in str(fallback.problem())
    assert crossing((0, 0), (port, port), (7, 7 + need - 1), payload).problem() is None


def test_a_port_that_counted_nothing_proves_no_payload_below_one_mtu() -> None:
    c = crossing((5, 5), (5, 5), (0, 0), 1000)
    assert c.least == 1 and "did not cross the RDMA device" in str(c.problem())


def test_ibta_byte_counters() -> None:
    ok = crossing((0, 0), (MiB + 100, MiB + 100), (0, 0), MiB, packets=False)
    short = crossing((0, 0), (MiB // 2, MiB // 2), (0, 0), MiB, packets=False)
    assert ok.problem() is None and "did not cross" in str(short.problem())


def test_siw_cannot_be_proven_by_counters() -> None:
    assert "siw has no RDMA counters" in str(crossing(None, None, (0, 0), MiB).problem())


def siw(total: int, owned: int, payload: int = 8 * MiB) -> Crossing:
    """siw0 moved `payload`; TCP sent `total` bytes, `owned` of them through processes'
    sockets (tcp_owners.py)."""
    return Crossing.between(
        "siw0",
        Reading(None, False, 0, TcpBytes(1000, 400)),
        Reading(None, False, 900, TcpBytes(1000 + total, 400 + owned)),
        payload,
    )


def test_siw_is_proven_by_whose_tcp_it_was() -> None:
    ok = siw(total=9 * MiB, owned=2000)  # the kernel's sockets (siw's) carried it
    assert ok.problem() is None and (ok.tcp_bytes, ok.owned_bytes) == (9 * MiB, 2000)
    assert "through processes' sockets" in ok.describe()
    fallback = siw(total=9 * MiB, owned=9 * MiB - 100)  # the peers' own sockets carried it
    assert "processes' own TCP sockets sent" in str(fallback.problem())
    nothing = siw(total=MiB, owned=0)  # neither: the payload did not move over siw
    assert "kernel's own TCP sockets (siw0's) sent 1048576 B" in str(nothing.problem())


def test_siw_processes_tcp_carrying_a_small_payload_is_caught() -> None:
    # 256 KiB through the processes' own sockets, as much again through the kernel's
    both = siw(total=2 * 256 * KiB, owned=256 * KiB, payload=256 * KiB)
    assert "processes' own TCP sockets sent 262144 B" in str(both.problem())
    assert siw(total=256 * KiB, owned=0, payload=256 * KiB).problem() is None


def test_read_takes_rxe_hw_counters(tmp_path: Path) -> None:
    base = tmp_path / "class" / "infiniband" / "rxe0" / "ports" / "1" / "hw_counters"
    base.mkdir(parents=True)
    (base / "sent_pkts").write_text("12\n")
    (base / "rcvd_pkts").write_text("34\n")
    got = read("rxe0", 1, tmp_path)
    assert got.port == (12, 34) and got.packets


def test_readings_of_several_server_hosts_add_up() -> None:
    # servers on two hosts: each port carries half of the payload, together all of it
    half = {"hw.sent_pkts": 1300, "hw.rcvd_pkts": 1300}
    zero = {"hw.sent_pkts": 0, "hw.rcvd_pkts": 0}
    before = Reading.of(zero, 10) + Reading.of(zero, 20)
    after = Reading.of(half, 12) + Reading.of(half, 25)
    assert after == Reading((2600, 2600), True, 37)
    c = Crossing.between("rxe0 on h0, rxe0 on h1", before, after, 8 * MiB)
    assert c.problem() is None and c.tcp_segments == 7
    assert (
        Crossing.between(
            "rxe0 on h0", Reading.of(zero, 10), Reading.of(half, 12), 8 * MiB
        ).problem()
        is not None
    )  # one host's half is not enough
    # a host that counts nothing (siw) leaves the sum uncounted, never half-counted
    assert (Reading.of(half, 1) + Reading.of({}, 1)).port is None


def test_a_probe_reads_after_the_job() -> None:
    counts = iter([(0, 0), (2600, 2600)])
    probe = PathProbe("rxe0", lambda: Reading(next(counts), True, 0))
    c = probe.crossing(probe.read(), 8 * MiB)
    assert c.device == "rxe0" and c.rdma_sent == 2600 and c.problem() is None


def test_a_servers_port_across_hosts_proves_by_what_it_received() -> None:
    """Across hosts the probed port is the server's: the payload arrives there in full, and
    what the server sends back (acknowledgements, a response) can be far less. One direction
    carrying the payload proves the crossing; neither fails."""
    received = Crossing.between(
        "rxe0", Reading((0, 0), True, 0), Reading((3000, 8192), True, 0), 8 * MiB, 1024
    )
    assert received.problem() is None
    neither = Crossing.between(
        "rxe0", Reading((0, 0), True, 0), Reading((3000, 3000), True, 0), 8 * MiB, 1024
    )
    assert "did not cross" in str(neither.problem())
