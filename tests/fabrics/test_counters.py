"""Traffic counters from recorded sysfs trees: rxe's hw_counters (packets), an IBTA HCA's
port_xmit_data/port_rcv_data (4-byte words), siw's nothing, netdev statistics, TCP OutSegs."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from pytest_hpccomm.fabrics.counters import (
    netdev_counters,
    port_counters,
    sent_and_received,
    tcp_out_segments,
    tcp_segments_for,
)


def _port(root: Path, device: str, folder: str, values: dict[str, str]) -> None:
    base = root / "class" / "infiniband" / device / "ports" / "1" / folder
    base.mkdir(parents=True)
    for name, value in values.items():
        (base / name).write_text(value + "\n")


def test_rxe_counts_packets_in_hw_counters(tmp_path: Path) -> None:
    _port(
        tmp_path,
        "rxe0",
        "hw_counters",
        {"sent_pkts": "1024", "rcvd_pkts": "7", "lifespan": "not-a-number"},
    )
    got = port_counters("rxe0", 1, tmp_path)
    assert got == {"hw.sent_pkts": 1024, "hw.rcvd_pkts": 7}
    assert sent_and_received(got) == (1024, 7)


def test_ibta_counters_are_four_byte_words(tmp_path: Path) -> None:
    _port(tmp_path, "mlx5_0", "counters", {"port_xmit_data": "262144", "port_rcv_data": "3"})
    assert sent_and_received(port_counters("mlx5_0", 1, tmp_path)) == (1 << 20, 12)


def test_siw_counts_nothing_on_its_port(tmp_path: Path) -> None:
    (tmp_path / "class" / "infiniband" / "siw0" / "ports" / "1").mkdir(parents=True)
    got = port_counters("siw0", 1, tmp_path)
    assert got == {} and sent_and_received(got) is None


def test_netdev_statistics(tmp_path: Path) -> None:
    stats = tmp_path / "class" / "net" / "eth0" / "statistics"
    stats.mkdir(parents=True)
    (stats / "tx_bytes").write_text("5000\n")
    (stats / "rx_bytes").write_text("6000\n")
    assert netdev_counters("eth0", tmp_path) == {"tx_bytes": 5000, "rx_bytes": 6000}
    assert netdev_counters("eth9", tmp_path) == {}


def test_tcp_out_segments(tmp_path: Path) -> None:
    snmp = tmp_path / "snmp"
    snmp.write_text(
        "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
        "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens "
        "AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs\n"
        "Tcp: 1 200 120000 -1 5 3 0 0 2 431 433 0\n"
    )
    assert tcp_out_segments(snmp) == 433
    assert tcp_out_segments(tmp_path / "missing") is None


def test_tcp_out_segments_counts_a_loopback_exchange() -> None:
    """The live counter moves by at least the segments one loopback exchange sends."""
    before = tcp_out_segments()
    assert before is not None, "/proc/net/snmp has no Tcp: OutSegs"
    with socket.create_server(("127.0.0.1", 0)) as server:
        with socket.create_connection(server.getsockname(), timeout=10) as client:
            peer, _ = server.accept()
            with peer:
                client.sendall(b"x" * 100)
                assert peer.recv(100)
                peer.sendall(b"y")
                assert client.recv(1) == b"y"
    after = tcp_out_segments()
    assert after is not None and after - before >= 4  # SYN, SYN-ACK, ACK, 2 data segments


def test_the_segments_a_payload_needs_follow_the_mtu() -> None:
    assert tcp_segments_for(16 << 20, 1500) == (16 << 20) // 1460
    assert tcp_segments_for(16 << 20, None) == tcp_segments_for(16 << 20, 65536) == 256


def test_out_segments_counts_each_mss_of_a_large_send() -> None:
    """What tcp_segments_for relies on: the counter moves by one per MSS-sized segment, also
    when the kernel hands TCP's sends to the device in 64 KiB (TSO/GSO) pieces."""
    mss, payload = 1000, 1 << 20
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, mss)
        with client:
            client.settimeout(30)
            client.connect(server.getsockname())
            peer, _ = server.accept()
            with peer:
                peer.settimeout(30)
                got = [0]

                def drain() -> None:
                    while got[0] < payload:
                        got[0] += len(peer.recv(1 << 16))

                reader = threading.Thread(target=drain)
                before = tcp_out_segments()
                reader.start()
                client.sendall(b"z" * payload)
                reader.join(30)
                after = tcp_out_segments()
    assert got[0] == payload
    assert before is not None and after is not None
    assert after - before >= payload // mss, (before, after)
