"""The gRPC stack: a tensor-transfer service modelled on TensorFlow's RecvTensor, driven by
TF-gRPC-Bench's benchmarks, with Python (grpcio sync and asyncio) and native C++ peers.

Peer side (run on hosts, no pytest): wire, payload, pyserver, pyclient, peer, native/.
Orchestrator side: build (native peer into a cache), certs, driver, properties, plugin.
"""
