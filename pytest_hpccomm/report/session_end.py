"""Session-end outputs: baselines, JSON results (ours and pytest-benchmark's), markdown, HTML,
history. Everything here runs once, after the last test, from plugin.pytest_sessionfinish."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from pytest_hpccomm import retries
from pytest_hpccomm.baselines import adaptive, gate
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
        if hpc.cfg.inject_slowdown > 1.0:
            lines.append("history: not recorded (canary run with --hpc-inject-slowdown)")
        elif hpc.cfg.candidate:  # two builds side by side, not this system's own series
            lines.append("history: not recorded (paired A/B run with --hpc-candidate)")
        else:
            from pytest_hpccomm.baselines.history import HistoryStore

            run_id = uuid.uuid4().hex[:12]
            HistoryStore(hpc.cfg.history).append(
                results, run_id=run_id, timestamp=started, commit=os.environ.get("GITHUB_SHA")
            )
            lines.append(f"history: run {run_id} appended to {hpc.cfg.history}")
    if hpc.cfg.screenshots:
        lines += _screenshots(hpc, results)
    config.hook.pytest_hpccomm_report(config=config, results=results, session_info=info)
    return lines


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
