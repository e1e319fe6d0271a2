"""Python gRPC peer: the tensor-transfer server or a benchmark client. Runs alone:

    python -m pytest_hpccomm.stacks.grpc.peer server --kind sync --bind 127.0.0.1:0
    python -m pytest_hpccomm.stacks.grpc.peer client --kind aio --targets 127.0.0.1:PORT \\
        --benchmark latency,bandwidth --mode raw --layout small=10,10,10

The command line is the native peer's (native/peer.cc), so the driver treats both alike. The
server prints one READY line (its ports); the client prints one JSON document between marker
lines. Imports neither pytest nor the orchestrator (peer rule).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict

from pytest_hpccomm.peer import framing
from pytest_hpccomm.stacks.grpc.wire import MAX_MESSAGE


def parse_layout(spec: str) -> tuple[str, list[int]]:
    name, _, sizes = spec.partition("=")
    return name, [int(x) for x in sizes.split(",") if x]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m pytest_hpccomm.stacks.grpc.peer")
    sub = p.add_subparsers(dest="cmd", required=True)
    srv = sub.add_parser("server")
    srv.add_argument("--kind", choices=("sync", "aio"), default="sync")
    srv.add_argument("--bind", default="127.0.0.1:0")
    srv.add_argument("--tls-bind")
    srv.add_argument("--tls-cert")
    srv.add_argument("--tls-key")
    srv.add_argument("--max-message", type=int, default=MAX_MESSAGE)
    srv.add_argument(
        "--lifetime", type=float, default=3600.0, help="seconds before the server stops by itself"
    )
    srv.add_argument(
        "--drop-last-buffer",
        action="store_true",
        help="planted bug for the suite's own tests: echoes lose their last buffer",
    )
    cli = sub.add_parser("client")
    cli.add_argument("--kind", choices=("sync", "aio"), default="sync")
    cli.add_argument("--targets", "--target", dest="targets", required=True)
    cli.add_argument("--mode", choices=("serialized", "raw"), default="serialized")
    cli.add_argument(
        "--benchmark", default="latency", help="comma-separated: latency, bandwidth, ps, mimic"
    )
    cli.add_argument("--layout", action="append", default=[], help="NAME=SIZE,SIZE,...")
    cli.add_argument("--batches", type=int, default=12)
    cli.add_argument("--batch-seconds", type=float, default=0.02)
    cli.add_argument("--warmup-seconds", type=float, default=0.05)
    cli.add_argument("--slowdown", type=float, default=1.0)
    cli.add_argument(
        "--start-file",
        default="",
        help="concurrent workers: before segment k say READY, then start at the "
        "epoch time written to START_FILE.k",
    )
    return p.parse_args(argv)


def server(args: argparse.Namespace) -> int:
    from pytest_hpccomm.stacks.grpc import wire
    from pytest_hpccomm.stacks.grpc.peer import pyserver

    peer = "python" if args.kind == "sync" else "python-aio"
    svc = pyserver.Service(peer, drop_last=args.drop_last_buffer)
    tls = None
    if args.tls_bind:
        with open(args.tls_key, "rb") as k, open(args.tls_cert, "rb") as c:
            tls = (args.tls_bind, k.read(), c.read())

    def ready(port: int, tls_port: int) -> None:
        import grpc

        print(
            wire.ready_line(
                {
                    "port": port,
                    "tls_port": tls_port,
                    "peer": peer,
                    "grpc_version": grpc.__version__,
                    "max_message": args.max_message,
                    "pid": os.getpid(),
                }
            ),
            flush=True,
        )

    serve = pyserver.serve_sync if args.kind == "sync" else pyserver.serve_aio
    serve(svc, args.bind, tls, args.max_message, args.lifetime, ready)
    return 0


def client(args: argparse.Namespace) -> int:
    import grpc

    from pytest_hpccomm.stacks.grpc.peer import pyclient

    settings = pyclient.Settings(
        args.batches, args.batch_seconds, args.warmup_seconds, args.slowdown, args.start_file
    )
    targets = [t for t in args.targets.split(",") if t]
    benchmarks = [b for b in args.benchmark.split(",") if b]
    layouts = [parse_layout(spec) for spec in args.layout]
    run = pyclient.run_sync if args.kind == "sync" else pyclient.run_aio
    results = run(targets, args.mode, benchmarks, layouts, settings)
    doc = {
        "peer": "python" if args.kind == "sync" else "python-aio",
        "benchmark": args.benchmark,
        "mode": args.mode,
        "grpc_version": grpc.__version__,
        "targets": len(targets),
        "slowdown": args.slowdown,
        "results": [asdict(r) for r in results],
    }
    sys.stdout.write(framing.frame(doc))
    sys.stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return server(args) if args.cmd == "server" else client(args)


if __name__ == "__main__":
    sys.exit(main())
