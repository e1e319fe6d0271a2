"""TensorFlow (eager, connected to a cluster): the first read of a variable just created on
another task returns an empty tensor (shape [0]) instead of the variable's value, no error
raised. Standalone: TensorFlow and numpy only.

Why: `tf.Variable(init)` placed on the ps task runs two remote ops over the worker's
StreamingEnqueue stream: VarHandleOp (it has an output, so the worker waits for it) and
AssignVariableOp (no output: the worker's executor issues it as an async node and goes on,
even in sync mode). VarHandleOp of an eager variable already creates the Var, holding
`Tensor(dtype)`: 1-D with 0 elements. A tf.function reading the variable runs its ps part
through another RPC, RunComponentFunction, which nothing orders after the stream; when it
reaches the ps first, ReadVariableOp (it does not check `is_initialized`) returns the empty
tensor.

The window is made wide: the initial value is made on the worker, so the AssignVariableOp
request carries SIZE bytes (16 MiB), and the read is a tf.function traced once (the variable
its argument), so no tracing delays the read. Seen with tensorflow-cpu 2.21.0: 19 of 20 first
reads wrong (the first try's tracing hides it), 100 of 100 in 100 tries.

    python tf_remote_variable_first_read_empty.py [TRIES] [--wait]   # exit 1: a wrong read

--wait calls context.async_wait() after creating each variable (the workaround): then no
first read is wrong. Exit 0 when no first read was wrong, 2 when time ran out.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np

SIZE = 16 * 1024 * 1024  # bytes of the uint8 variable, all 7
DEADLINE = 240.0  # seconds for the whole run; a hang ends it with exit 2

THERE, HERE = "/job:ps/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:0"
PS = (
    "import json, sys, tensorflow as tf\n"
    "tf.distribute.Server(tf.train.ClusterSpec(json.loads(sys.argv[1])), job_name='ps',"
    " task_index=0, protocol='grpc').join()\n"
)


def held_ports(count):
    """`count` distinct free ports, each held by a bound SO_REUSEADDR socket until exit."""
    socks = []
    for _ in range(count):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    return [s.getsockname()[1] for s in socks], socks


def main(tries, wait):
    start = time.monotonic()
    (ps_port, worker_port), held = held_ports(2)
    cluster = {"ps": [f"127.0.0.1:{ps_port}"], "worker": [f"127.0.0.1:{worker_port}"]}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    ps = subprocess.Popen(
        [sys.executable, "-c", PS, json.dumps(cluster)], env=env, stderr=subprocess.DEVNULL
    )

    def out_of_time():
        print(f"no result within {DEADLINE:.0f} s", flush=True)
        ps.kill()
        os._exit(2)

    watchdog = threading.Timer(DEADLINE, out_of_time)
    watchdog.daemon = True
    watchdog.start()
    try:
        import tensorflow as tf
        from tensorflow.python.eager import context

        tf.config.experimental_connect_to_cluster(  # waits for the ps task to answer
            tf.train.ClusterSpec(cluster), job_name="worker", task_index=0, protocol="grpc"
        )

        @tf.function
        def read(var):  # traced once: a variable argument of the same dtype and shape
            with tf.device(HERE):
                return tf.identity(var.read_value())

        wrong = 0
        for i in range(tries):
            with tf.device(HERE):
                init = tf.fill([SIZE], tf.constant(7, tf.uint8))
            with tf.device(THERE):
                var = tf.Variable(init)
            if wait:
                context.async_wait()  # waits for the pending AssignVariableOp
            got = read(var).numpy()
            if got.shape != (SIZE,) or not np.all(got == 7):
                wrong += 1
                again = read(var).numpy()
                if wrong <= 3:
                    print(
                        f"try {i}: read {got.dtype}{list(got.shape)} instead of uint8[{SIZE}]"
                        f" of 7s; read again: {again.dtype}{list(again.shape)}"
                        f" {'all 7' if again.size == SIZE and np.all(again == 7) else 'wrong'}",
                        flush=True,
                    )
        print(
            f"tensorflow {tf.__version__}: {wrong} of {tries} first reads wrong"
            f"{' (with async_wait)' if wait else ''}; {time.monotonic() - start:.1f} s",
            flush=True,
        )
        return 1 if wrong else 0
    finally:
        watchdog.cancel()
        ps.kill()
        ps.wait()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--wait"]
    sys.exit(main(int(args[0]) if args else 20, "--wait" in sys.argv[1:]))
