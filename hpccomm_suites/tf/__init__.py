"""TensorFlow tasks over gRPC: collectives, parameter server, RecvTensor perf points
(docs/stacks/tensorflow.md)."""
