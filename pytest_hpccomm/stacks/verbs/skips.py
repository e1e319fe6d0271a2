"""Why verbs items skip where the fabric kind or this host's programs already tell, one text
per cause, given both by the fixtures when they start and by the forecast (the plugin's
pytest_hpccomm_foreseen_skip, read by `hpccomm doctor`). What only the opened device says
(atomics, the active MTU) shows in a real run.

Items that cannot run on a kind of device declare it (marks.py: verbs_not_on); the forecast
foresees that skip from the fabric kind."""

from __future__ import annotations

import errno
import shutil
from typing import Any

import pytest

from pytest_hpccomm.stacks.verbs.driver import Connection, VerbsCallError, VerbsPair
from pytest_hpccomm.stacks.verbs.marks import device_kinds, not_on_reason
from pytest_hpccomm.stacks.verbs.perf import Benchmark
from pytest_hpccomm.stacks.verbs.perftest import missing

MANUAL_ONLY_IWARP = (
    "iWARP QPs reach RTR and RTS only through the connection manager "
    "(test_cm_connection_reaches_rts covers them)"
)
FI_INFO = "fi_info"


def fi_info_missing() -> str | None:
    """Why libfabric's endpoint on the device cannot be asked here, or None."""
    if shutil.which(FI_INFO):
        return None
    return f"{FI_INFO} not found (Debian: libfabric-bin): libfabric's endpoint is not checked"


def connect_extended(pair: VerbsPair, qp_type: str, send_ops: list[str], **qp: Any) -> Connection:
    """A connected pair of extended QPs (ibv_create_qp_ex with the builders `send_ops` names;
    []: all the QP type has); a skip naming the device where its provider creates none
    (EOPNOTSUPP, as upstream's tests skip)."""
    try:
        return pair.connect(qp_type, ex=True, send_ops=send_ops, **qp)
    except VerbsCallError as exc:
        if f"errno {errno.EOPNOTSUPP}" not in exc.message:
            raise
        pytest.skip(f"{pair.info['device']}'s provider creates no extended QP: {exc.message}")


def foreseen(item: pytest.Item, params: dict[str, Any], iwarp: bool) -> str | None:
    """The skip a verbs item would make once its fixtures start, foreseen from the fabric
    kind (`iwarp`) and this host's PATH, or None."""
    fixtures = getattr(item, "fixturenames", ())
    declared = not_on_reason(item, device_kinds(iwarp))
    if declared:
        return declared
    bench = params.get("bench")
    if isinstance(bench, Benchmark):
        # atomics are the device's to say: assumed present here
        return bench.needs({"iwarp": iwarp, "atomic_cap": True})
    if "verbs_fi_info" in fixtures:
        return fi_info_missing()
    program = params.get("program")
    if isinstance(program, str) and "verbs_perftest_program" in fixtures:
        return missing(program)
    return None
