"""Cross-check: libfabric opens an RDM endpoint of `verbs;ofi_rxm` where the suite runs.

Open MPI's mtl ofi and MPICH's ofi netmod reach an RDMA device through libfabric's verbs
provider under ofi_rxm (on iWARP it is their only way). A device the suite's own verbs work on
but libfabric cannot open is a fault that an MPI job would meet: `fi_info -p 'verbs;ofi_rxm'
-t FI_EP_RDM` asks libfabric exactly that, after the suite provisioned the device. A libfabric
built without its verbs provider skips, saying so.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_hpccomm.stacks.mpi.libfabric import (
    PROVIDER,
    has_verbs_provider,
    verbs_provider_reason,
)
from pytest_hpccomm.stacks.verbs.driver import VerbsPair

pytestmark = [pytest.mark.conformance, pytest.mark.stack("verbs")]


@pytest.mark.covers("verbs")  # no case of rdma-core's tests in whole
def test_libfabric_opens_a_verbs_rdm_endpoint(
    verbs_pair: VerbsPair, verbs_fi_info: str, record_property: Any
) -> None:
    if not has_verbs_provider(verbs_fi_info):
        pytest.skip(f"this libfabric has no verbs provider ({verbs_fi_info} -l)")
    verbs_provider_reason.cache_clear()  # the device was provisioned after any earlier ask
    reason = verbs_provider_reason()
    record_property("libfabric", reason or f"{PROVIDER} RDM endpoint opened")
    assert reason is None, f"{verbs_pair.selection.device}: {reason}"
