"""The ULFM survivors' reports read from mpirun's stdout whatever its line ends: two reports
were seen on one line (the old line-by-line reader failed with "Extra data")."""

from __future__ import annotations

import json

from pytest_hpccomm.stacks.mpi.conformance import ulfm_reports
from pytest_hpccomm.stacks.mpi.wire import ULFM_MARK

A = {"rank": 0, "victim": 2, "message": "MPI_ERR_PROC_FAILED: Process Failure"}
B = {"rank": 1, "victim": 2, "shrunk_order": [0, 1]}


def test_reports_on_their_own_lines_and_joined_on_one() -> None:
    own = f"noise\n{ULFM_MARK} {json.dumps(A)}\n{ULFM_MARK} {json.dumps(B)}\n"
    joined = f"noise {ULFM_MARK} {json.dumps(A)}{ULFM_MARK} {json.dumps(B)}\nmore noise\n"
    assert ulfm_reports(own) == [A, B]
    assert ulfm_reports(joined) == [A, B]
    assert ulfm_reports("no report at all\n") == []
