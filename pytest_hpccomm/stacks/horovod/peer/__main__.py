"""Horovod peer: one process per rank, long-lived, running cases and sweeps through Horovod.

    mpirun -n 2 python -m pytest_hpccomm.stacks.horovod.peer          # MPI controller
    (Gloo: one process per rank with Horovod's rendezvous variables; see driver.py)
    python -m pytest_hpccomm.stacks.horovod.peer --case FILE.json      # replay one case

Every rank dials home on its own over the control channel (address and key by environment),
so the requests never travel through the runtime under test: pytest sends each rank the same
case, every rank runs it and reports what it received, and the orchestrator judges the reports
against NumPy. `--case` runs one case (every rank's input is in it) and prints the reports.

Imports neither pytest nor orchestrator modules; torch and Horovod are imported late, in the
Horovod venv. Test-only plant: HPCCOMM_HOROVOD_PLANT=corrupt-allreduce (wire.PLANTS).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import time
from typing import Any

import numpy as np

from pytest_hpccomm.peer.canary import stretch
from pytest_hpccomm.stacks.horovod.wire import (
    PLANT_THRESHOLD,
    PLANT_VAR,
    PLANTS,
    SIZE_VAR,
    decode,
    encode,
    rank_cpu,
    static_process_sets,
)


class Peer:
    def __init__(self, hvd: Any, torch: Any, plant: str | None, sets: list[Any]) -> None:
        self.hvd, self.torch, self.plant = hvd, torch, plant
        self.rank, self.size = hvd.rank(), hvd.size()
        self.sets = sets  # the very objects given to hvd.init: it gives them their ids
        self.ops = {
            "sum": hvd.Sum,
            "average": hvd.Average,
            "min": hvd.Min,
            "max": hvd.Max,
            "product": hvd.Product,
        }
        self.cases = 0

    # -- tensors ---------------------------------------------------------------------------
    def tensor(self, obj: dict[str, Any]) -> Any:
        dtype, shape, data = decode(obj)
        return self.torch.from_numpy(np.frombuffer(data, dtype).reshape(shape).copy())

    def report(self, t: Any) -> dict[str, Any]:
        a = np.ascontiguousarray(t.detach().cpu().numpy())
        return encode(str(a.dtype), a.shape, a.tobytes())

    def planted(self, t: Any) -> Any:
        if self.plant == "corrupt-allreduce" and t.numel() > PLANT_THRESHOLD:
            t = t.clone()
            t.view(-1)[-1] += 1
        return t

    # -- cases -----------------------------------------------------------------------------
    def run(self, case: dict[str, Any]) -> dict[str, Any]:
        """This rank's report; a Horovod error is reported as {"raised": ...} (error cases
        expect one; elsewhere the orchestrator fails the case with it)."""
        self.cases += 1
        handler = getattr(self, f"case_{case.get('kind')}", None)
        if handler is None:
            return {"raised": f"unknown case kind {case.get('kind')!r}"}
        name = f"c{self.cases}"  # same on every rank: they run the same cases in order
        t0 = time.monotonic()
        try:
            out: dict[str, Any] = handler(case, name)
        except Exception as e:  # Horovod raises HorovodInternalError, ValueError, RuntimeError
            out = {"raised": f"{type(e).__name__}: {e}"[:2000]}
        out["seconds"] = round(time.monotonic() - t0, 4)
        return out

    def _scales(self, case: dict[str, Any]) -> dict[str, float]:
        return {
            "prescale_factor": float(case.get("prescale", 1.0)),
            "postscale_factor": float(case.get("postscale", 1.0)),
        }

    def _set(self, case: dict[str, Any]) -> Any:
        index = case.get("process_set")
        return self.hvd.global_process_set if index is None else self.sets[int(index)]

    def case_allreduce(self, case: dict[str, Any], name: str) -> dict[str, Any]:
        ps = self._set(case)
        if not ps.included():
            return {"skipped": "not in the process set"}
        x = self.tensor(case["inputs"][self.rank])
        op = self.ops[case["op"]]
        if case.get("in_place"):
            self.hvd.allreduce_(x, name=name, op=op, process_set=ps, **self._scales(case))
            y = x
        else:
            y = self.hvd.allreduce(x, name=name, op=op, process_set=ps, **self._scales(case))
        return {"output": self.report(self.planted(y))}

    def case_grouped_allreduce(self, case: dict[str, Any], name: str) -> dict[str, Any]:
        xs = [self.tensor(t) for t in case["inputs"][self.rank]]
        ys = self.hvd.grouped_allreduce(
            xs, name=name, op=self.ops[case["op"]], **self._scales(case)
        )
        return {"outputs": [self.report(self.planted(y)) for y in ys]}

    def case_fused_allreduce(self, case: dict[str, Any], name: str) -> dict[str, Any]:
        """The same tensors allreduced twice: all enqueued at once (Tensor Fusion packs them
        into one buffer when they are ready in the same cycle), then one after another."""
        xs = [self.tensor(t) for t in case["inputs"][self.rank]]
        op = self.ops[case["op"]]
        handles = [
            self.hvd.allreduce_async(x, name=f"{name}.a{i}", op=op) for i, x in enumerate(xs)
        ]
        fused = [self.hvd.synchronize(h) for h in handles]
        seq = [self.hvd.allreduce(x, name=f"{name}.s{i}", op=op) for i, x in enumerate(xs)]
        return {
            "outputs": [self.report(self.planted(y)) for y in fused],
            "sequential": [self.report(self.planted(y)) for y in seq],
        }

    def case_reducescatter(self, case: dict[str, Any], name: str) -> dict[str, Any]:
        x = self.tensor(case["inputs"][self.rank])
        y = self.hvd.reducescatter(x, name=name, op=self.ops[case["op"]], **self._scales(case))
        return {"output": self.report(y)}

    def case_allgather(self, case: dict[str, Any], name: str) -> dict[str, Any]:
        ps = self._set(case)
        if not ps.included():
            return {"skipped": "not in the process set"}
        y = self.hvd.allgather(self.tensor(case["inputs"][self.rank]), name=name, process_set=ps)
        return {"output": self.report(y)}

    def case_broadcast(self, case: dict[str, Any], name: str) -> dict[str, Any]:
        x = self.tensor(case["inputs"][self.rank])
        if case.get("in_place"):
            self.hvd.broadcast_(x, root_rank=int(case["root"]), name=name)
            y = x
        else:
            y = self.hvd.broadcast(x, root_rank=int(case["root"]), name=name)
        return {"output": self.report(y)}

    def case_alltoall(self, case: dict[str, Any], name: str) -> dict[str, Any]:
        x = self.tensor(case["inputs"][self.rank])
        splits = case.get("splits")
        if splits is None:
            y, received = self.hvd.alltoall(x, name=name), None
        else:
            y, received = self.hvd.alltoall(
                x, splits=self.torch.tensor(splits[self.rank], dtype=self.torch.int32), name=name
            )
        out: dict[str, Any] = {"output": self.report(y)}
        if received is not None:
            out["received_splits"] = [int(v) for v in received.tolist()]
        return out

    def case_die_in_allreduce(self, case: dict[str, Any], name: str) -> dict[str, Any]:
        """The others enter an allreduce; the victim, instead of joining it, SIGKILLs itself
        a moment later. They must get an error (or be ended), not wait forever. (Had the
        victim enqueued its part first, the allreduce could complete before it died.)"""
        x = self.torch.ones(1 << 16, dtype=self.torch.float32)
        if self.rank == int(case["victim"]):
            time.sleep(0.5)  # the others are inside the collective by now
            os.kill(os.getpid(), signal.SIGKILL)
        self.hvd.allreduce(x, name=name)
        return {"output": "survived"}

    def case_stall_in_allreduce(self, case: dict[str, Any], name: str) -> dict[str, Any]:
        """The others enter an allreduce; the victim sleeps `seconds` instead of joining it:
        a hang, for the orchestrator to report where every rank was."""
        if self.rank == int(case["victim"]):
            time.sleep(float(case["seconds"]))
        self.hvd.allreduce(self.torch.ones(16, dtype=self.torch.float32), name=name)
        return {"output": "survived"}

    # -- sweeps ----------------------------------------------------------------------------
    def bench(self, req: dict[str, Any]) -> dict[str, Any]:
        """allreduce of float32 tensors of each size (bytes): per timed batch of `iters`
        operations, this rank's seconds per operation (nccl-tests' time); warm-up apart."""
        torch, hvd = self.torch, self.hvd
        factor = float(req.get("slowdown", 1.0))
        points = []
        for size in req["sizes"]:
            x = torch.ones(max(1, int(size) // 4), dtype=torch.float32)
            name = f"bench.{size}"
            for _ in range(int(req["warmup"])):
                hvd.allreduce(x, name=name, op=hvd.Sum)
            samples, unstretched = [], []
            for _ in range(int(req["batches"])):
                # batches start together: else a rank's batch would time the other's canary
                # spin (it waits for it inside the first allreduce) and stretch it again
                hvd.barrier()
                t0 = time.perf_counter()
                for _ in range(int(req["iters"])):
                    y = hvd.allreduce(x, name=name, op=hvd.Sum)
                unstretched.append((time.perf_counter() - t0) / int(req["iters"]))
                stretch(t0, factor, idle=True)
                samples.append((time.perf_counter() - t0) / int(req["iters"]))
            # validated after timing: every element is the number of ranks
            ok = bool(torch.all(y == float(self.size)).item())
            point = {"bytes": int(x.numel()) * 4, "samples": samples, "valid": ok}
            if factor > 1.0:  # the canary's own work, so a test can see where the stretch went
                point["unstretched"] = unstretched
            points.append(point)
        return {"points": points}

    def train(self, req: dict[str, Any]) -> dict[str, Any]:
        """Horovod's pytorch_synthetic_benchmark: SGD through DistributedOptimizer on one fixed
        random batch; images/s of this rank per iteration of `batches_per_iter` steps (warm-up
        apart, the canary stretching each iteration). With `timeline` (a path; needs
        HOROVOD_TIMELINE=DYNAMIC at init) rank 0 also returns negotiation and reduction ms per
        step, per iteration. `valid`: after training every rank holds the same parameters."""
        from pytest_hpccomm.stacks.horovod.peer import models, timeline

        torch, hvd = self.torch, self.hvd
        channels, side, classes = models.MODELS[req["model"]]
        torch.manual_seed(1234 + self.rank)  # different initial weights: broadcast must fix it
        model = models.build(req["model"], torch)
        opt = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.01), named_parameters=model.named_parameters()
        )
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        batch = int(req["batch_size"])
        data = torch.randn(batch, channels, side, side)
        target = torch.randint(0, classes, (batch,))

        def step() -> None:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(data), target).backward()
            opt.step()

        for _ in range(int(req["warmup"])):
            step()
        path = req.get("timeline")
        if path:
            hvd.start_timeline(path)
        per_iter, bounds, rates = int(req["batches_per_iter"]), [time.time()], []
        factor, unstretched = float(req.get("slowdown", 1.0)), []
        for _ in range(int(req["iters"])):
            hvd.barrier()  # iterations start together (see bench)
            t0 = time.perf_counter()
            for _ in range(per_iter):
                step()
            unstretched.append(batch * per_iter / (time.perf_counter() - t0))
            stretch(t0, factor, idle=True)
            rates.append(batch * per_iter / (time.perf_counter() - t0))
            bounds.append(time.time())
        out: dict[str, Any] = {"images_per_s": rates}
        if factor > 1.0:  # the canary's own work (see bench)
            out["unstretched_images_per_s"] = unstretched
        if path:
            hvd.stop_timeline()
            hvd.barrier()  # a cycle passes: the coordinator closes the file
            if self.rank == 0:
                steps = timeline.per_step(_settled(path), bounds)
                out["timeline"] = [{k: v / per_iter for k, v in it.items()} for it in steps]
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        lo = hvd.allreduce(flat, op=hvd.Min, name="train.check.min")
        hi = hvd.allreduce(flat, op=hvd.Max, name="train.check.max")
        out["valid"] = bool(torch.equal(lo, hi))
        return out

    def hello(self) -> dict[str, Any]:
        import horovod

        hvd = self.hvd
        return {
            "op": "hello",
            "rank": self.rank,
            "size": self.size,
            "local_rank": hvd.local_rank(),
            "cross_rank": hvd.cross_rank(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "cpus": sorted(os.sched_getaffinity(0)),
            "controller": "mpi" if hvd.mpi_enabled() else "gloo",
            "horovod": horovod.__version__,
            "torch": self.torch.__version__,
            "process_sets": [ps.ranks for ps in self.sets],
            "plant": self.plant,
        }


def _settled(path: str, wait: float = 10.0) -> str:
    """The timeline's text once it parses (Horovod closes it a cycle after stop_timeline)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            with open(path) as fh:
                text = fh.read()
            json.loads(text)
            return text
        except (OSError, ValueError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def serve(peer: Peer) -> int:
    from pytest_hpccomm.peer.channel import PeerClient

    def handle(msg: dict[str, Any]) -> Any:
        if msg.get("op") == "case":
            return peer.run(msg["case"])
        if msg.get("op") == "bench":
            return peer.bench(msg)
        if msg.get("op") == "train":
            return peer.train(msg)
        raise ValueError(f"unknown op {msg.get('op')!r}")

    with PeerClient.from_env() as client:
        client.send(peer.hello())
        client.serve(handle)  # until "shutdown" or the orchestrator goes away
    peer.hvd.shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pytest_hpccomm.stacks.horovod.peer")
    p.add_argument("--case", help="run the case in this JSON file and print each rank's report")
    args = p.parse_args(argv)
    plant = os.environ.get(PLANT_VAR) or None
    if plant is not None and plant not in PLANTS:
        print(f"{PLANT_VAR}={plant!r}: known plants are {', '.join(PLANTS)}", file=sys.stderr)
        return 2
    cpu = rank_cpu(os.environ)
    if cpu is not None:  # every thread so far (numpy's BLAS pool); torch's and Horovod's inherit
        for tid in os.listdir("/proc/self/task"):
            os.sched_setaffinity(int(tid), {cpu})
    import horovod.torch as hvd
    import torch  # late: the orchestrator imports this module without torch or Horovod

    torch.set_num_threads(1)  # ranks share 2 cores with pytest
    size = int(os.environ.get(SIZE_VAR, "0"))
    sets = [hvd.ProcessSet(r) for r in static_process_sets(size)]
    hvd.init(process_sets=sets)
    peer = Peer(hvd, torch, plant, sets)
    if args.case:
        with open(args.case) as fh:
            report = peer.run(json.load(fh))
        print(json.dumps({"rank": peer.rank, "report": report}), flush=True)
        hvd.shutdown()
        return 0
    return serve(peer)


if __name__ == "__main__":
    sys.exit(main())
