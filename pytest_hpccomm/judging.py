"""Judge each measurement against its baseline as it is recorded; update baselines at the end.

Baselines are read once per (stack) file per session and written only at session end, only
with --hpc-update-baselines, and never from a canary run (--hpc-inject-slowdown > 1), so a
gate can never learn its own injected regression.

Stored verdicts count only on the baseline's machine type (fingerprint); elsewhere they are
informational. A host that runs the reference probe outside its band around the set's sessions
(host_probes.py) widens the band on the side its speed explains (verdict.host_band): it costs
the gate power, which the gate status shows, and never switches it off; an update from such a
host writes nothing.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from pytest_hpccomm import fingerprint as fp
from pytest_hpccomm.baselines import adaptive, host_probes
from pytest_hpccomm.baselines.gate import MACHINE_TYPE_NOTE
from pytest_hpccomm.baselines.paired import job_medians, judge_paired
from pytest_hpccomm.baselines.result import BASE_FINGERPRINT, FUNCTIONAL, PAIRED_BASE, RunResult
from pytest_hpccomm.baselines.store import (
    MAX_SESSIONS,
    BaselineEntry,
    BaselineStore,
    JsonBaselineStore,
    fingerprint_diff,
    shared_cores,
)
from pytest_hpccomm.baselines.verdict import (
    Outcome,
    Verdict,
    describe,
    not_evidence,
    temper_for_shared_cores,
    typical_sessions_sd,
)
from pytest_hpccomm.baselines.verdict import judge as verdict_of
from pytest_hpccomm.measure import host_speed
from pytest_hpccomm.measure.host_speed import HostSpeed
from pytest_hpccomm.measure.measurement import Measurement
from pytest_hpccomm.session import HpcSession

# Which outcomes each update mode writes: "new" = new and passing results (a regression or a
# too-noisy run must not silently become the reference), "all" = everything.
WRITTEN = {
    "none": frozenset(),
    "new": frozenset({Outcome.NEW, Outcome.PASS, Outcome.IMPROVEMENT}),
    "all": frozenset(Outcome),
}


class BaselineJudge:
    def __init__(
        self,
        hpc: HpcSession,
        store: BaselineStore | None = None,
        probe: Callable[[], HostSpeed] = host_speed.probe,
    ) -> None:
        self.hpc = hpc
        self.store = store or JsonBaselineStore(Path(hpc.cfg.baselines))
        self._probe = probe  # the host's reference probe, taken once, when first needed
        self._host: HostSpeed | None = None
        self._recorded: list[HostSpeed] | None = None  # the set's sessions' probes
        self._other: str | None = None  # other_host(), once worked out
        self._shift = 1.0  # host_shift(), worked out with other_host()
        self.refused = ""  # why update_baselines wrote nothing
        self.close_sessions = ""  # update_baselines' warning: this session is close to the last
        self._loaded: dict[str, dict[str, BaselineEntry]] = {}
        self._family_sd: dict[str, dict[tuple[str, str], float | None]] = {}
        # the last verdict.judge per point and what it was judged on: undecided() asks for it
        # before judge() records it, and its bootstrap is 10 ms a point (1,247 points here)
        self._judged: dict[tuple[str, str], tuple[tuple[Any, ...], Verdict]] = {}

    def baseline(self, m: Measurement) -> BaselineEntry | None:
        """BaselineFileError propagates: a malformed file fails the test, naming the file."""
        if m.stack not in self._loaded:
            self._loaded[m.stack] = self.store.load(self.hpc.system, self.hpc.fabric_kind, m.stack)
        return self._loaded[m.stack].get(m.key)

    def family_sd(self, m: Measurement) -> float | None:
        """The spread between sessions typical of `m`'s family (its benchmark and metric) in
        its stack's baselines (verdict.typical_sessions_sd)."""
        if m.stack not in self._family_sd:
            self.baseline(m)
            families: dict[tuple[str, str], list[tuple[float, ...]]] = defaultdict(list)
            for entry in self._loaded[m.stack].values():
                families[(entry.benchmark, entry.metric)].append(entry.session_medians)
            self._family_sd[m.stack] = {
                f: typical_sessions_sd(levels) for f, levels in families.items()
            }
        return self._family_sd[m.stack].get((m.benchmark, m.metric))

    def judge(
        self,
        nodeid: str,
        m: Measurement,
        runtime_fingerprint: Mapping[str, Any] | None = None,
        base: Measurement | None = None,
    ) -> RunResult:
        """Judge `m`; `runtime_fingerprint` adds what only the peers know (MPI library, hosts).
        With `base` (a paired A/B run: the same point measured by the base build in this
        session) `m` is the candidate and is judged against it, not against a stored baseline."""
        finger = self._fingerprint(runtime_fingerprint)
        if base is not None:
            return self._judge_paired(nodeid, m, base, finger)
        verdict = self.stored_verdict(m, finger)
        result = RunResult(
            nodeid=nodeid,
            system=self.hpc.system,
            fabric=self.hpc.fabric_kind,
            measurement=m,
            verdict=verdict,
            fingerprint=finger,
        )
        self.hpc.results.append(result)
        return result

    def functional(
        self,
        nodeid: str,
        m: Measurement,
        why: str,
        runtime_fingerprint: Mapping[str, Any] | None = None,
        base: Measurement | None = None,
    ) -> RunResult:
        """`m` reported without a verdict (e.g. timed on an emulated device, where timings say
        nothing about a fabric): outcome NEW with `why`, never written as a baseline. With
        `base` (a paired run's base side of the same point) its median and the ratio are
        reported beside it: both sides ran, neither is judged."""
        med = float(np.median(m.samples))
        base_med, ratio, against = None, None, ""
        if base is not None:
            base_med = float(np.median(base.samples))
            ratio = med / base_med if base_med else None
            against = f", base median {base_med:.4g} (n={len(base.samples)})"
        verdict = Verdict(
            Outcome.NEW,
            med,
            base_med,
            ratio,
            None,
            None,
            None,
            m.tolerance or self.hpc.cfg.tolerance,
            f"function only: {describe(m.benchmark, m.params)}: median "
            f"{med:.4g} {m.unit} (n={len(m.samples)}){against}, no verdict: {why}",
            reason="function only",
            n_current=len(m.samples),
            n_baseline=None if base is None else len(base.samples),
        )
        result = RunResult(
            nodeid=nodeid,
            system=self.hpc.system,
            fabric=self.hpc.fabric_kind,
            measurement=dataclasses.replace(m, extra={**m.extra, FUNCTIONAL: why}),
            verdict=verdict,
            fingerprint=self._fingerprint(runtime_fingerprint),
        )
        self.hpc.results.append(result)
        return result

    def _fingerprint(self, runtime: Mapping[str, Any] | None) -> dict[str, Any]:
        return fp.merge([self.hpc.fingerprint, dict(runtime or {})])

    def stored_verdict(self, m: Measurement, finger: Mapping[str, Any]) -> Verdict:
        """`m` against its stored baseline, tempered for shared cores and for a baseline from
        another machine type (informational); nothing is recorded."""
        stored = self.baseline(m)
        verdict = temper_for_shared_cores(
            self._verdict_of(m, stored),
            shared_cores(m.extra),
            "" if stored is None else shared_cores(stored.summary),
        )
        notes = [adaptive.describe(m.extra)]
        if stored is not None:
            machine = fingerprint_diff(stored.fingerprint, finger, fp.MACHINE_TYPE_FIELDS)
            if why := self._informational(stored, finger, machine):
                verdict = not_evidence(verdict, why)
            diff = [d for d in fingerprint_diff(stored.fingerprint, finger) if d not in machine]
            if diff:
                notes.append(f"baseline fingerprint differs: {_shown(diff)}")
        for note in filter(None, notes):
            verdict = dataclasses.replace(verdict, message=f"{verdict.message} [{note}]")
        return verdict

    def _informational(
        self,
        stored: BaselineEntry,
        finger: Mapping[str, Any],
        machine: list[tuple[str, Any, Any]] | None = None,
    ) -> str:
        """Why a verdict against `stored` claims nothing ("" when it counts): the baseline is
        from another machine type (e.g. the repo's CI set judged on a laptop). `machine`: the
        machine-type fields that differ, when the caller has them already."""
        if machine is None:
            machine = fingerprint_diff(stored.fingerprint, finger, fp.MACHINE_TYPE_FIELDS)
        if machine:
            return f"{MACHINE_TYPE_NOTE} ({_shown(machine)})"
        return ""

    # -- the host's speed against the set's (baselines/host_probes.py) -------------------------
    def host(self) -> HostSpeed:
        if self._host is None:
            self._host = self._probe()
        return self._host

    def recorded_hosts(self) -> list[HostSpeed]:
        """The set's sessions' probes taken by this probe's method (host_speed.METHOD): a
        reading of another method is no measure of this host against the set's."""
        if self._recorded is None:
            self._recorded = [
                p
                for _, p, method in host_probes.load(self._host_file())
                if method == host_speed.METHOD
            ]
        return self._recorded

    def host_shift(self) -> float:
        """This host's probe speed against the set's sessions' when it lies outside the
        probe's band (host_probes.band_for), else 1.0: the same host as far as the probe can
        tell. It widens the band on the side it explains (verdict.host_band)."""
        self.other_host()  # takes the probe: the results keep this host's speed
        return self._shift

    def _host_file(self) -> Path:
        return self.store.host_file(self.hpc.system, self.hpc.fabric_kind)

    def other_host(self) -> str:
        """Why this host is not the set's as far as the probe tells ("" when it is): it runs
        the reference probe outside the band around the set's sessions. A set recorded before
        the probe (or by another probe method) has no host to compare with: "" (the probe is
        still taken: the results record this host's speed). Worked out once: its inputs are
        fixed once read."""
        if self._other is None:
            recorded, host = self.recorded_hosts(), self.host()
            band = host_probes.band_for(host)
            # a reading another process shared the cores with says nothing of this host
            self._other = (
                ""
                if not recorded or host.disturbed or host_probes.within(host, recorded, band)
                else (
                    f"this host runs the reference probe at "
                    f"{host_probes.describe(host, recorded)}, outside ±{band * 100:.3g}%: "
                    "the set was recorded on a host of another speed"
                )
            )
            if self._other:
                self._shift, _ = host_speed.speed_ratio(host, host_speed.typical(recorded))
        return self._other

    def host_summary(self) -> str:
        """One line for the terminal and the session record ("" if the probe never ran)."""
        if self._host is None:
            return ""
        rates = ", ".join(
            f"{k} {v:.4g} {host_speed.UNITS.get(k, '')}".rstrip()
            for k, v in self._host.rates.items()
        )
        recorded = self._recorded or []
        where = (
            f"; {host_probes.describe(self._host, recorded)}"
            if recorded
            else "; the baseline set has no probe (host speed unknown)"
        )
        verdicts = (
            " (stored verdicts: the band widened on the side the host's speed explains)"
            if recorded and self.other_host()
            else ""
        )
        disturbed = f" [not used: {self._host.disturbed}]" if self._host.disturbed else ""
        band = host_probes.band_for(self._host)
        noisy = (
            f"; its band ±{band * 100:.3g}%, widened from ±{host_probes.HOST_BAND * 100:g}%"
            " by this reading's own noise"
            if recorded and band > host_probes.HOST_BAND
            else ""
        )
        return f"host probe: {rates}{where}{noisy}{verdicts}{disturbed}"

    def _verdict_of(self, m: Measurement, stored: BaselineEntry | None) -> Verdict:
        """verdict.judge of `m` against `stored`, once per point and samples (the stored
        entries are read once a session)."""
        inputs = (
            m.samples,
            tuple(m.extra.get("job_sizes") or ()),
            m.tolerance,
            m.unit,
            m.direction,
        )
        got = self._judged.get((m.stack, m.key))
        if got is None or got[0] != inputs:
            got = (
                inputs,
                verdict_of(
                    m,
                    stored,
                    tolerance=self.hpc.cfg.tolerance,
                    family_sd=self.family_sd(m),
                    host_shift=self.host_shift() if stored else 1.0,
                ),
            )
            self._judged[(m.stack, m.key)] = got
        return got[1]

    def undecided(
        self, m: Measurement, runtime_fingerprint: Mapping[str, Any] | None = None
    ) -> bool:
        """Whether more jobs could decide `m`'s stored-mode verdict (adaptive.py); never in
        a paired A/B run, whose rounds are fixed, nor against a baseline from another machine
        type, whose verdicts are informational."""
        if self.hpc.cfg.paired(m.stack) is not None:
            return False
        finger = self._fingerprint(runtime_fingerprint)
        stored = self.baseline(m)
        if stored is not None and self._informational(stored, finger):
            return False  # informational whatever the jobs say: none is added for it
        return adaptive.undecided(self.stored_verdict(m, finger), self.hpc.cfg.repeat_scope)

    def _judge_paired(
        self, nodeid: str, m: Measurement, base: Measurement, finger: dict[str, Any]
    ) -> RunResult:
        sides = self.hpc.cfg.paired(m.stack)
        if sides is None:
            raise ValueError(
                f"a base measurement for stack {m.stack!r}, which this session "
                "does not pair (--hpc-base/--hpc-candidate)"
            )
        verdict = temper_for_shared_cores(
            judge_paired(m, base, self.hpc.cfg.tolerance, labels=(sides[1], sides[0])),
            shared_cores(m.extra),
            shared_cores(base.extra),
        )
        extra = dict(m.extra, job_medians=job_medians(m))  # the rounds paired, both sides
        extra[PAIRED_BASE] = {
            "implementation": sides[0],
            "samples": list(base.samples),
            "job_medians": job_medians(base),
            "fingerprint": dict(base.extra.get(BASE_FINGERPRINT) or {}),
        }
        finger = dict(finger, paired_base=sides[0], paired_candidate=sides[1])
        result = RunResult(
            nodeid=nodeid,
            system=self.hpc.system,
            fabric=self.hpc.fabric_kind,
            measurement=dataclasses.replace(m, extra=extra),
            verdict=verdict,
            fingerprint=finger,
        )
        self.hpc.results.append(result)
        return result

    def update_baselines(self) -> dict[Path, int]:
        """Write what the update mode selects; returns entries written per file."""
        mode = self.hpc.cfg.update_baselines
        chosen: dict[str, list[RunResult]] = defaultdict(list)
        for r in self.hpc.results:
            # "new" never makes a run on shared cores the reference; "all" takes it, marked
            if mode == "new" and shared_cores(r.measurement.extra):
                continue
            if FUNCTIONAL in r.measurement.extra:  # no verdict, no reference
                continue
            # a set still short of its sessions claims nothing: "new" takes a run whose jobs
            # read new, pass or better, as it would once the set has them
            if r.verdict.outcome in WRITTEN[mode] or r.verdict.unclaimed in WRITTEN[mode]:
                chosen[r.measurement.stack].append(r)
        written: dict[Path, int] = {}
        if not chosen:
            return written
        self.refused = self.other_host()
        if self.refused:  # another host's numbers would pass for the set's spread
            return written
        now = datetime.now(timezone.utc)
        stamp = now.isoformat(timespec="seconds")
        self.close_sessions = _close_to_last(self._host_file(), now)
        if not self.host().disturbed:  # a reading of the cores shared is no host's speed
            host_probes.record(self._host_file(), self.host(), stamp, MAX_SESSIONS)
        for stack, results in sorted(chosen.items()):
            # each entry keeps the fingerprint it was measured with: one stack file holds
            # several runtimes (Open MPI and MPICH, loopback and netns), and a merged
            # fingerprint would tell an MPICH result its baseline came from Open MPI
            by_finger: dict[str, list[RunResult]] = defaultdict(list)
            for r in results:
                by_finger[json.dumps(r.fingerprint, sort_keys=True, default=str)].append(r)
            for group in by_finger.values():
                self.store.update(
                    self.hpc.system,
                    self.hpc.fabric_kind,
                    stack,
                    [r.measurement for r in group],
                    fp.merge([dict(group[0].fingerprint)]),
                    timestamp=stamp,
                )
            written[self.store.path(self.hpc.system, self.hpc.fabric_kind, stack)] = len(results)
        return written


# Sessions of a set closer than this share the host's state: three sessions of the main job
# taken within 40 minutes agreed by chance where a fourth, an hour later, ran 3-6 % slower on
# every stack, so a set taken in one sitting understates the drift a later run meets.
SESSION_SPACING = timedelta(hours=1)


def _close_to_last(host_file: Path, now: datetime) -> str:
    """A warning when the set's last session was taken less than SESSION_SPACING ago."""
    try:
        last = max(
            (datetime.fromisoformat(t) for t, _, _ in host_probes.load(host_file)), default=None
        )
    except (host_probes.HostProbesError, ValueError):
        return ""
    if last is None or now - last >= SESSION_SPACING:
        return ""
    minutes = (now - last).total_seconds() / 60
    return (
        f"baselines: this session follows the set's last by {minutes:.0f} min: sessions "
        f"closer than {SESSION_SPACING.total_seconds() / 3600:g} h share the host's state and "
        "understate the drift a later run meets; take the next one later"
    )


def _shown(diff: list[tuple[str, Any, Any]], most: int = 4) -> str:
    shown = "; ".join(f"{k}: {old!r} -> {new!r}" for k, old, new in diff[:most])
    return shown + (f" (+{len(diff) - most} more)" if len(diff) > most else "")
