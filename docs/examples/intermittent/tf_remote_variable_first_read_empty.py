"""TensorFlow (eager, connected to a cluster): the first read of a variable just created on
another task sometimes returns an empty tensor (shape [0]) instead of the variable's value, no
error raised. Standalone: TensorFlow and numpy only.

A ps task (tf.distribute.Server) and this process as the worker; per try: a uint8 variable of
SIZE bytes (64 B, 64 KiB, 1 MiB in turn), all 7, created on the ps task, then read here through
a tf.function (a Send/Recv pair: the RecvTensor RPC): the first read checked, then READS more
(as a benchmark of RecvTensor reads them). Seen with tensorflow-cpu 2.20.0 and 2.21.0, Python 3.11, 2 cores
shared with other work: about one try in 10^3 (more often under load).

    python first_read_empty.py [TRIES]     # exit 1 when a first read was wrong
"""

import json
import os
import socket
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np

SIZES = (64, 65536, 1048576)  # each try the next; READS more reads of each variable after
READS = 20

THERE, HERE = "/job:ps/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:0"
PS = (
    "import json, sys, tensorflow as tf\n"
    "tf.distribute.Server(tf.train.ClusterSpec(json.loads(sys.argv[1])), job_name='ps',"
    " task_index=0, protocol='grpc').join()\n"
)


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


def main(tries):
    (ps_port, worker_port), held = held_ports(2)  # held until this process ends
    cluster = {"ps": [f"127.0.0.1:{ps_port}"], "worker": [f"127.0.0.1:{worker_port}"]}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    ps = subprocess.Popen(
        [sys.executable, "-c", PS, json.dumps(cluster)], env=env, stderr=subprocess.DEVNULL
    )
    try:
        import tensorflow as tf

        tf.config.experimental_connect_to_cluster(  # waits for the ps task to answer
            tf.train.ClusterSpec(cluster), job_name="worker", task_index=0, protocol="grpc"
        )
        wrong = 0
        for i in range(tries):
            size = SIZES[i % len(SIZES)]
            with tf.device(THERE):
                var = tf.Variable(tf.fill([size], tf.constant(7, tf.uint8)))

            @tf.function
            def read():
                with tf.device(HERE):
                    return tf.identity(var.read_value())  # noqa: B023 (traced here)

            got = read().numpy()
            if got.shape != (size,) or not np.all(got == 7):
                wrong += 1
                again = read().numpy()
                print(
                    f"try {i}: read {got.dtype}{list(got.shape)} instead of uint8[{size}] of 7s;"
                    f" read again: {again.dtype}{list(again.shape)}"
                    f" {'all 7' if again.size == size and np.all(again == 7) else 'wrong'}",
                    flush=True,
                )
            for _ in range(READS):
                read()
        print(f"tensorflow {tf.__version__}: {wrong} of {tries} first reads wrong", flush=True)
        return 1 if wrong else 0
    finally:
        ps.kill()
        ps.wait()


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000))
