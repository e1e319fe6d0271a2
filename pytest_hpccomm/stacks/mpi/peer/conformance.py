"""MPI conformance peer: a long-lived job that runs one small case per request.

    mpirun -n 3 python -m pytest_hpccomm.stacks.mpi.peer.conformance            # serve pytest
    mpirun -n 3 python -m pytest_hpccomm.stacks.mpi.peer.conformance --case '{"kind": ...}'
    mpirun --with-ft ulfm -n 3 python -m pytest_hpccomm.stacks.mpi.peer.conformance --ulfm

Serving: rank 0 dials home over the control channel (PeerClient.from_env: address and key come
by environment) and says hello; then for every request it broadcasts the case (JSON bytes, not
pickles) to all ranks, every rank runs it on a fresh Dup of COMM_WORLD (so a case's stray
messages cannot match the next case's receives) and reports what IT saw; rank 0 gathers the
reports and replies. The peer only observes; judging against a NumPy reference is pytest's job.
`--case` runs one case alone and prints the reports (replay of a failure without pytest).

More: docs/explanation/internals.md (pytest_hpccomm.stacks.mpi.peer.conformance).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time
from typing import Any, Callable

import numpy as np

from pytest_hpccomm.stacks.mpi.peer.conformance_cases import CallFailed, Cases
from pytest_hpccomm.stacks.mpi.wire import CASE_MARK, PLANT_VAR, PLANTS, ULFM_MARK


class Peer(Cases):
    """Runs cases on every rank (conformance_cases.Cases: one method per case kind, each
    returning this rank's report, JSON-able)."""

    def __init__(self, MPI: Any, plant: str | None) -> None:
        self.MPI = MPI
        self.plant = plant
        self.world = MPI.COMM_WORLD.Dup()
        self.world.Set_errhandler(MPI.ERRORS_RETURN)
        self.rank, self.size = self.world.Get_rank(), self.world.Get_size()
        self.matrix = MPI.INT64_T.Create_contiguous(4).Commit()
        self.matmul = MPI.Op.Create(_matmul, commute=False)

    # -- plumbing ----------------------------------------------------------------------------
    def bcast_json(self, obj: Any) -> Any:
        """Rank 0's obj to every rank, as JSON bytes. Idle ranks poll a non-blocking broadcast
        with short sleeps instead of spinning in MPI: 3 ranks share 2 cores with pytest."""
        MPI, comm = self.MPI, self.world
        data = json.dumps(obj).encode() if self.rank == 0 else b""
        n = np.array([len(data)], np.int64)
        req, delay = comm.Ibcast(n, root=0), 50e-6
        while not req.Test():
            time.sleep(delay)
            delay = min(delay * 2, 2e-3)
        buf = bytearray(data) if self.rank == 0 else bytearray(int(n[0]))
        comm.Bcast([buf, MPI.BYTE], root=0)
        return json.loads(buf)

    def gather_json(self, obj: Any) -> list[Any] | None:
        MPI, comm = self.MPI, self.world
        data = json.dumps(obj).encode()
        lens = np.zeros(self.size, np.int64)
        comm.Gather(np.array([len(data)], np.int64), lens, root=0)
        if self.rank != 0:
            comm.Gatherv([data, MPI.BYTE], None, root=0)
            return None
        out = bytearray(int(lens.sum()))
        displs = np.concatenate([[0], np.cumsum(lens)[:-1]]).tolist()
        comm.Gatherv([data, MPI.BYTE], [out, lens.tolist(), displs, MPI.BYTE], root=0)
        return [json.loads(out[d : d + n]) for d, n in zip(displs, lens.tolist())]

    def run(self, case: dict[str, Any]) -> dict[str, Any]:
        """This rank's report of one case; an exception becomes {"error": ...} (the other
        ranks may then block: the orchestrator's timeout ends such a job)."""
        handler: Callable[[Any, dict[str, Any]], dict[str, Any]] | None = getattr(
            self, f"case_{case.get('kind')}", None
        )
        if handler is None:
            return {"error": f"unknown case kind {case.get('kind')!r}"}
        comm = self.world.Dup()
        try:
            return handler(comm, case)
        except CallFailed as e:
            err = e.error
            return {
                "error": f"{e.call}: MPI error class {err.Get_error_class()}: "
                f"{err.Get_error_string()}",
                "call": e.call,
                "error_string": err.Get_error_string(),
            }
        except self.MPI.Exception as e:
            return {"error": f"MPI error class {e.Get_error_class()}: {e.Get_error_string()}"}
        except Exception as e:
            return {"error": f"{type(e).__name__}: {e}"}
        finally:
            comm.Free()

    def hello(self) -> dict[str, Any]:
        MPI = self.MPI
        import mpi4py

        hosts = self.gather_json(MPI.Get_processor_name())  # rank 0 is the one who says it
        pids = self.gather_json(os.getpid())  # whose stacks to ask for, should a case hang
        return {
            "op": "hello",
            "ranks": self.size,
            "hosts": hosts,
            "pids": pids,
            "pid": os.getpid(),
            "library": MPI.Get_library_version().rstrip("\x00").strip().splitlines()[0],
            "mpi_version": "%d.%d" % MPI.Get_version(),
            "mpi4py": str(mpi4py.__version__),
            "numpy": np.__version__,
            "plant": self.plant,
            "constants": {
                k: int(getattr(MPI, k))
                for k in (
                    "PROC_NULL",
                    "ANY_SOURCE",
                    "ANY_TAG",
                    "ROOT",
                    "UNDEFINED",
                    "ERR_RANK",
                    "ERR_TAG",
                    "ERR_PROC_FAILED",
                )
            }
            | {"TAG_UB": int(self.world.Get_attr(MPI.TAG_UB))},
        }


def _matmul(invec: Any, inoutvec: Any, datatype: Any) -> None:
    """inoutvec = invec @ inoutvec, matrix by matrix: invec comes from the lower ranks, so the
    reduction computes A0 @ A1 @ ... in rank order, as MPI requires for non-commutative ops."""
    a = np.frombuffer(invec, np.int64).reshape(-1, 2, 2)
    b = np.frombuffer(inoutvec, np.int64).reshape(-1, 2, 2)
    b[...] = a @ b


# -- modes ------------------------------------------------------------------------------------


def serve(peer: Peer) -> int:
    """Rank 0 holds the channel; every rank loops: case in (broadcast), report out (gather)."""
    from pytest_hpccomm.peer.channel import (
        ChannelClosed,
        MessageError,
        PeerClient,
        register_dump,
        register_fatal,
    )

    client = PeerClient.from_env() if peer.rank == 0 else None
    if client is None:  # rank 0's client registered it; the others' stacks are asked for too
        register_dump(os.environ)
    register_fatal()  # a case that crashes a rank says where, whatever the launcher forwards
    hello = peer.hello()
    if client is not None:
        client.send(hello)
    while True:
        msg: dict[str, Any] = {"op": "shutdown"}
        if client is not None:
            try:
                msg = client.recv(None)
            except ChannelClosed:
                msg = {"op": "shutdown"}
            except MessageError as e:
                print(f"conformance peer: {e}", file=sys.stderr)
                continue
        msg = peer.bcast_json(msg)
        if msg.get("op") == "shutdown":
            if client is not None and "id" in msg:
                client.reply(msg, "bye")
            break
        if msg.get("op") != "case":
            if client is not None:
                client.reply(msg, error=f"unknown op {msg.get('op')!r}")
            continue
        t0 = time.perf_counter()
        reports = peer.gather_json(peer.run(msg["case"]))
        if client is not None:
            client.reply(msg, {"ranks": reports, "elapsed": time.perf_counter() - t0})
    if client is not None:
        client.close()
    return 0


def run_one(peer: Peer, case_json: str) -> int:
    case = peer.bcast_json(json.loads(case_json) if peer.rank == 0 else None)
    reports = peer.gather_json(peer.run(case))
    if peer.rank == 0:
        print(f"{CASE_MARK} {json.dumps({'case': case, 'ranks': reports})}", flush=True)
    return 0


def ulfm(MPI: Any) -> int:
    """The last rank SIGKILLs itself; every survivor receives from it under ERRORS_RETURN and
    must get MPI_ERR_PROC_FAILED, then acknowledges, shrinks and checks the survivors' comm.
    Each survivor prints its own line (rank 0 cannot gather across a dead process)."""
    comm = MPI.COMM_WORLD.Dup()
    comm.Set_errhandler(MPI.ERRORS_RETURN)
    rank, n = comm.Get_rank(), comm.Get_size()
    victim = n - 1
    comm.Barrier()
    if rank == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    out: dict[str, Any] = {
        "rank": rank,
        "host": socket.gethostname(),
        "victim": victim,
        "ERR_PROC_FAILED": int(MPI.ERR_PROC_FAILED),
    }
    t0 = time.monotonic()
    try:
        comm.Recv(np.zeros(1, np.int32), source=victim, tag=3)
        out["error_class"] = None
    except MPI.Exception as e:
        out |= {"error_class": e.Get_error_class(), "message": e.Get_error_string()}
    out["detect_s"] = round(time.monotonic() - t0, 3)
    try:
        comm.Ack_failed()
        shrunk = comm.Shrink()
        out["shrunk_size"] = shrunk.Get_size()
        total = np.zeros(1, np.int64)
        shrunk.Allreduce(np.array([1], np.int64), total, op=MPI.SUM)
        out["shrunk_sum"] = int(total[0])
        out["shrunk_order"] = shrunk.allgather(rank)  # old ranks, by new rank
    except (MPI.Exception, NotImplementedError) as e:
        out["shrink_error"] = str(e)
    print(f"{ULFM_MARK} {json.dumps(out)}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pytest_hpccomm.stacks.mpi.peer.conformance")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--case", help="run this one case (JSON) and print every rank's report")
    g.add_argument("--ulfm", action="store_true", help="kill the last rank; survivors report")
    args = p.parse_args(argv)
    plant = os.environ.get(PLANT_VAR) or None
    if plant is not None and plant not in PLANTS:
        print(f"{PLANT_VAR}={plant!r}: known plants are {', '.join(PLANTS)}", file=sys.stderr)
        return 2
    from mpi4py import MPI  # late: the orchestrator imports this module without MPI

    if args.ulfm:
        return ulfm(MPI)
    if MPI.COMM_WORLD.Get_size() < 2:
        print("the conformance peer needs at least 2 ranks", file=sys.stderr)
        return 2
    peer = Peer(MPI, plant)
    return run_one(peer, args.case) if args.case else serve(peer)


if __name__ == "__main__":
    sys.exit(main())
