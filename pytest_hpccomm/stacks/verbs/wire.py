"""The verbs stack's schema: names both sides use, standard library only (peer rule).

The peer (peer/: __main__, engine, bench) runs where the RDMA device is; the orchestrator
(driver.py, perf.py, plugin.py, the suites) takes every name it shares with it from here.
"""

from __future__ import annotations

HELLO = "hello"  # a peer's first message: pid, host, device info (or why it cannot open it)
READY = "ready"  # event a benchmark's first side sends once its receives are posted
GRH_BYTES = 40  # a UD receive buffer starts with the Global Routing Header
QKEY = 0x11111111

# libibverbs' ibv_wc_status_str(), so failures read as every verbs tool prints them
WC_STATUS = (
    "success",
    "local length error",
    "local QP operation error",
    "local EE context operation error",
    "local protection error",
    "Work Request Flushed Error",
    "memory management operation error",
    "bad response error",
    "local access error",
    "remote invalid request error",
    "remote access error",
    "remote operation error",
    "transport retry counter exceeded",
    "RNR retry counter exceeded",
    "local RDD violation error",
    "remote invalid RD request",
    "aborted error",
    "invalid EE context number",
    "invalid EE context state",
    "fatal error",
    "response timeout error",
    "general error",
    "TM error",
    "TM rendezvous request error",
)


def status_text(status: int) -> str:
    return WC_STATUS[status] if 0 <= status < len(WC_STATUS) else f"status {status}"
