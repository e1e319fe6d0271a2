"""Horovod's Gloo rendezvous, without horovodrun: runs in the Horovod venv, on an address the
orchestrator names (loopback, or the first virtual host's fabric address).

    python -m pytest_hpccomm.stacks.horovod.peer.rendezvous --bind 127.0.0.1 --hosts localhost:2

horovodrun would pick the port with its own find_port, which binds every interface; here the
server binds exactly --bind. Prints one JSON line, {"port": N, "slots": [...]} (Horovod's own
host assignment: rank, local and cross ranks per slot), then serves until it is ended.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pytest_hpccomm.stacks.horovod.peer.rendezvous")
    p.add_argument("--bind", required=True, help="address to listen on")
    p.add_argument("--hosts", required=True, help="Horovod host spec, e.g. h0:1,h1:1")
    args = p.parse_args(argv)
    from horovod.runner.common.util.hosts import get_host_assignments, parse_hosts
    from horovod.runner.http.http_server import RendezvousHandler, RendezvousHTTPServer

    hosts = parse_hosts(args.hosts)
    slots = get_host_assignments(hosts, sum(h.slots for h in hosts))
    server = RendezvousHTTPServer((args.bind, 0), RendezvousHandler, 0)
    server.init(slots)
    print(
        json.dumps(
            {
                "port": server.server_address[1],
                "slots": [
                    {
                        "hostname": s.hostname,
                        "rank": s.rank,
                        "size": s.size,
                        "local_rank": s.local_rank,
                        "local_size": s.local_size,
                        "cross_rank": s.cross_rank,
                        "cross_size": s.cross_size,
                    }
                    for s in slots
                ],
            }
        ),
        flush=True,
    )
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
