from __future__ import annotations

import xml.etree.ElementTree as ET

from pytest_hpccomm.baselines.verdict import Outcome
from pytest_hpccomm.report.junit import PROPERTY_NAMES, junit_properties


def test_properties_carry_the_verdict_numbers(result) -> None:
    r = result(samples=(2.0, 2.5, 3.0), baseline=2.0, outcome=Outcome.REGRESSION)
    props = junit_properties(r)
    assert [k for k, _ in props] == list(PROPERTY_NAMES)
    d = dict(props)
    assert d["metric"] == "latency" and d["unit"] == "us"
    assert d["median"] == "2.5" and d["baseline_median"] == "2" and d["ratio"] == "1.25"
    assert d["ci"] == "[1.2125, 1.2875]" and d["p_value"] == "0.004"
    assert d["verdict"] == "regression" and d["n"] == "3"
    assert all(isinstance(v, str) for _, v in props)


def test_missing_numbers_are_empty_and_prefix_applies(result) -> None:
    r = result(baseline=None, outcome=Outcome.NEW, metric="")
    d = dict(junit_properties(r, prefix="size=8."))
    assert d["size=8.baseline_median"] == "" and d["size=8.ratio"] == ""
    assert d["size=8.ci"] == "" and d["size=8.p_value"] == ""
    assert d["size=8.metric"] == "osu_latency"  # metric falls back to the benchmark name
    assert d["size=8.verdict"] == "new"


def test_junitxml_carries_the_properties(pytester) -> None:
    pytester.makepyfile("""
        from pytest_hpccomm.baselines.verdict import Outcome, Verdict
        from pytest_hpccomm.measure.measurement import Direction, Measurement
        from pytest_hpccomm.baselines.result import RunResult
        from pytest_hpccomm.report.junit import junit_properties

        def test_perf(record_property):
            m = Measurement("mpi", "osu_latency", {"size": 8}, (1.0, 1.2, 1.1), "us",
                            Direction.LOWER_IS_BETTER, metric="latency")
            v = Verdict(Outcome.PASS, 1.1, 1.09, 1.1 / 1.09, 0.98, 1.04, 0.3, 0.05, "ok")
            for name, value in junit_properties(RunResult("n", "s", "f", m, v, {})):
                record_property(name, value)
    """)
    res = pytester.runpytest("-p", "no:hpccomm", "--junitxml=junit.xml")
    res.assert_outcomes(passed=1)
    root = ET.parse(pytester.path / "junit.xml").getroot()
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["median"] == "1.1" and props["baseline_median"] == "1.09"
    assert props["verdict"] == "pass" and props["n"] == "3" and props["ci"] == "[0.98, 1.04]"
