"""A virtual cluster on one machine: hosts are network namespaces on a bridge.

Layout (PREFIX is unique per session; nothing is created in the root namespace):

    PREFIX-sw   namespace holding bridge br0 and switch ports p0..pN-1
    PREFIX-hI   host I: veth fab0 (peer pI in PREFIX-sw), address SUBNET.(I+1), lo

Each veth is created directly inside its namespaces (`ip link add fab0 netns H type veth peer
name pI netns SW`). Commands run on a host through exec_argv(): `ip netns exec` (which also
bind-mounts /etc/netns/NS/hosts, our name -> address table) + `unshare --uts` + hostname, since
with one shared hostname Open MPI takes all ranks for one node and Barrier hangs.

More: docs/explanation/internals.md (pytest_hpccomm.cluster.virtual).
"""

from __future__ import annotations

import atexit
import ipaddress
import json
import os
import secrets
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Mapping, Sequence

# re-exported: the plugin and tests know them as the virtual cluster's
from pytest_hpccomm.cluster.netns_teardown import NETNS_ETC as NETNS_ETC
from pytest_hpccomm.cluster.netns_teardown import ClusterError as ClusterError
from pytest_hpccomm.cluster.netns_teardown import cleanup_leftovers as cleanup_leftovers
from pytest_hpccomm.cluster.netns_teardown import default_state_dir as default_state_dir
from pytest_hpccomm.cluster.netns_teardown import pids_in_netns as pids_in_netns
from pytest_hpccomm.cluster.netns_teardown import run_command, teardown_manifest, write_manifest
from pytest_hpccomm.errors import Unavailable
from pytest_hpccomm.measure.link import LinkRate, format_bit_rate
from pytest_hpccomm.proc import proctree
from pytest_hpccomm.proc.jobs import JobResult, RunningJob, start_job

IFACE = "fab0"
UP_TIMEOUT = 5.0  # s for a host's fab0 to read operstate "up" (the link watch takes ~1 s)
BRIDGE = "br0"
MANIFEST_VERSION = 1


class ClusterUnavailable(Unavailable, RuntimeError):
    """The virtual cluster cannot be built here (not root, no iproute2...): a skip reason."""


@dataclass(frozen=True)
class VirtualHost:
    name: str  # its hostname inside exec_argv(), and the name MPI is given
    address: str  # on the fabric, inside the private subnet
    netns: str
    index: int

    @property
    def port(self) -> str:  # its switch port in the bridge's namespace
        return f"p{self.index}"


def session_prefix() -> str:
    """A fresh name prefix: hpcc<owner pid, hex>-<random>."""
    return f"hpcc{os.getpid():x}-{secrets.token_hex(2)}"


def unavailable_reason() -> str | None:
    """Why a virtual cluster cannot be built here, or None if it can (cheap: no side effects)."""
    if sys.platform != "linux":
        return "virtual cluster needs Linux network namespaces"
    if os.geteuid() != 0:
        return "virtual cluster needs root (network namespaces, veth, tc)"
    for tool in ("ip", "unshare", "tc"):
        if shutil.which(tool) is None:
            return f"virtual cluster needs `{tool}` (apt-get install iproute2 util-linux)"
    return None


# -- the agent that stands in for ssh ---------------------------------------------------------

_AGENT = r"""#!{python} -S
# ssh stand-in for mpirun (plm_rsh_agent / plm_ssh_agent / -launcher-exec): runs the remote
# command inside the virtual host's namespace, under its own hostname. Generated per cluster.
import os, sys
HOSTS = {hosts}
IP = {ip}
WITH_ARG = set("bcDEeFIiJLlmOopQRSWw")  # ssh options that take a value
args, i = sys.argv[1:], 0
while i < len(args) and args[i].startswith("-") and args[i] != "--":
    i += 2 if len(args[i]) == 2 and args[i][1] in WITH_ARG else 1
if i < len(args) and args[i] == "--":
    i += 1
if i >= len(args) - 1:
    sys.exit("hpccomm agent: usage: agent [ssh options] HOST COMMAND...")
host = args[i].rsplit("@", 1)[-1]
if host not in HOSTS:
    sys.exit(f"hpccomm agent: {{host!r}} is not a host of this virtual cluster")
ns, name = HOSTS[host]
# ssh semantics: the remote words are joined and run by the remote shell
os.execv(IP, [IP, "netns", "exec", ns, "unshare", "--uts", "--", "sh", "-c",
              'hostname "$0" && exec sh -c "$1"', name, " ".join(args[i + 1:])])
"""


# -- the cluster ------------------------------------------------------------------------------


class VirtualCluster:
    """`with VirtualCluster(3) as vc:` builds hosts h0..h2; see the module docstring."""

    def __init__(
        self,
        n_hosts: int,
        prefix: str | None = None,
        subnet: str | None = None,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        mtu: int = 1500,
    ) -> None:
        if not 1 <= n_hosts <= 250:
            raise ValueError(f"n_hosts must be 1..250, not {n_hosts}")
        # owner PID in the name: on a shared machine it tells whose namespaces these are
        self.prefix = prefix or session_prefix()
        if not self.prefix.replace("-", "").isalnum() or len(self.prefix) > 32:
            raise ValueError(f"prefix {self.prefix!r}: letters, digits and '-' only, <= 32")
        if subnet is None:  # private, and random per session so two sessions never meet
            subnet = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(256)}.0/24"
        net = ipaddress.ip_network(subnet)
        if not net.is_private or net.num_addresses < n_hosts + 2:
            raise ValueError(f"subnet {subnet}: must be private and hold {n_hosts} hosts")
        self.subnet = net
        self.n_hosts = n_hosts
        self.mtu = mtu
        self.state_dir = Path(state_dir) if state_dir is not None else default_state_dir()
        self.switch_netns = f"{self.prefix}-sw"
        addrs = list(net.hosts())
        self.hosts: list[VirtualHost] = [
            VirtualHost(f"h{i}", str(addrs[i]), f"{self.prefix}-h{i}", i) for i in range(n_hosts)
        ]
        self.manifest_path = self.state_dir / f"{self.prefix}.json"
        self.workdir = self.state_dir / self.prefix
        self.agent_path = str(self.workdir / "agent")
        self.setup_seconds = 0.0
        self._manifest: dict[str, Any] = {}
        self._started = False
        self._torn = False
        self._prev_handlers: dict[int, Any] = {}
        self._ip = shutil.which("ip") or "ip"
        self._rates: dict[str, float] = {}  # host name -> bit/s its link is shaped to

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> VirtualCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def start(self) -> None:
        reason = unavailable_reason()
        if reason:
            raise ClusterUnavailable(reason)
        t0 = time.monotonic()
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._started = True
        atexit.register(self.teardown)
        self._install_handlers()
        namespaces = [self.switch_netns] + [h.netns for h in self.hosts]
        self._manifest = {
            "kind": "pytest-hpccomm-virtual-cluster",
            "version": MANIFEST_VERSION,
            "prefix": self.prefix,
            "owner": list(self._owner()),
            "created": time.time(),
            "subnet": str(self.subnet),
            "netns": namespaces,
            "links": [[h.netns, IFACE] for h in self.hosts],
            "bridge": [self.switch_netns, BRIDGE],
            "created_netns_etc": not NETNS_ETC.exists(),
            "workdir": str(self.workdir),
            "pids": [],
        }
        write_manifest(self.manifest_path, self._manifest)  # intent first, then create
        try:
            self._build()
        except ClusterError as e:
            self.teardown()
            if "Operation not permitted" in str(e):
                raise ClusterUnavailable(f"cannot create network namespaces here: {e}") from e
            raise
        except BaseException:
            self.teardown()
            raise
        self.setup_seconds = time.monotonic() - t0

    def _owner(self) -> tuple[int, int]:
        p = proctree.proc_of(os.getpid())
        assert p is not None
        return p.pid, p.start

    def _build(self) -> None:
        ip = self._ip
        # root-namespace ip only adds namespaces and creates veths INSIDE them
        lines = [f"netns add {ns}" for ns in self._manifest["netns"]]
        lines += [
            f"link add {IFACE} netns {h.netns} mtu {self.mtu} type veth "
            f"peer name {h.port} netns {self.switch_netns} mtu {self.mtu}"
            for h in self.hosts
        ]
        run_command([ip, "-batch", "-"], input="\n".join(lines) + "\n")
        sw = [f"link add {BRIDGE} type bridge", f"link set {BRIDGE} up", "link set lo up"]
        sw += [f"link set {h.port} master {BRIDGE} up" for h in self.hosts]
        run_command([ip, "-n", self.switch_netns, "-batch", "-"], input="\n".join(sw) + "\n")
        table = "127.0.0.1 localhost\n" + "".join(f"{h.address} {h.name}\n" for h in self.hosts)
        for h in self.hosts:
            cmds = [
                f"addr add {h.address}/{self.subnet.prefixlen} dev {IFACE}",
                f"link set {IFACE} up",
                "link set lo up",
            ]
            run_command([ip, "-n", h.netns, "-batch", "-"], input="\n".join(cmds) + "\n")
            etc = NETNS_ETC / h.netns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text(table)
        self._wait_until_up()
        self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        mapping = {h.name: [h.netns, h.name] for h in self.hosts}
        mapping.update({h.address: [h.netns, h.name] for h in self.hosts})
        agent = Path(self.agent_path)
        agent.write_text(_AGENT.format(python=sys.executable, hosts=repr(mapping), ip=repr(ip)))
        agent.chmod(0o755)

    def _wait_until_up(self, hosts: Sequence[VirtualHost] | None = None) -> None:
        """Return once each host's fab0 reads operstate "up" in its own sysfs. The kernel's
        link watch sets it up to ~1 s after `link set up` (carrier and traffic are there
        before); a session that starts inside a host meanwhile sees no Ethernet interface up
        but lo, and puts hosts-placed ranks on lo, where each waits for its peer forever, and
        MPICH's MPI_Init over libfabric's tcp fails ("ep_enable failed ... Bad file
        descriptor": no RUNNING interface for FI_TCP_IFACE)."""
        state = f"/sys/class/net/{IFACE}/operstate"
        # asking for the link over netlink first settles it at once on the kernels seen
        # (6.18: ~1 s less per build); the poll is what guarantees it
        show = f"{self._ip} link show dev {IFACE} >/dev/null"
        wait = f'{show}; until [ "$(cat {state})" = up ]; do sleep 0.01; done'
        for h in self.hosts if hosts is None else hosts:
            argv = [self._ip, "netns", "exec", h.netns, "timeout", f"{UP_TIMEOUT:g}", "sh", "-c"]
            try:
                run_command([*argv, wait])
            except ClusterError:
                now = run_command([self._ip, "netns", "exec", h.netns, "cat", state], check=False)
                raise ClusterError(
                    f"{h.name}: {IFACE} not up {UP_TIMEOUT:g} s after `link set up` "
                    f"(operstate {now.strip() or '?'})"
                ) from None

    def teardown(self) -> None:
        """Idempotent; safe from a signal handler and at exit."""
        if not self._started or self._torn:
            return
        self._torn = True
        self._restore_handlers()
        atexit.unregister(self.teardown)
        problems = teardown_manifest(self._manifest)
        if problems:  # keep the manifest: cleanup_leftovers() retries later
            print(
                f"pytest-hpccomm: teardown of {self.prefix}: {'; '.join(problems)}", file=sys.stderr
            )
        else:
            self.manifest_path.unlink(missing_ok=True)

    def _install_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            prev = signal.getsignal(sig)
            if prev == signal.SIG_IGN:
                # ignored (a background job of a non-interactive shell ignores SIGINT): the
                # signal ends nothing, so it must not tear the cluster down under a live owner
                continue
            self._prev_handlers[sig] = prev

            def handler(signum: int, frame: FrameType | None, prev: Any = prev) -> None:
                self.teardown()
                if callable(prev):
                    prev(signum, frame)
                elif prev in (signal.SIG_DFL, None):
                    signal.signal(signum, signal.SIG_DFL)
                    os.kill(os.getpid(), signum)

            handler.__dict__["hpccomm_cluster"] = self  # ours, so restore only ours
            signal.signal(sig, handler)

    def _restore_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig, prev in self._prev_handlers.items():
            current = signal.getsignal(sig)
            if getattr(current, "hpccomm_cluster", None) is self:
                signal.signal(sig, prev)
        self._prev_handlers.clear()

    # -- running things -------------------------------------------------------------------
    def host(self, which: int | str | VirtualHost) -> VirtualHost:
        if isinstance(which, VirtualHost):
            return which
        if isinstance(which, int):
            return self.hosts[which]
        for h in self.hosts:
            if which in (h.name, h.address, h.netns):
                return h
        raise KeyError(f"no virtual host {which!r} in {self.prefix}")

    def exec_argv(self, host: int | str | VirtualHost, argv: Sequence[str]) -> list[str]:
        """argv to run `argv` on host: its namespace, its own UTS namespace and hostname."""
        h = self.host(host)
        return [
            self._ip,
            "netns",
            "exec",
            h.netns,
            "unshare",
            "--uts",
            "--",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            h.name,
            *argv,
        ]

    def pids(self) -> list[int]:
        """Every process in this cluster's namespaces (a netns_pids_hook for jobs)."""
        return pids_in_netns(self._manifest.get("netns", []))

    def register_pid(self, pid: int) -> None:
        """Record a PID in the manifest so teardown (or a later cleanup) ends it."""
        p = proctree.proc_of(pid)
        if p is not None and self._manifest:
            self._manifest["pids"].append([p.pid, p.start])
            write_manifest(self.manifest_path, self._manifest)

    def start_job(
        self,
        host: int | str | VirtualHost,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        grace: float = 2.0,
    ) -> RunningJob:
        return start_job(
            self.exec_argv(host, argv),
            env,
            timeout=timeout,
            grace=grace,
            netns_pids_hook=self.pids,
            on_start=self.register_pid,
        )

    def run_job(
        self,
        host: int | str | VirtualHost,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        timeout: float,
        grace: float = 2.0,
    ) -> JobResult:
        job = self.start_job(host, argv, env, timeout=timeout, grace=grace)
        try:
            return job.wait()
        finally:
            job.stop()

    # -- the fabric: shaping, loss, cuts, counters -----------------------------------------
    def _both_ends(self, h: VirtualHost) -> list[tuple[str, str]]:
        return [(h.netns, IFACE), (self.switch_netns, h.port)]

    def shape(self, host: int | str | VirtualHost, rate_bit_s: float | None) -> None:
        """Limit the host's link to rate_bit_s in both directions (tbf at both veth ends:
        egress of fab0 and of its switch port); None removes the limit."""
        h = self.host(host)
        self._rates.pop(h.name, None)  # unknown while it changes (a failed tc leaves it so)
        for ns, dev in self._both_ends(h):
            if rate_bit_s is None:
                run_command(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)
                continue
            # burst: 1 ms of traffic (kernel timers are fine-grained), at least a 64 KB GSO
            # packet, so one burst never stalls a segment; limit queues ~20 ms
            burst = max(int(rate_bit_s / 8 * 0.001), 65536 + 1514)
            run_command(
                [
                    "tc",
                    "-n",
                    ns,
                    "qdisc",
                    "replace",
                    "dev",
                    dev,
                    "root",
                    "tbf",
                    "rate",
                    f"{int(rate_bit_s)}bit",
                    "burst",
                    str(burst),
                    "latency",
                    "20ms",
                ]
            )
        if rate_bit_s is not None:
            self._rates[h.name] = float(int(rate_bit_s))

    def shaped(self) -> dict[str, float]:
        """Host name -> the bit/s its link is shaped to, for the hosts shape() limited."""
        return dict(self._rates)

    def link_rate(self, hosts: Sequence[int | str | VirtualHost]) -> LinkRate | None:
        """The rate of the links a measurement between `hosts` crossed, as shaped: every
        byte between two hosts passes both their links (fab0 egress, then the far switch
        port's), so the slowest shaped one of a pair bounds it. Known when at most one of the
        hosts is unshaped (then every pair has a shaped end); None otherwise (a veth's own
        speed is no rate), and for one host: its traffic to itself never leaves it."""
        names = list(dict.fromkeys(self.host(h).name for h in hosts))
        shaped = {n: self._rates[n] for n in names if n in self._rates}
        if len(names) < 2 or not shaped or len(names) - len(shaped) > 1:
            return None
        slowest = min(shaped.values())
        on = ",".join(n for n in names if shaped.get(n) == slowest)
        return LinkRate(
            slowest / 1e9, f"tbf {IFACE} on {on}: {format_bit_rate(slowest)}", shaped=True
        )

    def loss(self, host: int | str | VirtualHost, percent: float) -> None:
        """Drop percent % of the packets the host sends or receives on its fabric link (nft
        in the host's namespace: there is no netem in this kernel); 0 removes the rule."""
        if not 0 <= percent <= 100:
            raise ValueError(f"loss percent must be 0..100, not {percent}")
        h = self.host(host)
        if shutil.which("nft") is None:
            raise ClusterUnavailable("packet loss needs nftables (apt-get install nftables)")
        ns_nft = [self._ip, "netns", "exec", h.netns, "nft"]
        run_command(ns_nft + ["delete", "table", "inet", "hpccomm_loss"], check=False)
        if percent == 0:
            return
        if percent >= 100:
            verdict = "drop"
        else:  # numgen draws 0..9999 per packet: loss in 0.01 % steps
            verdict = f"numgen random mod 10000 < {int(round(percent * 100))} drop"
        rules = (
            "table inet hpccomm_loss {\n"
            f' chain in {{ type filter hook input priority 0; iifname "{IFACE}" {verdict}; }}\n'
            f' chain out {{ type filter hook output priority 0; oifname "{IFACE}" {verdict}; }}\n'
            "}\n"
        )
        run_command(ns_nft + ["-f", "-"], input=rules)

    def cut(self, host: int | str | VirtualHost) -> None:
        """Unplug the host: its fab0 goes down (and the peer's carrier with it)."""
        run_command([self._ip, "-n", self.host(host).netns, "link", "set", IFACE, "down"])

    def restore(self, host: int | str | VirtualHost) -> None:
        """Plug the host back in; returns once its fab0 is RUNNING again (_wait_until_up)."""
        h = self.host(host)
        run_command([self._ip, "-n", h.netns, "link", "set", IFACE, "up"])
        self._wait_until_up([h])

    def counters(self, host: int | str | VirtualHost) -> tuple[int, int]:
        """(rx_bytes, tx_bytes) of the host's fab0 since creation."""
        h = self.host(host)
        out = run_command([self._ip, "-n", h.netns, "-s", "-j", "link", "show", "dev", IFACE])
        stats = json.loads(out)[0]["stats64"]
        return int(stats["rx"]["bytes"]), int(stats["tx"]["bytes"])

    def all_counters(self) -> dict[str, tuple[int, int]]:
        return {h.name: self.counters(h) for h in self.hosts}
