"""The built-in stacks, probed cheaply at session start (third parties use the hook)."""

from pytest_hpccomm.stacks.mpi.probe import MpiProbe
from pytest_hpccomm.stacks.registry import ImportProbe, StackProbe

BUILTIN_STACKS: tuple[StackProbe, ...] = (
    MpiProbe(),
    ImportProbe("grpc", ("grpc",), ("grpcio", "grpcio-tools", "protobuf"), (),
                "pip install 'pytest-hpccomm[grpc]'"),
    ImportProbe("tf", ("tensorflow",), ("tensorflow", "tensorflow-cpu"), (),
                "pip install 'pytest-hpccomm[tf]'"),
    ImportProbe("horovod", ("horovod",), ("horovod", "torch"), (),
                "pip install 'pytest-hpccomm[horovod]'"),
    ImportProbe("verbs", ("pyverbs",), ("pyverbs",), (),
                "apt-get install python3-pyverbs (rdma-core)"),
)
