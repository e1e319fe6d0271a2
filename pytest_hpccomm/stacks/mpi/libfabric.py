"""Whether libfabric here has the provider an iWARP job needs (verbs, under ofi_rxm).

Open MPI's mtl ofi and MPICH's ofi netmod reach an iWARP RNIC only through libfabric's verbs
provider; a libfabric built without it (Debian 12's libfabric1 1.17 lists no `verbs`) cannot
run MPI on iWARP at all, whatever the device. fi_info -l names the providers it has.
"""

from __future__ import annotations

import functools
import shutil

from pytest_hpccomm.cluster.jobs import run_job


@functools.cache
def verbs_provider_reason() -> str | None:
    """None when libfabric lists a verbs provider; else one line saying what it has."""
    fi_info = shutil.which("fi_info")
    if fi_info is None:
        return ("fi_info not found (apt-get install libfabric-bin): cannot tell whether "
                "libfabric has the verbs provider MPI needs on iWARP")
    got = run_job([fi_info, "-l"], timeout=30, label="fi_info -l")
    providers = sorted({ln.strip().rstrip(":") for ln in got.stdout.splitlines()
                        if ln.strip().endswith(":")})
    if "verbs" in providers:
        return None
    return (f"libfabric here has no verbs provider (fi_info -l: {', '.join(providers) or 'none'}),"
            " the only way Open MPI and MPICH reach an iWARP device")
