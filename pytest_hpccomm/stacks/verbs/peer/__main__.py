"""Verbs peer program: a long-lived process that owns one RDMA device's resources.

    python -m pytest_hpccomm.stacks.verbs.peer --device rxe0 --gid-index 1
        dials home over the control channel (HPCCOMM_CONTROL_ADDRESS / _KEY) and serves the
        engine's operations until told to shut down
    python -m pytest_hpccomm.stacks.verbs.peer --device rxe0 --gid-index 1 --selftest
        runs alone: two QPs on the device, connected to each other, move data by SEND, RDMA
        WRITE, RDMA READ and an atomic; prints one JSON line and exits 0 when all arrived intact

It imports neither pytest nor the orchestrator (peer rule): only the control channel, the
engine and pyverbs. The orchestrator runs two of these (one per side of every connection); on
one host both use the same device and their QPs loop back through it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import Any

from pytest_hpccomm.stacks.verbs.wire import HELLO, READY


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m pytest_hpccomm.stacks.verbs.peer")
    p.add_argument("--device", required=True, help="RDMA device, e.g. mlx5_0, rxe0, siw0")
    p.add_argument("--port", type=int, default=1)
    p.add_argument(
        "--gid-index",
        type=int,
        default=None,
        help="source GID (RoCE: the RoCE v2 IPv4-mapped one; InfiniBand: 0)",
    )
    p.add_argument(
        "--address",
        default=None,
        help="IP address of the device's netdev (iWARP: rdma_cm binds to it)",
    )
    p.add_argument(
        "--plant",
        default=None,
        help="test-only: plant a known bug "
        "(mr-no-remote-write) so the conformance suite can prove it catches it",
    )
    p.add_argument("--selftest", action="store_true", help="run alone: loopback check")
    return p.parse_args(argv)


def raise_memlock() -> None:
    """Registered memory is pinned and counted against RLIMIT_MEMLOCK; siw checks it even for
    root (siw_umem_get), and the default 8 MiB is less than one 4 MiB benchmark pair needs.
    Raise the soft limit to the hard one (root: unlimited); a cluster's limits.conf rules."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    for want in ((resource.RLIM_INFINITY, resource.RLIM_INFINITY), (hard, hard)):
        try:
            resource.setrlimit(resource.RLIMIT_MEMLOCK, want)
            return
        except (ValueError, OSError):
            continue


def serve(args: argparse.Namespace) -> int:
    from pytest_hpccomm.peer.channel import PeerClient

    raise_memlock()
    client = PeerClient.from_env()
    try:
        from pytest_hpccomm.stacks.verbs.peer.engine import Engine

        engine = Engine(args.device, args.port, args.gid_index, args.address, args.plant)
    except Exception as exc:  # no pyverbs, no device, ...: say why, then leave
        client.send({"op": HELLO, "pid": os.getpid(), "error": f"{type(exc).__name__}: {exc}"})
        client.close()
        return 1
    client.send(
        {"op": HELLO, "pid": os.getpid(), "host": socket.gethostname(), "info": engine.op_info({})}
    )

    def handle(msg: dict[str, Any]) -> Any:
        op = msg.get("op", "")
        method = getattr(engine, f"op_{op}", None)
        if method is None:
            raise ValueError(f"unknown operation {op!r}")
        if op == "bench":
            return method(msg, lambda: client.send({"event": READY, "id": msg.get("id")}))
        return method(msg)

    try:
        client.serve(handle)
    finally:
        engine.close()
        client.close()
    return 0


def selftest(args: argparse.Namespace) -> int:
    """Two RC QPs on one device, connected to each other; every opcode checked once."""
    from pytest_hpccomm.stacks.verbs.peer.engine import Engine

    raise_memlock()
    eng = Engine(args.device, args.port, args.gid_index, args.address, args.plant)
    report: dict[str, Any] = {"device": args.device, "info": eng.op_info({}), "checks": {}}
    rw = ["local_write", "remote_write", "remote_read", "remote_atomic"]
    a, b = (eng.op_create_qp({"qp_type": "RC"}) for _ in range(2))
    ma, mb = (eng.op_reg_mr({"length": 4096, "access": rw}) for _ in range(2))
    if eng.iwarp:
        eng.op_cm_listen({"ep": b["ep"], "address": args.address, "port": 18515})
        eng.op_cm_connect({"ep": a["ep"], "address": args.address, "port": 18515})
        eng.op_cm_accept({"ep": b["ep"]})
        eng.op_cm_established({"ep": a["ep"]})
        eng.op_cm_established({"ep": b["ep"]})
    else:
        eng.op_connect({"ep": a["ep"], "remote": b})
        eng.op_connect({"ep": b["ep"], "remote": a})

    def run(ep: int, wr: dict[str, Any]) -> dict[str, Any]:
        eng.op_post_send({"ep": ep, "wrs": [wr]})
        wcs = eng.op_poll({"ep": ep, "count": 1, "wait": 10})
        return wcs[0] if wcs else {"status": -1, "status_text": "no completion in 10 s"}

    checks = report["checks"]
    want = eng.op_fill({"mr": ma["mr"], "offset": 0, "length": 1024, "seed": 1})
    eng.op_post_recv({"ep": b["ep"], "mr": mb["mr"], "offset": 0, "length": 1024})
    wc = run(a["ep"], {"opcode": "SEND", "mr": ma["mr"], "offset": 0, "length": 1024})
    eng.op_poll({"ep": b["ep"], "cq": "recv", "count": 1, "wait": 10})
    checks["send"] = (
        wc["status_text"] == "success"
        and eng.op_digest({"mr": mb["mr"], "offset": 0, "length": 1024}) == want
    )
    want = eng.op_fill({"mr": ma["mr"], "offset": 0, "length": 2048, "seed": 2})
    wc = run(
        a["ep"],
        {
            "opcode": "RDMA_WRITE",
            "mr": ma["mr"],
            "offset": 0,
            "length": 2048,
            "remote_addr": mb["addr"] + 1024,
            "rkey": mb["rkey"],
        },
    )
    checks["rdma_write"] = (
        wc["status_text"] == "success"
        and eng.op_digest({"mr": mb["mr"], "offset": 1024, "length": 2048}) == want
    )
    wc = run(
        a["ep"],
        {
            "opcode": "RDMA_READ",
            "mr": ma["mr"],
            "offset": 2048,
            "length": 2048,
            "remote_addr": mb["addr"] + 1024,
            "rkey": mb["rkey"],
        },
    )
    checks["rdma_read"] = (
        wc["status_text"] == "success"
        and eng.op_digest({"mr": ma["mr"], "offset": 2048, "length": 2048}) == want
    )
    if eng.dev_attr.atomic_caps:
        eng.op_write({"mr": mb["mr"], "offset": 0, "hex": (41).to_bytes(8, "little").hex()})
        wc = run(
            a["ep"],
            {
                "opcode": "ATOMIC_FETCH_AND_ADD",
                "mr": ma["mr"],
                "offset": 0,
                "length": 8,
                "remote_addr": mb["addr"],
                "rkey": mb["rkey"],
                "compare_add": 1,
            },
        )
        old = eng.op_read({"mr": ma["mr"], "offset": 0, "length": 8})
        new = eng.op_read({"mr": mb["mr"], "offset": 0, "length": 8})
        checks["atomic_fetch_add"] = (
            wc["status_text"] == "success"
            and int.from_bytes(bytes.fromhex(old), "little") == 41
            and int.from_bytes(bytes.fromhex(new), "little") == 42
        )
    eng.close()
    report["ok"] = all(checks.values())
    print(json.dumps(report))
    return 0 if report["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return selftest(args) if args.selftest else serve(args)


if __name__ == "__main__":
    sys.exit(main())
