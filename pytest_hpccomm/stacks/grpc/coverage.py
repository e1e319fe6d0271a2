"""gRPC as the conformance suite covers it: the interop test cases of gRPC's specification
(grpc/grpc doc/interop-test-descriptions.md) x the server peers that answer them.

A case that needs Google credentials, an xDS control plane or a load-balancing policy is not
applicable to a peer-to-peer transport; every other case is covered by a test's
`covers("grpc", ...)` marker, out of scope with a reason, or a gap (docs/reference/coverage.md).
"""

from __future__ import annotations

from pytest_hpccomm.coverage import Taxonomy, by_row

CASES = {
    "empty_unary": "a unary call with an empty request and response",
    "large_unary": "a unary call with a large request and response (ours: up to 6 MiB)",
    "client_compressed_unary": "the client compresses a unary request",
    "server_compressed_unary": "the server compresses a unary response",
    "client_streaming": "a client-streaming call: many requests, one response",
    "client_compressed_streaming": "a client-streaming call whose requests are compressed",
    "server_streaming": "a server-streaming call: one request, many responses",
    "server_compressed_streaming": "a server-streaming call whose responses are compressed",
    "ping_pong": "a bidirectional stream, one response per request, in order",
    "empty_stream": "a bidirectional stream closed without a message",
    "custom_metadata_initial": "request metadata echoed as the response's initial metadata",
    "custom_metadata_trailing": "request metadata (text and -bin) echoed as trailing metadata",
    "status_code_and_message": "a status code and message the server sets reach the client",
    "special_status_message": "a status message with non-ASCII and whitespace arrives intact",
    "unimplemented_method": "a method the service lacks ends UNIMPLEMENTED",
    "unimplemented_service": "a service the server lacks ends UNIMPLEMENTED",
    "cancel_after_begin": "a call cancelled before its response ends CANCELLED",
    "cancel_after_first_response": "a stream cancelled after its first response ends CANCELLED",
    "timeout_on_sleeping_server": "a deadline shorter than the server's work: DEADLINE_EXCEEDED",
    "use_tls": "the channel over TLS (the interop client's --use_tls)",
    "max_message_size": "the receive limit, at the boundary (not an interop case: a transport's)",
    "unavailable": "no listener: UNAVAILABLE (not an interop case: a transport's)",
    "rpc_soak": "many sequential calls on one channel, each within a latency bound",
    "channel_soak": "many calls, each on a new channel, each within a latency bound",
    "compute_engine_creds": "GCE credentials",
    "jwt_token_creds": "JWT credentials",
    "oauth2_auth_token": "an OAuth2 access token",
    "per_rpc_creds": "per-call credentials",
    "google_default_credentials": "Google default credentials",
    "compute_engine_channel_credentials": "GCE channel credentials",
    "orca_per_rpc": "ORCA load reports per call",
    "orca_oob": "ORCA out-of-band load reports",
    "pick_first_unary": "the pick_first load-balancing policy",
}
PEERS = {
    "python": "grpcio's synchronous server",
    "python-aio": "grpcio's asyncio server",
    "native": "the C++ server (stock gRPC or an RDMA runtime)",
}
GOOGLE = (
    "compute_engine_creds",
    "jwt_token_creds",
    "oauth2_auth_token",
    "per_rpc_creds",
    "google_default_credentials",
    "compute_engine_channel_credentials",
)
XDS = ("orca_per_rpc", "orca_oob", "pick_first_unary")


# case -> why it does not apply to a transport between two peers
NOT_APPLICABLE = {
    case: "needs Google's credentials and services, not a transport between two peers"
    for case in GOOGLE
} | {case: "needs an xDS control plane or a load-balancing policy across servers" for case in XDS}


TAXONOMY = Taxonomy(
    stack="grpc",
    title="gRPC: the interop test cases x the server peers",
    families=CASES,
    classes=PEERS,
    not_applicable=by_row(NOT_APPLICABLE),
    out_of_scope={
        (case, peer): "a soak is a benchmark's job (the perf suites), not a conformance item"
        for case in ("rpc_soak", "channel_soak")
        for peer in PEERS
    },
    modules=("hpccomm_suites.grpc.test_conformance_grpc",),
    rows="interop cases",
    columns="server peers",
)
