"""MPICH's MPI_Init fails with "OFI call ep_enable failed (default nic=tcp: Bad file
descriptor)" (ch4:ofi over libfabric's tcp provider) when the interface FI_TCP_IFACE names is
not RUNNING at MPI_Init: down, up without carrier, or absent.

Why: the tcp provider lists source addresses with getifaddrs() and keeps only interfaces that
are up and RUNNING. With none left, fi_getinfo still returns its bare entry (fabric and domain
"tcp", no source address) instead of no entry; MPICH takes it, the endpoint's passive socket is
never created and fi_enable() ends in listen(-1): EBADF, which names neither the interface nor
the cause. A fresh veth reads RUNNING only ~0.5-1 s after `ip link set up` (the kernel's link
watch), so a launch inside that window fails now and then: the "flake".

Ranks run in two network namespaces joined by a veth (fab0), placed by mpiexec's ssh launcher
through an agent that enters the namespace. Modes:
  iface    (default) fab0 up and RUNNING; FI_TCP_IFACE names a second link that is up but has
           no carrier: every launch fails on the affected release
  control  the same launch with FI_TCP_IFACE=fab0 once fab0 is RUNNING: every launch starts
  race     launch right after `ip link set up`, without waiting: fails in a share of launches

    python3 mpich_ofi_tcp_ep_enable.py MPICH_BIN/mpiexec [--mode M] [--trials N]   # as root

Exit 1 (with the symptom) when any launch shows it, 0 when none does, 2 on a setup error.
Creates namespaces epxr<pid>a/b (and /etc/netns/<ns>/) and removes them, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# 4.2 and later: "OFI call ep_enable failed (default nic=tcp: Bad file descriptor)";
# 3.4-4.1: "OFI EP enable failed (ofi_init.c:998:create_vni_context:Bad file descriptor)"
SYMPTOM = re.compile(r"(ep_enable|EP enable) failed \(.*Bad file descriptor\)", re.IGNORECASE)
ADDR = ("10.77.201.1", "10.77.201.2")
AGENT = r"""#!{python} -S
import os, sys
NS = {ns!r}
WITH_ARG = set("bcDEeFIiJLlmOopQRSWw")
args, i = sys.argv[1:], 0
while i < len(args) and args[i].startswith("-") and args[i] != "--":
    i += 2 if len(args[i]) == 2 and args[i][1] in WITH_ARG else 1
if i < len(args) and args[i] == "--":
    i += 1
host = args[i].rsplit("@", 1)[-1]
os.execv({ip!r}, ["ip", "netns", "exec", NS[host], "sh", "-c", " ".join(args[i + 1:])])
"""


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=check)


class Pair:
    def __init__(self, ip: str, mode: str) -> None:
        self.ip, self.mode = ip, mode
        self.ns = (f"epxr{os.getpid()}a", f"epxr{os.getpid()}b")

    def build(self) -> None:
        a, b = self.ns
        sh(self.ip, "netns", "add", a)
        sh(self.ip, "netns", "add", b)
        for ns in self.ns:
            os.makedirs(f"/etc/netns/{ns}", exist_ok=True)
            with open(f"/etc/netns/{ns}/hosts", "w") as f:
                f.write(f"127.0.0.1 localhost\n{ADDR[0]} epxh0\n{ADDR[1]} epxh1\n")
        cmds = [f"link add fab0 netns {a} type veth peer name fab0 netns {b}"]
        if self.mode == "iface":  # a second link per namespace: UP, but its peer stays down
            cmds += [
                f"link add epxnc netns {ns} type veth peer name epxnp netns {ns}" for ns in self.ns
            ]
        subprocess.run(
            [self.ip, "-batch", "-"],
            input="\n".join(cmds) + "\n",
            text=True,
            timeout=30,
            check=True,
            capture_output=True,
        )
        for ns, addr in zip(self.ns, ADDR):
            batch = [f"addr add {addr}/24 dev fab0", "link set lo up", "link set fab0 up"]
            if self.mode == "iface":
                batch.append("link set epxnc up")
            subprocess.run(
                [self.ip, "-n", ns, "-batch", "-"],
                input="\n".join(batch) + "\n",
                text=True,
                timeout=30,
                check=True,
                capture_output=True,
            )
        if self.mode in ("control", "iface"):
            self.wait_up()

    def wait_up(self, limit: float = 5.0) -> None:
        for ns in self.ns:
            deadline = time.monotonic() + limit
            while (
                sh(
                    self.ip, "netns", "exec", ns, "cat", "/sys/class/net/fab0/operstate"
                ).stdout.strip()
                != "up"
            ):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{ns}: fab0 not up after {limit} s")
                time.sleep(0.01)

    def pids(self) -> list[int]:
        out = []
        for ns in self.ns:
            r = sh(self.ip, "netns", "pids", ns, check=False)
            out += [int(p) for p in r.stdout.split()]
        return out

    def teardown(self) -> None:
        for _ in range(20):  # only processes inside our own namespaces
            pids = self.pids()
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)
        for ns in self.ns:
            sh(self.ip, "netns", "del", ns, check=False)
            shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)


def launch(mpiexec: str, python: str, agent: str, pair: Pair, timeout: float) -> tuple[str, str]:
    """One launch; returns (outcome, stderr). outcome: ok | symptom | other."""
    bindir = os.path.dirname(mpiexec)
    iface = "epxnc" if pair.mode == "iface" else "fab0"
    env = dict(
        os.environ,
        PATH=bindir + os.pathsep + os.environ.get("PATH", os.defpath),
        FI_PROVIDER="tcp",
        FI_TCP_IFACE=iface,
        MPIR_CVAR_NOLOCAL="1",
        MPIR_CVAR_CH4_NETMOD="ofi",
    )
    argv = [
        pair.ip,
        "netns",
        "exec",
        pair.ns[0],
        mpiexec,
        "-hosts",
        f"{ADDR[0]}:1,{ADDR[1]}:1",
        "-n",
        "2",
        "-ppn",
        "1",
        "-bind-to",
        "none",
        "-launcher",
        "ssh",
        "-launcher-exec",
        agent,
        "-iface",
        "fab0",
        "-genvlist",
        "FI_PROVIDER,FI_TCP_IFACE,MPIR_CVAR_NOLOCAL,MPIR_CVAR_CH4_NETMOD,PATH",
        python,
        "-c",
        "from mpi4py import MPI; MPI.COMM_WORLD.Barrier()",
    ]
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        shown = False
        while proc.poll() is None and time.monotonic() < deadline:
            err.seek(0)
            if SYMPTOM.search(err.read()):  # mpiexec often hangs after it: end the launch now
                shown = True
                break
            time.sleep(0.05)
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
        err.seek(0)
        text = err.read()
    if shown or SYMPTOM.search(text):
        return "symptom", text
    return ("ok" if proc.returncode == 0 else f"other (rc {proc.returncode})"), text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mpiexec")
    ap.add_argument("--python", help="python with mpi4py (default: next to mpiexec)")
    ap.add_argument("--mode", choices=("iface", "control", "race"), default="iface")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=30.0)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    mpiexec = os.path.abspath(args.mpiexec)
    python = args.python or os.path.join(os.path.dirname(mpiexec), "python")
    ip = shutil.which("ip") or "/usr/sbin/ip"
    workdir = tempfile.mkdtemp(prefix="epx-replay-")
    agent = os.path.join(workdir, "agent")
    pair = Pair(ip, args.mode)
    with open(agent, "w") as f:
        f.write(
            AGENT.format(
                python=sys.executable, ip=ip, ns={ADDR[0]: pair.ns[0], ADDR[1]: pair.ns[1]}
            )
        )
    os.chmod(agent, 0o755)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(2))
    counts: dict[str, int] = {}
    first = ""
    t0 = time.monotonic()
    try:
        for i in range(args.trials):
            pair.build()
            try:
                outcome, text = launch(mpiexec, python, agent, pair, args.timeout)
            finally:
                pair.teardown()
            counts[outcome] = counts.get(outcome, 0) + 1
            if outcome == "symptom" and not first:
                first = next((ln for ln in text.splitlines() if SYMPTOM.search(ln)), "")
            if outcome.startswith("other"):
                print(f"launch {i}: {outcome}: {text.strip()[-300:]}", file=sys.stderr)
    finally:
        pair.teardown()
        shutil.rmtree(workdir, ignore_errors=True)
    n = sum(counts.values())
    shown = counts.get("symptom", 0)
    print(
        f"mode {args.mode}: {shown}/{n} launches showed the ep_enable EBADF "
        f"({', '.join(f'{k} {v}' for k, v in sorted(counts.items()))}; "
        f"{time.monotonic() - t0:.1f} s)"
    )
    if shown:
        print(f"symptom: {first.strip()}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
