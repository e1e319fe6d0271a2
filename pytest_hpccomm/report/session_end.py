"""Session-end outputs: baselines, JSON results (ours and pytest-benchmark's), markdown, HTML,
history. Everything here runs once, after the last test, from plugin.pytest_sessionfinish."""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm import retries
from pytest_hpccomm.baselines import adaptive, canary, gate
from pytest_hpccomm.baselines.result import RunResult
from pytest_hpccomm.judging import BaselineJudge
from pytest_hpccomm.report.stack_time import StackTimes
from pytest_hpccomm.session import HpcSession


def session_info(hpc: HpcSession, started: float) -> dict[str, Any]:
    return {
        "system": hpc.system,
        "fabric": hpc.fabric_kind,
        "profile": hpc.cfg.profile,
        "started": started,
        "finished": time.time(),
        "fingerprint": hpc.fingerprint,
        "inject_slowdown": hpc.cfg.inject_slowdown,
        "tolerance": hpc.cfg.tolerance,
        "launcher": hpc.cfg.launcher,
        "retries": retries.counts(hpc.retries_mark),
        # the markdown summary names where the rest is
        **{
            k: Path(v).name
            for k, v in (("report", hpc.cfg.report), ("results", hpc.cfg.results))
            if v
        },
        **(
            {
                "paired": {
                    stack: {"base": hpc.cfg.base[stack], "candidate": impl}
                    for stack, impl in sorted(hpc.cfg.candidate.items())
                },
                "ab_rounds": hpc.cfg.ab_rounds,
                **({"reference": dict(hpc.cfg.reference)} if hpc.cfg.reference else {}),
            }
            if hpc.cfg.candidate
            else {}
        ),
    }


def gate_verdict(
    config: pytest.Config, hpc: HpcSession, judge: BaselineJudge
) -> tuple[gate.GateStatus, list[str], bool]:
    """The gate status, its lines for the terminal (first), and whether the session fails for
    them: --hpc-require-armed not met, or a paired run / a run against an existing baseline
    set that judged nothing. The same status goes to JUnit's global properties."""
    status = gate.gate_status(hpc.results, paired=bool(hpc.cfg.candidate))
    if not status.total.points:
        return status, [], False
    recording = hpc.cfg.update_baselines != "none"  # a set being taken is not yet a gate
    against_set = not recording and any(
        judge.store.path(hpc.system, hpc.fabric_kind, stack).exists() for stack in status.stacks
    )
    failures = [
        line
        for line in (
            gate.required_armed(status, 0.0 if recording else hpc.cfg.require_armed),
            gate.nothing_judged(status, bool(hpc.cfg.candidate), against_set),
        )
        if line
    ]
    lines = [gate.status_line(status), *gate.stack_lines(status), *gate.hints(status), *failures]
    _junit_properties(config, status, failures)
    return status, lines, bool(failures)


def _junit_properties(config: pytest.Config, status: gate.GateStatus, failures: list[str]) -> None:
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    xml.add_global_property("hpccomm_gate", gate.status_line(status))
    xml.add_global_property("hpccomm_gate_points", str(status.total.points))
    xml.add_global_property("hpccomm_gate_armed", str(status.total.armed))
    for line in failures:
        xml.add_global_property("hpccomm_gate_failed", line)


def canary_report(config: pytest.Config, hpc: HpcSession) -> list[str]:
    """Under the canary: whether its stretch could show beyond the band at each point judged
    against a baseline (baselines/canary.py), for the terminal after the gate's lines; the
    first line also goes to JUnit's global properties (hpccomm_canary)."""
    if hpc.cfg.inject_slowdown <= 1.0:
        return []
    lines = canary.canary_lines(hpc.results, hpc.cfg.inject_slowdown)
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is not None and lines:
        xml.add_global_property("hpccomm_canary", lines[0])
    return lines


def retry_properties(config: pytest.Config, hpc: HpcSession) -> None:
    """The session's retries per named cause (retries.py) in JUnit's global properties:
    hpccomm_retries (the total, also 0) and hpccomm_retries_<cause>."""
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    got = retries.counts(hpc.retries_mark)
    xml.add_global_property("hpccomm_retries", str(sum(got.values())))
    for cause, n in got.items():
        xml.add_global_property(retries.property_name(cause), str(n))


def benchmark_json_path(results: Path) -> Path:
    """pytest-benchmark's format beside ours: `pytest-benchmark compare` reads it."""
    return results.with_name(results.stem + ".pytest-benchmark.json")


def write_session_outputs(
    config: pytest.Config,
    hpc: HpcSession,
    judge: BaselineJudge,
    started: float,
    times: StackTimes | None = None,
    status: gate.GateStatus | None = None,
) -> list[str]:
    """Write every requested output; returns lines for the terminal summary. `status`: the
    gate's (gate_verdict), carried into the results JSON and the reports."""
    lines: list[str] = []
    info = session_info(hpc, started)
    if times is not None and times.items:
        info["stack_seconds"] = times.as_dict()  # the suite's own cost, in the results JSON
    results = list(hpc.results)
    if status is not None and status.total.points:
        info["gate"] = status.to_json()
    grown = adaptive.session_cost(r.measurement.extra for r in results)
    if grown:
        lines.append(grown)
    if hpc.cfg.update_baselines != "none":
        for path, count in judge.update_baselines().items():
            lines.append(f"baselines: wrote {count} entries to {path}")
        if judge.close_sessions:
            lines.append(judge.close_sessions)
        if judge.refused:
            lines.append(
                f"baselines: none written: {judge.refused.removeprefix('informational: ')}"
                f" (record this host's set under another --hpc-system)"
            )
    host = judge.host_summary()
    if host:
        lines.append(host)
        info["host_probe"] = {"rates": judge.host().to_json(), "summary": host}
    if hpc.cfg.results is not None:
        from pytest_hpccomm.report.results_json import write_pytest_benchmark_json, write_results

        write_results(hpc.cfg.results, results, info)
        bench = benchmark_json_path(hpc.cfg.results)
        write_pytest_benchmark_json(bench, results, None, None)
        lines.append(f"results: {hpc.cfg.results} (pytest-benchmark format: {bench})")
    markdown = hpc.cfg.markdown or _step_summary()
    if markdown is not None and results:
        from pytest_hpccomm.report.markdown import markdown_summary

        text = markdown_summary(results, info)
        mode = "a" if markdown == _step_summary() else "w"  # the step summary is shared
        markdown.parent.mkdir(parents=True, exist_ok=True)
        with open(markdown, mode, encoding="utf-8") as fh:
            fh.write(text)
        lines.append(f"markdown summary: {markdown}")
    if hpc.cfg.report is not None:
        from pytest_hpccomm.report.html import write_html_report

        write_html_report(hpc.cfg.report, results, info)
        lines.append(f"HTML report: {hpc.cfg.report}")
    if hpc.cfg.history is not None and results:
        lines += _record_history(hpc, results, started)
    if hpc.cfg.screenshots:
        lines += _screenshots(hpc, results)
    config.hook.pytest_hpccomm_report(config=config, results=results, session_info=info)
    return lines


def _record_history(hpc: HpcSession, results: list[RunResult], started: float) -> list[str]:
    """Into the history: stored-mode results (not under the canary, which would stretch the
    system's own series) and the pairs of a nightly against a reference (--hpc-reference;
    the canary stretches their candidate only, as a change of its code would: recorded, and
    named in the candidate's fingerprint). A merge request's A/B pairs (--hpc-base and
    --hpc-candidate) are two builds side by side, not this system's series."""
    canary = hpc.cfg.inject_slowdown > 1.0
    kept: list[RunResult] = []
    skipped: set[str] = set()
    for r in results:
        stack = r.measurement.stack
        if stack in hpc.cfg.reference:
            named = {"canary": f"{hpc.cfg.inject_slowdown:g}x"} if canary else {}
            kept.append(dataclasses.replace(r, fingerprint={**r.fingerprint, **named}))
        elif stack in hpc.cfg.candidate:
            skipped.add("paired A/B run with --hpc-candidate")
        elif canary:
            skipped.add("canary run with --hpc-inject-slowdown")
        else:
            kept.append(r)
    lines = [f"history: not recorded ({why})" for why in sorted(skipped)]
    if kept and hpc.cfg.history is not None:
        from pytest_hpccomm.baselines.history import HistoryStore

        run_id = uuid.uuid4().hex[:12]
        HistoryStore(hpc.cfg.history).append(
            kept, run_id=run_id, timestamp=started, commit=os.environ.get("GITHUB_SHA")
        )
        refs = ", ".join(f"{k}={v}" for k, v in sorted(hpc.cfg.reference.items()))
        against = f" (paired ratios against the reference {refs})" if refs else ""
        lines.append(f"history: run {run_id} appended to {hpc.cfg.history}{against}")
    return lines


def ratio_gate(config: pytest.Config, hpc: HpcSession) -> tuple[list[str], bool]:
    """--hpc-ratio-gate K, after the history holds tonight's run: the ratio gate
    (baselines/ratio_gate.py) over the series of each of this run's points measured against
    the reference. Returns the terminal lines and whether the run fails for them; the same
    lines go to JUnit's global properties and the markdown summary."""
    history = hpc.cfg.history
    if not hpc.cfg.ratio_gate or not hpc.results or history is None or not history.exists():
        return [], False  # nothing recorded: no series to judge
    from pytest_hpccomm.baselines.history import HistoryStore
    from pytest_hpccomm.baselines.ratio_gate import judge_series, step_line
    from pytest_hpccomm.baselines.verdict import describe
    from pytest_hpccomm.measure.measurement import param_key

    store = HistoryStore(history)
    fired: list[str] = []
    judged = short = 0
    seen: set[tuple[str, ...]] = set()
    for r in hpc.results:
        m = r.measurement
        key = (r.system, r.fabric, m.stack, m.benchmark, param_key(m.params))
        if m.stack not in hpc.cfg.reference or key in seen:
            continue
        seen.add(key)
        gate = judge_series(store.ratio_records(*key), r.verdict.tolerance, last=hpc.cfg.ratio_gate)
        if gate.reason:
            short += 1
            continue
        judged += 1
        name = f"{m.stack} {describe(m.benchmark, m.params)}"
        fired += [f"  {name}: {step_line(s)}" for s in gate.fired]
    head = (
        f"hpccomm ratio gate: {len(fired)} failing step(s) in {judged} series judged "
        f"(a step worse than the tolerance that started in the last {hpc.cfg.ratio_gate} "
        f"runs); {short} series too short to judge yet"
    )
    lines = [head, *fired]
    _ratio_gate_outputs(config, hpc, lines)
    return lines, bool(fired)


def _ratio_gate_outputs(config: pytest.Config, hpc: HpcSession, lines: list[str]) -> None:
    from _pytest.junitxml import xml_key

    xml = config.stash.get(xml_key, None)
    if xml is not None:
        xml.add_global_property("hpccomm_ratio_gate", lines[0])
        for line in lines[1:]:
            xml.add_global_property("hpccomm_ratio_gate_failed", line.strip())
    markdown = hpc.cfg.markdown or _step_summary()
    if markdown is not None and markdown.exists():
        with open(markdown, "a", encoding="utf-8") as fh:
            fh.write("\n" + "\n".join(f"    {line}" for line in lines) + "\n")


def trends_path(report: Path) -> Path:
    return report.with_name("trends.html" if report.name != "trends.html" else "history.html")


def _screenshots(hpc: HpcSession, results: list[RunResult]) -> list[str]:
    """--hpc-screenshots: beside the HTML report, the trends page of this system's history,
    then each page screenshotted by headless Chromium and checked (report/screenshot.py). A
    problem is a line of the summary, not a failed session: the tests were judged already."""
    report = hpc.cfg.report
    if report is None:
        return ["screenshots: none taken (they are of the HTML report: add --hpc-report PATH)"]
    from pytest_hpccomm.report.html import figure_count
    from pytest_hpccomm.report.screenshot import ABSENT, find_chromium, take_screenshot

    lines: list[str] = []
    pages = [(report, figure_count(results))]
    history = hpc.cfg.history
    if history is not None and history.exists():
        from pytest_hpccomm.baselines.history import HistoryStore
        from pytest_hpccomm.report.trends import write_trends_page

        store = HistoryStore(history)
        try:
            page = write_trends_page(
                trends_path(report),
                store,
                store.keys(system=hpc.system),
                filters=f"system={hpc.system}",
            )
        except RuntimeError as exc:  # Otava missing, or a history of another schema
            lines.append(f"trends page: not written: {exc}")
        else:
            lines.append(
                f"trends page: {page.path} ({len(page.shown)} of {page.matched} series,"
                f" {page.change_count} change point(s))"
            )
            pages.append((page.path, len(page.shown)))
    if find_chromium() is None:
        return lines + [f"screenshots: not taken: {ABSENT}"]
    for path, plots in pages:
        lines.append(
            take_screenshot(path, path.with_suffix(".png"), expect_images=plots).describe()
        )
    return lines


def _step_summary() -> Path | None:
    value = os.environ.get("GITHUB_STEP_SUMMARY")
    return Path(value) if value else None
