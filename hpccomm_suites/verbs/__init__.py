"""RDMA verbs (pyverbs peers): conformance properties and perftest-style perf points
(docs/stacks/verbs.md)."""
