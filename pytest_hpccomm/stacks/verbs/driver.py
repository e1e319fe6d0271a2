"""Orchestrator side of the verbs stack: two long-lived peers, and connections between them.

The peers (peer/) each own the selected device's resources; everything they do is asked
over the control channel. A connection is two QPs, one per peer: on InfiniBand and RoCE the
orchestrator relays each side's QPN, PSN, LID and GID to the other (perftest does the same
over its TCP side channel); on iWARP the peers connect through rdma_cm. On one host both
peers use the same device and the traffic loops back through it (a real HCA's loopback, or
rxe's/siw's); across hosts (PeerPlace, from --hpc-hosts) each peer runs on its own host with
that host's device, started over the remote shell, and dials home over TCP, as perftest's
server and client run on two nodes. The conformance tests run against this pair for the whole
session.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from pytest_hpccomm.cluster.peer_env import peer_env
from pytest_hpccomm.cluster.remote_shell import RemoteShell
from pytest_hpccomm.fabrics import FabricSelection
from pytest_hpccomm.fabrics.sysfs import SOFTWARE_DRIVERS
from pytest_hpccomm.peer.channel import Channel, ChannelError, ControlServer, RemoteError
from pytest_hpccomm.proc.jobs import RunningJob, start_job

# the checks live in completions.py; re-exported here, where the suites import them from
from pytest_hpccomm.stacks.verbs.completions import CompletionOrderError as CompletionOrderError
from pytest_hpccomm.stacks.verbs.completions import WorkRequestFailed as WorkRequestFailed
from pytest_hpccomm.stacks.verbs.completions import describe_missing
from pytest_hpccomm.stacks.verbs.completions import expect_posting_order as expect_posting_order
from pytest_hpccomm.stacks.verbs.completions import expect_success as expect_success
from pytest_hpccomm.stacks.verbs.kernel_log import KernelLog
from pytest_hpccomm.stacks.verbs.wire import HELLO

PEER_MODULE = "pytest_hpccomm.stacks.verbs.peer"
ALL_ACCESS = ("local_write", "remote_write", "remote_read", "remote_atomic")

# How long a completion may take: a fixed allowance plus the payload at a floor throughput.
# rxe and siw in the TCG-emulated CI guest complete a 4 MiB WRITE, READ or SEND in 0.05-0.3 s
# on a loaded host; 5 s + 1 s per MiB is a wide margin, yet seconds: a dead link fails its
# item quickly instead of every wait running out a minute.
COMPLETION_BASE = 5.0  # seconds
COMPLETION_FLOOR = 1 << 20  # bytes per second
CALL_MARGIN = 20.0  # a peer answers a wait this long after it ran out, or it is stuck
CM_LIMIT = 30.0  # seconds for one rdma_cm event (address, route, request, established)


def completion_wait(nbytes: int) -> float:
    """Seconds to wait for the completions of work requests moving `nbytes` in all."""
    return COMPLETION_BASE + max(0, nbytes) / COMPLETION_FLOOR


class LinkDown(BaseException):
    """The link cannot carry the item on: completions missed their deadline (the QP is in
    error, the connection was TERMINATEd) or a peer stopped answering.

    A BaseException on purpose. Hypothesis counts every Exception (and pytest's Failed) as a
    failing example and goes on shrinking; on a dead link every further example would only
    wait out its deadline and fail the same way, and say nothing about the example. Outside
    Exception, it ends the property at once with the reason (Hypothesis 6.x:
    failure_exceptions_to_catch() is Exception, SystemExit, GeneratorExit and Failed)."""

    def __init__(
        self,
        message: str,
        *,
        qp_state: str | None = None,
        cm_events: tuple[str, ...] = (),
        kernel: tuple[str, ...] = (),
        completions: tuple[dict[str, Any], ...] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.qp_state, self.cm_events, self.kernel = qp_state, cm_events, kernel
        self.completions = completions

    def __str__(self) -> str:
        parts = [self.message]
        if self.qp_state is not None:
            parts.append(f"QP state as the device reports it: {self.qp_state}")
        if self.cm_events:
            parts.append(f"rdma_cm events: {', '.join(self.cm_events)}")
        if self.kernel:
            parts.append("kernel log since the item began: " + " | ".join(self.kernel))
        return "; ".join(parts)


class PeerError(LinkDown):
    """A peer could not start, died, or stopped answering: the pair must be restarted."""


class VerbsCallError(Exception):
    """A verbs call inside a peer failed (e.g. ibv_modify_qp was rejected); the peer is fine."""

    def __init__(self, op: str, message: str) -> None:
        super().__init__(f"{op}: {message}")
        self.op, self.message = op, message


@dataclass
class Peer:
    name: str
    job: RunningJob
    channel: Channel
    info: dict[str, Any]
    broken: bool = False
    host: str | None = None  # None: this machine, with the pair's other peer
    address: str | None = None  # its device's IP address (rdma_cm listens there)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def _where(self) -> str:
        out, err = self.job.peek_output()
        tail = (err.strip() or out.strip()).splitlines()[-1:] or ["(no output)"]
        state = "running" if self.job.poll() is None else f"exited {self.job.poll()}"
        return f"{self.name} ({state}): {tail[0][:300]}"

    def start(self, op: str, **args: Any) -> str:
        """Send a request without waiting; finish(rid) collects the reply."""
        if self.broken:  # it may still be busy with an abandoned request: never wait on it
            raise PeerError(
                f"{op}: {self.name} stopped answering earlier; the pair is "
                "restarted before the next item"
            )
        rid = f"{self.name}-{next(self._ids)}"
        try:
            self.channel.send({"op": op, **args, "id": rid})
        except ChannelError as exc:
            self.broken = True
            raise PeerError(f"{op}: {exc}; {self._where()}") from None
        return rid

    def wait_for(self, rid: str, timeout: float, event: str | None = None) -> Any:
        """The reply to rid (or, with event, that event for rid); RemoteError -> VerbsCallError."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError(
                        f"no {'event ' + event if event else 'reply'} within {timeout:g}s"
                    )
                msg = self.channel.recv(left)
            except (TimeoutError, ChannelError) as exc:
                self.broken = True
                raise PeerError(f"{rid}: {exc}; {self._where()}") from None
            if msg.get("id") != rid:
                continue  # a late reply to an abandoned request
            if event is not None and msg.get("event") == event:
                return msg
            if "ok" in msg:
                if not msg["ok"]:
                    raise VerbsCallError(rid, str(msg.get("error")))
                return msg.get("result")

    def call(self, op: str, timeout: float = 60.0, **args: Any) -> Any:
        rid = self.start(op, **args)
        try:
            return self.wait_for(rid, timeout)
        except VerbsCallError as exc:
            raise VerbsCallError(op, exc.message) from None

    def fill(self, mr: dict[str, Any], offset: int, length: int, seed: int) -> str:
        """Write the peer's pattern(seed) into `length` bytes of `mr` (reg_mr's reply) at
        `offset`; the SHA-256 hex digest of what was written."""
        return str(self.call("fill", mr=mr["mr"], offset=offset, length=length, seed=seed))

    def digests(self, mr: dict[str, Any], regions: list[tuple[int, int]]) -> list[str]:
        """The SHA-256 hex digest of each (offset, length) region of `mr`, in order."""
        return [
            str(d) for d in self.call("digests", mr=mr["mr"], regions=[list(r) for r in regions])
        ]

    def stop(self) -> None:
        if not self.broken and self.job.poll() is None:
            try:
                self.channel.request({"op": "shutdown"}, timeout=10)
            except (ChannelError, TimeoutError, RemoteError, OSError):
                pass
        self.channel.close()
        self.job.wait(timeout=10)
        self.job.stop()


def together(calls: list[tuple[Peer, str, dict[str, Any]]], timeout: float = 60.0) -> list[Any]:
    """One request to each peer at once, then every reply: a round trip instead of several."""
    rids = [(peer, op, peer.start(op, **args)) for peer, op, args in calls]
    out = []
    for peer, op, rid in rids:
        try:
            out.append(peer.wait_for(rid, timeout))
        except VerbsCallError as exc:
            raise VerbsCallError(op, exc.message) from None
    return out


@dataclass(frozen=True)
class PeerOptions:
    device: str
    port: int
    gid_index: int | None
    address: str | None
    plant: str | None = None
    start_timeout: float = 120.0  # Python + pyverbs start in ~15 s under TCG emulation
    job_timeout: float = 4 * 3600.0  # a session's peers: a hard cap, reaped at session end
    python: str = ""  # the Python whose pyverbs the peers use (env.VerbsEnv); "": this one

    @classmethod
    def from_selection(
        cls, sel: FabricSelection, plant: str | None = None, python: str = ""
    ) -> PeerOptions:
        if sel.device is None or sel.port is None:
            raise PeerError(f"fabric {sel.kind} selected no RDMA device: {sel.description}")
        return cls(sel.device, sel.port, sel.gid_index, sel.address, plant, python=python)

    def argv(self) -> list[str]:
        argv = [
            self.python or sys.executable,
            "-m",
            PEER_MODULE,
            "--device",
            self.device,
            "--port",
            str(self.port),
        ]
        if self.gid_index is not None:
            argv += ["--gid-index", str(self.gid_index)]
        if self.address:
            argv += ["--address", self.address]
        if self.plant:
            argv += ["--plant", self.plant]
        return argv


@dataclass(frozen=True)
class PeerPlace:
    """Where one peer of a pair runs: a host of --hpc-hosts, with that host's device."""

    host: str
    local: bool  # this machine: started directly, not over the remote shell
    opts: PeerOptions


@dataclass(frozen=True)
class Placement:
    """Peers across hosts: the places, the remote shell, and the address of this machine
    the peers dial home to (its fabric address: the hosts reach it over that network)."""

    places: tuple[PeerPlace, ...]
    shell: RemoteShell
    listen: str


def start_peers(opts: PeerOptions, n: int = 2, placement: Placement | None = None) -> list[Peer]:
    """n peers dialled home and introduced (device info in .info): all on this host, or one
    per place of `placement`, in its order."""
    if placement is not None:
        return _start_placed(placement)
    server = ControlServer()
    env = peer_env(server.env(), inherit=True)  # address and key: environment, never argv
    jobs = [
        start_job(opts.argv(), env, timeout=opts.job_timeout, label=f"verbs peer {i}")
        for i in range(n)
    ]
    peers: list[Peer] = []
    try:
        by_pid = {j.pid: j for j in jobs}
        for ch, hello in _introductions(server, jobs, n, opts.start_timeout, opts.device):
            job = _job_of(by_pid, int(hello["pid"]))
            peers.append(Peer(f"peer{len(peers)}", job, ch, hello["info"]))
        return peers
    except BaseException:
        for job in jobs:
            job.stop()
        raise
    finally:
        server.close()  # connected channels live on; no one else may dial in


def _start_placed(placement: Placement) -> list[Peer]:
    server = ControlServer((placement.listen, 0))
    jobs: list[RunningJob] = []
    try:
        for i, place in enumerate(placement.places):
            label = f"verbs peer {i} on {place.host}"
            if place.local:
                env = peer_env(server.env(), inherit=True)
                jobs.append(
                    start_job(place.opts.argv(), env, timeout=place.opts.job_timeout, label=label)
                )
            else:
                jobs.append(
                    placement.shell.start(
                        place.host,
                        place.opts.argv(),
                        peer_env(server.env()),
                        timeout=place.opts.job_timeout,
                        label=label,
                    )
                )
        wait = max(p.opts.start_timeout for p in placement.places)
        met = _introductions(server, jobs, len(jobs), wait, placement.places[0].opts.device)
        by_host = {_short(str(hello.get("host", ""))): (ch, hello) for ch, hello in met}
        peers = []
        for i, place in enumerate(placement.places):
            got = by_host.get(_short(place.host))
            if got is None:
                raise PeerError(
                    f"no verbs peer said hello from {place.host} (hosts that did: "
                    f"{', '.join(sorted(by_host)) or 'none'})"
                )
            peers.append(
                Peer(
                    f"peer{i}",
                    jobs[i],
                    got[0],
                    got[1]["info"],
                    host=place.host,
                    address=place.opts.address,
                )
            )
        return peers
    except BaseException:
        for job in jobs:
            job.stop()
        raise
    finally:
        server.close()


def _short(host: str) -> str:
    return host.split(".")[0]


def _introductions(
    server: ControlServer, jobs: list[RunningJob], n: int, timeout: float, device: str
) -> list[tuple[Channel, dict[str, Any]]]:
    """Each peer's channel and hello, once n peers dialled in and opened their device."""
    try:
        channels = server.accept_peers(n, timeout=timeout)
    except TimeoutError as exc:
        raise PeerError(
            f"verbs peers did not dial home: {exc}; " + "; ".join(_last_words(j) for j in jobs)
        ) from None
    out = []
    for ch in channels:
        hello = ch.recv(timeout)
        if hello.get("op") != HELLO:
            raise PeerError(f"verbs peer said {hello!r} instead of hello")
        if "error" in hello:
            raise PeerError(f"verbs peer cannot open {device}: {hello['error']}")
        out.append((ch, hello))
    return out


def _job_of(jobs: dict[int, RunningJob], pid: int) -> RunningJob:
    """The job whose process tree holds pid (the reaper shim sits between)."""
    for job in jobs.values():
        if job.pid == pid or any(p.pid == pid for p in job.processes()):
            return job
    raise PeerError(f"a verbs peer with pid {pid} is not one of ours")


def _last_words(job: RunningJob) -> str:
    out, err = job.peek_output()
    lines = (err.strip() or out.strip()).splitlines()
    return f"{job.label}: {lines[-1][:300] if lines else 'no output'}"


# ---------------------------------------------------------------------------------------------
# connections


@dataclass(frozen=True)
class Side:
    peer: Peer
    ep: int
    address: dict[str, Any]  # qpn, psn, lid, gid, ...

    def post_recv(self, mr: dict[str, Any], offset: int, length: int, wr_id: int) -> None:
        """One receive of up to `length` bytes into `mr` at `offset`."""
        self.peer.call(
            "post_recv", ep=self.ep, mr=mr["mr"], offset=offset, length=length, wr_id=wr_id
        )


def rdma_wr(
    opcode: str,
    local: dict[str, Any],
    remote: dict[str, Any],
    *,
    wr_id: int,
    length: int,
    offset: int = 0,
) -> dict[str, Any]:
    """A work request as the peers take it: `opcode` over `length` bytes of MR `local` at
    `offset`, and (for RDMA opcodes) the start of the other side's MR `remote` (reg_mr's
    replies); SEND ignores `remote`."""
    return {
        "opcode": opcode,
        "mr": local["mr"],
        "wr_id": wr_id,
        "offset": offset,
        "length": length,
        "remote_addr": remote["addr"],
        "rkey": remote["rkey"],
    }


@dataclass
class Connection:
    qp_type: str
    a: Side  # the requester in the tests: posts the operations
    b: Side  # the responder

    def close(self) -> None:
        live = [(s.peer, "destroy_qp", {"ep": s.ep}) for s in (self.a, self.b) if not s.peer.broken]
        try:
            together(live)
        except (VerbsCallError, PeerError):
            pass

    def state(self, side: Side) -> str:
        return str(side.peer.call("query_qp", ep=side.ep)["state"])


class VerbsPair:
    """Two peers on the selected device, and the connections tests ask for."""

    _ports = itertools.count(20000 + os.getpid() % 10000)
    call_margin = CALL_MARGIN

    def __init__(
        self,
        a: Peer,
        b: Peer,
        selection: FabricSelection,
        opts: PeerOptions | None = None,
        placement: Placement | None = None,
    ) -> None:
        self.a, self.b, self.selection, self.opts = a, b, selection, opts
        self.placement = placement
        self.info = a.info
        self.iwarp = bool(a.info.get("iwarp"))
        self.restarts = 0
        self.kernel_log = KernelLog()
        self.kernel_log.mark()

    @property
    def broken(self) -> bool:
        return self.a.broken or self.b.broken

    def restart(self) -> None:
        """New peers, after one got stuck (e.g. a benchmark's server side waiting for a
        client that failed): every QP and MR of the old ones is gone with them."""
        if self.opts is None:
            raise PeerError("cannot restart peers started without PeerOptions")
        for peer in (self.a, self.b):
            peer.broken = True  # no polite shutdown: a stuck peer would not read it
            peer.stop()
        self.a, self.b = start_peers(self.opts, 2, self.placement)
        self.restarts += 1

    @property
    def hosts(self) -> tuple[str, str] | None:
        """The two hosts of a pair that spans hosts; None when both peers share a device."""
        if self.placement is None:
            return None
        return (str(self.a.host), str(self.b.host))

    @property
    def emulated(self) -> bool:
        return self.selection.driver in SOFTWARE_DRIVERS

    def create_qp(self, peer: Peer, qp_type: str = "RC", **caps: Any) -> Side:
        got = peer.call("create_qp", qp_type=qp_type, **caps)
        return Side(peer, int(got["ep"]), got)

    def connect(
        self,
        qp_type: str = "RC",
        access: tuple[str, ...] = ALL_ACCESS,
        b_caps: dict[str, Any] | None = None,
        cm: bool = False,
        **caps: Any,
    ) -> Connection:
        """A connected pair of QPs in RTS: a on peer a, b on peer b (b's QP also with
        `b_caps`, e.g. its shared receive queue). Connected through rdma_cm on iWARP, and
        elsewhere with `cm` (RC); by hand otherwise, the pair relaying QPN, PSN and GID."""
        if qp_type == "UD" and self.iwarp:
            raise VerbsCallError("create_qp", "iWARP has no UD transport")
        if qp_type == "UD" and cm:
            raise VerbsCallError("create_qp", "an external UD QP is not connected by rdma_cm")
        args = {"qp_type": qp_type, **caps}
        got = together(
            [(self.a, "create_qp", args), (self.b, "create_qp", {**args, **(b_caps or {})})]
        )
        a, b = (Side(p, int(g["ep"]), g) for p, g in zip((self.a, self.b), got))
        conn = Connection(qp_type, a, b)
        try:
            if self.iwarp or cm:
                self._cm_connect(a, b)
            else:
                together(
                    [
                        (
                            a.peer,
                            "connect",
                            {"ep": a.ep, "remote": b.address, "access": list(access)},
                        ),
                        (
                            b.peer,
                            "connect",
                            {"ep": b.ep, "remote": a.address, "access": list(access)},
                        ),
                    ]
                )
        except BaseException:
            conn.close()
            raise
        return conn

    def cm_address(self, peer: Peer) -> str | None:
        """`peer`'s device's IP address (rdma_cm binds there)."""
        return peer.address or self.selection.address

    def cm_service(self, peer: Peer) -> tuple[str | None, int]:
        """Where `peer` can listen with rdma_cm: its device's address, and a port of its own."""
        return self.cm_address(peer), next(self._ports)

    def _cm_connect(self, a: Side, b: Side) -> None:
        """rdma_cm: b listens, a connects, b accepts, both see ESTABLISHED; each wait for an
        event is bounded in the peer (CM_LIMIT), each call here a little longer."""
        address, port = self.cm_service(b.peer)
        limit, call = CM_LIMIT, CM_LIMIT + self.call_margin
        b.peer.call("cm_listen", ep=b.ep, address=address, port=port)
        a.peer.call("cm_connect", ep=a.ep, address=address, port=port, limit=limit, timeout=call)
        b.peer.call("cm_accept", ep=b.ep, limit=limit, timeout=call)
        a.peer.call("cm_established", ep=a.ep, limit=limit, timeout=call)
        b.peer.call("cm_established", ep=b.ep, limit=limit, timeout=call)

    def reg_mr(
        self, peer: Peer, length: int, access: tuple[str, ...] = ALL_ACCESS
    ) -> dict[str, Any]:
        rights = list(dict.fromkeys(["local_write", *access]))
        return dict(peer.call("reg_mr", length=length, access=rights))

    def execute(
        self,
        side: Side,
        wrs: list[dict[str, Any]],
        *,
        timeout: float | None = None,
        expect: int | None = None,
        allow_missing: bool = False,
    ) -> list[dict[str, Any]]:
        """Post wrs on side's send queue, wait for `expect` completions (default: one per
        signalled WR) and return them in the order the CQ gave them. The wait: `timeout`, or
        completion_wait() of the bytes the WRs move. Completions still missing then raise
        LinkDown, unless allow_missing (a test that expects the link to die)."""
        n = sum(1 for w in wrs if w.get("signaled", True)) if expect is None else expect
        wait = (
            completion_wait(sum(int(w.get("length", 0)) for w in wrs))
            if timeout is None
            else timeout
        )
        wcs = list(
            side.peer.call(
                "execute", ep=side.ep, wrs=wrs, count=n, wait=wait, timeout=wait + self.call_margin
            )
        )
        if len(wcs) < n and not allow_missing:
            raise self.link_down(side, describe_missing(wcs, wrs, n, wait, "send"), wcs)
        return wcs

    def poll(
        self,
        side: Side,
        cq: str = "recv",
        count: int = 1,
        nbytes: int = 0,
        *,
        timeout: float | None = None,
        allow_missing: bool = False,
    ) -> list[dict[str, Any]]:
        """`count` completions of side's `cq` ("send" or "recv"), with execute()'s deadline
        (completion_wait(nbytes) unless `timeout`) and its LinkDown when they miss it."""
        wait = completion_wait(nbytes) if timeout is None else timeout
        wcs = list(
            side.peer.call(
                "poll", ep=side.ep, cq=cq, count=count, wait=wait, timeout=wait + self.call_margin
            )
        )
        if len(wcs) < count and not allow_missing:
            raise self.link_down(side, describe_missing(wcs, [], count, wait, cq), wcs)
        return wcs

    def expect_success(
        self, wcs: list[dict[str, Any]], wrs: list[dict[str, Any]], what: str
    ) -> None:
        """expect_success(), its failure quoting the kernel log (a siw TERMINATE's reason)."""
        try:
            expect_success(wcs, wrs, what)
        except WorkRequestFailed as exc:
            raise WorkRequestFailed(str(exc), tuple(self.kernel_log.since())) from None

    def refused(
        self, side: Side, wr: dict[str, Any], what: str, *, allow_missing: bool = False
    ) -> str:
        """Run a WR that must fail: refused at post, or completed with an error (or, with
        allow_missing, never completed: the connection was torn down). How it failed; an
        AssertionError naming `what` when it completed successfully."""
        try:
            wcs = self.execute(side, [wr], allow_missing=allow_missing)
        except VerbsCallError as exc:
            return f"rejected at post: {exc}"
        if not wcs:
            return "no completion (connection terminated)"
        assert wcs[0]["status"] != 0, f"{what}: the {wr['opcode']} completed successfully"
        return str(wcs[0]["status_text"])

    def link_down(self, side: Side, what: str, wcs: list[dict[str, Any]] | None = None) -> LinkDown:
        """A LinkDown with the evidence: what the QP and rdma_cm say, and the kernel log."""
        got = side.peer.call("diagnose", ep=side.ep)
        return LinkDown(
            f"{self.selection.device}: {what}",
            qp_state=str(got["qp_state"]),
            cm_events=tuple(got["cm_events"]),
            kernel=tuple(self.kernel_log.since()),
            completions=tuple(wcs or ()),
        )

    def close(self) -> None:
        for peer in (self.a, self.b):
            peer.stop()
        self.kernel_log.close()
