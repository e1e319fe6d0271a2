"""TensorFlow (two worker tasks, collective ops over its gRPC): the task whose all-gather timed
out during execution sometimes dies of SIGSEGV a moment later. Standalone: TensorFlow and
numpy only.

Per try, two fresh worker processes on loopback: an all-gather of both (float32[4], group 20,
instance 30), then worker:0 runs it again alone with timeout 1.5 s (DeadlineExceeded "timed
out during execution", as it should) and waits 3 s; worker:1 runs it once more after 1.6 s
with no timeout (the late member of upstream's TimeoutTest.testExecutionAfterTimeout). Seen
with tensorflow-cpu 2.21.0, Python 3.11, 2 cores: worker:0 killed by SIGSEGV in about one try
in 10 (6 of 60 for v1), v2 seen in the suite; never with all-reduces.

Cause (the native stack of every crash looked at): a use-after-free of the timed-out op's
CancellationManager. The all-gather's pending RecvBuf RPC is a CancellableCall registered with
that manager; on the timeout the op is completed at once and the manager freed when the eager
call returns; the cancelled RPC's completion then runs on the gRPC worker-cache thread and
calls CancellationManager::DeregisterCallback on the freed block. It faults only when the
block was reused in a particular way (glibc's tcache), hence "sometimes".

    python tf_all_gather_timeout_crash.py [TRIES] [1|2]   # exit 1 when a worker crashed
"""

import json
import socket
import subprocess
import sys

WORKER = r"""
import json, os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
from tensorflow.core.protobuf import tensorflow_server_pb2
from tensorflow.python.eager import context
from tensorflow.python.ops import collective_ops as co

cluster, index, version = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
ctx = context.context()
ctx.configure_collective_ops(collective_leader="/job:worker/replica:0/task:0")
ctx.enable_collective_ops(tensorflow_server_pb2.ServerDef(
    cluster=tf.train.ClusterSpec(cluster).as_cluster_def(),
    default_session_config=ctx.config, job_name="worker", task_index=index, protocol="grpc"))
gather = co.all_gather if version == 1 else co.all_gather_v2
with tf.device(f"/job:worker/replica:0/task:{index}/device:CPU:0"):
    x = tf.constant([1.0, 2.0, 3.0, 4.0])
    gather(x, 2, 20, 30, timeout=60.0)  # both: the group and the instance are resolved
    if index == 0:
        try:
            gather(x, 2, 20, 30, timeout=1.5)
        except tf.errors.DeadlineExceededError:
            pass
        time.sleep(3.0)
    else:
        time.sleep(1.6)
        try:
            gather(x, 2, 20, 30)  # late, no timeout: fails at once
        except tf.errors.OpError as e:
            print(type(e).__name__, str(e).splitlines()[0][:200], file=sys.stderr)
        time.sleep(1.0)
os._exit(0)
"""


def held_ports(count):
    """`count` distinct free ports, each held by a bound SO_REUSEADDR socket (close them when
    the tasks end): a port probed free and let go can be handed out again before a task binds
    it, and gRPC, which sets SO_REUSEADDR, binds a held port."""
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    return [s.getsockname()[1] for s in socks], socks


def one_try(version):
    """The two workers' exit codes."""
    ports, held = held_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, json.dumps(cluster), str(i), str(version)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    codes = []
    for p in procs:
        try:
            p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        codes.append(p.returncode)
    for s in held:
        s.close()
    late = procs[1].stderr.read().strip() if procs[1].stderr else ""
    return codes, late


def main(tries, version):
    crashed = 0
    for i in range(tries):
        codes, late = one_try(version)
        if -11 in codes:
            crashed += 1
        print(f"try {i + 1}: exit codes {codes}; the late worker: {late[-160:]}", flush=True)
    print(f"{crashed} of {tries} tries had a worker killed by SIGSEGV (all_gather v{version})")
    return 1 if crashed else 0


if __name__ == "__main__":
    tries = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    version = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    sys.exit(main(tries, version))
