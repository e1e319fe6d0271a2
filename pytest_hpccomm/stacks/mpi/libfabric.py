"""Whether libfabric here can open what an iWARP MPI job needs: an RDM endpoint of
verbs;ofi_rxm (Open MPI's mtl ofi and MPICH's ofi netmod reach an iWARP RNIC only that way).

`fi_info -p 'verbs;ofi_rxm' -t FI_EP_RDM` asks libfabric exactly that, on the devices present
(the verbs provider is listed only once an RDMA device exists: ask after provisioning). Given
no address, libfabric's verbs provider resolves "localhost" (`vrb_get_rdmacm_rai`); where that
name does not resolve (a root filesystem without /etc/hosts) it answers -61 (FI_ENODATA) after
`rdma_getaddrinfo: Resource temporarily unavailable`, on rxe and siw alike, and Open MPI then
says `PML cm cannot be selected`. The reason is passed on as libfabric gives it, with that
cause named when it is the one.
"""

from __future__ import annotations

import functools
import os
import shutil
import socket

from pytest_hpccomm.proc.jobs import run_job

PROVIDER = "verbs;ofi_rxm"


@functools.cache
def verbs_provider_reason() -> str | None:
    """None when libfabric opens a verbs;ofi_rxm RDM endpoint here; else one line why not."""
    fi_info = shutil.which("fi_info")
    if fi_info is None:
        return (
            "fi_info not found (apt-get install libfabric-bin): cannot tell whether "
            f"libfabric has the {PROVIDER} endpoint MPI needs on iWARP"
        )
    got = run_job(
        [fi_info, "-p", PROVIDER, "-t", "FI_EP_RDM"],
        timeout=30,
        env={**os.environ, "FI_LOG_LEVEL": "warn"},
        label="fi_info verbs;ofi_rxm",
    )
    if got.ok and "provider:" in got.stdout:
        return None
    warns = [ln.split("<warn>", 1)[1].strip() for ln in got.stderr.splitlines() if "<warn>" in ln]
    said = warns[0] if warns else (got.stdout.strip() or got.stderr.strip() or got.describe())
    return (
        f"libfabric opens no {PROVIDER} RDM endpoint here (fi_info -p '{PROVIDER}' -t "
        f"FI_EP_RDM: {said.splitlines()[0][:200]}), the only way Open MPI and MPICH reach "
        f"an iWARP device{_unresolved_localhost()}"
    )


def _unresolved_localhost() -> str:
    """Why libfabric's verbs provider fails before it looks at a device, if it is that."""
    try:
        socket.getaddrinfo("localhost", None)
    except OSError as exc:
        return (
            f'; "localhost" does not resolve here ({exc}), and libfabric\'s verbs provider '
            "resolves it when given no address (add it to /etc/hosts)"
        )
    return ""


def has_verbs_provider(fi_info: str) -> bool:
    """Whether this libfabric was built with its verbs provider (`fi_info -l`)."""
    got = run_job([fi_info, "-l"], timeout=30, label="fi_info -l")
    return any(ln.strip().rstrip(":") == "verbs" for ln in got.stdout.splitlines())
