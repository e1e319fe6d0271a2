"""A judged result: one measurement of this session with its verdict and where it ran.

What reports and the history store consume. It lives with the verdicts, not with the
measurement record: measure/ knows nothing of judging (an import never goes up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pytest_hpccomm.baselines.verdict import Verdict
from pytest_hpccomm.measure.measurement import Measurement

FUNCTIONAL = "functional"  # measurement.extra key of a result reported without a verdict: why
# a paired A/B run: the candidate result's measurement.extra key holding the base side
# (implementation, samples, job_medians, fingerprint) ...
PAIRED_BASE = "paired_base"
# ... and the base record's extra key, until judged, holding what only its peers know
BASE_FINGERPRINT = "base_fingerprint"


@dataclass(frozen=True)
class RunResult:
    """One judged measurement of this session: what reports and the history store consume."""

    nodeid: str
    system: str
    fabric: str
    measurement: Measurement
    verdict: Verdict
    fingerprint: Mapping[str, Any]
