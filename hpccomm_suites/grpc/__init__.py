"""gRPC as distributed TensorFlow uses it: conformance properties and TF-gRPC-Bench perf points
(docs/stacks/grpc.md)."""
