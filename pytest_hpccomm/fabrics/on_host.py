"""The fabric of one host of --hpc-hosts, asked over the remote shell; prints one JSON line.

    python -m pytest_hpccomm.fabrics.on_host select --fabric softroce [--netdev eth0] [--provision]
    python -m pytest_hpccomm.fabrics.on_host unprovision --device rxe0
    python -m pytest_hpccomm.fabrics.on_host counters --device rxe0 --port 1 [--netdev eth0]

`select` runs the same discovery as the session does here (and with --provision creates the
rxe/siw link first, as the session does locally), so every host's device, GID index and
address come from that host's own sysfs. Errors are JSON too ({"error": "..."}), exit 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from pytest_hpccomm.fabrics import FabricUnavailable, select_fabric
from pytest_hpccomm.fabrics import provision as prov
from pytest_hpccomm.fabrics.counters import fabric_counters
from pytest_hpccomm.fabrics.sysfs import read_inventory


def _select(args: argparse.Namespace) -> dict[str, Any]:
    inv = read_inventory()
    sel = select_fabric(inv, args.fabric, args.device, args.netdev)
    created = None
    if isinstance(sel, FabricUnavailable) and args.provision and args.fabric in prov.LINK_TYPES:
        made = prov.provision(args.fabric, inv, args.netdev)
        created = made.device if made.created else None
        sel = select_fabric(read_inventory(), args.fabric, args.device, args.netdev)
    if isinstance(sel, FabricUnavailable):
        raise prov.ProvisionError(sel.reason)
    return {**dataclasses.asdict(sel), "created": created}


def _counters(args: argparse.Namespace) -> dict[str, Any]:
    return fabric_counters(args.device, args.port, args.netdev)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_hpccomm.fabrics.on_host")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("select")
    s.add_argument("--fabric", required=True)
    s.add_argument("--device")
    s.add_argument("--netdev")
    s.add_argument("--provision", action="store_true")
    u = sub.add_parser("unprovision")
    u.add_argument("--device", required=True)
    c = sub.add_parser("counters")
    c.add_argument("--device", required=True)
    c.add_argument("--port", type=int, default=1)
    c.add_argument("--netdev")
    args = parser.parse_args(argv)
    try:
        if args.command == "select":
            out = _select(args)
        elif args.command == "unprovision":
            prov.unprovision(prov.Provisioned("", args.device, "", created=True))
            out = {"removed": args.device}
        else:
            out = _counters(args)
    except (prov.ProvisionError, OSError, ValueError) as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
