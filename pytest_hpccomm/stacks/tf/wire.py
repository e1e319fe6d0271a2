"""What the TensorFlow peer and the orchestrator share (standard library only)."""

from __future__ import annotations

# the cluster spec, JSON: {"ps": [...], "worker": [...]} (and "chief": [...] when a
# ParameterServerStrategy's coordinator drives the workers)
CLUSTER_VAR = "HPCCOMM_TF_CLUSTER"
TASK_VAR = "HPCCOMM_TF_TASK"  # this process's task: "ps:0", "worker:1"
MODE_VAR = "HPCCOMM_TF_MODE"  # CLIENT, COLLECTIVE or SESSION
# CLIENT: worker:0 is the one eager client of the cluster (parameter-server reads);
# COLLECTIVE: every worker is a client of its own running collective ops (multi-worker training);
# SESSION: every worker a v1 server, a v1 Session on worker:0 runs one graph over all of them
CLIENT, COLLECTIVE, SESSION = "client", "collective", "session"
LEADER = "/job:worker/replica:0/task:0"  # the collective group's leader
GROUP_KEY = 1  # the collective group of all the workers
REDUCE_OPS = ("SUM", "MEAN")
KNOB_VAR = "HPCCOMM_TF_KNOB"  # a name in KNOBS
# the gRPC knobs TensorFlow users tune (ConfigProto.rpc_options of every task's server):
# knob name -> RPCOptions fields; "default" is TensorFlow's own (one channel, no compression)
KNOBS: dict[str, dict[str, str | int]] = {
    "default": {},
    "channels_4": {"num_channels_per_target": 4},
    "gzip": {"compression_algorithm": "gzip", "compression_level": 2},
}
JOBS = ("ps", "worker", "chief")
# what the transfer property draws from: every dtype a tf.Variable / RecvTensor carries as raw
# bytes (bool, the integers, the floats; strings and resources take other paths)
DTYPES = (
    "bool",
    "uint8",
    "int8",
    "uint16",
    "int16",
    "uint32",
    "int32",
    "uint64",
    "int64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)


def parse_task(task: str) -> tuple[str, int]:
    """'worker:1' -> ('worker', 1); ValueError names what is wrong."""
    job, sep, index = task.partition(":")
    if not sep or job not in JOBS or not index.isdigit():
        raise ValueError(f"task {task!r}: expected <job>:<index> with job one of {JOBS}")
    return job, int(index)
